"""Dev-only: the allocated peak of a whole training step, family by family, from transformers itself.

For each model type's default config shrunk to a small width (two layers, hidden 512, 8 heads,
vocab 8000, at most 8 routed experts, dropout off), runs two bf16 training steps on the CPU —
forward, loss, backward, foreach AdamW, zero_grad — adding up the storages aten ops create and
dropping them when their last tensor dies (``torch_probe.StorageWatch``): what
``max_memory_allocated`` would show above the parameters. Writes ``tests/data/step_peaks.json``:
``{type: {"seq": 1024, "peak_above_weights": <second step>, "adam_states": ..., "config": ...}}``.
The second step starts with Adam's states alive (created in the first), outside the count.

Left out: types whose CPU SDPA takes the math path (falcon's multi-query, DeepSeek's MLA) and
qwen3_next (its Gated DeltaNet is not modelled).

    pip install torch==2.13.0 transformers    # CPU build from local disk; never a vramlint dependency
    python dev/step_peaks.py > tests/data/step_peaks.json
"""

from __future__ import annotations

import warnings

import torch
import transformers
from torch_probe import StorageWatch, dump_cases, parameter_storages, shrunk_config, training_model

SEQ = 1024
TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text",
         "phi3", "gpt2", "gpt_neox", "olmo2", "starcoder2", "gpt_oss", "gpt_bigcode"]
SMALL = {"hidden_size": 512, "n_embd": 512, "intermediate_size": 1408, "moe_intermediate_size": 256,
         "shared_expert_intermediate_size": 512, "num_attention_heads": 8, "n_head": 8, "head_dim": 64,
         "vocab_size": 8000}


class Live:
    """Bytes of the storages aten ops created that some tensor still holds, and their peak."""

    def __init__(self) -> None:
        self.size: dict[int, int] = {}
        self.current = self.peak = 0

    def new(self, ptr: int, nbytes: int, op: str) -> None:
        self.size[ptr] = nbytes
        self.current += nbytes
        self.peak = max(self.peak, self.current)

    def free(self, ptr: int) -> None:
        self.current -= self.size.pop(ptr)


def measure(model_type: str) -> tuple[str, dict]:
    warnings.filterwarnings("ignore")
    config = shrunk_config(model_type, SMALL)
    model = training_model(config)
    params = parameter_storages(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    ids = torch.randint(0, config.vocab_size, (1, SEQ))
    peaks = []
    for _ in range(2):
        live = Live()
        with StorageWatch(params, live.new, live.free):
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        peaks.append(live.peak)
    adam = sum(s[k].untyped_storage().nbytes() for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq"))
    return model_type, {"seq": SEQ, "attn": model.config._attn_implementation, "peak_above_weights": peaks[1],
                        "adam_states": adam, "config": config.to_diff_dict(),
                        "source": f"torch {torch.__version__}, transformers {transformers.__version__}"}


def main() -> None:
    dump_cases(measure, TYPES, "peak_above_weights")


if __name__ == "__main__":
    main()
