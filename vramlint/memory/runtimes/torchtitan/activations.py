"""What torchtitan's llama3 block keeps for backward, per token, under each activation-checkpointing
policy; recorded on the CPU by dev/torchtitan_block.py (torchtitan 0.2.2's block in bf16, its
policies, torch 2.13), equal to these counts at every shape recorded. With h the width, k the
key/value width (kv heads x head_dim), f the FFN width, a the heads, in bf16 (2 B):

- **none**: 24h + 4k + 8f + 4a + 8 B: the norms' fp32 copies and outputs, the linears' inputs, RoPE's
  fp32 complex q and k, SDPA's q, k, v, output and logsumexp (fp32 per head), the FFN's w1, w3,
  silu and product.
- **full** (``checkpoint_wrapper`` per block): the block's input alone, 2h.
- **op** (per-op selective, ``_op_sac_save_list``): the input and the outputs of the saved ops —
  every other mm (wq, wv, w1, w2 of wq wk wv wo w1 w3 w2) and SDPA (output + logsumexp):
  2h + 2(h + k + h + f + h) + 4a.
- **every:N** (selective per layer): every N-th block fully checkpointed, the others keep all.

Under tensor parallelism with sequence parallel (torchtitan's plan), what a block receives and
returns is split over the TP ranks (Shard(1)), and so are the norms; the colwise linears' outputs,
attention and the FFN's inner tensors are each rank's heads and columns; the linears' inputs are
the all-gathered, whole sequence (2h each); a rowwise linear's mm output is its whole-sequence
partial sum (2h) before the reduce-scatter, whose output (2h / t) is saved too. Context parallelism
is the plan's sequence already (each rank's seq / cp tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.plan import Plan

TRACED = "dev/torchtitan_block.py: torchtitan 0.2.2 llama3 block and AC policies, recorded on the CPU (torch 2.13)"


@dataclass(frozen=True)
class Widths:
    h: int
    k: int
    f: int
    a: int
    t: int
    c: int                         # bytes of a compute element (2: bf16)
    q: int = 0                     # the query width, heads x head_dim (qwen3's differs from h); 0: h
    r: int = 0                     # the RoPE cache rows the block saves, bytes a token (0.2.2 llama3: none)
    kv: int = 0                    # 0.3.0 qwen3: key/value heads, whose q / k norms keep fp32 copies
    qk: bool = False


def widths(plan: Plan) -> Widths:
    m, par = plan.model, plan.parallelism
    att, mlp = m.layers[0].attention, m.layers[0].mlp
    return Widths(m.hidden_size, att.num_kv_heads * att.head_dim, mlp.intermediate, att.num_heads,
                  plan.tensor_parallel, 4 if plan.precision == "fp32" else 2, att.num_heads * att.head_dim,
                  par.rope_saved, att.num_kv_heads, par.qk_norm)


def none(w: Widths) -> int:
    """Everything a block keeps without checkpointing (traced at TP 1; split as the module says):
    the two norms' fp32 input and output copies and rsqrt (8h + 4 each), the linears' inputs (2 x
    2h), attention's q, k, v and output and logsumexp, the FFN's w1, w3, silu and product (8f); in
    the RoPE cache rows it saves (``r``: 0.3.0's gathered per token, 0.2.2 qwen3's bf16 cos and sin)
    and qwen3's q / k norms' fp32 copies and rsqrt per head (8q + 4a + 8k + 4kv)."""
    c, q = w.c, w.q or w.h
    norms = 8 * q + 4 * w.a + 8 * w.k + 4 * w.kv if w.qk else 0
    split = c * (8 * w.h + 2 * q + 2 * w.k + 4 * w.f) + 4 * w.a + 8 + norms
    whole = 2 * c * w.h + w.r                 # the two linear inputs (all-gathered under TP), the RoPE rows
    return whole + -(-split // w.t)


def full(w: Widths) -> int:
    """A fully checkpointed block: its input, sequence-split under TP."""
    return -(-w.c * w.h // w.t)


def op(w: Widths) -> int:
    """Per-op selective checkpointing: the input, the saved mm outputs and SDPA's."""
    q = w.q or w.h
    if w.t == 1:
        return w.c * (2 * w.h + 2 * q + w.k + w.f) + 4 * w.a
    split = w.c * (w.h + q + w.k + q + w.f) + 4 * w.a       # input, wq, wv, SDPA out, w1 (+ logsumexp)
    scattered = 2 * w.c * w.h                              # the two reduce-scatter outputs, split
    return -(-(split + scattered) // w.t) + w.c * w.h      # + w2's whole-sequence partial sum


def op_fused(w: Widths, collectives: bool) -> int:
    """torchtitan 0.3.0's per-op selective checkpointing (distributed/activation_checkpoint.py:243-276)
    over its block of five matmuls, the fused QKV projection the first: every other one saved (wqkv,
    w1, w2), with attention's output and logsumexp and the block's input. Under TP the input is
    split, the colwise outputs are each rank's heads and columns, w2's is its whole-sequence partial
    sum; the reduce-scatters' outputs are saved only where they are functional collectives (the
    DTensor backends), not spmd_types' c10d calls (``collectives``)."""
    q = w.q or w.h
    split = w.c * (w.h + q + 2 * w.k + q + w.f) + 4 * w.a       # input, wqkv, attention out (+ logsumexp), w1
    if w.t == 1:
        return split + w.c * w.h                                # + w2's output
    scattered = 2 * w.c * w.h if collectives else 0
    return -(-(split + scattered) // w.t) + w.c * w.h


def kept_per_token(plan: Plan, layers: int) -> tuple[int, str]:
    """Bytes per token the ``layers`` blocks of a stage keep, and the formula in words."""
    w, mode = widths(plan), plan.parallelism.checkpointing
    if mode.startswith("every:"):
        n = int(mode.partition(":")[2] or 1)
        wrapped = layers // n if n else layers
        total = wrapped * full(w) + (layers - wrapped) * none(w)
        return total, f"{wrapped} blocks x {full(w)} B (checkpointed) + {layers - wrapped} x {none(w):,} B (all kept)"
    par = plan.parallelism
    if mode == "op" and par.fused_qkv:
        per = op_fused(w, par.saved_collectives)
        return per * layers, f"{per:,} B/token x {layers} blocks (op, fused QKV)"
    per = {"full": full, "op": op, "none": none}.get(mode, op)(w)
    return per * layers, f"{per:,} B/token x {layers} blocks ({mode})"


def recomputed(plan: Plan) -> int:
    """One block rebuilt in backward under checkpointing: what it keeps without it."""
    return none(widths(plan))
