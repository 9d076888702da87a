"""LitGPT's published peak memory (config_hub/finetune/README.md, v0.5.13) against vramlint's
estimate of the same config files, row by row.

Rows: tests/data/published/litgpt.jsonl; each names a config of LitGPT's config_hub (byte-exact in
tests/data/litgpt/config_hub, v0.5.13) and the machine it ran on. The scripts print
``torch.cuda.max_memory_allocated() / 1e9`` (litgpt/utils.py:861), so the estimate compared is the
per-GPU peak less the CUDA context and the allocator's reserve (neither is allocated memory) and
less what bitsandbytes' paged optimizer keeps in unified memory. A config runs on its own
``devices`` whatever the machine has: a 4xA10G row of a ``devices: 1`` config is a one-GPU run,
counted once. A row whose peak is below the weights, gradients and optimizer states any run of
that config holds at once cannot be a measurement of it (the full fine-tunes of 1-4B models at
8 B a parameter on one A10G): printed, not counted. OOM rows are checked as verdicts.

    python benchmarks/litgpt_published.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROWS = os.path.join(ROOT, "tests", "data", "published", "litgpt.jsonl")
CONFIGS = os.path.join(ROOT, "tests", "data", "litgpt", "config_hub", "finetune")
NOT_ALLOCATED = ("CUDA context", "allocator reserve")
STATES = ("weights", "gradients", "accumulated gradients", "optimizer states", "LoRA adapters")  # torch runtime's
sys.path.insert(0, HERE)
from checked import first_estimate  # noqa: E402


# The table's runs (2024-04 to 2024-09) installed LitGPT's own pin: pyproject.toml at the table's last
# change (00af8b0d) has ``bitsandbytes==0.42.0`` (its lora.py still warns "LitGPT only supports
# bitsandbytes v0.42.0"), the release whose MatMul4Bit keeps each 4-bit linear's input.
STACK = {"requirements.txt": "bitsandbytes==0.42.0\n"}


def estimate(row: dict) -> dict | None:
    """The row's file checked on the table's card named without a count: the file's own ``devices``
    are the GPUs the run used (phi-2's and StableLM's full fine-tunes ran ``devices: 2`` on the
    4 x A10G machine the table names), as ``--gpus A10G`` lets a file state them."""
    card = row["machine"].split("x", 1)[1]
    with open(os.path.join(CONFIGS, row["config"])) as handle:
        return first_estimate(os.path.basename(row["config"]), handle.read(), card, STACK)


def allocated(est: dict) -> int:
    """The estimate as torch's max allocated counts it."""
    return sum(c["bytes"] for c in est["components"]
               if not c["name"].startswith(NOT_ALLOCATED) and c.get("where", "gpu") == "gpu")


def states(est: dict) -> int:
    return sum(c["bytes"] for c in est["components"] if c["name"].startswith(STATES) and c.get("where", "gpu") == "gpu")


def main() -> None:
    errors, verdicts = [], []
    print(f"{'row':<34} {'GB':>6} {'est GB':>7} {'error':>7}  note")
    for line in open(ROWS):
        row = json.loads(line)
        if row["copy_of_one_gpu_row"]:
            continue
        found = estimate(row)
        if found is None:
            print(f"{row['id']:<34} {'':>6} {'-':>7}  not estimated")
            continue
        est = found["estimate"]
        gb = allocated(est) / 1e9
        if row["oom"]:
            fits = not any(f["code"] == "VL201" for f in found["findings"])
            verdicts.append(not fits)
            said = "fits" if fits else "VL201, over the card"
            print(f"{row['id']:<34} {'OOM':>6} {gb:>7.2f} {'':>7}  vramlint: {said}")
            continue
        floor = states(est) / 1e9
        if row["peak_gb"] < floor:
            print(f"{row['id']:<34} {row['peak_gb']:>6.2f} {gb:>7.2f} {'':>7}  below the states any run holds "
                  f"({floor:.2f} GB): not counted")
            continue
        error = gb / row["peak_gb"] - 1
        errors.append(error)
        print(f"{row['id']:<34} {row['peak_gb']:>6.2f} {gb:>7.2f} {error:>+7.1%}  {est['peak_moment']}")
    print(f"{len(errors)} rows: median {statistics.median(errors):+.1%}, median |error| "
          f"{statistics.median(abs(e) for e in errors):.1%}, under -10 %: {sum(e < -0.10 for e in errors)}; "
          f"OOM verdicts right: {sum(verdicts)} of {len(verdicts)}")


if __name__ == "__main__":
    main()
