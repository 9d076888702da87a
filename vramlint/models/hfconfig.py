"""Read a HuggingFace ``config.json`` (a file, a folder holding one, or a catalog name) into a
:class:`ModelShape`.

The reader knows the quirks of real checkpoints (docs/config-formats.md section D):
multimodal configs keep the language model in ``text_config`` (with ``tie_word_embeddings`` or
``quantization_config`` sometimes only at the top level; Qwen2.5-VL's at the top level
altogether; without one, the wrapper's own defaults for it, Mistral 3's Mistral-Small); remote-code model types
(``RefinedWeb``, ``kimi_k2``) and configs without ``model_type`` are read through the
architecture they declare; ``torch_dtype`` became ``dtype``; ModelOpt keeps its quantization in
a side file ``hf_quant_config.json``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from vramlint.errors import UsageError
from vramlint.models.architectures import FAMILIES
from vramlint.models.config import HfConfig, absent_sub_config, check_limits, model_defaults
from vramlint.models.quantization import read_quantization
from vramlint.models.rope import rope_tables
from vramlint.models.shape import ModelShape
from vramlint.models.vision import vision_tower

# Multimodal wrappers: the model type of their text_config when the file leaves it out.
TEXT_TYPES = {
    "gemma3": "gemma3_text", "llama4": "llama4_text", "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text", "kimi_k25": "kimi_k2", "gemma4": "gemma4_text",
    "qwen2_5_vl": "qwen2_5_vl_text", "qwen2_vl": "qwen2_vl_text", "mistral3": "mistral",
    "llava": "llama", "llava_next": "llama", "paligemma": "gemma", "idefics3": "llama", "smolvlm": "llama",
}
# Wrappers whose published configs keep the language model's keys at the top level (transformers
# pops them into text_config when there is none: ``Qwen2_5_VLConfig.__post_init__``).
FLAT_TEXT = {"qwen2_5_vl", "qwen2_vl"}
# Remote-code or renamed types, read as the family whose layout they share.
ALIASES = {
    "RefinedWeb": "falcon", "RefinedWebModel": "falcon", "kimi_k2": "deepseek_v3",
    "qwen2_5": "qwen2",
    # remote-code types whose parameters are a hand-modelled family's, tensor for tensor (each held
    # to its published size in the catalog): InternLM2's fused wqkv is Llama's q, k, v; Baichuan's
    # W_pack likewise (13B's ALiBi has no parameters); ChatGLM / GLM-4's query_key_value with bias,
    # bias-free dense and swiglu dense_h_to_4h are Qwen2's projections
    "internlm2": "llama", "baichuan": "llama", "chatglm": "qwen2",
    "minicpm": "llama",        # MiniCPM 1/2: Llama's tensors (its scale_emb / scale_depth scale, not add)
    "internlm3": "llama",      # InternLM3: Llama's, with head_dim and no biases (qkv_bias, bias false)
}
# Aliased types that spell the standard keys their own way (ChatGLM's num_layers, ffn_hidden_size,
# padded_vocab_size, multi_query_group_num, seq_length): read through the standard spellings.
RESPELLED = {"chatglm"}
# ``architectures`` class names, for configs without a model_type.
ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text", "Phi3ForCausalLM": "phi3", "GPT2LMHeadModel": "gpt2",
    "GPTNeoXForCausalLM": "gpt_neox", "FalconForCausalLM": "falcon", "RWForCausalLM": "falcon",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3",
    "Olmo2ForCausalLM": "olmo2", "Starcoder2ForCausalLM": "starcoder2", "GptOssForCausalLM": "gpt_oss",
    "GPTBigCodeForCausalLM": "gpt_bigcode", "Llama4ForCausalLM": "llama4_text",
}
SUPPORTED = sorted(set(FAMILIES) | set(TEXT_TYPES) | set(ALIASES))
GENERIC = "generic"
DTYPE_NAMES = {"float32": "float32", "float": "float32", "fp32": "float32", "float16": "float16",
               "half": "float16", "fp16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16"}


def load_json(path: Path) -> dict[str, Any]:
    """A model's config.json, read as configs are (``documents.read_text``: a regular file under
    the size cap)."""
    from vramlint.documents import ParseError, read_text
    try:
        data = json.loads(read_text(path))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ParseError as exc:
        raise UsageError(f"{path}: {exc.message}") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a model config is a JSON object, got {type(data).__name__}")
    return data


def _family_by_keys(raw: dict[str, Any]) -> str | None:
    """The family a config's keys show, for configs with neither model_type nor architectures."""
    if "kv_lora_rank" in raw:
        return "deepseek_v3"
    if "n_head_kv" in raw or "new_decoder_architecture" in raw:
        return "falcon"
    if "n_embd" in raw:
        return "gpt2"
    if {"hidden_size", "num_attention_heads", "intermediate_size"} <= raw.keys():
        return "llama"
    return None


