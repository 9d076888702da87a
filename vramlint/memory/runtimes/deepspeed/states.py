"""DeepSpeed ZeRO 0-3 (16-bit mixed precision): 16-bit weights (2) + fp32 master, Adam m, v (12) at
rest. ZeRO-0 steps with fp32 gradients (4) next to the 16-bit ones (2) plus a foreach temporary
(4): +10 B/P. ZeRO-1/2 pass gradients through the IPG bucket into a 16-bit partition (2/N) and
step with a flattened copy and fp32 upcast of it (6/N), then the temporary. ZeRO-3 keeps a
16-bit gradient partition (2/N) and the IPG bucket at rest and steps one sub-group of fp32
gradients and temporary at a time; gathered parameters belong to the moments (at the loss, in
backward). Measured on one H200 (shared/groundtruth): 14.0 B/P at rest for ZeRO 0-2, 16.9 for
ZeRO-3 (with its 1 GB bucket). Offload follows DeepSpeed's estimators: optimizer offload moves fp32
states and gradient partitions to the host (ZeRO-1/2 keep a staging buffer of the largest
parameter); parameter offload (ZeRO-3) moves the 16-bit weights, fetched per module as the step
needs them. Without mixed precision the same stages hold 4-byte elements (``ds_width``) with no
upcasts; ZeRO-1/2 still clone an fp32 master partition (12 B/P/N with Adam's m, v), ZeRO-3's fp32
partition is the weights' own (8 B/P/N), ZeRO-0 is the plain optimizer."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from vramlint.memory.parts.adapters import quant_states, quantized_bytes, tower_adapters, trainable, trainable_tensors
from vramlint.memory.parts.components import HOST, Component
from vramlint.memory.parts.states import (
    SHARDED,
    VISION_SOURCE,
    ZERO_PAPER,
    States,
    carried_gradients,
    optimizer_states,
    shard,
    step_temporaries,
    tied_in_flight,
    tower,
    trained_symbol,
    weights_words,
)
from vramlint.models.shape import Layer, ModelShape
from vramlint.plan import Plan

DS_ESTIMATOR = "DeepSpeed estimate_zero{2,3}_model_states_mem_needs, docs/reference.md §2"
DS_SOURCE = "DeepSpeed 0.19 runtime/zero/stage_1_and_2.py (IPG bucket, grads_in_partition, step)"
DS_STAGE3 = "DeepSpeed 0.19 runtime/zero/stage3.py, partitioned_param_coordinator.py"
DS_MEASURED = "DeepSpeed 0.19 on H200 (shared/groundtruth/h200-deepspeed-calibration.jsonl)"


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
    held, symbol = weights_words(plan)
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
    weights = 0 if par_off else shard(plan, "weights", held_bytes)
    resting.append(Component(name, weights, "offloaded to host" if par_off else
                             f"{words}{' / N_d' if stage == 3 else ''}", ZERO_PAPER))
    tag = trained_symbol(plan)
    resting.append(_zero_optimizer_states(plan, t, opt_off))
    if stage == 3:
        if not opt_off:
            resting.append(Component(f"gradient partition ({wide})", -(-w * t // n), f"{w} B x {tag} / N_d",
                                     DS_MEASURED))
        resting.append(Component("IPG reduce bucket", w * plan.reduce_bucket_size,
                                 f"{w} B x reduce_bucket_size ({plan.reduce_bucket_size:,}), allocated at init",
                                 DS_STAGE3))
        if zero3_fetches(plan):
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
        carried = ([carried_gradients(plan, w * t, f"{w} B x {tag} (ZeRO-1 reduces at the last micro-batch)")]
                   + backward[:1] if stage == 1 else
                   [carried_gradients(plan, grads[0].bytes, f"the {wide} gradient partition")])
        return States(resting, grads, step, _host(plan), backward=backward, carried=carried,
                      ending=_zero12_ending(plan, grads, backward), hooked=_zero12_hooked(plan, grads, backward))
    grads, step = _deepspeed_step(plan, opt_off)
    # recorded: ZeRO-0 carries the 16-bit .grad to the last micro-batch, ZeRO-3 nothing beyond its partition
    carried = [carried_gradients(plan, 2 * t, f"2 B x {tag} (16-bit .grad)")] if stage == 0 else []
    ending = _zero3_ending(plan) if stage == 3 and not opt_off else []
    if stage == 3 and zero3_fetches(plan):
        in_flight, at_loss = _zero3_gathered(plan)
        return States(resting, grads, step, _host(plan), backward=in_flight, gathered=at_loss, ending=ending)
    return States(resting, grads, step, _host(plan), carried=carried, ending=ending)


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
    tag, stage = trained_symbol(plan), plan.zero_stage
    if opt_off:
        return Component("optimizer states", 0, f"offloaded to {plan.offload_optimizer}", ZERO_PAPER)
    per, what = zero_state_bytes(plan)
    return Component("optimizer states", shard(plan, "optimizer", per * t),
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


def zero3_forward_gathered(plan: Plan) -> tuple[Component, Component]:
    """What a ZeRO-3 eval engine's no-grad forward holds gathered (OpenRLHF's reference and reward
    model on GPUs of their own): no backward comes, so no module's next use lies within
    ``stage3_max_reuse_distance`` and each is released after its forward; while a layer computes,
    it and the prefetch bucket ahead, and at the end the head, alone."""
    m, w = plan.model, ds_width(plan)
    one = max(_layer_base(plan, layer) for layer in m.layers)
    ahead = min(plan.prefetch_bucket_size, plan.max_live_parameters)
    head = m.head_params or m.embedding_params
    return (Component("layer gathered + prefetch", w * (one + ahead), f"{w} B x ({one:,} + min(stage3_prefetch_"
                      f"bucket_size, stage3_max_live_parameters) {ahead:,})", DS_STAGE3),
            Component("head gathered", w * head, f"{w} B x the head ({head:,})", DS_STAGE3))


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


def zero3_fetches(plan: Plan) -> bool:
    """Whether ZeRO-3 gathers parameters for each module: partitioned over several GPUs, or
    offloaded to the host (on one GPU, not offloaded, every parameter stays whole)."""
    return plan.offload_param != "none" or plan.data_parallel > 1


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
    p, n, tag = trainable(plan), plan.data_parallel, trained_symbol(plan)
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
        backward.append(_before_reduce(plan, p, f"{tag}: ZeRO-1 reduces after backward"))
    if w == 4:      # .to(fp32) of the flattened fp32 partition is the same tensor
        step = [Component("flattened fp32 partition", full, f"4 B x {tag} / N_d (then AdamW's temporary, "
                          f"4 B x {tag} / N_d, once the partition is freed)", DS_SOURCE)]
    else:
        step = [Component("flattened 16-bit partition + fp32 upcast", half + full, f"2 B + 4 B x {tag} / N_d (then "
                          f"AdamW's temporary, 4 B x {tag} / N_d, once the 16-bit copies are freed)", DS_MEASURED)]
    return grads, step, backward


def _zero12_ending(plan: Plan, grads: list[Component], backward: list[Component]) -> list[Component]:
    """The end of backward with a tied embedding (``step.py``): the sum of its two gradients is
    what the hook fires for, once, last. ZeRO-2 has copied every other gradient into the IPG
    bucket, and reduced the full ones into its partition (made at the first bucket reduced: none
    yet where every other gradient fits one bucket, in the step's only micro-batch); ZeRO-1 keeps
    them all until after backward (and the embedding's from an earlier micro-batch), its
    partition not made yet — which the first bucket reduced after backward makes while every
    16-bit gradient still waits: that is ZeRO-1's end of backward, tied or not."""
    w, t = ds_width(plan), trainable(plan)
    tied = tied_in_flight(plan, w, 3)
    if plan.zero_stage == 2:       # the partition is made at the first bucket reduced (a micro-batch before)
        flushed = plan.grad_accum > 1 or t - plan.model.embedding_params > plan.reduce_bucket_size
        return (grads + backward + tied if flushed else backward + tied) if tied else []
    after = backward[:1] + [_before_reduce(plan, t, f"{trained_symbol(plan)}: every gradient, copied into the "
                                                    "bucket after backward")] + grads
    if not tied:
        return after
    e = plan.model.embedding_params
    kept = t - e + (e if plan.grad_accum > 1 else 0)
    own = " (its own kept from the micro-batch before)" if plan.grad_accum > 1 else ""
    at_sum = backward[:1] + [_before_reduce(plan, kept, f"{kept:,}: every gradient but the tied weight's{own}")] + tied
    return max(after, at_sum, key=lambda parts: sum(c.bytes for c in parts))


def _before_reduce(plan: Plan, elements: int, words: str) -> Component:
    """ZeRO-1's 16-bit gradients, kept as autograd made them until its reduction after backward."""
    w = ds_width(plan)
    return Component(f"gradients ({_width_name(plan)}, before reduce)", w * elements, f"{w} B x {words}", DS_SOURCE)


def _zero12_hooked(plan: Plan, grads: list[Component], backward: list[Component]) -> list[Component]:
    """What ZeRO-1/2's first gradient hook finds and sets up, while every activation is still kept
    (recorded: the final norm's or lm_head's gradient fires it before any layer's backward,
    ``step.py``): the IPG bucket(s) and lm_head's gradient — kept by autograd for a tied weight,
    pending under ZeRO-1, copied into the bucket under ZeRO-2, where one larger than the bucket
    reduces at once into the partition it makes. With LoRA the frozen head has none: the first
    adapter gradient of the last layer sets the bucket up. ZeRO-1's later micro-batches find the
    bucket and the kept gradients alive (``carried``), lm_head's new one added into them."""
    if plan.offload_optimizer != "none":
        return []
    bucket = [] if plan.zero_stage == 1 and plan.grad_accum > 1 else backward[:1]    # ZeRO-1 carries its own
    if plan.lora_rank:
        return bucket
    w, m = ds_width(plan), plan.model
    head = m.head_params or m.vocab_size * m.hidden_size
    out = bucket + [Component("lm_head's gradient", w * head, f"{w} B x {head:,}", DS_SOURCE)]
    oversized = plan.zero_stage == 2 and m.head_params and head > plan.reduce_bucket_size
    return out + (grads if oversized and plan.grad_accum == 1 else [])      # accumulating: carried already


MAX_REDUCE_EVENTS = 2      # stage3.py max_param_reduce_events: reductions in flight before the host waits


def _zero3_ending(plan: Plan) -> list[Component]:
    """The end of backward with a tied embedding under ZeRO-3 (``step.py``): the tied weight's
    gradients beside the others still on the reduce stream. Each gradient copied into the IPG
    bucket stays allocated until its reduction's event is waited on (``record_stream``): the host
    waits once ``max_param_reduce_events`` are in flight, and for all at the end of backward —
    so up to that many reduced buckets, one reducing and the one filling, at most every other
    gradient."""
    tied = tied_in_flight(plan, ds_width(plan), 3)
    if not tied:
        return []
    w, others = ds_width(plan), trainable(plan) - plan.model.embedding_params
    window = (MAX_REDUCE_EVENTS + 2) * plan.reduce_bucket_size
    held = min(others, window)
    kept = zero3_kept(plan.model, zero3_keep_distance(plan)).embedding if zero3_fetches(plan) else 0
    gathered = [Component("tied embedding, kept gathered", w * kept, f"{w} B x {kept:,}: used again by its own "
                          "backward within stage3_max_reuse_distance", DS_STAGE3)] if kept else []
    return gathered + [Component("gradients on the reduce stream", w * held, f"{w} B x min(every other gradient "
                                 f"{others:,}, (max_param_reduce_events {MAX_REDUCE_EVENTS} + 2) x reduce_bucket_size "
                                 f"{window:,})", DS_STAGE3)] + tied


def _deepspeed_step(plan: Plan, opt_off: bool) -> tuple[list[Component], list[Component]]:
    p, stage = trainable(plan), plan.zero_stage
    if opt_off:
        return [], []
    if stage == 0:
        tag = trained_symbol(plan)
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
    p, tag = trainable(plan), trained_symbol(plan)
    held, name, words = _ds_weights(plan)
    resting = [_ds_quant_states(plan)] if plan.load_in_4bit else []
    resting += [Component(name, shard(plan, "weights", held), words, ZERO_PAPER), optimizer_states(plan, p, 4)]
    grads = [Component("gradients (fp32)", shard(plan, "gradients", 4 * p), f"4 B x {tag}", ZERO_PAPER)]
    return States(resting, grads, step_temporaries(plan, p, 4, plan.model), _host(plan))


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


def base_bytes(plan: Plan, group: str, size: int) -> int:
    """Bytes one frozen base tensor takes where DeepSpeed holds it (DeepSpeed casts the model to
    its precision): ``ds_width`` B a value, or under QLoRA a 4-bit linear's values, half a byte each — as loaded for
    ZeRO-0/1/2, packed into ``bnb_4bit_quant_storage`` for ZeRO-3 to partition (same bytes); its
    quant state apart (``quant_states``)."""
    quantized = quantized_bytes(plan, group, size)        # half a byte a 4-bit value, a byte an int8 one
    return ds_width(plan) * size if quantized is None else quantized


def vision_tower(plan: Plan) -> Component:
    """A multimodal checkpoint's vision tower (``parts.states.tower``): DeepSpeed partitions every
    parameter the optimizer is handed (HF Trainer: all that require grad) into its fp32 groups, so
    ZeRO keeps the tower's master copy and Adam moments like any weight's; LoRA's adapters on its
    linears follow the same rules; QLoRA's bitsandbytes stores its linears in NF4."""
    t = tower(plan)
    w_b = ds_width(plan)
    s_b = zero_state_bytes(plan)[0]
    par_off = plan.offload_param != "none" and plan.zero_stage == 3
    held = (t.nf4_bytes if plan.load_in_4bit else w_b * t.params) + w_b * t.adapters
    weights = 0 if par_off else shard(plan, "weights", held)
    states = 0 if plan.offload_optimizer != "none" else shard(plan, "optimizer", s_b * t.trained)
    over = lambda state: " / N_d" if state in SHARDED[plan.zero_stage] else ""    # noqa: E731
    terms = ([] if par_off else [(f"{t.nf4_words} + {w_b} B x {t.adapters:,} adapters" if plan.load_in_4bit else
                                  f"{w_b} B x ({t.params:,} tower params{t.adapter_words})") + over("weights")])
    terms += [f"{s_b} B x {t.trained:,}{over('optimizer')} (optimizer states)"] if states else []
    return Component("vision tower (no gradient)", weights + states, " + ".join(terms) or "offloaded", VISION_SOURCE)


def frozen_shards(plan: Plan) -> int:
    """Ranks a frozen model beside the policy is split over: ZeRO-3 partitions it as it builds it
    (zero.Init); whole otherwise."""
    return plan.data_parallel if plan.zero_stage == 3 else 1
