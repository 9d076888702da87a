"""NeMo 1.x Megatron GPT configs read as the Megatron-core job they are, with NeMo's own optimizer
states (readers/nemo.py; memory/runtimes/megatron/states.py).

Files (tests/data/nemo/SOURCES.tsv, byte-exact): NeMo's megatron_gpt_config.yaml at v1.23.0 (O2 off,
precision 16, legacy modules) and at its last snapshot (O2, bf16, FusedAdam); its fine-tuning config
(the model is a .nemo checkpoint's); the NeMo-Framework-Launcher's GPT-3 5B (``${multiply:...}``),
Llama-2 7B (a SentencePiece file) and Llama-3 8B (Megatron-core's distributed optimizer, CP 2)
training configs; Google's gpu-recipes A4 Llama-3.1 70B and 405B configs (Apex's distributed Adam);
MLPerf Training v4.0's Llama-2 70B LoRA config (every layout key from the environment) and its GPT-3
config (a Hydra composition over NeMo's).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vramlint.memory.runtimes.megatron.states import megatron_states

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "nemo"


def _check(path, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", str(path), "--format", "json", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode in (0, 1, 2), proc.stderr
    return json.loads(proc.stdout)["files"][0]


def _parts(entry: dict) -> dict[str, dict]:
    return {c["name"]: c for c in entry["estimate"]["components"]}


def _finding(entry: dict, code: str) -> dict:
    return next(f for f in entry["findings"] if f["code"] == code)


def _plan(path: Path, gpus: str):
    """The plan vramlint makes of the file (through the CLI's own path), as one TP rank holds it."""
    from vramlint.checker import check_file
    from vramlint.hardware import parse_gpus
    from vramlint.jobs.result import Context
    plan = check_file(str(path), Context(parse_gpus(gpus), stated=frozenset({"gpus"})))[0].plan
    return plan.with_changes(model=plan.model.tp_local(plan.tensor_parallel, plan.tp_split))     # a TP rank's


def _changed(tmp_path: Path, name: str, **model) -> Path:
    """A copy of a test file with ``model.<key>`` values changed (the rest as written)."""
    data = yaml.safe_load((DATA / name).read_text())
    for key, value in model.items():
        node = data["model"]
        *parents, last = key.split("__")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    out = tmp_path / name
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def test_the_files_are_their_sources():
    rows = list(csv.DictReader((DATA / "SOURCES.tsv").open(), delimiter="\t"))
    assert len(rows) == 10
    for row in rows:
        assert (DATA / row["file"]).is_file(), row["file"]
        assert row["commit"] in row["url"] and row["url"].endswith(row["path"])


def test_the_launchers_config_and_the_same_launch_line_give_one_answer(tmp_path):
    """The launcher's Llama-3 8B (O2, bf16, mcore_distributed_optim, TE, CP 2, 16 x 8 GPUs) is
    Megatron-LM's pretrain_gpt.py with the same arguments: one estimate, to the byte."""
    nemo = _check(DATA / "launcher_llama3_8b.yaml", "--gpus", "H100")
    assert nemo["kind"] == "nemo" and nemo["status"] == "estimated"
    assert (nemo["gpus"]["per_node"], nemo["gpus"]["nodes"]) == (8, 16)
    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
        "--ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu "
        "--untie-embeddings-and-output-weights --disable-bias-linear --position-embedding-type rope "
        "--seq-length 8192 --max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 2048 "
        "--context-parallel-size 2 --hidden-dropout 0.0 --attention-dropout 0.0 --bf16 --use-distributed-optimizer "
        "--vocab-size 128256 --make-vocab-size-divisible-by 128\n")
    line = _check(script, "--gpus", "H100")
    assert line["status"] == "estimated"
    assert nemo["estimate"]["per_gpu_peak_bytes"] == line["estimate"]["per_gpu_peak_bytes"]
    parts = _parts(nemo)
    params = int(parts["parameters"]["formula"].split(" x ")[1].replace(",", ""))
    assert parts["optimizer states"]["bytes"] == 12 * -(-params // 128)     # 6 + 12/d over dp 64 x cp 2
    assert "vocabulary 128,256" in nemo["model"]                            # the Hub tokenizer's, known to vramlint


def test_apex_distributed_adam_keeps_int16_remainders_and_a_gradient_shard(tmp_path):
    """Google's A4 Llama-3.1 405B (distributed_fused_adam, bf16, O2) on its 224 B200s: Apex's int16
    remainders beside fp32 m and v, 10 B a parameter over dp x cp, the whole fp32 gradient buffer, and
    at the step the reduce-scattered shard apart; the same file under mcore_distributed_optim keeps
    Megatron's fp32 main copies (12 B) and no shard of its own."""
    name = "gpu_recipes_llama3-1-405b-224gpus-a4-bf16.yaml"
    apex = _check(DATA / name, "--gpus", "28x8xB200")
    assert apex["status"] == "estimated"
    parts = _parts(apex)
    params = int(parts["parameters"]["formula"].split(" x ")[1].replace(",", ""))
    d = 224 // (4 * 14 * 2) * 2                                            # dp 2 x cp 2 (TP 4, PP 14)
    assert parts["parameters"]["bytes"] == 2 * params
    assert parts["gradient buffer"]["bytes"] == 4 * params
    assert parts["optimizer states"]["bytes"] == 10 * -(-params // d)
    assert "int16 remainders" in parts["optimizer states"]["formula"]
    assert "Apex" in parts["optimizer states"]["source"]
    step = megatron_states(_plan(DATA / name, "28x8xB200"), None).step
    assert [(c.name, c.bytes) for c in step] == [("reduce-scattered gradient shard (step)", 4 * -(-params // d))]
    mcore = _check(_changed(tmp_path, name, optim__name="mcore_distributed_optim"), "--gpus", "28x8xB200")
    mparts = _parts(mcore)
    assert mparts["optimizer states"]["bytes"] == 12 * -(-params // d)
    assert "fp32 main" in mparts["optimizer states"]["formula"]
    assert megatron_states(_plan(tmp_path / name, "28x8xB200"), None).step == []


def test_o2_off_keeps_fp32_parameters_and_casts_them_each_forward(tmp_path):
    """v1.23.0's megatron_gpt_config.yaml (precision 16, megatron_amp_O2 false): fp32 parameters and
    gradients, Adam's fp32 m and v and no main copy (16 B a parameter, params_dtype fp32), fp16
    compute; autocast's 16-bit weight copies in the forward (torch.autocast's cache) or, with
    Transformer Engine, saved for backward beside the loss."""
    entry = _check(DATA / "megatron_gpt_config_v1.23.0.yaml", "--gpus", "H100")
    assert entry["status"] == "estimated" and entry["precision"] == "fp16"
    parts = _parts(entry)
    params = int(parts["parameters"]["formula"].split(" x ")[1].replace(",", ""))
    assert parts["parameters"]["bytes"] == 4 * params
    assert parts["optimizer states"]["bytes"] == 8 * params
    assert parts["gradient buffer"]["bytes"] == 4 * params
    assert any(f["code"] == "VL210" and "mcore_gpt false" in f["message"] for f in entry["findings"])
    te = _check(_changed(tmp_path, "megatron_gpt_config_v1.23.0.yaml", transformer_engine=True, mcore_gpt=True),
                "--gpus", "H100")
    casts = _parts(te)["autocast's 16-bit weight copies"]
    assert casts["bytes"] == 2 * params and "Transformer Engine" in casts["formula"]
    assert te["estimate"]["peak_moment"] in ("forward at the loss", "backward at the loss")


def test_the_default_config_is_megatrons_non_distributed_layout():
    """The last snapshot's defaults (bf16, O2, fused_adam, mcore_gpt, local layers): bf16 parameters,
    fp32 main copies and m, v, an fp32 gradient buffer: 18 B a parameter, whole."""
    entry = _check(DATA / "megatron_gpt_config.yaml", "--gpus", "H100")
    parts = _parts(entry)
    params = int(parts["parameters"]["formula"].split(" x ")[1].replace(",", ""))
    assert parts["parameters"]["bytes"] + parts["optimizer states"]["bytes"] + parts["gradient buffer"]["bytes"] \
        == 18 * params


def test_nemos_own_refusals_are_said_in_its_words(tmp_path):
    """NeMo's start-up checks (megatron_gpt_model.py:361-372, megatron_base_model.py:874-881), verbatim."""
    vpp = _check(_changed(tmp_path, "megatron_gpt_config_v1.23.0.yaml", virtual_pipeline_model_parallel_size=2),
                 "--gpus", "H100")
    assert any("Virtual pipeline model parallel is only supported when using megatron_amp_O2" in f["message"]
               for f in vpp["findings"])
    ep = _check(_changed(tmp_path, "gpu_recipes_llama3-1-405b-224gpus-a4-bf16.yaml", expert_model_parallel_size=2),
                "--gpus", "28x8xB200")
    assert any("not supporting Apex distributed optimizer" in f["message"] for f in ep["findings"])
    (tmp_path / "fp16").mkdir()
    fp16 = _changed(tmp_path / "fp16", "megatron_gpt_config.yaml", precision=16)
    said = _check(fp16, "--gpus", "H100")
    assert any("fp16 training is not yet supported with O2" in f["message"] for f in said["findings"])


def test_interpolations_are_followed_and_what_only_the_run_resolves_is_said(tmp_path):
    """NeMo's ``${multiply:4, ${.hidden_size}}`` is resolved (GPT-3 5B: FFN 16,384); MLPerf's
    ``${oc.decode:${oc.env:DGXNGPU,8}}`` is the run's: not estimated, named where it is; a
    SentencePiece file's vocabulary is its own: not estimated until model.override_vocab_size."""
    five = _check(DATA / "launcher_gpt3_5b.yaml", "--gpus", "H100")
    assert five["status"] == "estimated" and "FFN 16384" in five["model"]
    mlperf = _finding(_check(DATA / "mlperf4.0_llama2_70b_lora_peft_tuning_config.yaml", "--gpus", "8xH100"),
                      "VL011")
    assert "${oc.decode:${oc.env:" in mlperf["message"] and "known only when the run resolves it" in mlperf["message"]
    llama = _check(DATA / "launcher_llama2_7b.yaml", "--gpus", "H100")
    vocab = _finding(llama, "VL011")
    assert "sentencepiece" in vocab["message"] and "model.override_vocab_size" in vocab["hint"]
    stated = _check(_changed(tmp_path, "launcher_llama2_7b.yaml", override_vocab_size=32000), "--gpus", "H100")
    assert stated["status"] == "estimated" and "vocabulary 32,000, unpadded" in stated["model"]
    tuned = _finding(_check(DATA / "megatron_gpt_finetuning_config.yaml", "--gpus", "H100"), "VL011")
    assert "restore_from_path" in tuned["message"] and "model.num_layers" in tuned["hint"]
    composed = _check(DATA / "mlperf4.0_gpt3_megatron_gpt_config_custom.yaml", "--gpus", "8xH100")
    assert composed["status"] != "skipped" and "Hydra config composed" in _finding(composed, "VL011")["message"]


def test_hints_and_findings_speak_nemos_keys():
    """Google's A4 Llama-3.1 70B on one node of 8 B200s: it does not fit, and the way on is NeMo's
    keys (activations_checkpoint_*, trainer.num_nodes' GPUs), never a Megatron-LM flag."""
    entry = _check(DATA / "gpu_recipes_llama3-1-70b-256gpus-a4-bf16.yaml", "--gpus", "B200")
    over = _finding(entry, "VL201")
    assert "model.activations_checkpoint_granularity: full" in over["hint"] and "--" not in over["hint"]
    counted = _check(DATA / "gpu_recipes_llama3-1-70b-256gpus-a4-bf16.yaml", "--gpus", "32x8xB200")
    assert "trainer.devices 8 x trainer.num_nodes 1" in _finding(counted, "VL007")["message"]


def test_more_nodes_are_proposed_only_in_counts_the_grid_divides():
    """TP 4 x PP 14 x CP 2 is 112 GPUs: on 14 nodes of 8 H100s the fewest nodes that fit with full
    recompute are 28 (224 GPUs), never a count Megatron refuses (29 nodes, 232 GPUs, was said); on 28
    nodes full recompute alone fits, and no more nodes are proposed."""
    name = "gpu_recipes_llama3-1-405b-224gpus-a4-bf16.yaml"
    short = _finding(_check(DATA / name, "--gpus", "14x8xH100"), "VL201")["hint"]
    assert short.startswith("28 nodes x 8 GPUs (224 GPUs")
    enough = _finding(_check(DATA / name, "--gpus", "28x8xH100"), "VL201")["hint"]
    assert "nodes" not in enough and enough.startswith("model.activations_checkpoint_granularity: full")


def test_what_the_megatron_reader_says_is_said_in_nemos_keys_and_bad_values_never_crash(tmp_path):
    """An optimizer priced as Adam is named by model.optim.name, not Megatron's --optimizer; activation
    offloading over a num_layers that is no number is a located finding, never vramlint failing (VL003)."""
    lamb = _check(_changed(tmp_path, "launcher_llama3_8b.yaml", optim__name="lamb"), "--gpus", "H100")
    said = next(f["message"] for f in lamb["findings"] if f["code"] in ("VL210", "VL211") and "lamb" in f["message"])
    assert said.startswith("model.optim.name lamb") and "--" not in said
    (tmp_path / "off").mkdir()
    off = _check(_changed(tmp_path / "off", "launcher_llama3_8b.yaml", cpu_offloading=True, num_layers="x"),
                 "--gpus", "H100")
    assert all(f["code"] != "VL003" for f in off["findings"]) and off["status"] == "not estimated"


@pytest.mark.parametrize("key, value", [("hybrid_override_pattern", "M-M-M*-M-M-M*-M-"),
                                        ("hybrid_attention_ratio", 0.08), ("mamba_ssm_ngroups", 8)])
def test_a_mamba_models_config_is_not_estimated_as_the_dense_gpt_its_other_keys_state(tmp_path, key, value):
    """NeMo's megatron_gpt_config.yaml with a key of its Mamba model (megatron_mamba_model.py): VL011
    at that key, where it was priced silently as the 12-layer GPT the other keys describe."""
    data = yaml.safe_load((DATA / "megatron_gpt_config.yaml").read_text())
    data["model"][key] = value
    changed = tmp_path / "megatron_mamba_config.yaml"
    changed.write_text(yaml.safe_dump(data))
    entry = _check(changed, "--gpus", "1x80GB")
    assert entry["status"] == "not estimated"
    assert any(f["code"] == "VL011" and f"model.{key}" in f["message"] for f in entry["findings"])
