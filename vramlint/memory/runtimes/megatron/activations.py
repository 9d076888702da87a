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
  the log-sum-exp: the softmax, its dropout mask and its dropped-out copy, 5as, Korthikanti's
  attention term (2as without attention dropout: torch's dropout at p = 0 returns the softmax itself).

For GPT-3's layer (q = k = h, f = 4h, GELU, dropout, c = 2) that is ``10 + 24/t`` sbh without SP and
``34/t`` with it, the paper's numbers and Megatron's theoretical_memory_usage's (its
``18 + 4·ffn/h`` with SP and selective recompute, which also drops the 4a: tests/test_megatron.py
runs it on the same arguments).

An **MoE layer** (moe_layer.py, token_dispatcher.py, experts.py TEGroupedMLP, router.py) keeps,
in place of the MLP's inner tensors, per token of the rank (the sequence part's tokens: MoE under TP
runs with sequence parallelism), with E experts, top-k routing, one expert's FFN width e and ETP:

- **the routed tokens**: the rank's experts receive k x ETP of its tokens when the router is
  balanced (each of the EP ranks sends k per token over E / EP experts apiece; the expert TP group
  all-gathers them), ``capacity`` x that at most under --moe-expert-capacity-factor; each keeps its
  FC1 input (ch: the dispatched tokens), what the weighted activation keeps (``layouts/megatron.
  expert_activation``: the fused SwiGLU FC1's output and its own, 2ce/ETP + ce/ETP; a plain GELU or
  ReLU² its input or output, its output and the weighted cast FC2 reads, 3ce/ETP; 5ce/ETP unfused
  SwiGLU), and its routing probability (4 B, fp32, for the weighted activation's backward);
- **the router**: the top-k indices and the permutation's sorted indices (int64, 8k each), the top-k
  softmax (fp32, 4k), the routing map (1 B an expert), and with --moe-aux-loss-coeff > 0 the full
  fp32 softmax the load-balancing loss is made of (4E);
- **shared experts**: a dense SwiGLU MLP of the shared width, TP-split as the dense one (3cs/t).

A **multi-latent attention** layer (multi_latent_attention.py, MLASelfAttention with the TE spec of
gpt_layer_specs.py:244-310, --qk-layernorm: the latent norms fused into the up-projections' TE
LayerNormColumnParallelLinear) keeps, with the latent widths r_q (--q-lora-rank), r_kv
(--kv-lora-rank) and the rope width d_r: in the sequence part (the down-projections are duplicated
TELinears on the rank's own tokens) the q latent, the up-projection's input, and its normed copy
(2c·r_q), the kv latent with the rope key it is split from (the up-projection's input is a view of
the down-projection's whole output, c·(r_kv + d_r)) and its normed copy (c·r_kv); in the head part
the query and key (n·(d_nope + d_r) each: the rope key broadcast over the heads), the value and the
output (n·d_v each) in place of GQA's q, k, v and output; the rope keeps cos / sin only. Selective
**mla_up_proj** (CheckpointWithoutOutput around the up-projections and rope) frees the query, key and
value once the attention has run and keeps the checkpoint's inputs alone: the two latents (c·r_q,
c·(r_kv + d_r)) and, under sequence parallelism with TP > 1, the rope key gathered over the whole
sequence (c·d_r a token on every rank).

The permutation and the all-to-all keep no tensor of their own for backward (index_select and the
collective's autograd functions save indices or nothing); their buffers are the dispatch moment's
(``dispatch_staging``).

A **hybrid** stack's layer (megatron/core/models/hybrid, ``models/architectures.megatron_hybrid``) is
one sub-block: self-attention alone, an MLP or MoE alone, or a **Mamba-2 mixer** (ssm/mamba_layer.py,
mamba_mixer.py ``_ssm_training``: mamba_ssm's ``mamba_split_conv1d_scan_combined``, its memory-efficient
path, then the gated RMSNorm and out_proj). Each sub-block keeps its own norm's input and output and
its dropout mask in the sequence part (a GPT layer is two); a Mamba mixer keeps in the head part,
with d_inner i, g groups of state n and m heads (P = 2i + 2gn + m, in_proj's output): the
combined kernel's input (its contiguous copy of zxBCdt, cP) and its out_x (the scan's output before
the z gate, ci: the kernel's save_for_backward; the convolution's output, dt and the chunk states it
recomputes), the gated norm's input and its reciprocal std (ci + 4g, fp32 a group) and out_proj's
input (ci): c(P + 3i) + 4g.

Recompute (megatron/core/recompute.py, transformer_layer.py): **selective** drops what the named
modules rebuild — core_attn the log-sum-exp or the scores (q, k, v and the output stay: the checkpoint's inputs
and the projection's input), mlp the MLP's inner tensors (dense layers only: transformer_layer.py:512-514),
layernorm the norms' outputs, moe the whole MoE layer but its input, moe_act the experts'
activation output, shared_experts the shared experts' inner tensors; **full uniform N** keeps each
N-layer chunk's input alone (ch, sequence part) and rebuilds one chunk in backward; **full block N**
keeps the first N layers' inputs alone and everything of the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.models.shape import LINEAR, MLA, NONE, Attention, Layer, Ssm
from vramlint.plan import Plan

SOURCE = ("Korthikanti et al. 2022 Table 2, term by term for Megatron-LM core_v0.19.0's TE layer "
          "(fused attention, GQA, SwiGLU, --hidden-dropout)")


@dataclass(frozen=True)
class Experts:
    """An MoE layer's routed side on one rank (``Plan.parallelism``'s expert grid)."""

    count: int                     # E
    top_k: int
    width: int                     # one expert's FFN width
    shared: int                    # the shared experts' FFN width (0: none)
    etp: int
    ep: int
    capacity: float                # the received tokens over the balanced share (1: dropless, balanced)
    aux_loss: bool
    dispatcher: str
    gated: bool = True             # gated experts and shared experts (SwiGLU: FC1 2w, its output w); plain (GELU) w, w
    kept: int = 3                  # widths w a routed token keeps through the weighted activation (expert_act)


@dataclass(frozen=True)
class Latent:
    """Multi-latent attention's low-rank side: the q latent (0: the query projected from the hidden
    states), the kv latent and the rope key split from the same projection."""

    q: int
    kv: int
    rope: int


@dataclass(frozen=True)
class Widths:
    h: int
    q: int                         # the query (and under MLA the key: the rope key broadcast) per head x heads
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
    experts: Experts | None = None     # an MoE layer's routed side; None: a dense MLP of width f
    v: int = 0                     # the value and the attention output (0: k and q, as without MLA)
    latent: Latent | None = None   # multi-latent attention's latents; None: GQA
    attends: bool = True           # the layer has self-attention (a hybrid stack's Mamba / MLP / MoE layer: no)
    mlp: bool = True               # the layer has an MLP or MoE (a hybrid stack's Mamba / attention layer: no)
    ssm: Ssm | None = None         # a Mamba-2 mixer (a hybrid stack's M layer)


def _attention(att: Attention) -> tuple[int, int, int, Latent | None]:
    """The query, key and value widths an attention's kind gives ``Widths`` (v 0: the key's), and its
    latents: under MLA the key is as wide as the query (the rope key broadcast over the heads) and
    the value and output v_head_dim a head."""
    if att.kind != MLA:
        return att.num_heads * att.head_dim, att.num_kv_heads * att.head_dim, 0, None
    q = att.num_heads * att.head_dim
    return q, q, att.num_heads * att.v_head_dim, Latent(att.q_latent_dim, att.kv_latent_dim - att.rope_dim,
                                                       att.rope_dim)


def widths(plan: Plan, index: int = 0, of: Layer | None = None) -> Widths:
    """Layer ``index``'s widths (or those of the layer ``of``: a multi-token prediction depth's)."""
    m = plan.model
    one = of or m.layers[index]
    att, mlp = one.attention, one.mlp
    par = plan.parallelism
    experts = None
    if mlp.kind == "moe":
        experts = Experts(mlp.experts, mlp.experts_per_token, mlp.intermediate, mlp.shared_intermediate,
                          par.expert_tp(plan.tensor_parallel), par.expert, par.capacity, par.aux_loss,
                          par.dispatcher, mlp.gated_experts, par.expert_act)
    q, k, v, latent = _attention(att)
    return Widths(m.hidden_size, q, k, mlp.intermediate, att.num_heads, mlp.kind == "gated" or
                  (mlp.kind == "moe" and mlp.gated_experts),
                  plan.tensor_parallel, par.sequence_parallel, 1 if par.dropout else 0,
                  4 if plan.precision == "fp32" else 2, par.scores, plan.seq_len, experts, v, latent,
                  att.kind not in (LINEAR, NONE), mlp.kind != "none", one.ssm)


def _sequence(w: Widths, bytes_: int) -> int:
    """A sequence-part tensor's bytes on one rank: split under sequence parallelism."""
    return -(-bytes_ // w.t) if w.sp else bytes_


def _head(w: Widths, bytes_: int) -> int:
    return -(-bytes_ // w.t)


def _received(e: Experts) -> float:
    """Tokens a rank's experts receive per token of the rank: k x ETP, balanced, x the capacity factor."""
    return e.top_k * e.etp * e.capacity


def _moe(w: Widths, dropped: tuple[str, ...]) -> int:
    """An MoE layer's routed side, router and shared experts, per token of the micro-batch (the
    rank's own tokens are the sequence part's)."""
    e = w.experts
    if "moe" in dropped:
        return 0
    fc1 = 3 if e.gated else 2                   # a dense MLP's: FC1's output and the activation's (shared experts)
    inner = -(-(e.kept - ("moe_act" in dropped)) * w.c * e.width // e.etp)
    routed = round(_received(e) * (w.c * w.h + inner + 4))
    router = 20 * e.top_k + e.count + (4 * e.count if e.aux_loss else 0)
    shared = 0 if "shared_experts" in dropped else _head(w, fc1 * w.c * e.shared)
    return _sequence(w, routed + router) + shared


def _latents(w: Widths, dropped: tuple[str, ...]) -> tuple[int, int]:
    """MLA's latents a token keeps: in the sequence part, and the rope key gathered whole (under
    sequence parallelism, TP > 1) that mla_up_proj's checkpoint keeps on every rank."""
    lat = w.latent
    if lat is None:
        return 0, 0
    if "mla_up_proj" in dropped:
        gathered = w.c * lat.rope if w.sp and w.t > 1 else 0
        return w.c * (lat.q + lat.kv + lat.rope), gathered
    return w.c * (2 * lat.q + 2 * lat.kv + lat.rope), 0


def _attended(w: Widths, dropped: tuple[str, ...]) -> int:
    """Self-attention's head part: q, k, v, the output, and the log-sum-exp or the scores."""
    if not w.attends:
        return 0
    core = 0 if "core_attn" in dropped else (w.scores * w.a * w.keys if w.scores else 4 * w.a)
    qkv = 0 if w.latent and "mla_up_proj" in dropped else w.c * (w.q + w.k + (w.v or w.k))
    return qkv + w.c * (w.v or w.q) + core


def _mixer(ssm: Ssm | None, c: int) -> int:
    """A Mamba-2 mixer's head part: c(P + 3i) + 4g (the module docstring)."""
    return 0 if ssm is None else c * (ssm.projection + 3 * ssm.inner) + 4 * ssm.groups


def layer(w: Widths, dropped: tuple[str, ...] = ()) -> int:
    """Bytes per token one layer keeps, less what the selective modules in ``dropped`` rebuild."""
    blocks = w.attends + (w.ssm is not None) + w.mlp      # sub-blocks: a norm's input and output, a mask each
    norms_out = 0 if "layernorm" in dropped else blocks * w.c * w.h
    latents, gathered = _latents(w, dropped)
    sequence = blocks * (w.c * w.h + w.mask * w.h) + norms_out + latents
    dense = 0 if w.experts or not w.mlp or "mlp" in dropped else (3 if w.gated else 2) * w.c * w.f
    heads = _attended(w, dropped) + _mixer(w.ssm, w.c) + dense
    return _sequence(w, sequence) + _head(w, heads) + gathered + (_moe(w, dropped) if w.experts else 0)


def dispatch_staging(plan: Plan) -> int:
    """Bytes per token of the micro-batch the token dispatcher holds beside the kept tensors while
    an MoE layer runs (its gradients on the way back alike): the alltoall / flex dispatchers the
    routed tokens before and after the all-to-all (2 x ch each), the allgather dispatcher the
    tokens of the EP x ETP group it gathers (ch x EP x ETP) and the routed ones it selects from
    them; 0 without MoE layers."""
    moe = next((i for i, layer_ in enumerate(plan.model.layers) if layer_.mlp.kind == "moe"), None)
    if moe is None:
        return 0
    w = widths(plan, moe)
    e = w.experts
    routed = _received(e) * w.c * w.h
    held = 2 * routed if e.dispatcher != "allgather" else e.ep * e.etp * w.c * w.h + routed
    return _sequence(w, round(held))


def _kinds(plan: Plan) -> tuple[int, ...]:
    """One layer index of each kind (``_kind``) the model has."""
    seen: dict[str, int] = {}
    for i in range(plan.model.num_layers):
        seen.setdefault(_kind(plan, i), i)
    return tuple(seen.values())


def chunk_input(w: Widths) -> int:
    """A fully recomputed chunk's saved input: the hidden states, sequence-split under SP."""
    return _sequence(w, w.c * w.h)


def _summed(plan: Plan, indices: tuple[int, ...], dropped: tuple[str, ...]) -> tuple[int, str]:
    """The layers' bytes per token, and in words: one count per layer kind."""
    per = [layer(widths(plan, i), dropped) for i in indices]
    kinds = {}
    for i, value in zip(indices, per):
        kinds.setdefault((_kind(plan, i), value), []).append(i)
    if len(kinds) == 1:
        return sum(per), f"{per[0]:,} B/token x {len(per)} layers" if per else "0 layers"
    return sum(per), " + ".join(f"{value:,} B/token x {len(ids)} {kind} layers" for (kind, value), ids in kinds.items())


def _kind(plan: Plan, index: int) -> str:
    """A layer's kind in words: MoE, dense (attention and MLP), or a hybrid stack's one sub-block."""
    layer_ = plan.model.layers[index]
    if layer_.ssm is not None:
        return "Mamba"
    if layer_.mlp.kind == "moe":
        return "MoE"
    return "MLP" if layer_.attention.kind == NONE else "attention" if layer_.mlp.kind == "none" else "dense"


def kept_per_token(plan: Plan, indices: tuple[int, ...]) -> tuple[int, str]:
    """Bytes per token the layers ``indices`` of one model chunk keep, and the formula in words."""
    w, mode = widths(plan), plan.parallelism.checkpointing
    policy, _, arg = mode.partition(":")
    if policy == "uniform":
        n = int(arg)
        chunks = -(-len(indices) // n)
        return chunks * chunk_input(w), f"{chunks} chunk input(s) x {chunk_input(w):,} B (full, uniform {n})"
    if policy == "block":
        n = min(int(arg), len(indices))
        rest, words = _summed(plan, indices[n:], ())
        return n * chunk_input(w) + rest, f"{n} x {chunk_input(w):,} B (recomputed) + {words} (kept; full, block)"
    dropped = tuple(arg.split(",")) if policy == "selective" else ()
    per, words = _summed(plan, indices, dropped)
    return per, f"{words} ({mode})"


def mtp_kept(plan: Plan) -> tuple[int, str]:
    """Bytes per token the multi-token prediction depths keep on the last stage, and in words
    (multi_token_prediction.py:1056-1232): each depth its shifted tokens' embedding (enorm's input,
    ch), the concatenation eh_proj reads (2ch), its layers' own tensors under the job's recompute
    (full: the checkpointed depth's inputs, 2ch) and its final norm's input (ch), all sequence part;
    and the main and every depth's hidden states concatenated (torch.cat, (1 + D) ch: the output
    layer's inputs are views of it)."""
    m = plan.model
    if not m.mtp_depths:
        return 0, ""
    w = widths(plan)
    policy, _, arg = plan.parallelism.checkpointing.partition(":")
    dropped = tuple(arg.split(",")) if policy == "selective" else ()
    if policy in ("uniform", "block"):
        depth = _sequence(w, 2 * w.c * w.h)
    else:
        depth = _sequence(w, 4 * w.c * w.h) + sum(layer(widths(plan, of=one), dropped) for one in m.mtp)
    joined = _sequence(w, (1 + m.mtp_depths) * w.c * w.h)
    return m.mtp_depths * depth + joined, (f"{m.mtp_depths} depth(s) x {depth:,} B + the concatenated hidden "
                                          f"states {joined:,} B")


def rebuilt(plan: Plan) -> int:
    """Bytes per token a full recompute rebuilds at once in backward: one chunk's layers (of the
    largest kind)."""
    policy, _, arg = plan.parallelism.checkpointing.partition(":")
    n = int(arg) if policy == "uniform" else 1
    return n * max(layer(widths(plan, i)) for i in _kinds(plan))


def embedding_mask(plan: Plan) -> int:
    """The embedding's dropout mask per token (the first stage), sequence-split under SP."""
    w = widths(plan)
    return _sequence(w, w.mask * w.h)


def head_input(plan: Plan) -> int:
    """The final norm's input and output (the output layer's input) per token, sequence-split under SP."""
    w = widths(plan)
    return _sequence(w, 2 * w.c * w.h)
