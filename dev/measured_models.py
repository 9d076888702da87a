"""Dev-only: the model dimensions the measuring scripts in ../shared/groundtruth build.

``measure.py`` and ``ds_measure.py`` each hold a ``MODELS`` table — the released checkpoints'
dimensions, which the H200 records were measured with — inside scripts that need CUDA to run. The
dev scripts that record the same models on the CPU (``trace_allocations.py``,
``trace_deepspeed.py``) and the catalog builder read the table itself, not a copy of it.
"""

from __future__ import annotations

from pathlib import Path

GROUNDTRUTH = Path(__file__).resolve().parents[2] / "shared" / "groundtruth"
ENDS = {"measure.py": "SMALL = [", "ds_measure.py": "rec = dict("}     # the statement after the table


def models(script: str = "measure.py", groundtruth: Path = GROUNDTRUTH) -> dict:
    """The script's ``MODELS``: name -> what it builds (measure.py: ``(model_type, kwargs)``)."""
    source = (groundtruth / script).read_text()
    scope: dict = {}
    exec(source[source.index("MODELS = {"):source.index(ENDS[script])], scope)
    return scope["MODELS"]
