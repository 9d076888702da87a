"""vLLM's start-up budget against published start-up logs of every release family
(tests/data/vllm_logs/releases.jsonl: 0.5.4 to 0.27.1, each with its source and the log lines
it was read from under excerpts/; ../shared/groundtruth/vllm-startup-logs.jsonl: 0.19 on H100),
the same comparison benchmarks/vllm_accuracy.py prints.

Issue 23's target: the KV cache within 5 % of vLLM's on 90 % of the logs, the weights within 2 %
on all, and every refusal called one. The logs vramlint does not yet meet are named with the
mechanism it lacks; each must still miss (a fix removes it from the list)."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import DATA, ROOT, SHARED

sys.path.insert(0, str(ROOT / "benchmarks"))
import vllm_accuracy  # noqa: E402
from vllm_accuracy import refusal_codes, serving_for  # noqa: E402

from vramlint.memory.serving.vllm import serving_estimate  # noqa: E402

GAPS = {   # log -> what vramlint does not model
    "v1a-cr7258-v082-llama31-8b-lora-a100": "0.8's V1 budget subtracts everything on the device outside PyTorch "
                                            "(CUDA context, loaded kernels): 1.2-1.7 GiB derived, 0.25 counted",
    "v1a-cr7258-v085post1-qwen25-1.5b-a10": "the same 0.8 V1 whole-device term",
    "v1a-raydata-v0110-qwen25-vl-3b-l4": "the vision encoder's own forward over one 16,384-token dummy image",
    "planner-v019-gpt-oss-20b-tp1-8192-sampler-oom": "the sampler warm-up after the KV cache, beside the graphs",
}
RELEASES = DATA / "vllm_logs" / "releases.jsonl"
GROUNDTRUTH = SHARED / "groundtruth" / "vllm-startup-logs.jsonl"


def records() -> list[dict]:
    paths = [RELEASES] + ([GROUNDTRUTH] if GROUNDTRUTH.is_file() else [])
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def kv_error(record: dict, serving) -> float:
    return vllm_accuracy.kv_error(record, serving_estimate(serving))[0]


ESTIMABLE = [(r["id"], r, s) for r in records() if (s := serving_for(r)) is not None]
STARTED = [(i, r, s) for i, r, s in ESTIMABLE if not r["measured"].get("error_text")
           and (r["measured"].get("kv_cache_gib") or r["measured"].get("kv_cache_tokens"))]
REFUSED = [(i, r, s) for i, r, s in ESTIMABLE if r["measured"].get("error_text")]


@pytest.mark.parametrize("name, record, serving", STARTED, ids=[i for i, _, _ in STARTED])
def test_each_log_kv_cache_within_5_percent_unless_a_named_gap(name, record, serving):
    assert (abs(kv_error(record, serving)) <= 0.05) is (name not in GAPS), GAPS.get(name, "")


@pytest.mark.parametrize("name, record, serving", STARTED, ids=[i for i, _, _ in STARTED])
def test_each_log_weights_within_2_percent(name, record, serving):
    printed = record["measured"].get("weights_gib")
    if printed:
        assert serving_estimate(serving).loaded / 2**30 == pytest.approx(printed, rel=0.02)


@pytest.mark.parametrize("name, record, serving", REFUSED, ids=[i for i, _, _ in REFUSED])
def test_each_refusal_fails_the_check_unless_a_named_gap(name, record, serving):
    """A refusal or start-up OOM is called when ``vramlint check`` fails the setup: DeepSeek-R1's
    graph-capture OOM at gpu_memory_utilization 0.98 (vllm#15598) by VL407, which says the share
    leaves what the budget does not count no room."""
    assert bool(refusal_codes(serving)) is (name not in GAPS), GAPS.get(name, "")


def test_the_logs_span_releases_and_gpus_and_meet_the_target():
    """At least 30 logs over five release families and three GPU types, with the groundtruth's
    0.19 logs where this checkout has them; 90 % within 5 % over all of them."""
    if not GROUNDTRUTH.is_file():
        pytest.skip(f"{GROUNDTRUTH} is not in this checkout")
    families = {s.numbers[:2] for _, _, s in STARTED}
    gpus = {s.sm for _, _, s in STARTED} - {None}       # compute capabilities: a lower bound on GPU types
    within = sum(abs(kv_error(r, s)) <= 0.05 for _, r, s in STARTED)
    assert len(STARTED) >= 30 and len(families) >= 5 and len(gpus) >= 3
    assert within >= 0.9 * len(STARTED)
