"""Every example setup gives the verdict examples/cases.json records, and the README shows it."""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLES, ROOT
from vramlint.cli import main

CASES = json.loads((EXAMPLES / "cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_example_verdict(case, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    estimate = case["argv"][0] == "estimate"
    code = main(case["argv"] + ["--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == case["exit"]
    if estimate:
        assert out["fits"] is case["fits"]
    else:
        codes = {f["code"] for entry in out["files"] for f in entry["findings"]}
        assert (case.get("finding") in codes) if case.get("finding") else not codes


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_example_is_shown_in_the_readmes(case):
    command = "vramlint " + " ".join(case["argv"])
    assert command in (EXAMPLES / "README.md").read_text()
    assert case["name"] in (ROOT / "README.md").read_text()


def test_there_are_at_least_eight_examples():
    assert len(CASES) >= 8


def test_the_readme_first_screen_shows_what_the_command_prints(capsys, monkeypatch):
    """The README's opening console block is real output: its command, run here, prints each of
    its lines (the text report is wide enough not to wrap them)."""
    import shlex

    text = (ROOT / "README.md").read_text()
    block = text.split("```console\n", 1)[1].split("```", 1)[0].splitlines()
    command, shown = block[0], block[1:]
    assert command.startswith("$ vramlint check ") and shown
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "400")
    main(shlex.split(command[2:])[1:] + ["--format", "text"])     # as a terminal shows it, in CI too
    printed = capsys.readouterr().out.splitlines()
    for line in shown:
        assert line in printed
