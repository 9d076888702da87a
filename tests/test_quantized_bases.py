"""Bases bitsandbytes quantizes, and optimizers other than AdamW, wherever the job runs: under
FSDP and DeepSpeed as under plain PyTorch, for inference as for training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DATA, EXAMPLES
from vramlint.cli import main
from vramlint.errors import UsageError
from vramlint.hardware import parse_gpus
from vramlint.memory import estimate
from vramlint.memory.parts.adapters import adapter_bytes, trainable
from vramlint.memory.runtimes.deepspeed.states import deepspeed_states
from vramlint.memory.training import model_states
from vramlint.models.hfconfig import shape_from_dict
from vramlint.models.quantization import BNB_LINEARS
from vramlint.models import read_model
from vramlint.plan import Plan, plan_from_flags

ADAM_8BIT = json.loads((DATA / "adam8bit_states.json").read_text())
QLORA_DS = json.loads((DATA / "qlora_deepspeed.json").read_text())
LLAMA_8B = read_model("meta-llama/Llama-3.1-8B")


def _optimizer_bytes(plan: Plan) -> int:
    return sum(c.bytes for c in model_states(plan).resting if c.name == "optimizer states")


@pytest.mark.parametrize("model_type, world", [(t, w) for t in sorted(ADAM_8BIT) for w in ("2", "4")])
def test_fsdp_prices_8bit_adam_over_each_parameters_shard(model_type, world):
    """dev/adam8bit_states.py ran bitsandbytes' AdamW8bit over rank 0's FSDP2 shards (the first
    torch.chunk of each parameter's rows): FSDP prices those states, not Adam's 8 B."""
    entry = ADAM_8BIT[model_type]
    plan = Plan(model=shape_from_dict(dict(entry["config"])), cluster=parse_gpus(f"{world}xH100"), precision="bf16",
                runtime="fsdp", fsdp_version=2, optimizer="adamw-8bit")
    assert _optimizer_bytes(plan) == entry["fsdp2_rank0_state_bytes"][world]


@pytest.mark.parametrize("optimizer, per_element", [("adamw", 8), ("sgd", 4)])
def test_fsdp_states_follow_the_optimizer(optimizer, per_element):
    plan = Plan(model=LLAMA_8B, cluster=parse_gpus("8xH100"), precision="bf16", runtime="fsdp", optimizer=optimizer)
    assert _optimizer_bytes(plan) == per_element * -(-LLAMA_8B.params // 8)


def test_estimate_runtime_fsdp_takes_optimizer_flag(capsys):
    """``vramlint estimate --runtime fsdp --optimizer adamw-8bit`` prices 8-bit states (it used to
    print Adam's m, v whatever the flag said)."""
    args = ["estimate", "--train", "--runtime", "fsdp", "--model", "meta-llama/Llama-3.1-8B", "--gpus", "8x80GB",
            "--seq-len", "2048", "--format", "json"]
    peaks = {}
    for optimizer in ("adamw", "adamw-8bit"):
        assert main(args + ["--optimizer", optimizer]) == 0
        peaks[optimizer] = json.loads(capsys.readouterr().out)["per_gpu_peak_bytes"]
    assert peaks["adamw"] - peaks["adamw-8bit"] > 5 * 2**30


def test_fsdp_says_when_accelerate_upcasts_the_stated_weights_dtype():
    plan = plan_from_flags(LLAMA_8B, parse_gpus("8xH100"), {"seq_len": 2048, "runtime": "fsdp",
                                                             "weights_dtype": "bfloat16"})
    assert plan.weights_dtype == "float32"
    assert any("upcasts" in note and "--mixed-precision no" in note for note in plan.assumptions)
    pure = plan_from_flags(LLAMA_8B, parse_gpus("8xH100"), {"seq_len": 2048, "runtime": "fsdp",
                                                             "weights_dtype": "bfloat16", "mixed_precision": "no"})
    assert (pure.weights_dtype, pure.precision) == ("bfloat16", "bf16")


@pytest.mark.parametrize("case", sorted(k for k in QLORA_DS if k.endswith(":z2")))
def test_fp32_zero0_keeps_qloras_4bit_base(case):
    """A DeepSpeed file with no fp16/bf16 section under QLoRA: the 4-bit linears stay half a byte
    a value (what dev/qlora_deepspeed.py measured with bf16 for the rest), the rest and the
    adapters 4 B; it used to price the whole model at 4 B a parameter."""
    entry = QLORA_DS[case]
    model = shape_from_dict(dict(entry["config"]))
    plan = Plan(model=model, cluster=parse_gpus("1xH100"), precision="fp32", runtime="deepspeed", zero_stage=0,
                lora_rank=16, load_in_4bit=True)
    parts = {c.name: c.bytes for c in deepspeed_states(plan).resting}
    unquantized = sum(size for group, size in model.parameter_tensors if group not in BNB_LINEARS)
    expected = entry["base"] + 2 * unquantized + 2 * entry["adapters"]     # measured bf16 -> fp32
    assert parts["weights (NF4 + fp32)"] == pytest.approx(expected, rel=0.001)
    assert "4-bit quant states (every rank)" in parts


def test_a_deepspeed_files_optimizer_section_wins_over_the_trainers(tmp_path, capsys):
    """With an ``optimizer`` section DeepSpeed builds that optimizer and the Trainer's ``optim``
    is unused; without one the Trainer's optimizer is wrapped: its states over ZeRO's fp32 master."""
    source = json.loads((EXAMPLES / "llama8b-zero3-8xh100.json").read_text())
    source.pop("optimizer", None)
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(source))
    with_section = tmp_path / "with.json"
    with_section.write_text(json.dumps({**source, "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}))
    found, codes = {}, {}
    for path in (bare, with_section):
        main(["check", str(path), "--model", "meta-llama/Llama-3.1-8B", "--gpus", "8x80GB", "--seq-len", "2048",
              "--optimizer", "adamw-8bit", "--format", "json"])
        result = json.loads(capsys.readouterr().out)
        components = result["files"][0]["estimate"]["components"]
        found[path.name] = next(c for c in components if c["name"] == "optimizer states")
        codes[path.name] = {f["code"] for f in result["files"][0]["findings"]}
    assert "8-bit" in found["bare.json"]["formula"] and "6 B" in found["bare.json"]["formula"]
    assert found["with.json"]["formula"].startswith("12 B")
    assert "VL010" in codes["with.json"] and "VL010" not in codes["bare.json"]     # the flag lost: said


@pytest.mark.parametrize("flag, ratio", [("load_in_4bit", 0.4), ("load_in_8bit", 0.6)])
def test_inference_loads_the_checkpoint_through_bitsandbytes(flag, ratio):
    """``--infer --load-in-4bit`` / ``--load-in-8bit`` price the linears as bitsandbytes stores
    them (they used to be priced at 16 bits)."""
    flags = {"seq_len": 2048, "infer": True}
    plain = estimate(plan_from_flags(LLAMA_8B, parse_gpus("1x24GB"), flags))
    loaded = estimate(plan_from_flags(LLAMA_8B, parse_gpus("1x24GB"), {**flags, flag: True}))
    weights = {e: next(c.bytes for c in e.components if c.name == "weights") for e in (plain, loaded)}
    assert weights[loaded] < ratio * weights[plain]


def test_an_8bit_base_trains_lora_with_int8_linears():
    plan = plan_from_flags(LLAMA_8B, parse_gpus("1x24GB"), {"seq_len": 2048, "load_in_8bit": True})
    assert plan.lora_rank == 16 and plan.weights_dtype == "float32"
    weights = next(c for c in model_states(plan).resting if c.name.startswith("weights"))
    linears = sum(size for group, size in LLAMA_8B.parameter_tensors if group in BNB_LINEARS)
    assert weights.bytes == pytest.approx(linears + 4 * (LLAMA_8B.params - linears), rel=0.001)
    assert trainable(plan) > 0
    casts = next(c for c in estimate(plan).components if c.name == "autocast weight copies")
    assert casts.bytes == 2 * trainable(plan)         # the adapters alone: int8 linears are never cast


def test_an_8bit_base_under_fsdp_is_refused_in_one_line():
    with pytest.raises(UsageError, match="not modelled"):
        plan_from_flags(LLAMA_8B, parse_gpus("2x24GB"), {"seq_len": 2048, "load_in_8bit": True, "runtime": "fsdp"})


ADAPTERS = json.loads((DATA / "adapter_dtypes.json").read_text())
RECIPES = DATA / "recipes"


def _adapter_component(capsys, recipe: Path, *extra: str) -> dict:
    main(["check", str(recipe), "--gpus", "1x80GB", "--format", "json", *extra])
    components = json.loads(capsys.readouterr().out)["files"][0]["estimate"]["components"]
    return next(c for c in components if c["name"] == "LoRA adapters")


@pytest.mark.parametrize("case, dtype", [("bfloat16:True", "float32"), ("nf4:True", "float32"),
                                         ("bfloat16:False", "bfloat16"), ("nf4:False", "bfloat16")])
def test_adapter_bytes_are_what_peft_leaves(case, dtype):
    """dev/adapter_dtypes.py wrapped a bf16 and an NF4 base with the real get_peft_model: fp32
    adapters by default (autocast_adapter_dtype), the base's 16 bits with it off."""
    plan = plan_from_flags(LLAMA_8B, parse_gpus("1xH100"), {"seq_len": 1024, "lora_rank": 8, "adapter_dtype": dtype,
                                                             "weights_dtype": "bfloat16"})
    assert [adapter_bytes(plan)] == ADAPTERS[case]["element_bytes"]


def test_torchtune_keeps_its_adapters_in_the_recipes_dtype(capsys):
    """torchtune builds the model under set_default_dtype(bf16): its LoRA adapters are bf16, where
    a TRL recipe's (PEFT's default) are fp32; a stated --adapter-dtype wins."""
    tune = RECIPES / "pytorch__torchtune/recipes/configs/llama3_1/8B_lora_single_device.yaml"
    assert "2 B x" in _adapter_component(capsys, tune)["formula"]
    trl = RECIPES / "huggingface__alignment-handbook/recipes/zephyr-7b-beta/sft/config_qlora.yaml"
    assert "4 B x" in _adapter_component(capsys, trl)["formula"]
    assert "2 B x" in _adapter_component(capsys, trl, "--adapter-dtype", "bfloat16")["formula"]


def test_accelerate_upcasts_16_bit_adapters_under_fsdp():
    plan = plan_from_flags(LLAMA_8B, parse_gpus("2xH100"), {"seq_len": 1024, "lora_rank": 8, "runtime": "fsdp",
                                                             "adapter_dtype": "bfloat16"})
    assert plan.adapter_dtype == "float32"


STEPS = json.loads((DATA / "optimizer_steps.json").read_text())


@pytest.mark.parametrize("impl, dtype", [(i, d) for i in ("foreach", "fused") for d in ("bfloat16", "float32")])
def test_the_step_temporary_follows_adamws_implementation(impl, dtype):
    """dev/optimizer_steps.py watched torch 2.13's AdamW step: foreach makes one copy of what it
    updates, fused (HF's default adamw_torch_fused) none."""
    from vramlint.memory.runtimes.torch.states import torch_states
    plan = Plan(model=LLAMA_8B, cluster=parse_gpus("1xH200"), precision="bf16" if dtype == "bfloat16" else "fp32",
                runtime="torch", weights_dtype=dtype, optimizer_impl=impl)
    step = sum(c.bytes for c in torch_states(plan).step)
    assert step / LLAMA_8B.params == pytest.approx(STEPS[f"{impl}:{dtype}"]["transient_per_element"], abs=0.01)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_paged_32bit_adam_keeps_fp32_states_whatever_the_weights(dtype):
    """bitsandbytes' PagedAdamW32bit: 8 B of states an element for bf16 and fp32 parameters alike;
    the paged ones (tensors of 1e5 elements and more) on the host side of unified memory."""
    from vramlint.memory.runtimes.torch.states import torch_states
    plan = Plan(model=LLAMA_8B, cluster=parse_gpus("1xH200"), precision="bf16", runtime="torch",
                weights_dtype=dtype, paged_optimizer=True)
    states = torch_states(plan)
    paged = sum(c.bytes for c in states.host if c.name.startswith("paged"))
    held = sum(c.bytes for c in states.resting if c.name == "optimizer states")
    assert (paged + held) / LLAMA_8B.params == pytest.approx(STEPS["paged_32bit_state_per_element"][dtype], abs=0.01)
    assert held < paged / 1000


def test_dora_trains_a_magnitude_vector_per_adapted_linear_and_keeps_its_two_results():
    """PEFT 0.21.2 DoRA (tuners/lora/dora.py): lora_magnitude_vector of d_out per adapted linear;
    the forward keeps the base's and the adapter's outputs (d_out each, recorded on the CPU:
    +4 B a d_out element with fp32 adapters under autocast)."""
    from vramlint.memory.parts.activations import layer_bytes_per_token
    flags = {"seq_len": 1024, "lora_rank": 16, "weights_dtype": "float32"}
    lora = plan_from_flags(LLAMA_8B, parse_gpus("1xH100"), flags)
    dora = plan_from_flags(LLAMA_8B, parse_gpus("1xH100"), {**flags, "dora": True})
    layer = LLAMA_8B.layers[0]
    outs = sum(d_out for _, (_, d_out, _) in layer.linears(LLAMA_8B.hidden_size, LLAMA_8B.block).items())
    assert trainable(dora) - trainable(lora) == outs * LLAMA_8B.num_layers
    per = layer_bytes_per_token(layer, LLAMA_8B, dora) - layer_bytes_per_token(layer, LLAMA_8B, lora)
    assert per == 4 * outs


def test_a_recipe_with_an_8bit_base_under_fsdp_is_a_finding_not_an_error(tmp_path, capsys):
    """axolotl: load_in_8bit with an adapter under FSDP is not modelled; the recipe gets a VL011 at
    load_in_8bit: an error, since the job is not estimated (never exit 2, never a silent pass)."""
    recipe = tmp_path / "lora8.yml"
    recipe.write_text("base_model: meta-llama/Llama-3.1-8B\nadapter: lora\nload_in_8bit: true\nlora_r: 16\n"
                      "lora_target_linear: true\nmicro_batch_size: 1\nsequence_len: 2048\nfsdp:\n  - full_shard\n"
                      "fsdp_config:\n  fsdp_version: 2\n")
    code = main(["check", str(recipe), "--gpus", "2x24GB", "--format", "json"])
    finding = json.loads(capsys.readouterr().out)["files"][0]["findings"][0]
    assert code == 1 and finding["code"] == "VL011" and finding["line"] == 3
