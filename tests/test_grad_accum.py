"""Gradient accumulation: what a micro-batch carries to the next.

From the second micro-batch of a step on, the gradients of the earlier ones are alive through its
forward and its backward: plain PyTorch (and DDP under ``no_sync``, as the HF Trainer and
Accelerate run it) adds into ``.grad``; DeepSpeed ZeRO-1 keeps every 16-bit gradient and its IPG
bucket until the last micro-batch reduces them, ZeRO-2 reduces at the end of each micro-batch's
backward and keeps its grads_in_partition; ZeRO-3 keeps its gradient partition at rest anyway.
"""

from __future__ import annotations

import json

import pytest

from vramlint.cli import main
from vramlint.hardware import parse_gpus
from vramlint.memory.parts.adapters import trainable
from vramlint.memory.training import training_peak
from vramlint.models import read_model
from vramlint.plan import Plan

MODEL = "meta-llama/Llama-3.2-1B"


def at_the_loss(plan: Plan) -> dict[str, int]:
    _, moments, _ = training_peak(plan)
    return {c.name: c.bytes for c in next(m for m in moments if m.name == "backward at the loss").components}


def torch_plan(**changes) -> Plan:
    fields = dict(precision="bf16", runtime="torch", weights_dtype="bfloat16", micro_batch=4, seq_len=2048)
    return Plan(model=read_model(MODEL), cluster=parse_gpus("1xH200"), **(fields | changes))


def test_plain_pytorch_carries_every_gradient_into_the_next_micro_batch():
    plan = torch_plan(grad_accum=4)
    assert at_the_loss(plan)["accumulated gradients"] == 2 * trainable(plan)
    assert "accumulated gradients" not in at_the_loss(torch_plan())


def test_fp32_weights_carry_fp32_gradients_and_lora_its_adapters():
    fp32 = torch_plan(grad_accum=2, weights_dtype="float32")
    lora = torch_plan(grad_accum=2, lora_rank=16)
    assert at_the_loss(fp32)["accumulated gradients"] == 4 * fp32.model.params
    assert at_the_loss(lora)["accumulated gradients"] == 4 * trainable(lora) < fp32.model.params


def deepspeed_check(tmp_path, capsys, stage: int, accumulation) -> dict:
    config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": accumulation,
              "bf16": {"enabled": True}, "zero_optimization": {"stage": stage}}
    path = tmp_path / f"z{stage}.json"
    path.write_text(json.dumps(config, indent=1))
    main(["check", str(path), "--gpus", "8xH100", "--model", MODEL, "--seq-len", "2048", "--grad-accum", "3",
          "--format", "json"])
    return json.loads(capsys.readouterr().out)["files"][0]


@pytest.mark.parametrize("stage", [1, 2])
def test_zero12_read_the_files_accumulation(tmp_path, capsys, stage):
    entry = deepspeed_check(tmp_path, capsys, stage, 8)
    assert entry["plan"]["origins"]["grad_accum"] == "--grad-accum"     # the command line wins ...
    assert entry["plan"]["grad_accum"] == 3
    said = [f for f in entry["findings"] if f["code"] == "VL007"]       # ... and says so, at the file's line
    assert len(said) == 1 and said[0]["line"] == 3 and "--grad-accum 3 overrides gradient_accumulation_steps: 8" \
        in said[0]["message"]
    from vramlint.checker import Context, check_file
    plan = check_file(str(tmp_path / f"z{stage}.json"), Context(parse_gpus("8xH100"), {"seq_len": 2048},
                                                                model=read_model(MODEL)))[0].plan
    assert plan.grad_accum == 8
    from vramlint.memory.runtimes.deepspeed.states import zero12_grad_partition
    carried = 2 * (plan.model.params if stage == 1 else zero12_grad_partition(plan))   # ZeRO-2: its partition
    assert at_the_loss(plan)["accumulated gradients"] == carried


def test_auto_takes_the_flag_and_zero3_carries_nothing_more(tmp_path, capsys):
    entry = deepspeed_check(tmp_path, capsys, 3, "auto")
    assert entry["plan"]["origins"]["grad_accum"] == "--grad-accum"
    assert all(c["name"] != "accumulated gradients" for c in entry["estimate"]["components"])


def left_by_the_first_micro_batch(name: str) -> tuple[dict, int]:
    """A recording's first micro-batch (no optimizer step after it) and the bytes it leaves alive."""
    from conftest import DATA

    trace = json.loads((DATA / name).read_text())
    live: dict[int, int] = {}
    for event in trace["steps"][0]:
        if event[0] == "alloc":
            live[event[1]] = event[2]
        else:
            live.pop(event[1], None)
    return trace, sum(live.values())


FSDP_CARRIED = ["trace_fsdp_llama4l_b1_s512_world2_accumulate.json",
                "trace_fsdp1_llama4l_b1_s512_world2_accumulate.json"]


@pytest.mark.parametrize("name", FSDP_CARRIED)
def test_fsdp_carries_the_unsharded_gradients_no_sync_keeps(name):
    """FSDP2 and FSDP1 as Accelerate prepares them, two gloo ranks, the first micro-batch under
    ``no_sync`` as the HF Trainer runs it (dev/trace_fsdp.py --accumulate): every rank keeps the
    whole model's 16-bit gradients (FSDP2 per parameter, FSDP1 one flat gradient per unit),
    1.01 GB here, not a shard of them."""
    from test_fsdp_trace import fsdp_plan
    from vramlint.memory.training import model_states

    trace, left = left_by_the_first_micro_batch(name)
    states = model_states(fsdp_plan(trace).with_changes(grad_accum=2))
    assert sum(c.bytes for c in states.carried) == pytest.approx(left, rel=0.001)


CARRIED = ["trace_deepspeed_z0_llama4l_b1_s512_ga2.json", "trace_deepspeed_z3_llama4l_b1_s512_ga2.json",
           "trace_deepspeed_z1_llama4l_b1_s512_ga2.json", "trace_deepspeed_z1_llama4l_b1_s512_world2_ga2.json",
           "trace_deepspeed_z2_llama4l_b1_s512_ga2.json", "trace_deepspeed_z2_llama4l_b1_s512_world2_ga2.json"]


@pytest.mark.parametrize("name", CARRIED)
def test_deepspeed_carries_what_its_first_micro_batch_leaves(name):
    """DeepSpeed 0.19 with gradient_accumulation_steps 2, recorded on its CPU accelerator
    (dev/trace_deepspeed.py --ds gradient_accumulation_steps=2; 4 of Llama-3.2-1B's layers): what
    is alive after the first micro-batch, no optimizer step yet. ZeRO-0 keeps the 16-bit ``.grad``
    tensors (1.01 GB), ZeRO-3 nothing beyond its resting partition, ZeRO-1 keeps every 16-bit gradient
    and its IPG bucket (2.01 GB here, on one rank and on two); ZeRO-2 its grads_in_partition, the
    whole parameters overlapping the rank's part (recorded on rank 1 of two, whose part starts
    inside the embedding: 1.01 GB, twice P/N)."""
    from test_allocation_trace import deepspeed_plan
    from vramlint.memory.training import model_states

    trace, left = left_by_the_first_micro_batch(name)
    states = model_states(deepspeed_plan(trace).with_changes(grad_accum=2))
    assert sum(c.bytes for c in states.carried) == pytest.approx(left, abs=1e6)
