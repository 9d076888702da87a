"""A torchtitan step's moments on each pipeline rank, the peak rank's kept (``moments``).

Per rank: its states (``states.py``), the activations of the stage-forwards it holds
(``layout.py``, ``activations.py``), and on the rank with the head the loss. torchtitan's
``cross_entropy(pred.flatten(0, 1).float(), labels)`` with ``del pred`` before backward keeps
10 B a logit at the loss in forward (bf16 logits, their fp32 copy, log_softmax's output) and
12 B at the start of backward (the kept output, its gradient, the input's). Under TP the output is
ColwiseParallel with Shard(-1) logits and the loss runs in torch's ``loss_parallel``, whose own
log-softmax and fused nll + log-softmax backward (torch/distributed/tensor/parallel/loss.py) keep
14 B and 16 B a logit of the rank's vocabulary shard. Both traced by dev/torchtitan_block.py.
The moments: forward and backward at the loss, a checkpointed block rebuilt in backward with the
gradients in flight, under pipeline parallelism the 1F1B steady state (every held micro-batch, the
accumulated unsharded gradients), and the optimizer step.

torchtitan's launcher sets ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (run_train.sh):
the compute stream's segment grows in place, so no cached block sits beside its tensors and no
allocator replay is made. But the caching allocator keeps a pool, and an expandable segment, per
stream, and FSDP2 allocates on two streams of its own (``side_streams``): what they cached stays
reserved beside the compute stream's peak.
"""

from __future__ import annotations

from vramlint.memory.parts.allocator import Peaks
from vramlint.memory.parts.components import ALLOCATOR, Component
from vramlint.memory.runtimes.torchtitan.activations import TRACED, kept_per_token, recomputed
from vramlint.memory.parts.pipeline import Rank
from vramlint.memory.runtimes.torchtitan.layout import ranks
from vramlint.memory.runtimes.torchtitan.states import SOURCE, holds_head, rank_params, titan_states, units
from vramlint.plan import Plan

LOSS = {"forward": 10, "backward": 12}
LOSS_SOURCE = ("torchtitan 0.2.2 components/loss.py cross_entropy_loss, train.py del pred; traced "
               "(dev/torchtitan_block.py)")
# loss_parallel: _log_softmax keeps the fp32 input, its shifted copy and the result beside the bf16
# logits (14 B); the backward's zeros_like + exp + their sum x the gradient (16 B)
PARALLEL_LOSS = {"forward": 14, "backward": 16}
PARALLEL_SOURCE = ("torch 2.13 distributed/tensor/parallel/loss.py _log_softmax, _nll_loss_and_log_softmax_backward "
                   "(torchtitan enables loss_parallel under TP); traced (dev/torchtitan_block.py)")
# compile.components ["model", "loss"] (v0.2.2 default) compiles the loss too: inductor's partition
# saves the bf16 logits it was given and makes their gradient in bf16 in one fused kernel (the
# fp32 copy and the log-softmax output never exist whole). Read from the partition's rule, not traced.
COMPILED = {"forward": 2, "backward": 4}
COMPILED_SOURCE = ("torch.compile of cross_entropy (torchtitan 0.2.2 compile.components model + loss): the bf16 "
                   "logits saved, their bf16 gradient fused; not traced")
# Under expandable segments the freed bf16 logits and their fp32 copy leave a 6 B hole that the
# log-softmax gradient's 4 B and the loss gradient's 4 B cannot both fill: 2 B a logit more reserved.
LOSS_HOLE = 2
EXPANDABLE_SEGMENTS = True       # run_train.sh sets them (``memory.expandable``: no hint to set them again)
EXPANDABLE = ("torchtitan run_train.sh: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place, "
              "no cached blocks beside the tensors)")


