"""Dev-only: record the allocations of FSDP2 training steps as Accelerate sets them up, on the CPU.

``N`` ranks as processes (gloo), each building the model in fp32 (Accelerate upcasts trainable
parameters to fp32 under mixed precision), then what Accelerate 1.15's ``fsdp2_prepare_model``
does for ``fsdp_version: 2`` with ``transformer_based_wrap``: ``fully_shard`` on every decoder
layer, one unit for the final norm + embedding + lm_head (``reshard_after_forward=False``), the
root last; ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16, output_dtype=bf16)``
(``FullyShardedDataParallelPlugin.set_mixed_precision``); the forward under autocast with the
outputs converted to fp32 (``Accelerator.prepare_model``, ``native_amp``); torch's AdamW
(foreach); checkpointing unless ``--no-gc``; two steps as HF Trainer runs them (the outputs
dropped once the loss is taken).

DTensor hides FSDP2's local allocations from a TorchDispatchMode, so this records what the CPU
allocator itself reports: the profiler's memory events (``profile_memory=True``), those of the
main thread only (gloo's worker threads allocate buffers NCCL would not). Writes rank 0's JSON:
``{"model", "layers", "world", "strategy", "tied", "micro_batch", "seq", "checkpointing", "config",
"after_init" (bytes alive after preparation), "steps": [[["alloc", id, bytes(, op(, stream))] |
["free", id], ...], ...]}`` (op: the innermost profiler range around an allocation over 1 MiB, an
aten op or FSDP's own; stream: 1 all-gather, 2 reduce-scatter, absent for the default one).

    pip install torch==2.13.0 transformers    # never vramlint dependencies
``--fsdp1``: FSDP1 instead, as Accelerate's ``prepare_model`` wraps it (flat parameters,
transformer-layer auto wrap, ``MixedPrecision`` bf16, BACKWARD_PRE, ``use_orig_params``).
``--lora R``: PEFT's LoRA on all linears of a bf16 base (FSDP2), the adapters upcast to fp32 as
Accelerate does with what needs grads, the optimizer over the adapters. ``--accumulate``: two
micro-batches a step (gradient accumulation as the HF Trainer runs it), the first under
``no_sync`` and without an optimizer step, the second synced and stepped; two such steps, each
micro-batch's events apart. ``--micro-batches K`` with it: K a step, all but the last under
``no_sync`` (three show what a middle micro-batch keeps).

    python dev/trace_fsdp.py llama-3.2-1b 1 2048 --layers 4 --world 2 [--no-gc] [--shard-grad-op] [--untied] \
        [--fsdp1] [--lora R] [--accumulate [--micro-batches K]] [--config KEY=INT ...] > trace.json
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

from trace_deepspeed import _pairs, models


COLLECTIVE = "trace_fsdp.collective"
MARK = 7919     # bytes of the tensor allocated at the start of each step: a size nothing else has


def _mark_collectives() -> None:
    """What a collective allocates inside itself is gloo's, not NCCL's (which writes into the
    buffers it is given): each ``torch.distributed`` collective runs inside a profiler range, and
    the memory events within such a range are left out (``_events``)."""
    import functools

    import torch.distributed as dist
    from torch.profiler import record_function

    def ranged(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            with record_function(COLLECTIVE):
                return fn(*args, **kwargs)
        return call

    for name in dir(dist):
        if name.startswith(("all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce", "_all_gather_base",
                            "_reduce_scatter_base")) and callable(getattr(dist, name)):
            setattr(dist, name, ranged(getattr(dist, name)))


STREAM = "trace_fsdp.stream"


def _mark_streams() -> None:
    """On the CPU every FSDP stream is a no-op; on a GPU the all-gather copy-in stream (the shard's
    cast and the all-gather output) and the reduce-scatter stream (its output and the fp32
    gradient shard) keep pools of their own in the caching allocator. Work entered on one of them
    runs inside a profiler range ``trace_fsdp.stream1`` / ``2``, which tags what it allocates."""
    import torch
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPCommContext
    from torch.profiler import record_function

    roles: dict[int, int] = {}
    lazy_init = FSDPCommContext.lazy_init

    def init(self, device):
        lazy_init(self, device)
        roles.update({id(self.all_gather_copy_in_stream): 1, id(self.all_gather_stream): 1,
                      id(self.reduce_scatter_stream): 2, id(self.all_reduce_stream): 2})

    FSDPCommContext.lazy_init = init
    import torch.distributed.fsdp._runtime_utils as fsdp1
    init_streams = fsdp1._init_streams

    def streams1(state):        # FSDP1: its unshard and post-backward streams
        init_streams(state)
        roles.update({id(state._unshard_stream): 1, id(state._pre_unshard_stream): 1,
                      id(state._post_backward_stream): 2, id(state._all_reduce_stream): 2})

    fsdp1._init_streams = streams1
    enter, leave = torch.cpu.StreamContext.__enter__, torch.cpu.StreamContext.__exit__

    def entered(self):
        role = roles.get(id(self.stream))
        self._range = record_function(f"{STREAM}{role}") if role else None
        if self._range is not None:
            self._range.__enter__()
        return enter(self)

    def left(self, *exc):
        leave(self, *exc)
        if self._range is not None:
            self._range.__exit__(*exc)

    torch.cpu.StreamContext.__enter__, torch.cpu.StreamContext.__exit__ = entered, left


def _innermost(spans: list[tuple[float, float, str]], starts: list[float], ts: float) -> str:
    """The name of the latest-starting span (op or FSDP's own ``record_function`` range) that
    contains ``ts``: the op that allocated or freed."""
    index = bisect.bisect_right(starts, ts) - 1
    while index >= 0:
        start, end, name = spans[index]
        if end >= ts:
            return name
        index -= 1
    return ""


def _events(trace_file: str, thread: int) -> list[tuple[int, int, str, int]]:
    """(address, bytes: negative for a free, op, stream) of the profiler's memory events on one
    thread, in order, without those inside a collective."""
    events = [e for e in json.loads(Path(trace_file).read_text())["traceEvents"] if e.get("tid") == thread]
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events if "dur" in e and e.get("name")
                   and not e["name"].startswith(STREAM))
    streams = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events if "dur" in e
                     and e.get("name", "").startswith(STREAM))
    starts, stream_starts = [span[0] for span in spans], [span[0] for span in streams]
    collectives = [(start, end) for start, end, name in spans if name == COLLECTIVE]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["args"]["Ev Idx"])
    return [(e["args"]["Addr"], e["args"]["Bytes"], _innermost(spans, starts, e["ts"]),
             int(_innermost(streams, stream_starts, e["ts"])[len(STREAM):] or 0)) for e in memory
            if not any(start <= e["ts"] <= end for start, end in collectives)]


def _as_steps(windows: list[list[tuple[int, int]]]) -> list[list[list]]:
    """Allocations as ids in order of appearance; a free of an address allocated before the
    first window (a parameter, a state from preparation) or inside a collective is dropped."""
    ids: dict[int, int] = {}
    count = itertools.count()
    steps = []
    for window in windows:
        step = []
        for address, nbytes, op, stream in window:
            if nbytes > 0:
                ids[address] = next(count)
                op = op if nbytes > 1 << 20 else ""      # named where it is worth reading
                step.append(["alloc", ids[address], nbytes, *([op, stream] if stream else [op] if op else [])])
            elif address in ids:
                step.append(["free", ids.pop(address)])
        steps.append(step)
    return steps


def _fully_shard(model, inner, tied: bool, strategy: str, world: int) -> int:
    """FSDP2 as Accelerate 1.15's ``fsdp2_prepare_model`` applies it (``inner``: the causal LM, the
    same as ``model`` unless PEFT wraps it); the local shards' bytes."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    bf16 = torch.bfloat16
    shard = dict(mesh=init_device_mesh("cpu", (world,)), reshard_after_forward=strategy == "FULL_SHARD",
                 mp_policy=MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16, output_dtype=bf16))
    for layer in inner.model.layers:
        fully_shard(layer, **shard)
    if not tied:        # an untied embedding is a unit of its own
        fully_shard(inner.model.embed_tokens, **shard)
    tail = [inner.model.norm] + ([inner.model.embed_tokens] if tied else []) + [inner.lm_head]
    fully_shard(tail, **{**shard, "reshard_after_forward": False})
    fully_shard(model, **{k: v for k, v in shard.items() if k != "reshard_after_forward"})
    return sum(p.to_local().nbytes for p in model.parameters())


