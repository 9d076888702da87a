"""Rules: stable code, kebab-case name, severity, docs with a bad and a good example.

``RULES`` is the one registry; the command line, the reporters and the docs test read it.
Codes: VL0xx files and syntax, VL1xx schema, VL2xx memory fit, VL3xx training-launch consistency,
VL4xx vLLM serving.
"""

from __future__ import annotations

from vramlint.rules import (batch, consistency, fit, inputs, launch, llamafactory, recipe, schema, scripts, serving,
                            syntax)
from vramlint.rules.base import Rule

MODULES = (syntax, inputs, schema, fit, recipe, llamafactory, batch, launch, scripts, consistency, serving)
RULES: dict[str, Rule] = {rule.code: rule for rule in sorted((r for m in MODULES for r in m.RULES),
                                                             key=lambda rule: rule.code)}

__all__ = ["RULES", "Rule"]
