"""Online-RL fits / OOM reports (OpenRLHF train_ppo_ray, verl main_ppo) vs `vramlint check`.

Reads tests/data/published/rl_reports.jsonl: one published report per line, with the launch
command it ran (verbatim where the source shows it; else what the row's "assumed" says was
filled in), the GPU, the outcome ("fits": it ran, or its maintainers state it runs; "oom": GPU
out of memory) and a catalog model standing in for the one named where that one is not in the
offline catalog (same shapes; the row says which). Each command is written to a scratch script
and checked in-process:

    vramlint check run.sh --gpus GPU --model STANDIN --format json

  verdict   "oom" where any job of the command (the actor's GPUs, the critic's, the reference's,
            the reward model's) peaks over the GPU or its vLLM engines refuse to start (their vllm
            serve check), "fits" where all are estimated and fit, "n/a" where a job is not estimated
            (its finding is shown: a launch vramlint does not read is VL011, never a pass)
  right     verdict == the reported outcome; "n/a" rows are counted apart
  peak      each estimated job's per-GPU peak / the GPU's memory, GiB, and the moment it is at

Reports left out (host-RAM OOM, GPU type not stated, no flags visible) are in
rl_reports_skipped.jsonl with why. Run from the repository:
    python benchmarks/rl_reports.py [--jsonl PATH]
"""
import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GIB = 2 ** 30
sys.path.insert(0, ROOT)
from vramlint.cli import main as vramlint_main  # noqa: E402

# The GPU names the reports use -> vramlint's
GPUS = {"RTX-4090-24GB": "RTX-4090", "H20-96GB": "H20"}

# Why vramlint's verdict differs from the report, where it does (a wrong row without an entry is
# flagged as unexplained)
WHY = {
    "openrlhf-776": (
        "Not the step's GPU memory: 70B ZeRO-3 with --adam_offload over the actor's 32 GPUs needs ~15 GiB each, "
        "and the reporter adds that an 8B Llama OOMs with the same flags; the failure is outside what the flags "
        "price (no log of its phase)."),
    "tinyzero-30-3b-2xh100": (
        "Unexplained, and the command is assumed (the README's 3B block; the user's overrides are not shown): "
        "vramlint's 67.5 GiB at the rollout is under the 80 GB card. A reply says the authors reproduced 3B on "
        "H200s (141 GB) with the defaults."),
    "tinyzero-105-3b-8xv100": (
        "Unexplained: vramlint's 20.1 GiB at the rollout is under the V100's 31.7. The V100 has no bf16 and no "
        "flash-attention 2, so the run took code paths its config does not state; not checked."),
}
# Rows whose verdict turns on sequence lengths: verl packs each micro-batch's own tokens
# (use_remove_padding) and vramlint prices every sequence at its cap (prompt + response); the
# reports ran GSM8K / math prompts whose responses are far shorter than the cap
CAP = ("verl-tuning-",)
CAP_WHY = ("Sequence lengths, most likely: vramlint prices every sequence at max_prompt_length + "
           "max_response_length (the cap, the worst case); the run packed its GSM8K sequences' own tokens "
           "(use_remove_padding), far fewer than the cap.")


# The GPU groups a command's results name (readers/openrlhf_ppo.py): the first is the actor's
ROLES = ("critic", "reference", "reward model", "vLLM engines")


def check(row):
    """The row's command checked as a script on its GPUs: (jobs, error) where each job is
    (role, status, peak_bytes, gpu_bytes, moment, codes)."""
    folder = tempfile.mkdtemp(prefix="rl-report-")
    path = os.path.join(folder, "run.sh")
    with open(path, "w") as handle:
        handle.write(row["command"])
    out, err = io.StringIO(), io.StringIO()
    args = ["check", path, "--gpus", GPUS.get(row["gpu"], row["gpu"]), "--format", "json"]
    args += ["--model", row["model_standin"]] if row.get("model_standin") else []
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            vramlint_main(args)
        except SystemExit:
            pass
    text = out.getvalue().strip()
    if not text.startswith("{"):
        return [], err.getvalue().strip().splitlines()[-1:] or ["no output"]
    jobs = []
    for f in json.loads(text)["files"]:
        role = (f.get("via") or "").split(",")[-1].strip()
        role = role if role in ROLES else "actor"
        e, serving = f.get("estimate"), f.get("serving")
        codes = sorted({x["code"] for x in f["findings"] if x["severity"] == "error" and x["code"] != "VL201"})
        if e:
            jobs.append((role, "estimated", e["per_gpu_peak_bytes"], f["gpus"]["memory_bytes"],
                         e.get("peak_moment", ""), codes))
        elif serving and f["status"] == "estimated":     # the engines' vllm serve: over where vLLM refuses to start
            refused = any(x["severity"] == "error" and x["code"].startswith("VL2") for x in f["findings"])
            kv = serving["kv_cache_bytes"]
            jobs.append((role, "estimated", 2 if refused else 0, 1, f"KV cache {kv / GIB:.1f} GiB", codes))
        else:
            jobs.append((role, f["status"], 0, 0, "", codes))
    return jobs, None


def verdict(jobs):
    if not jobs or any(status != "estimated" for _, status, *_ in jobs):
        return "n/a"
    return "oom" if any(peak > gpu for _, _, peak, gpu, _, _ in jobs) else "fits"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jsonl", default=os.path.join(ROOT, "tests", "data", "published", "rl_reports.jsonl"))
    opts = parser.parse_args()
    rows = [json.loads(line) for line in open(opts.jsonl, encoding="utf-8") if line.strip()]
    counts = {"right": 0, "wrong": 0, "n/a": 0}
    wrong = []
    print(f"{'report':<38} {'GPU':<10} {'reported':<8} {'vramlint':<8} {'':<5} "
          "peaks (GiB per GPU, job: peak/GPU @moment)")
    for row in rows:
        jobs, error = check(row)
        said = verdict(jobs)
        mark = "n/a" if said == "n/a" else ("ok" if said == row["outcome"] else "WRONG")
        counts["n/a" if said == "n/a" else ("right" if mark == "ok" else "wrong")] += 1
        if mark == "WRONG":
            wrong.append(row["id"])
        peaks = "; ".join(f"{role} {moment}" + (" (refused)" if peak > gpu else "") if role == "vLLM engines" and
                          status == "estimated" else f"{role} {peak / GIB:.1f}/{gpu / GIB:.1f} @{moment}"
                          if status == "estimated"
                          else f"{role} {status} {','.join(codes)}" for role, status, peak, gpu, moment, codes in jobs)
        print(f"{row['id']:<38} {row['gpu']:<10} {row['outcome']:<8} {said:<8} {mark:<5} {peaks or error}")
    judged = counts["right"] + counts["wrong"]
    print(f"\n{len(rows)} reports: {counts['right']} of {judged} judged right, {counts['wrong']} wrong, "
          f"{counts['n/a']} not estimated (a finding says why; none passed in silence)")
    for name in wrong:
        why = WHY.get(name) or (CAP_WHY if name.startswith(CAP) else "UNEXPLAINED")
        print(f"  {name}: {why}")


if __name__ == "__main__":
    main()
