"""Dev-only: the exact parameter counts vramlint must reproduce, from transformers itself.

Builds every model of ../shared/corpus/hf_models and every supported model type's default config
on torch's meta device (no memory, no weights) and writes ``tests/data/param_counts.json``:
``{case: {"params": model.num_parameters(), "source": ...}}``. Multimodal checkpoints count their
language model (the ``text_config`` built as a causal LM), as vramlint does.

Configs transformers cannot build (remote-code ``RefinedWeb``, ``kimi_k2``, configs without
``model_type``) are built through the architecture they declare, as vramlint reads them, and
flagged ``"via"`` so the tests can also hold them against published sizes.

    pip install torch==2.13.0 transformers    # CPU build from local disk; never a vramlint dependency
    python dev/param_counts.py ../shared/corpus/hf_models > tests/data/param_counts.json
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import torch
import transformers
from transformers import CONFIG_MAPPING, AutoModelForCausalLM, AutoModelForImageTextToText

DEFAULT_TYPES = [
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
    "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon", "deepseek_v2", "deepseek_v3", "olmo2",
    "starcoder2", "gpt_oss", "llama4_text", "gpt_bigcode", "qwen3_next",
]
DEFAULT_MULTIMODAL_TYPES = ["gemma3", "llama4", "qwen3_vl", "qwen3_vl_moe", "gemma4", "qwen2_5_vl", "mistral3",
                            "qwen2_vl", "llava", "llava_next", "paligemma", "idefics3", "smolvlm"]
# Remote-code or missing model types, read through the architecture they declare.
VIA = {"RefinedWeb": "falcon", "RefinedWebModel": "falcon", "kimi_k2": "deepseek_v3", "internlm2": "llama",
       "baichuan": "llama", "chatglm": "qwen2", "minicpm": "llama", "internlm3": "llama", None: None}
ARCH_TYPES = {"LlamaForCausalLM": "llama", "DeepseekV3ForCausalLM": "deepseek_v3", "RWForCausalLM": "falcon"}
FALCON_KEYS = {"n_head": "num_attention_heads", "n_head_kv": "num_kv_heads", "n_layer": "num_hidden_layers",
               "n_embd": "hidden_size",
               # ChatGLM / GLM-4's spellings of Qwen2's keys
               "num_layers": "num_hidden_layers", "ffn_hidden_size": "intermediate_size",
               "padded_vocab_size": "vocab_size", "multi_query_group_num": "num_key_value_heads",
               "seq_length": "max_position_embeddings"}


NOT_TEXT = re.compile(r"(^|\.)(visual|vision_tower|vision_model|multi_modal_projector|embed_vision|image_newline|connector|"
                      r"audio_tower|"
                      r"embed_audio|mm_projector)(\.|$)")


def largest_module(model) -> int:
    """DeepSpeed's ``largest_layer_params``: the most parameters one module holds itself."""
    return max(sum(p.numel() for p in module.parameters(recurse=False))
               for name, module in model.named_modules() if not NOT_TEXT.search(name))


def count(config) -> tuple[int, int]:
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return model.num_parameters(), largest_module(model)


def count_language_model(config) -> tuple[int, int]:
    """Parameters of a multimodal checkpoint outside its vision/audio towers and projectors."""
    total, largest, _ = count_parts(config)
    return total, largest


def count_parts(config) -> tuple[int, int, int]:
    """A multimodal checkpoint's language-model parameters, its largest module, and its vision
    tower's and projector's parameters (audio towers left out of both)."""
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    seen, total, vision = set(), 0, 0
    for name, param in model.named_parameters(remove_duplicate=True):
        if id(param) in seen:
            continue
        seen.add(id(param))
        if not NOT_TEXT.search(name):
            total += param.numel()
        elif "audio" not in name:
            vision += param.numel()
    return total, largest_module(model), vision


def text_config(raw: dict):
    """The language-model config of a checkpoint: ``text_config`` of multimodal ones."""
    model_type = raw.get("model_type")
    via = None
    if model_type not in CONFIG_MAPPING:
        via = VIA.get(model_type) or ARCH_TYPES[raw["architectures"][0]]
        raw = {FALCON_KEYS.get(k, k): v for k, v in raw.items() if k not in ("model_type", "auto_map")}
        if via == "falcon" and "new_decoder_architecture" not in raw:
            raw["new_decoder_architecture"] = True   # RefinedWeb (40B) is the new decoder layout
    config = CONFIG_MAPPING[via or model_type].from_dict(dict(raw))
    return config, via


def main(folder: str) -> None:
    out: dict[str, dict] = {}
    for path in sorted(Path(folder).glob("*.json")):
        raw = json.loads(path.read_text())
        if "architectures" not in raw and "model_type" not in raw:
            continue  # ModelOpt hf_quant_config.json side files hold no architecture
        config, via = text_config(raw)
        multimodal = "text_config" in raw or "vision_config" in raw
        params, largest, vision = count_parts(config) if multimodal else (*count(config), None)
        entry = {"params": params, "largest_layer_params": largest,
                 **({"vision_params": vision} if multimodal else {}),
                 "source": f"transformers {transformers.__version__}"}
        if via:
            entry["via"] = via
        out[path.name] = entry
        print(path.name, entry, file=sys.stderr)
    for model_type in DEFAULT_TYPES:
        params, largest = count(CONFIG_MAPPING[model_type]())
        out[f"default:{model_type}"] = {"params": params, "largest_layer_params": largest,
                                        "source": f"transformers {transformers.__version__}"}
        print(model_type, out[f"default:{model_type}"], file=sys.stderr)
    for model_type in DEFAULT_MULTIMODAL_TYPES:
        params, largest, vision = count_parts(CONFIG_MAPPING[model_type]())
        out[f"default:{model_type}"] = {"params": params, "largest_layer_params": largest, "vision_params": vision,
                                        "source": f"transformers {transformers.__version__}"}
        print(model_type, out[f"default:{model_type}"], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
