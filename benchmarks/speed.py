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


def monorepo(folder: Path, source: str, count: int) -> None:
    """``count`` DeepSpeed files as a monorepo keeps them: the same job at several micro-batches,
    stages and sequence settings (24 distinct plans), each a file of its own."""
    import json
    base = json.loads((ROOT / source).read_text())
    variants = [(mb, stage) for mb in (1, 2, 3, 4, 6, 8, 12, 16) for stage in (0, 1, 2)]
    for i in range(count):
        mb, stage = variants[i % len(variants)]
        config = {**base, "train_micro_batch_size_per_gpu": mb, "steps_per_print": 10 + i,
                  "zero_optimization": {**base["zero_optimization"], "stage": stage}}
        (folder / f"ds_{i:03d}.json").write_text(json.dumps(config, indent=2))


def main() -> int:
    import tempfile
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"{'bare interpreter (python -c pass)':<62} {time.perf_counter() - start:6.3f} s")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import vramlint.cli"], cwd=ROOT, check=True)
    print(f"{'python -c import vramlint.cli':<62} {time.perf_counter() - start:6.3f} s")
    for name, argv in CASES:
        print(f"{name:<62} {timed(argv):6.3f} s")
    with tempfile.TemporaryDirectory() as passing, tempfile.TemporaryDirectory() as failing:
        monorepo(Path(passing), "examples/llama8b-zero3-8xh100.json", 200)
        monorepo(Path(failing), "examples/llama70b-zero1-8xh100.json", 200)
        for name, folder, model in (("200 passing files in one call (Llama-3.1-8B, 8 x H100)", passing,
                                     "meta-llama/Llama-3.1-8B"),
                                    ("200 failing files in one call (Llama-3.1-70B, 8 x H100, hints)", failing,
                                     "meta-llama/Llama-3.1-70B")):
            argv = ["check", folder, "--gpus", "8xH100", "--model", model, "--seq-len", "4096", "--quiet"]
            print(f"{name:<62} {timed(argv, runs=3):6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
