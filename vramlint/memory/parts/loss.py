"""The loss head: what computing the cross-entropy over the vocabulary keeps and adds, by how the
training loop computes it (``Plan.loss``).

Each kind is three sizes (``LossHead``): what the loss keeps from its forward to its backward, what
its forward adds on top for a moment, and what its backward adds at its start. The peak "at the
loss" in forward is kept + forward; at the start of backward kept + backward. N: tokens in the
micro-batch (rows x seq), V: vocabulary, H: hidden size, a: the compute dtype's bytes. Every
logit is on every GPU, tensor parallelism or not: transformers' TP plans gather lm_head's output
(``colwise_rep``) and DeepSpeed AutoTP all-reduces it (``LmHeadLinearAllreduce``).

- ``full``: transformers' ``ForCausalLMLoss`` (5.24): the 16-bit logits, their fp32 upcast and the
  log-softmax output (kept): 2 + 4 + 4 B a logit in forward, 4 + 4 + 4 at the start of backward.
  ``full-4.48``: up to transformers 4.48 the loss also made a shifted fp32 copy (``.contiguous()``,
  removed in 4.49.0 by PR #35646): 14 B a logit in forward (traced with 4.48.3 on the CPU).
- ``chunked``: torchtune's ``CEWithChunkedOutputLoss`` (0.6.1, ``num_output_chunks`` C = 8): the
  model returns C 16-bit chunks, each upcast and log-softmaxed in turn; every chunk's fp32
  log-softmax is kept (4 B a logit), one chunk's upcast at a time (ce_chunked_output_loss.py:13-83).
- ``chunked-compiled``: the same under torchtune's ``compile``: inductor's partitioner keeps the
  16-bit logits and a max and a log-sum-exp per row instead of the fp32 log-softmax (measured on
  the partitioner, research features/scripts/compiled_ce_partition.out).
- ``liger``: Liger's ``LigerFusedLinearCrossEntropyLoss`` (liger-kernel 0.8.5, ops/
  fused_linear_cross_entropy.py:99-125, 574-578): logits a chunk at a time (chunk = the next power
  of two of N / ceil(V / H) rows), the gradients computed in forward and kept: grad_input N x H, the
  lm_head's gradient V x H when it trains.
- ``cce``: Apple's Cut Cross-Entropy (cut-cross-entropy 25.1.1 cce.py:35-117, cce_backward.py:
  243-338): no logits at all; an fp32 lse and dot per token and an fp32 average per vocabulary entry
  kept; backward allocates the hidden states' gradient (and the classifier's when it trains).
- ``trl``: TRL 1.16's fused LM head (trainer/utils.py:1548-1660, kernels/chunked_logprob.py:31,
  347-457): a min(N, 4096) x 32768 tile, a copy of the hidden states and an fp32 log_z kept;
  backward the hidden states' gradient in fp32 (and lm_head's, fp32, when it trains) and the tile.
- ``openrlhf``: OpenRLHF 0.11.2's ``Actor.forward`` (models/actor.py:266-289, models/utils.py:172-196):
  the 16-bit logits cast to fp32 (the cast's input freed, its output kept by flash-attn's triton
  cross-entropy and by the trainer's ``output``), the loss per token, no log-softmax tensor; backward
  the fp32 logits' gradient (``inplace_backward`` off) and the cast's 16-bit one.
- ``verl``: verl 0.9.1's FSDP engine (workers/engine/fsdp/transformer_impl.py ``prepare_model_outputs``,
  utils/torch_functional.py:73-135): the model's 16-bit logits, kept by flash-attn's triton
  cross-entropy, which writes their gradient into them (``inplace_backward``): no fp32 copy, no
  log-softmax tensor. ``verl-entropy``: with the entropy in the loss (``entropy_coeff`` not 0, or
  ``calculate_entropy``) the cross-entropy's backward is not in place, a 16-bit gradient, and the
  compiled entropy's backward makes another.
- ``litgpt-chunked``: LitGPT 0.5.13's fine-tuning with adapters (finetune/lora.py, adapter.py:
  ``model(input_ids, lm_head_chunk_size=128)``, utils.py:302-331 ``chunked_cross_entropy``):
  lm_head makes 128-position chunks, which the loop's ``logits`` list holds to the end of the
  step; each chunk's ``cross_entropy`` keeps its log-softmax, in the compute dtype (fp32 under
  autocast, which upcasts the chunk for it). Backward works a chunk at a time: the log-softmax's
  gradient and the chunk's. ``litgpt``: full fine-tuning (full.py): the whole logits, held by the
  loop; ``chunked_cross_entropy(logits[..., :-1, :], ...)`` reshapes that slice, which copies it
  when the micro-batch has more than one row (utils.py:333-335), for the loss's forward; the
  cross-entropy in 128-row chunks as above. ``litgpt-pretrain`` (pretrain.py): the same without the
  slice, so without the copy. Traced on the CPU (dev/litgpt_block.py: 2 + 2 B a logit kept under
  bf16-true).
- ``none``: a reward model's scalar head: no vocabulary logits.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.memory.parts.activations import widths
from vramlint.memory.parts.components import Component
from vramlint.plan import Plan

CHUNKS = 8                       # torchtune num_output_chunks default
LITGPT_CHUNK = 128               # LitGPT's lm_head_chunk_size and chunked_cross_entropy chunk_size
TRL_TILE = (4096, 32768)         # TRL 1.16 TOKEN_CHUNK_SIZE x _CHUNKED_LOGPROB_CHUNK_SIZE
WORDS = {"full": "transformers ForCausalLMLoss", "full-4.48": "transformers 4.48 and earlier ForCausalLMLoss",
         "chunked": f"torchtune CEWithChunkedOutputLoss, {CHUNKS} chunks",
         "chunked-compiled": f"torchtune CEWithChunkedOutputLoss, {CHUNKS} chunks, compiled",
         "liger": "Liger fused linear cross-entropy", "cce": "Cut Cross-Entropy", "trl": "TRL fused LM head",
         "openrlhf": "OpenRLHF fp32 logits, flash-attn cross-entropy",
         "verl": "verl 16-bit logits, flash-attn cross-entropy in place",
         "verl-entropy": "verl 16-bit logits, flash-attn cross-entropy and the entropy",
         "litgpt-chunked": "LitGPT chunked lm_head and cross-entropy",
         "litgpt": "LitGPT whole logits, cross-entropy in 128-row chunks",
         "litgpt-pretrain": "LitGPT whole logits, cross-entropy in 128-row chunks",
         "none": "a scalar head without vocabulary logits"}


@dataclass(frozen=True)
class LossHead:
    """Bytes the loss keeps from forward to backward, adds in forward, adds at backward's start,
    each with its formula."""

    kept: tuple[int, str]
    forward: tuple[int, str]
    backward: tuple[int, str]


@dataclass(frozen=True)
class Sizes:
    """What every head's arithmetic reads: tokens N, vocabulary V, hidden H, the compute width a,
    the residual width r, the softcap's extra bytes a logit, and whether lm_head trains."""

    n: int
    v: int
    h: int
    a: int
    r: int
    soft: int
    head_trains: bool
    ce: int = 4          # bytes a logit cross-entropy computes in: 4 under autocast (fp32 op list), else ``a``
    rows: int = 1        # sequences in the micro-batch

    @property
    def count(self) -> int:
        return self.n * self.v


