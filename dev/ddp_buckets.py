"""Dev-only: the gradient buckets DistributedDataParallel keeps, recorded on two gloo ranks (CPU).

For each case a model with one measured model's widths and a couple of layers is wrapped in
``DistributedDataParallel`` (defaults: ``bucket_cap_mb`` 25, ``gradient_as_bucket_view`` off) and
trained for two steps (torch's foreach AdamW). Recorded on rank 0, from the storages aten ops
create (``torch_probe.StorageWatch``): ``after_wrap``, the bytes alive right after wrapping (the
Reducer's one initial bucket; the parameters excepted), and ``buckets``, the storages the second
step creates that outlive it — the buckets the Reducer rebuilds in gradient-ready order before
the second forward (the gradients, activations and temporaries are gone by then; Adam's states
come from the first step). Writes ``tests/data/ddp_buckets.json``: ``{"<case>": {"config",
"weights_dtype", "lora_rank", "after_wrap", "buckets"}}``.

    pip install torch==2.13.0 transformers peft    # never vramlint dependencies
    python dev/ddp_buckets.py > tests/data/ddp_buckets.json
"""

from __future__ import annotations

import itertools
import json
import os
import sys

from torch_probe import StorageWatch, parameter_storages, run_ranks
from trace_deepspeed import models

CASES = {   # name -> (measured model, layers, weights dtype, LoRA rank)
    "llama-3.2-1b:2l:bf16": ("llama-3.2-1b", 2, "bfloat16", 0),
    "qwen2.5-1.5b:2l:fp32": ("qwen2.5-1.5b", 2, "float32", 0),
    "llama-3.2-1b:2l:lora16": ("llama-3.2-1b", 2, "bfloat16", 16),
}


def record(case: str, rank: int, world: int) -> dict:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29571"))
    import torch
    import torch.distributed as dist
    from transformers import AutoConfig, AutoModelForCausalLM

    dist.init_process_group("gloo", rank=rank, world_size=world)
    name, layers, dtype, lora = CASES[case]
    model_type, kwargs = models()[name]
    config = AutoConfig.for_model(model_type, **{**kwargs, "num_hidden_layers": layers})
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype), attn_implementation="sdpa")
    model.config.use_cache = False
    if lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=lora, lora_alpha=2 * lora, lora_dropout=0.0,
                                                 target_modules="all-linear"))
    ids = torch.randint(0, config.vocab_size, (1, 64))
    numbers, alive = itertools.count(), {}

    def new(ptr: int, nbytes: int, _: str) -> None:
        alive[ptr] = (next(numbers), nbytes)

    with StorageWatch(parameter_storages(model), new, lambda ptr: alive.pop(ptr, None)):
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        after_wrap = sum(nbytes for _, nbytes in alive.values())
        optimizer = torch.optim.AdamW([p for p in ddp.parameters() if p.requires_grad], lr=1e-5, foreach=True)
        for _ in range(2):
            start = next(numbers)       # what the second step creates and keeps: the rebuilt buckets
            ddp(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        created = sorted((number, nbytes) for number, nbytes in alive.values() if number > start)
    dist.destroy_process_group()
    return {"config": config.to_diff_dict() | {"model_type": model_type}, "weights_dtype": dtype,
            "lora_rank": lora, "after_wrap": after_wrap, "buckets": [nbytes for _, nbytes in created]}


def main() -> None:
    out = {}
    for case in CASES:
        out[case] = run_ranks(record, (case,), 2)[0]
        print(case, out[case]["after_wrap"], out[case]["buckets"], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
