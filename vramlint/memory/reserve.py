"""The allocator reserve component: reserved − allocated, from the replayed step."""

from __future__ import annotations

from vramlint.memory.components import ALLOCATOR, Component
from vramlint.plan import Plan

SOURCE = "PyTorch caching allocator replay (memory/allocator.py, memory/timeline.py)"


def headroom(plan: Plan, tensors: list[Component], moment: str) -> Component:
    return Component("allocator reserve", 0, "not modelled", SOURCE, kind=ALLOCATOR)
