"""What the published-row benchmarks share: a row's job written to a file of its own and checked as a
user's file is (``vramlint check FILE --gpus ... --format json``, in-process), and the estimate less
the CUDA context, which the frameworks' own memory counters do not see."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from vramlint.cli import main as vramlint_main  # noqa: E402


def first_estimate(name: str, text: str, gpus: str, beside: dict[str, str] | None = None) -> dict | None:
    """The first job's result that has an estimate, of ``text`` checked as a file called ``name``
    (``beside``: other files of the same folder, a requirements.txt pinning the run's stack)."""
    with tempfile.TemporaryDirectory() as folder:
        for other, content in (beside or {}).items():
            with open(os.path.join(folder, other), "w") as handle:
                handle.write(content)
        path = os.path.join(folder, name)
        with open(path, "w") as handle:
            handle.write(text)
        out = io.StringIO()
        here = contextlib.chdir(folder) if beside else contextlib.nullcontext()    # the repository the pins are read in
        with here, contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            vramlint_main(["check", path, "--gpus", gpus, "--format", "json"])
    data = json.loads(out.getvalue())
    return next((f for f in data.get("files", []) if f.get("estimate")), None)


def without_context(estimate: dict) -> int:
    """The per-GPU peak less the CUDA context + NCCL component, in bytes."""
    context = sum(c["bytes"] for c in estimate["components"] if c["name"].startswith("CUDA context"))
    return estimate["per_gpu_peak_bytes"] - context
