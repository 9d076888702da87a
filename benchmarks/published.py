"""Published-measurement benchmark for vramlint.

Reads published.jsonl (one published peak GPU-memory measurement per line, with
the vramlint argument list that expresses its setup), runs vramlint's estimate
in-process for each, and prints a table and summary.

Data: tests/data/published/measurements.jsonl (each row's source link and the quoted number;
skipped.jsonl says why the rows that are not estimated are not). Run from the repository:
    python benchmarks/published.py [--jsonl PATH] [--csv OUT]

Which prediction is compared:
  * measured_kind == "allocated"  -> allocated_peak_bytes (tensors only: torch.cuda.max_memory_allocated)
  * every other kind (reserved, active, nvidia-smi, unspecified) -> per_gpu_peak_bytes, as is
    (it includes the allocator reserve and the CUDA context / NCCL components).
  An extra column "pred-ctx" shows per_gpu_peak_bytes minus vramlint's "CUDA context ..."
  component(s), i.e. the prediction of torch's max_memory_reserved; it is informational
  and only summarised separately, never used for the main error column.

error % = (pred - meas) / meas.  "below" = pred more than 10 % under meas (an OOM risk).
A row is flagged (*) when its setup turns on something vramlint has no flag for
(field "features": liger, chunked CE, compile, optimizer in backward, activation
offloading, paged optimizer, DoRA, ...).
"""
import argparse
import contextlib
import io
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 2 ** 30

sys.path.insert(0, os.path.dirname(HERE))
from vramlint.cli import main as vramlint_main  # noqa: E402


