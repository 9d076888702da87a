"""FSDP (Accelerate's FSDP plugin, the HF Trainer's ``fsdp``, torchtune's FSDP2): SHARD_GRAD_OP is
ZeRO stage 2, FULL_SHARD stage 3, NO_SHARD stage 0; fp32 sharded parameters under mixed
precision (Accelerate upcasts what requires grad), units all-gathered in the compute dtype."""

from __future__ import annotations

from vramlint.memory.parts.adapters import (
    adapter_bytes,
    lora_tensors,
    nf4_groups,
    quant_states,
    quantized_bytes,
    trainable,
)
from vramlint.memory.parts.components import HOST, Component
from vramlint.memory.parts.states import (
    VISION_SOURCE,
    States,
    carried_gradients,
    optimizer_states,
    step_temporaries,
    tied_in_flight,
    tower,
    trained_symbol,
    weights_words,
)
from vramlint.memory.parts.weights import DTYPE_BYTES
from vramlint.models.shape import Layer
from vramlint.plan import Plan

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


def fsdp_stored(plan: Plan, group: str, size: int) -> int:
    """Elements FSDP shards and all-gathers for one parameter tensor: under QLoRA a 4-bit linear's
    weight holds its values two to a byte in the storage dtype (``Params4bit``, quant_storage
    bfloat16: n values are n / 4 elements), every other tensor its own size."""
    if fsdp_qlora(plan) and group in nf4_groups(plan):
        return -(-quantized_bytes(plan, group, size) // (4 if plan.precision == "fp32" else 2))
    return size


def fsdp_unit(plan: Plan, layer: Layer) -> list[int]:
    """A decoder layer's FSDP unit: its parameter tensors' stored elements, in order."""
    return [fsdp_stored(plan, group, size) for group, size in layer.parameter_tensors]


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
    strategy, as Accelerate wraps the model (``step.py``, recorded by dev/trace_fsdp.py):
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
    t, tag = trainable(plan), trained_symbol(plan)
    held, symbol = weights_words(plan)
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
                else optimizer_states(plan, t, w, n if sharded else 1, over))]
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
    step = [] if offload else step_temporaries(plan, t, w, plan.model, n if sharded else 1, over)
    host = [Component("offloaded shards + states (host)", (shards + 3 * w * part) * plan.cluster.per_node,
                      f"({words} + {3 * w} B x {tag}{over}) x GPUs per node", FSDP_SOURCE, HOST)] if offload else []
    carried = [carried_gradients(plan, c_b * t, f"{c_b} B x {tag}, unsharded: no_sync keeps the full gradients "
                                 "until the last micro-batch reduce-scatters them")] if not plan.sync_each_batch else [
        carried_gradients(plan, 0 if offload else w * part, f"{w} B x {tag}{over}: every micro-batch "
                          "reduce-scatters, the shards add up")]
    return States(resting, grads, step, host, backward=gathered + _fsdp_in_flight(plan, stage, c_b),
                  gathered=gathered, carried=carried, ending=_fsdp_ending(plan, stage, c_b, w),
                  opening=_fsdp2_opening(plan, stage, c_b))


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
    held, symbol = weights_words(plan)
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
    """In a decoder layer's backward (``step.py``): its unsharded gradients; under FULL_SHARD
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


def _fsdp2_opening(plan: Plan, stage: int, c_b: int) -> list[Component]:
    """The first forward's start under FSDP2 (``step.py``): each unit's all-gather output is kept
    until the next unit's all-gather, beside the parameters copied out of it. A tied embedding's
    tail unit is gathered first and stays; when the first layer is gathered both units' outputs and
    parameters are alive. An untied embedding's unit: its output and parameters, then its output
    beside the first layer's. With a large vocabulary and little else (LoRA at short sequences)
    this is the step's peak."""
    m = plan.model
    if plan.fsdp_version != 2 or stage != 3 or plan.offload_param != "none" or not m.embedding_params:
        return []
    layer = sum(fsdp_unit(plan, m.layers[0])) if m.layers else 0
    if fsdp_tail_holds_embedding(plan):
        unit = sum(fsdp_tail_unit(plan))
        own, words = 2 * (unit + layer), f"2 x ({unit:,} + {layer:,}): the tail unit's and the first layer's"
    else:
        e = m.embedding_params
        own = max(2 * e, e + 2 * layer)
        words = (f"the larger of 2 x {e:,} and {e:,} + 2 x {layer:,}: the embedding unit's, then its output beside "
                 "the first layer's")
    return [Component("first units gathered (output + parameters)", c_b * own, f"{c_b} B x {words} all-gather "
                      "output and parameters", FSDP_SOURCE)]


