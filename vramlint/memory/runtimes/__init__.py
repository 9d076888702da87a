"""The training runtimes, each a package of its own that reads a ``Plan``: its model states
(``states.states``), a vision tower's share (``states.vision_tower``), the ranks a frozen model
beside the policy is split over (``states.frozen_shards``) and its step replayed through the
caching allocator (``step.replay``); a runtime that runs its own model code (torchtitan, Megatron-LM) gives its
step's ``moments`` and its allocator ``reserve`` too. ``NAMES`` is the one registry: a new runtime
is a new package named here, and nothing else in ``memory/`` changes."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

NAMES = ("torch", "deepspeed", "fsdp", "torchtitan", "megatron")


def runtime(name: str) -> ModuleType:
    """The runtime package ``Plan.runtime`` names (imported when first asked for)."""
    if name not in NAMES:
        raise KeyError(f"no memory model for runtime {name!r}")
    return import_module(f"{__name__}.{name}")
