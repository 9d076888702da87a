"""The pieces every runtime's model states are made of (``runtimes/*/states.py`` assemble them):
the ``States`` of a step by when they are alive, the ZeRO sharding rule (stage 1 shards optimizer
states, stage 2 also gradients, stage 3 also the weights, each over the data-parallel degree N_d;
Rajbhandari et al., "ZeRO", 2020; docs/reference.md section 2), the optimizer's state tensors
(AdamW, bitsandbytes 8-bit, SGD, Adafactor), the step's foreach temporaries (measured on H200:
+4 B/P in fp32, +2 B/P in bf16), accumulated gradients, and a vision tower's sizes."""

from __future__ import annotations

from dataclasses import dataclass, field

from vramlint.memory.parts.adapters import tower_adapters, trainable, trainable_tensors
from vramlint.memory.parts.components import Component
from vramlint.models.quantization import nf4
from vramlint.models.shape import ModelShape
from vramlint.models.vision import LOADED_BY
from vramlint.plan import Plan

ZERO_PAPER = "ZeRO (Rajbhandari et al. 2020), docs/reference.md §1-2"
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
    ending: list[Component] = field(default_factory=list)        # the embedding's gradient, made last: beside it
    hooked: list[Component] = field(default_factory=list)        # set up by the first gradient hook (ZeRO-1/2)
    opening: list[Component] = field(default_factory=list)       # the first forward's first units gathered (FSDP2)


def shard(plan: Plan, state: str, size: int) -> int:
    return -(-size // plan.data_parallel) if state in SHARDED[plan.zero_stage] else size
PAGED_SOURCE = ("bitsandbytes 0.50.2 paged optimizers: states of tensors of 1e5 elements and more in cudaMallocManaged "
                "memory (optim/optimizer.py get_state_buffer, functional.py get_paged), outside PyTorch's allocator")
PAGED_MIN = 100_000      # bitsandbytes: smaller tensors' states stay in PyTorch's allocator


def carried_gradients(plan: Plan, size: int, formula: str) -> Component:
    """Gradient accumulation (counted by ``training.moments`` when there is any): from the second
    micro-batch on, the gradients of the earlier ones are alive through its forward and backward
    (AccumulateGrad adds into ``.grad``; the HF Trainer and Accelerate skip DDP's all-reduce and
    FSDP's reduce-scatter with ``no_sync`` until the last micro-batch; DeepSpeed keeps what each
    stage says)."""
    return Component("accumulated gradients", size, f"{formula}, gradient_accumulation_steps {plan.grad_accum}",
                     "torch AccumulateGrad and no_sync; DeepSpeed 0.19 stage_1_and_2.py; recorded with each "
                     "(tests/test_grad_accum.py)")


TIED_SOURCE = ("autograd: a tied weight's lm_head gradient waits in its input buffer for the embedding's; "
               "embedding_dense_backward, then add (recorded on the CPU, dev/trace_allocations.py, "
               "dev/trace_deepspeed.py; memory/runtimes/torch/step.py Step._summed_tied)")


def tied_in_flight(plan: Plan, g_b: int, count: int) -> list[Component]:
    """A tied embedding's gradient at the end of backward: lm_head's, held by autograd since the
    loss, the embedding's dense one and their sum, ``count`` of them beyond what the runtime keeps
    as gradients (none where the embedding is untied, frozen or small). With a large vocabulary
    at short sequences (Llama-3.2-1B's 128k rows, Gemma's 256k) this is the step's peak."""
    e = plan.model.embedding_params
    if plan.model.head_params or plan.lora_rank or not e:
        return []
    return [Component("tied weight's gradients in flight", count * g_b * e, f"{count} x {g_b} B x {e:,} (lm_head's "
                      "gradient, held since the loss; the embedding's dense one; their sum)", TIED_SOURCE)]


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


def optimizer_states(plan: Plan, t: int, s_b: int, shards: int = 1, over: str = "") -> Component:
    """The optimizer's states of ``t`` trainable elements held in ``s_b`` bytes, split over
    ``shards`` ranks (FSDP: each parameter's shard is its own tensor to the optimizer, so
    bitsandbytes' per-tensor blocks and its 4096-element threshold apply to the shards)."""
    h, part = plan.model.hidden_size, -(-t // shards)
    tag = f"{t:,} trainable params" if shards == 1 else f"{trained_symbol(plan)}{over}"
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


def step_temporaries(plan: Plan, t: int, s_b: int, m: ModelShape, shards: int = 1, over: str = "") -> list[Component]:
    """What ``optimizer.step()`` allocates and frees: foreach AdamW one copy of what it updates."""
    part = -(-t // shards)
    if foreach(plan):
        tag = f"{t:,} params" if shards == 1 else f"{trained_symbol(plan)}{over}"
        return [Component("optimizer step temporaries", part * s_b, f"foreach AdamW: {s_b} B x {tag} (one "
                          "copy)", TORCH_MEASURED)]
    if plan.optimizer == "adafactor":
        largest = m.largest_layer_params if not plan.lora_rank else 0
        return [Component("optimizer step temporaries", 4 * -(-largest // shards),
                          "one fp32 update of the largest tensor", "Adafactor (per-parameter update)")]
    return []


def trained_symbol(plan: Plan) -> str:
    """How formulas name the trainable parameters: P, or T for LoRA's adapters."""
    return "T" if plan.lora_rank else "P"


def weights_words(plan: Plan) -> tuple[int, str]:
    """The 16-bit weights' elements and their name in formulas: P, or with LoRA the frozen base P
    and the adapters T (DeepSpeed casts PEFT's fp32 adapters to 16 bit with the rest)."""
    if plan.lora_rank:
        return plan.model.params + trainable(plan), "(P + T)"
    return plan.model.params, "P"


VISION_SOURCE = (f"{LOADED_BY} (models/vision.py); DeepSpeed 0.19 stage_1_and_2.py / stage3.py flatten every "
                 "parameter handed to the optimizer; torch DDP Reducer buckets every parameter that requires grad")


@dataclass(frozen=True)
class Tower:
    """A multimodal checkpoint's vision tower as every runtime prices it (``vision_tower`` of each):
    its parameters, the LoRA adapters PEFT puts on its linears, what requires grad (the tower, or
    its adapters), and its NF4 bytes under QLoRA (bitsandbytes quantizes its linears like the
    decoder's)."""

    params: int
    adapters: int
    trained: int
    adapter_words: str
    nf4_bytes: int
    nf4_words: str


def tower(plan: Plan) -> Tower:
    v, lora = plan.model.vision_params, tower_adapters(plan.model, plan.lora_rank, plan.lora_targets)
    return Tower(v, lora, lora if plan.lora_rank else v, f" + {lora:,} LoRA adapter params" if lora else "",
                 int(v * nf4().bits / 8), f"{nf4().detail} x {v:,} params (its linears, nearly all of it)")
