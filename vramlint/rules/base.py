"""The Rule record every rule module declares."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    code: str          # stable: never reused for another check
    name: str          # kebab-case, used in settings and suppressions
    severity: str
    summary: str
    bad: str           # a snippet that triggers it
    good: str          # the same snippet, fixed
