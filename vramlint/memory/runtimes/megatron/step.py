"""A Megatron step's moments on each pipeline rank, the peak rank's kept (``moments``).

Per rank: its states (``states.py``: the parameters, the DDP gradient buffer, allocated before the
first step and alive throughout, and the optimizer's), the activations of the chunk-forwards it
holds (``layout.py``, ``activations.py``), and on the rank with the output layer the loss over its
vocabulary shard: Megatron's vocab-parallel cross-entropy (tensor_parallel/cross_entropy.py, the
same in the fused one) makes an fp32 copy of the bf16 logits (``.float()``), turns it in place into
the softmax it saves for backward, and in backward into the gradient, cast to bf16 for the output
layer: 6 B a logit at the loss going forward (bf16 logits + the fp32 copy) and coming back (the
fp32 gradient + its bf16 cast). The moments: forward and backward at the loss, the 1F1B steady
state with a recomputed chunk rebuilt, backward through an MoE layer with its token dispatcher's
buffers, and the optimizer step.

Megatron leaves the caching allocator as it is (no expandable segments); its reserve above the
tensors is not replayed here (``reserve``) — its reports give max allocated and max reserved apart,
and benchmarks/megatron_published.py compares the estimate with each.
"""

from __future__ import annotations

from vramlint.memory.parts.allocator import Peaks
from vramlint.memory.parts.components import ALLOCATOR, Component
from vramlint.memory.parts.pipeline import Rank
from vramlint.memory.runtimes.megatron import rl
from vramlint.memory.runtimes.megatron.activations import (SOURCE as TERMS, chunk_input, dispatch_staging,
                                                           embedding_mask, head_input, kept_per_token, mtp_kept,
                                                           rebuilt, widths)
from vramlint.memory.runtimes.megatron.layout import ranks
from vramlint.memory.runtimes.megatron.states import SOURCE, megatron_states, rank_params
from vramlint.plan import Plan

LOSS = 6
CAST_SOURCE = ("torch 2.13 aten/src/ATen/autocast_mode.cpp cached_cast (leaf fp32 weights that need grads, cached "
               "until the outermost autocast exits); Megatron-core schedules.py forward_step (the autocast region); "
               "Transformer Engine's Linear (its cast weight saved for backward)")
LOSS_SOURCE = ("Megatron-LM core_v0.19.0 tensor_parallel/cross_entropy.py: .float() copy of the bf16 logits, "
               "softmax in place saved for backward, the gradient in place then cast to bf16")


def _kept(plan: Plan, rank: Rank, tokens: int) -> tuple[Component, ...]:
    per, words = max(kept_per_token(plan, stage.layers) for stage in rank.stages)     # the largest chunk's
    held = rank.in_flight
    where = f" x {held} chunk-forwards in flight ({plan.parallelism.schedule})" if plan.parallelism.pipeline > 1 \
        else ""
    out = (Component("activations", per * tokens * held, f"{words} x {tokens:,} tokens{where}", TERMS),)
    mask = embedding_mask(plan)
    if mask and any(stage.embedding for stage in rank.stages):
        first = min(held, plan.parallelism.microbatches) if plan.parallelism.pipeline > 1 else 1
        out += (Component("embedding dropout masks", mask * tokens * first, f"{mask} B x {tokens:,} tokens x "
                          f"{first} micro-batch(es)", TERMS),)
    return out


