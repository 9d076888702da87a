"""Tensor parallelism and sequences split over GPUs, as the real config files say them.

DeepSpeed's AutoTP (``tensor_parallel.autotp_size``) and Ulysses (``sequence_parallel_size``);
Accelerate's ``parallelism_config`` (tp, cp, sp, dp_shard and dp_replicate sizes). Each TP rank
holds its share of the parameters (norms replicated) and all the logits (lm_head's output is
gathered); each rank of a sequence split keeps seq / split tokens' activations and logits; FSDP
under a ParallelismConfig with replicas shards over dp_shard x cp.
"""

from __future__ import annotations

import json

import pytest

from conftest import CORPUS, shared_or_skip
from vramlint.cli import main
from vramlint.models import read_model

AUTOTP = "deepspeed/hiyouga__LLaMA-Factory__examples__deepspeed__ds_z2_autotp_config.json"
TP_HSDP = "accelerate/huggingface__accelerate__examples__torch_native_parallelism__configs__tp_hsdp.yaml"
CP = "accelerate/huggingface__trl__examples__accelerate_configs__context_parallel_2gpu.yaml"
ULYSSES = "accelerate/huggingface__trl__examples__accelerate_configs__alst_ulysses_4gpu.yaml"
MODEL = "meta-llama/Llama-3.1-8B"


def check(capsys, path, gpus: str, *extra) -> dict:
    main(["check", str(path), "--gpus", gpus, "--model", MODEL, "--seq-len", "8192", "--micro-batch", "1",
          "--grad-checkpointing", "--format", "json", *extra])
    return json.loads(capsys.readouterr().out)["files"][0]


def components(entry: dict) -> dict[str, int]:
    return {c["name"]: c["bytes"] for c in entry["estimate"]["components"]}


def at_the_loss(path, gpus: str, tp: int | None = None) -> dict[str, int]:
    """The backward-at-the-loss moment of the plan the file gives (whatever moment is the peak)."""
    from vramlint.checker import Context, check_file
    from vramlint.hardware import parse_gpus
    from vramlint.memory.training import training_peak

    values = {"micro_batch": 1, "seq_len": 8192, "grad_checkpointing": True, "tp": tp}
    plan = check_file(str(path), Context(parse_gpus(gpus), values, model=read_model(MODEL)))[0].plan
    _, moments, _ = training_peak(plan)
    return {c.name: c.bytes for c in next(m for m in moments if m.name == "backward at the loss").components}


def test_one_tp_rank_holds_its_share_of_the_parameters_norms_whole():
    model = read_model(MODEL)
    from vramlint.models.tp_plans import DEFAULT
    local = model.tp_local(4, DEFAULT)
    norms = sum(size for layer in model.layers for group, size in layer.modules if group == "small")
    norms += model.final_norm_params
    assert local.params == pytest.approx((model.params - norms) / 4 + norms, abs=64)
    assert local.tp_local(4, DEFAULT) is local and model.tp_local(1, DEFAULT) is model


def test_autotp_size_is_the_tensor_parallel_degree(capsys, tmp_path):
    path = shared_or_skip(CORPUS / AUTOTP)
    entry = check(capsys, path, "8xH100")
    plain = check(capsys, path, "8xH100", "--tp", "1")          # the file's degree wins over the flag
    assert entry["plan"]["origins"]["tensor_parallel"].endswith(":30:5")
    assert entry["plan"]["data_parallel"] == 4 == plain["plan"]["data_parallel"]
    weights = components(entry)["weights (16-bit)"]
    model = read_model(MODEL)          # AutoTP keeps the untied embedding whole (models/tp_plans.py)
    assert weights == pytest.approx(2 * ((model.params - model.embedding_params) / 2 + model.embedding_params),
                                    rel=0.001)
    assert any("P is one rank's share" in a for a in entry["estimate"]["assumptions"])
    # the logits are every rank's whole: the same as without TP
    logits = "logits + loss (backward)"
    config = json.loads(path.read_text())
    del config["tensor_parallel"]
    (tmp_path / "no_tp.json").write_text(json.dumps(config))
    assert at_the_loss(path, "8xH100")[logits] == at_the_loss(tmp_path / "no_tp.json", "8xH100")[logits]


