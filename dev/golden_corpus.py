"""Dev-only: print the findings vramlint gives every corpus DeepSpeed, Accelerate and vLLM file, in the
golden format of tests/data/golden/corpus_findings.json. Review the output by reading it before
copying it over the golden file; never regenerate to make a failing test pass.

    python dev/golden_corpus.py ../shared/corpus > /tmp/golden.json
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

from vramlint.cli import main

CONTEXT = ["--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "2048", "--format", "json"]


def findings(path: Path) -> list[str]:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(["check", str(path), *CONTEXT])
    entry = json.loads(buffer.getvalue())["files"][0]
    out = []
    for f in entry["findings"]:
        where = f"{f['line']}:{f['column']}" if f["path"] == str(path) else f"{Path(f['path']).name}:{f['line']}:{f['column']}"
        out.append(f"{f['code']} {f['name']} {f['severity']} {where}")
    return out


def main_(corpus: str) -> None:
    golden = {f"{folder}/{p.name}": findings(p) for folder in ("deepspeed", "accelerate", "vllm")
              for p in sorted(Path(corpus, folder).iterdir())}
    json.dump(golden, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main_(sys.argv[1])
