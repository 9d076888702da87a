"""What would fit a pretraining framework's job (``Plan.parallelism``): changes to its layout in its
own keys, one module per runtime (``torchtitan``, ``megatron``), each giving ``changes`` (single
changes that fit, cheapest first), ``candidates`` (the layouts ``vramlint plan`` weighs) and
``edits`` (the keys that turn the job into another plan)."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from vramlint.memory.search import Change
from vramlint.plan import Plan


def _runtime(plan: Plan) -> ModuleType:
    return import_module(f"{__name__}.{plan.runtime}")


def layout_changes(plan: Plan, budget: int) -> list[Change]:
    return _runtime(plan).changes(plan, budget)


def layout_candidates(plan: Plan) -> list[Plan]:
    return _runtime(plan).candidates(plan)


def layout_edits(plan: Plan, to: Plan) -> list[str]:
    return _runtime(plan).edits(plan, to)
