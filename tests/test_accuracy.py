"""The accuracy benchmark as a regression guard: vramlint against every measured H200 run."""

from __future__ import annotations

import statistics
import sys

from conftest import ROOT, SHARED, shared_or_skip

sys.path.insert(0, str(ROOT / "benchmarks"))
from accuracy import rows  # noqa: E402


def test_median_error_on_measured_runs_is_within_three_percent():
    table = rows(shared_or_skip(SHARED / "groundtruth"))
    assert len(table) >= 50
    assert statistics.median(abs(r.error) for r in table) <= 0.03
    assert statistics.median(abs(r.alloc_error) for r in table) <= 0.02


def test_the_band_holds_the_measurement_for_nine_runs_in_ten_and_every_deepspeed_run():
    table = rows(shared_or_skip(SHARED / "groundtruth"))
    inside = [r.low <= r.measured <= r.high for r in table]
    assert sum(inside) >= 0.9 * len(table)
    assert all(ok for r, ok in zip(table, inside) if "ds-z" in r.setup)
