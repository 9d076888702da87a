"""The fuzz run (tests/fuzzing.py): real configs, recipes, model configs and settings mutated,
hostile documents, command lines of every command at their edges (with standard output closed,
full or ASCII-only) and filesystem oddities. Every case must end with exit 0, 1 or 2, no
traceback, no internal error, a word on exit 2, no control sequence in what it prints, inside the
hang guard, and each family's process must stay under 500 MB above its start.

The normal suite runs 1,000 cases; ``pytest -m fuzz`` runs 12,000 (the marker's tests only).
Times and memory per case are printed by ``benchmarks/fuzz.py``, not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from fuzzing import FAMILIES, SHARES

MOST_RSS_GROWTH = 500 << 20


def _run(family: str, cases: int, start: int) -> dict:
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "fuzzing.py"), family, str(cases), str(start)],
                          capture_output=True, text=True, cwd=ROOT, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _assert_kept(report: dict) -> None:
    failures = "\n".join(f"{f['problem']}\n  case: {json.dumps(f['case'])[:1500]}\n  stderr: {f['stderr'][-300:]}"
                         for f in report["failures"])
    assert not report["failures"], f"{report['family']}: {len(report['failures'])} kinds of failure\n{failures}"
    growth, case = report["rss_growth"]
    assert growth < MOST_RSS_GROWTH, f"{report['family']}: {growth >> 20} MB above the start, case {case}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fuzz_1000_cases(family):
    report = _run(family, max(10, round(1000 * SHARES[family])), start=0)
    assert report["cases"] >= 10
    _assert_kept(report)


@pytest.mark.fuzz
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fuzz_12000_cases(family):
    report = _run(family, round(12_000 * SHARES[family]), start=1)
    _assert_kept(report)
