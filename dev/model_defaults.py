"""Dev-only: dump each supported model type's transformers config defaults to vramlint's data.

``save_pretrained`` writes only what differs from the class defaults, so a real config.json may
omit ``num_key_value_heads``, ``head_dim`` or ``vocab_size``; vramlint fills the gaps from
``vramlint/data/model_defaults.json``, which this script writes from the installed transformers:

    python dev/model_defaults.py > vramlint/data/model_defaults.json
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys

import transformers
from transformers import CONFIG_MAPPING

TYPES = [
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
    "qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "gemma", "gemma2", "gemma3",
    "gemma3_text", "gemma4", "gemma4_text", "phi3", "gpt2", "gpt_neox", "falcon", "gpt_bigcode",
    "deepseek_v2", "deepseek_v3", "kimi_k25", "olmo2", "starcoder2", "gpt_oss", "llama4", "llama4_text",
    "qwen2_5_vl", "qwen2_5_vl_text",
    "siglip_vision_model", "qwen3_vl_vision", "qwen3_vl_moe_vision", "gemma4_vision", "qwen2_5_vl_vision",
    "llama4_vision_model", "mistral3", "pixtral", "qwen2_vl", "qwen2_vl_text", "qwen2_vl_vision",
    "llava", "llava_next", "clip_vision_model", "paligemma", "idefics3", "idefics3_vision", "smolvlm",
    "smolvlm_vision",
]
# Lists derived from the layer count are recomputed by vramlint for the real count, never defaulted.
DROP = {"id2label", "label2id", "transformers_version", "architectures", "task_specific_params",
        "text_config", "vision_config", "audio_config", "_name_or_path", "problem_type", "tokenizer_class",
        "prefix", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
        "chunk_size_feed_forward", "return_dict", "output_hidden_states", "torchscript", "dtype",
        "pruned_heads", "layer_types", "moe_layers", "no_rope_layers", "per_layer_config", "tie_encoder_decoder", "is_encoder_decoder", "finetuning_task", "output_attentions",
        "cross_attention_hidden_size", "add_cross_attention", "is_decoder", "tf_legacy_loss", "use_bfloat16"}


def simple(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str)) or (
        isinstance(value, (list, tuple, dict)) and len(json.dumps(value)) < 4000)


def declared_defaults(cls) -> dict:
    """The class's declared defaults, not an instance's: an instance has derived values filled in
    (``head_dim = hidden_size // heads``, ``ffn_hidden_size = 4 * hidden_size``) that would be
    wrong for any other size, so ``None`` stays ``None`` here and vramlint derives it."""
    if dataclasses.is_dataclass(cls):
        out = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
        return out
    params = inspect.signature(cls.__init__).parameters
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def absent_sub_configs(cls) -> dict:
    """What a composite config builds a sub-config from when the file has none: a
    ``SubConfigSpec``'s ``init_kwargs`` (with its model type), which differ from the sub-config
    class's own defaults (Mistral 3's text_config is Mistral-Small's, not MistralConfig's), or
    nothing at all for an optional one (null: Gemma 4 has no vision tower without a vision_config)."""
    out = {}
    for key, spec in (getattr(cls, "sub_configs_defaults", None) or {}).items():
        kwargs = getattr(spec, "init_kwargs", None)
        if getattr(spec, "optional", False):
            out[key] = None
        elif kwargs:
            out[key] = {"model_type": spec.model_type, **{k: v for k, v in kwargs.items() if simple(v)}}
    return out


def main() -> None:
    out = {"_source": f"transformers {transformers.__version__} configuration classes (declared defaults)"}
    absent = {}
    for model_type in TYPES:
        data = declared_defaults(CONFIG_MAPPING[model_type])
        data["model_type"] = model_type
        out[model_type] = {k: v for k, v in sorted(data.items()) if k not in DROP and simple(v)}
        subs = absent_sub_configs(CONFIG_MAPPING[model_type])
        if subs:
            absent[model_type] = subs
    out["_absent_sub_configs"] = absent
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
