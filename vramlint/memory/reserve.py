"""The allocator reserve component: reserved − allocated at the peak, from the replayed step.

``timeline`` (PyTorch, FSDP), ``zero`` (DeepSpeed) and ``nograd`` (inference) replay the step's
allocations through the caching-allocator model; the difference
between the reserved and the allocated peak of that replay is what nvidia-smi shows on top of
the tensors. When the allocated peak fits the GPU but the reserve would not, PyTorch frees its
cache and retries the allocation instead of failing, so the reserve is capped at what is left.
"""

from __future__ import annotations

import os
from dataclasses import fields
from functools import lru_cache

from vramlint import cache
from vramlint.memory.allocator import Peaks
from vramlint.memory.components import ALLOCATOR, Component
from vramlint.memory.fsdp import simulate_fsdp
from vramlint.memory.nograd import simulate_inference
from vramlint.memory.timeline import simulate_training
from vramlint.memory.zero import simulate_deepspeed
from vramlint.plan import Plan

SOURCE = ("PyTorch caching-allocator replay (memory/allocator.py; memory/timeline.py, fsdp.py, zero.py, nograd.py), "
          "docs/reference.md §4")
KIND = "replays"
FORMAT = 1                    # bumped when the stored form changes: older entries are not read


@lru_cache(maxsize=64)
def replay(plan: Plan) -> Peaks:
    """The replayed step's peaks. Kept per plan, in the process and on disk (``vramlint/cache.py``):
    the searches for what would fit (memory/fit.py) ask about the same changed plan more than
    once, a hook checks the same files commit after commit, and a replay is most of an estimate's
    time (a fresh process's check of one file spends a third of its time in it)."""
    name = _key(plan)
    stored = cache.read(KIND, name)
    if isinstance(stored, list) and len(stored) == 2 and all(type(v) is int and v >= 0 for v in stored):
        return Peaks(*stored)
    peaks = _replayed(plan)
    cache.write(KIND, name, [peaks.allocated, peaks.reserved])
    return peaks


def _key(plan: Plan) -> str:
    """A replay depends on the plan's compared fields (what makes two plans equal: not where a
    value came from) and on vramlint's own code: the key is the SHA-256 of both."""
    import hashlib
    compared = [(f.name, _text(getattr(plan, f.name)) if f.name == "model" else getattr(plan, f.name))
                for f in fields(plan) if f.compare]
    return hashlib.sha256(f"{FORMAT}\n{_code()}\n{compared!r}".encode()).hexdigest()


_TEXTS: dict[int, tuple[object, str]] = {}


def _text(model) -> str:
    """The model's repr, made once per model object: a 126-layer model's takes milliseconds, and
    a hint search keys a dozen plans of the same model (the object is held, so its id is not reused)."""
    held = _TEXTS.get(id(model))
    if held is None or held[0] is not model:
        if len(_TEXTS) > 16:
            _TEXTS.clear()
        held = _TEXTS[id(model)] = (model, repr(model))
    return held[1]


@lru_cache(maxsize=1)
def _code() -> str:
    """vramlint's version and every module's path, size and modification time: an installed
    release never changes, and a memory model edited in a checkout is a new key."""
    import vramlint
    package = os.path.dirname(vramlint.__file__)
    stamps = [getattr(vramlint, "__version__", "")]
    for where, folders, files in os.walk(package):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for file in sorted(f for f in files if f.endswith(".py")):
            stat = os.stat(os.path.join(where, file))
            stamps.append(f"{os.path.relpath(os.path.join(where, file), package)}:{stat.st_size}:{stat.st_mtime_ns}")
    return "\n".join(stamps)


def _replayed(plan: Plan) -> Peaks:
    if plan.mode == "infer":
        return simulate_inference(plan)
    if plan.runtime == "deepspeed":
        return simulate_deepspeed(plan)
    if plan.runtime == "fsdp":
        return simulate_fsdp(plan)
    return simulate_training(plan)


def wanted(plan: Plan) -> int:
    """The reserve the replayed step keeps above its allocated peak, uncapped."""
    peaks = replay(plan)
    return max(0, peaks.reserved - peaks.allocated)


def headroom(plan: Plan, allocated: int, context: int) -> Component:
    peaks = replay(plan)
    reserve = wanted(plan)
    left = plan.cluster.gpu.memory_bytes - allocated - context
    capped = 0 < left < reserve
    formula = (f"replayed reserved {peaks.reserved / 1e9:.2f} GB − allocated {peaks.allocated / 1e9:.2f} GB"
               + (f", capped at the {left / 1e9:.2f} GB left (the allocator frees its cache first)" if capped else ""))
    return Component("allocator reserve", min(reserve, left) if capped else reserve, formula, SOURCE, kind=ALLOCATOR)
