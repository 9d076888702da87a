"""Dev-only: the FSDP units of a LoRA model as transformers' Trainer wraps them, on the CPU.

Five model types' default configs shrunk to two layers (hidden 512, vocab 8000), saved and loaded
with bitsandbytes NF4 + double quantization and ``bnb_4bit_quant_storage=torch.bfloat16`` (what
FSDP needs to shard 4-bit weights), a PEFT LoRA adapter (r=16, all-linear), then wrapped by FSDP1
as the Trainer does for any PEFT model (``update_fsdp_plugin_peft``): PEFT's
``fsdp_auto_wrap_policy`` (decoder layers, and every LoRA linear a unit of its own) and
``MixedPrecision`` in the storage dtype; one gloo rank, so each flat parameter is a unit whole.
Two types also with LoRA on a plain bf16 base (``<type>:16-bit``). Writes JSON ``{type:
{"config", "units": [[module class, elements, dtype, requires_grad], ...], "quant_state_bytes"}}``.

    pip install torch==2.13.0 transformers peft bitsandbytes   # never vramlint dependencies
    python dev/qlora_fsdp_units.py > tests/data/qlora_fsdp_units.json
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings

from qlora_peaks import TYPES, load_4bit, quant_state_bytes
from step_peaks import SMALL
from torch_probe import shrunk_config


def units(model_type: str, quantized: bool = True) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from peft.utils.other import fsdp_auto_wrap_policy
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision

    if quantized:
        config, model = load_4bit(model_type, torch.bfloat16)
    else:                       # LoRA on a 16-bit base: the same wrapping, nothing packed
        from transformers import AutoModelForCausalLM
        config = shrunk_config(model_type, SMALL)
        config.tie_word_embeddings = False
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    states = quant_state_bytes(model)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear"))
    bf16 = torch.bfloat16
    wrapped = FullyShardedDataParallel(model, auto_wrap_policy=fsdp_auto_wrap_policy(model),
                                       device_id=torch.device("cpu"), use_orig_params=False,
                                       mixed_precision=MixedPrecision(param_dtype=bf16, reduce_dtype=bf16,
                                                                      buffer_dtype=bf16))
    found = [[type(unit.module).__name__, unit._flat_param.numel(), str(unit._flat_param.dtype),
              unit._flat_param.requires_grad]
             for unit in FullyShardedDataParallel.fsdp_modules(wrapped) if getattr(unit, "_flat_param", None) is not None]
    return {"config": config.to_diff_dict(), "units": found, "quant_state_bytes": states}


def main() -> None:
    import torch.distributed as dist

    warnings.filterwarnings("ignore")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("gloo", rank=0, world_size=1)
    with contextlib.redirect_stdout(sys.stderr):      # DeepSpeed's import-time log line, via transformers
        found = {t: units(t) for t in TYPES} | {f"{t}:16-bit": units(t, quantized=False) for t in TYPES[:2]}
    json.dump(found, sys.stdout, indent=1)
    print()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
