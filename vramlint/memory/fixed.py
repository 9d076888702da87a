"""Fixed costs a real GPU pays before the first tensor: what nvidia-smi shows beyond PyTorch.

Measured on an H200 (../shared/groundtruth, device_used − max_memory_reserved): the CUDA context
alone is 0.55 GB; with cuBLAS loaded in a training step, 0.81 GB; under DeepSpeed (NCCL
communicator and its buffers, even on one GPU) 1.39 GB for ZeRO 0-2 and 1.80 GB for ZeRO-3.
"""

from __future__ import annotations

from vramlint.memory.components import Component
from vramlint.plan import Plan

MEASURED = "H200 measurement: device_used − peak_reserved (shared/groundtruth), REFERENCE.md §4"
TRAINING_CONTEXT = 812_000_000
DEEPSPEED_CONTEXT = {0: 1_391_000_000, 1: 1_391_000_000, 2: 1_391_000_000, 3: 1_800_000_000}


def fixed_costs(plan: Plan, runtime: str = "deepspeed") -> list[Component]:
    if runtime == "deepspeed":
        size = DEEPSPEED_CONTEXT[plan.zero_stage]
        return [Component("CUDA context + NCCL", size, f"measured, DeepSpeed ZeRO-{plan.zero_stage}", MEASURED)]
    return [Component("CUDA context + cuBLAS", TRAINING_CONTEXT, "measured, training step", MEASURED)]
