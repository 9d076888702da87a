"""Dev-only: write examples/README.md and the README's examples table from examples/cases.json.

    python dev/examples_readme.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def verdict(case: dict, short: bool = False) -> str:
    if case["argv"][0] == "check":
        if case["exit"]:
            return f"exit 1 ({case['finding']})" if short else f"exit 1, {case['finding']}"
        return "exit 0, fits"
    return "fits" if case["fits"] else "does not fit"


def main() -> None:
    cases = json.loads((ROOT / "examples" / "cases.json").read_text())["cases"]
    lines = ["# Examples", "", "Realistic setups and the verdict vramlint gives each. The list lives in `cases.json`;",
             "`tests/test_examples.py` runs every command and checks its verdict.", "",
             "| setup | verdict | why |", "|---|---|---|"]
    lines += [f"| {c['name']} | {verdict(c)} | {c['why']} |" for c in cases]
    lines += ["", "Commands:", ""]
    for c in cases:
        lines += [f"- {c['name']}:", "", "  ```console", "  vramlint " + " ".join(c["argv"]), "  ```", ""]
    (ROOT / "examples" / "README.md").write_text("\n".join(lines))
    rows = "| setup | verdict |\n|---|---|\n" + "\n".join(f"| {c['name']} | {verdict(c, True)} |" for c in cases) + "\n"
    readme = ROOT / "README.md"
    readme.write_text(re.sub(r"\| setup \| verdict \|\n\|---\|---\|\n(\|.*\|\n)+", rows, readme.read_text()))


if __name__ == "__main__":
    main()
