"""Published Megatron-LM memory against vramlint's estimate, row by row.

Rows: tests/data/published/megatron.jsonl, each a published run's arguments (its source and the
quoted memory line beside them). Megatron's ``report_memory`` prints torch's max allocated and max
reserved in MiB (megatron/training/utils/common_utils.py:313-334) on every data-parallel rank 0;
each row keeps the largest over the ranks printed. Each row is written as the launch line that
states it (``torchrun --nproc_per_node N pretrain_gpt.py --flag value ...``) and checked as a user's
script is. The estimate compared is the per-GPU peak less the CUDA context (which torch's counters
do not see); Megatron's reserve is not replayed, so the error is printed against both counters.

    python benchmarks/megatron_published.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = os.path.join(os.path.dirname(HERE), "tests", "data", "published", "megatron.jsonl")
MIB = 2 ** 20
sys.path.insert(0, HERE)
from checked import first_estimate, without_context  # noqa: E402


def script(row: dict) -> str:
    """The launch line the row's arguments make (GPUs per node from its --gpus)."""
    per_node = row["gpus"].split("x")[-2]
    words = [f"--{key}" if value is True else f"--{key} {value}" for key, value in row["args"].items()]
    return f"torchrun --nproc_per_node {per_node} pretrain_gpt.py " + " ".join(words) + "\n"


def estimate(row: dict) -> dict | None:
    return first_estimate("train.sh", script(row), row["gpus"])


def main() -> None:
    allocated, reserved = [], []
    print(f"{'row':>4} {'max alloc':>9} {'max resv':>9} {'estimate':>9} {'vs alloc':>8} {'vs resv':>8}  moment: name")
    for line in open(ROWS):
        row = json.loads(line)
        found = estimate(row)
        if found is None:
            print(f"{row['id']:>4} {row['max_allocated_mib']:>9.0f} {row['max_reserved_mib']:>9.0f} {'-':>9}   "
                  f"not estimated: {row['name']}")
            continue
        est = found["estimate"]
        mib = without_context(est) / MIB
        a = (mib - row["max_allocated_mib"]) / row["max_allocated_mib"]
        r = (mib - row["max_reserved_mib"]) / row["max_reserved_mib"]
        allocated.append(a)
        reserved.append(r)
        print(f"{row['id']:>4} {row['max_allocated_mib']:>9.0f} {row['max_reserved_mib']:>9.0f} {mib:>9.0f} "
              f"{a:>+8.1%} {r:>+8.1%}  {est['peak_moment']}: {row['name']} ({row['confidence']})")
    for name, errors in (("max allocated", allocated), ("max reserved", reserved)):
        if errors:
            print(f"vs {name}: {len(errors)} rows, median {statistics.median(errors):+.1%}, median |error| "
                  f"{statistics.median(abs(e) for e in errors):.1%}, under -10 %: {sum(e < -0.10 for e in errors)}")


if __name__ == "__main__":
    main()
