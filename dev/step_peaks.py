"""Dev-only: the allocated peak of a whole training step, family by family, from transformers itself.

For each model type's default config shrunk to a small width (two layers, hidden 512, 8 heads,
vocab 8000, at most 8 routed experts, dropout off), runs two bf16 training steps on the CPU —
forward, loss, backward, foreach AdamW, zero_grad — under a ``TorchDispatchMode`` that adds up
the storages aten ops create and drops them when their last tensor dies: what
``max_memory_allocated`` would show above the parameters. Writes ``tests/data/step_peaks.json``:
``{type: {"seq": 1024, "peak_above_weights": <second step>, "adam_states": ..., "config": ...}}``.
The second step starts with Adam's states alive (created in the first), outside the count.

Left out: types whose CPU SDPA takes the math path (falcon's multi-query, DeepSeek's MLA) and
qwen3_next (its Gated DeltaNet is not modelled).

    pip install torch==2.13.0 transformers    # CPU build from local disk; never a vramlint dependency
    python dev/step_peaks.py > tests/data/step_peaks.json
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import warnings
import weakref

import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

SEQ = 1024
TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text",
         "phi3", "gpt2", "gpt_neox", "olmo2", "starcoder2", "gpt_oss", "gpt_bigcode"]
SMALL = {"hidden_size": 512, "n_embd": 512, "intermediate_size": 1408, "moe_intermediate_size": 256,
         "shared_expert_intermediate_size": 512, "num_attention_heads": 8, "n_head": 8, "head_dim": 64,
         "vocab_size": 8000}
DROPOUT = ("attn_pdrop", "resid_pdrop", "embd_pdrop", "attention_dropout", "hidden_dropout", "residual_dropout",
           "embedding_dropout")


class LiveStorages(TorchDispatchMode):
    """Bytes of the storages aten ops create and some tensor still holds; their peak."""

    def __init__(self, exclude: set[int]) -> None:
        super().__init__()
        self.exclude, self.refs, self.size = exclude, {}, {}
        self.current = self.peak = 0

    def _release(self, ptr: int) -> None:
        self.refs[ptr] -= 1
        if not self.refs[ptr]:
            del self.refs[ptr]
            self.current -= self.size.pop(ptr)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            ptr = tensor.untyped_storage().data_ptr()
            if not ptr or ptr in self.exclude:
                continue
            if ptr not in self.refs:
                self.refs[ptr], self.size[ptr] = 0, tensor.untyped_storage().nbytes()
                self.current += self.size[ptr]
                self.peak = max(self.peak, self.current)
            self.refs[ptr] += 1
            weakref.finalize(tensor, self._release, ptr)
        return out


def small(model_type: str):
    raw = CONFIG_MAPPING[model_type]().to_dict()
    raw.pop("layer_types", None)
    over = {k: 2 for k in ("num_hidden_layers", "n_layer") if k in raw}
    over |= {k: v for k, v in SMALL.items() if raw.get(k) is not None}
    heads, kv = raw.get("num_attention_heads"), raw.get("num_key_value_heads")
    if kv:
        over["num_key_value_heads"] = 8 if kv == heads else 2
    over |= {k: 8 for k in ("num_experts", "num_local_experts") if raw.get(k)}
    if (raw.get("num_experts_per_tok") or 0) > 2:
        over["num_experts_per_tok"] = 2
    over |= {k: 0.0 for k in DROPOUT if raw.get(k)}
    if (raw.get("pad_token_id") or 0) >= SMALL["vocab_size"]:
        over["pad_token_id"] = None
    return CONFIG_MAPPING[model_type](**{**raw, **over})


def measure(model_type: str) -> tuple[str, dict]:
    warnings.filterwarnings("ignore")
    config = small(model_type)
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    except ValueError:                 # no SDPA for this type (gpt-oss): transformers uses eager
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="eager")
    model.train()
    model.config.use_cache = False
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    ids = torch.randint(0, config.vocab_size, (1, SEQ))
    peaks = []
    for _ in range(2):
        live = LiveStorages(params)
        with live:
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        peaks.append(live.peak)
    adam = sum(s[k].untyped_storage().nbytes() for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq"))
    return model_type, {"seq": SEQ, "attn": model.config._attn_implementation, "peak_above_weights": peaks[1],
                        "adam_states": adam, "config": config.to_diff_dict(),
                        "source": f"torch {torch.__version__}, transformers {transformers.__version__}"}


def main() -> None:
    out = {}
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        for model_type, entry in pool.imap(measure, TYPES):
            out[model_type] = entry
            print(model_type, entry["peak_above_weights"], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1, sort_keys=True, default=str)
    print()


if __name__ == "__main__":
    main()
