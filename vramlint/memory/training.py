"""A training step's peak: the largest of the moments at which memory piles up.

PyTorch frees activations as the backward pass consumes them and allocates gradients as it
produces them, so the peak sits at one of a few moments (each checked on H200 measurements):

- **forward, at the loss**: model states + every kept activation + the 16-bit logits, their fp32
  copy and the log-softmax output (10 B per logit); under autocast the cached 16-bit weight
  copies of every linear are alive too;
- **backward, at the loss**: the same kept activations + 12 B per logit (kept log-softmax output,
  its gradient, the input gradient) — usually the activation peak;
- **backward, last layer** (gradient checkpointing): every gradient + one layer re-materialised;
- **backward, the first gradient hook** (ZeRO-1/2): every kept activation, lm_head's gradient and
  the IPG bucket the hook sets up (``States.hooked``);
- **end of backward**: the embedding's gradient, made last — a tied weight's two gradients and
  their sum, FSDP's unit that holds the embedding reduced last, beside every other gradient — the
  peak of a large vocabulary at short sequences (``States.ending``, each runtime's);
- **forward, the first units gathered** (FSDP2): all-gather outputs beside the parameters copied
  out of them, a large embedding's unit among them (``States.opening``);
- **optimizer step**: model states + gradients + the step's temporaries — the peak of large
  models at small batches (docs/reference.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramlint.memory import rl
from vramlint.memory.parts import activations as act
from vramlint.memory.parts.adapters import trainable
from vramlint.memory.parts.components import Component
from vramlint.memory.parts.loss import into_lm_head, loss_component
from vramlint.memory.parts.states import States
from vramlint.memory.runtimes import runtime
from vramlint.memory.stages import generation, reference_forward, stage_components
from vramlint.plan import Plan


def model_states(plan: Plan) -> States:
    """The model states of the plan's runtime (``runtimes``), with what its stage keeps beside the
    model (``stages``) and a vision tower's share."""
    states = runtime(plan.runtime).states(plan)
    extra = stage_components(plan) + ([vision_tower(plan)] if plan.model.vision_params else [])
    return replace(states, resting=states.resting + extra) if extra else states


def vision_tower(plan: Plan) -> Component:
    """A multimodal checkpoint's vision tower, which transformers loads with the language model
    (``models/vision.py``; ``ModelShape.params`` is the language model's), as the runtime holds it."""
    return runtime(plan.runtime).vision_tower(plan)

MEASURED = "per-op saved-tensor count checked on H200 (memory/parts/activations.py)"


@dataclass(frozen=True)
class Moment:
    name: str
    components: tuple[Component, ...]

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.components)


OFFLOAD_STASH = 5     # torchtune 0.6.1 OffloadActivations max_fwd_stash_size (training/_activation_offloading.py:66-72)
OFFLOAD_SOURCE = ("torchtune 0.6.1 OffloadActivations: saved tensors copied to pinned host memory on a stream, the "
                  "last 5 kept until their copy is done (_activation_offloading.py:150-193)")


def _kept_activations(plan: Plan) -> Component:
    m, tokens = plan.model, plan.rows * plan.seq_len
    if plan.grad_checkpointing:
        per = act.checkpointed_bytes_per_token(m, plan)
        if plan.activation_offload:      # torchtune OffloadActivations: the last max_fwd_stash_size stay
            layers = min(OFFLOAD_STASH, m.num_layers)
            return Component("activations (checkpointed inputs)", per * tokens * layers,
                             f"{per} B/token x {tokens:,} tokens x {layers} layers (the inputs not yet copied to "
                             f"the host; {m.num_layers} offloaded in all)", OFFLOAD_SOURCE)
        return Component("activations (checkpointed inputs)", per * tokens * m.num_layers,
                         f"{per} B/token x {tokens:,} tokens x {m.num_layers} layers (layer inputs)", MEASURED)
    per_layer = [act.layer_bytes_per_token(layer, m, plan) for layer in m.layers]
    total = sum(per_layer) * tokens
    return Component("activations", total, f"{sum(per_layer) // m.num_layers:,} B/token/layer x {tokens:,} tokens "
                     f"x {m.num_layers} layers", MEASURED)


