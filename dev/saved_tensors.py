"""Dev-only: what autograd keeps for one decoder layer of every family, from transformers itself.

For each model type's default config (two layers, at most 8 routed experts, dropout off: CPU
SDPA has no fused kernel with dropout), runs one bf16 training forward on the CPU under
``torch.autograd.graph.saved_tensors_hooks`` and sums the distinct storages the first layer's
ops save (parameters excluded). Writes ``tests/data/saved_tensors.json``:
``{"<type>:<attn>": {"seq": 64, "bytes_per_token": ..., "config": {...}, "source": ...}}``.

The CPU kernels differ from CUDA's only inside SDPA, where the CPU falls back to the math path
(fp32 scores) for MQA expansions and unequal q/v head sizes; ``tests/test_activations_saved.py``
leaves those families out and says why.

    pip install torch==2.13.0 transformers    # CPU build from local disk; never a vramlint dependency
    python dev/saved_tensors.py > tests/data/saved_tensors.json
"""

from __future__ import annotations

import warnings

import torch
import transformers
from torch_probe import dump_cases
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

SEQ = 64
TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
         "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon", "deepseek_v3", "olmo2", "starcoder2", "gpt_oss",
         "gpt_bigcode"]
EAGER = ["llama", "qwen2", "mixtral", "gemma2", "phi3", "gpt_neox"]
DROPOUT = ("attn_pdrop", "resid_pdrop", "embd_pdrop", "attention_dropout", "hidden_dropout", "residual_dropout",
           "embedding_dropout")


def small(model_type: str):
    """The default config with two layers and at most 8 routed experts (2 per token)."""
    raw = CONFIG_MAPPING[model_type]().to_dict()
    raw.pop("layer_types", None)
    over = {k: 2 for k in ("num_hidden_layers", "n_layer") if k in raw}
    over |= {k: 8 for k in ("num_experts", "num_local_experts", "n_routed_experts") if raw.get(k)}
    if (raw.get("num_experts_per_tok") or 0) > 2:
        over["num_experts_per_tok"] = 2
    over |= {k: 0.0 for k in DROPOUT if raw.get(k)}
    if model_type.startswith("deepseek"):
        over |= {"first_k_dense_replace": 0, "n_group": 1, "topk_group": 1}
    return CONFIG_MAPPING[model_type](**{**raw, **over})


def first_layer_bytes(config, attn: str) -> int:
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation=attn)
    model.train()
    model.config.use_cache = False
    layers = next(module for name, module in model.named_modules() if isinstance(module, torch.nn.ModuleList))
    tag = {"layer": -1}
    for index, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda module, args, index=index: tag.__setitem__("layer", index))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, tuple[int, int]] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved.setdefault(storage.data_ptr(), (storage.nbytes(), tag["layer"]))
        return tensor

    ids = torch.randint(0, config.vocab_size, (1, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(input_ids=ids)
    return sum(size for size, layer in saved.values() if layer == 0)


def measure(case: tuple[str, str]) -> tuple[str, dict]:
    warnings.filterwarnings("ignore")
    model_type, attn = case
    config = small(model_type)
    try:
        total = first_layer_bytes(config, attn)
    except ValueError:                 # no SDPA for this type (gpt-oss): transformers uses eager
        attn = "eager"
        total = first_layer_bytes(config, attn)
    return f"{model_type}:{attn}", {"seq": SEQ, "bytes_per_token": total / SEQ, "config": config.to_diff_dict(),
                                    "source": f"torch {torch.__version__}, transformers {transformers.__version__}"}


def main() -> None:
    dump_cases(measure, [(t, "sdpa") for t in TYPES] + [(t, "eager") for t in EAGER], "bytes_per_token")


if __name__ == "__main__":
    main()
