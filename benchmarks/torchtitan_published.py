"""Published torchtitan memory against vramlint's estimate, row by row.

Rows: tests/data/published/torchtitan.jsonl, each a published run's layout written as the torchtitan
job file that states it, or (0.3.0's config registry) as its launch line (its source and the quoted
number beside it). torchtitan logs peak
*reserved* memory (metrics.py ``max_reserved``), so the compared estimate is the per-GPU peak less
the CUDA context. Each row's config is written to a temporary TOML and checked as a user's file is.

    python benchmarks/torchtitan_published.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = os.path.join(os.path.dirname(HERE), "tests", "data", "published", "torchtitan.jsonl")
GIB = 2 ** 30
sys.path.insert(0, HERE)
from checked import first_estimate, without_context  # noqa: E402


def toml(config: dict) -> str:
    lines = []
    for section, values in config.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def estimate(row: dict) -> dict | None:
    """A row's job: its TOML job file (0.2.2 and before), or its launch line (0.3.0: ``--module`` /
    ``--config`` with the line's arguments), checked as a user's file is."""
    if "launch" in row:
        return first_estimate("run.sh", "#!/bin/bash\n" + row["launch"] + "\n", row["gpus"])
    return first_estimate("job.toml", toml(row["config"]), row["gpus"])


def main() -> None:
    errors = []
    print(f"{'row':>4} {'measured':>9} {'estimate':>9} {'error':>7}  moment / setup")
    for line in open(ROWS):
        row = json.loads(line)
        found = estimate(row)
        if found is None:
            print(f"{row['id']:>4} {row['measured_gib']:>9.2f} {'-':>9} {'-':>7}  not estimated: {row['quote']}")
            continue
        est = found["estimate"]
        gib = without_context(est) / GIB
        error = (gib - row["measured_gib"]) / row["measured_gib"]
        errors.append(error)
        print(f"{row['id']:>4} {row['measured_gib']:>9.2f} {gib:>9.2f} {error:>+7.1%}  {est['peak_moment']}: "
              f"{row['quote']}")
    if errors:
        print(f"\n{len(errors)} rows: median {statistics.median(errors):+.1%}, median |error| "
              f"{statistics.median(abs(e) for e in errors):.1%}, under -10 %: {sum(e < -0.10 for e in errors)}")


if __name__ == "__main__":
    main()