def _shard(plan: Plan) -> int:
    """The vocabulary a TP rank's output layer holds (VocabParallelEmbedding's partition)."""
    return -(-plan.model.vocab_size // plan.tensor_parallel)


FUSED_LOSS = 10
FUSED_SOURCE = ("Megatron-LM core_v0.19.0 fusions/fused_cross_entropy.py: calculate_logits_max's fp32 copy of the "
                "bf16 logits alive while calculate_predicted_logits (jit-fused, out of place) makes exp_logits, the "
                "softmax saved for backward; Megatron's CI: +413 MB at TP 2 over the unfused loss "
                "(gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion)")


def _loss(plan: Plan, when: str, tokens: int) -> Component:
    """The loss over the rank's vocabulary shard. Megatron's native fused cross-entropy keeps two fp32
    copies going forward (10 B a logit with the bf16 logits); coming back it is the unfused one's."""
    vocab = _shard(plan)
    fused = plan.parallelism.fused_loss and when != "backward"
    per, source = (FUSED_LOSS, FUSED_SOURCE) if fused else (LOSS, LOSS_SOURCE)
    how = " (fused: the fp32 copy and exp_logits)" if fused else ""
    return Component(f"logits and loss ({when})", per * tokens * vocab,
                     f"{per} B x {tokens:,} tokens x {vocab:,} (vocabulary shard){how}", source)


def _casts(plan: Plan, rank: Rank) -> Component:
    """The 16-bit copies autocast makes of the rank's fp32 weights (NeMo's megatron_amp_O2 off):
    torch.autocast casts each weight once a region and caches it until the region exits (the
    micro-batch's forward: Megatron's forward_step wraps it, the loss outside), Transformer
    Engine's linears cast it themselves and save the cast for backward, one for each forward in
    flight."""
    params = sum(rank_params(plan, rank))
    held = rank.in_flight if plan.parallelism.autocast == "saved" else 1
    how = (f" x {held} forwards in flight (Transformer Engine saves its cast for backward)" if held > 1 else
           " (Transformer Engine saves its cast for backward)" if plan.parallelism.autocast == "saved" else
           " (torch.autocast's cache, until the forward's region exits)")
    return Component("autocast's 16-bit weight copies", 2 * params * held, f"2 B x {params:,}{how}", CAST_SOURCE)


def _logits(plan: Plan, tokens: int) -> Component:
    vocab = _shard(plan)
    return Component("logits (16-bit)", 2 * tokens * vocab, f"2 B x {tokens:,} tokens x {vocab:,} (vocabulary shard)",
                     LOSS_SOURCE)


def _rank_moments(plan: Plan, rank: Rank) -> list[tuple[str, tuple[Component, ...]]]:
    states = megatron_states(plan, rank)
    tokens = plan.micro_batch * plan.seq_len
    rest = tuple(states.resting) + tuple(states.gradients)
    if plan.rollout is not None:        # an RL actor (verl): the reference, critic and engine beside it
        rest += tuple(rl.beside(plan, rank))
    out = [(f"optimizer step{_named(plan, rank)}", rest + tuple(states.step))]
    rest += tuple(states.gathered)              # Megatron-FSDP's gathered weights: through forward and backward
    back = rest + tuple(states.backward)        # and its gradients before they are reduce-scattered
    kept = _kept(plan, rank, tokens)
    autocast = plan.parallelism.autocast
    if autocast == "saved":
        kept += (_casts(plan, rank),)
    name = _named(plan, rank)
    head = ()
    if any(stage.head for stage in rank.stages):
        per = head_input(plan)
        head = (Component("final norm + output layer input", per * tokens, f"{per:,} B x {tokens:,} tokens", TERMS),)
        head += _deferred(plan, tokens) + _mtp(plan, tokens)
        out.append((f"forward at the loss{name}", rest + kept + head + (_loss(plan, "forward", tokens),)))
        out.append((f"backward at the loss{name}", back + kept + head + (_loss(plan, "backward", tokens),)))
    if autocast == "cache":         # the region ends at the output layer's 16-bit logits, before the loss
        logits = (_logits(plan, tokens),) if head else ()
        out.append((f"forward under autocast{name}", rest + kept + head + logits + (_casts(plan, rank),)))
    staging = dispatch_staging(plan)
    if staging:
        held = Component("token dispatch buffers", staging * tokens, f"{staging:,} B x {tokens:,} tokens "
                         f"({plan.parallelism.dispatcher} dispatcher: the routed tokens' gradients in flight)", TERMS)
        out.append((f"backward through an MoE layer{name}", back + kept + (held,)))
    policy = plan.parallelism.checkpointing.partition(":")[0]
    if policy in ("uniform", "block"):
        per = rebuilt(plan)
        chunk = Component("one chunk rebuilt", per * tokens, f"{per:,} B/token x {tokens:,} (its layers' activations "
                          "recomputed in backward)", TERMS)
        out.append((f"backward, a chunk rebuilt{name}", back + kept + (chunk,)))
    elif plan.parallelism.pipeline > 1:
        out.append((f"1F1B steady state{name}", back + kept))
    if states.ending:                           # Megatron-FSDP's layers' gradients, made as backward frees layers
        out.append((f"end of backward{name}", back + tuple(states.ending)))
    return out


MTP_SOURCE = ("Megatron-LM core_v0.19.0 transformer/multi_token_prediction.py:760-895 process_mtp_loss (each depth's "
              "logits and loss made before the main loss; its cross-entropy's fp32 softmax saved until its backward, "
              "which follows the main loss's) and :1056-1232 (a depth's embedding, concatenation, layer and norm)")


def _mtp(plan: Plan, tokens: int) -> tuple[Component, ...]:
    """Multi-token prediction on the last stage: its depths' kept tensors (``activations.mtp_kept``)
    and each depth's loss softmax over the vocabulary shard (fp32, 4 B a logit), alive from its
    forward through the main loss's forward and backward."""
    per, words = mtp_kept(plan)
    if not per:
        return ()
    depths = plan.model.mtp_depths
    return (Component("multi-token prediction layers", per * tokens, f"{words} x {tokens:,} tokens", MTP_SOURCE),
            Component("multi-token prediction losses (fp32 softmax)", 4 * depths * tokens * _shard(plan),
                      f"4 B x {depths} depth(s) x {tokens:,} tokens x {_shard(plan):,} (vocabulary shard)", MTP_SOURCE))


DEFER_SOURCE = ("Megatron-LM core_v0.19.0 tensor_parallel/layers.py:604-607 (the output layer's grad_output "
                "appended to grad_output_buffer), :1147-1152 (its input to embedding_activation_buffer), drained at "
                "the flush (schedules.py:886-899 finish_embedding_wgrad_compute)")


def _deferred(plan: Plan, tokens: int) -> tuple[Component, ...]:
    """--defer-embedding-wgrad-compute: the output layer keeps, for each deferred micro-batch, its
    input (c h a token, sequence-split under SP) and its gradient over the vocabulary shard (2 B a
    logit) until the flush; a micro-batch's loss meets those of the earlier ones (at most n - 1)."""
    held = min(plan.parallelism.deferred_wgrad, plan.parallelism.microbatches - 1)
    if held <= 0:
        return ()
    w = chunk_input(widths(plan)) + 2 * _shard(plan)       # the output layer's input (c h, split under SP)
    return (Component("deferred output-layer wgrad buffers", held * w * tokens, f"{held} micro-batch(es) x "
                      f"{w:,} B x {tokens:,} tokens (input + grad_output over the vocabulary shard)", DEFER_SOURCE),)


def _named(plan: Plan, rank: Rank) -> str:
    return f" (pipeline rank {rank.index})" if plan.parallelism.pipeline > 1 else ""


def moments(plan: Plan) -> list[tuple[str, tuple[Component, ...]]]:
    """Every rank's moments; the caller takes the largest, which names its rank. An RL actor's
    rollout and log-prob phases are each the largest rank's (``rl.phases``)."""
    out = [moment for rank in ranks(plan) for moment in _rank_moments(plan, rank)]
    return out + _phases(plan) if plan.rollout is not None else out


def _phases(plan: Plan) -> list[tuple[str, tuple[Component, ...]]]:
    """Each RL phase at its largest rank; the log-prob forward's logits and loss on the rank with the
    output layer are the step's own loss going forward (``_loss``)."""
    largest: dict[str, tuple[Component, ...]] = {}
    for rank in ranks(plan):
        states = megatron_states(plan, rank)
        head = any(stage.head for stage in rank.stages)
        logits = [_loss(plan, "log-prob forward", plan.rollout.logprob_tokens)] if head else []
        for name, parts in rl.phases(plan, rank, list(states.resting) + list(states.gradients), logits):
            if sum(c.bytes for c in parts) > sum(c.bytes for c in largest.get(name, ())):
                largest[name] = tuple(parts)
    return list(largest.items())


def replay(plan: Plan) -> Peaks:
    """No allocator replay (``reserve``)."""
    return Peaks(0, 0)


def reserve(plan: Plan) -> Component:
    return Component("allocator reserve", 0, "not replayed for Megatron-LM (the band allows for the caching "
                     "allocator's reserve above the tensors)", SOURCE, kind=ALLOCATOR)


__all__ = ["SOURCE", "moments", "replay", "reserve"]
