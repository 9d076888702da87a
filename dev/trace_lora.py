"""Dev-only: record LoRA / QLoRA training steps under FSDP1 / FSDP2 on the CPU (2 gloo ranks), as the
HF Trainer (transformers 5.24) + Accelerate 1.15 + PEFT 0.21.2 prepare the model.

Derived from dev/trace_fsdp.py (profiler memory events of the main thread, collectives'
own allocations dropped, FSDP streams tagged 1 = all-gather, 2 = reduce-scatter).

Modes (``--mode``):
  fsdp2-trainer  transformers.distributed.fsdp.update_fsdp_plugin_peft (PEFT's fsdp_auto_wrap_policy)
                 then accelerate.utils.fsdp_utils.fsdp2_prepare_model — the real functions, on a
                 stand-in Accelerator object that holds a real FullyShardedDataParallelPlugin
  fsdp2-layers   the same plugin with its own TRANSFORMER_BASED_WRAP (no PEFT policy): decoder layers as
                 units, what dev/trace_fsdp.py and vramlint assume
  fsdp1-trainer  FSDP1 with PEFT's policy and the kwargs Accelerate's prepare_model passes, as the
                 Trainer's TrainingArguments fill them (use_orig_params, sync_module_states, no backward
                 prefetch unless --bwd-pre), then Accelerate's fp32 upcast of flat params needing grads
  fsdp1-layers   FSDP1 with transformer_auto_wrap_policy only (accelerate launch with a plain fsdp yaml
                 and a custom loop: the adapters inside the layers' flat params)
Options: --qlora (bnb NF4, double quant, quant_storage bf16), --gc (transformers checkpointing,
use_reentrant False as transformers 5.24 defaults), --reentrant, --accumulate (2 micro-batches: no_sync
first), --bwd-pre (FSDP1 BACKWARD_PRE), --rank R, --seq S, --mb B, --steps N.

    pip install torch==2.13.0 transformers peft accelerate bitsandbytes   # never vramlint dependencies
    python dev/trace_lora.py --mode fsdp1-trainer --seq 1024 --bwd-pre \
        > tests/data/lora_trace_fsdp1_trainer_nogc_s1024_world2.json
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import json
import os
import tempfile
import threading
import warnings
from pathlib import Path

from trace_fsdp import COLLECTIVE, MARK, STREAM, _innermost, _mark_collectives, _mark_streams

# The width set the recorded traces use (tests/data/lora_trace_*.json): a small Llama whose adapters,
# flat parameters and logits are each large enough to tell apart. ``--config`` also takes a folder.
CONFIGS = {"tiny2": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=1024,
                         intermediate_size=4096, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=8, head_dim=64, vocab_size=8000,
                         max_position_embeddings=4096, rms_norm_eps=1e-05, rope_theta=10000.0,
                         tie_word_embeddings=False, hidden_act="silu", attention_bias=False, mlp_bias=False)}


def _stack(spans, starts, ts, depth=4):
    """Names of up to ``depth`` enclosing spans, innermost first (for attributing allocations)."""
    out, index = [], bisect.bisect_right(starts, ts) - 1
    while index >= 0 and len(out) < depth:
        start, end, name = spans[index]
        if end >= ts and name not in out:
            out.append(name)
        index -= 1
    return out


def _events(trace_file: str, thread: int):
    events = [e for e in json.loads(Path(trace_file).read_text())["traceEvents"] if e.get("tid") == thread]
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events if "dur" in e and e.get("name")
                   and not e["name"].startswith(STREAM))
    streams = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events if "dur" in e
                     and e.get("name", "").startswith(STREAM))
    starts, stream_starts = [s[0] for s in spans], [s[0] for s in streams]
    collectives = [(s, e) for s, e, name in spans if name == COLLECTIVE]
    cstarts = [c[0] for c in collectives]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["args"]["Ev Idx"])

    def in_collective(ts):
        i = bisect.bisect_right(cstarts, ts) - 1
        while i >= 0:
            s, e = collectives[i]
            if e >= ts:
                return True
            if ts - s > 5e6:
                return False
            i -= 1
        return False

    out = []
    for e in memory:
        if in_collective(e["ts"]):
            continue
        nbytes = e["args"]["Bytes"]
        ctx = "|".join(_stack(spans, starts, e["ts"])) if nbytes > 0 and nbytes >= 1 << 16 else ""
        out.append((e["args"]["Addr"], nbytes, ctx, int(_innermost(streams, stream_starts, e["ts"])[len(STREAM):] or 0)))
    return out


def _as_steps(windows):
    ids, count, steps = {}, itertools.count(), []
    for window in windows:
        step = []
        for address, nbytes, op, stream in window:
            if nbytes > 0:
                ids[address] = next(count)
                step.append(["alloc", ids[address], nbytes, op, stream])
            elif address in ids:
                step.append(["free", ids.pop(address)])
        steps.append(step)
    return steps


args_orig_params = [True]


def _plugin(version: int, strategy: str, bwd_pre: bool, offload: bool):
    """The FullyShardedDataParallelPlugin as transformers' TrainingArguments build it (fsdp_version,
    TRANSFORMER_BASED_WRAP, reshard_after_forward / sharding strategy, use_orig_params true,
    sync_module_states true, backward_prefetch NO_PREFETCH for FSDP1) and Accelerate's
    ``set_mixed_precision("bf16")`` from AcceleratorState."""
    from accelerate.utils import FullyShardedDataParallelPlugin

    args = dict(fsdp_version=version, auto_wrap_policy="TRANSFORMER_BASED_WRAP", state_dict_type="FULL_STATE_DICT",
                cpu_ram_efficient_loading=False)
    if offload:
        args["cpu_offload"] = True
    if version == 2:
        args["reshard_after_forward"] = strategy == "FULL_SHARD"
    else:
        args.update(reshard_after_forward=strategy.lower(), forward_prefetch=False,
                    backward_prefetch="BACKWARD_PRE" if bwd_pre else "NO_PREFETCH", use_orig_params=args_orig_params[0],
                    sync_module_states=False)   # True needs a GPU to build its param_init_fn; set below
    plugin = FullyShardedDataParallelPlugin(**args)
    # sync_module_states (the Trainer's default) only broadcasts rank 0's weights at wrap time and
    # needs GPU tensors: left off on the CPU, the step is the same
    plugin.set_mixed_precision("bf16")
    return plugin


class _Accel:
    """What fsdp2_prepare_model / update_fsdp_plugin_peft read of an Accelerator."""

    def __init__(self, plugin, rank):
        import torch
        from types import SimpleNamespace
        self.state = SimpleNamespace(fsdp_plugin=plugin)
        self.mixed_precision = "bf16"
        self.is_main_process = rank == 0
        self.device = torch.device("cpu")
        self.torch_device_mesh = None


def _build(args, rank):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if args.config in CONFIGS:
        widths = dict(CONFIGS[args.config])
        config = AutoConfig.for_model(widths.pop("model_type"), **widths)
    else:
        config = AutoConfig.from_pretrained(args.config)
    if args.qlora:
        from transformers import BitsAndBytesConfig
        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                   bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_storage=torch.bfloat16)
        with tempfile.TemporaryDirectory() as folder:
            torch.manual_seed(0)
            AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(folder)
            model = AutoModelForCausalLM.from_pretrained(folder, quantization_config=quant, dtype=torch.bfloat16,
                                                         device_map="cpu", attn_implementation="sdpa")
    else:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.config.use_cache = False
    if args.kbit_prep:
        from peft import prepare_model_for_kbit_training
        model = prepare_model_for_kbit_training(model, args.gc, {"use_reentrant": args.reentrant})
    elif args.gc:       # Trainer: model.activation_checkpointing_enable(args.gradient_checkpointing_kwargs)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": args.reentrant})
    inner = model
    from peft import LoraConfig, get_peft_model
    targets = "all-linear" if args.targets == "all-linear" else args.targets.split(",")
    model = get_peft_model(model, LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=args.dropout,
                                             target_modules=targets, task_type="CAUSAL_LM"))
    model.train()                                  # from_pretrained leaves eval mode; the Trainer trains
    if args.gc:
        model.enable_input_require_grads()       # activation_checkpointing_enable does it for a PEFT model
    return config, inner, model


def _wrap(args, model, rank, world):
    import torch
    mode = args.mode
    version = 2 if mode.startswith("fsdp2") else 1
    plugin = _plugin(version, args.strategy, args.bwd_pre, args.offload)
    accel = _Accel(plugin, rank)
    if mode.endswith("trainer"):
        from transformers.distributed.fsdp import update_fsdp_plugin_peft
        update_fsdp_plugin_peft(model, accel)
    if version == 2:
        from accelerate.utils.fsdp_utils import fsdp2_prepare_model
        plugin.set_auto_wrap_policy(model)            # Accelerator._prepare_fsdp2
        model = fsdp2_prepare_model(accel, model)
        return model
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    plugin.set_auto_wrap_policy(model)
    kwargs = {"sharding_strategy": plugin.sharding_strategy or plugin.reshard_after_forward,
              "cpu_offload": plugin.cpu_offload, "auto_wrap_policy": plugin.auto_wrap_policy,
              "mixed_precision": plugin.mixed_precision_policy, "sync_module_states": plugin.sync_module_states,
              "backward_prefetch": plugin.backward_prefetch, "forward_prefetch": plugin.forward_prefetch,
              "use_orig_params": plugin.use_orig_params, "param_init_fn": plugin.param_init_fn,
              "ignored_modules": plugin.ignored_modules, "limit_all_gathers": plugin.limit_all_gathers,
              "device_id": torch.device("cpu")}
    model = FSDP(model, **kwargs)
    for module in FSDP.fsdp_modules(model):          # accelerator.py: upcast flat params that need grads
        if not module._has_params:
            continue
        param = module._flat_param
        if param.dtype != torch.float32 and param.device != torch.device("meta") and param.requires_grad:
            param.data = param.data.to(torch.float32)
            module._handle._orig_param_dtype = torch.float32
    return model


def _units(model, version):
    """What each FSDP unit holds: (module class, elements, dtype, requires_grad)."""
    out = []
    if version == 2:
        from torch.distributed.fsdp import FSDPModule
        for name, module in model.named_modules():
            if isinstance(module, FSDPModule):
                state = module._get_fsdp_state()
                group = state._fsdp_param_group
                if group is None:
                    continue
                params = group.fsdp_params
                out.append([name or "<root>", sum(p._orig_size.numel() for p in params),
                            sorted({str(p.sharded_param.dtype) for p in params}),
                            sorted({p.sharded_param.requires_grad for p in params}), len(params)])
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        for unit in FSDP.fsdp_modules(model):
            flat = getattr(unit, "_flat_param", None)
            if flat is None:
                continue
            out.append([type(unit.module).__name__, int(flat._unpadded_unsharded_size.numel()), str(flat.dtype),
                        flat.requires_grad, len(flat._fqns)])
    return out


def record(args, rank, world):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=os.environ.get("MASTER_PORT", "29561"))
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    args_orig_params[0] = args.orig_params == "true"
    # on a GPU, torch.is_autocast_enabled() (no device) reads CUDA's autocast, which Accelerate's wrapper turns on;
    # on the CPU it would read False under CPU autocast: PEFT's bnb LoRA path (tuners/lora/bnb.py) would then cast
    # the input to the adapter's dtype, which it does not on the GPU. Make the no-argument form see CPU autocast.
    _autocast_enabled = torch.is_autocast_enabled
    torch.is_autocast_enabled = lambda device_type=None: _autocast_enabled("cpu" if device_type is None else device_type)
    config, inner, model = _build(args, rank)     # before the process group: save_pretrained writes on rank 0 only
    dist.init_process_group("gloo", rank=rank, world_size=world)
    _mark_collectives()
    _mark_streams()
    dtypes_before = sorted({(str(p.dtype), p.requires_grad) for p in model.parameters()})
    version = 2 if args.mode.startswith("fsdp2") else 1
    model = _wrap(args, model, rank, world)
    units = _units(model, version)

    def local(t):
        return t.to_local() if hasattr(t, "to_local") else t

    storages = {}
    for p in model.parameters():                   # use_orig_params: views share their flat param's storage
        st = local(p).untyped_storage()
        storages[st.data_ptr()] = st.nbytes()
    after_init = sum(storages.values())
    seen, quant = set(), 0
    for m in model.modules():                      # bnb quant states: on every rank, not parameters
        qs = getattr(m, "quant_state", None) or getattr(getattr(m, "weight", None), "quant_state", None)
        if qs is not None and id(qs) not in seen:
            seen.add(id(qs))
            quant += qs.absmax.nbytes + (qs.state2.absmax.nbytes + qs.offset.nbytes if qs.nested else 0) \
                + qs.code.nbytes + (qs.state2.code.nbytes if qs.nested else 0)
    params = [p for p in model.parameters() if p.requires_grad]
    trainable = sum(local(p).numel() for p in params)
    optimizer = torch.optim.AdamW(params, lr=1e-5, foreach=True)
    from accelerate.utils import convert_outputs_to_fp32
    model.forward = convert_outputs_to_fp32(torch.autocast("cpu", dtype=torch.bfloat16)(model.forward))
    tokens = torch.randint(0, config.vocab_size, (args.mb, args.seq), generator=torch.Generator().manual_seed(rank))
    marks = []
    per_step = 2 if args.accumulate else 1
    with tempfile.TemporaryDirectory() as folder:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            for index in range(args.steps * per_step):
                marks.append(torch.empty(MARK, dtype=torch.uint8))
                held_back = args.accumulate and index % 2 == 0
                if held_back and version == 2:
                    model.set_requires_gradient_sync(False)
                ctx = model.no_sync() if held_back and version == 1 else contextlib.nullcontext()
                with ctx:
                    loss = model(input_ids=tokens, labels=tokens).loss
                    loss.backward()
                    del loss
                if held_back and version == 2:
                    model.set_requires_gradient_sync(True)
                if not held_back:
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
        prof.export_chrome_trace(str(Path(folder, "trace.json")))
        events = _events(str(Path(folder, "trace.json")), threading.get_native_id())
    starts = [i for i, (_, nbytes, _, _) in enumerate(events) if nbytes == MARK]
    assert len(starts) == len(marks), starts
    dist.destroy_process_group()
    import accelerate
    import peft
    import transformers
    return {"args": vars(args), "world": world, "version": version, "units": units, "after_init": after_init,
            "quant_state_bytes": quant, "trainable_local": trainable, "dtypes_before_wrap": dtypes_before,
            "config": {**config.to_diff_dict(), "model_type": config.model_type},
            "source": f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, "
                      f"accelerate {accelerate.__version__} (CPU, gloo)",
            "steps": _as_steps([events[s + 1:e] for s, e in zip(starts, starts[1:] + [len(events)])])}


def _one_rank(rank, args, world, folder):
    result = record(args, rank, world)
    Path(folder, f"{rank}.json").write_text(json.dumps(result))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="fsdp2-trainer",
                        choices=["fsdp2-trainer", "fsdp2-layers", "fsdp1-trainer", "fsdp1-layers"])
    parser.add_argument("--config", default="tiny2", help=f"one of {sorted(CONFIGS)}, or a folder with a config.json")
    parser.add_argument("--qlora", action="store_true")
    parser.add_argument("--gc", action="store_true")
    parser.add_argument("--reentrant", action="store_true")
    parser.add_argument("--kbit-prep", action="store_true")
    parser.add_argument("--accumulate", action="store_true")
    parser.add_argument("--bwd-pre", action="store_true")
    parser.add_argument("--offload", action="store_true")
    parser.add_argument("--strategy", default="FULL_SHARD")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--orig-params", default="true", choices=["true", "false"])
    parser.add_argument("--targets", default="all-linear")
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--mb", type=int, default=1)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--world", type=int, default=2)
    args = parser.parse_args()
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_one_rank, args=(args, args.world, folder), nprocs=args.world)
        print(Path(folder, "0.json").read_text())


if __name__ == "__main__":
    main()
