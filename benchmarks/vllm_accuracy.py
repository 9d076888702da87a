"""vLLM's KV budget against published start-up logs (../shared/groundtruth/vllm-startup-logs.jsonl).

Prints, per log, the measured weights / activation peak / KV cache (GiB) and KV token capacity
beside vramlint's, and the error of the KV budget. Under pipeline parallelism the log's GiB lines
are the first stage's while the token capacity is the smallest stage's — the last one, which runs
the sampler and which vramlint models — so those rows' error is on the tokens (marked t).

    python benchmarks/vllm_accuracy.py [path/to/groundtruth]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from vramlint.errors import UsageError
from vramlint.memory.serving import Serving, serving_estimate
from vramlint.models import read_model
from vramlint.units import GiB

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "groundtruth"


REQUIRED = ("model", "gpu_total_gib", "tp", "pp", "gpu_memory_utilization", "max_model_len", "measured")


def serving_for(record: dict) -> Serving | None:
    """The serving setup of a log, or None where vramlint's catalog has no such checkpoint or the
    log lacks what the setup needs."""
    if any(record.get(key) is None for key in REQUIRED):
        return None
    try:
        model = read_model(record["model"])
    except UsageError:
        return None
    other = record.get("other_args") or {}
    return Serving(model, int(record["gpu_total_gib"] * GiB), record["tp"], record["pp"],
                   record["gpu_memory_utilization"], record["max_model_len"], other.get("max_num_seqs"),
                   other.get("max_num_batched_tokens"), record.get("kv_cache_dtype") or "auto",
                   2 if record.get("dtype", "auto") in ("bfloat16", "float16", "auto") else 4,
                   gpu_name=record.get("gpu") or "")


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else DEFAULT
    errors = []
    print(f"{'model':<44} {'tp':>2} {'pp':>2} {'weights':>15} {'activation':>15} {'KV GiB':>15} "
          f"{'KV tokens':>21} {'err':>7}")
    for line in (folder / "vllm-startup-logs.jsonl").read_text().splitlines():
        record = json.loads(line)
        serving, measured = serving_for(record), record.get("measured") or {}
        if serving is None or not measured.get("kv_cache_gib"):
            continue
        est = serving_estimate(serving)
        parts = {c.name: c.bytes / GiB for c in est.components}
        tokens = record["pp"] > 1 and measured.get("kv_cache_tokens")
        error = ((est.kv_tokens - tokens) / tokens if tokens else
                 (est.kv_budget / GiB - measured["kv_cache_gib"]) / measured["kv_cache_gib"])
        errors.append(error)
        print(f"{record['model'][:44]:<44} {record['tp']:>2} {record['pp']:>2} "
              f"{measured.get('weights_gib', float('nan')):>7.2f}/{est.loaded / GiB:<7.2f}"
              f"{measured.get('activation_peak_gib', float('nan')):>7.2f}/{parts['activation peak (profile run)']:<7.2f}"
              f"{measured['kv_cache_gib']:>7.2f}/{est.kv_budget / GiB:<7.2f}"
              f"{measured.get('kv_cache_tokens', 0):>10}/{est.kv_tokens:<10} {error:+7.1%}{' t' if tokens else ''}")
    print(f"\n{len(errors)} logs: KV budget median |error| {statistics.median(map(abs, errors)):.1%}, "
          f"worst {max(map(abs, errors)):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