def _head(plan: Plan) -> Component:
    tokens = plan.rows * plan.seq_len
    per = sum(act.head_tensors(plan.model, plan))
    return Component("final norm + lm_head input", per * tokens, f"{per} B/token x {tokens:,}", MEASURED)


def _cast_weights(plan: Plan) -> tuple[tuple[Component, ...], tuple[Component, ...]]:
    """autocast casts every linear weight to 16 bit and the matmul keeps the copy for backward;
    grouped_mm experts are not autocast ops and keep their fp32 weights, and bitsandbytes' 4-bit
    linears dequantize inside their own matmul (no copy kept) — LoRA's fp32 adapters are cast like
    any weight. The decoder layers' copies and lm_head's are apart: with gradient checkpointing
    the layers' die when the autocast region closes (the recompute casts again), while lm_head's
    is saved for its backward and lives into the backward pass. Returns (the layers' copies,
    lm_head's copy), each empty without autocast."""
    if not plan.autocast:
        return (), ()
    m = plan.model
    g = m.layer_params
    layers = 0 if plan.quantized_base else g.attention + g.mlp + g.router
    layers += trainable(plan) if plan.lora_rank else 0
    head = m.vocab_size * m.hidden_size
    what = "adapter weights" if plan.quantized_base else "linear weights" + (" and adapters" if plan.lora_rank else "")
    source = "torch.autocast weight cast cache, docs/reference.md §4"
    return ((Component("autocast weight copies", 2 * layers, f"2 B x {layers:,} {what}", source),),
            (Component("lm_head autocast copy", 2 * head, f"2 B x V·h = 2 x {head:,}", source),))


def _mlp_backward(plan: Plan) -> Component:
    """The last layer's MLP backward, where LoRA's first adapter gradient fires (``runtimes/torch/
    step.py`` ``_layer_backward``): the hidden states' gradient coming in and the one going out,
    and the largest tensor the sublayer's backward makes."""
    m, tokens = plan.model, plan.rows * plan.seq_len
    r = act.widths(plan).r
    largest = max(act.sublayer_tensors(m.layers[-1], m, plan)[-1], default=0)
    per = 2 * r * m.hidden_size + largest
    return Component("last layer's MLP backward", per * tokens, f"(2 x {r} B x {m.hidden_size:,} + {largest:,}) "
                     f"B/token x {tokens:,}: the hidden states' gradients in and out, the largest tensor it makes",
                     MEASURED)


def _one_layer(plan: Plan) -> Component:
    m, tokens = plan.model, plan.rows * plan.seq_len
    biggest = max(act.layer_bytes_per_token(layer, m, plan) for layer in m.layers)
    return Component("one layer re-materialised", biggest * tokens, f"{biggest:,} B/token x {tokens:,}", MEASURED)


def _dequantized(plan: Plan) -> tuple[Component, ...]:
    """QLoRA: inside a layer's backward, the 16-bit weight bitsandbytes dequantizes for its matmul —
    the largest 4-bit linear's (``activations.dequantized``)."""
    largest = max(max(act.dequantized(layer, plan.model, plan)) for layer in plan.model.layers)
    if not largest:
        return ()
    return (Component("4-bit weight dequantized", largest, f"2 B x the largest 4-bit linear ({largest // 2:,})",
                      "bitsandbytes 0.50 MatMul4Bit / gemm_4bit dequantize fallback (dev/qlora_peaks.py --wide)"),)


def _held(plan: Plan) -> tuple[Component, ...]:
    """The previous micro-batch's 4-bit inputs, alive to this one's loss (``activations.held_inputs``)."""
    per, tokens = act.held_inputs(plan), plan.rows * plan.seq_len
    if not per:
        return ()
    return (Component("previous micro-batch's 4-bit inputs", per * tokens,
                      f"{per:,} B/token x {tokens:,}: bitsandbytes' ctx.tensors, held with the loop's loss until this one's",
                      "bitsandbytes 0.42 autograd/_functions.py:522-525; LitGPT 0.5.13 finetune loops"),)


