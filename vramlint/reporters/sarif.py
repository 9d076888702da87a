"""SARIF 2.1.0 for code scanning (GitHub, GitLab, Azure DevOps).

One run, the rules from the registry (id, name, descriptions, default level, help), one result per
finding with its physical location. Spec: OASIS SARIF v2.1.0 (sarif-schema-2.1.0.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from vramlint import __version__
from vramlint.repository import real

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
DOCS = "https://github.com/vramlint/vramlint/blob/main/docs/rules.md"


def _root() -> Path:
    """The repository root: the nearest folder with .git at or above the working directory (what
    code scanning resolves URIs against), else the working directory."""
    here = real(Path.cwd())
    return next((folder for folder in (here, *here.parents) if (folder / ".git").exists()), here)


def _artifact(path: str, root: Path) -> dict:
    """A file's location relative to %SRCROOT%, percent-encoded; an absolute file URI outside it."""
    resolved = real(path)
    try:
        return {"uri": quote(resolved.relative_to(root).as_posix(), safe="/"), "uriBaseId": "%SRCROOT%"}
    except ValueError:
        return {"uri": resolved.as_uri()}


def sarif_document(results) -> dict:
    from vramlint.reporters.text import checked_as, verdict
    from vramlint.rules import RULES
    codes, root = list(RULES), _root()
    rules = [{"id": r.code, "name": r.name, "shortDescription": {"text": r.summary},
              "fullDescription": {"text": r.summary}, "helpUri": f"{DOCS}#{r.code.lower()}-{r.name}",
              "help": {"text": f"Bad: {r.bad}\nGood: {r.good}"},
              "defaultConfiguration": {"level": LEVEL[r.severity]}} for r in RULES.values()]
    out = []
    for result in results:
        context = f" (checked as {checked_as(result)})" if result.model is not None else ""
        for f in result.findings:
            message = f.message + context + (f" Hint: {f.hint}" if f.hint else "")
            out.append({"ruleId": f.code, "ruleIndex": codes.index(f.code), "level": LEVEL[f.severity],
                        "message": {"text": message},
                        "locations": [{"physicalLocation": {
                            "artifactLocation": _artifact(f.location.path, root),
                            "region": {"startLine": f.location.line, "startColumn": f.location.column}}}]})
    files = [{"artifactLocation": _artifact(r.path, root), "verdict": verdict(r)} for r in results]
    return {"$schema": SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "vramlint", "version": __version__, "semanticVersion": __version__,
                                          "informationUri": "https://github.com/vramlint/vramlint", "rules": rules}},
                      "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
                      "results": out, "properties": {"files": files}}]}


def report(results, out: TextIO, verbosity: str = "normal") -> None:
    json.dump(sarif_document(results), out, indent=2)
    out.write("\n")