def _resolve_type(raw: dict[str, Any]) -> tuple[str, str | None]:
    """(family to build with, the reason when it is not the file's own model_type)."""
    model_type = raw.get("model_type")
    if model_type in FAMILIES:
        return model_type, None
    if model_type in ALIASES:
        return ALIASES[model_type], f"model_type {model_type!r} read as {ALIASES[model_type]}"
    if model_type:
        return GENERIC, f"model_type {model_type!r} is not modelled by hand"
    for arch in raw.get("architectures") or []:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch], f"no model_type: read as {ARCHITECTURES[arch]} from architectures [{arch}]"
    family = _family_by_keys(raw)
    if family:
        return family, f"no model_type or known architectures: read as {family} from its keys"
    raise UsageError("config has no model_type, no known architectures and no recognisable keys; "
                     f"vramlint models by hand: {', '.join(SUPPORTED)}")


def _text_part(raw: dict[str, Any]) -> dict[str, Any]:
    """The language model's config: ``text_config`` of a multimodal checkpoint, with the
    top-level keys it inherits (tie_word_embeddings, dtype, quantization_config)."""
    if raw.get("model_type") not in TEXT_TYPES:
        return raw
    text = raw.get("text_config")
    if isinstance(text, dict):
        merged = dict(text)
    elif raw["model_type"] in FLAT_TEXT:
        merged = {k: v for k, v in raw.items() if k not in ("model_type", "architectures", "vision_config")}
    else:             # none in the file: the wrapper's own defaults for it, if it declares any
        merged = absent_sub_config(raw["model_type"], "text_config") or {}
    merged.setdefault("model_type", TEXT_TYPES[raw["model_type"]])
    for key in ("tie_word_embeddings", "dtype", "torch_dtype", "quantization_config"):
        if key in raw and key not in merged:
            merged[key] = raw[key]
    wrapper_tie = model_defaults().get(raw["model_type"], {}).get("tie_word_embeddings")
    if "tie_word_embeddings" not in merged and wrapper_tie is not None:
        merged["tie_word_embeddings"] = wrapper_tie   # the wrapper class decides lm_head tying
    return merged


def _dtype(raw: dict[str, Any], notes: list[str], quantized: bool) -> str:
    """The checkpoint's dtype. Missing: transformers loads float32, except that a quantized
    checkpoint stores its unquantized tensors in bfloat16 (gpt-oss ships no dtype)."""
    value = raw.get("dtype") or raw.get("torch_dtype")
    if value is None:
        if quantized:
            notes.append("no dtype in config: unquantized tensors of a quantized checkpoint read as bfloat16")
            return "bfloat16"
        notes.append("no dtype in config: transformers loads float32")
        return "float32"
    name = DTYPE_NAMES.get(str(value).replace("torch.", ""))
    if name is None:
        raise UsageError(f"unknown dtype {value!r} in config (expected float32, float16 or bfloat16)")
    return name


def _check_names(raw: dict[str, Any]) -> None:
    """``model_type`` a string and ``architectures`` a list of them, as transformers writes them:
    every later step looks them up by value."""
    model_type, architectures = raw.get("model_type"), raw.get("architectures")
    if model_type is not None and not isinstance(model_type, str):
        raise UsageError(f"model_type must be a string, got {model_type!r}")
    if architectures is not None and not (isinstance(architectures, list)
                                          and all(isinstance(a, str) for a in architectures)):
        raise UsageError(f"architectures must be a list of class names, got {architectures!r}")


