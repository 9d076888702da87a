"""Dev-only: PEFT's own trainable-parameter count for LoRA on every supported family.

Builds each model type's default config with transformers on torch's meta device, wraps it with
``peft.get_peft_model(LoraConfig(r=8, target_modules="all-linear"))`` and writes
``tests/data/lora_counts.json``: ``{model_type: {"r8_all_linear": trainable, "source": ...}}``.
PEFT decides which linears "all-linear" reaches — on transformers 5's fused MoE experts through its
v4 -> v5 target conversion (router adapted, gate_up at rank 2r, dense and shared MLP names taken) —
and vramlint's ``lora_params`` must reproduce the number.

    pip install torch==2.13.0 transformers peft    # CPU build from local disk; never a vramlint dependency
    python dev/lora_counts.py > tests/data/lora_counts.json
"""

from __future__ import annotations

import json
import sys
import warnings

import peft
import torch
import transformers
from peft import LoraConfig, get_peft_model
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
         "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon", "deepseek_v2", "deepseek_v3", "olmo2",
         "starcoder2", "gpt_oss", "llama4_text", "gpt_bigcode", "qwen3_next"]


def trainable(model_type: str) -> int:
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(CONFIG_MAPPING[model_type]())
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                                                 lora_dropout=0.0, task_type="CAUSAL_LM"))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def main() -> None:
    warnings.filterwarnings("ignore")
    source = f"peft {peft.__version__}, transformers {transformers.__version__}"
    out = {t: {"r8_all_linear": trainable(t), "source": source} for t in TYPES}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
