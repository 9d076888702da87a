"""Dev-only: PEFT's own trainable-parameter count for LoRA on every supported family.

Builds each model type's default config with transformers on torch's meta device, wraps it with
``peft.get_peft_model(LoraConfig(r=8, target_modules="all-linear"))`` and writes
``tests/data/lora_counts.json``: ``{model_type: {"r8_all_linear": trainable, "source": ...}}``.
PEFT decides which linears "all-linear" reaches — on transformers 5's fused MoE experts through its
v4 -> v5 target conversion (router adapted, gate_up at rank 2r, dense and shared MLP names taken) —
and vramlint's ``lora_params`` must reproduce the number.

The catalog's multimodal checkpoints, built as ``AutoModelForCausalLM`` builds them (gemma3 and
gemma4: their ForConditionalGeneration; qwen3_vl, qwen2_5_vl: ``AutoModelForImageTextToText``), are under
``"multimodal"``: ``{id: {targets: {"total": trainable, "tower": outside the language model} or
{"refused": PEFT's error}}}`` at r=16 for "all-linear" and two target lists —
vramlint's ``lora_params`` + ``tower_adapters`` must reproduce both, and name the refusal.

    pip install torch==2.13.0 transformers peft    # CPU build from local disk; never a vramlint dependency
    python dev/lora_counts.py > tests/data/lora_counts.json
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import peft
import torch
import transformers
from peft import LoraConfig, get_peft_model
from transformers import CONFIG_MAPPING, AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

from param_counts import NOT_TEXT      # the tower's and projector's parameter names

TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
         "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon", "deepseek_v2", "deepseek_v3", "olmo2",
         "starcoder2", "gpt_oss", "llama4_text", "gpt_bigcode", "qwen3_next", "gemma4_text"]
MULTIMODAL = ["google/gemma-3-4b-it", "Qwen/Qwen3-VL-8B-Instruct", "google/gemma-4-26B-A4B",
              "Qwen/Qwen2.5-VL-7B-Instruct", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "default:mistral3",
              "Qwen/Qwen2-VL-7B-Instruct", "llava-hf/llava-1.5-7b-hf", "default:paligemma",
              "default:smolvlm"]
TARGET_LISTS = ["all-linear", "q_proj,k_proj,v_proj,o_proj", "gate_proj,up_proj,down_proj"]


def trainable(model_type: str) -> int:
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(CONFIG_MAPPING[model_type]())
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                                                 lora_dropout=0.0, task_type="CAUSAL_LM"))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def multimodal(name: str, targets: str) -> dict:
    """PEFT's count on one catalog checkpoint, and how much of it sits outside the language model."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from vramlint.models.catalog import entries
    if name.startswith("default:"):              # a type's own defaults (no catalog entry)
        config = CONFIG_MAPPING[name.split(":", 1)[1]]()
    else:
        raw = dict(next(e for e in entries() if e["id"] == name)["config"])
        config = AutoConfig.for_model(raw.pop("model_type"), **raw)
    auto = AutoModelForCausalLM if config.model_type in ("gemma3", "gemma4") else AutoModelForImageTextToText
    with torch.device("meta"):
        model = auto.from_config(config)
        try:
            model = get_peft_model(model, LoraConfig(r=16, target_modules=targets if targets == "all-linear"
                                                     else targets.split(","), task_type="CAUSAL_LM"))
        except ValueError as error:
            return {"refused": str(error).splitlines()[0]}
    grads = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
    return {"total": sum(n for _, n in grads), "tower": sum(n for name, n in grads if NOT_TEXT.search(name))}


def main() -> None:
    warnings.filterwarnings("ignore")
    source = f"peft {peft.__version__}, transformers {transformers.__version__}"
    out = {t: {"r8_all_linear": trainable(t), "source": source} for t in TYPES}
    out["multimodal"] = {name: {targets: multimodal(name, targets) for targets in TARGET_LISTS} | {"source": source}
                         for name in MULTIMODAL}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
