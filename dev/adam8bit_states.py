"""Dev-only: the bytes bitsandbytes' 8-bit AdamW keeps per model, from bitsandbytes itself.

For a few model types' default configs shrunk to a small width (step_peaks.py's), builds the
model on the CPU, runs one ``bitsandbytes.optim.AdamW8bit`` step and adds up every state tensor's
storage (uint8 m and v, fp32 absmax blocks, fp32 m and v of tensors under ``min_8bit_size``; the
shared quantization maps counted once). Also, for FSDP2 over 2 and 4 ranks, the states of rank
0's shards: FSDP2 gives the optimizer one DTensor a parameter, rank 0's local part the first
``torch.chunk`` of its rows (``_fsdp_param.py``), so each shard is a tensor of its own to
bitsandbytes. Writes ``tests/data/adam8bit_states.json``:
``{type: {"state_bytes": ..., "fsdp2_rank0_state_bytes": {"2": ..., "4": ...}, "config": ..., "source": ...}}``.

    pip install torch==2.13.0 transformers bitsandbytes     # never vramlint dependencies
    python dev/adam8bit_states.py > tests/data/adam8bit_states.json
"""

from __future__ import annotations

import warnings

import torch
import transformers
from step_peaks import SMALL
from torch_probe import dump_cases, shrunk_config, training_model

TYPES = ["llama", "qwen2", "gemma2", "gpt2", "gpt_neox"]


def _state_bytes(params: list[torch.Tensor]) -> int:
    """One AdamW8bit step over ``params`` (gradients set), its states' storages added up."""
    import bitsandbytes

    optimizer = bitsandbytes.optim.AdamW8bit(params, lr=1e-5)
    optimizer.step()
    storages = {}
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and not key.startswith("qmap"):
                storages[value.untyped_storage().data_ptr()] = value.untyped_storage().nbytes()
    return sum(storages.values())


def _rank0_shards(model: torch.nn.Module, world: int) -> list[torch.Tensor]:
    shards = []
    for param in model.parameters():
        shard = torch.nn.Parameter(torch.chunk(param.detach(), world, dim=0)[0].clone())
        shard.grad = torch.randn_like(shard)
        shards.append(shard)
    return shards


def measure(model_type: str) -> tuple[str, dict]:
    warnings.filterwarnings("ignore")
    import bitsandbytes

    config = shrunk_config(model_type, SMALL)
    model = training_model(config)
    ids = torch.randint(0, config.vocab_size, (1, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    total = _state_bytes(list(model.parameters()))
    shards = {str(world): _state_bytes(_rank0_shards(model, world)) for world in (2, 4)}
    return model_type, {"state_bytes": total, "fsdp2_rank0_state_bytes": shards, "config": config.to_diff_dict(),
                        "source": f"torch {torch.__version__}, transformers {transformers.__version__}, "
                                  f"bitsandbytes {bitsandbytes.__version__}"}


def main() -> None:
    dump_cases(measure, TYPES, "state_bytes")


if __name__ == "__main__":
    main()
