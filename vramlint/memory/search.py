"""The search's primitives: whether a changed plan fits, its peak, and the bisections that find the
largest value of a setting that fits (memory/fit.py for the training layout, memory/fit_rl.py for an
RL step's). Every answer runs the memory model; none is guessed."""

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


def fitting_peak(plan: Plan, budget: int) -> int | None:
    """The peak when it fits the budget, else None. The allocator replay only adds to the tensors
    and the context, so a plan whose tensors alone are over the budget is decided without it."""
    if estimate(plan, replay=False).per_gpu_peak > budget:
        return None
    value = peak(plan)
    return value if value <= budget else None


def fits(plan: Plan, budget: int) -> bool:
    return fitting_peak(plan, budget) is not None


def _bisect(ok, good: int, bad: int) -> int:
    """The good end of the boundary between ``good`` (``ok``) and ``bad`` (not), either of them
    the larger, for a predicate that changes once between them."""
    while abs(bad - good) > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if ok(mid) else (good, mid)
    return good


def _largest(ok, start: int, most: int = 1 << 16) -> int:
    """The largest n in [1, ``most``] with ``ok(n)`` for a predicate true up to some point and
    false after (0 if ``ok(1)`` is false): doubling from ``start``, then bisection."""
    if not ok(1):
        return 0
    if most <= 1:
        return 1
    lo, hi = 1, min(max(2, start), most)
    while ok(hi):
        if hi >= most:
            return hi
        lo, hi = hi, min(hi * 2, most)
    return _bisect(ok, lo, hi)


def _largest_from(ok, bound: int) -> int:
    """The largest n <= ``bound`` with ``ok(n)`` (0 if none), expected at or just below ``bound``:
    galloping down from it, then bisection."""
    if bound < 1 or ok(bound):
        return max(bound, 0)
    high, step = bound, 1                  # ok(high) is false
    while True:
        low = max(1, high - step)
        if ok(low):
            return _bisect(ok, low, high)
        if low == 1:
            return 0
        high, step = low, step * 2
