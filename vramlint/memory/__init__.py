"""The memory model: pure functions from a Plan to an Estimate. No I/O, no printing, no torch."""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory.components import ALLOCATOR, CONTEXT, Component, Estimate
from vramlint.memory.fixed import fixed_costs, workspaces
from vramlint.plan import Plan


def estimate(plan: Plan, replay: bool = True) -> Estimate:
    """Per-GPU peak: the tensors alive at the step's peak moment, the caching allocator's reserve
    above them (replayed; ``replay=False`` skips it for quick searches), and the context every
    process pays."""
    if plan.mode == "infer":
        from vramlint.memory.inference import inference_components
        tensors, moment, host = inference_components(plan), "prefill", []
    else:
        from vramlint.memory.training import training_peak
        peak, _, states = training_peak(plan)
        tensors, moment, host = list(peak.components), peak.name, states.host
    tensors = [c for c in tensors if c.bytes] + [workspaces()]
    context = replace(fixed_costs(plan), kind=CONTEXT)
    allocated = sum(c.bytes for c in tensors)
    if replay:
        from vramlint.memory.reserve import headroom
        reserve = headroom(plan, allocated, context.bytes)
    else:
        reserve = Component("allocator reserve", 0, "not replayed", "memory/reserve.py", kind=ALLOCATOR)
    return Estimate(tuple(tensors + [reserve, context] + host), plan.assumptions, moment)


__all__ = ["Component", "Estimate", "estimate"]
