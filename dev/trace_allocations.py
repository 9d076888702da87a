"""Dev-only: record the allocations transformers makes in one measured setup, on the CPU.

Builds the model of a ../shared/groundtruth record (measure.py's MODELS) and runs that record's
setup — a no_grad prefill, or two training steps with AdamW (autocast, checkpointing, PEFT LoRA
r=16 on all linears as recorded) — logging every storage an aten op creates (size, op) and when
the last tensor holding it dies (``torch_probe.StorageWatch``). Writes JSON: ``{"params": [bytes
per parameter, in order], "steps": [[["alloc", id, bytes, op] | ["free", id], ...], ...]}``.

Replayed through ``vramlint.memory.parts.allocator.CachingAllocator`` (``replay`` below) the sequence
gives the reserve PyTorch's caching allocator would reach on a GPU for the real op order — to
tell an allocator-model miss from an op-order miss in vramlint's own replays (memory/runtimes/torch/step.py,
nograd.py). Kernel-internal buffers (cuBLAS workspace) and CUDA streams are not in it.

    pip install torch==2.13.0 transformers    # CPU build from local disk; never a vramlint dependency
    python dev/trace_allocations.py gpt2 infer_prefill 16 1024 > trace.json
    python dev/trace_allocations.py pythia-1b bf16_adamw 2 2048 gc > trace.json   # checkpointed
    python dev/trace_allocations.py mixtral-mini lora_bf16 4 2048 gc > trace.json  # needs peft
    python dev/trace_allocations.py pythia-1b bf16_adamw 2 2048 gc ga2 > trace.json  # 2 micro-batches a step
    python dev/trace_allocations.py qwen3-1.7b amp_adamw 2 1024 l4 > trace.json   # 4 of its decoder layers
    python dev/trace_allocations.py --replay trace.json [--workspaces]   # + cuBLAS's, where best fit puts them
    python dev/trace_allocations.py --replay trace.json --keep-cache     # no empty_cache between steps
"""

from __future__ import annotations

import itertools
import json
import sys
import warnings
from pathlib import Path


def record(name: str, kind: str, batch: int, seq: int, checkpointing: bool, accumulate: int = 1,
           layers: int | None = None) -> dict:
    import torch
    from measured_models import models
    from torch_probe import StorageWatch, parameter_storages
    from transformers import AutoConfig, AutoModelForCausalLM

    def watch(events: list, exclude: set[int]) -> StorageWatch:
        ids: dict[int, int] = {}
        count = itertools.count()

        def new(ptr: int, nbytes: int, op: str) -> None:
            ids[ptr] = next(count)
            events.append(["alloc", ids[ptr], nbytes, op])

        return StorageWatch(exclude, new, lambda ptr: events.append(["free", ids.pop(ptr)]))

    model_type, kwargs = models()[name]
    if layers:          # fewer decoder layers: a model too large to record whole on the CPU
        kwargs = {**kwargs, "n_layer" if model_type == "gpt2" else "num_hidden_layers": layers}
    config = AutoConfig.for_model(model_type, **kwargs)
    dtype = torch.float32 if kind == "amp_adamw" else torch.bfloat16
    model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    if kind == "lora_bf16":              # measure.py's adapters: fp32 (PEFT upcasts them), frozen base
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 lora_dropout=0.0, task_type="CAUSAL_LM"))
    exclude = parameter_storages(model)
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    out = {"params": [p.untyped_storage().nbytes() for p in model.parameters()], "steps": []}
    if layers:          # what a test needs to build the same plan
        out.update(config={**config.to_diff_dict(), "model_type": model_type}, kind=kind, batch=batch, seq=seq,
                   checkpointing=checkpointing)
    if kind == "infer_prefill":
        model.eval()
        events: list = []
        with torch.no_grad(), watch(events, exclude):
            model(input_ids=ids, use_cache=True, logits_to_keep=1)   # the peak is inside the forward
        out["steps"].append(events)
        return out
    model.config.use_cache = False
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, foreach=True)
    watches = []                        # kept: Adam's states, created in the first step, stay tracked
    for _ in range(2):
        events = []
        watches.append(watch(events, exclude))
        with watches[-1]:
            for _ in range(accumulate):  # micro-batches: the later ones add into the .grad of the first
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=kind == "amp_adamw"):
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                del loss
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        out["steps"].append(list(events))  # a copy: Adam's states die with the optimizer, after the steps
    return out


# cuBLAS's workspace (CUBLAS_WORKSPACE_CONFIG's Hopper default), allocated through the caching
# allocator at a thread's first cuBLAS call; autograd's backward thread has a cuBLAS handle of its own
CUBLAS_WORKSPACE = 32 << 20
CUBLAS_OPS = {"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default",
              "aten._grouped_mm.default"}


def replay(trace: dict, workspaces: bool = False, empty_cache: bool = True) -> list[tuple[int, int]]:
    """(peak allocated, peak reserved) of each step, weights loaded first, ``empty_cache`` before
    each step as measure.py's ``reset()`` does (``empty_cache=False``: the cache kept, as a
    training loop keeps it). With ``workspaces`` the GPU's two cuBLAS
    workspaces are put where best fit would: after the first matmul's output (the forward
    thread's) and after the first one past the loss's backward (the backward thread's); that needs
    a trace with op names."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from vramlint.memory.parts.allocator import CachingAllocator

    alloc = CachingAllocator()
    for size in trace["params"]:
        alloc.malloc(size)
    handles, peaks = {}, []
    pending, past_loss = (["forward", "backward"] if workspaces else []), False
    for step, events in enumerate(trace["steps"]):
        if empty_cache:
            alloc.empty_cache()
        alloc.reset_peaks()
        for event in events:
            if event[0] == "free":
                alloc.free(handles.pop((step, event[1])))
                continue
            handles[step, event[1]] = alloc.malloc(event[2])
            if not pending:
                continue
            if len(event) < 4:
                sys.exit("--workspaces needs a trace with op names (recorded by this script since 2026-11-30)")
            past_loss = past_loss or event[3] == "aten.nll_loss_backward.default"
            if event[3] in CUBLAS_OPS and (pending[0] == "forward" or past_loss):
                alloc.malloc(CUBLAS_WORKSPACE)
                pending.pop(0)
        peaks.append((alloc.peak_allocated, alloc.peak_reserved))
    return peaks


def main() -> None:
    if sys.argv[1] == "--replay":
        trace = json.loads(Path(sys.argv[2]).read_text())
        for allocated, reserved in replay(trace, workspaces="--workspaces" in sys.argv[3:],
                                          empty_cache="--keep-cache" not in sys.argv[3:]):
            print(f"peak allocated {allocated / 1e9:.3f} GB, reserved {reserved / 1e9:.3f} GB")
        return
    warnings.filterwarnings("ignore")
    name, kind, batch, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    options = set(sys.argv[5:])
    accumulate = [int(o[2:]) for o in options if o.startswith("ga") and o[2:].isdigit()]
    layers = [int(o[1:]) for o in options if o.startswith("l") and o[1:].isdigit()]
    if options - {"gc"} - {f"ga{n}" for n in accumulate} - {f"l{n}" for n in layers} or len(accumulate) > 1 \
            or len(layers) > 1:
        sys.exit(f"unknown option(s) {sys.argv[5:]}: gc (gradient checkpointing), gaN (N micro-batches a step), "
                 "lN (N decoder layers)")
    json.dump(record(name, kind, batch, seq, "gc" in options, max(accumulate, default=1), max(layers, default=None)),
              sys.stdout)
    print()


if __name__ == "__main__":
    main()
