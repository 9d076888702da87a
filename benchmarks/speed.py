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


def bare(runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# A model type transformers builds (OLMo 1 is not modelled by hand): its second check reads the
# shape cache (models/shape_cache.py) instead of importing torch and building it again.
OLMO = {"model_type": "olmo", "architectures": ["OlmoForCausalLM"], "hidden_size": 2048, "intermediate_size": 8192,
        "num_attention_heads": 16, "num_hidden_layers": 16, "num_key_value_heads": 16, "vocab_size": 50304,
        "max_position_embeddings": 2048, "torch_dtype": "float32", "tie_word_embeddings": True}


def shape_cache_ratio(folder: Path) -> tuple[float, float, float]:
    """(first check, second check, a hand-modelled model's check) of a model transformers builds."""
    import json
    import os
    (folder / "config.json").write_text(json.dumps(OLMO))
    os.environ["VRAMLINT_CACHE_DIR"] = str(folder / "cache")
    argv = ["estimate", "--train", "--model", str(folder / "config.json"), "--gpus", "1xH100", "--seq-len", "2048"]
    first = timed(argv, runs=1)
    second = timed(argv)
    hand = timed(["estimate", "--train", "--model", "allenai/OLMo-2-1124-7B", "--gpus", "1xH100", "--seq-len", "2048"])
    return first, second, hand


def main() -> int:
    import tempfile
    interpreter = bare()
    print(f"{'bare interpreter (python -c pass)':<62} {interpreter:6.3f} s")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import vramlint.cli"], cwd=ROOT, check=True)
    print(f"{'python -c import vramlint.cli':<62} {time.perf_counter() - start:6.3f} s")
    for name, argv in CASES:
        took = timed(argv)
        print(f"{name:<62} {took:6.3f} s  {took / interpreter:5.1f} x the bare interpreter")
    with tempfile.TemporaryDirectory() as scratch:
        first, second, hand = shape_cache_ratio(Path(scratch))
        print(f"{'transformers-built model (OLMo 1B): first check':<62} {first:6.3f} s")
        print(f"{'  second check (shape cache)':<62} {second:6.3f} s  {second / hand:5.2f} x a hand-modelled one "
              f"({hand:.3f} s)")
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
