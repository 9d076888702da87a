"""The accuracy benchmark as a regression guard: vramlint against every measured H200 run."""

from __future__ import annotations

import json
import statistics
import sys

from conftest import ROOT, SHARED, shared_or_skip

sys.path.insert(0, str(ROOT / "benchmarks"))
from accuracy import plan_for, rows  # noqa: E402

from vramlint.memory.parts.adapters import trainable  # noqa: E402


def test_median_error_on_measured_runs_is_within_three_percent():
    table = rows(shared_or_skip(SHARED / "groundtruth"))
    assert len(table) >= 50
    assert statistics.median(abs(r.error) for r in table) <= 0.03
    assert statistics.median(abs(r.alloc_error) for r in table) <= 0.02


def test_the_band_holds_the_measurement_for_nine_runs_in_ten_and_every_deepspeed_run():
    table = rows(shared_or_skip(SHARED / "groundtruth"))
    inside = [r.low <= r.measured <= r.high for r in table]
    assert sum(inside) >= 0.9 * len(table)
    assert all(ok for r, ok in zip(table, inside) if "ds-z" in r.setup)


def test_zero_1_and_2_replays_reproduce_the_measured_reserve():
    """stage_1_and_2.py replayed from deepspeed.initialize on: the IPG bucket, grads_in_partition,
    the step's flattened copy and fp32 upcast (measured reserved 32.147 GB, replayed 32.143)."""
    table = [r for r in rows(shared_or_skip(SHARED / "groundtruth")) if r.setup.split()[1] in ("ds-z1-none", "ds-z2-none")]
    assert len(table) == 2
    assert all(abs(r.error) < 0.01 and abs(r.alloc_error) < 0.001 for r in table)


def test_prefill_allocated_peaks_are_within_three_percent():
    table = [r for r in rows(shared_or_skip(SHARED / "groundtruth")) if "infer_prefill" in r.setup]
    assert len(table) >= 14
    assert all(abs(r.alloc_error) <= 0.03 for r in table)


def test_checkpointed_bf16_runs_are_within_three_and_a_half_percent():
    """Checkpointed forwards keep nothing and are replayed op by op like no_grad (the gap that left
    llama-3.2-1b at 8k tokens 5.5 % short when the kept tensors were allocated at once). Five of the
    seven are within 1 %, Mixtral +2.6 %; pythia-1b (−3.2 %) misses by a reserve that transformers' real op order
    does not produce either (test_allocation_trace.py: 0.14 GB replayed, 0.54 GB on the H200)."""
    table = [r for r in rows(shared_or_skip(SHARED / "groundtruth")) if r.setup.endswith(" gc") and "bf16_adamw" in r.setup]
    assert len(table) == 7
    assert all(abs(r.error) <= 0.035 for r in table)
    assert sum(abs(r.error) <= 0.01 for r in table) >= 5


def test_lora_trainable_counts_equal_peft_for_every_measured_model():
    """PEFT's own count (``params_trainable`` of the measured runs, r=16 on all-linear): fused
    projections are one linear with one adapter pair; Mixtral's fused experts get PEFT's
    transformers-5 conversion (router adapted, gate_up at rank 2r, down at r, per expert)."""
    path = shared_or_skip(SHARED / "groundtruth" / "h200-calibration.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    lora = [r for r in records if isinstance(r.get("scenario"), dict) and r["scenario"]["kind"] == "lora_bf16"]
    assert len(lora) == 7
    assert all(trainable(plan_for(r)) == r["params_trainable"] for r in lora)


def test_what_the_forward_keeps_equals_the_measured_for_every_training_run():
    """``memory_allocated`` after the forward pass (second step) minus before it: every kept
    activation, the final norm, the log-softmax output and, under autocast, the cached 16-bit
    weight copies that autograd saved. The layer-by-layer counts of ``activations.py`` — SDPA's
    output kept once unless RoPE ends in torch.cat, one autocast cast per linear, a parallel
    residual's shared LayerNorm input — against all 35 torch training runs, within 1.5 %."""
    from vramlint.memory.training import training_peak

    path = shared_or_skip(SHARED / "groundtruth" / "h200-calibration.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    runs = [r for r in records if isinstance(r.get("scenario"), dict) and "steps" in r]
    assert len(runs) == 35
    for record in runs:
        plan = plan_for(record)
        _, moments, states = training_peak(plan)
        forward = next(m for m in moments if m.name == "forward at the loss")
        dead = 6 * plan.micro_batch * plan.seq_len * plan.model.vocab_size   # 16-bit logits, fp32 copy
        if plan.grad_checkpointing:       # the layers' casts die as the autocast region closes
            dead += sum(c.bytes for c in forward.components if c.name == "autocast weight copies")
        kept = forward.bytes - sum(c.bytes for c in states.resting) - dead
        step = record["steps"][1]
        measured = step["after_forward"] - step["start"]
        assert abs(kept - measured) <= 0.015 * measured, (record["model"], record["scenario"])
