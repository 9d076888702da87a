"""vLLM's KV budget against published start-up logs: vLLM 0.19 on H100 (../shared/groundtruth/
vllm-startup-logs.jsonl) and other releases and GPUs (tests/data/vllm_logs/releases.jsonl, each
with its source and the log lines it was read from under excerpts/).

Prints, per log, the measured weights / activation peak / KV cache (GiB) and KV token capacity
beside vramlint's, and the error of the KV budget. Under pipeline parallelism the log's GiB lines
are the first stage's while the token capacity is the smallest stage's — the last one, which runs
the sampler and which vramlint models — so those rows' error is on the tokens (marked t).

Refused start-ups (``measured.error_text``) count as right when ``vramlint check`` fails the setup
(an error finding of rules/serving.py), as the refusal or start-up OOM failed the server.

    python benchmarks/vllm_accuracy.py [path/to/logs.jsonl ...]
"""

from __future__ import annotations

import json
from dataclasses import replace
import statistics
import sys
from pathlib import Path

from vramlint.errors import UsageError
from vramlint.memory.serving.vllm import VLLM_VERSION, Serving, ServingEstimate, serving_estimate
from vramlint.serving_plan import v0_batch
from vramlint.models import read_model
from vramlint.units import GiB

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = (ROOT.parent / "shared" / "groundtruth" / "vllm-startup-logs.jsonl",
           ROOT / "tests" / "data" / "vllm_logs" / "releases.jsonl")


REQUIRED = ("model", "gpu_total_gib", "tp", "pp", "gpu_memory_utilization", "max_model_len", "measured")


def serving_for(record: dict) -> Serving | None:
    """The serving setup of a log, or None where vramlint's catalog has no such checkpoint, the
    log lacks what the setup needs, or Unsloth launched vLLM: Unsloth patches vLLM's start-up (its
    own utilization from the free memory, LoRA buffers of max_lora_rank, standby), so such a log
    is not the named release's budget. (Those logs name unsloth's uploads, which vramlint resolves
    since mirrors resolve to their catalog model; before, they fell out as unresolved.)"""
    if any(record.get(key) is None for key in REQUIRED):
        return None
    if "unsloth" in str((record.get("other_args") or {}).get("launcher", "")).lower():
        return None
    try:
        model = read_model(record["model"])
    except UsageError:
        return None
    other = record.get("other_args") or {}
    serving = Serving(model, int(record["gpu_total_gib"] * GiB), record["tp"], record["pp"],
                   record["gpu_memory_utilization"], record["max_model_len"], other.get("max_num_seqs"),
                   other.get("max_num_batched_tokens"), record.get("kv_cache_dtype") or "auto",
                   2 if str(record.get("dtype") or "auto") in ("bfloat16", "float16", "auto") else 4,
                   gpu_name=record.get("gpu") or "", release=str(record.get("vllm_version") or VLLM_VERSION))
    said = frozenset(name for name in ("enable_chunked_prefill", "max_num_batched_tokens", "max_num_seqs") if name in other)
    v0 = v0_batch(serving.numbers, serving.context_len, model, [], said, serving.sm, serving.dtype_bytes,
                  serving.kv_cache_dtype)
    return replace(serving, **v0) if v0 else serving


def kv_error(record: dict, est: ServingEstimate) -> tuple[float, bool]:
    """The KV budget's relative error against the log, and whether it is taken on the token
    capacity: where the log prints no GiB, or under PP (its GiB are the first stage's while the
    capacity is the smallest stage's, the last one, which vramlint models)."""
    measured = record["measured"]
    tokens = (record["pp"] > 1 or not measured.get("kv_cache_gib")) and measured.get("kv_cache_tokens")
    if tokens:
        return (est.kv_tokens - tokens) / tokens, True
    return (est.kv_budget / GiB - measured["kv_cache_gib"]) / measured["kv_cache_gib"], False


def refusal_codes(serving: Serving) -> list[str]:
    """The error findings ``vramlint check`` gives the setup (rules/serving.py): what fails the
    check, as vLLM's refusal or start-up OOM fails the server."""
    from vramlint.findings import ERROR
    from vramlint.rules.serving import check_serving
    findings = check_serving(serving, serving_estimate(serving), lambda key: None, "log")
    return sorted({f.code for f in findings if f.severity == ERROR})


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [p for p in DEFAULT if p.is_file()]
    errors, refusals, weights, rows = [], [], [], []
    print(f"{'release':<12} {'model':<44} {'tp':>2} {'pp':>2} {'weights':>15} {'activation':>15} {'KV GiB':>15} "
          f"{'KV tokens':>21} {'err':>7}")
    for path in paths:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            serving, measured = serving_for(record), record.get("measured") or {}
            if serving is None:
                continue
            release = str(record.get("vllm_version") or VLLM_VERSION)[:12]
            if measured.get("error_text"):
                codes = refusal_codes(serving)
                refusals.append(bool(codes))
                print(f"{release:<12} {record['model'][:44]:<44} {record['tp']:>2} {record['pp']:>2} refused by vLLM: "
                      f"{'called: ' + ', '.join(codes) if codes else 'CALLED FITS'}")
                continue
            if not (measured.get("kv_cache_gib") or measured.get("kv_cache_tokens")):
                continue
            est = serving_estimate(serving)
            parts = {c.name: c.bytes / GiB for c in est.components}
            error, tokens = kv_error(record, est)
            errors.append(error)
            rows.append((serving.numbers, serving.sm, error))
            if measured.get("weights_gib"):
                weights.append((est.loaded / GiB - measured["weights_gib"]) / measured["weights_gib"])
            print(f"{release:<12} {record['model'][:44]:<44} {record['tp']:>2} {record['pp']:>2} "
                  f"{measured.get('weights_gib') or float('nan'):>7.2f}/{est.loaded / GiB:<7.2f}"
                  f"{measured.get('activation_peak_gib') or float('nan'):>7.2f}/"
                  f"{parts.get('activation peak (profile run)', float('nan')):<7.2f}"
                  f"{measured.get('kv_cache_gib') or float('nan'):>7.2f}/{est.kv_budget / GiB:<7.2f}"
                  f"{measured.get('kv_cache_tokens') or 0:>10}/{est.kv_tokens:<10} {error:+7.1%}{' t' if tokens else ''}")
    if errors:
        within = sum(abs(e) <= 0.05 for e in errors)
        print(f"\n{len(errors)} logs: KV budget median |error| {statistics.median(map(abs, errors)):.1%}, "
              f"worst {max(map(abs, errors)):.1%}, within 5 %: {within} ({within / len(errors):.0%})")
    if weights:
        print(f"weights: median |error| {statistics.median(map(abs, weights)):.1%}, "
              f"within 2 %: {sum(abs(w) <= 0.02 for w in weights)} of {len(weights)}")
    if refusals:
        print(f"refusals: {sum(refusals)} of {len(refusals)} called refusals")
    if rows:
        families = sorted({row[0][:2] for row in rows})
        print("by release family: " + ", ".join(
            f"{'.'.join(map(str, f))} {sum(abs(e) <= 0.05 for r, _, e in rows if r[:2] == f)}/"
            f"{sum(r[:2] == f for r, _, _ in rows)}" for f in families))
        print(f"GPU architectures (compute capabilities): {len({sm for _, sm, _ in rows} - {None})}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
