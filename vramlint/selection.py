"""Which rules a run reports: ``--select``, ``--ignore`` and ``--extend-ignore`` as ruff has them,
and ``--warn``: the rules whose errors are reported as warnings (a job the check cannot estimate is
an error by default; a team that accepts the gap says so here, by name).

A rule is named by its code (``VL201``), its name (``exceeds-gpu-memory``) or a prefix of codes
(``VL2``: every memory-fit rule). ``select`` (default: every rule) picks the rules, then ``ignore``
(which replaces the settings' list) and ``extend-ignore`` (which adds to it) drop some. A name that
matches no rule is an error, never silently ignored: a typo in an ignore list would otherwise turn
a rule off for good without anyone noticing.
"""

from __future__ import annotations

from collections.abc import Iterable

from vramlint.errors import UsageError


def rules_named(names: Iterable[str], where: str) -> frozenset[str]:
    """The codes a list of codes, names and code prefixes stands for."""
    from vramlint.rules import RULES
    out: set[str] = set()
    for raw in names:
        name = str(raw).strip()
        if not name:
            continue
        found = {code for code, rule in RULES.items() if code == name.upper() or rule.name == name
                 or (name.upper().startswith("VL") and code.startswith(name.upper()))}
        if not found:
            raise UsageError(f"{where}: no rule {name!r} (codes such as VL201, names such as exceeds-gpu-memory, "
                             "or a prefix such as VL2; `vramlint rule` lists them)")
        out |= found
    return frozenset(out)


def split(value) -> list[str]:
    """A command-line ``VL201,VL3`` or a settings list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in value.split(",") if part.strip()]
    return [str(part) for part in value]


def enabled(values: dict) -> frozenset[str] | None:
    """The rule codes this run reports, from the merged settings and command line; None: every
    rule (nothing selected or ignored: the registry is not loaded to say so)."""
    if not any(values.get(key) for key in ("select", "ignore", "extend_ignore")):
        return None
    from vramlint.rules import RULES
    chosen = rules_named(split(values.get("select")), "select") if values.get("select") else frozenset(RULES)
    dropped = (rules_named(split(values.get("ignore")), "ignore")
               | rules_named(split(values.get("extend_ignore")), "extend-ignore"))
    return chosen - dropped


def warned(values: dict) -> frozenset[str]:
    """The rule codes whose errors this run reports as warnings (``--warn``, ``warn``)."""
    return rules_named(split(values.get("warn")), "warn") if values.get("warn") else frozenset()
