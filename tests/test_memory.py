"""The memory model: ZeRO sharding over the data-parallel degree, offload, worked examples."""

from __future__ import annotations

import pytest

from vramlint.hardware import parse_gpus
from vramlint.memory import estimate
from vramlint.memory.fit import fitting_changes, largest_micro_batch
from vramlint.memory.states import BYTES
from vramlint.models import read_model
from vramlint.plan import Plan

LLAMA_8B = read_model("meta-llama/Llama-3.1-8B")
P = LLAMA_8B.params


def plan(**kw) -> Plan:
    base = dict(model=LLAMA_8B, cluster=parse_gpus("8xH100"), precision="bf16", zero_stage=0,
                offload_optimizer="none", offload_param="none", micro_batch=1, seq_len=2048)
    base.update(kw)
    return Plan(**base)


def parts(p: Plan) -> dict[str, int]:
    return {c.name: c.bytes for c in estimate(p).components}


def test_full_finetune_is_16_bytes_per_parameter_before_activations():
    """Seed example: 2 (weights) + 2 (grads) + 12 (fp32 master, m, v); a nominal 70B needs 1,120 GB."""
    assert sum(BYTES["bf16"]) == 16
    assert 70e9 * sum(BYTES["bf16"]) == 1120e9
    c = parts(plan(zero_stage=0))
    assert (c["weights"], c["gradients"], c["optimizer states"]) == (2 * P, 2 * P, 12 * P)


@pytest.mark.parametrize("stage, sharded", [(0, set()), (1, {"optimizer states"}),
                                            (2, {"optimizer states", "gradients"}),
                                            (3, {"optimizer states", "gradients", "weights"})])
def test_each_stage_shards_what_zero_says_over_dp(stage, sharded):
    c = parts(plan(zero_stage=stage))
    full = {"weights": 2 * P, "gradients": 2 * P, "optimizer states": 12 * P}
    for name, size in full.items():
        assert c[name] == (-(-size // 8) if name in sharded else size), name
    assert ("gathered parameters" in c) == (stage == 3)


def test_sharding_is_over_data_parallel_not_world_size():
    p = plan(zero_stage=3, tensor_parallel=2)          # 8 GPUs, TP 2 -> DP 4
    assert p.data_parallel == 4
    assert parts(p)["optimizer states"] == -(-12 * P // 4)


def test_cpu_offload_moves_optimizer_states_to_host():
    c = parts(plan(zero_stage=2, offload_optimizer="cpu"))
    assert c["optimizer states"] == 0 and c["gradients"] == 0 and c["weights"] == 2 * P
    assert c["offloaded states (host)"] == int(P * max(4 * 8, 16) * 1.5)     # DeepSpeed's estimator


def test_activations_grow_with_micro_batch_and_checkpointing_shrinks_them():
    one, four = parts(plan(micro_batch=1)), parts(plan(micro_batch=4))
    assert four["activations"] == 4 * one["activations"]
    assert parts(plan(micro_batch=4, grad_checkpointing=True))["activations"] < four["activations"] / 5


def test_largest_micro_batch_is_the_boundary():
    p = plan(zero_stage=3)
    budget = p.cluster.gpu.memory_bytes
    best = largest_micro_batch(p, budget)
    assert best >= 1
    assert estimate(p.with_changes(micro_batch=best)).per_gpu_peak <= budget
    assert estimate(p.with_changes(micro_batch=best + 1)).per_gpu_peak > budget


def test_every_suggested_change_really_fits():
    p = plan(zero_stage=0, micro_batch=8)
    budget = p.cluster.gpu.memory_bytes
    assert estimate(p).per_gpu_peak > budget
    changes = fitting_changes(p, budget)
    assert changes and all(change.peak <= budget for change in changes)