def _fsdp1(model, strategy: str):
    """FSDP1 as Accelerate 1.15's ``prepare_model`` wraps it (transformer_based_wrap on the decoder
    layer class, bf16 MixedPrecision, BACKWARD_PRE, use_orig_params, limit_all_gathers); returns
    the wrapped model and its flat shards' bytes."""
    import functools

    import torch
    from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    bf16 = torch.bfloat16
    layer = type(model.model.layers[0])
    wrapped = FSDP(model, sharding_strategy=ShardingStrategy[strategy],
                   auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={layer}),
                   mixed_precision=MixedPrecision(param_dtype=bf16, reduce_dtype=bf16, buffer_dtype=bf16),
                   backward_prefetch=BackwardPrefetch.BACKWARD_PRE, use_orig_params=True, limit_all_gathers=True,
                   device_id=torch.device("cpu"))
    flat = [m._flat_param for m in FSDP.fsdp_modules(wrapped) if m._flat_param is not None]
    return wrapped, sum(p.numel() * p.element_size() for p in flat)


@contextlib.contextmanager
def _no_sync(model, version: int):
    """What ``Accelerator.no_sync`` does for a micro-batch that is not the last of a step (the
    HF Trainer and ``accelerator.accumulate`` both use it): FSDP1's ``no_sync()``; FSDP2's
    ``set_requires_gradient_sync(False)``."""
    if version == 1:
        with model.no_sync():
            yield
        return
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def record(name: str, micro_batch: int, seq: int, layers: int, checkpointing: bool, strategy: str, tied: bool,
           version: int, lora: int, accumulate: int, overrides: dict, rank: int, world: int) -> dict:
    """``accumulate``: micro-batches a step (0: one, no accumulation); ``overrides``: the model
    config's (``--config hidden_size=512``)."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=os.environ.get("MASTER_PORT", "29547"))
    import threading

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile
    from transformers import AutoConfig, AutoModelForCausalLM

    dist.init_process_group("gloo", rank=rank, world_size=world)
    _mark_collectives()
    _mark_streams()
    model_type, kwargs = models()[name]
    config = AutoConfig.for_model(model_type, **{**kwargs, **overrides, "num_hidden_layers": layers,
                                                 "tie_word_embeddings": tied})
    dtype = torch.bfloat16 if lora else torch.float32      # LoRA's base as scripts load it; full: fp32 anyway
    model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    model.config.use_cache = False
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    inner = model
    if lora:            # PEFT on the frozen base; Accelerate upcasts what needs grads to fp32
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=lora, lora_alpha=2 * lora, lora_dropout=0.0,
                                                 target_modules="all-linear"))
        model.enable_input_require_grads()
        for param in model.parameters():
            if param.requires_grad and param.dtype != torch.float32:
                param.data = param.data.to(torch.float32)
    if version == 2:
        after_init = _fully_shard(model, inner, tied, strategy, world)
    else:
        model, after_init = _fsdp1(model, strategy)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, foreach=True)
    from accelerate.utils import convert_outputs_to_fp32
    model.forward = convert_outputs_to_fp32(torch.autocast("cpu", dtype=torch.bfloat16)(model.forward))
    tokens = torch.randint(0, config.vocab_size, (micro_batch, seq), generator=torch.Generator().manual_seed(rank))
    marks = []
    with tempfile.TemporaryDirectory() as folder:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            per_step = accumulate or 1
            for index in range(2 * per_step):
                marks.append(torch.empty(MARK, dtype=torch.uint8))     # where each micro-batch starts
                held_back = index % per_step != per_step - 1      # the HF Trainer's: all but the last, no_sync
                with _no_sync(model, version) if held_back else contextlib.nullcontext():
                    loss = model(input_ids=tokens, labels=tokens).loss
                    loss.backward()
                    del loss
                if not held_back:
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
        prof.export_chrome_trace(str(Path(folder, "trace.json")))
        thread = threading.get_native_id()
        events = _events(str(Path(folder, "trace.json")), thread)
    starts = [i for i, (_, nbytes, _, _) in enumerate(events) if nbytes == MARK]
    assert len(starts) == len(marks), starts
    dist.destroy_process_group()
    return {"model": name, "layers": layers, "world": world, "version": version, "strategy": strategy, "tied": tied,
            "lora_rank": lora, **({"accumulate": True} if accumulate else {}),
            **({"micro_batches": accumulate} if accumulate > 2 else {}),
            "micro_batch": micro_batch,
            "seq": seq, "checkpointing": checkpointing, "after_init": after_init,
            "config": {**config.to_diff_dict(), "model_type": model_type},
            "source": f"torch {torch.__version__} FSDP{version} (CPU, gloo), as accelerate 1.15 prepares it",
            "steps": _as_steps([events[start + 1:end] for start, end in zip(starts, starts[1:] + [len(events)])])}


def main() -> None:
    from torch_probe import run_ranks

    warnings.filterwarnings("ignore")
    args = sys.argv[1:]
    option = lambda flag, default: int(args[args.index(flag) + 1]) if flag in args else default  # noqa: E731
    world = option("--world", 2)
    run = (args[0], int(args[1]), int(args[2]), option("--layers", 4), "--no-gc" not in args,
           "SHARD_GRAD_OP" if "--shard-grad-op" in args else "FULL_SHARD", "--untied" not in args,
           1 if "--fsdp1" in args else 2, option("--lora", 0),
           option("--micro-batches", 2) if "--accumulate" in args else 0, _pairs(args, "--config"))
    print(json.dumps(run_ranks(record, run, world)[0]))


if __name__ == "__main__":
    main()
