"""The pretraining frameworks' layouts (``Recipe.layout``): each framework a module that turns its
job's mesh into the ``Plan`` its runtime reads (``plan``) and says what the framework refuses
before its first step (``refusals``, each a :class:`Refusal` in the framework's words). ``NAMES``
is the one registry: a new framework is a module named here. A layout names its module
(``Layout.runtime``): another framework may run its job on one (verl's Megatron workers)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from types import ModuleType

from vramlint.readers.deepspeed import Fact

NAMES = ("torchtitan", "megatron")


@dataclass(frozen=True)
class Refusal:
    """A layout the framework refuses before it trains: the fact that causes it, its message, and
    whether the value is no value of the key's type at all (VL102) rather than a layout it
    asserts against (VL313)."""

    fact: Fact
    message: str
    hint: str
    wrong_type: bool = False


def layout(recipe) -> ModuleType:
    """The layout module of a recipe's ``layout`` (its ``runtime``)."""
    name = type(recipe.layout.value).runtime
    if name not in NAMES:
        raise KeyError(f"no layout for {name!r}")
    return import_module(f"{__name__}.{name}")


def own_model(recipe) -> bool:
    """Whether the framework runs its own model code on the layout (torchtitan, Megatron-LM: the
    model is what its file states), not a Hugging Face model it converts (verl's Megatron workers)."""
    return recipe.framework in NAMES


def whole(fact: Fact, default: int = 1) -> int:
    """A fact's whole number (not a bool), else ``default``: what a layout's counts are read as once
    ``refusals`` has turned away the values that are none."""
    value = fact.value
    return value if isinstance(value, int) and not isinstance(value, bool) else default