def _full(z: Sizes, shifted: int = 0) -> LossHead:
    return LossHead((4 * z.count, f"4 B x logits ({z.count:,})"),
                    ((6 + shifted + z.soft) * z.count, f"{6 + shifted + z.soft} B x logits ({z.count:,})"),
                    ((8 + z.soft) * z.count, f"{8 + z.soft} B x logits ({z.count:,})"))


def _chunked(z: Sizes, compiled: bool = False) -> LossHead:
    chunk = -(-z.count // CHUNKS)
    if compiled:
        kept = (2 * z.count + 8 * z.n, f"2 B x logits ({z.count:,}) + 8 B x tokens ({z.n:,})")
        fwd = (4 * chunk, f"4 B x a chunk ({chunk:,})")
    else:
        kept = (4 * z.count, f"4 B x logits ({z.count:,})")
        fwd = (2 * z.count + 4 * chunk, f"2 B x logits ({z.count:,}) + 4 B x a chunk ({chunk:,})")
    return LossHead(kept, fwd, (8 * chunk, f"8 B x a chunk ({chunk:,})"))


def _liger(z: Sizes) -> LossHead:
    per_chunk = -(-z.n // -(-z.v // z.h))                # ceil(N / inc_factor), inc_factor = ceil(V / H)
    rows = min(1 << (per_chunk - 1).bit_length(), z.n)    # liger's next_power_of_2, at most N
    weight = z.r * z.v * z.h if z.head_trains else 0
    kept = (z.r * z.n * z.h + weight + 4 * z.n, f"{z.r} B x grad_input ({z.n * z.h:,})" + (
        f" + {z.r} B x lm_head's gradient ({z.v * z.h:,})" if weight else "") + f" + 4 B x tokens ({z.n:,})")
    fwd = (z.a * rows * (z.v + z.h) + z.n, f"{z.a} B x a logits chunk and its input ({rows * (z.v + z.h):,}) + "
                                           f"1 B x tokens ({z.n:,})")
    return LossHead(kept, fwd, (0, "nothing: the gradients were made in forward"))


def _cce(z: Sizes) -> LossHead:
    weight = z.a * z.v * z.h if z.head_trains else 0
    return LossHead((8 * z.n + 4 * z.v, f"8 B x tokens ({z.n:,}) + 4 B x vocabulary ({z.v:,})"),
                    (0, "no logits: tiles in on-chip memory"),
                    (z.a * z.n * z.h + weight, f"{z.a} B x the hidden states' gradient ({z.n * z.h:,})"
                     + (f" + {z.a} B x the classifier's ({z.v * z.h:,})" if weight else "")))


def _trl(z: Sizes) -> LossHead:
    tile = min(z.n, TRL_TILE[0]) * TRL_TILE[1]
    weight = 4 * z.v * z.h if z.head_trains else 0
    return LossHead((z.a * z.n * z.h + 4 * z.n, f"{z.a} B x a copy of the hidden states ({z.n * z.h:,}) + 4 B x "
                                                f"tokens ({z.n:,})"),
                    (z.a * tile, f"{z.a} B x a tile ({tile:,})"),
                    (4 * z.n * z.h + weight + z.a * tile, f"4 B x the hidden states' gradient ({z.n * z.h:,})"
                     + (f" + 4 B x lm_head's ({z.v * z.h:,})" if weight else "") + f" + {z.a} B x a tile ({tile:,})"))


def _openrlhf(z: Sizes) -> LossHead:
    return LossHead((4 * z.count, f"4 B x fp32 logits ({z.count:,})"),
                    ((2 + z.soft) * z.count, f"{2 + z.soft} B x 16-bit logits until the cast ({z.count:,})"),
                    (6 * z.count, f"4 + 2 B x the logits' fp32 and 16-bit gradients ({z.count:,})"))


def _verl(z: Sizes, entropy: bool = False) -> LossHead:
    kept = ((2 + z.soft) * z.count, f"{2 + z.soft} B x 16-bit logits ({z.count:,})")
    if not entropy:
        return LossHead(kept, (0, "nothing: log-probs per token"), (0, "nothing: the gradient written in place"))
    return LossHead(kept, (0, "nothing: log-probs and entropy per token"),
                    (4 * z.count, f"2 + 2 B x the cross-entropy's and the entropy's 16-bit gradients ({z.count:,})"))


def _litgpt(z: Sizes, sliced: bool = False) -> LossHead:
    """LitGPT's logits held whole and one log-softmax a chunk kept (the module docstring); ``chunk``:
    128 positions of every row (the lm_head's chunks) or 128 rows of the flattened logits;
    ``sliced``: full.py's reshaped slice, a copy of the logits where there are several rows."""
    chunk = min(z.count, LITGPT_CHUNK * z.v * z.rows)
    kept = ((z.a + z.ce) * z.count, f"{z.a} + {z.ce} B x logits ({z.count:,}): the held logits and each chunk's "
                                    "log-softmax")
    parts = [(z.a * z.count, f"{z.a} B x logits ({z.count:,}): the reshaped slice's copy")] if sliced and z.rows > 1 \
        else []
    parts += [(z.ce * chunk, f"{z.ce} B x a chunk ({chunk:,}): its upcast")] if z.ce != z.a else []
    forward = (sum(b for b, _ in parts), " + ".join(w for _, w in parts))
    return LossHead(kept, forward, (2 * z.ce * chunk, f"2 x {z.ce} B x a chunk ({chunk:,}): the log-softmax's "
                                                       "gradient and the chunk's"))


def _none(z: Sizes) -> LossHead:
    return LossHead((0, "none"), (0, "none"), (0, "none"))


# Plan.loss -> its head (the module docstring says what each computes and where it was read).
HEADS = {"full": _full, "full-4.48": lambda z: _full(z, shifted=4),    # the shifted fp32 copy, gone in 4.49
         "chunked": _chunked, "chunked-compiled": lambda z: _chunked(z, compiled=True),
         "liger": _liger, "cce": _cce, "trl": _trl, "openrlhf": _openrlhf, "none": _none,
         "verl": _verl, "verl-entropy": lambda z: _verl(z, entropy=True), "litgpt": lambda z: _litgpt(z, sliced=True),
         "litgpt-chunked": _litgpt, "litgpt-pretrain": _litgpt}


def loss_head(plan: Plan) -> LossHead:
    m, w = plan.model, widths(plan)
    return HEADS[plan.loss](Sizes(plan.rows * plan.seq_len, m.vocab_size, m.hidden_size, w.a, w.r,
                                  2 if m.block.logit_softcap else 0, not plan.lora_rank,
                                  4 if plan.weights_dtype == "float32" else w.a, plan.rows))


SOURCE = ("memory/loss.py (transformers 5.24, torchtune 0.6.1, liger-kernel 0.8.5, cut-cross-entropy 25.1.1, TRL 1.16, "
          "LitGPT 0.5.13)")


def loss_component(plan: Plan, when: str) -> Component:
    """The loss at its peak in forward ("forward") or at the start of backward ("backward")."""
    head = loss_head(plan)
    extra = head.forward if when == "forward" else head.backward
    formula = head.kept[1] + (f" + {extra[1]}" if extra[0] else "")
    return Component(f"logits + loss ({when})", head.kept[0] + extra[0], f"{WORDS[plan.loss]}: {formula}", SOURCE)


def into_lm_head(plan: Plan) -> Component:
    """What the loss's backward hands lm_head's, alive while lm_head's gradient is made: the 16-bit
    logits' gradient (2 B a logit) after a whole-logits cross-entropy, else the loss's own
    backward tensors. The replays allocate it (``runtimes/torch/step.py``), the analytic moment at
    the first gradient hook counts it."""
    logits = plan.rows * plan.seq_len * plan.model.vocab_size
    if plan.loss in ("full", "full-4.48"):
        return Component("logits' gradient (16-bit)", 2 * logits, f"2 B x logits ({logits:,})", SOURCE)
    size, words = loss_head(plan).backward
    return Component("loss's gradient into lm_head", size, f"{WORDS[plan.loss]}: {words}", SOURCE)
