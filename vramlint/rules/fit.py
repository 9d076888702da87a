"""Fit rules: the predicted per-GPU peak against the GPU's memory."""

from __future__ import annotations

from collections.abc import Iterator

from vramlint.documents import Location
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.memory import Estimate, expandable
from vramlint.plan import Plan
from vramlint.rules.base import Rule
from vramlint.units import GiB

EXCEEDS = ("VL201", "exceeds-gpu-memory", ERROR)
NEAR = ("VL202", "near-gpu-memory", WARNING)
HOST_RAM = ("VL203", "host-ram-exceeded", ERROR)
RESERVE = ("VL204", "fits-only-without-cache", ERROR)
RULES = (
    Rule(*EXCEEDS, summary="The predicted per-GPU peak is larger than the GPU's memory: the job will OOM.",
         bad='{"zero_optimization": {"stage": 1}, "train_micro_batch_size_per_gpu": 8}   # 70B on 8x80GB',
         good='{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1}'),
    Rule(*NEAR, summary="The predicted peak is above 90 % of the GPU's memory: fragmentation or a longer "
                        "batch can still tip it over.",
         bad='{"train_micro_batch_size_per_gpu": 16}   # 93 % of 80 GB',
         good='{"train_micro_batch_size_per_gpu": 12}  # 74 % of 80 GB'),
    Rule(*HOST_RAM, summary="Offloaded optimizer states and parameters need more host RAM per node than "
                            "--host-ram / host_ram says the machines have.",
         bad='{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}   # 70B, 512 GB host',
         good='{"zero_optimization": {"stage": 3}}   # on enough GPUs, or a 2 TB host'),
    Rule(*RESERVE, summary="The tensors fit, but the step the allocator replays needs more than the card once its "
                           "cache is counted: the job runs only if PyTorch frees its cache and retries in time, and "
                           "runs that sat exactly there ran out of memory at the start of training.",
         bad='{"train_micro_batch_size_per_gpu": 4}   # 100 % of the card with the reserve capped',
         good='{"train_micro_batch_size_per_gpu": 2}   # or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True'),
)
NEAR_THRESHOLD = 0.90


# An RL step's phase -> the setting that governs it (memory/rl.py), pointed at where it is the peak.
PHASE_SETTINGS = {"rollout": "rollout_share", "log-prob forward": "logprob_micro", "forward (no grad)": "logprob_micro"}


def _where(plan: Plan, path: str, moment: str = "") -> Location:
    """Point at the line most worth changing: the setting of an RL phase that is the peak, else
    the micro-batch if the file sets it, else the stage, else the launch line that states the job."""
    for key in (PHASE_SETTINGS.get(moment, ""), "micro_batch", "zero_stage", "precision", "launch"):
        origin = plan.origins.get(key)
        if origin and origin.location:
            return origin.location
    return Location(path)


def _breakdown(estimate: Estimate) -> str:
    return " · ".join(f"{c.name} {c.bytes / GiB:.1f}" for c in estimate.gpu if c.bytes)


def _with_loss(plan: Plan) -> str:
    """What the search tried beside full sharding and checkpointing, said in "nothing fits"."""
    from vramlint.memory.fit import fused_loss_change
    return " and the framework's fused loss" if fused_loss_change(plan) else ""


def _nothing_fits(plan: Plan) -> str:
    """The hint where no change fits: a pretraining framework's job (``Plan.parallelism``) has had its
    own layouts weighed (fit_layout), which LoRA / QLoRA are not among."""
    if plan.parallelism is not None:
        return ("none of its framework's layouts fits on up to 64 nodes of these GPUs (full recomputation and "
                "tensor parallelism within a node weighed): a smaller model, micro-batch or sequence")
    return (f"nothing fits on up to 64 nodes of these GPUs, fully sharded with checkpointing{_with_loss(plan)}"
            ": tensor parallelism, LoRA/QLoRA or a smaller model")


def check_fit(plan: Plan, estimate: Estimate, path: str, near: float = NEAR_THRESHOLD) -> Iterator[Finding]:
    budget = plan.cluster.gpu.memory_bytes
    peak = estimate.per_gpu_peak
    where = _where(plan, path, estimate.moment)
    gpus = plan.cluster.describe()
    if peak > budget:
        from vramlint.memory.fit import fitting_changes      # the search: imported by the jobs that need a hint
        changes = fitting_changes(plan, int(near * budget))     # suggest only what stays clear of the warning
        hint = "; or ".join(f"{c.text} fits at {c.peak / GiB:.1f} GiB" for c in changes) or (
            "the framework refuses this launch (its own finding says why): no change to it is proposed"
            if plan.refused() else _nothing_fits(plan))
        yield Finding(*EXCEEDS, where, f"per-GPU peak {peak / GiB:.1f} GiB exceeds {budget / GiB:.1f} GiB on {gpus}",
                      hint=hint, detail=_breakdown(estimate))
    elif estimate.uncapped_peak > budget:
        from vramlint.memory.fit import fitting_changes
        changes = fitting_changes(plan, int(near * budget))
        ways = "; or ".join(f"{c.text} fits at {c.peak / GiB:.1f} GiB" for c in changes)
        setting = "" if expandable(plan) else \
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (less fragmentation), or "
        yield Finding(*RESERVE, where, f"per-GPU peak {peak / GiB:.1f} GiB fits {budget / GiB:.1f} GiB on {gpus} only "
                      f"because the allocator's cache is capped at what is left: with its cache the step keeps "
                      f"{estimate.uncapped_peak / GiB:.1f} GiB", detail=_breakdown(estimate),
                      hint=setting + (ways or "a smaller micro-batch"))
    elif peak > near * budget:
        yield Finding(*NEAR, where, f"per-GPU peak {peak / GiB:.1f} GiB is {peak / budget:.0%} of "
                                    f"{budget / GiB:.1f} GiB on {gpus} (warning above {near:.0%})",
                      detail=_breakdown(estimate))



def check_host_ram(plan: Plan, estimate: Estimate, path: str, host_ram: int | None) -> Iterator[Finding]:
    """DeepSpeed's own host-RAM formulas (memory/runtimes/deepspeed/states.py) against each node's RAM."""
    if not host_ram or estimate.host_ram <= host_ram:
        return
    origin = plan.origins.get("offload_optimizer")
    where = origin.location if origin and origin.location else Location(path)
    yield Finding(*HOST_RAM, where, f"offload needs {estimate.host_ram / GiB:.0f} GiB of host RAM per node, more than "
                                    f"the {host_ram / GiB:.0f} GiB given", hint="more nodes, NVMe offload, or offload "
                                                                             "the optimizer only")
