"""The allocator reserve component: reserved − allocated at the peak, from the replayed step.

Each training runtime (``runtimes/*/step.py``) and ``nograd`` (inference) replay the step's
allocations through the caching-allocator model; the difference
between the reserved and the allocated peak of that replay is what nvidia-smi shows on top of
the tensors. When the allocated peak fits the GPU but the reserve would not, PyTorch frees its
cache and retries the allocation instead of failing, so the reserve is capped at what is left.
"""

from __future__ import annotations

from functools import lru_cache

from vramlint.memory.nograd import simulate_inference
from vramlint.memory.parts.allocator import Peaks
from vramlint.memory.parts.components import ALLOCATOR, Component
from vramlint.memory.runtimes import runtime
from vramlint.plan import Plan

SOURCE = ("PyTorch caching-allocator replay (memory/parts/allocator.py; memory/runtimes/*/step.py, nograd.py), "
          "docs/reference.md §4")
# Where replays are kept between runs: None (the memory model does no I/O of its own) unless the
# application sets a store with ``get(plan) -> Peaks | None`` and ``put(plan, peaks)`` (the command
# line sets ``vramlint.cache.Replays``: a hook checks the same files commit after commit).
STORE = None


@lru_cache(maxsize=64)
def replay(plan: Plan) -> Peaks:
    """The replayed step's peaks. Kept per plan: the searches for what would fit (memory/fit.py)
    ask about the same changed plan more than once, and a replay is most of an estimate's time
    (a fresh process's check of one file spends a third of its time in it)."""
    stored = STORE.get(plan) if STORE is not None else None
    if stored is not None:
        return stored
    peaks = _replayed(plan)
    if STORE is not None:
        STORE.put(plan, peaks)
    return peaks


def _replayed(plan: Plan) -> Peaks:
    if plan.mode == "infer":
        return simulate_inference(plan)
    return runtime(plan.runtime).replay(plan)


def wanted(plan: Plan) -> int:
    """The reserve the replayed step keeps above its allocated peak, uncapped."""
    peaks = replay(plan)
    return max(0, peaks.reserved - peaks.allocated)


def headroom(plan: Plan, allocated: int, context: int) -> Component:
    own = getattr(runtime(plan.runtime), "reserve", None) if plan.mode == "train" else None
    if own is not None:                # the runtime says what its allocator keeps (torchtitan: expandable segments)
        return own(plan)
    peaks = replay(plan)
    reserve = wanted(plan)
    left = plan.cluster.gpu.memory_bytes - allocated - context
    capped = 0 < left < reserve
    formula = (f"replayed reserved {peaks.reserved / 1e9:.2f} GB − allocated {peaks.allocated / 1e9:.2f} GB"
               + (f", capped at the {left / 1e9:.2f} GB left (the allocator frees its cache first)" if capped else ""))
    return Component("allocator reserve", min(reserve, left) if capped else reserve, formula, SOURCE, kind=ALLOCATOR)
