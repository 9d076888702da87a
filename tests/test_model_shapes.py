"""Model shapes: parameter counts equal transformers' ``model.num_parameters()`` exactly.

The expected numbers in tests/data/param_counts.json were produced by dev/param_counts.py, which
builds every corpus config and every family's default config with transformers on torch's meta
device. Configs transformers cannot build (remote-code RefinedWeb, kimi_k2, a config without
model_type) were built through the architecture they declare; those are also held to their
published sizes below.
"""

from __future__ import annotations

import json

import pytest

from conftest import CORPUS, shared_or_skip
from vramlint.errors import UsageError
from vramlint.hardware import Cluster, Gpu
from vramlint.memory import estimate
from vramlint.memory.parts.weights import weight_bytes
from vramlint.models import read_model
from vramlint.models.hfconfig import shape_from_dict
from vramlint.plan import Plan

COUNTS = json.loads((__import__("conftest").DATA / "param_counts.json").read_text())
CORPUS_CASES = sorted(k for k in COUNTS if not k.startswith("default:"))
DEFAULT_CASES = sorted(k for k in COUNTS if k.startswith("default:"))


def test_expected_counts_cover_the_corpus_and_every_listed_type():
    assert len(CORPUS_CASES) == 46          # 49 files less 3 ModelOpt side files
    listed = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
              "gemma3", "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon", "deepseek_v2", "deepseek_v3",
              "olmo2", "starcoder2", "gpt_oss", "llama4"}
    assert listed <= {k.split(":", 1)[1] for k in DEFAULT_CASES}


@pytest.mark.parametrize("case", CORPUS_CASES)
def test_corpus_config_counts_are_exact(case):
    path = shared_or_skip(CORPUS / "hf_models" / case)
    shape = read_model(str(path))
    assert shape.params == COUNTS[case]["params"]
    assert shape.largest_layer_params == COUNTS[case]["largest_layer_params"]


@pytest.mark.parametrize("case", DEFAULT_CASES)
def test_default_config_counts_are_exact(case):
    shape = shape_from_dict({"model_type": case.split(":", 1)[1]})
    assert shape.params == COUNTS[case]["params"]
    assert shape.largest_layer_params == COUNTS[case]["largest_layer_params"]


TOWER_CASES = sorted(k for k in COUNTS if "vision_params" in COUNTS[k])


@pytest.mark.parametrize("case", TOWER_CASES)
def test_vision_tower_counts_equal_transformers(case):
    """The tower and projector transformers' multimodal class builds (dev/param_counts.py) — from
    a config without vision_config too: the wrapper's default tower (Mistral 3's from its
    SubConfigSpec defaults), or none where the sub-config is optional (Gemma 4). A tower vramlint
    cannot read is named in the notes instead (Kimi-K2.5's MoonViT)."""
    if case.startswith("default:"):
        shape = shape_from_dict({"model_type": case.split(":", 1)[1]})
    else:
        shape = read_model(str(shared_or_skip(CORPUS / "hf_models" / case)))
    if shape.vision is None and COUNTS[case]["vision_params"]:
        assert any("vision tower" in note and "not counted" in note for note in shape.notes)
        return
    assert shape.vision_params == COUNTS[case]["vision_params"]


# Published sizes of the configs transformers cannot build itself.
PUBLISHED = {
    "Decentralised-AI__falcon-40b__config.json": (40e9, None),      # "Falcon-40B", 40B parameters
    "ollama__ollama__convert__testdata__llama3.1__config.json": (8.03e9, None),   # Llama-3.1-8B: 8.03B
    "ai-dynamo__aiconfigurator__aic-core__src__aiconfigurator_core__model_configs__moonshotai--Kimi-K2-Instruct_config.json":
        (1.04e12, 32e9),                                            # Kimi K2: 1T total, 32B activated
}


@pytest.mark.parametrize("case", sorted(PUBLISHED))
def test_remote_code_and_typeless_configs_match_published_sizes(case):
    shape = read_model(str(shared_or_skip(CORPUS / "hf_models" / case)))
    total, active = PUBLISHED[case]
    assert shape.read_as is not None and shape.notes, "the output must say which family it was read as"
    assert abs(shape.params - total) / total < 0.04
    if active:
        assert abs(shape.active_params - active) / active < 0.04


def test_modelopt_side_file_is_a_clear_usage_error():
    side = shared_or_skip(CORPUS / "hf_models" /
                          "ai-dynamo__aiconfigurator__aic-core__src__aiconfigurator_core__model_configs__nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json")
    with pytest.raises(UsageError, match="hf_quant_config.json"):
        read_model(str(side))


def test_folder_with_modelopt_side_file_reads_its_quantization(tmp_path):
    prefix = "ai-dynamo__aiconfigurator__aic-core__src__aiconfigurator_core__model_configs__nvidia--Llama-3.1-70B-Instruct-FP8_"
    folder = tmp_path / "Llama-3.1-70B-Instruct-FP8"
    folder.mkdir()
    for name in ("config.json", "hf_quant_config.json"):
        (folder / name).write_text((shared_or_skip(CORPUS / "hf_models" / (prefix + name))).read_text())
    shape = read_model(str(folder))
    assert shape.quantization is not None and shape.quantization.method == "modelopt fp8"
    # 70.55B params, 16-bit embeddings and lm_head (2 x 128256 x 8192), everything else 1 byte
    outside = 2 * 128256 * 8192
    layer_norms = shape.layer_params.small
    assert weight_bytes(shape) == (shape.params - outside - layer_norms - 8192) + 2 * (outside + layer_norms + 8192)


