"""Rules: stable code, kebab-case name, severity, docs with a bad and a good example.

``RULES`` is the one registry; the command line, the reporters and the docs test read it.
Codes: VL0xx files and syntax, VL1xx schema, VL2xx memory fit, VL3xx training-launch consistency,
VL4xx vLLM serving.

The registry is built when first read (PEP 562): a check imports only the rule modules its kind of
file needs (``from vramlint.rules.batch import ...`` runs this file first), so a DeepSpeed file
does not load LLaMA-Factory's or vLLM's rules; listing them all (``--select``, ``vramlint rule``,
SARIF) loads every module named here.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from vramlint.rules.base import Rule

if TYPE_CHECKING:
    RULES: dict[str, Rule]

MODULES = ("syntax", "inputs", "schema", "fit", "recipe", "llamafactory", "batch", "launch", "scripts", "consistency",
           "serving", "sglang")


def __getattr__(name: str) -> dict[str, Rule]:
    if name != "RULES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    rules = [rule for module in MODULES for rule in import_module(f"{__name__}.{module}").RULES]
    registry = {rule.code: rule for rule in sorted(rules, key=lambda rule: rule.code)}
    globals()["RULES"] = registry
    return registry


__all__ = ["RULES", "Rule"]
