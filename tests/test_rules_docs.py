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


def test_the_registry_names_every_rule_module_and_a_check_loads_only_what_its_file_needs():
    """RULES is built from rules.MODULES when first read: a module left out of it would drop its
    rules from --select, `vramlint rule` and SARIF without a word. A DeepSpeed file's check loads
    neither the registry nor LLaMA-Factory's, the recipes' or vLLM's rules."""
    import subprocess
    import sys
    import vramlint.rules as rules
    files = {p.stem for p in (ROOT / "vramlint" / "rules").glob("*.py")} - {"__init__", "base"}
    assert set(rules.MODULES) == files
    assert {rule.code for module in rules.MODULES
            for rule in __import__(f"vramlint.rules.{module}", fromlist=["RULES"]).RULES} == set(RULES)
    probe = ("import sys, io; from vramlint import cli; sys.stdout = io.StringIO()\n"
             "try: cli.main(['check', 'examples/llama8b-zero3-8xh100.json', '--gpus', '8xH100', '--model', "
             "'meta-llama/Llama-3.1-8B', '--format', 'json'])\nexcept SystemExit: pass\n"
             "sys.stdout = sys.__stdout__; print(' '.join(sorted(m for m in sys.modules if m.startswith('vramlint.'))))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split())
    assert "vramlint.rules.batch" in loaded
    assert not loaded & {"vramlint.rules.llamafactory", "vramlint.rules.recipe", "vramlint.rules.serving",
                         "vramlint.readers.vllm", "vramlint.rules.scripts"}
