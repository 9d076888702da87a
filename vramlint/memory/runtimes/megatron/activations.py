"""What a Megatron GPT layer keeps for backward, per token, under each recompute policy.

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", Table 2)
count a GPT-3 layer's tensors; this is their count, term by term, for the layer Megatron-LM
core_v0.19.0 builds with Transformer Engine (fused / flash attention: no s x s scores are saved),
with grouped query attention, SwiGLU and dropout as the arguments state. With c the compute
element (2 B under bf16 / fp16), h the width, q the query width (heads x kv_channels), k the key /
value width (query groups x kv_channels), f the FFN width, a the heads:

- **sequence part** (split over the TP ranks under sequence parallelism, whole without it): the two
  norms' inputs and outputs (the QKV and FC1 inputs), 4ch, and a 1-byte dropout mask after
  attention and after the MLP where --hidden-dropout > 0, 2h;
- **head part** (each TP rank's heads and columns): q, k and v (cq + 2ck), the attention output
  (the projection's input, cq), the softmax's log-sum-exp (4a, fp32 per head), and the MLP's inner
  tensors: FC1's output and the activation's (SwiGLU 2cf + cf, GELU cf + cf). An unfused attention
  (``--transformer-impl local``, ``--attention-backend unfused``) keeps its s x s scores instead of
  the log-sum-exp: the softmax, its dropout mask and its dropped-out copy, 5as (4as without
  attention dropout), Korthikanti's attention term.

For GPT-3's layer (q = k = h, f = 4h, GELU, dropout, c = 2) that is ``10 + 24/t`` sbh without SP and
``34/t`` with it, the paper's numbers and Megatron's theoretical_memory_usage's (its
``18 + 4·ffn/h`` with SP and selective recompute, which also drops the 4a: tests/test_megatron.py
runs it on the same arguments).

Recompute (megatron/core/recompute.py, transformer_layer.py): **selective** drops what the named
modules rebuild — core_attn the log-sum-exp or the scores (q, k, v and the output stay: the checkpoint's inputs
and the projection's input), mlp the MLP's inner tensors, layernorm the norms' outputs; **full
uniform N** keeps each N-layer chunk's input alone (ch, sequence part) and rebuilds one chunk in
backward; **full block N** keeps the first N layers' inputs alone and everything of the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.plan import Plan

SOURCE = ("Korthikanti et al. 2022 Table 2, term by term for Megatron-LM core_v0.19.0's TE layer "
          "(fused attention, GQA, SwiGLU, --hidden-dropout)")


@dataclass(frozen=True)
class Widths:
    h: int
    q: int
    k: int
    f: int
    a: int
    gated: bool
    t: int
    sp: bool
    mask: int                      # bytes of a dropout mask element (0 without hidden dropout)
    c: int
    scores: int                    # bytes per score an unfused attention keeps, per head and key (0: fused)
    keys: int                      # the keys each query attends (the rank's sequence)


def widths(plan: Plan) -> Widths:
    m = plan.model
    att, mlp = m.layers[0].attention, m.layers[0].mlp
    par = plan.parallelism
    return Widths(m.hidden_size, att.num_heads * att.head_dim, att.num_kv_heads * att.head_dim, mlp.intermediate,
                  att.num_heads, mlp.kind == "gated", plan.tensor_parallel, par.sequence_parallel,
                  1 if par.dropout else 0, 4 if plan.precision == "fp32" else 2, par.scores, plan.seq_len)


def _sequence(w: Widths, bytes_: int) -> int:
    """A sequence-part tensor's bytes on one rank: split under sequence parallelism."""
    return -(-bytes_ // w.t) if w.sp else bytes_


def _head(w: Widths, bytes_: int) -> int:
    return -(-bytes_ // w.t)


def layer(w: Widths, dropped: tuple[str, ...] = ()) -> int:
    """Bytes per token one layer keeps, less what the selective modules in ``dropped`` rebuild."""
    norms_out = 0 if "layernorm" in dropped else 2 * w.c * w.h
    sequence = 2 * w.c * w.h + norms_out + 2 * w.mask * w.h
    inner = 0 if "mlp" in dropped else (3 if w.gated else 2) * w.c * w.f
    core = 0 if "core_attn" in dropped else (w.scores * w.a * w.keys if w.scores else 4 * w.a)
    heads = 2 * w.c * w.q + 2 * w.c * w.k + inner + core
    return _sequence(w, sequence) + _head(w, heads)


def chunk_input(w: Widths) -> int:
    """A fully recomputed chunk's saved input: the hidden states, sequence-split under SP."""
    return _sequence(w, w.c * w.h)


def kept_per_token(plan: Plan, layers: int) -> tuple[int, str]:
    """Bytes per token the ``layers`` layers of one model chunk keep, and the formula in words."""
    w, mode = widths(plan), plan.parallelism.checkpointing
    policy, _, arg = mode.partition(":")
    if policy == "uniform":
        n = int(arg)
        chunks = -(-layers // n)
        return chunks * chunk_input(w), f"{chunks} chunk input(s) x {chunk_input(w):,} B (full, uniform {n})"
    if policy == "block":
        n = min(int(arg), layers)
        rest = layers - n
        return (n * chunk_input(w) + rest * layer(w),
                f"{n} x {chunk_input(w):,} B (recomputed) + {rest} x {layer(w):,} B (kept; full, block)")
    dropped = tuple(arg.split(",")) if policy == "selective" else ()
    per = layer(w, dropped)
    return per * layers, f"{per:,} B/token x {layers} layers ({mode})"


def rebuilt(plan: Plan) -> int:
    """Bytes per token a full recompute rebuilds at once in backward: one chunk's layers."""
    policy, _, arg = plan.parallelism.checkpointing.partition(":")
    n = int(arg) if policy == "uniform" else 1
    return n * layer(widths(plan))


def embedding_mask(plan: Plan) -> int:
    """The embedding's dropout mask per token (the first stage), sequence-split under SP."""
    w = widths(plan)
    return _sequence(w, w.mask * w.h)


def head_input(plan: Plan) -> int:
    """The final norm's input and output (the output layer's input) per token, sequence-split under SP."""
    w = widths(plan)
    return _sequence(w, 2 * w.c * w.h)
