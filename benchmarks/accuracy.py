"""Accuracy against measured GPUs: every record in ../shared/groundtruth/*.jsonl.

For each measured run, build the same setup as a vramlint Plan, predict, and print the measured
``device_used`` (what nvidia-smi shows; what decides OOM) beside the predicted per-GPU peak, and
``max_memory_allocated`` beside the predicted allocated peak. Summary: median |error|, worst
|error|, worst under-prediction.

    python benchmarks/accuracy.py [path/to/groundtruth]
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from vramlint.hardware import Cluster, Gpu
from vramlint.memory import estimate
from vramlint.models.hfconfig import shape_from_dict
from vramlint.plan import Plan

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "groundtruth"
OFFLOAD = {"none": ("none", "none"), "opt": ("cpu", "none"), "opt+param": ("cpu", "cpu")}


@dataclass(frozen=True)
class Row:
    setup: str
    measured: int
    predicted: int
    measured_alloc: int
    predicted_alloc: int
    moment: str
    low: int = 0
    high: int = 0

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured

    @property
    def alloc_error(self) -> float:
        return (self.predicted_alloc - self.measured_alloc) / self.measured_alloc


def plan_for(record: dict) -> Plan:
    """The Plan that describes one measured run exactly as the measuring script ran it."""
    model = shape_from_dict(dict(record["config"]), name=record["model"])
    cluster = Cluster(Gpu("H200", record["gpu_total"]), 1)
    sc = record["scenario"]
    common = dict(model=model, cluster=cluster, seq_len=sc["seq"], attn=record.get("attn_implementation", "sdpa"),
                  grad_checkpointing=bool(sc.get("grad_checkpointing")))
    kind = sc["kind"]
    if kind == "infer_prefill":
        return Plan(**common, precision="bf16", mode="infer", runtime="torch", weights_dtype="bfloat16",
                    micro_batch=sc["batch"])
    if kind == "deepspeed":
        opt, par = OFFLOAD[sc["offload"]]
        # ds_measure.py builds the model on the GPU, then calls deepspeed.initialize (no zero.Init)
        return Plan(**common, precision="bf16", runtime="deepspeed", zero_stage=sc["stage"], micro_batch=sc["micro_batch"],
                    offload_optimizer=opt, offload_param=par, zero_init=False)
    weights = "float32" if kind == "amp_adamw" else "bfloat16"
    # measure.py's reset() empties the cache before each step (ds_measure.py does not)
    return Plan(**common, precision="bf16", runtime="torch", weights_dtype=weights, micro_batch=sc["micro_batch"],
                lora_rank=16 if kind == "lora_bf16" else 0, empty_cache_each_step=True)


def setup_text(record: dict) -> str:
    sc = record["scenario"]
    kind = sc["kind"] if sc["kind"] != "deepspeed" else f"ds-z{sc['stage']}-{sc['offload']}"
    batch = sc.get("micro_batch", sc.get("batch"))
    gc = " gc" if sc.get("grad_checkpointing") else ""
    return f"{record['model']} {kind} b{batch} s{sc['seq']}{gc}"


KINDS = {"infer_prefill", "amp_adamw", "bf16_adamw", "lora_bf16", "deepspeed"}   # what the measuring scripts write


def rows(folder: Path) -> list[Row]:
    out = []
    for path in sorted(folder.glob("h200-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("status") != "ok" or not record.get("model"):
                continue
            if record["scenario"].get("kind") not in KINDS:
                print(f"skipped {record['model']}: scenario kind {record['scenario'].get('kind')!r} is not one "
                      "measure.py or ds_measure.py writes", file=sys.stderr)
                continue
            est = estimate(plan_for(record))
            out.append(Row(setup_text(record), record["device_used"], est.per_gpu_peak,
                           record["peak_allocated"], est.allocated_peak, est.moment, est.low, est.high))
    return out


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else DEFAULT
    table = rows(folder)
    print(f"{'setup':<40} {'measured GB':>11} {'predicted':>10} {'error':>7}   {'alloc meas':>10} {'alloc pred':>10} "
          f"{'error':>7}  peak at")
    for r in table:
        print(f"{r.setup:<40} {r.measured / 1e9:11.2f} {r.predicted / 1e9:10.2f} {r.error:+7.1%}   "
              f"{r.measured_alloc / 1e9:10.2f} {r.predicted_alloc / 1e9:10.2f} {r.alloc_error:+7.1%}  {r.moment}")
    errors = [abs(r.error) for r in table]
    alloc = [abs(r.alloc_error) for r in table]
    print(f"\n{len(table)} runs. device_used: median |error| {statistics.median(errors):.1%}, worst "
          f"{max(errors):.1%}, worst under-prediction {min(r.error for r in table):+.1%}")
    print(f"{'':8}allocated:   median |error| {statistics.median(alloc):.1%}, worst {max(alloc):.1%}, "
          f"worst under-prediction {min(r.alloc_error for r in table):+.1%}")
    inside = sum(r.low <= r.measured <= r.high for r in table)
    print(f"{'':8}device_used inside the predicted low-high band: {inside} of {len(table)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
