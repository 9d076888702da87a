"""Acceptance: every real DeepSpeed, Accelerate and vLLM file of the corpus gives the findings recorded
(and reviewed by reading) in tests/data/golden/corpus_findings.json — codes, severities and the
line:column of the key to edit — checked as 8 x H100 training Llama-3.1-8B at 2,048 tokens."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import CORPUS, DATA, ROOT, shared_or_skip

sys.path.insert(0, str(ROOT / "dev"))
from golden_corpus import findings  # noqa: E402

GOLDEN = json.loads((DATA / "golden" / "corpus_findings.json").read_text())


def test_golden_set_is_large_enough():
    assert len(GOLDEN) >= 100 and sum(1 for v in GOLDEN.values() if v) >= 30


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_corpus_file_findings(name):
    path = shared_or_skip(CORPUS / name)
    assert findings(path) == GOLDEN[name]
