"""Every registered rule has docs (a bad and a good snippet) and is listed in the README."""

from __future__ import annotations

import pytest

from conftest import ROOT
from vramlint.rules import RULES

DOCS = (ROOT / "docs" / "rules.md").read_text()
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("rule", RULES.values(), ids=lambda r: r.code)
def test_rule_has_docs_with_bad_and_good_snippets(rule):
    assert f"## {rule.code} {rule.name}" in DOCS
    assert rule.bad in DOCS and rule.good in DOCS and rule.bad != rule.good
    assert f"| {rule.name} | {rule.severity} |" in README


def test_codes_and_names_are_unique_and_kebab_case():
    names = [r.name for r in RULES.values()]
    assert len(set(names)) == len(names)
    assert all(n == n.lower() and " " not in n and "_" not in n for n in names)
