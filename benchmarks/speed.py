"""Speed: wall time of vramlint's own work, the way a pre-commit hook pays it.

Prints, per case, the median of several runs of a fresh ``vramlint`` process (import and all:
what a hook costs), each against the bare interpreter's start-up: with an empty cache folder
(the first check on a machine, and every CI run without a kept cache) and with the cache a
hook's earlier runs left (``vramlint/cache.py``: replays and transformers-built shapes); then the
shape cache's second check, 200 files in one call, and the slowest hint search (in process, an
empty cache each) over the largest released models on one GPU of each kind. Tests never assert
these numbers.

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


def timed(argv: list[str], runs: int = 5, fresh: bool = False) -> float:
    """The median wall time of ``runs`` fresh processes; ``fresh``: each with an empty cache folder."""
    import os
    import tempfile
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as empty:
            env = {**os.environ, "VRAMLINT_CACHE_DIR": empty} if fresh else None
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "vramlint", *argv, "--format", "json"] if argv[0] != "model"
                           else [sys.executable, "-m", "vramlint", *argv], cwd=ROOT, capture_output=True, env=env)
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
    (folder / "config.json").write_text(json.dumps(OLMO))
    argv = ["estimate", "--train", "--model", str(folder / "config.json"), "--gpus", "1xH100", "--seq-len", "2048"]
    first = timed(argv, runs=1)
    second = timed(argv)
    hand = timed(["estimate", "--train", "--model", "allenai/OLMo-2-1124-7B", "--gpus", "1xH100", "--seq-len", "2048"])
    return first, second, hand


def main() -> int:
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as cache:      # never the user's cache folder
        os.environ["VRAMLINT_CACHE_DIR"] = cache
        return measure()


def measure() -> int:
    import tempfile
    interpreter = bare()
    print(f"{'bare interpreter (python -c pass)':<62} {interpreter:6.3f} s")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import vramlint.cli"], cwd=ROOT, check=True)
    print(f"{'python -c import vramlint.cli':<62} {time.perf_counter() - start:6.3f} s")
    for name, argv in CASES:
        cold, kept = timed(argv, fresh=True), timed(argv)     # the kept cache: the first of these runs fills it
        print(f"{name:<62} {cold:6.3f} s  {cold / interpreter:5.1f} x the bare interpreter (empty cache); "
              f"{kept:6.3f} s  {kept / interpreter:5.1f} x (cache kept)")
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
    took, case = slowest_hint_search()
    print(f"{'slowest hint search (' + case + ')':<62} {took:6.3f} s")
    return 0


# The released models whose replays cost most (most layers, or most experts), on one GPU of each kind.
HINT_MODELS = ("deepseek-ai/deepseek-llm-67b-base", "Qwen/Qwen2.5-72B", "meta-llama/Llama-3.1-405B",
               "deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct", "mistralai/Mixtral-8x22B-v0.1",
               "Qwen/Qwen3-Next-80B-A3B-Thinking", "openai/gpt-oss-120b")
HINT_GPUS = ("H100", "H200", "B200", "A100-40GB", "L4")


def slowest_hint_search() -> tuple[float, str]:
    """The estimate and the search for what would fit (``memory.fit.fitting_changes``) of a full
    fine-tune at micro-batch 4 and 4,096 tokens, each runtime, each model and GPU above, in this
    process with an empty cache: the slowest, and which."""
    import os
    import tempfile

    from vramlint.hardware import parse_gpus
    from vramlint.memory import estimate, reserve
    from vramlint.memory.fit import fitting_changes
    from vramlint.models import catalog
    from vramlint.plan import plan_from_flags
    worst = (0.0, "")
    for name in HINT_MODELS:
        model = catalog.lookup(name)
        for gpu in HINT_GPUS:
            for runtime in ("torch", "deepspeed", "fsdp"):
                cluster = parse_gpus("1x" + gpu)
                plan = plan_from_flags(model, cluster, {"train": True, "seq_len": 4096, "micro_batch": 4,
                                                        "runtime": runtime,
                                                        **({"zero_stage": 1} if runtime == "deepspeed" else {})})
                with tempfile.TemporaryDirectory() as empty:
                    os.environ["VRAMLINT_CACHE_DIR"] = empty
                    reserve.replay.cache_clear()
                    start = time.perf_counter()
                    if estimate(plan).per_gpu_peak > cluster.gpu.memory_bytes:
                        fitting_changes(plan, int(0.9 * cluster.gpu.memory_bytes))
                    worst = max(worst, (time.perf_counter() - start, f"{name}, 1 x {gpu}, {runtime}"))
    return worst


if __name__ == "__main__":
    sys.exit(main())
