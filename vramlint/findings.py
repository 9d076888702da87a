"""Findings: what a rule reports, where, how bad, and what to change."""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.documents import Location

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_RANK = {INFO: 0, WARNING: 1, ERROR: 2}


@dataclass(frozen=True)
class Finding:
    code: str          # stable, e.g. VL201
    name: str          # kebab-case rule name, e.g. exceeds-gpu-memory
    severity: str
    location: Location
    message: str
    hint: str = ""
    detail: str = ""   # one more line for people: the breakdown behind a memory verdict

    def as_dict(self) -> dict:
        return {"code": self.code, "name": self.name, "severity": self.severity,
                "path": self.location.path, "json_path": self.location.json_path,
                "line": self.location.line, "column": self.location.column,
                "message": self.message, "hint": self.hint}
