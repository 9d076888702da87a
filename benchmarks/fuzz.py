"""Fuzz: per family of tests/fuzzing.py, how many cases ran, how many kinds of failure, and what one
input costs — the median, 99th percentile and slowest case's wall time, and the family process's
memory high-water mark above its start. The promise is 2 s and 500 MB for any one input; the tests
assert the memory and the absence of failures, never the times.

    python benchmarks/fuzz.py [CASES_PER_FAMILY]     (default 200)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from fuzzing import FAMILIES  # noqa: E402


def main() -> None:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"{'family':<12} {'cases':>6} {'failures':>8} {'median s':>9} {'p99 s':>7} {'slowest s':>9} "
          f"{'RSS +MB':>8}  slowest case")
    for family in sorted(FAMILIES):
        proc = subprocess.run([sys.executable, str(ROOT / "tests" / "fuzzing.py"), family, str(cases), "7"],
                              capture_output=True, text=True, cwd=ROOT)
        if proc.returncode:
            print(f"{family:<12} failed to run: {proc.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(proc.stdout)
        slowest, case = r["slowest"]
        argv = " ".join(case["argv"])[:60] if case else ""
        print(f"{family:<12} {r['cases']:>6} {len(r['failures']):>8} {r['median_s']:>9.3f} {r['p99_s']:>7.3f} "
              f"{slowest:>9.3f} {r['rss_growth'][0] >> 20:>8}  {argv}")


if __name__ == "__main__":
    main()
