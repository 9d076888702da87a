"""Dev-only: print the hints (what would fit, and its peak) vramlint gives on the golden cases, in the
format of tests/data/golden/hints.json. The golden cases: every corpus DeepSpeed and Accelerate
file checked as 8 x H100 training Llama-3.1-70B at 4,096 tokens (most of them do not fit, so the
search runs), the same on one H100 with Llama-3.1-8B, and every example with its README command.
Review the output by reading it before copying it over the golden file; never regenerate to make
a failing test pass.

    python dev/golden_hints.py ../shared/corpus > /tmp/hints.json
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import sys
from pathlib import Path

from vramlint.cli import main

ROOT = Path(__file__).resolve().parents[1]
CONTEXTS = {"70B on 8xH100": ["--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-70B", "--seq-len", "4096"],
            "8B on 1xH100": ["--gpus", "1xH100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096"]}


def hints(argv: list[str]) -> list[str]:
    """Each finding with a hint, as ``CODE: hint``, of ``vramlint check`` with ``argv``."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(["check", *argv, "--format", "json"])
    return [f"{f['code']}: {f['hint']}" for entry in json.loads(buffer.getvalue())["files"]
            for f in entry["findings"] if f.get("hint") and "fits at" in f["hint"]]


def cases(corpus: str) -> dict[str, list[str]]:
    """The golden cases: a name -> the ``vramlint check`` arguments."""
    out = {}
    for folder in ("deepspeed", "accelerate"):
        for path in sorted(Path(corpus, folder).iterdir()):
            for name, context in CONTEXTS.items():
                out[f"{folder}/{path.name} ({name})"] = [str(path), *context]
    readme = (ROOT / "examples" / "README.md").read_text()
    for line in readme.splitlines():
        start = line.find("vramlint check ")
        if start >= 0:
            command = shlex.split(line[start:].split("`")[0])[2:]
            out[f"examples: {' '.join(command)}"] = [str(ROOT / command[0]), *command[1:]]
    return out


def main_(corpus: str) -> None:
    golden = {name: hints(argv) for name, argv in cases(corpus).items()}
    json.dump({name: found for name, found in golden.items() if found}, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main_(sys.argv[1])
