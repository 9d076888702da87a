"""A torchtitan step's moments on each pipeline rank, the peak rank's kept (``moments``).

Per rank: its states (``states.py``), the activations of the stage-forwards it holds
(``layout.py``, ``activations.py``), and on the rank with the head the loss over its vocabulary
shard (loss parallel: the output is ColwiseParallel with Shard(-1) logits): torchtitan's
``cross_entropy(pred.flatten(0, 1).float(), labels)`` with ``del pred`` before backward keeps
10 B a logit at the loss in forward (bf16 logits, their fp32 copy, log_softmax's output) and
12 B at the start of backward (the kept output, its gradient, the input's), traced by
dev/torchtitan_block.py. The moments: forward and backward at the loss, a checkpointed block
rebuilt in backward with the gradients in flight, under pipeline parallelism the 1F1B steady state
(every held micro-batch, the accumulated unsharded gradients), and the optimizer step.

torchtitan's launcher sets ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (run_train.sh):
segments grow in place, so no cached block sits beside the tensors and no allocator replay is
made (``reserve``).
"""

from __future__ import annotations

from vramlint.memory.parts.allocator import Peaks
from vramlint.memory.parts.components import ALLOCATOR, Component
from vramlint.memory.runtimes.torchtitan.activations import TRACED, kept_per_token, recomputed
from vramlint.memory.parts.pipeline import Rank
from vramlint.memory.runtimes.torchtitan.layout import ranks
from vramlint.memory.runtimes.torchtitan.states import SOURCE, holds_head, titan_states
from vramlint.plan import Plan

LOSS = {"forward": 10, "backward": 12}
LOSS_SOURCE = ("torchtitan 0.2.2 components/loss.py cross_entropy_loss, train.py del pred; traced "
               "(dev/torchtitan_block.py)")
# compile.components ["model", "loss"] (v0.2.2 default) compiles the loss too: inductor's partition
# saves the bf16 logits it was given and makes their gradient in bf16 in one fused kernel (the
# fp32 copy and the log-softmax output never exist whole). Read from the partition's rule, not traced.
COMPILED = {"forward": 2, "backward": 4}
COMPILED_SOURCE = ("torch.compile of cross_entropy (torchtitan 0.2.2 compile.components model + loss): the bf16 "
                   "logits saved, their bf16 gradient fused; not traced")
# Under expandable segments the freed bf16 logits and their fp32 copy leave a 6 B hole that the
# log-softmax gradient's 4 B and the loss gradient's 4 B cannot both fill: 2 B a logit more reserved.
LOSS_HOLE = 2
EXPANDABLE = ("torchtitan run_train.sh: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place, "
              "no cached blocks beside the tensors)")


def _kept(plan: Plan, rank: Rank, tokens: int) -> Component:
    stages = len(rank.stages)
    per, words = kept_per_token(plan, -(-rank.layers // stages))
    held = rank.in_flight
    where = f" x {held} micro-batches in flight ({plan.parallelism.schedule})" if plan.parallelism.pipeline > 1 else ""
    return Component("activations", per * tokens * held, f"{words} x {tokens:,} tokens{where}", TRACED)


def _loss(plan: Plan, when: str, tokens: int) -> tuple[Component, ...]:
    vocab = -(-plan.model.vocab_size // plan.tensor_parallel)
    logits = tokens * vocab
    if plan.parallelism.compiled_loss:
        per = COMPILED[when]
        return (Component(f"logits and loss ({when}, compiled)", per * logits,
                          f"{per} B x {tokens:,} tokens x {vocab:,} (vocabulary shard)", COMPILED_SOURCE),)
    out = (Component(f"logits and loss ({when})", LOSS[when] * logits,
                     f"{LOSS[when]} B x {tokens:,} tokens x {vocab:,} (vocabulary shard)", LOSS_SOURCE),)
    if when == "backward":
        out += (Component("allocator reserve (loss)", LOSS_HOLE * logits, f"{LOSS_HOLE} B x {logits:,} logits: the "
                          "log-softmax gradient finds no freed block of its size", EXPANDABLE, kind=ALLOCATOR),)
    return out


def _head_input(plan: Plan, tokens: int) -> Component:
    """The final norm's output, gathered whole for the output projection, which keeps it."""
    c, h = 4 if plan.precision == "fp32" else 2, plan.model.hidden_size
    return Component("final norm + output input", c * h * tokens, f"{c} B x {h:,} x {tokens:,} tokens", TRACED)


def _rank_moments(plan: Plan, rank: Rank) -> list[tuple[str, tuple[Component, ...]]]:
    states = titan_states(plan, rank)
    tokens = plan.micro_batch * plan.seq_len
    rest, gathered = tuple(states.resting), tuple(states.gathered)
    # alive at every loss but the first micro-batch's: the gradient shards of the step's earlier ones
    # (reduce-scattered each), and under PP their unsharded accumulation (gradient sync off)
    carried = tuple(states.gradients) if plan.grad_accum > 1 else ()
    carried += tuple(states.backward) if not plan.parallelism.reshard_after_forward and \
        plan.parallelism.microbatches > 1 else ()
    kept = (_kept(plan, rank, tokens),)
    name = f" (pipeline rank {rank.index})" if plan.parallelism.pipeline > 1 else ""
    out = [(f"optimizer step{name}", rest + tuple(states.gradients))]
    head = holds_head(rank)
    if head:
        turn = rest + gathered + carried + kept + (_head_input(plan, tokens),)
        out.append((f"forward at the loss{name}", turn + _loss(plan, "forward", tokens)))
        out.append((f"backward at the loss{name}", turn + _loss(plan, "backward", tokens)))
    if plan.grad_checkpointing:
        per = recomputed(plan)
        layer = Component("one block rebuilt", per * tokens, f"{per:,} B/token x {tokens:,} (its activations "
                          "without checkpointing)", TRACED)
        steady = "1F1B steady state" if plan.parallelism.pipeline > 1 else "backward, a block rebuilt"
        out.append((f"{steady}{name}", rest + gathered + carried + _unless(states.backward, carried) + kept + (layer,)))
    elif plan.parallelism.pipeline > 1:
        out.append((f"1F1B steady state{name}", rest + gathered + carried + _unless(states.backward, carried) + kept))
    return out


def _unless(parts: list[Component], counted: tuple[Component, ...]) -> tuple[Component, ...]:
    """``parts`` not already among ``counted`` (each tensor once in a moment)."""
    return tuple(part for part in parts if part not in counted)


def moments(plan: Plan) -> list[tuple[str, tuple[Component, ...]]]:
    """Every rank's moments; the caller takes the largest, which names its rank."""
    return [moment for rank in ranks(plan) for moment in _rank_moments(plan, rank)]


def replay(plan: Plan) -> Peaks:
    """No allocator replay: expandable segments (``reserve``)."""
    return Peaks(0, 0)


def reserve(plan: Plan) -> Component:
    """No replayed reserve: expandable segments grow in place; the one hole they keep, the loss's, is
    counted at the loss (``_loss``)."""
    return Component("allocator reserve", 0, "no cached blocks beside the tensors (expandable segments); the "
                     "loss's freed hole is counted at the loss", EXPANDABLE, kind=ALLOCATOR)


__all__ = ["SOURCE", "moments", "replay", "reserve"]
