"""PEFT's own defaults, for a LoRA setup that does not state them: a recipe's LoRA without
``target_modules`` (``readers``, ``recipe_plan``), an adapter repository without them
(``models.resolve``).
"""

from __future__ import annotations

# PEFT's target modules when a LoraConfig names none (peft 0.21.2 utils/constants.py:67-108,
# TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), for the decoder types vramlint models;
# fused projections under vramlint's short names (query_key_value, c_attn: "qkv").
PEFT_DEFAULT_TARGETS = {
    "llama": ("q_proj", "v_proj"), "llama4": ("q_proj", "v_proj"), "llama4_text": ("q_proj", "v_proj"),
    "mistral": ("q_proj", "v_proj"), "mixtral": ("q_proj", "v_proj"), "gemma": ("q_proj", "v_proj"),
    "gemma2": ("q_proj", "v_proj"), "gemma3_text": ("q_proj", "v_proj"), "gemma3": ("q_proj", "v_proj"),
    "qwen2": ("q_proj", "v_proj"), "qwen3": ("q_proj", "v_proj"), "gpt2": ("qkv",), "gpt_bigcode": ("qkv",),
    "gpt_neox": ("qkv",), "falcon": ("qkv",), "phi": ("q_proj", "v_proj", "fc1", "fc2"),
}
PEFT_DEFAULT_RANK = 8          # peft 0.21.2 LoraConfig.r


def peft_default_targets(model) -> tuple[str, ...]:
    """PEFT's target modules for a LoRA config that names none, for ``model`` (its type, else its
    family; q_proj and v_proj, the mapping's commonest entry, for a type PEFT does not list)."""
    kind = model.model_type or model.family
    return PEFT_DEFAULT_TARGETS.get(kind) or PEFT_DEFAULT_TARGETS.get(model.family, ("q_proj", "v_proj"))
