"""Dev-only: what DeepSpeed AutoTP splits, per parameter, on two CPU ranks.

Builds a tiny config of one transformers family, runs ``deepspeed.initialize`` with
``tensor_parallel.autotp_size`` 2 (ZeRO-1, bf16) on DeepSpeed's CPU accelerator with two ranks
(gloo), and prints each parameter's elements before and after on rank 0 — or DeepSpeed's error
where it refuses the model. What ``models/tp_plans.py`` says of AutoTP comes from these runs
(DeepSpeed 0.19.8, transformers 5.24): llama untied and tied, qwen3, gemma3_text, starcoder2,
falcon tied and untied, gpt_bigcode, gpt_oss split; qwen3_moe, mixtral, phi3, olmo2 and gpt2
refused.

    pip install torch==2.13.0 transformers deepspeed    # never vramlint dependencies
    python dev/autotp_split.py llama [--tied]
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import warnings

SIZES = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=4, vocab_size=1024, num_local_experts=4, num_experts=4, moe_intermediate_size=128,
             pad_token_id=0)


def by_name(named) -> dict[str, int]:
    """Elements per parameter name, the layer index folded out."""
    out: collections.Counter = collections.Counter()
    for name, param in named:
        out[".".join(part for part in name.split(".") if not part.isdigit())] += param.numel()
    return out


def rank(index: int, model_type: str, tied: bool) -> None:
    os.environ.update(RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT="29617", DS_ACCELERATOR="cpu")
    warnings.filterwarnings("ignore")
    import deepspeed
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, **SIZES, tie_word_embeddings=tied)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    before = by_name(model.named_parameters())
    ds = {"train_micro_batch_size_per_gpu": 1, "tensor_parallel": {"autotp_size": 2},
          "zero_optimization": {"stage": 1}, "bf16": {"enabled": True}}
    try:
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                          optimizer=torch.optim.AdamW(model.parameters()), config=ds)
    except (ValueError, AssertionError) as error:
        if index == 0:
            print(f"refused: {type(error).__name__}: {error}")
        return
    after = by_name(engine.module.named_parameters())
    if index == 0:
        for name in sorted(before):
            print(f"{name:60s} {before[name]:>10} -> {after.get(name)}")


def main(argv: list[str]) -> None:
    if argv[0] == "--rank":
        rank(int(argv[1]), argv[2], "--tied" in argv)
        return
    other = subprocess.Popen([sys.executable, __file__, "--rank", "1", *argv], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    rank(0, argv[0], "--tied" in argv)
    other.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