def _masks(plan: Plan) -> tuple[Component, ...]:
    """The attention masks, alive for the whole forward and backward (none with SDPA on full layers)."""
    size = act.attention_masks(plan, act.widths(plan).r)
    if not size:
        return ()
    shape = "b x s x s" if plan.attn == "eager" else "s x s"
    return (Component("attention masks", size, f"{shape} per mask kind ({plan.attn})",
                      "transformers masking_utils.py (memory/parts/activations.py attention_masks)"),)


def _dora_norm(plan: Plan) -> tuple[Component, ...]:
    """DoRA's weight norm in one adapted linear's forward (memory/parts/activations.py dora_transient):
    before the loss it is over; with checkpointing the recompute makes it again in backward."""
    per, elements = act.dora_transient(plan)
    return (Component("DoRA weight norm (one linear)", per * elements, f"{per} B x the largest adapted linear "
                      f"({elements:,}): an identity, B·A, the merged weight and its norm",
                      "peft 0.21.2 tuners/lora/dora.py:86-166 (recorded on the CPU)"),) if elements else ()


def moments(plan: Plan, states: States) -> list[Moment]:
    kept, head = _kept_activations(plan), _head(plan)
    layer_casts, head_cast = _cast_weights(plan)
    rest = tuple(states.resting)
    carried = tuple(states.carried) if plan.grad_accum > 1 else ()     # from the earlier micro-batches
    turn = rest + tuple(states.gathered) + carried + _masks(plan)
    norm = _dora_norm(plan)
    forward = turn + (kept, head, loss_component(plan, "forward")) + layer_casts + head_cast + _held(plan)
    backward = turn + (kept, head, loss_component(plan, "backward"))
    backward += (() if plan.grad_checkpointing else layer_casts) + head_cast
    out = [Moment("forward at the loss", forward), Moment("backward at the loss", backward),
           Moment("optimizer step", rest + tuple(states.gradients) + tuple(states.step))]
    referenced = reference_forward(plan)
    if referenced:                # the policy's graph alive, the reference's logits made
        out.append(Moment("reference forward", turn + (kept, head) + tuple(referenced) + layer_casts + head_cast))
    made = generation(plan)
    if made:                      # between steps: the gradients are gone, the states stay
        out.append(Moment("generation between steps", rest + tuple(made)))
    for name, parts in rl.phases(plan, rest, tuple(states.gathered)):   # online RL: rollout, log-prob
        out.append(Moment(name, tuple(parts)))
    if plan.grad_checkpointing:
        out.append(Moment("backward, last layer", rest + tuple(states.gradients) + tuple(states.backward)
                          + _masks(plan) + (_one_layer(plan),) + _dequantized(plan) + norm))
    if states.hooked:             # ZeRO-1/2's bucket, set up at lm_head's gradient (LoRA: the last layer's)
        lead = (_mlp_backward(plan),) if plan.lora_rank else (head, into_lm_head(plan))
        out.append(Moment("backward, the first gradient hook", turn + (kept,) + lead + tuple(states.hooked)))
    if states.opening:            # FSDP2: the first units' all-gather outputs beside their parameters
        out.append(Moment("forward, the first units gathered", rest + tuple(states.opening) + _masks(plan)))
    if states.ending:
        out.append(Moment("end of backward", rest + tuple(states.ending) + _masks(plan)))
    return out


def training_peak(plan: Plan) -> tuple[Moment, list[Moment], States]:
    own = getattr(runtime(plan.runtime), "moments", None)
    if own is not None:               # a runtime over its own model code (torchtitan): its moments, its ranks
        all_moments = [Moment(name, parts) for name, parts in own(plan)]
        return max(all_moments, key=lambda m: m.bytes), all_moments, runtime(plan.runtime).states(plan)
    states = model_states(plan)
    all_moments = moments(plan, states)
    return max(all_moments, key=lambda m: m.bytes), all_moments, states