def estimate(args):
    """Run `vramlint estimate ARGS --format json` in-process; return (json, stderr, rc)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = vramlint_main(["estimate", *args, "--format", "json"])
    text = out.getvalue().strip()
    data = json.loads(text) if text.startswith("{") else None
    return data, err.getvalue(), rc


def context_bytes(data):
    return sum(c["bytes"] for c in data.get("components", [])
               if c["name"].lower().startswith("cuda context") and c.get("where", "gpu") == "gpu")


def group(args, data):
    """A coarse bucket for the breakdown: multi-GPU adapters under a sharding runtime vs the rest."""
    n = int(data.get("gpus", {}).get("count", 1))
    rt = args[args.index("--runtime") + 1] if "--runtime" in args else "torch"
    adapter = "--lora-rank" in args
    if n > 1 and rt in ("fsdp", "deepspeed") and adapter:
        return "multi-GPU LoRA/QLoRA, FSDP or ZeRO-3"
    if n > 1 and rt in ("fsdp", "deepspeed"):
        return "multi-GPU full FT, FSDP"
    if rt == "fsdp":
        return "1-GPU under FSDP"
    return "single GPU, plain torch"


def summarise(label, errs):
    if not errs:
        return f"{label:<44} n=0"
    abs_e = [abs(e) for e in errs]
    below = sum(1 for e in errs if e < -10)
    above = sum(1 for e in errs if e > 10)
    within = sum(1 for e in errs if abs(e) <= 10)
    return (f"{label:<44} n={len(errs):>3}  median |err| {statistics.median(abs_e):5.1f} %  "
            f"median err {statistics.median(errs):+6.1f} %  >10% below: {below:>2}  "
            f">10% above: {above:>2}  within 10%: {within:>2}")


# A row's features that vramlint has flags for (the rest stay "not modelled"): the flags they add.
FEATURE_FLAGS = {"liger_flce": ["--loss", "liger"], "cce": ["--loss", "cce"], "chunked_ce": ["--loss", "chunked"],
                 "paged_optimizer": ["--paged-optimizer"], "optimizer_in_bwd": ["--optimizer-in-bwd"],
                 "activation_offloading": ["--activation-offload"], "dora": ["--dora"]}


def with_features(args, features):
    """The row's arguments with its modelled features' flags, and the features left unmodelled."""
    extra, left = [], []
    for feature in features:
        if feature in FEATURE_FLAGS and not any(flag in args for flag in FEATURE_FLAGS[feature][:1]):
            extra += FEATURE_FLAGS[feature]
        elif feature not in FEATURE_FLAGS:
            left.append(feature)
    if "compile" in features and "chunked_ce" in features:      # torchtune compiles the chunked loss
        extra = [a if a != "chunked" else "chunked-compiled" for a in extra]
        left.remove("compile")
    return list(args) + extra, left


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jsonl", default=os.path.join(os.path.dirname(HERE), "tests", "data", "published", "measurements.jsonl"))
    ap.add_argument("--csv", help="also write the per-row results as CSV here")
    opts = ap.parse_args()

    rows = [json.loads(l) for l in open(opts.jsonl) if l.strip()]
    results, failures = [], []
    for r in rows:
        args, unmodelled = with_features(r["args"], r.get("features") or [])
        data, err, rc = estimate(args)
        if data is None:
            failures.append((r["id"], rc, err.strip()[-300:]))
            continue
        kind = r["measured_kind"]
        if kind == "allocated":
            field, pred_b = "allocated", data["allocated_peak_bytes"]
        else:
            field, pred_b = "per_gpu", data["per_gpu_peak_bytes"]
        pred = pred_b / GIB
        pred_noctx = (data["per_gpu_peak_bytes"] - context_bytes(data)) / GIB
        meas = float(r["measured_gib"])
        results.append(dict(
            id=r["id"], setup=r["setup"], features=unmodelled, kind=kind, field=field,
            meas=meas, pred=pred, err=100.0 * (pred - meas) / meas,
            pred_noctx=pred_noctx, err_noctx=100.0 * (pred_noctx - meas) / meas,
            low=data.get("per_gpu_low_bytes", 0) / GIB, high=data.get("per_gpu_high_bytes", 0) / GIB,
            fits=data.get("fits"), framework=r.get("framework", ""), caveats=r.get("caveats") or [],
            group=group(r["args"], data)))

    # ---- table ----
    print("vramlint vs published peak GPU memory (GiB per GPU)")
    print("compare: kind 'allocated' -> allocated_peak_bytes; all other kinds -> per_gpu_peak_bytes (nothing subtracted)")
    print("pred-ctx = per_gpu_peak_bytes minus the CUDA-context component (informational: a max_memory_reserved-like number)")
    print("* = the run uses something vramlint has no flag for (see features)")
    print("! = a caveat on the measurement or on the versions (see caveats); such rows still count as 'without features'\n")
    hdr = f"{'':2}{'id':<66} {'kind':<11} {'cmp':<9} {'meas':>7} {'pred':>7} {'err%':>7} {'pred-ctx':>8} {'err%':>7}"
    print(hdr)
    print("-" * len(hdr))
    for x in results:
        flag = ("*" if x["features"] else " ") + ("!" if x["caveats"] else " ")
        print(f"{flag}{x['id']:<66} {x['kind']:<11} {x['field']:<9} {x['meas']:7.2f} {x['pred']:7.2f} "
              f"{x['err']:+7.1f} {x['pred_noctx']:8.2f} {x['err_noctx']:+7.1f}")
        print(f"    setup: {x['setup']}")
        if x["features"]:
            print(f"    features not modelled: {', '.join(x['features'])}")
        for c in x["caveats"]:
            print(f"    caveat: {c}")
    if failures:
        print("\nFAILED to estimate:")
        for f in failures:
            print("  ", f)

    # ---- summary ----
    clean = [x for x in results if not x["features"]]
    print("\nSummary (error % = (pred - meas) / meas; 'below' = pred more than 10 % under meas)")
    print(summarise("all rows", [x["err"] for x in results]))
    print(summarise("rows without unmodelled features", [x["err"] for x in clean]))
    print(summarise("rows with unmodelled features (*)", [x["err"] for x in results if x["features"]]))
    print(summarise("rows without features and without caveats", [x["err"] for x in clean if not x["caveats"]]))
    print()
    for kind in ["allocated", "reserved", "active", "nvidia-smi", "unspecified"]:
        sub = [x for x in results if x["kind"] == kind]
        if sub:
            print(summarise(f"kind={kind} (all)", [x["err"] for x in sub]))
            subc = [x for x in sub if not x["features"]]
            print(summarise(f"kind={kind} (no unmodelled features)", [x["err"] for x in subc]))
    print()
    for g in sorted({x["group"] for x in results}):
        sub = [x for x in results if x["group"] == g and not x["features"]]
        print(summarise(f"{g} (no features)", [x["err"] for x in sub]))
    print()
    rsv = [x for x in results if x["kind"] in ("reserved", "active")]
    print(summarise("reserved/active vs pred-ctx (all)", [x["err_noctx"] for x in rsv]))
    print(summarise("reserved/active vs pred-ctx (no features)",
                    [x["err_noctx"] for x in rsv if not x["features"]]))

    print("\nWorst 10 by |error| (all rows):")
    for x in sorted(results, key=lambda x: -abs(x["err"]))[:10]:
        flag = ("*" if x["features"] else " ") + ("!" if x["caveats"] else " ")
        print(f" {flag} {x['err']:+7.1f}%  meas {x['meas']:6.2f}  pred {x['pred']:6.2f}  {x['id']}")
    print("\nWorst 10 by |error| (rows without unmodelled features):")
    for x in sorted(clean, key=lambda x: -abs(x["err"]))[:10]:
        flag = " " + ("!" if x["caveats"] else " ")
        print(f" {flag} {x['err']:+7.1f}%  meas {x['meas']:6.2f}  pred {x['pred']:6.2f}  {x['id']}")
    print(f"\n{len(results)} rows estimated, {len(failures)} failed, from {opts.jsonl}")

    if opts.csv:
        import csv
        with open(opts.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "kind", "compared", "measured_gib", "predicted_gib", "error_pct",
                        "pred_minus_ctx_gib", "error_pct_minus_ctx", "features", "caveats", "setup"])
            for x in results:
                w.writerow([x["id"], x["kind"], x["field"], f"{x['meas']:.3f}", f"{x['pred']:.3f}",
                            f"{x['err']:.2f}", f"{x['pred_noctx']:.3f}", f"{x['err_noctx']:.2f}",
                            ";".join(x["features"]), " | ".join(x["caveats"]), x["setup"]])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
