"""The search for what would fit (memory/fit.py) gives the hints recorded in
tests/data/golden/hints.json (reviewed by reading; recorded with the search that walked down from
the tensors' bound one replay at a time, before the replay-guided guess of ``fit._nearest``) on
every golden case: the corpus DeepSpeed and Accelerate files as 8 x H100 training Llama-3.1-70B
and as one H100 training Llama-3.1-8B, at 4,096 tokens, and every example with its README command
(an example added later is recorded, read, when it is added: examples/launch's two)."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import CORPUS, DATA, ROOT, shared_or_skip

sys.path.insert(0, str(ROOT / "dev"))
from golden_hints import cases, hints  # noqa: E402

GOLDEN = json.loads((DATA / "golden" / "hints.json").read_text())
CASES = cases(str(CORPUS)) if CORPUS.is_dir() else {}


def test_the_golden_set_searches_much():
    assert len(GOLDEN) >= 150 and sum("nodes x" in hint for found in GOLDEN.values() for hint in found) >= 50


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_case_hints(name):
    shared_or_skip(CORPUS)
    assert hints(CASES[name]) == GOLDEN[name]


def test_cases_without_hints_still_have_none():
    """A case the golden file leaves out had no hint: it still has none (a search that found a
    change where the old one found nothing would be a changed answer too)."""
    shared_or_skip(CORPUS)
    quiet = sorted(set(CASES) - set(GOLDEN))
    assert len(quiet) >= 40
    assert [name for name in quiet if hints(CASES[name])] == []