def test_ulysses_sequence_parallel_size_splits_the_sequence(tmp_path, capsys):
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 3},
              "sequence_parallel_size": 4}
    path = tmp_path / "ds_sp.json"
    path.write_text(json.dumps(config, indent=1))
    entry = check(capsys, path, "8xH100")
    assert entry["plan"]["seq_len"] == 2048
    assert any("4 ways" in a and "2,048 of the 8,192 tokens" in a for a in entry["estimate"]["assumptions"])
    assert entry["plan"]["data_parallel"] == 8        # ZeRO still shards over every rank


def test_tp_and_hsdp_from_parallelism_config(capsys):
    """tp 2 x dp_shard 2 x dp_replicate 2 on 8 GPUs: each GPU holds a quarter of the fp32 parameters."""
    entry = check(capsys, shared_or_skip(CORPUS / TP_HSDP), "8xH100")
    assert entry["plan"]["data_parallel"] == 2
    assert entry["plan"]["origins"]["tensor_parallel"].endswith(":23:3")
    assert components(entry)["parameter shards"] == pytest.approx(4 * read_model(MODEL).params / 4, rel=0.001)


@pytest.mark.parametrize("name, gpus", [(CP, "2xH100"), (ULYSSES, "4xH100")])
def test_context_and_sequence_parallel_sizes_halve_the_tokens_each_gpu_keeps(capsys, name, gpus, tmp_path):
    path = shared_or_skip(CORPUS / name)
    entry = check(capsys, path, gpus)
    assert entry["plan"]["seq_len"] == 4096
    stripped = tmp_path / "no_split.yaml"          # the same file without its parallelism_config
    stripped.write_text(path.read_text().split("parallelism_config:")[0])
    split, whole = at_the_loss(path, gpus), at_the_loss(stripped, gpus)
    for name in ("activations (checkpointed inputs)", "logits + loss (backward)"):
        assert split[name] == pytest.approx(whole[name] / 2, rel=0.001)


def test_the_setup_says_its_tensor_parallel_degree():
    from vramlint.hardware import parse_gpus
    from vramlint.plan import Plan

    plan = Plan(model=read_model(MODEL), cluster=parse_gpus("8xH100"), precision="bf16", zero_stage=2,
                tensor_parallel=2)
    assert plan.setup_name == "ZeRO-2 + TP 2"
    assert plan.with_changes(tensor_parallel=1).setup_name == "ZeRO-2"


@pytest.mark.parametrize("sp, verdict", [(1, True), (2, False)])
def test_deepspeed_batch_arithmetic_divides_by_the_sequence_parallel_ranks(tmp_path, capsys, sp, verdict):
    """DeepSpeed's batch world is world / sequence_parallel_size (runtime/config.py): on 8 GPUs,
    train_batch_size 16 at micro-batch 2 holds without sequence parallelism (2 x 1 x 8) and is
    refused with Ulysses over 2 ranks (2 x 1 x 4 = 8, DeepSpeed's assertion)."""
    config = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
              "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    if sp > 1:
        config["sequence_parallel_size"] = sp
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    codes = {f["code"] for f in check(capsys, path, "8xH100")["findings"]}
    assert ("VL301" in codes) is not verdict


def test_tp_splits_the_sublayers_tensors_and_keeps_the_norms_whole():
    """Llama-3.1-8B in bf16 without checkpointing: a layer keeps 200,704 B per token; at TP 2 the
    attention's and the MLP's own tensors halve while the two RMSNorms' (fp32 copy, y, output:
    4 + 2 + 2 bytes x h each) stay whole on every rank."""
    from vramlint.hardware import parse_gpus
    from vramlint.memory.parts.activations import layer_bytes_per_token
    from vramlint.plan import Plan

    model = read_model(MODEL)
    plan = Plan(model=model, cluster=parse_gpus("2xH100"), precision="bf16", runtime="torch",
                weights_dtype="bfloat16", seq_len=2048)
    whole = layer_bytes_per_token(model.layers[0], model, plan)
    split = layer_bytes_per_token(model.layers[0], model, plan.with_changes(tensor_parallel=2))
    norms = 2 * (4 + 2 + 2) * model.hidden_size
    assert split == norms + (whole - norms) // 2