def _kept(plan: Plan, rank: Rank, tokens: int) -> Component:
    stages = len(rank.stages)
    per, words = kept_per_token(plan, -(-rank.layers // stages))
    held = rank.in_flight
    where = f" x {held} micro-batches in flight ({plan.parallelism.schedule})" if plan.parallelism.pipeline > 1 else ""
    return Component("activations", per * tokens * held, f"{words} x {tokens:,} tokens{where}", TRACED)


CHUNKED_SOURCE = ("torchtitan 0.3.0 components/loss.py ChunkedLossWrapper (:567-835): the output projection, "
                  "cross-entropy and backward run chunk by chunk (:742-766) into a fp32 GradAccumulator (:498, "
                  ":705-709); the output's gradient accumulates unsharded in fp32 while FSDP2's gradient sync is "
                  "off for all chunks but the last (:728-746, torch _fsdp_param.py to_accumulated_grad_if_needed)")
# The chunk's bf16 logits stay bound to their variable through its backward (loss.py:742-766): 2 B a
# logit beside the eager whole-logits rule, which was traced after ``del pred``; the compiled loss
# saves those logits already. The chunk's freed fp32 copy is the hole its gradient fills (traced: no
# reserve beside the 14 B).
CHUNK_LOGITS = 2


def _chunked_loss(plan: Plan, tokens: int) -> tuple[Component, ...]:
    """0.3.0's ChunkedLossWrapper at a chunk's backward: the whole loss loop's buffers, one chunk's
    logits. Under TP the final norm's output is gathered whole on every rank (decoder_sharding.py
    :119-139), so the accumulator and the chunks are the whole sequence's."""
    par, m = plan.parallelism, plan.model
    chunks, h, c = par.loss_chunks, m.hidden_size, 4 if plan.precision == "fp32" else 2
    parallel = plan.tensor_parallel > 1
    vocab = -(-m.vocab_size // plan.tensor_parallel)
    rows = -(-tokens // chunks)
    logits = rows * vocab
    if par.compiled_loss:
        per, kept, source, how = COMPILED["backward"], 0, COMPILED_SOURCE, ", compiled"
    else:
        per, source = (PARALLEL_LOSS["backward"], PARALLEL_SOURCE) if parallel else (LOSS["backward"], LOSS_SOURCE)
        kept, how = CHUNK_LOGITS, ", vocabulary shard" if parallel else ""
    out = (Component("loss gradient accumulator (fp32)", 4 * h * tokens, f"4 B x {h:,} x {tokens:,} tokens",
                     CHUNKED_SOURCE),
           Component("output gradient, unsharded (fp32)", 4 * vocab * h, f"4 B x {vocab:,} x {h:,} (accumulated "
                     "across the chunks before this one)", CHUNKED_SOURCE),
           Component(f"a chunk's logits and loss (backward{how})", (per + kept) * logits,
                     f"({per} + {kept}) B x {rows:,} tokens x {vocab:,} ({chunks} chunks)",
                     f"{source}; {CHUNKED_SOURCE}"))
    if plan.micro_batch > 1:            # split(...).contiguous() copies the rows of a batch (a view of one row)
        out += (Component("the chunks' copies of the norm output", (c * h + 16) * tokens, f"({c} B x {h:,} + 2 x 8 "
                          f"B (int64 labels, positions)) x {tokens:,} tokens (loss.py:668-677)", CHUNKED_SOURCE),)
    return out


def _loss(plan: Plan, when: str, tokens: int) -> tuple[Component, ...]:
    """The loss over the rank's logits: its vocabulary shard under loss parallel, the whole
    vocabulary otherwise (TP without it gathers the logits: ``output_layouts=Replicate()``)."""
    par = plan.parallelism
    parallel = par.loss_parallel and plan.tensor_parallel > 1
    vocab = -(-plan.model.vocab_size // plan.tensor_parallel) if parallel else plan.model.vocab_size
    logits = tokens * vocab
    if par.compiled_loss:
        per = COMPILED[when]
        return (Component(f"logits and loss ({when}, compiled)", per * logits,
                          f"{per} B x {tokens:,} tokens x {vocab:,}", COMPILED_SOURCE),)
    per, source = (PARALLEL_LOSS[when], PARALLEL_SOURCE) if parallel else (LOSS[when], LOSS_SOURCE)
    shard = " (vocabulary shard, loss parallel)" if parallel else ""
    out = (Component(f"logits and loss ({when})", per * logits, f"{per} B x {tokens:,} tokens x {vocab:,}{shard}",
                     source),)
    if when == "backward":
        out += (Component("allocator reserve (loss)", LOSS_HOLE * logits, f"{LOSS_HOLE} B x {logits:,} logits: the "
                          "log-softmax gradient finds no freed block of its size", EXPANDABLE, kind=ALLOCATOR),)
    return out


SIDE_SOURCE = ("torch 2.13 FSDP2: _fsdp_collectives.py foreach_all_gather (copy-in stream), foreach_reduce "
               "(\"the GPU sharded gradient is allocated in the RS stream\"), _fsdp_param_group.py AllGatherState; "
               "CUDA caching allocator: blocks are cached per stream, an expandable segment per stream "
               "(pytorch/pytorch#163771)")


def side_streams(plan: Plan, rank: Rank, shards_live: bool, gather_live: int) -> tuple[Component, ...]:
    """What FSDP2's own streams keep cached beside a moment's tensors, which the compute stream's
    requests cannot reuse: the copy-in stream's peak, a unit's all-gather output with the previous
    unit's still held (``AllGatherState`` frees it at the next copy-out) and the shard cast to bf16
    (less ``gather_live``, an output the moment counts itself); the reduce-scatter stream's, the
    fp32 gradient shards it allocated, freed by ``zero_grad`` into its cache (unless
    ``shards_live``: the moment holds them). Without FSDP (one shard) there are neither."""
    n = plan.data_parallel
    if n < 2:
        return ()
    c = 4 if plan.precision == "fp32" else 2
    sizes = units(plan, rank)
    pair = max((a + b for a, b in zip(sizes, sizes[1:])), default=sum(sizes))
    gather = c * (pair + -(-max(sizes) // n))
    offload = plan.offload_param != "none"
    shards = 4 * sum(-(-size // n) for size in sizes) if not offload else 4 * -(-max(sizes) // n)
    out = (Component("all-gather stream's cache", gather - gather_live,
                     f"{c} B x ({pair:,} (two units' all-gather outputs) + {max(sizes):,} / {n} (the shard cast))"
                     + (f" - {gather_live:,} B counted" if gather_live else ""), SIDE_SOURCE, kind=ALLOCATOR),)
    if not shards_live or offload:     # offloaded, the moment's shards are on the host
        out += (Component("reduce-scatter stream's cache", shards, "4 B x the rank's gradient shards, freed by "
                          "zero_grad" if not offload else "4 B x a unit's gradient shard (copied to the host)",
                          SIDE_SOURCE, kind=ALLOCATOR),)
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
    # (reduce-scattered each; under CUDA graphs at every loss, zeroed in place: 0.3.0 trainer.py:874
    # zero_grad(set_to_none=disable_cuda_graphs)), and under PP their unsharded accumulation (sync off)
    grads = plan.grad_accum > 1 or plan.parallelism.cuda_graphs
    carried = tuple(states.gradients) if grads else ()
    carried += tuple(states.backward) if not plan.parallelism.reshard_after_forward and \
        plan.parallelism.microbatches > 1 else ()
    kept = (_kept(plan, rank, tokens),) + _rope_caches(plan, rank)
    name = f" (pipeline rank {rank.index})" if plan.parallelism.pipeline > 1 else ""
    largest = rank_params(plan, rank)[1]
    c = 4 if plan.precision == "fp32" else 2
    in_flight = c * largest if plan.parallelism.reshard_after_forward else 0    # "blocks in flight": one all-gather
    out = [(f"optimizer step{name}", rest + tuple(states.gradients) + side_streams(plan, rank, True, 0))]
    head = holds_head(rank)
    if head:
        turn = rest + gathered + carried + kept + (_head_input(plan, tokens),) + side_streams(plan, rank, grads, 0)
        if plan.parallelism.loss_chunks:
            out.append((f"the chunked loss, a chunk's backward{name}", turn + _chunked_loss(plan, tokens)))
        else:
            out.append((f"forward at the loss{name}", turn + _loss(plan, "forward", tokens)))
            out.append((f"backward at the loss{name}", turn + _loss(plan, "backward", tokens)))
    if plan.grad_checkpointing:
        per = recomputed(plan)
        layer = Component("one block rebuilt", per * tokens, f"{per:,} B/token x {tokens:,} (its activations "
                          "without checkpointing)", TRACED)
        steady = "1F1B steady state" if plan.parallelism.pipeline > 1 else "backward, a block rebuilt"
        out.append((f"{steady}{name}", rest + gathered + carried + _unless(states.backward, carried) + kept + (layer,)
                    + side_streams(plan, rank, grads, in_flight)))
    elif plan.parallelism.pipeline > 1:
        out.append((f"1F1B steady state{name}", rest + gathered + carried + _unless(states.backward, carried) + kept
                    + side_streams(plan, rank, grads, in_flight)))
    return out


ROPE_SOURCE = ("torchtitan 0.3.0 models/common/rope.py:114 (a cache buffer per attention module, :185-234 "
               "complex64 [seq, head_dim / 2], :273-308 fp32 cos + sin [seq, 2 head_dim]), resized to "
               "training.seq_len (decoder.py:176-181)")


def _rope_caches(plan: Plan, rank: Rank) -> tuple[Component, ...]:
    """0.3.0 gives every block its own RoPE cache of the whole training sequence."""
    per = plan.parallelism.rope_cache
    if not per:
        return ()
    seq = plan.seq_len * plan.parallelism.context
    return (Component("RoPE caches (one a block)", per * seq * rank.layers, f"{per} B x {seq:,} positions x "
                      f"{rank.layers} blocks", ROPE_SOURCE),)


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
    """No replayed reserve: the compute stream's expandable segment grows in place; what is
    reserved beside its tensors, the loss's freed hole and FSDP2's side streams' caches, is counted
    in the moments (``_loss``, ``side_streams``)."""
    return Component("allocator reserve", 0, "no cached blocks beside the compute stream's tensors (expandable "
                     "segments); the loss's hole and FSDP2's streams' caches are counted in the moment",
                     EXPANDABLE, kind=ALLOCATOR)


__all__ = ["EXPANDABLE_SEGMENTS", "SOURCE", "moments", "replay", "reserve"]
