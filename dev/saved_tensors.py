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
from torch_probe import dump_cases, parameter_storages, shrunk_config, training_model

SEQ = 64
TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
         "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon", "deepseek_v3", "olmo2", "starcoder2", "gpt_oss",
         "gpt_bigcode"]
EAGER = ["llama", "qwen2", "mixtral", "gemma2", "phi3", "gpt_neox"]
def first_layer_bytes(model) -> int:
    config = model.config
    layers = next(module for name, module in model.named_modules() if isinstance(module, torch.nn.ModuleList))
    tag = {"layer": -1}
    for index, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda module, args, index=index: tag.__setitem__("layer", index))
    params = parameter_storages(model)
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
    config = shrunk_config(model_type)
    model = training_model(config, attn)
    attn = model.config._attn_implementation
    total = first_layer_bytes(model)
    return f"{model_type}:{attn}", {"seq": SEQ, "bytes_per_token": total / SEQ, "config": config.to_diff_dict(),
                                    "source": f"torch {torch.__version__}, transformers {transformers.__version__}"}


def main() -> None:
    dump_cases(measure, [(t, "sdpa") for t in TYPES] + [(t, "eager") for t in EAGER], "bytes_per_token")


if __name__ == "__main__":
    main()