@pytest.mark.parametrize("model, refused", [
    ("Qwen/Qwen3-30B-A3B", "unsupported partition style(s): ['moe_tp_experts', 'packed_colwise']"),
    ("microsoft/Phi-3-mini-4k-instruct", "unsupported partition style(s): ['rowwise_split_input']"),
    ("gpt2", "AutoTP not supported for model. Please use kernel injection"),
    ("meta-llama/Llama-3.1-8B", None),
    ("openai/gpt-oss-20b", None),
])
def test_autotp_on_a_model_deepspeed_refuses_is_an_error_at_autotp_size(capsys, tmp_path, model, refused):
    """DeepSpeed 0.19.8's initialize raised these for a tiny qwen3_moe and gpt2 on two CPU ranks
    (models/tp_plans.py); phi3's plan holds rowwise_split_input, outside its SUPPORTED_STYLES. A
    partition_config of the file's own is what DeepSpeed asks for, and silences it."""
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 1},
              "tensor_parallel": {"autotp_size": 2}}
    path = tmp_path / "ds_tp.json"
    path.write_text(json.dumps(config, indent=1))
    code = main(["check", str(path), "--gpus", "8xH200", "--model", model, "--seq-len", "1024", "--format", "json"])
    found = [f for f in json.loads(capsys.readouterr().out)["files"][0]["findings"] if f["code"] == "VL309"]
    if refused is None:
        assert not found
        return
    assert code == 1 and len(found) == 1 and refused in found[0]["message"]
    assert found[0]["line"] == 10              # "autotp_size": 2
    for own in ({"partition_config": {"layer_specs": []}}, {"preset_model": "mixtral"}):
        path.write_text(json.dumps({**config, "tensor_parallel": {"autotp_size": 2, **own}}, indent=1))
        main(["check", str(path), "--gpus", "8xH200", "--model", model, "--seq-len", "1024", "--format", "json"])
        assert not [f for f in json.loads(capsys.readouterr().out)["files"][0]["findings"] if f["code"] == "VL309"]


def test_the_tensor_parallel_section_is_held_to_deepspeeds_own_fields(capsys, tmp_path):
    """TPTrainingConfig forbids extra keys: a misspelt one is an unknown key, a size that is no
    integer a wrong type (the section was any object before)."""
    path = tmp_path / "ds_tp.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1},
                                "tensor_parallel": {"autotp_sise": 2, "autotp_size": "two"}}, indent=1))
    main(["check", str(path), "--gpus", "8xH200", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "1024",
          "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["files"][0]["findings"]
    assert {("VL101", 7), ("VL102", 8)} <= {(f["code"], f["line"]) for f in findings}


def test_estimate_says_deepspeed_autotp_would_refuse_the_model(capsys):
    """Without a file there is no line to point at: the estimate's assumptions say it instead."""
    main(["estimate", "--model", "Qwen/Qwen3-30B-A3B", "--gpus", "8xH200", "--train", "--zero-stage", "1", "--tp", "2",
          "--seq-len", "1024", "--format", "json"])
    notes = json.loads(capsys.readouterr().out)["assumptions"]
    assert any("DeepSpeed AutoTP would refuse" in n and "moe_tp_experts" in n for n in notes)


@pytest.mark.parametrize("model, refused", [("tiiuae/falcon-7b", True), ("meta-llama/Llama-3.1-8B", False)])
def test_transformers_tensor_parallelism_refuses_a_model_with_no_plan(capsys, model, refused):
    """from_pretrained(tp_plan="auto") raised this for a tiny falcon on two gloo ranks: falcon,
    gpt2 and gpt_bigcode have no base_model_tp_plan (models/tp_plans.py)."""
    main(["estimate", "--model", model, "--gpus", "2xH200", "--infer", "--tp", "2", "--seq-len", "1024",
          "--format", "json"])
    notes = " ".join(json.loads(capsys.readouterr().out)["assumptions"])
    assert ("has no `tp_plan`. Pass `tp_plan` in `DistributedConfig`" in notes) == refused