def shape_from_dict(raw: dict[str, Any], *, name: str | None = None,
                    side_quant: dict[str, Any] | None = None) -> ModelShape:
    """Build the ModelShape of one config dict (already loaded)."""
    if "producer" in raw and "quantization" in raw and "model_type" not in raw:
        raise UsageError("this is a ModelOpt hf_quant_config.json (quantization only, no architecture): "
                         "point vramlint at the config.json beside it, or at the folder holding both")
    _check_names(raw)
    try:
        check_limits(raw)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    outer, outer_type = raw, raw.get("model_type")
    raw = _text_part(raw)
    _check_names(raw)
    family, read_as = _resolve_type(raw)
    if raw.get("model_type") in RESPELLED:
        from vramlint.models.generic import standard
        raw = standard(raw)
    if raw.get("model_type") == "RefinedWeb" and "new_decoder_architecture" not in raw:
        raw = dict(raw, new_decoder_architecture=True)   # falcon-40b/180b layout (transformers' converter)
    notes: list[str] = [read_as] if read_as else []
    if family == GENERIC:
        return _unmodelled(raw, outer, name, notes)
    builder, defaults_for = FAMILIES[family]
    config = HfConfig(raw, defaults_for)
    try:
        shape = builder(config)
        shape = replace(shape, rope_tables=rope_tables(config, shape))
        tower, untold = vision_tower(outer, shape.hidden_size)
    except KeyError as exc:
        raise UsageError(f"{family} config has no {exc.args[0]!r} and transformers gives it no default") from None
    except ValueError as exc:                  # HfConfig.int's own words: which key, what it got
        raise UsageError(f"{family} config: {exc}") from None
    except (TypeError, ZeroDivisionError, OverflowError) as exc:
        raise UsageError(f"{family} config has a value of the wrong kind, zero or infinite ({exc})") from None
    quant = read_quantization(raw.get("quantization_config"))
    if quant is None and side_quant:
        section = side_quant.get("quantization")
        quant = read_quantization(dict(section, quant_method="modelopt") if isinstance(section, dict) else None)
    notes += [untold] if untold else []
    architecture = (raw.get("architectures") or outer.get("architectures") or [None])[0]   # a wrapper's own class
    return replace(shape, model_type=str(outer_type or family), dtype=_dtype(raw, notes, quant is not None),
                   vision=tower, quantization=quant, architecture=architecture,
                   read_as=family if read_as else None, family=family, name=name, notes=tuple(notes))


def _unmodelled(raw: dict[str, Any], outer: dict[str, Any], name: str | None, notes: list[str]) -> ModelShape:
    """A model type not modelled by hand: its layers as transformers builds them on the meta device
    (``models/meta.py``) where transformers is installed and knows the type, else a Llama-like
    decoder over the standard keys (``models/generic.py``), said as such."""
    from vramlint.models.generic import generic, standard
    model_type = str(raw.get("model_type"))
    shape, why = _built(outer, model_type)
    if shape is not None:
        return replace(shape, model_type=model_type, name=name, notes=tuple(notes) + shape.notes,
                       dtype=_dtype(raw, notes, shape.quantization is not None), shape_by="transformers")
    config = HfConfig(standard(raw), model_type)
    try:
        shape = generic(config)
    except KeyError as exc:
        raise UsageError(f"model_type {model_type!r} is not modelled by hand, {why}, and its config has no "
                         f"{exc.args[0]!r} to read it as a generic decoder") from None
    except (ValueError, TypeError, ZeroDivisionError, OverflowError) as exc:
        raise UsageError(f"{model_type} config: {exc}") from None
    quant = read_quantization(raw.get("quantization_config"))
    notes.append(f"{why}: read as a generic decoder (Llama-like attention and MLP over its sizes; what the "
                 "type adds is not counted)")
    return replace(shape, model_type=model_type, dtype=_dtype(raw, notes, quant is not None), quantization=quant,
                   architecture=(raw.get("architectures") or [None])[0], family="llama", name=name,
                   notes=tuple(notes), shape_by="generic")


def _built(outer: dict[str, Any], model_type: str) -> tuple[ModelShape | None, str]:
    """The shape transformers builds on the meta device, from the disk cache where a build of
    this config by this transformers is kept (``shape_cache``), else built (seconds: a status line
    says so on a terminal, nothing on a pipe) and kept."""
    from vramlint.models import shape_cache
    name = shape_cache.key(outer)
    cached = shape_cache.load(name) if name else None
    if cached is not None:
        return cached, ""
    from vramlint.models.meta import meta_shape
    with _status(f"vramlint: building {model_type} with transformers on the meta device (kept for the next check)"):
        shape, why = meta_shape(outer)
    if shape is not None and name:
        shape_cache.store(name, shape)
    return shape, why


def _status(text: str):
    """A transient status line on a terminal's standard error (rich's), nothing on a pipe."""
    import contextlib
    import sys
    if not getattr(sys.stderr, "isatty", lambda: False)():
        return contextlib.nullcontext()
    from rich.console import Console
    return Console(stderr=True).status(text)
