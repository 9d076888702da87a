"""Dev-only: write docs/rules.md from the rule registry and refresh the README's rules table.

    python dev/rules_docs.py
"""

from __future__ import annotations

import re
from pathlib import Path

from vramlint.rules import RULES

ROOT = Path(__file__).resolve().parent.parent


def fence(snippet: str) -> str:
    return "json" if snippet.lstrip().startswith("{") else "yaml"


def main() -> None:
    lines = ["# Rules", "", "Every finding has a stable code, a kebab-case name (usable in `ignore = [...]`), a "
             "severity,", "and an entry here with a snippet that triggers it and the same snippet fixed.", ""]
    for r in RULES.values():
        lines += [f"## {r.code} {r.name}", "", f"Severity: **{r.severity}**. {r.summary}", "", "Bad:", "",
                  f"```{fence(r.bad)}", r.bad, "```", "", "Good:", "", f"```{fence(r.good)}", r.good, "```", ""]
    (ROOT / "docs" / "rules.md").write_text("\n".join(lines))
    table = "\n".join(f"| [{r.code}](docs/rules.md#{r.code.lower()}-{r.name}) | {r.name} | {r.severity} |"
                      for r in RULES.values())
    readme = ROOT / "README.md"
    text = re.sub(r"\| code \| name \| severity \|\n\|---\|---\|---\|\n(\|.*\|\n)+",
                  "| code | name | severity |\n|---|---|---|\n" + table + "\n", readme.read_text())
    readme.write_text(text)


if __name__ == "__main__":
    main()
