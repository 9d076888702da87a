"""ms-swift's own example scripts against vramlint's estimate, each with the memory its first line states.

Rows: tests/data/swift/examples (byte-exact copies of modelscope/ms-swift's examples/train, SOURCES.tsv),
every script that starts one ``swift sft`` / ``swift pt`` job and says on its first line what it took:
``# 22GB``, ``# 27.5GiB * 2``, ``# 2 * 76GiB``. Those are per-GPU figures as nvidia-smi shows them
(the CUDA context and the caching allocator's reserve in), so the whole per-GPU estimate is compared;
"GB" is read as GiB, as nvidia-smi's MiB are. The GPU is an 80 GB card (the largest figures are 76 and
80 GiB), as many as the line says. A script not estimated is printed with why; one with a VL210 /
VL211 (something priced another way) apart from the median.

    python benchmarks/swift_examples.py
"""

from __future__ import annotations

import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(os.path.dirname(HERE), "tests", "data", "swift")
GIB = 2 ** 30
STATED = re.compile(r"#\s*(?:(\d+)\s*\*\s*)?([\d.]+)\s*(?:GiB|GB)(?:\s*\*\s*(\d+))?\s*$")
sys.path.insert(0, HERE)
from checked import first_estimate  # noqa: E402


def rows() -> list[tuple[str, float, int]]:
    """Each example with a stated figure: (its path under tests/data/swift, GiB a GPU, GPUs)."""
    out = []
    with open(os.path.join(ROOT, "SOURCES.tsv")) as handle:
        files = [line.split("\t")[0] for line in handle.read().splitlines()[1:] if line]
    for name in files:
        with open(os.path.join(ROOT, name)) as handle:
            match = STATED.match(handle.readline().strip())
        if match:
            out.append((name, float(match.group(2)), int(match.group(1) or match.group(3) or 1)))
    return out


def main() -> None:
    clean, flagged, missing = [], [], []
    print(f"{'stated':>7} {'estimate':>8} {'error':>7}  example (GiB a GPU)")
    for name, stated, gpus in rows():
        with open(os.path.join(ROOT, name)) as handle:
            text = handle.read()
        entry = first_estimate(os.path.basename(name), text, f"{gpus}xA100-80GB")
        if entry is None:
            missing.append(name)
            print(f"{stated:7.1f} {'-':>8} {'-':>7}  {name}: not estimated")
            continue
        estimate = entry["estimate"]["per_gpu_peak_bytes"] / GIB
        error = (estimate - stated) / stated * 100
        said = sorted({f["code"] for f in entry["findings"] if f["code"] in ("VL210", "VL211")})
        (flagged if said else clean).append(error)
        print(f"{stated:7.1f} {estimate:8.1f} {error:+6.1f}%  {name} x {gpus}"
              + (f" ({', '.join(said)})" if said else ""))
    print(f"\n{len(clean)} estimated as priced: median {statistics.median(clean):+.1f}%, median |error| "
          f"{statistics.median(abs(e) for e in clean):.1f}%, under -10 %: {sum(e < -10 for e in clean)}, over +10 %: "
          f"{sum(e > 10 for e in clean)}; {len(flagged)} with a feature priced another way; {len(missing)} not "
          "estimated")


if __name__ == "__main__":
    main()
