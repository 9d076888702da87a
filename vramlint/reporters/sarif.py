"""SARIF 2.1.0 for code scanning (GitHub, GitLab, Azure DevOps).

One run, the rules from the registry (id, name, descriptions, default level, help), one result per
finding with its physical location. Spec: OASIS SARIF v2.1.0 (sarif-schema-2.1.0.json).
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import TextIO

from vramlint import __version__

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
DOCS = "https://github.com/vramlint/vramlint/blob/main/docs/rules.md"


def sarif_document(results) -> dict:
    from vramlint.rules import RULES
    codes = list(RULES)
    rules = [{"id": r.code, "name": r.name, "shortDescription": {"text": r.summary},
              "fullDescription": {"text": r.summary}, "helpUri": f"{DOCS}#{r.code.lower()}-{r.name}",
              "help": {"text": f"Bad: {r.bad}\nGood: {r.good}"},
              "defaultConfiguration": {"level": LEVEL[r.severity]}} for r in RULES.values()]
    out = []
    for result in results:
        for f in result.findings:
            message = f.message + (f" Hint: {f.hint}" if f.hint else "")
            out.append({"ruleId": f.code, "ruleIndex": codes.index(f.code), "level": LEVEL[f.severity],
                        "message": {"text": message},
                        "locations": [{"physicalLocation": {
                            "artifactLocation": {"uri": PurePath(f.location.path).as_posix()},
                            "region": {"startLine": f.location.line, "startColumn": f.location.column}}}]})
    return {"$schema": SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "vramlint", "version": __version__, "semanticVersion": __version__,
                                          "informationUri": "https://github.com/vramlint/vramlint", "rules": rules}},
                      "results": out}]}


def report(results, out: TextIO, verbosity: str = "normal") -> None:
    json.dump(sarif_document(results), out, indent=2)
    out.write("\n")
