"""Megatron-LM's own CI memory measurements against vramlint's estimate, case by case.

Rows: tests/data/megatron/ci (dev/collect_megatron_ci.py; Megatron-LM core_v0.19.0): each H100 test
case's pretrain_gpt.py / pretrain_hybrid.py arguments (model_config.yaml's MODEL_ARGS) on its recipe's nodes x GPUs, and
its golden ``mem-max-allocated-bytes`` (torch's max allocated, the largest over the steps). Megatron
writes those metrics from its last rank (the tensorboard writer is rank world_size - 1,
megatron/training/global_vars.py:217): under pipeline parallelism the last stage's, so the estimate
compared is the last pipeline rank's, less the CUDA context. A case the tool does not estimate is
printed with why; one whose estimate carries a VL210 / VL211 (a feature priced another way) is
printed apart from the median.

    python benchmarks/megatron_ci.py
"""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CI = os.path.join(os.path.dirname(HERE), "tests", "data", "megatron", "ci")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from checked import first_estimate, without_context  # noqa: E402


def recipes() -> dict[str, tuple[int, int, str]]:
    """Each case's nodes, GPUs a node and program (the recipe's TRAINING_SCRIPT_PATH), from the H100
    recipes its folder was collected by."""
    from dev.collect_megatron_ci import LEFT_OUT
    out = {}
    for name in sorted(os.listdir(os.path.join(CI, "recipes"))):
        with open(os.path.join(CI, "recipes", name)) as handle:
            data = yaml.safe_load(handle)
        program = re.search(r"TRAINING_SCRIPT_PATH=([\w./]+)", data["spec"]["script"])
        for product in data.get("products", []):
            for case in product.get("test_case", []):
                for run in product.get("products", [{}]):
                    if "dgx_h100" in str(run.get("platforms", "")) and not any(w in case for w in LEFT_OUT):
                        out[case] = (run.get("nodes", data["spec"]["nodes"]), run.get("gpus", data["spec"]["gpus"]),
                                     program.group(1) if program else "pretrain_gpt.py")
    return out


def line(case: str, gpus: int, program: str = "pretrain_gpt.py") -> str:
    """The program's line the CI runs: MODEL_ARGS, ``true`` a bare flag, each value one word
    (the harness passes them as an array: ``([0]*1+[1]*15)`` is no subshell), the CI's own folders
    (``${DATA_PATH}``) as their names."""
    with open(os.path.join(CI, case, "model_config.yaml")) as handle:
        args = yaml.safe_load(handle).get("MODEL_ARGS") or {}
    words = []
    for key, value in args.items():
        if value is True:
            words.append(key)
        elif isinstance(value, list) or re.fullmatch(r"\[[\w, ]*\]", str(value)):   # nargs '+': a word each
            items = value if isinstance(value, list) else str(value)[1:-1].split(",")
            words += [key, *(shlex.quote(str(item).strip()) for item in items)]
        elif value is not False and value is not None:
            words += [key, shlex.quote(str(value).replace("${", "").replace("}", ""))]
    return f"torchrun --nproc_per_node {gpus} {program} " + " ".join(words) + "\n"


def measured(case: str) -> float | None:
    with open(os.path.join(CI, case, "golden_values_dev_dgx_h100.json")) as handle:
        metric = json.load(handle).get("mem-max-allocated-bytes")
    values = [v for v in (metric or {}).get("values", {}).values() if isinstance(v, (int, float))]
    return max(values) if values else None


def last_rank(text: str, gpus: str, entry: dict) -> int:
    """The estimate of the last pipeline rank (the one Megatron's metrics come from), less the
    CUDA context: the peak's fixed costs with the last rank's largest moment in place of the peak's."""
    from vramlint.checker import check_file
    from vramlint.hardware import parse_gpus
    from vramlint.jobs.result import Context
    from vramlint.memory.training import training_peak
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "train.sh")
        with open(path, "w") as handle:
            handle.write(text)
        plan = check_file(path, Context(parse_gpus(gpus)))[0].plan
    peak, moments, _ = training_peak(plan)
    pp = plan.parallelism.pipeline
    last = [m for m in moments if pp == 1 or m.name.endswith(f"(pipeline rank {pp - 1})")]
    return without_context(entry["estimate"]) - peak.bytes + max(m.bytes for m in last)


def main() -> None:
    clean, flagged, missing = [], [], 0
    print(f"{'measured':>9} {'estimate':>9} {'error':>7}  case (last rank; GB)")
    for case, (nodes, per_node, program) in sorted(recipes().items()):
        if not os.path.exists(os.path.join(CI, case, "model_config.yaml")):
            continue
        value = measured(case)
        if value is None:
            continue
        gpus = f"{nodes}x{per_node}xH100" if nodes > 1 else f"{per_node}xH100"
        text = line(case, per_node, program)
        entry = first_estimate("train.sh", text, gpus)
        if entry is None:
            missing += 1
            print(f"{value / 1e9:9.2f} {'-':>9} {'-':>7}  {case}: not estimated")
            continue
        estimate = last_rank(text, gpus, entry)
        error = (estimate - value) / value * 100
        said = sorted({f["code"] for f in entry["findings"] if f["code"] in ("VL210", "VL211")})
        (flagged if said else clean).append(error)
        print(f"{value / 1e9:9.2f} {estimate / 1e9:9.2f} {error:+6.1f}%  {case}" + (f" ({', '.join(said)})" if said else ""))
    print(f"\n{len(clean)} rows estimated as priced: median {statistics.median(clean):+.1f}%, median |error| "
          f"{statistics.median(abs(e) for e in clean):.1f}%, under -10 %: {sum(e < -10 for e in clean)}, over +10 %: "
          f"{sum(e > 10 for e in clean)}; {len(flagged)} with a feature priced another way (VL210 / VL211); "
          f"{missing} not estimated")


if __name__ == "__main__":
    main()
