"""Inline suppressions, as yamllint and flake8 do them.

- ``# vramlint: disable=VL302`` at the end of a line, or alone on the line above, switches the
  named rules (codes or names, comma-separated) off for findings on that line;
- ``# vramlint: disable-file=near-gpu-memory`` anywhere switches them off for the whole file;
- JSON has no comments (``json.load`` in the HF Trainer refuses them, VL002), so a JSON file says
  it as a key: ``"vramlint": {"disable": ["VL201"]}``, which DeepSpeed and the Trainer pass over.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from vramlint.findings import Finding

COMMENT = re.compile(r"(?:#|//)\s*vramlint:\s*(disable|disable-file)\s*=\s*([\w\-, ]+)")


@dataclass(frozen=True)
class Suppressions:
    lines: dict[int, frozenset[str]] = field(default_factory=dict)
    file: frozenset[str] = frozenset()

    def covers(self, finding: Finding) -> bool:
        names = self.file | self.lines.get(finding.location.line, frozenset())
        return finding.code in names or finding.name in names


def _json_key(text: str) -> set[str]:
    """A JSON file's ``"vramlint": {"disable": [...]}``."""
    if not text.lstrip().startswith("{") or '"vramlint"' not in text:
        return set()
    try:
        data = json.loads(text)
    except ValueError:
        return set()
    section = data.get("vramlint") if isinstance(data, dict) else None
    names = section.get("disable") if isinstance(section, dict) else None
    return {str(name) for name in names} if isinstance(names, list) else set()


def suppressions(text: str) -> Suppressions:
    lines: dict[int, set[str]] = {}
    whole: set[str] = _json_key(text)
    for number, line in enumerate(text.splitlines(), start=1):
        match = COMMENT.search(line)
        if not match:
            continue
        names = {name.strip() for name in match.group(2).split(",") if name.strip()}
        if match.group(1) == "disable-file":
            whole |= names
            continue
        own_line = line.strip().startswith(("#", "//"))
        lines.setdefault(number + 1 if own_line else number, set()).update(names)
    return Suppressions({k: frozenset(v) for k, v in lines.items()}, frozenset(whole))
