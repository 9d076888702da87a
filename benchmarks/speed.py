"""Speed: wall time of vramlint's own work, the way a pre-commit hook pays it.

Prints, per case, the median of several runs of (a) a fresh ``vramlint check`` process (import
and all: what a hook costs) and (b) one in-process estimate; plus the import time of the CLI.
Tests never assert these numbers.

    python benchmarks/speed.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("check ZeRO-3, Llama-3.1-8B", ["check", "examples/llama8b-zero3-8xh100.json", "--gpus", "8xH100",
                                    "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096"]),
    ("check ZeRO-1, Llama-3.1-70B (over budget: hints searched)",
     ["check", "examples/llama70b-zero1-8xh100.json", "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-70B",
      "--seq-len", "4096"]),
    ("estimate DeepSeek-V3 ZeRO-3, 32 nodes", ["estimate", "--model", "deepseek-ai/DeepSeek-V3", "--gpus", "32x8xH100",
                                                "--train", "--runtime", "deepspeed", "--zero-stage", "3", "--seq-len",
                                                "4096", "--grad-checkpointing"]),
    ("check vLLM, Llama-3.1-70B TP 2 at 128k (hints searched)",
     ["check", "examples/vllm-llama70b-tp2-128k.yaml", "--gpus", "2xH100"]),
    ("model Kimi-K2", ["model", "moonshotai/Kimi-K2-Instruct"]),
]


def timed(argv: list[str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "vramlint", *argv, "--format", "json"] if argv[0] != "model"
                       else [sys.executable, "-m", "vramlint", *argv], cwd=ROOT, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import vramlint.cli"], cwd=ROOT, check=True)
    print(f"{'python -c import vramlint.cli':<62} {time.perf_counter() - start:6.3f} s")
    for name, argv in CASES:
        print(f"{name:<62} {timed(argv):6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
