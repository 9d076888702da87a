"""Files the training frameworks ship that recipes name by their path in the framework's tree:
LLaMA-Factory's ``examples/deepspeed/ds_z3_config.json`` and axolotl's
``deepspeed_configs/zero3_bf16.json`` are named by recipes of repositories that do not copy them
(the user runs from a clone of the framework, or ``axolotl fetch deepspeed_configs``); ``trl sft
--accelerate_config zero3`` names TRL's ``trl/accelerate_configs/zero3.yaml``. When the
repository lacks such a file, the framework's own copy is read, and the result says so.

The copies are byte-exact (``data/shipped/SOURCES.tsv``: repository, path, commit), keyed by the
last two components of the path as a recipe writes it.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from vramlint.documents import Document, ParseError, parse
from vramlint.packaged import data_path

# The folder as recipes write it (its last component, or its last two where one would be too common a
# name) -> (framework, path inside data/shipped/<framework>/). ms-swift's ``--deepspeed zero3`` names
# swift/config/zero3.json (readers/swift.py spells it so).
FRAMEWORKS = {"deepspeed": ("llamafactory", "examples/deepspeed"), "deepspeed_configs": ("axolotl", "deepspeed_configs"),
              "accelerate_configs": ("trl", "trl/accelerate_configs"), "swift/config": ("ms-swift", "swift/config")}


def shipped_copy(written: str) -> tuple[str, Document] | None:
    """The framework's own copy of the file a recipe names (``written``), as (what it is, the
    parsed document), or None where no framework ships a file of that name."""
    path = PurePosixPath(str(written).replace("\\", "/"))
    key = next((k for k in FRAMEWORKS if "/" in k and path.parent.as_posix().endswith(k)), path.parent.name)
    if len(path.parts) < 2 or key not in FRAMEWORKS:
        return None
    framework, folder = FRAMEWORKS[key]
    source = data_path(f"shipped/{framework}/{folder}/{path.name}")
    if not source.is_file():
        return None
    shown = f"{framework}:{folder}/{path.name}"
    try:
        return shown, parse(source.read_text(encoding="utf-8"), shown)
    except ParseError:                              # a shipped copy always parses; a guard, not a path
        return None
