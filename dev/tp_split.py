"""Dev-only: what tensor parallelism splits, per parameter, on two CPU ranks.

Builds a tiny config of one transformers family and, on two ranks (gloo), either runs
``deepspeed.initialize`` with ``tensor_parallel.autotp_size`` 2 (ZeRO-1, bf16) on DeepSpeed's CPU
accelerator, or (``--transformers``) loads the saved model with ``from_pretrained(tp_plan="auto")``;
prints each parameter's elements before and after on rank 0 — or the framework's error where it
refuses the model. What ``models/tp_plans.py`` says comes from these runs (DeepSpeed 0.19.8,
transformers 5.24): AutoTP on llama untied and tied, qwen3, gemma3_text, starcoder2, falcon tied
and untied, gpt_bigcode, gpt_oss split; qwen3_moe, mixtral, phi3, olmo2 and gpt2 refused;
transformers on llama, qwen3_moe, gpt_oss split, falcon refused.

    pip install torch==2.13.0 transformers deepspeed    # never vramlint dependencies
    python dev/tp_split.py llama [--tied] [--transformers]
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

SIZES = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=4, vocab_size=1024, num_local_experts=4, num_experts=4, moe_intermediate_size=128,
             pad_token_id=0)


def by_name(named) -> dict[str, int]:
    """Elements per parameter name (a DTensor's local shard), the layer index folded out."""
    out: collections.Counter = collections.Counter()
    for name, param in named:
        local = param.to_local() if hasattr(param, "to_local") else param
        out[".".join(part for part in name.split(".") if not part.isdigit())] += local.numel()
    return out


def build(model_type: str, tied: bool):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.for_model(model_type, **SIZES, tie_word_embeddings=tied)
    return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)


def deepspeed_rank(model_type: str, tied: bool) -> tuple[dict, dict]:
    import deepspeed
    import torch
    model = build(model_type, tied)
    before = by_name(model.named_parameters())
    ds = {"train_micro_batch_size_per_gpu": 1, "tensor_parallel": {"autotp_size": 2},
          "zero_optimization": {"stage": 1}, "bf16": {"enabled": True}}
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                      optimizer=torch.optim.AdamW(model.parameters()), config=ds)
    return before, by_name(engine.module.named_parameters())


def transformers_rank(index: int, model_type: str, tied: bool) -> tuple[dict, dict]:
    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    folder = Path(tempfile.gettempdir()) / f"vramlint_tp_{model_type}_{int(tied)}"
    if index == 0 and not folder.exists():
        build(model_type, tied).save_pretrained(folder)
    dist.init_process_group("gloo")
    dist.barrier()
    model = AutoModelForCausalLM.from_pretrained(folder, tp_plan="auto", dtype=torch.bfloat16)
    before = {name: size for name, size in by_name(
        (n, p.full_tensor() if hasattr(p, "full_tensor") else p) for n, p in model.named_parameters()).items()}
    return before, by_name(model.named_parameters())


def rank(index: int, model_type: str, tied: bool, hf: bool) -> None:
    os.environ.update(RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT="29617", DS_ACCELERATOR="cpu")
    warnings.filterwarnings("ignore")
    try:
        before, after = transformers_rank(index, model_type, tied) if hf else deepspeed_rank(model_type, tied)
    except (ValueError, AssertionError) as error:
        if index == 0:
            print(f"refused: {type(error).__name__}: {error}")
        return
    if index == 0:
        for name in sorted(before):
            print(f"{name:60s} {before[name]:>10} -> {after.get(name)}")


def main(argv: list[str]) -> None:
    tied, hf = "--tied" in argv, "--transformers" in argv
    if argv[0] == "--rank":
        rank(int(argv[1]), argv[2], tied, hf)
        return
    other = subprocess.Popen([sys.executable, __file__, "--rank", "1", *argv], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    rank(0, argv[0], tied, hf)
    other.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