def _fsdp_ending(plan: Plan, stage: int, c_b: int, w: int) -> list[Component]:
    """The end of backward (``step.py``, recorded by dev/trace_fsdp.py): the unit that holds the
    embedding is reduced last, after the embedding's backward. Its parameters are unsharded and its
    gradients all made — lm_head's, kept since the loss, and the embedding's; a tied weight's two
    summed into a third tensor — then FSDP1 concatenates them into a flat gradient while the
    parameters are still unsharded, and FSDP2 copies them into a reduce-scatter input beside its
    last all-gather output. Every other unit's gradients are alive too: reduced shards, or under
    ``no_sync`` the whole unsharded gradients (``_accumulated``). With a large vocabulary (Gemma's
    256k rows) and short sequences this is the step's peak."""
    m = plan.model
    if stage < 2 or plan.lora_rank or plan.offload_param != "none" or not m.embedding_params:
        return []
    e, head = m.embedding_params, m.head_params
    layer = max((sum(fsdp_unit(plan, each)) for each in m.layers), default=0)
    fsdp2 = plan.fsdp_version == 2
    tied = tied_in_flight(plan, c_b, 3)
    if tied:                        # FSDP1's root or FSDP2's tail, unsharded since the first forward
        unit = sum(fsdp_tail_unit(plan))
        own, words = unit, f"{c_b} B x {unit:,}: the {'tail' if fsdp2 else 'root'} unit unsharded"
    elif fsdp2:                     # the untied embedding's own unit, gathered again
        unit, own = e, 3 * e
        words = (f"3 x {c_b} B x {e:,}: the embedding's unit all-gathered again (output and parameters) and its "
                 "gradient")
    else:
        unit = sum(fsdp_tail_unit(plan))
        own = 2 * unit + head + e
        words = (f"{c_b} B x (2 x {unit:,} + {head:,} + {e:,}): the root unit unsharded, lm_head's and the "
                 "embedding's gradients, the flat gradient they are concatenated into")
    out = [Component("embedding's unit at its post-backward", c_b * own, words, FSDP_SOURCE)] + tied
    if tied and fsdp2:
        out.append(Component("last all-gather output", c_b * layer, f"{c_b} B x {layer:,} (FSDP2: the first "
                             "layer's, kept until the next all-gather)", FSDP_SOURCE))
    return out + _accumulated(plan, c_b, w, unit, c_b * layer if fsdp2 else 0)


def _accumulated(plan: Plan, c_b: int, w: int, unit: int, reduce: int) -> list[Component]:
    """The other units' gradients at the end of backward. Reduced each micro-batch: their shards,
    and FSDP2's last reduce-scatter input (``reduce``, the first layer's, kept until the next).
    Under ``no_sync`` the largest of a step's micro-batches: the first keeps every other unit's
    unsharded gradients; a middle one (3 or more) those and the unit's own, kept from the one
    before; the last the unit's own kept one beside the others' reduced shards."""
    others = trainable(plan) - unit
    n = fsdp_shard_count(plan)
    shards = w * -(-others // n)
    reduced = [Component("last reduce-scatter input", reduce, f"{reduce:,} B (FSDP2: the first layer's, kept "
                         "until the next reduce-scatter)", FSDP_SOURCE)] if reduce else []
    if plan.grad_accum == 1 or plan.sync_each_batch:
        return [Component("gradient shards (other units)", shards, f"{w} B x {others:,} / {n}", FSDP_SOURCE)] + reduced
    first = c_b * others + (c_b * unit if plan.grad_accum >= 3 else 0)
    if first >= c_b * unit + shards + reduce:
        which = "a middle micro-batch's: with the unit's own" if plan.grad_accum >= 3 else "the first micro-batch's"
        return [Component("accumulated gradients (unsharded)", first, f"{c_b} B x {others:,}"
                          f"{f' + {c_b} B x {unit:,}' if plan.grad_accum >= 3 else ''} ({which}; no_sync)",
                          FSDP_SOURCE)]
    return [Component("accumulated gradient (the unit's own) + shards", c_b * unit + shards,
                      f"{c_b} B x {unit:,} + {w} B x {others:,} / {n} (the last micro-batch: the others reduced)",
                      FSDP_SOURCE)] + reduced


def vision_tower(plan: Plan) -> Component:
    """A multimodal checkpoint's vision tower (``parts.states.tower``): FSDP never unshards it (no
    step runs it) and keeps no optimizer state for it; Accelerate upcasts what requires grad, so
    under LoRA the frozen base keeps its load dtype; QLoRA's bitsandbytes stores its linears in NF4."""
    t = tower(plan)
    w_b = fsdp_base_bytes(plan) if fsdp_lora_units(plan) else 4
    base, words = ((t.nf4_bytes, t.nf4_words) if plan.load_in_4bit
                   else (w_b * t.params, f"{w_b} B x {t.params:,} params"))
    shards = fsdp_shard_count(plan)
    a = adapter_bytes(plan)
    return Component("vision tower (no gradient)", -(-(base + a * t.adapters) // shards),
                     f"({words} + {a} B x {t.adapters:,}) / {shards}", VISION_SOURCE)


def frozen_shards(plan: Plan) -> int:
    """Ranks a frozen model beside the policy is split over: FSDP shards it like the policy."""
    return fsdp_shard_count(plan)
