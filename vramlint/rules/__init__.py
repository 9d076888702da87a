"""Rules: stable code, kebab-case name, severity, docs with a bad and a good example.

``RULES`` is the one registry; the command line, the reporters and the docs test read it.
Codes: VL0xx files and syntax, VL1xx schema, VL2xx memory fit, VL3xx training-launch consistency,
VL4xx vLLM serving.
"""

from __future__ import annotations

from vramlint.rules import batch, consistency, fit, launch, schema, serving, syntax
from vramlint.rules.base import Rule

RULES: dict[str, Rule] = {rule.code: rule for rule in (*syntax.RULES, *schema.RULES, *fit.RULES, *batch.RULES, *launch.RULES, *consistency.RULES,
                                                     *serving.RULES)}
BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES.values()}

__all__ = ["BY_NAME", "RULES", "Rule"]
