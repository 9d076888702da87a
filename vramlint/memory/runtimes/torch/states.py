"""Plain PyTorch (DDP, Accelerate without DeepSpeed or FSDP): parameters in their own dtype (fp32
under autocast, or bf16); AdamW keeps m and v in the parameter's dtype; gradients in the
parameter's dtype; ``optimizer.step()`` with the default foreach implementation allocates one
parameter-sized temporary per dtype group. DDP keeps its gradient buckets as a second copy of the
gradients (``gradient_as_bucket_view`` is off by default), at rest: allocated when the model is
wrapped (``ddp_buckets``)."""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory.parts.adapters import adapter_bytes, base_quantization, trainable, trainable_tensors, trained_bytes
from vramlint.memory.parts.components import HOST, Component
from vramlint.memory.parts.states import (
    PAGED_MIN,
    PAGED_SOURCE,
    VISION_SOURCE,
    ZERO_PAPER,
    States,
    carried_gradients,
    optimizer_states,
    state_tensors,
    step_temporaries,
    tied_in_flight,
    tower,
)
from vramlint.memory.parts.weights import DTYPE_BYTES, replaced_embedding, weight_bytes
from vramlint.plan import Plan

DDP_SOURCE = "torch nn/parallel/distributed.py and distributed/c10d/reducer.cpp (Reducer buckets), docs/reference.md §7"


# torch.distributed: the rebuilt buckets' caps (_DEFAULT_FIRST_BUCKET_BYTES, DDP's bucket_cap_mb=25)
DDP_FIRST_BUCKET, DDP_BUCKET_CAP = 1 << 20, 25 << 20


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


def torch_states(plan: Plan) -> States:
    m, t = plan.model, trainable(plan)
    w_b = DTYPE_BYTES[plan.weights_dtype or "bfloat16"]
    s_b = trained_bytes(plan)
    resting = [_torch_weights(plan, w_b)] + embedding_copy(plan, w_b)
    if plan.lora_rank:
        resting.append(Component("LoRA adapters", s_b * t, f"{s_b} B x {t:,} adapter params ({plan.adapter_dtype})",
                                 "PEFT LoRA (models/peft.py; memory/parts/adapters.py adapter_bytes)"))
    resting.append(optimizer_states(plan, t, s_b))
    host = _paged(plan, s_b)
    buckets = ddp_buckets(plan)
    if buckets:
        resting.append(Component("DDP gradient buckets", sum(buckets), f"{s_b} B x {t:,} trainable params in "
                                 f"{len(buckets)} buckets, alive from DDP's construction (gradient_as_bucket_view "
                                 "off: a second copy of the gradients)", DDP_SOURCE))
    grads = [Component("gradients", t * s_b, f"{s_b} B x {t:,} trainable params", ZERO_PAPER)]
    step = step_temporaries(plan, t, s_b, m)
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
    carried = [carried_gradients(plan, t * s_b, f"{s_b} B x {t:,} trainable params in .grad (DDP: no_sync)")]
    # the end of backward: every .grad but the embedding's, which is the sum of the tied weight's
    # two (a later micro-batch adds it into the kept one, a third)
    tied = [] if plan.optimizer_in_bwd else tied_in_flight(plan, s_b, 3 if plan.grad_accum > 1 else 2)
    return States(resting, grads, step, host, carried=carried, ending=grads + tied if tied else [])


IN_BWD_SOURCE = ("torchtune 0.6.1 optimizer_in_bwd (training/memory.py:219-242): a post-accumulate-grad hook steps "
                 "each parameter and frees its gradient")


def _paged(plan: Plan, s_b: int) -> list[Component]:
    """Paged states live in unified memory: on the GPU while it has room, moved to the host when
    PyTorch needs the space, so they never cause an OOM; counted apart, on the host."""
    if not plan.paged_optimizer:
        return []
    big = [size for size in trainable_tensors(plan) if size >= PAGED_MIN]
    return [Component("paged optimizer states (unified memory)", sum(state_tensors(plan, big, s_b)),
                      f"the paged states of the {len(big)} tensors of 1e5 elements or more", PAGED_SOURCE, HOST)]


def embedding_copy(plan: Plan, w_b: int) -> list[Component]:
    """The token embeddings a script replaced and still holds (``Plan.embedding_copy``: LitGPT's
    QLoRA swaps in bitsandbytes' StableEmbedding and keeps ``old_embedding``, a local of its main(),
    to the end of training: litgpt 0.5.13 finetune/lora.py:211-219)."""
    if not plan.embedding_copy:
        return []
    size = plan.model.vocab_size * plan.model.hidden_size
    return [Component("replaced embedding (held)", replaced_embedding(plan.model, w_b), f"{w_b} B x V·h ({size:,})",
                      "LitGPT 0.5.13 finetune/lora.py main(): old_embedding")]


def _torch_weights(plan: Plan, w_b: int) -> Component:
    m, quant = plan.model, base_quantization(plan)
    if quant is not None:       # bitsandbytes quantizes the decoder's linears; the rest keeps the load dtype
        size = weight_bytes(replace(m, quantization=quant), w_b)
        name = "NF4" if plan.load_in_4bit else "int8"
        return Component(f"weights ({name})", size, f"{quant.detail} on linears, {w_b} B elsewhere",
                         f"bitsandbytes {quant.method}, models/quantization.py")
    return Component("weights", m.params * w_b, f"{w_b} B x {m.params:,} params", ZERO_PAPER)


def vision_tower(plan: Plan) -> Component:
    """A multimodal checkpoint's vision tower, which transformers loads with the language model
    (``models/vision.py``; ``ModelShape.params`` is the language model's). A text-only step never
    runs it, so it gets no gradient and torch's optimizers keep no state for it, but DDP gives it
    slots in its gradient buckets (every parameter that requires grad has one;
    ``find_unused_parameters``, which such a model needs, zero-fills them). LoRA leaves it frozen
    but puts adapters on its linears (PEFT's "all-linear" reaches them), fp32 and requiring grad
    like the decoder's; QLoRA's bitsandbytes stores its linears in NF4 like the decoder's."""
    t = tower(plan)
    if plan.load_in_4bit:
        size, formula = t.nf4_bytes, t.nf4_words
    else:
        w_b = DTYPE_BYTES[plan.weights_dtype or "bfloat16"]
        size, formula = w_b * t.params, f"{w_b} B x {t.params:,} params"
    s_b, a = trained_bytes(plan), adapter_bytes(plan)
    slots = s_b * t.trained if ddp_buckets(plan) else 0
    size += a * t.adapters + slots
    formula += (f" + {a} B x {t.adapters:,} LoRA adapter params ({plan.adapter_dtype})" if t.adapters else "") + (
        f" + {s_b} B x {t.trained:,} slots in DDP's gradient buckets" if slots else "")
    return Component("vision tower (no gradient)", size, formula, VISION_SOURCE)


def frozen_shards(plan: Plan) -> int:
    """Ranks a frozen model beside the policy (a reference, a teacher) is split over: none."""
    return 1
