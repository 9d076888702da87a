"""What would fit: the smallest change to a plan that brings its peak under a GPU's memory.

Computed by running the memory model on changed plans, never guessed: the largest micro-batch,
a higher ZeRO stage, gradient checkpointing. Each answer carries its own predicted peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.memory import estimate
from vramlint.plan import Plan


@dataclass(frozen=True)
class Change:
    text: str          # what to change, in the config's own words
    peak: int          # predicted per-GPU peak after the change


def peak(plan: Plan) -> int:
    return estimate(plan).per_gpu_peak


def largest_micro_batch(plan: Plan, budget: int) -> int:
    """The largest micro-batch whose peak fits ``budget`` (0 if not even 1 fits); binary search,
    since the peak grows with the micro-batch."""
    if peak(plan.with_changes(micro_batch=1)) > budget:
        return 0
    lo, hi = 1, max(1, plan.micro_batch)
    while peak(plan.with_changes(micro_batch=hi)) <= budget:
        lo, hi = hi, hi * 2
        if hi > 1 << 16:
            return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if peak(plan.with_changes(micro_batch=mid)) <= budget else (lo, mid)
    return lo


def fitting_changes(plan: Plan, budget: int) -> list[Change]:
    """Single changes that fit, cheapest first: keep the batch if a stage or checkpointing does it."""
    out: list[Change] = []
    for stage in range(plan.zero_stage + 1, 4):
        changed = plan.with_changes(zero_stage=stage)
        if peak(changed) <= budget:
            out.append(Change(f"zero_optimization.stage {stage}", peak(changed)))
            break
    if not plan.grad_checkpointing:
        changed = plan.with_changes(grad_checkpointing=True)
        if peak(changed) <= budget:
            out.append(Change("gradient checkpointing on", peak(changed)))
    best = largest_micro_batch(plan, budget)
    if 0 < best < plan.micro_batch:
        out.append(Change(f"train_micro_batch_size_per_gpu <= {best}", peak(plan.with_changes(micro_batch=best))))
    if plan.offload_optimizer == "none" and plan.zero_stage >= 1:
        changed = plan.with_changes(offload_optimizer="cpu")
        if peak(changed) <= budget:
            out.append(Change("offload_optimizer.device cpu", peak(changed)))
    if not out:
        out += _combined(plan, budget)
    return out


def _combined(plan: Plan, budget: int) -> list[Change]:
    """When no single change fits: ZeRO-3 with checkpointing, then with CPU offload of the optimizer,
    then of the parameters too; the first that fits, at the largest micro-batch it allows."""
    ladder = [({}, []), ({"offload_optimizer": "cpu"}, ["offload_optimizer.device cpu"]),
              ({"offload_optimizer": "cpu", "offload_param": "cpu"},
               ["offload_optimizer.device cpu", "offload_param.device cpu"])]
    for extra, words in ladder:
        strongest = plan.with_changes(zero_stage=3, grad_checkpointing=True, **extra)
        best = largest_micro_batch(strongest, budget)
        if not best:
            continue
        steps = [] if plan.zero_stage == 3 else ["zero_optimization.stage 3"]
        steps += ([] if plan.grad_checkpointing else ["gradient checkpointing on"]) + words
        if best < plan.micro_batch:
            steps.append(f"train_micro_batch_size_per_gpu <= {best}")
        return [Change(" + ".join(steps), peak(strongest.with_changes(micro_batch=min(best, plan.micro_batch))))]
    return []


@dataclass(frozen=True)
class Setup:
    """One way to run the training job, with the largest micro-batch that fits and its peak."""

    runtime: str
    strategy: str          # "ZeRO-2", "FSDP FULL_SHARD", ...
    offload: str           # "none", "optimizer", "optimizer + parameters"
    grad_checkpointing: bool
    micro_batch: int
    peak: int

    @property
    def cost(self) -> tuple:
        """Best first: no offload (PCIe-bound), no recomputation, less communication, bigger batches."""
        return (["none", "optimizer", "optimizer + parameters"].index(self.offload), self.grad_checkpointing,
                self.strategy.endswith("3") or "FULL" in self.strategy, -self.micro_batch)


CANDIDATES = [("deepspeed", 0, "none", "none"), ("deepspeed", 1, "none", "none"), ("deepspeed", 2, "none", "none"),
              ("deepspeed", 3, "none", "none"), ("deepspeed", 2, "cpu", "none"), ("deepspeed", 3, "cpu", "none"),
              ("deepspeed", 3, "cpu", "cpu"), ("fsdp", "SHARD_GRAD_OP", "none", "none"),
              ("fsdp", "FULL_SHARD", "none", "none")]


def training_setups(plan: Plan, budget: int) -> list[Setup]:
    """Every DeepSpeed stage / offload and FSDP strategy, with and without checkpointing, that fits
    ``budget`` at micro-batch 1 or more; best first."""
    out = []
    for runtime, strategy, opt, par in CANDIDATES:
        for checkpointing in (False, True):
            base = plan.with_changes(runtime=runtime, offload_optimizer=opt, offload_param=par,
                                     grad_checkpointing=checkpointing, micro_batch=1,
                                     zero_stage=strategy if runtime == "deepspeed" else 0,
                                     fsdp_strategy=strategy if runtime == "fsdp" else plan.fsdp_strategy)
            best = min(largest_micro_batch(base.with_changes(micro_batch=64), budget), 64)
            if best:
                name = f"ZeRO-{strategy}" if runtime == "deepspeed" else f"FSDP {strategy}"
                offload = {"none": "none", "cpu": "optimizer"}[opt] if par == "none" else "optimizer + parameters"
                out.append(Setup(runtime, name, offload, checkpointing, best,
                                 peak(base.with_changes(micro_batch=best))))
    return sorted(out, key=lambda s: s.cost)
