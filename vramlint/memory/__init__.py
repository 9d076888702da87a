"""The memory model: pure functions from a Plan to an Estimate. No I/O, no printing, no torch."""

from __future__ import annotations

from vramlint.memory.activations import activations
from vramlint.memory.components import Component, Estimate
from vramlint.memory.fixed import fixed_costs
from vramlint.memory.states import model_states
from vramlint.plan import Plan


def estimate(plan: Plan) -> Estimate:
    """Per-GPU peak of one training step: model states + activations + logits + fixed costs."""
    parts = model_states(plan) + activations(plan) + fixed_costs(plan)
    return Estimate(tuple(parts), plan.assumptions)


__all__ = ["Component", "Estimate", "estimate"]
