"""Dev-only: what a QLoRA model's parameters take once ``deepspeed.initialize`` has them, on the CPU.

A shrunk llama and qwen2 (two layers, hidden 512, vocab 8000) loaded with bitsandbytes NF4 + double
quantization — ``bnb_4bit_quant_storage`` uint8 for ZeRO-2, bfloat16 for ZeRO-3, which must
partition them (PEFT's ZeRO-3 QLoRA recipe) — a PEFT LoRA adapter (r=16, all-linear), then
``deepspeed.initialize`` with bf16 on DeepSpeed's CPU accelerator, one rank. Records the bytes of
every parameter (ZeRO-3: its partition, whole on one rank), the frozen base's and the adapters'
apart, and the quant states. Writes JSON ``{"<type>:z<stage>": {"config", "base", "adapters",
"quant_states"}}``.

    pip install torch==2.13.0 transformers peft bitsandbytes deepspeed   # never vramlint dependencies
    python dev/qlora_deepspeed.py > tests/data/qlora_deepspeed.json
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings

from qlora_peaks import load_4bit, quant_state_bytes

CASES = [("llama", 2), ("llama", 3), ("qwen2", 2), ("qwen2", 3)]


def initialized(model_type: str, stage: int) -> dict:
    import deepspeed
    import torch
    from peft import LoraConfig, get_peft_model

    config, model = load_4bit(model_type, torch.bfloat16 if stage == 3 else torch.uint8)
    states = quant_state_bytes(model)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear"))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    config_ds = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": stage}}
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config_ds)
    held = {True: 0, False: 0}
    for p in engine.module.parameters():
        data = p.ds_tensor if hasattr(p, "ds_tensor") else p
        held[p.requires_grad] += data.numel() * data.element_size()
    return {"config": config.to_diff_dict(), "base": held[False], "adapters": held[True], "quant_states": states}


def main() -> None:
    warnings.filterwarnings("ignore")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29542", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    with contextlib.redirect_stdout(sys.stderr):      # DeepSpeed's log lines
        found = {f"{t}:z{stage}": initialized(t, stage) for t, stage in CASES}
    json.dump(found, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
