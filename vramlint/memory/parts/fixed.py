"""Fixed costs a real GPU pays beyond PyTorch's tensors: what nvidia-smi shows on top.

Measured on an H200 (../shared/groundtruth: device_used − max_memory_reserved): the CUDA context
alone is 0.55 GB; with cuBLAS loaded for inference 0.73 GB, for a training step 0.82 GB; under
DeepSpeed (NCCL communicator and its buffers, even on one GPU) 1.39 GB for ZeRO 0-2 and 1.80 GB for
ZeRO-3; FSDP and DDP over several GPUs are given DeepSpeed ZeRO-0's. Other drivers and CUDA
versions differ by a few hundred MB; the band covers that.
"""

from __future__ import annotations

from vramlint.memory.parts.components import Component
from vramlint.plan import Plan

MEASURED = "H200 measurement: device_used − peak_reserved (shared/groundtruth), docs/reference.md §4"
CONTEXT = {"infer": 730_000_000, "torch": 820_000_000}
DEEPSPEED_CONTEXT = {0: 1_391_000_000, 1: 1_391_000_000, 2: 1_391_000_000, 3: 1_800_000_000}


def fixed_costs(plan: Plan) -> Component:
    if plan.mode == "infer":
        return Component("CUDA context + cuBLAS", CONTEXT["infer"], "measured, inference", MEASURED)
    if plan.runtime == "deepspeed" or plan.cluster.world_size > 1:     # FSDP and DDP talk over NCCL too
        stage = plan.zero_stage if plan.runtime == "deepspeed" else 0
        words = (f"measured, DeepSpeed ZeRO-{stage}" if plan.runtime == "deepspeed" else
                 f"DeepSpeed ZeRO-0's, measured: {plan.setup_name} has the same NCCL communicator")
        return Component("CUDA context + NCCL", DEEPSPEED_CONTEXT[stage], words, MEASURED)
    return Component("CUDA context + cuBLAS", CONTEXT["torch"], "measured, training step", MEASURED)


WORKSPACE_SOURCE = ("cuBLAS (CUBLAS_WORKSPACE_CONFIG :4096:8 = 32 MiB) and cuBLASLt workspaces, allocated through "
                    "PyTorch's caching allocator on the first matmul; measured on H200 (shared/groundtruth): "
                    "+36 MB over the tensors in every no_grad prefill, +75 MB with a training step")
WORKSPACES = {"infer": (36_000_000, "32 MiB cuBLAS workspace (forward matmuls only)"),
              "train": (75_000_000, "32 MiB cuBLAS + cuBLASLt workspace (backward matmuls too)")}


def workspaces(plan: Plan) -> Component:
    """Counted by max_memory_allocated, unlike the context: a tensor-kind component."""
    size, formula = WORKSPACES["infer" if plan.mode == "infer" else "train"]
    return Component("cuBLAS workspaces", size, formula, WORKSPACE_SOURCE)
