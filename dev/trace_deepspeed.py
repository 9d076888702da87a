"""Dev-only: record the allocations DeepSpeed makes in one ds_measure.py setup, on the CPU.

Runs ``../shared/groundtruth/ds_measure.py``'s setup — the model built first, then
``deepspeed.initialize`` with the measured bf16 config and torch's AdamW as client optimizer
(foreach, as it defaults on CUDA), gradient checkpointing (unless ``--no-gc``), two optimizer
steps (each of ``gradient_accumulation_steps`` micro-batches, ``--ds`` sets it) — on
DeepSpeed's CPU accelerator (world size 1, or ``--world N`` ranks as processes; gloo), with fewer
layers so that it runs in minutes on two cores. Logs every storage an aten op creates and when
the storage dies (``torch_probe.StorageWatch``, which follows DeepSpeed's ``param.data = ...``
swaps), tagged with the stream ZeRO-3 would run it on (``_tag_streams``), without what a
collective allocates inside itself (``_mark_collectives``). Writes JSON: ``{"model", "layers",
"stage", "world", "micro_batch", "seq", "sub_group_size", "lora_rank", "checkpointing",
"after_init" (bytes alive after ``initialize``, the model included), "config", "steps":
[[["alloc", id, bytes, op(, stream)] | ["free", id], ...], ...]}`` — each micro-batch's events; what
``initialize`` does is left out, since on the CPU its "move to the host" is no move at all.

Replayed after vramlint's own initialisation (``memory/runtimes/deepspeed/step.py``) the sequence is DeepSpeed's real
op order, each allocation in its stream's pool: what it leaves out is the GPU's timing — the
blocks ``record_stream`` holds back until a stream catches up. Only stages without offload are
comparable (on the CPU the host is the device).

    pip install torch==2.13.0 transformers deepspeed    # never vramlint dependencies
    python dev/trace_deepspeed.py llama-3.2-1b 3 2 2048 --layers 4 [--sub-group-size N] [--lora R] \
        [--no-gc] [--overlap-comm] [--reuse-distance N] [--world N [--rank R]] [--config KEY=INT ...] \
        [--zero KEY=INT ...] [--ds KEY=INT ...] > trace.json
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import warnings
from pathlib import Path

import measured_models


def models() -> dict:
    return measured_models.models("ds_measure.py")


STREAMS = {"partitioned_param_coordinator.py": 1, "stage3.py": 2}   # vramlint's GATHER and REDUCE pools


def _tag_streams(deepspeed) -> list[int]:
    """On the CPU every stream is None and ``accelerator.stream(s)`` a no-op; on a GPU, ZeRO-3's
    all-gathers (the parameter coordinator) and its reduce-and-partition work (stage3.py) run on
    streams of their own, whose blocks the caching allocator keeps apart. Tags each allocation
    made inside such a context with the stream it would have had: the list's one item, 0 outside."""
    import contextlib

    accelerator = deepspeed.accelerator.get_accelerator()
    current = [0]

    @contextlib.contextmanager
    def stream(_):
        caller = Path(sys._getframe(2).f_code.co_filename).name
        outer, current[0] = current[0], STREAMS.get(caller, current[0])
        try:
            yield
        finally:
            current[0] = outer

    accelerator.stream = stream
    return current


COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "allgather_fn", "reduce_scatter",
               "reduce_scatter_tensor", "reduce_scatter_fn", "reduce", "broadcast", "inference_all_reduce")


