"""Model states: weights, gradients, optimizer states and the optimizer step's temporaries.

One sharding rule serves DeepSpeed ZeRO and FSDP: stage 1 shards optimizer states, stage 2 also
gradients, stage 3 also the weights, each over the data-parallel degree N_d, never over TP or PP
ranks (Rajbhandari et al., "ZeRO", 2020; docs/reference.md section 2). FSDP SHARD_GRAD_OP is stage 2,
FULL_SHARD stage 3, NO_SHARD stage 0.

Three runtimes keep different states (bytes per parameter P, trainable parameters T):

- ``torch`` (plain PyTorch / Accelerate / DDP): parameters in their own dtype (fp32 under
  autocast, or bf16); AdamW keeps m and v in the parameter's dtype (2 x); gradients in the
  parameter's dtype; ``optimizer.step()`` with the default foreach implementation allocates one
  parameter-sized temporary per dtype group (measured on H200: +4 B/P in fp32, +2 B/P in bf16).
  DDP keeps its gradient buckets as a second copy of the gradients (``gradient_as_bucket_view``
  is off by default), at rest: allocated when the model is wrapped (``ddp_buckets``).
- ``deepspeed`` (16-bit mixed precision): 16-bit weights (2) + fp32 master, Adam m, v (12) at
  rest. ZeRO-0 steps with fp32 gradients (4) next to the 16-bit ones (2) plus a foreach temporary
  (4): +10 B/P. ZeRO-1/2 pass gradients through the IPG bucket into a 16-bit partition (2/N) and
  step with a flattened copy and fp32 upcast of it (6/N), then the temporary. ZeRO-3 keeps a
  16-bit gradient partition (2/N) and the IPG bucket at rest and steps one sub-group of fp32
  gradients and temporary at a time; gathered parameters belong to the moments (at the loss, in
  backward). Measured on one H200 (shared/groundtruth): 14.0 B/P at rest for ZeRO 0-2, 16.9 for
  ZeRO-3 (with its 1 GB bucket).
- Offload follows DeepSpeed's estimators: optimizer offload moves fp32 states and gradient
  partitions to the host (ZeRO-1/2 keep a staging buffer of the largest parameter); parameter
  offload (ZeRO-3) moves the 16-bit weights, which are fetched per module as the step needs them.
- ``deepspeed`` without mixed precision: the same ZeRO stages in 4-byte elements (``ds_width``),
  with no upcasts; ZeRO-1/2 still clone an fp32 master partition (12 B/P/N with Adam's m, v),
  ZeRO-3's fp32 partition is the weights' own (8 B/P/N), ZeRO-0 is the plain optimizer.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from dataclasses import dataclass, field, replace

from vramlint.memory.components import HOST, Component
from vramlint.memory.stages import stage_components
from vramlint.memory.weights import DTYPE_BYTES, weight_bytes
from vramlint.models.quantization import int8, nf4
from vramlint.models.vision import LOADED_BY
from vramlint.models.shape import Layer, ModelShape, Quantization
from vramlint.plan import Plan

ZERO_PAPER = "ZeRO (Rajbhandari et al. 2020), docs/reference.md §1-2"
DS_ESTIMATOR = "DeepSpeed estimate_zero{2,3}_model_states_mem_needs, docs/reference.md §2"
DDP_SOURCE = "torch nn/parallel/distributed.py and distributed/c10d/reducer.cpp (Reducer buckets), docs/reference.md §7"
DS_SOURCE = "DeepSpeed 0.19 runtime/zero/stage_1_and_2.py (IPG bucket, grads_in_partition, step)"
DS_STAGE3 = "DeepSpeed 0.19 runtime/zero/stage3.py, partitioned_param_coordinator.py"
DS_MEASURED = "DeepSpeed 0.19 on H200 (shared/groundtruth/h200-deepspeed-calibration.jsonl)"
TORCH_MEASURED = "torch.optim.AdamW foreach on H200 (shared/groundtruth/h200-calibration.jsonl)"
BNB_BLOCK, BNB_MIN_8BIT = 256, 4096     # bitsandbytes Optimizer2State: absmax block; smaller tensors stay fp32
SHARDED = {0: frozenset(), 1: frozenset({"optimizer"}), 2: frozenset({"optimizer", "gradients"}),
           3: frozenset({"optimizer", "gradients", "weights"})}


@dataclass(frozen=True)
class States:
    """Model states by when they are alive in a training step."""

    resting: list[Component] = field(default_factory=list)       # the whole step
    gradients: list[Component] = field(default_factory=list)     # from backward to the step
    step: list[Component] = field(default_factory=list)          # inside optimizer.step()
    host: list[Component] = field(default_factory=list)
    backward: list[Component] = field(default_factory=list)      # from the first gradient to the end of backward
    gathered: list[Component] = field(default_factory=list)      # at the turn from forward to backward
    carried: list[Component] = field(default_factory=list)       # what a micro-batch leaves the next (accumulation)


FUSED = {"qkv": {"q", "k", "v"}, "gate_up": {"gate", "up"}}
LATENT = {"q_a", "q_b", "kv_a_proj_with_mqa", "kv_b", "in_proj_qkvz", "in_proj_ba", "out"}   # MLA, Gated DeltaNet
SHORT_TARGETS = {"q", "k", "v", "o", "gate", "up", "down"}     # --lora-targets q,k,v,o: the *_proj linears
PER_LAYER = {"per_layer_input_gate", "per_layer_projection", "per_layer_model_projection"}    # gemma4's PLE
MLP_NAMES = {"gate", "up", "down", "gate_up"}


def lora_targets(targets: tuple[str, ...], model: ModelShape | None = None) -> set[str]:
    """PEFT ``target_modules`` as the short names of ``Layer.linears``; "all-linear" is every
    linear of the decoder (and, through PEFT's MoE conversion, the router). A fused projection
    counts as targeted when any of its parts is; a shared expert's linears answer to the same leaf
    names as dense ones. Where PEFT converts the targets onto transformers 5's fused experts
    (``model.peft_converted``), the MLP names go to the routed experts — gate and up to the fused
    gate_up, down to down — and no dense or shared MLP linear keeps an adapter (PEFT 0.21)."""
    if "all-linear" in targets:
        names = {"q", "k", "v", "o", "gate", "up", "down", "router", "shared_expert_gate", *FUSED, *LATENT, *PER_LAYER}
        if model is not None:      # a shape read from the module tree names its own linears
            names |= model.linear_names
    else:
        names = {t.removesuffix("_proj") for t in targets}
        names |= {fused for fused, parts in FUSED.items() if names & parts}
    names |= {f"shared_{n}" for n in names & MLP_NAMES}
    if model is None or not model.peft_converted:
        return names
    experts = {"experts_gate_up"} if names & {"gate", "up"} else set()
    experts |= {"experts_down"} if "down" in names else set()
    return names - MLP_NAMES - {f"shared_{n}" for n in MLP_NAMES} | experts


def lora_params(model: ModelShape, rank: int, targets: tuple[str, ...] = ("all-linear",), dora: bool = False) -> int:
    """Trainable LoRA parameters: r x (d_in + d_out) per adapted matrix (PEFT), lm_head excluded;
    DoRA adds a magnitude vector of d_out per adapted matrix."""
    return (sum(size for layer in model.layers for _, size in _adapters(layer, model, rank, targets, dora))
            + sum(size for _, size in _model_adapters(model, rank, targets)))


def trainable(plan: Plan) -> int:
    return (lora_params(plan.model, plan.lora_rank, plan.lora_targets, plan.dora) if plan.lora_rank
            else plan.model.params)


ADAPTER_GROUPS = {"router": "router", "shared_expert_gate": "router", "experts_gate_up": "experts",
                  "experts_down": "experts"}


def _adapters(layer: Layer, model: ModelShape, rank: int, targets: tuple[str, ...],
              dora: bool = False) -> list[tuple[str, int]]:
    """One layer's adapter tensors in module order, as (parameter group, elements): lora_A
    (r x d_in) and lora_B (d_out x r) of every targeted linear, each copy of a fused expert's
    folded into one, and under DoRA its magnitude vector (d_out; peft 0.21.2 tuners/lora/dora.py:
    101-130); the group says which sublayer's backward produces the gradient."""
    wanted = lora_targets(targets, model)
    out = []
    for name, (d_in, d_out, copies) in layer.linears(model.hidden_size, model.block).items():
        if name in wanted:
            group = ADAPTER_GROUPS.get(name, "mlp" if name in MLP_NAMES or name.startswith("shared_") else "attention")
            out += [(group, rank * copies * d_in), (group, rank * copies * d_out)]
            out += [(group, copies * d_out)] if dora else []
    return out


def _model_adapters(model: ModelShape, rank: int, targets: tuple[str, ...]) -> list[tuple[str, int]]:
    """Adapters on model-level linears (gemma4's per_layer_model_projection, registered after the
    layers)."""
    wanted = lora_targets(targets, model)
    return [("embedding", rank * d) for name, d_in, d_out in model.model_linears if name in wanted
            for d in (d_in, d_out)]


def lora_tensors(layer: Layer, plan: Plan) -> list[tuple[str, int]]:
    """The plan's adapter tensors of one layer (``_adapters``)."""
    return _adapters(layer, plan.model, plan.lora_rank, plan.lora_targets, plan.dora)


def trainable_tensors(plan: Plan) -> list[int]:
    """The sizes of the tensors the optimizer holds, in parameter order: every parameter, or with
    LoRA the adapters alone (what HF Trainer hands the optimizer: parameters that need grads)."""
    if not plan.lora_rank:
        return list(plan.model.tensor_sizes)
    model = plan.model
    return ([size for layer in model.layers for _, size in lora_tensors(layer, plan)]
            + [size for _, size in _model_adapters(model, plan.lora_rank, plan.lora_targets)])


# torch.distributed: the rebuilt buckets' caps (_DEFAULT_FIRST_BUCKET_BYTES, DDP's bucket_cap_mb=25)
DDP_FIRST_BUCKET, DDP_BUCKET_CAP = 1 << 20, 25 << 20


def adapter_bytes(plan: Plan) -> int:
    """Bytes of a LoRA adapter element, its gradient and each Adam moment: ``Plan.adapter_dtype``.
    PEFT's ``get_peft_model`` creates the adapters in the base layer's dtype and, by default
    (``autocast_adapter_dtype=True``), upcasts 16-bit ones to fp32 (peft 0.21.2
    tuners/tuners_utils.py ``cast_adapter_dtype``): the HF Trainer, TRL, axolotl and LLaMA-Factory
    keep fp32 adapters; torchtune builds its model, adapters included, in the recipe's dtype."""
    return DTYPE_BYTES[plan.adapter_dtype]


def trained_bytes(plan: Plan) -> int:
    """Bytes of a trained element under plain PyTorch: the adapters', or the weights' own."""
    return adapter_bytes(plan) if plan.lora_rank else DTYPE_BYTES[plan.weights_dtype or "bfloat16"]


def ddp_buckets(plan: Plan) -> list[int]:
    """DDP's gradient buckets, in bytes: flat tensors in the gradients' dtype that the Reducer
    allocates when the model is wrapped and keeps for as long as it lives, so they are there at
    every moment of a step, the loss included (recorded on two gloo ranks: 2 B x P alive right
    after ``DistributedDataParallel(model)``). The first iteration runs with one bucket; after
    it the Reducer rebuilds them in the order the gradients became ready (the reverse of the
    parameters'), the first closing at 1 MiB and each next at 25 MiB (a bucket closes at the
    tensor that reaches its cap). The gradients stay apart from them unless the script sets
    ``gradient_as_bucket_view``. None on one GPU."""
    if plan.runtime != "torch" or plan.mode != "train" or plan.data_parallel == 1:
        return []
    width = trained_bytes(plan)
    buckets, filled, cap = [], 0, DDP_FIRST_BUCKET
    for size in reversed(trainable_tensors(plan)):
        filled += width * size
        if filled >= cap:
            buckets, filled, cap = buckets + [filled], 0, DDP_BUCKET_CAP
    return buckets + [filled] if filled else buckets


def zero12_grad_partition(plan: Plan) -> int:
    """Elements of ZeRO-1/2's ``grads_in_partition`` on the rank that holds the most. DeepSpeed
    partitions the flat 16-bit group (padded to 2 x N) in N equal parts, but sizes the buffer as
    the whole parameters that overlap the rank's part (stage_1_and_2.py copy_grads_in_partition:
    ``total_size += param_in_partition.numel()``): recorded over two ranks of 4 Llama-3.2-1B
    layers, the rank whose part starts inside the embedding holds it and everything after, twice
    P/N. On one GPU, P."""
    sizes, n = trainable_tensors(plan), plan.data_parallel
    padded = -(-sum(sizes) // (2 * n)) * (2 * n)
    part, spans, start = max(padded // n, 1), [], 0
    for size in sizes:
        spans.append((start // part, min(n - 1, (start + size - 1) // part), size))
        start += size
    # Only a rank where a tensor starts or ends can hold more than one tensor; a rank inside one
    # tensor holds that tensor alone, no more than the rank it starts on: count those ranks only
    # (as exact as every rank, and bounded by the tensors, not the GPUs).
    ranks = sorted({rank for first, last, _ in spans for rank in (first, last)})
    held = dict.fromkeys(ranks, 0)
    for first, last, size in spans:
        for rank in ranks[bisect_left(ranks, first):bisect_right(ranks, last)]:
            held[rank] += size
    return max(held.values(), default=0)


def ds_width(plan: Plan) -> int:
    """Bytes of an element DeepSpeed's weights, gradients, buckets and gathers hold: 2 under
    bf16/fp16, 4 without mixed precision (the engine keeps the module's fp32)."""
    return 4 if plan.precision == "fp32" else 2


def _width_name(plan: Plan) -> str:
    return "fp32" if ds_width(plan) == 4 else "16-bit"


def _shard(plan: Plan, state: str, size: int) -> int:
    return -(-size // plan.data_parallel) if state in SHARDED[plan.zero_stage] else size


def torch_states(plan: Plan) -> States:
    m, t = plan.model, trainable(plan)
    w_b = DTYPE_BYTES[plan.weights_dtype or "bfloat16"]
    s_b = trained_bytes(plan)
    resting = [_torch_weights(plan, w_b)]
    if plan.lora_rank:
        resting.append(Component("LoRA adapters", s_b * t, f"{s_b} B x {t:,} adapter params ({plan.adapter_dtype})",
                                 "PEFT LoRA (models/peft.py; memory/states.py adapter_bytes)"))
    resting.append(_optimizer_states(plan, t, s_b))
    host = _paged(plan, s_b)
    buckets = ddp_buckets(plan)
    if buckets:
        resting.append(Component("DDP gradient buckets", sum(buckets), f"{s_b} B x {t:,} trainable params in "
                                 f"{len(buckets)} buckets, alive from DDP's construction (gradient_as_bucket_view "
                                 "off: a second copy of the gradients)", DDP_SOURCE))
    grads = [Component("gradients", t * s_b, f"{s_b} B x {t:,} trainable params", ZERO_PAPER)]
    step = _step_temporaries(plan, t, s_b, m)
    if plan.optimizer_in_bwd:        # each parameter stepped, and its gradient freed, as backward makes it
        largest = max(trainable_tensors(plan), default=0)
        grads = [Component("gradients", s_b * largest, f"{s_b} B x the largest trainable tensor ({largest:,}): "
                           "stepped and freed in backward", IN_BWD_SOURCE)]
        step = [Component("optimizer step temporaries", sum(state_tensors(plan, [largest], s_b)) if plan.paged_optimizer
                          else 0, "the largest tensor's paged states brought back", PAGED_SOURCE)]
    elif plan.paged_optimizer:
        largest = max(trainable_tensors(plan), default=0)
        step.append(Component("paged states in use", sum(state_tensors(plan, [largest], s_b)),
                              f"the largest tensor's ({largest:,}) states, paged back for its update", PAGED_SOURCE))
    carried = [_carried(plan, t * s_b, f"{s_b} B x {t:,} trainable params in .grad (DDP: no_sync)")]
    return States(resting, grads, step, host, carried=carried)


IN_BWD_SOURCE = ("torchtune 0.6.1 optimizer_in_bwd (training/memory.py:219-242): a post-accumulate-grad hook steps "
                 "each parameter and frees its gradient")
PAGED_SOURCE = ("bitsandbytes 0.50.2 paged optimizers: states of tensors of 1e5 elements and more in cudaMallocManaged "
                "memory (optim/optimizer.py get_state_buffer, functional.py get_paged), outside PyTorch's allocator")
PAGED_MIN = 100_000      # bitsandbytes: smaller tensors' states stay in PyTorch's allocator


def _paged(plan: Plan, s_b: int) -> list[Component]:
    """Paged states live in unified memory: on the GPU while it has room, moved to the host when
    PyTorch needs the space, so they never cause an OOM; counted apart, on the host."""
    if not plan.paged_optimizer:
        return []
    big = [size for size in trainable_tensors(plan) if size >= PAGED_MIN]
    return [Component("paged optimizer states (unified memory)", sum(state_tensors(plan, big, s_b)),
                      f"the paged states of the {len(big)} tensors of 1e5 elements or more", PAGED_SOURCE, HOST)]


def _carried(plan: Plan, size: int, formula: str) -> Component:
    """Gradient accumulation (counted by ``training.moments`` when there is any): from the second
    micro-batch on, the gradients of the earlier ones are alive through its forward and backward
    (AccumulateGrad adds into ``.grad``; the HF Trainer and Accelerate skip DDP's all-reduce and
    FSDP's reduce-scatter with ``no_sync`` until the last micro-batch; DeepSpeed keeps what each
    stage says)."""
    return Component("accumulated gradients", size, f"{formula}, gradient_accumulation_steps {plan.grad_accum}",
                     "torch AccumulateGrad and no_sync; DeepSpeed 0.19 stage_1_and_2.py; recorded with each "
                     "(tests/test_grad_accum.py)")


def base_quantization(plan: Plan) -> Quantization | None:
    """What bitsandbytes makes of the frozen base's linears in training: NF4 (QLoRA) or LLM.int8 —
    on the routed experts too where transformers keeps them as one nn.Linear each (before 5.0;
    ``Plan.quantized_experts``), not on 5.x's fused 3-D expert parameters."""
    quant = nf4() if plan.load_in_4bit else int8() if plan.load_in_8bit else None
    if quant is not None and plan.quantized_experts:
        quant = replace(quant, groups=quant.groups | {"experts"})
    return quant


def _nf4_groups(plan: Plan) -> frozenset[str]:
    quant = base_quantization(plan)
    return quant.groups if quant is not None and plan.load_in_4bit else frozenset()


def _torch_weights(plan: Plan, w_b: int) -> Component:
    m, quant = plan.model, base_quantization(plan)
    if quant is not None:       # bitsandbytes quantizes the decoder's linears; the rest keeps the load dtype
        size = weight_bytes(replace(m, quantization=quant), w_b)
        name = "NF4" if plan.load_in_4bit else "int8"
        return Component(f"weights ({name})", size, f"{quant.detail} on linears, {w_b} B elsewhere",
                         f"bitsandbytes {quant.method}, models/quantization.py")
    return Component("weights", m.params * w_b, f"{w_b} B x {m.params:,} params", ZERO_PAPER)


def state_tensors(plan: Plan, sizes: list[int], s_b: int) -> list[int]:
    """The bytes of each state tensor the optimizer creates at its first step, for parameters
    (or shards) of ``sizes`` elements, in order: the replays allocate these. AdamW: m and v in
    the parameters' dtype; bitsandbytes 8-bit: uint8 m and v with an fp32 absmax per 256 each
    (fp32 under 4096 elements); SGD: the momentum buffer; Adafactor: a row and a column."""
    out: list[int] = []
    for n in (size for size in sizes if size):
        if plan.optimizer == "adamw":
            b = 4 if plan.paged_optimizer else s_b      # bitsandbytes' 32-bit states whatever the parameters' dtype
            out += [b * n, b * n]
        elif plan.optimizer == "adamw-8bit":
            out += [4 * n, 4 * n] if n < BNB_MIN_8BIT else [n + 4 * -(-n // BNB_BLOCK)] * 2
        elif plan.optimizer == "sgd":
            out.append(s_b * n)
        else:
            out.append(max(4, 4 * 2 * n // plan.model.hidden_size))
    return out


def _optimizer_states(plan: Plan, t: int, s_b: int, shards: int = 1, over: str = "") -> Component:
    """The optimizer's states of ``t`` trainable elements held in ``s_b`` bytes, split over
    ``shards`` ranks (FSDP: each parameter's shard is its own tensor to the optimizer, so
    bitsandbytes' per-tensor blocks and its 4096-element threshold apply to the shards)."""
    h, part = plan.model.hidden_size, -(-t // shards)
    tag = f"{t:,} trainable params" if shards == 1 else f"{_tag(plan)}{over}"
    if plan.paged_optimizer and shards == 1:
        small = [size for size in trainable_tensors(plan) if 0 < size < PAGED_MIN]
        return Component("optimizer states", sum(state_tensors(plan, small, s_b)), "the states of tensors under 1e5 "
                         "elements (the rest paged: unified memory)", PAGED_SOURCE)
    if plan.optimizer == "adamw-8bit":
        sizes = [-(-size // shards) for size in trainable_tensors(plan) if size]
        return Component("optimizer states", sum(state_tensors(plan, sizes, s_b)), f"8-bit m, v: 2 x 1 B x {tag} + an fp32 "
                         "absmax per 256 (fp32 m, v for tensors under 4096)",
                         "bitsandbytes 8-bit Adam, optim/optimizer.py Optimizer2State")
    if plan.optimizer == "adafactor":
        return Component("optimizer states", 4 * 2 * part // h, "factored second moment: a row and a column per "
                         "matrix (~2/h of the params, fp32)", "Adafactor (Shazeer & Stern 2018)")
    per = {"adamw": (2 * s_b, f"Adam m, v: 2 x {s_b} B"), "sgd": (s_b, f"momentum: {s_b} B")}
    b, text = per[plan.optimizer]
    return Component("optimizer states", b * part, f"{text} x {tag}", TORCH_MEASURED)


def foreach(plan: Plan) -> bool:
    """torch's foreach AdamW: its step makes one temporary copy of what it updates (measured);
    the fused kernel (HF's default ``adamw_torch_fused``) and bitsandbytes' steps make none."""
    return plan.optimizer == "adamw" and plan.optimizer_impl == "foreach" and not plan.paged_optimizer


def _step_temporaries(plan: Plan, t: int, s_b: int, m: ModelShape, shards: int = 1, over: str = "") -> list[Component]:
    """What ``optimizer.step()`` allocates and frees: foreach AdamW one copy of what it updates."""
    part = -(-t // shards)
    if foreach(plan):
        tag = f"{t:,} params" if shards == 1 else f"{_tag(plan)}{over}"
        return [Component("optimizer step temporaries", part * s_b, f"foreach AdamW: {s_b} B x {tag} (one "
                          "copy)", TORCH_MEASURED)]
    if plan.optimizer == "adafactor":
        largest = m.largest_layer_params if not plan.lora_rank else 0
        return [Component("optimizer step temporaries", 4 * -(-largest // shards),
                          "one fp32 update of the largest tensor", "Adafactor (per-parameter update)")]
    return []


def _tag(plan: Plan) -> str:
    """How formulas name the trainable parameters: P, or T for LoRA's adapters."""
    return "T" if plan.lora_rank else "P"


def _weights_words(plan: Plan) -> tuple[int, str]:
    """The 16-bit weights' elements and their name in formulas: P, or with LoRA the frozen base P
    and the adapters T (DeepSpeed casts PEFT's fp32 adapters to 16 bit with the rest)."""
    if plan.lora_rank:
        return plan.model.params + trainable(plan), "(P + T)"
    return plan.model.params, "P"


def _ds_weights(plan: Plan) -> tuple[int, str, str]:
    """The weights DeepSpeed holds (before ZeRO-3 partitions them), their name and formula: every
    element ``ds_width`` bytes, or under QLoRA the base's 4-bit linears half a byte a value and
    the rest (adapters too) ``ds_width`` bytes, DeepSpeed's cast of the module."""
    w, wide, t = ds_width(plan), _width_name(plan), trainable(plan)
    if plan.load_in_4bit or plan.load_in_8bit:
        held = sum(base_bytes(plan, group, size) for group, size in plan.model.parameter_tensors) + w * t
        if plan.load_in_8bit:
            return held, f"weights (int8 + {wide})", f"(P: 1 B an int8 value, {w} B the rest) + {w} B x T"
        return held, f"weights (NF4 + {wide})", f"(P: 0.5 B a 4-bit value, {w} B the rest) + {w} B x T"
    held, symbol = _weights_words(plan)
    return w * held, f"weights ({wide})", f"{w} B x {symbol}"


def _ds_quant_states(plan: Plan) -> Component:
    return Component("4-bit quant states (every rank)", quant_states(plan), "absmax per 64 values (uint8, "
                     "double-quantized) + fp32 per 256 absmax, not partitioned", "bitsandbytes QuantState")


def deepspeed_states(plan: Plan) -> States:
    """ZeRO's states of the trainable parameters (T = P, or LoRA's adapters alone: the optimizer
    gets only the parameters that need grads, and frozen ones stay 16-bit, partitioned under
    ZeRO-3 and whole below it)."""
    if plan.precision == "fp32" and plan.zero_stage == 0:
        return _deepspeed_fp32(plan)
    t, n, stage = trainable(plan), plan.data_parallel, plan.zero_stage
    w, wide = ds_width(plan), _width_name(plan)
    opt_off = plan.offload_optimizer != "none"
    par_off = plan.offload_param != "none" and stage == 3
    resting: list[Component] = []
    held_bytes, name, words = _ds_weights(plan)
    if plan.load_in_4bit:
        resting.append(_ds_quant_states(plan))
    weights = 0 if par_off else _shard(plan, "weights", held_bytes)
    resting.append(Component(name, weights, "offloaded to host" if par_off else
                             f"{words}{' / N_d' if stage == 3 else ''}", ZERO_PAPER))
    tag = _tag(plan)
    resting.append(_zero_optimizer_states(plan, t, opt_off))
    if stage == 3:
        if not opt_off:
            resting.append(Component(f"gradient partition ({wide})", -(-w * t // n), f"{w} B x {tag} / N_d",
                                     DS_MEASURED))
        resting.append(Component("IPG reduce bucket", w * plan.reduce_bucket_size,
                                 f"{w} B x reduce_bucket_size ({plan.reduce_bucket_size:,}), allocated at init",
                                 DS_STAGE3))
        if par_off or n > 1:
            small = sum(size for size in plan.model.tensor_sizes if size < plan.param_persistence_threshold)
            resting.append(Component("persistent parameters", w * small, f"{w} B x {small:,} in tensors under "
                                     f"stage3_param_persistence_threshold ({plan.param_persistence_threshold:,})",
                                     DS_STAGE3))
    elif opt_off:
        largest = max(trainable_tensors(plan))
        resting.append(Component(f"gradient staging ({wide})", w * largest,
                                 f"{w} B x the largest parameter ({largest:,}): temp_grad_buffer_for_gpu_offload",
                                 DS_SOURCE))
    if stage in (1, 2) and not opt_off:
        grads, step, backward = _zero12_step(plan)
        # recorded over one and two ranks: ZeRO-2 reduces at the end of every micro-batch's backward
        # and keeps grads_in_partition; ZeRO-1 keeps every 16-bit gradient and its IPG bucket
        carried = ([_carried(plan, w * t, f"{w} B x {tag} (ZeRO-1 reduces at the last micro-batch)")] + backward[:1]
                   if stage == 1 else [_carried(plan, grads[0].bytes, f"the {wide} gradient partition")])
        return States(resting, grads, step, _host(plan), backward=backward, carried=carried)
    grads, step = _deepspeed_step(plan, opt_off)
    # recorded: ZeRO-0 carries the 16-bit .grad to the last micro-batch, ZeRO-3 nothing beyond its partition
    carried = [_carried(plan, 2 * t, f"2 B x {tag} (16-bit .grad)")] if stage == 0 else []
    if stage == 3 and (par_off or n > 1):
        in_flight, at_loss = _zero3_gathered(plan)
        return States(resting, grads, step, _host(plan), backward=in_flight, gathered=at_loss)
    return States(resting, grads, step, _host(plan), carried=carried)


def zero_state_bytes(plan: Plan) -> tuple[int, str]:
    """Bytes the ZeRO optimizer keeps per trainable element, and what they are (see
    ``_zero_optimizer_states``): an fp32 master (none in fp32 ZeRO-3) and the wrapped
    optimizer's states over it — DeepSpeed hands the client optimizer one flat fp32 partition,
    so bitsandbytes' 8-bit states are 2 B an element there (its absmax per 256 rounds away)."""
    master = 0 if ds_width(plan) == 4 and plan.zero_stage == 3 else 4
    states, words = ZERO_CLIENT_STATES[plan.optimizer]
    what = f"{'fp32 master + ' if master else ''}{words}" + ("" if master else "; the fp32 master is the weights' "
                                                               "partition")
    return master + states, what


# The wrapped optimizer's states per fp32 element of ZeRO's partition (one flat tensor a group).
ZERO_CLIENT_STATES = {"adamw": (8, "Adam m, v"), "adamw-8bit": (2, "8-bit Adam m, v"), "sgd": (4, "momentum"),
                      "adafactor": (0, "Adafactor's factored rows and columns (~0)")}


def _zero_optimizer_states(plan: Plan, t: int, opt_off: bool) -> Component:
    """What the ZeRO optimizer keeps per trainable element: an fp32 master partition and the
    optimizer's states (Adam's m, v: 12 B) — except ZeRO-3 without mixed precision, whose fp32
    partition is the weights' own partition (stage3.py ``_create_fp32_partitions``: same dtype
    and device, no copy). ZeRO-1/2 clone theirs whatever the dtype (stage_1_and_2.py:
    ``.detach().clone()``)."""
    tag, stage = _tag(plan), plan.zero_stage
    if opt_off:
        return Component("optimizer states", 0, f"offloaded to {plan.offload_optimizer}", ZERO_PAPER)
    per, what = zero_state_bytes(plan)
    return Component("optimizer states", _shard(plan, "optimizer", per * t),
                     f"{per} B x {tag}{' / N_d' if stage else ''} ({what})", ZERO_PAPER)


def _zero3_gathered(plan: Plan) -> tuple[list[Component], list[Component]]:
    """Full parameters ZeRO-3 gathers (or fetches from the host), in ``ds_width`` bytes: at the
    turn from forward to backward, the ones kept for reuse; later in backward, one layer in flight."""
    m, w = plan.model, ds_width(plan)
    kept = zero3_kept(m, zero3_keep_distance(plan))
    layers = sum(_layer_base(plan, m.layers[i]) for i in kept.layers)
    head = m.head_params or m.embedding_params
    one = max(_layer_base(plan, layer) for layer in m.layers)
    ahead = min(plan.prefetch_bucket_size, plan.max_live_parameters)
    packed = " (4-bit values packed: elements of 2 B)" if plan.load_in_4bit else ""
    return ([Component("layer gathered in backward + prefetch", w * (one + ahead),
                       f"{w} B x ({one:,} + min(stage3_prefetch_bucket_size, stage3_max_live_parameters) {ahead:,})"
                       + packed, DS_STAGE3)],
            [Component("gathered parameters at the loss", w * (layers + head),
                       f"{w} B x (lm_head {head:,} + {layers:,} of {len(kept.layers)} layers reused within "
                       "stage3_max_reuse_distance)", DS_STAGE3)])


def _layer_base(plan: Plan, layer: Layer) -> int:
    """A decoder layer's base parameters as ZeRO-3 gathers them, in ``ds_width`` elements."""
    return sum(base_bytes(plan, group, size) for group, size in layer.parameter_tensors) // ds_width(plan)


def zero3_sub_groups(plan: Plan) -> list[int]:
    """ZeRO-3 steps the local partition one sub-group at a time: parameters in order, a group
    closed once its partitions reach ``sub_group_size`` elements (stage3.py
    ``_create_fp16_sub_groups``; 0 makes every parameter its own group). Each group's elements."""
    n, groups, part = plan.data_parallel, [], 0
    parts = [-(-size // n) for size in trainable_tensors(plan)]
    if plan.sub_group_size >= sum(parts):
        return [sum(parts)]
    for size in parts:
        part += size
        if part >= plan.sub_group_size:
            groups.append(part)
            part = 0
    return groups + ([part] if part else [])


@dataclass(frozen=True)
class Kept:
    """What ZeRO-3 keeps gathered from a layer's forward to its backward (``zero3_kept``)."""

    layers: frozenset[int]     # decoder layer indices
    embedding: int             # a tied embedding's parameters, when kept for lm_head


def zero3_keep_distance(plan: Plan) -> int:
    """How far ahead (elements) a traced ZeRO-3 step keeps gathered parameters for their next use.
    ``__params_to_release`` keeps a module whose next use lies within ``stage3_max_reuse_distance``,
    and also one whose next use the prefetcher has already passed — and the prefetcher, which scans
    the trace until it finds ``stage3_prefetch_bucket_size`` elements to fetch, marking every
    gathered parameter it passes, runs while fewer than ``stage3_max_live_parameters`` are gathered.
    Recorded over two ranks (dev/trace_deepspeed.py): with a reuse distance of 0 every layer of a
    505M-element model stayed gathered to the loss, and with 30M live parameters 30.5M did."""
    return max(plan.max_reuse_distance, plan.max_live_parameters)


def zero3_kept(model: ModelShape, distance: int) -> Kept:
    """What ZeRO-3's coordinator keeps gathered once it has traced a step: a module's parameters
    are not released when the parameters walked before their next use stay under
    ``stage3_max_reuse_distance`` (partitioned_param_coordinator.py ``__params_to_release``).
    From the last layer back, the walk to the reuse in backward is the later layers plus lm_head;
    a tied embedding comes back at lm_head after all the layers."""
    later, kept = model.head_params or model.embedding_params, set()
    for index in reversed(range(model.num_layers)):
        if later >= distance:
            break
        kept.add(index)
        later += model.layers[index].params.total
    layers = sum(layer.params.total for layer in model.layers)
    tied = not model.head_params and layers < distance
    return Kept(frozenset(kept), model.embedding_params if tied else 0)


def _zero12_step(plan: Plan) -> tuple[list[Component], list[Component], list[Component]]:
    """ZeRO-1/2 (``stage_1_and_2.py``): gradients pass through the IPG bucket into a flat 16-bit
    partition; ``step()`` flattens that once more and upcasts it to an fp32 partition, then AdamW
    steps it with one temporary once both 16-bit copies are freed (8 B/P/N either way)."""
    p, n, tag = trainable(plan), plan.data_parallel, _tag(plan)
    w, wide = ds_width(plan), _width_name(plan)
    half, full = -(-w * p // n), -(-4 * p // n)
    held = zero12_grad_partition(plan)
    grads = [Component(f"{wide} gradient partition", w * held, f"{w} B x {held:,}: the whole parameters that "
                       f"overlap the fullest rank's 1/{n} of {tag} (grads_in_partition)" if n > 1 else
                       f"{w} B x {tag} (grads_in_partition)", DS_SOURCE)]
    bucket = f"{w} B x reduce_bucket_size ({plan.reduce_bucket_size:,})"
    backward = [Component("IPG reduce buckets", 2 * w * plan.reduce_bucket_size, f"2 x {bucket}: overlap_comm's "
                          "double buffers (setup_buckets)", DS_SOURCE) if plan.overlap_comm else
                Component("IPG reduce bucket", w * plan.reduce_bucket_size, bucket, DS_SOURCE)]
    if plan.zero_stage == 1 and n > 1:
        backward.append(Component(f"gradients ({wide}, before reduce)", w * p,
                                  f"{w} B x {tag}: ZeRO-1 reduces after backward", DS_SOURCE))
    if w == 4:      # .to(fp32) of the flattened fp32 partition is the same tensor
        step = [Component("flattened fp32 partition", full, f"4 B x {tag} / N_d (then AdamW's temporary, "
                          f"4 B x {tag} / N_d, once the partition is freed)", DS_SOURCE)]
    else:
        step = [Component("flattened 16-bit partition + fp32 upcast", half + full, f"2 B + 4 B x {tag} / N_d (then "
                          f"AdamW's temporary, 4 B x {tag} / N_d, once the 16-bit copies are freed)", DS_MEASURED)]
    return grads, step, backward


def _deepspeed_step(plan: Plan, opt_off: bool) -> tuple[list[Component], list[Component]]:
    p, stage = trainable(plan), plan.zero_stage
    if opt_off:
        return [], []
    if stage == 0:
        tag = _tag(plan)
        grads = [Component("gradients (16-bit + fp32)", 6 * p, f"2 B + 4 B x {tag}", DS_MEASURED)]
        return grads, [Component("optimizer step temporaries", 4 * p, f"foreach AdamW: 4 B x {tag}", DS_MEASURED)]
    group = max(zero3_sub_groups(plan))
    return ([Component("fp32 gradients of one sub-group", 4 * group, f"4 B x the largest sub-group (sub_group_size "
                       f"{plan.sub_group_size:,}) = 4 x {group:,}",
                       DS_MEASURED)],
            [Component("optimizer step temporaries", 4 * group, f"foreach AdamW: 4 B x the largest sub-group ({group:,})",
                       DS_MEASURED)])


def _deepspeed_fp32(plan: Plan) -> States:
    """ZeRO-0 without mixed precision: the engine hands the client optimizer the module's own
    fp32 parameters (no BF16/FP16 wrapper, engine.py ``_configure_optimizer``), so its states
    are the optimizer's own over them; a QLoRA base keeps its 4-bit linears."""
    p, tag = trainable(plan), _tag(plan)
    held, name, words = _ds_weights(plan)
    resting = [_ds_quant_states(plan)] if plan.load_in_4bit else []
    resting += [Component(name, _shard(plan, "weights", held), words, ZERO_PAPER), _optimizer_states(plan, p, 4)]
    grads = [Component("gradients (fp32)", _shard(plan, "gradients", 4 * p), f"4 B x {tag}", ZERO_PAPER)]
    return States(resting, grads, _step_temporaries(plan, p, 4, plan.model), _host(plan))


def _host(plan: Plan) -> list[Component]:
    """Host RAM per node for offloaded states (DeepSpeed estimators, additional_buffer_factor 1.5),
    over every parameter the optimizer holds: a vision tower's too (``vision_tower``)."""
    m = plan.model
    tower = tower_adapters(m, plan.lora_rank, plan.lora_targets) if plan.lora_rank else m.vision_params
    p, nodes, gpus = trainable(plan) + tower, plan.cluster.nodes, plan.cluster.world_size
    if plan.offload_optimizer != "cpu":
        return []
    if plan.zero_stage == 3:
        per_param = 18 if plan.offload_param == "cpu" else 16
        return [Component("offloaded states (host)", int(per_param * p / nodes * 1.5),
                          f"{per_param} B x {p:,} / nodes x 1.5 (the parameters the optimizer holds)",
                          DS_ESTIMATOR, HOST)]
    return [Component("offloaded states (host)", int(p * max(4 * gpus, 16) * 1.5),
                      f"{p:,} x max(4 x GPUs, 16) x 1.5 (the parameters the optimizer holds)", DS_ESTIMATOR, HOST)]


FSDP_STAGE = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0, "HYBRID_SHARD": 3, "HYBRID_SHARD_ZERO2": 2}
FSDP_SOURCE = "torch FSDP with Accelerate mixed precision (fp32 sharded params, bf16 compute), docs/reference.md §7"


def fsdp_stage(plan: Plan) -> int:
    """The ZeRO stage an FSDP strategy amounts to: 3 reshards after forward, 2 keeps units
    unsharded to backward, 0 shards nothing."""
    return FSDP_STAGE.get(plan.fsdp_strategy, 3)


def fsdp_shard_count(plan: Plan) -> int:
    """Ranks a parameter is sharded over: the data-parallel degree (a node's for HYBRID), 1 for NO_SHARD."""
    return plan.data_parallel if fsdp_stage(plan) else 1


PEFT_FSDP_SOURCE = ("transformers Trainer update_fsdp_plugin_peft (PEFT fsdp_auto_wrap_policy; FSDP mixed precision "
                    "in bnb_4bit_quant_storage for QLoRA); Accelerate upcasts only flat parameters that need grads; "
                    "bitsandbytes Params4bit quant_storage, QuantState")


def fsdp_trained_bytes(plan: Plan) -> int:
    """Bytes of a trained FSDP shard element, of its gradient shard and of each Adam moment: the
    shards' dtype (``Plan.weights_dtype``: fp32 where Accelerate upcasts under mixed precision, the
    load dtype in pure 16-bit training — torchtune, axolotl's FSDP2), and PEFT's fp32 adapters."""
    if plan.lora_rank:
        return adapter_bytes(plan)
    return DTYPE_BYTES[plan.weights_dtype or "float32"]


def fsdp_mixed(plan: Plan) -> bool:
    """fp32 shards computed in 16 bit: FSDP's mixed precision keeps a 16-bit copy to gather from."""
    return plan.precision != "fp32" and fsdp_trained_bytes(plan) == 4 and not fsdp_lora_units(plan)


def fsdp_lora_units(plan: Plan) -> bool:
    """LoRA under FSDP as transformers' Trainer (TRL's SFTTrainer on it) and PEFT's own examples
    wrap a PEFT model: PEFT's ``fsdp_auto_wrap_policy`` makes every LoRA linear an FSDP unit of its
    own, so the base's units are frozen — no gradient, and no fp32 upcast (Accelerate upcasts only
    what needs grads) — and the adapters' units are fp32 (recorded on the CPU:
    dev/qlora_fsdp_units.py)."""
    return plan.runtime == "fsdp" and plan.lora_rank > 0


def fsdp_qlora(plan: Plan) -> bool:
    """QLoRA under FSDP: as ``fsdp_lora_units``, the model loaded with ``bnb_4bit_quant_storage`` in
    the load dtype (which FSDP needs to shard 4-bit weights) and FSDP's mixed precision in it."""
    return plan.runtime == "fsdp" and plan.load_in_4bit


def base_bytes(plan: Plan, group: str, size: int) -> int:
    """Bytes one frozen base tensor takes where DeepSpeed holds it (DeepSpeed casts the model to
    its precision): ``ds_width`` B a value, or under QLoRA a 4-bit linear's values, half a byte each — as loaded for
    ZeRO-0/1/2, packed into ``bnb_4bit_quant_storage`` for ZeRO-3 to partition (same bytes); its
    quant state apart (``quant_states``)."""
    quant = base_quantization(plan)
    if quant is not None and group in quant.groups:       # half a byte a 4-bit value, a byte an int8 one
        return -(-size * (4 if plan.load_in_4bit else 8) // 8)
    return ds_width(plan) * size


def fsdp_stored(plan: Plan, group: str, size: int) -> int:
    """Elements FSDP shards and all-gathers for one parameter tensor: under QLoRA a 4-bit linear's
    weight holds its values two to a byte in the storage dtype (``Params4bit``, quant_storage
    bfloat16: n values are n / 4 elements), every other tensor its own size."""
    if fsdp_qlora(plan) and group in _nf4_groups(plan):
        return -(-base_bytes(plan, group, size) // (4 if plan.precision == "fp32" else 2))
    return size


def fsdp_unit(plan: Plan, layer: Layer) -> list[int]:
    """A decoder layer's FSDP unit: its parameter tensors' stored elements, in order."""
    return [fsdp_stored(plan, group, size) for group, size in layer.parameter_tensors]


def quant_states(plan: Plan) -> int:
    """bitsandbytes' ``QuantState`` of every 4-bit linear (absmax per 64 values, double-quantized:
    a byte each and an fp32 per 256 of them): not a parameter, so neither FSDP nor ZeRO-3
    partitions it — whole on every rank."""
    quantized = sum(getattr(plan.model.layer_params, g) for g in _nf4_groups(plan))
    return int(quantized * (nf4().bits - 4) / 8)


def fsdp_tail_unit(plan: Plan) -> tuple[int, ...]:
    """Elements of the unit that holds lm_head, as Accelerate wraps the model: FSDP2's tail (final
    norm, lm_head, a tied embedding; an untied embedding is a unit of its own), FSDP1's root
    (embedding, final norm, lm_head)."""
    m = plan.model
    if plan.fsdp_version == 2 and m.head_params:
        return m.final_norm_params, m.head_params
    return m.embedding_params, m.final_norm_params, m.head_params


def fsdp_tail_holds_embedding(plan: Plan) -> bool:
    """Whether the lm_head unit also holds the embedding: gathered at the first forward, and
    reduce-scattered only after the embedding's backward, last."""
    return plan.fsdp_version == 1 or not plan.model.head_params


def fsdp_states(plan: Plan) -> States:
    """FSDP keeps parameter shards (fp32, 4/N; ``_fsdp_shards``) and AdamW's m, v (8/N) at rest,
    fp32 gradient shards (4/N) from backward to the step. What is unsharded (in the compute dtype) depends on the
    strategy, as Accelerate wraps the model (memory/fsdp.py, recorded by dev/trace_fsdp.py):
    FULL_SHARD keeps the unit that holds lm_head from forward to the end of backward
    (``_fsdp_root``), and in backward has a decoder layer unsharded, the next one's all-gather,
    FSDP2's last reduce-scatter input or FSDP1's flat gradient, and the layer's gradients in
    flight (``_fsdp_in_flight``);
    SHARD_GRAD_OP keeps every unit unsharded from forward to backward; NO_SHARD is DDP-like with a
    16-bit copy of every weight. CPU offload moves shards, gradients and the step to the host.
    With LoRA (``fsdp_lora_units``) every parameter is sharded and gathered, the frozen base in the
    dtype it was loaded in (QLoRA's packed), and gradients and optimizer states are the adapters'
    alone (T)."""
    n = plan.data_parallel
    t, tag = trainable(plan), _tag(plan)
    held, symbol = _weights_words(plan)
    if fsdp_qlora(plan):
        held, symbol = _stored_total(plan) + t, "(P packed + T)"
    stage = fsdp_stage(plan)
    c_b = 4 if plan.precision == "fp32" else 2
    w = fsdp_trained_bytes(plan)
    sharded = stage > 0
    shard, part = (-(-held // n), -(-t // n)) if sharded else (held, t)
    over = f" / {n}" if sharded else ""
    offload = plan.offload_param != "none"
    shards, words = _fsdp_shards(plan, n if sharded else 1, over)
    resting = [Component("parameter shards", 0 if offload else shards,
                         "offloaded to host" if offload else words, FSDP_SOURCE),
               (Component("optimizer states", 0, "offloaded to host", FSDP_SOURCE) if offload
                else _optimizer_states(plan, t, w, n if sharded else 1, over))]
    gathered: list[Component] = []
    if stage == 0 and fsdp_mixed(plan):
        resting.append(Component("unsharded parameters", c_b * held, f"{c_b} B x {symbol} (NO_SHARD: a "
                                 "16-bit copy of every weight)", FSDP_SOURCE))
    elif stage == 2:
        gathered.append(Component("unsharded parameters", c_b * held, f"{c_b} B x {symbol} (every unit unsharded "
                                  "from forward to backward)", FSDP_SOURCE))
    elif stage == 3:
        gathered += _fsdp_root(plan, c_b)
    if fsdp_qlora(plan):
        resting.append(Component("4-bit quant states (every rank)", quant_states(plan), "absmax per 64 values "
                                 "(uint8, double-quantized) + fp32 per 256 absmax, not sharded", PEFT_FSDP_SOURCE))
    grads = [Component(f"gradient shards ({'fp32' if w == 4 else f'{w}-byte'})", 0 if offload else w * part,
                       f"{w} B x {tag}{over}", FSDP_SOURCE)]
    step = [] if offload else _step_temporaries(plan, t, w, plan.model, n if sharded else 1, over)
    host = [Component("offloaded shards + states (host)", (shards + 3 * w * part) * plan.cluster.per_node,
                      f"({words} + {3 * w} B x {tag}{over}) x GPUs per node", FSDP_SOURCE, HOST)] if offload else []
    carried = [_carried(plan, c_b * t, f"{c_b} B x {tag}, unsharded: no_sync keeps the full gradients until the "
                        "last micro-batch reduce-scatters them")] if not plan.sync_each_batch else [
        _carried(plan, 0 if offload else w * part, f"{w} B x {tag}{over}: every micro-batch reduce-scatters, the "
                 "shards add up")]
    return States(resting, grads, step, host, backward=gathered + _fsdp_in_flight(plan, stage, c_b),
                  gathered=gathered, carried=carried)


def _fsdp_shards(plan: Plan, n: int, over: str) -> tuple[int, str]:
    """The local parameter shards: fp32 (Accelerate upcasts what needs grads under mixed
    precision); with LoRA the frozen base keeps the dtype it was loaded in (QLoRA's packed into
    its storage dtype) and only the adapters are fp32."""
    t = trainable(plan)
    if fsdp_qlora(plan):
        c = 4 if plan.precision == "fp32" else 2
        stored = _stored_total(plan)
        a = adapter_bytes(plan)
        return (c * -(-stored // n) + a * -(-t // n),
                f"{c} B x {stored:,}{over} (stored elements: 4-bit linears 4 values an element) + {a} B x T{over}")
    if fsdp_lora_units(plan):
        base, a = fsdp_base_bytes(plan), adapter_bytes(plan)
        return (base * -(-plan.model.params // n) + a * -(-t // n),
                f"{base} B x P{over} (frozen, as loaded) + {a} B x T{over}")
    held, symbol = _weights_words(plan)
    w = fsdp_trained_bytes(plan)
    return w * -(-held // n), f"{w} B x {symbol}{over} ({'fp32' if w == 4 else 'as loaded, no mixed precision'})"


def fsdp_base_bytes(plan: Plan) -> int:
    """Bytes of a frozen base element under LoRA: the load dtype (QLoRA: its 2-byte storage)."""
    return 2 if plan.load_in_4bit else DTYPE_BYTES[plan.weights_dtype or "bfloat16"]


def _stored_total(plan: Plan) -> int:
    """Every base parameter's stored elements (``fsdp_stored``)."""
    m = plan.model
    return (sum(sum(fsdp_unit(plan, layer)) for layer in m.layers) + m.embedding_params + m.head_params
            + m.final_norm_params + m.extra_params)


def _fsdp_root(plan: Plan, c_b: int) -> list[Component]:
    """FULL_SHARD at the loss: the unit that holds lm_head, not resharded after forward — FSDP2's
    tail (final norm, lm_head, a tied embedding), FSDP1's root (embedding, final norm, lm_head) —
    and under FSDP1 the last decoder layer, which the root's pre-backward prefetches."""
    m = plan.model
    size = sum(fsdp_tail_unit(plan))
    if plan.fsdp_version == 2:
        words = "tail unit: final norm, lm_head" + ("" if m.head_params else " = embedding")
        return [Component("tail unit (unsharded)", c_b * size, f"{c_b} B x {size:,} ({words}; not resharded "
                          "after forward)", FSDP_SOURCE)]
    layer = sum(fsdp_unit(plan, m.layers[-1]))
    return [Component("root unit (unsharded)", c_b * size, f"{c_b} B x {size:,} (embedding, final norm, lm_head; "
                      "not resharded after forward)", FSDP_SOURCE),
            Component("last layer, prefetched", c_b * layer, f"{c_b} B x {layer:,} (BACKWARD_PRE, at the loss)",
                      FSDP_SOURCE)]


def _fsdp_in_flight(plan: Plan, stage: int, c_b: int) -> list[Component]:
    """In a decoder layer's backward (memory/fsdp.py): its unsharded gradients; under FULL_SHARD
    also the layer's parameters, the next layer's all-gather, FSDP2's last reduce-scatter input or
    FSDP1's flat gradient, and lm_head's gradient where its unit also holds the embedding (tied,
    or FSDP1's root): that unit is reduce-scattered only after the embedding's backward, last."""
    m = plan.model
    unit = max(sum(fsdp_unit(plan, layer)) for layer in m.layers)
    adapters = fsdp_lora_units(plan)       # gradients for the adapters' own units alone
    trained = max(sum(size for _, size in lora_tensors(layer, plan)) for layer in m.layers) if adapters else unit
    what = "adapters" if adapters else "parameters"
    out = [Component("unsharded layer gradients", c_b * trained, f"{c_b} B x one decoder layer's {what} "
                     f"({trained:,})", FSDP_SOURCE)]
    if stage != 3:
        return out
    words = ("parameters, next all-gather output, last reduce-scatter input" if plan.fsdp_version == 2 else
             "flat parameter, the next one prefetched, the flat gradient")
    out.append(Component("decoder layers in flight", 3 * c_b * unit, f"3 x {c_b} B x {unit:,} "
                         f"(FSDP{plan.fsdp_version}: {words})", FSDP_SOURCE))
    if fsdp_tail_holds_embedding(plan) and not plan.lora_rank:
        head = m.head_params or m.embedding_params
        out.append(Component("lm_head gradient", c_b * head, f"{c_b} B x {head:,} (kept to the end of backward: "
                             "its unit holds the embedding)", FSDP_SOURCE))
    return out


VISION_SOURCE = (f"{LOADED_BY} (models/vision.py); DeepSpeed 0.19 stage_1_and_2.py / stage3.py flatten every "
                 "parameter handed to the optimizer; torch DDP Reducer buckets every parameter that requires grad")


def model_states(plan: Plan) -> States:
    if plan.runtime == "torch":
        states = torch_states(plan)
    elif plan.runtime == "fsdp":
        states = fsdp_states(plan)
    else:
        states = deepspeed_states(plan)
    extra = stage_components(plan) + ([vision_tower(plan)] if plan.model.vision_params else [])
    return replace(states, resting=states.resting + extra) if extra else states


def _peft_target(target: str) -> str:
    """A ``--lora-targets`` entry as the module name PEFT matches: the short forms (q, ..., down)
    stand for the decoder's ``*_proj``."""
    return f"{target}_proj" if target in SHORT_TARGETS else target


def tower_adapters(model: ModelShape, rank: int, targets: tuple[str, ...]) -> int:
    """Elements of the LoRA adapters PEFT puts on a vision tower's linears: "all-linear" reaches
    every nn.Linear but lm_head, the tower's included; a target list reaches each module whose
    name ends in one of its entries (PEFT ``check_target_module_exists``). Checked against
    get_peft_model for every tower (tests/data/lora_counts.json)."""
    if not rank or model.vision is None:
        return 0
    names = {_peft_target(t) for t in targets}
    return sum(rank * copies * (d_in + d_out) for name, d_in, d_out, copies in model.vision.linears
               if "all-linear" in targets or any(name == n or name.endswith(f".{n}") for n in names))


def refused_targets(plan: Plan) -> list[str]:
    """Target names that reach a module wrapping an nn.Linear in the vision tower (Gemma 4's
    ``Gemma4ClippableLinear``), which PEFT 0.21 refuses: "Target module ... is not supported"."""
    tower = plan.model.vision
    if not plan.lora_rank or tower is None or "all-linear" in plan.lora_targets:
        return []
    return sorted({_peft_target(t) for t in plan.lora_targets} & tower.wrapped)


def vision_tower(plan: Plan) -> Component:
    """A multimodal checkpoint's vision tower, which transformers loads with the language model
    (``models/vision.py``; ``ModelShape.params`` is the language model's). A text-only step never
    runs it, so it gets no gradient: torch's optimizers and FSDP's keep no state for it and FSDP
    never unshards it, but DDP gives it slots in its gradient buckets (every parameter that
    requires grad has one; ``find_unused_parameters``, which such a model needs, zero-fills
    them). DeepSpeed partitions every parameter the optimizer is handed (HF Trainer: all that
    require grad) into its fp32 groups, so ZeRO keeps the tower's master copy and Adam moments
    like any weight's. LoRA leaves it frozen but puts adapters on its linears (PEFT's
    "all-linear" reaches them: ``tower_adapters``), fp32 and requiring grad like the decoder's:
    the same rules apply to them; QLoRA's bitsandbytes stores its linears in NF4 like the decoder's."""
    v, lora = plan.model.vision_params, tower_adapters(plan.model, plan.lora_rank, plan.lora_targets)
    trained = lora if plan.lora_rank else v         # what requires grad: the tower, or its adapters
    adapters = f" + {lora:,} LoRA adapter params" if lora else ""
    nf4_tower = int(v * nf4().bits / 8)     # QLoRA: bitsandbytes quantizes the tower's linears like the decoder's
    nf4_words = f"{nf4().detail} x {v:,} params (its linears, nearly all of it)"
    if plan.runtime == "deepspeed":
        w_b = ds_width(plan)
        s_b = zero_state_bytes(plan)[0]
        par_off = plan.offload_param != "none" and plan.zero_stage == 3
        held = (nf4_tower if plan.load_in_4bit else w_b * v) + w_b * lora
        weights = 0 if par_off else _shard(plan, "weights", held)
        states = 0 if plan.offload_optimizer != "none" else _shard(plan, "optimizer", s_b * trained)
        size = weights + states
        over = lambda state: " / N_d" if state in SHARDED[plan.zero_stage] else ""    # noqa: E731
        terms = ([] if par_off else [(f"{nf4_words} + {w_b} B x {lora:,} adapters" if plan.load_in_4bit else
                                      f"{w_b} B x ({v:,} tower params{adapters})") + over("weights")])
        terms += [f"{s_b} B x {trained:,}{over('optimizer')} (optimizer states)"] if states else []
        formula = " + ".join(terms) or "offloaded"
    elif plan.runtime == "fsdp":       # Accelerate upcasts what requires grad: LoRA keeps the frozen base
        w_b = fsdp_base_bytes(plan) if fsdp_lora_units(plan) else 4
        base, words = (nf4_tower, nf4_words) if plan.load_in_4bit else (w_b * v, f"{w_b} B x {v:,} params")
        shards = fsdp_shard_count(plan)
        a = adapter_bytes(plan)
        size, formula = -(-(base + a * lora) // shards), f"({words} + {a} B x {lora:,}) / {shards}"
    else:
        if plan.load_in_4bit:
            size, formula = nf4_tower, nf4_words
        else:
            w_b = DTYPE_BYTES[plan.weights_dtype or "bfloat16"]
            size, formula = w_b * v, f"{w_b} B x {v:,} params"
        s_b, a = trained_bytes(plan), adapter_bytes(plan)
        slots = s_b * trained if ddp_buckets(plan) else 0
        size += a * lora + slots
        formula += (f" + {a} B x {lora:,} LoRA adapter params ({plan.adapter_dtype})" if lora else "") + (
            f" + {s_b} B x {trained:,} slots in DDP's gradient buckets" if slots else "")
    return Component("vision tower (no gradient)", size, formula, VISION_SOURCE)


__all__ = ["States", "lora_params", "lora_tensors", "model_states", "refused_targets", "tower_adapters",
           "trainable", "trainable_tensors", "vision_tower"]