def test_a_type_no_one_can_build_says_why():
    """Neither modelled by hand nor known to transformers, and without the sizes of a decoder."""
    with pytest.raises(UsageError) as err:
        shape_from_dict({"model_type": "my_remote_arch", "hidden_size": 768, "auto_map": {}})
    assert "my_remote_arch" in str(err.value) and "auto_map" in str(err.value) and "has no" in str(err.value)


def test_a_type_transformers_does_not_know_is_read_as_a_generic_decoder():
    shape = shape_from_dict({"model_type": "my_remote_arch", "hidden_size": 1024, "num_hidden_layers": 4,
                             "num_attention_heads": 8, "intermediate_size": 4096, "vocab_size": 1000})
    assert shape.shape_by == "generic" and shape.model_type == "my_remote_arch"
    assert shape.params == 4 * (4 * 1024 * 1024 + 3 * 1024 * 4096 + 2 * 1024) + 2 * 1000 * 1024 + 1024


def test_missing_required_key_is_a_usage_error_not_a_traceback():
    with pytest.raises(UsageError, match="intermediate_size|hidden_size"):
        shape_from_dict({"model_type": "llama", "hidden_size": None})


@pytest.mark.parametrize("change, words", [
    ({"num_hidden_layers": 2**40}, "num_hidden_layers 1099511627776 is past 320"),   # would build 2**40 layers
    ({"num_hidden_layers": 0}, "num_hidden_layers must be between 1 and 320"),
    ({"model_type": ["llama"]}, "model_type must be a string"),
    ({"architectures": {"LlamaForCausalLM": 1}}, "architectures must be a list of class names"),
    ({"hidden_size": "4096"}, "hidden_size must be an integer, got '4096'"),
])
def test_a_config_value_no_model_has_is_refused_in_one_line(capsys, tmp_path, change, words):
    """Found by mutating catalog configs at random: a layer count of 2**40 hung the check (a Layer
    each), 0 layers and a model_type or architectures of the wrong kind ended in an internal
    error. Each is now one line naming the key, and exit 2."""
    from vramlint.cli import main
    from vramlint.models import catalog
    path = tmp_path / "config.json"
    llama = next(e["config"] for e in catalog.entries() if e["id"] == "meta-llama/Llama-3.1-8B")
    path.write_text(json.dumps({**llama, **change}))
    assert main(["model", str(path)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


# KV cache geometry


def test_llama2_70b_kv_bytes_per_token_and_seed_worked_example():
    shape = read_model("meta-llama/Llama-2-70b-hf")
    assert shape.params == 68_976_648_192
    assert weight_bytes(shape) == 68_976_648_192 * 2               # fp16
    per_token = shape.kv_bytes_per_token(2)
    assert per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    assert round(per_token * 16 * 4096 / 1e9, 2) == 21.47         # batch 16 x 4k tokens


def test_multi_query_falcon_7b_caches_one_kv_head():
    shape = read_model("tiiuae/falcon-7b")
    assert {layer.attention.num_kv_heads for layer in shape.layers} == {1}
    assert shape.kv_bytes_per_token(2) == 32 * 2 * 1 * 64 * 2


def test_qwen2_sliding_window_ignored_unless_use_sliding_window():
    raw = json.loads((shared_or_skip(CORPUS / "hf_models" /
                      "ai-dynamo__aiconfigurator__src__aiconfigurator__model_configs__Qwen--Qwen2.5-7B_config.json")).read_text())
    assert raw["sliding_window"] and raw["use_sliding_window"] is False
    assert {k["attention"] for k in shape_from_dict(raw).layer_kinds()} == {"full"}
    slid = shape_from_dict(dict(raw, use_sliding_window=True, max_window_layers=20))
    kinds = {(k["attention"], k["window"]): k["count"] for k in slid.layer_kinds()}
    assert kinds == {("full", None): 20, ("sliding", raw["sliding_window"]): 8}


def test_gemma2_alternates_sliding_layers_with_explicit_head_dim():
    shape = read_model("google/gemma-2-9b-it")
    kinds = {(k["attention"], k["window"]): k["count"] for k in shape.layer_kinds()}
    assert kinds == {("sliding", 4096): 21, ("full", None): 21}
    assert {layer.attention.head_dim for layer in shape.layers} == {256}   # not 3584 / 16
    assert shape.layers[0].attention.kind == "sliding"


def test_gemma3_text_config_nested_in_multimodal_checkpoint():
    shape = read_model("google/gemma-3-12b-it")
    kinds = {(k["attention"], k["window"]): k["count"] for k in shape.layer_kinds()}
    assert kinds == {("sliding", 1024): 40, ("full", None): 8}
    assert shape.vocab_size == 262208 and shape.head_params == 0          # defaults and tied head


def test_deepseek_mla_caches_the_latent_in_vllm_and_decompressed_kv_in_transformers():
    shape = read_model("deepseek-ai/DeepSeek-V3")
    assert shape.kv_bytes_per_token(2) == 61 * (512 + 64) * 2
    assert shape.kv_bytes_per_token(2, engine="transformers") == 61 * 128 * (192 + 128) * 2
    assert shape.active_params < shape.params / 15
    kinds = {(k["attention"], k["mlp"]): k["count"] for k in shape.layer_kinds()}
    assert kinds == {("mla", "gated"): 3, ("mla", "moe"): 58}


def test_gpt_oss_mxfp4_quantizes_only_the_experts():
    shape = read_model("openai/gpt-oss-20b")
    assert shape.quantization.groups == frozenset({"experts"})
    experts = shape.layer_params.experts
    assert weight_bytes(shape) == int((shape.params - experts) * 2 + experts * 4.25 / 8)
    kinds = {(k["attention"], k["window"]): k["count"] for k in shape.layer_kinds()}
    assert kinds == {("sliding", 128): 12, ("full", None): 12}


def test_qwen3_next_linear_attention_layers_hold_no_kv():
    shape = read_model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    full = [l for l in shape.layers if l.attention.kind == "full"]
    assert len(full) == 12
    assert shape.kv_bytes_per_token(2) == 12 * 2 * 2 * 256 * 2


def test_bitsandbytes_nf4_keeps_embeddings_and_head_in_16_bit():
    shape = read_model(str(shared_or_skip(CORPUS / "hf_models" / "DocWobble__Orpheus_3B_Quantized__config.json")))
    q = shape.quantization
    assert q.method.startswith("bitsandbytes-4bit") and 4 < q.bits < 4.6
    linear = shape.layer_params.attention + shape.layer_params.mlp
    assert weight_bytes(shape) == int((shape.params - linear) * 2 + linear * q.bits / 8)


LORA = json.loads((__import__("conftest").DATA / "lora_counts.json").read_text())


@pytest.mark.parametrize("model_type", sorted(set(LORA) - {"multimodal"}))
def test_lora_trainable_count_equals_peft_for_every_family(model_type):
    """``get_peft_model(LoraConfig(r=8, target_modules="all-linear"))`` on each default config
    (dev/lora_counts.py): fused projections, MLA and Gated DeltaNet linears, llama4's nn.Linear
    router, PEFT's transformers-5 conversion onto fused experts, and gemma4's per-layer-input
    linears."""
    from vramlint.memory.parts.adapters import lora_params
    assert lora_params(shape_from_dict({"model_type": model_type}), 8) == LORA[model_type]["r8_all_linear"]


MULTIMODAL = [(name, targets) for name, counts in sorted(LORA["multimodal"].items()) for targets in counts
              if targets != "source"]


@pytest.mark.parametrize("name, targets", MULTIMODAL)
def test_lora_on_a_multimodal_checkpoint_equals_peft_tower_included(name, targets):
    """PEFT on the class transformers builds for the checkpoint (dev/lora_counts.py): "all-linear"
    adapts the vision tower's linears too, a target list each one whose name ends in an entry
    (SigLIP's q/k/v_proj, not Qwen3-VL's fused qkv); and where the tower's modules of a target's
    name wrap their nn.Linear (Gemma 4), PEFT refuses the list and vramlint says so."""
    from vramlint.memory.parts.adapters import lora_params, refused_targets, tower_adapters
    expected = LORA["multimodal"][name][targets]
    model = shape_from_dict({"model_type": name[8:]}) if name.startswith("default:") else read_model(name)
    wanted = tuple(targets.split(","))
    p = Plan(model=model, cluster=Cluster(Gpu("H200", 141 * 10**9), 1), precision="bf16", runtime="torch", seq_len=1024,
             lora_rank=16, lora_targets=wanted)
    if "refused" in expected:
        assert refused_targets(p) == sorted(wanted)
        assert any("PEFT refuses target_modules" in note for note in estimate(p, replay=False).assumptions)
        return
    assert refused_targets(p) == []
    assert tower_adapters(model, 16, wanted) == expected["tower"]
    assert lora_params(model, 16, wanted) + tower_adapters(model, 16, wanted) == expected["total"]


@pytest.mark.parametrize("q", [
    {"quant_method": "compressed-tensors", "config_groups": "fp8"},
    {"quant_method": "compressed-tensors", "config_groups": {"g": True}},
    {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": "4"}}}},
    {"quant_method": "fp8", "weight_block_size": ["128", 128]},
    {"quant_method": "gptq", "bits": "x", "group_size": float("inf")},
])
def test_a_malformed_quantization_config_reads_as_the_formats_defaults(q):
    """Found by mutating catalog configs: each of these was an internal error (a string where a
    mapping or a number belongs). A value no quantizer writes is read as absent."""
    from vramlint.models.quantization import read_quantization
    quant = read_quantization(q)
    assert quant is None or 4 <= quant.bits <= 8.5