def _mark_collectives(deepspeed) -> list[int]:
    """What a collective allocates inside itself is gloo's (or DeepSpeed's fallback for a backend
    without ``reduce_scatter_tensor``), not NCCL's, which writes into the buffers it is given:
    counts the ``deepspeed.comm`` calls in progress, so that such storages are left out."""
    import functools

    depth = [0]

    def counted(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
        return call

    for name in COLLECTIVES:
        if hasattr(deepspeed.comm, name):
            setattr(deepspeed.comm, name, counted(getattr(deepspeed.comm, name)))
    return depth


def record(name: str, stage: int, micro_batch: int, seq: int, layers: int,
           sub_group_size: int = 1_000_000_000, lora: int = 0, checkpointing: bool = True, overlap_comm: bool = False,
           reuse_distance: int = 1_000_000_000, widths: dict | None = None, zero: dict | None = None,
           top: dict | None = None, rank: int = 0, world: int = 1) -> dict:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=os.environ.get("MASTER_PORT", "29533"), DS_ACCELERATOR="cpu")
    import deepspeed
    import torch
    from torch_probe import StorageWatch
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, kwargs = models()[name]
    config = AutoConfig.for_model(model_type, **{**kwargs, "num_hidden_layers": layers, **(widths or {})})
    events: list = []
    ids: dict[int, int] = {}
    count = itertools.count()

    stream = _tag_streams(deepspeed)
    in_comm, scratch = _mark_collectives(deepspeed), set()

    def new(ptr: int, nbytes: int, op: str) -> None:
        if in_comm[0]:
            scratch.add(ptr)
            return
        ids[ptr] = next(count)
        events.append(["alloc", ids[ptr], nbytes, op] + ([stream[0]] if stream[0] else []))

    def free(ptr: int) -> None:
        if ptr in scratch:
            scratch.discard(ptr)
            return
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
                     "zero_optimization": {"stage": stage, "sub_group_size": sub_group_size,
                                           "stage3_max_reuse_distance": reuse_distance, **(zero or {}),
                                           **({"overlap_comm": True} if overlap_comm else {})},
                     "zero_allow_untested_optimizer": True, "zero_force_ds_cpu_optimizer": False,
                     "steps_per_print": 10**9, "wall_clock_breakdown": False, **(top or {})}
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
        tokens = torch.randint(0, config.vocab_size, (micro_batch, seq), generator=torch.Generator().manual_seed(rank))
        steps = []      # what each engine.step() ends: a micro-batch; two optimizer steps of them
        for _ in range(2 * (top or {}).get("gradient_accumulation_steps", 1)):
            start = len(events)
            loss = engine(input_ids=tokens, labels=tokens).loss
            engine.backward(loss)
            del loss
            engine.step()
            steps.append(events[start:])
    return {"model": name, "layers": layers, "stage": stage, "world": world, "micro_batch": micro_batch, "seq": seq,
            "sub_group_size": sub_group_size, "lora_rank": lora, "checkpointing": checkpointing,
            **({"overlap_comm": True} if overlap_comm else {}), "max_reuse_distance": reuse_distance,
            "zero_optimization": zero or {}, **({"ds_config": top} if top else {}),
            "after_init": after_init, "config": {**config.to_diff_dict(), "model_type": model_type},
            "source": f"torch {torch.__version__}, deepspeed {deepspeed.__version__} (CPU accelerator)",
            "steps": steps}


def _ranks(args: tuple, world: int, rank: int = 0) -> dict:
    """One rank's trace of an N-rank run (rank 0 unless ``--rank``: ZeRO-1/2's gradient partition
    holds the whole parameters overlapping a rank's part, so ranks differ), with what
    ``initialize`` left on each rank."""
    from torch_probe import run_ranks

    traces = run_ranks(record, args, world)
    return {**traces[rank], "rank": rank, "after_init_per_rank": [t["after_init"] for t in traces]}


def _pairs(args: list[str], flag: str) -> dict[str, int]:
    """Every ``flag KEY=INT`` given: model config overrides (``--config hidden_size=512``), extra
    ``zero_optimization`` keys (``--zero stage3_max_live_parameters=30000000``) or top-level
    DeepSpeed keys (``--ds gradient_accumulation_steps=2``)."""
    return {args[i + 1].split("=")[0]: int(args[i + 1].split("=")[1]) for i, a in enumerate(args) if a == flag}


def main() -> None:
    warnings.filterwarnings("ignore")
    args = sys.argv[1:]
    option = lambda flag, default: int(args[args.index(flag) + 1]) if flag in args else default  # noqa: E731
    name, stage, micro_batch, seq = args[0], int(args[1]), int(args[2]), int(args[3])
    run = (name, stage, micro_batch, seq, option("--layers", 4), option("--sub-group-size", 10**9),
           option("--lora", 0), "--no-gc" not in args, "--overlap-comm" in args,
           option("--reuse-distance", 10**9), _pairs(args, "--config"), _pairs(args, "--zero"), _pairs(args, "--ds"))
    world = option("--world", 1)
    saved = os.dup(1)
    os.dup2(2, 1)           # what DeepSpeed prints (its op builds too) goes to stderr: stdout is the JSON
    try:
        trace = _ranks(run, world, option("--rank", 0)) if world > 1 else record(*run)
    finally:
        os.dup2(saved, 1)
    json.dump(trace, sys.stdout)
    print()


if __name__ == "__main__":
    main()
