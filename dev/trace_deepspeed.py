"""Dev-only: record the allocations DeepSpeed makes in one ds_measure.py setup, on the CPU.

Runs ``../shared/groundtruth/ds_measure.py``'s setup — the model built first, then
``deepspeed.initialize`` with the measured bf16 config and torch's AdamW as client optimizer
(foreach, as it defaults on CUDA), gradient checkpointing (unless ``--no-gc``), two steps — on
DeepSpeed's CPU accelerator (world size 1, gloo), with fewer layers so that it runs in minutes on
two cores. Logs every storage an aten op creates and when the storage dies
(``torch_probe.StorageWatch``, which follows DeepSpeed's ``param.data = ...`` swaps). Writes
JSON: ``{"model", "layers", "stage", "micro_batch", "seq", "sub_group_size", "lora_rank",
"checkpointing", "after_init" (bytes alive after ``initialize``, the model included), "config",
"steps": [[["alloc", id, bytes, op] | ["free", id], ...], ...]}`` — the two steps' events; what
``initialize`` does is left out, since on the CPU its "move to the host" is no move at all.

Replayed after vramlint's own initialisation (``memory/zero.py``) the sequence is DeepSpeed's real
op order on one stream: what it leaves out is the GPU's — the all-gather and reduce streams and
the blocks ``record_stream`` holds back. Only stages without offload are comparable (on the CPU
the host is the device).

    pip install torch==2.13.0 transformers deepspeed    # never vramlint dependencies
    python dev/trace_deepspeed.py llama-3.2-1b 3 2 2048 --layers 4 [--sub-group-size N] [--lora R] \
        [--no-gc] > trace.json
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import warnings
from pathlib import Path

GROUNDTRUTH = Path(__file__).resolve().parents[2] / "shared" / "groundtruth"


def models() -> dict:
    source = (GROUNDTRUTH / "ds_measure.py").read_text()
    scope: dict = {}
    exec(source[source.index("MODELS = {"):source.index("rec = dict(")], scope)
    return scope["MODELS"]


def record(name: str, stage: int, micro_batch: int, seq: int, layers: int,
           sub_group_size: int = 1_000_000_000, lora: int = 0, checkpointing: bool = True) -> dict:
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=os.environ.get("MASTER_PORT", "29533"), DS_ACCELERATOR="cpu")
    import deepspeed
    import torch
    from torch_probe import StorageWatch
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, kwargs = models()[name]
    config = AutoConfig.for_model(model_type, **{**kwargs, "num_hidden_layers": layers})
    events: list = []
    ids: dict[int, int] = {}
    count = itertools.count()

    def new(ptr: int, nbytes: int, op: str) -> None:
        ids[ptr] = next(count)
        events.append(["alloc", ids[ptr], nbytes, op])

    def free(ptr: int) -> None:
        events.append(["free", ids.pop(ptr)])

    with StorageWatch(set(), new, free):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
        model.config.use_cache = False
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if lora:        # PEFT on the frozen base, the optimizer over the adapters (as HF Trainer builds it)
            from peft import LoraConfig, get_peft_model
            model = get_peft_model(model, LoraConfig(r=lora, lora_alpha=2 * lora, lora_dropout=0.0,
                                                     target_modules="all-linear"))
            model.enable_input_require_grads()
        ds_config = {"train_micro_batch_size_per_gpu": micro_batch, "gradient_accumulation_steps": 1,
                     "bf16": {"enabled": True}, "gradient_clipping": 1.0,
                     "zero_optimization": {"stage": stage, "sub_group_size": sub_group_size},
                     "zero_allow_untested_optimizer": True, "zero_force_ds_cpu_optimizer": False,
                     "steps_per_print": 10**9, "wall_clock_breakdown": False}
        trained = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trained, lr=1e-5, foreach=True)
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
        live = {}
        for event in events:
            if event[0] == "alloc":
                live[event[1]] = event[2]
            else:
                live.pop(event[1], None)
        after_init = sum(live.values())
        tokens = torch.randint(0, config.vocab_size, (micro_batch, seq))
        steps = []
        for _ in range(2):
            start = len(events)
            loss = engine(input_ids=tokens, labels=tokens).loss
            engine.backward(loss)
            del loss
            engine.step()
            steps.append(events[start:])
    return {"model": name, "layers": layers, "stage": stage, "micro_batch": micro_batch, "seq": seq,
            "sub_group_size": sub_group_size, "lora_rank": lora, "checkpointing": checkpointing,
            "after_init": after_init, "config": {**config.to_diff_dict(), "model_type": model_type},
            "source": f"torch {torch.__version__}, deepspeed {deepspeed.__version__} (CPU accelerator)",
            "steps": steps}


def main() -> None:
    warnings.filterwarnings("ignore")
    args = sys.argv[1:]
    option = lambda flag, default: int(args[args.index(flag) + 1]) if flag in args else default  # noqa: E731
    name, stage, micro_batch, seq = args[0], int(args[1]), int(args[2]), int(args[3])
    json.dump(record(name, stage, micro_batch, seq, option("--layers", 4), option("--sub-group-size", 10**9),
                     option("--lora", 0), "--no-gc" not in args), sys.stdout)
    print()


if __name__ == "__main__":
    main()
