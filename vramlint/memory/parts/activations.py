"""Activations: the tensors autograd saves for the backward pass, counted per token.

Instead of a one-size constant (Korthikanti et al. 2022, Table 2: 34·s·b·h per GPT layer), each
block is walked op by op as transformers runs it, counting what PyTorch's autograd keeps — an op
saves an input only when the gradient of another input needs it (docs/reference.md section 3):

- HF ``RMSNorm``: ``x.to(fp32)`` (4h, kept by ``pow``), the normalised ``y`` in the input dtype
  (kept by ``weight * y``) and the product, kept by the linears it feeds.
- Norms that apply their weight in fp32 (gemma's ``y * (1 + w)``, olmo2's ``w * y``) keep 4h + 4h
  and cast the product back (a·h) for the linears; so do their q/k norms (4 + 4 per element).
- ``nn.LayerNorm`` keeps its input (once, when a parallel residual's two norms read the same
  tensor); the linears keep its output.
- SDPA / FlashAttention keeps q, k, v (after RoPE: new tensors; GQA keeps k, v at their own
  head count) and its output, which ``o_proj`` keeps too — unless RoPE ended in ``torch.cat``
  (or attention is eager): then the output is head-major and o_proj keeps the contiguous copy
  (``output_copied``; checked on H200: llama, qwen2, gemma2, mixtral, gpt2 keep one tensor,
  phi3 and pythia two). A fused qkv projection stays alive whole through the v view. Eager
  attention keeps every b·a·s² score: the softmax in fp32 plus its 16-bit cast (6 bytes each);
  Gemma-2's soft-capped scores keep tanh's output too (8: traced in transformers and LitGPT).
- Gated MLP: gate, up, act(gate) and the product (4·I); plain GELU MLP: fc output and GELU
  output (2·I); GPT-2's python tanh-GELU keeps five I-sized tensors — under autocast three of
  them in fp32, since autocast runs ``pow`` in fp32 and the chain after it stays fp32.
- MoE (transformers' grouped_mm experts): each routed copy of a token keeps its gathered input,
  the fused gate_up output, act, product and the expert output: k·(2h + 4·I_expert), in the
  weights' dtype — ``grouped_mm`` is not an autocast op, so under autocast the input is cast to
  the fp32 weights (``input.to(weight.dtype)``) and no 16-bit weight copy is made.
- Dropout in training keeps a 1-byte mask per element.
- torch.autocast over fp32 weights: the residual stream is fp32 (r = 4 bytes), linears cast their
  input to 16 bit (a = 2) and keep the cast — each linear its own, since autocast caches only
  casts of leaf tensors: q, k and v keep three casts of the normed input, gate and up two — and
  keep a 16-bit copy of their weight (cached: a leaf).

The language-model head: the 16-bit logits are upcast to fp32 for the loss (transformers
``ForCausalLMLoss``); ``log_softmax`` keeps its fp32 output (4 B per logit) for backward. At the
loss in forward the 16-bit logits, the fp32 copy and the log-softmax output coexist
(2 + 4 + 4 B); at the start of backward the kept output, the incoming gradient and the outgoing
gradient (4 + 4 + 4 B). Gemma-2's final soft-capping keeps one more 16-bit tanh output.

Every count here was checked against H200 measurements (../shared/groundtruth) through the
allocator's ``memory_allocated`` after the forward pass, within 1-2 % per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramlint.models.shape import FULL, LINEAR, MLA, Block, Layer, ModelShape
from vramlint.memory.parts.adapters import lora_targets
from vramlint.plan import Plan



@dataclass(frozen=True)
class Widths:
    """Bytes per element: ``a`` for 16-bit compute tensors, ``r`` for the residual stream, ``o``
    for what a linear returns (``a``, except bitsandbytes' 4-bit linears, which compute in 16 bit
    and cast the output back to their input's dtype: the fp32 stream's under autocast)."""

    a: int
    r: int
    o: int


def widths(plan: Plan) -> Widths:
    if plan.precision == "fp32":
        return Widths(4, 4, 4)
    if plan.autocast:
        return Widths(2, 4, 4 if plan.quantized_base else 2)
    return Widths(2, 2, 2)


def _pre_norm(block: Block, h: int, w: Widths, frozen: bool, readers: int = 1,
              shared_input: bool = False) -> list[int]:
    """A norm whose output feeds ``readers`` linears: what it keeps, and the linears' input. They
    share one input tensor, except under autocast, where each linear casts the fp32 norm output to
    16 bit itself and keeps its own cast (q, k and v: three; a fused qkv: one). ``shared_input``:
    a parallel-residual LayerNorm reads the tensor the first one already keeps."""
    if block.norm == "layer":
        kept = [] if shared_input else [w.r * h]       # nn.LayerNorm keeps its input
    elif block.norm == "fp32":
        kept = [4 * h] + ([] if frozen else [4 * h])   # fp32 input copy; the fp32 y the weight multiplies
    else:
        kept = [4 * h] + ([] if frozen else [w.r * h])  # fp32 copy (pow); y (weight * y)
    casts = readers if w.r != w.a else 1
    return kept + ([] if frozen else [w.a * h] * casts)  # the linears' input (frozen linears keep none)


def _readers(layer: Layer, block: Block, sublayer: int) -> int:
    """How many linears read a sublayer's normed input (each casts it under autocast)."""
    att, mlp = layer.attention, layer.mlp
    if sublayer == 0:
        if block.fused_qkv:
            return 1
        return 2 if att.kind in (MLA, LINEAR) else 3    # q_a/q and kv_a; in_proj_qkvz and in_proj_ba
    if mlp.kind == "moe":                                # the router (experts: grouped_mm, no cast)
        return 1 + (2 if mlp.shared_intermediate else 0)
    return 2 if mlp.kind == "gated" and not block.fused_gate_up else 1


def _post_norm(block: Block, h: int, w: Widths, frozen: bool) -> list[int]:
    y = 4 if block.norm == "fp32" else w.r
    return [4 * h] + ([] if frozen else [y * h])


def output_copied(block: Block, eager: bool) -> bool:
    """Whether ``attn_output.transpose(1, 2).contiguous()`` before o_proj copies. SDPA's (and
    FlashAttention's) output is laid out like q (flash-attn's ``empty_like(q)``): token-major when
    RoPE's elementwise ops kept q_proj's layout, so the transpose is already contiguous; head-major
    when RoPE ended in ``torch.cat``, or with eager attention (a matmul output) — then a copy."""
    return eager or block.rope_cat


def _attention(layer: Layer, block: Block, w: Widths, seq: int, eager: bool, repeats: bool = False,
               causal_mask: bool = False, copy_kept: bool = True) -> list[int]:
    """What the attention keeps. SDPA: q, k, v (new q and k after RoPE; v its own tensor or a view
    of the fused qkv) and its output (+ o_proj's contiguous copy, ``output_copied``). Eager
    (``eager_attention_forward``): the matmuls keep q, k and v — for grouped KV heads the
    ``repeat_kv`` copies, q-sized, instead of k and v — the fp32 softmax (its output) and its
    16-bit cast, b·heads·s² each (every score: the window is a mask), and o_proj the contiguous
    copy of the output; gpt-oss's sinks softmax stays in 16 bit (+ the max's int64 indices).
    ``repeats``: SDPA given repeat_kv's copies too (transformers before 4.54). ``causal_mask``: SDPA
    given transformers 4.53.1-4.57's built boolean mask, which it converts to an additive b × s × s
    one in the compute dtype (ATen ``convert_boolean_attn_mask``) and keeps for backward: s per
    token (traced on the CPU, 4.57.6 against 5.24.0: tests/data/tf457_*.json). ``copy_kept``: o_proj
    keeps that copy (it trains, or its adapter reads it); a frozen o_proj keeps no input."""
    att = layer.attention
    if att.kind == MLA:
        return _latent_attention(layer, w)
    q, kv = att.num_heads * att.head_dim, max(att.num_kv_heads, 1) * att.head_dim
    repeated = (eager or repeats) and att.num_kv_heads != att.num_heads
    # a kept view holds the fused output alive — unless it is fp32 (4-bit under autocast): then
    # attention keeps its own 16-bit casts of q, k and v
    fused = block.fused_qkv and (not block.rope or not repeated) and w.o == w.a
    tensors = [w.a * (q + 2 * kv)] if fused else []
    if block.qk_norm:
        y = 4 if block.norm == "fp32" else w.a          # the normalised q and k the weight multiplies
        tensors += [4 * q, y * q, 4 * kv, y * kv]       # fp32 copy + normalised q and k
    if block.rope or not fused:
        tensors += [w.a * q] + ([] if repeated else [w.a * kv])   # q and k: RoPE's or the projections'
    if repeated:
        tensors += [w.a * q, w.a * q]                    # repeat_kv copies of k and v
    elif not fused:
        tensors.append(w.a * kv)                         # v
    if not eager:
        mask = [w.a * seq] if causal_mask else []
        copies = 2 if output_copied(block, eager) and copy_kept else 1
        return tensors + mask + [w.a * q] * copies       # output (+ o_proj's copy)
    scores = att.num_heads * seq
    if block.attention_sinks:
        tensors += [w.a * att.num_heads * (seq + 1), 8 * att.num_heads]
    else:
        tensors += [4 * scores, w.a * scores]            # fp32 softmax, its 16-bit cast
    if block.score_softcap:
        tensors.append(w.a * scores)                     # tanh(scores / cap)'s output, kept for its backward
    return tensors + ([w.a * q] if copy_kept else [])     # o_proj's contiguous copy of the output


def _latent_attention(layer: Layer, w: Widths) -> list[int]:
    """DeepSeek's multi-head latent attention (``DeepseekV3Attention``): the q and kv latents pass
    RMSNorms (fp32 copy, y, the output q_b/kv_b keep); q and k are rebuilt by ``torch.cat`` of
    their nope and rope parts; v is a view of kv_b's output, which it keeps whole (nope + v per
    head). q/k and v head sizes differ, so SDPA runs the memory-efficient kernel, whose output is
    always token-major: o_proj keeps it without a copy."""
    att, linears = layer.attention, {name: (d_in, d_out) for name, d_in, d_out in layer.attention_linears}
    q, v = att.num_heads * att.head_dim, att.num_heads * att.v_head_dim
    latents = [linears["q_a"][1]] if "q_a" in linears else []
    latents.append(linears["kv_b"][0])
    norms = [size for d in latents for size in (4 * d, w.a * d, w.a * d)]
    return norms + [w.a * q, w.a * q, w.a * linears["kv_b"][1], w.a * v]


def _mlp(layer: Layer, block: Block, h: int, w: Widths, frozen: bool) -> list[int]:
    mlp = layer.mlp
    if mlp.kind == "moe":
        k, i = mlp.experts_per_token, mlp.intermediate
        e = w.r     # grouped_mm is no autocast op: the chain runs in the weights' dtype (fp32 under autocast)
        chain = 5 if block.act == "clamped_glu" else 2     # act(gate) and product; gpt-oss: five
        routed = [e * k * h, e * k * 2 * i] + [e * k * i] * chain + [e * k * h]
        shared = [w.a * mlp.shared_intermediate] * 4 if mlp.shared_intermediate else []
        if mlp.shared_gate:      # sigmoid(gate(x)) * shared_out keeps both factors
            shared += [w.a * h, w.a]
        router = [4 * h] if mlp.router_fp32 else []    # deepseek: F.linear on an fp32 copy of the input
        return router + [2 * mlp.experts, 4 * mlp.experts, 4 * mlp.experts] + routed + shared
    i = mlp.intermediate
    if mlp.kind == "gated":
        return [w.o * i] * (3 if frozen else 4)        # gate, up, act(gate), product (kept by down)
    if block.act == "gelu_new":
        if w.r == 4 and w.a == 2:   # autocast runs pow in fp32: x³ chain, tanh, 1+tanh in fp32
            return [4 * i, 4 * i, 2 * i, 4 * i, 2 * i]
        return [w.a * i] * 5
    return [w.o * i] * (1 if frozen else 2)


# The tensor each adapted linear reads, where several read one (16-bit adapters keep it once):
# the attention's normed input, the MLP's; None where attention keeps it anyway (o_proj's input,
# the attention output SDPA saves). Other linears read a tensor of their own.
SHARED_READS = {"q": "attention", "k": "attention", "v": "attention", "qkv": "attention", "q_a": "attention",
                "kv_a_proj_with_mqa": "attention", "in_proj_qkvz": "attention", "in_proj_ba": "attention",
                "o": None, "gate": "mlp", "up": "mlp", "gate_up": "mlp", "shared_gate": "mlp",
                "shared_up": "mlp", "shared_expert_gate": "mlp"}


def adapters_16bit(plan: Plan) -> bool:
    """PEFT keeps LoRA adapters in fp32 (``autocast_adapter_dtype``) unless the framework builds
    them in 16 bit (``Plan.adapter_dtype``: torchtune); DeepSpeed casts every parameter to the
    16-bit dtype, and FSDP's mixed precision computes them in it."""
    if plan.runtime == "fsdp" and plan.fsdp_version == 1 and plan.precision != "fp32":
        return False        # use_orig_params shows PEFT the fp32 adapter: it casts the input up (traced)
    return plan.runtime != "torch" or plan.adapter_dtype != "float32"


def _lora_inputs(layer: Layer, h: int, plan: Plan) -> list[int]:
    """With LoRA the frozen base linears (bitsandbytes' 4-bit ones too) keep no input, but lora_A
    keeps the one it reads (routed experts: not counted). fp32 adapters: PEFT casts each adapted
    linear's input to fp32 and lora_A keeps that copy; under autocast lora_A casts it back to 16
    bit and keeps that cast instead. 16-bit adapters read the linear's own input: kept once per
    tensor (q, k and v share the normed input), nothing for o_proj's (attention keeps it). With
    ``lora_dropout`` every adapter keeps its own dropout output and CUDA's bool mask (1 B)."""
    wanted = lora_targets(plan.lora_targets, plan.model)
    linears = {name: d_in for name, (d_in, _, copies) in layer.linears(h, plan.model.block).items()
               if name in wanted and copies == 1 and name != "router"}   # PEFT wraps the router's weight
    mask = 1 if plan.lora_dropout else 0
    padded = _zero_padded(layer, plan, wanted)
    dora = _dora_results(layer, h, plan)
    if not adapters_16bit(plan):
        cast = plan.autocast or plan.runtime == "fsdp"       # FSDP1's mixed precision runs under autocast too
        return [((2 if cast else 4) + mask) * d_in for d_in in linears.values()] + dora + padded
    if mask:
        return [(widths(plan).a + mask) * d_in for d_in in linears.values()] + padded
    reads: dict[str, int] = {}
    for name, d_in in linears.items():
        tensor = SHARED_READS.get(name, name)
        if tensor:
            reads[tensor] = d_in
    return [widths(plan).a * d_in for d_in in reads.values()] + dora + padded


def _zero_padded(layer: Layer, plan: Plan, wanted: set[str]) -> list[int]:
    """LitGPT's ``LoRAQKVLinear`` (litgpt 0.5.13 lora.py ``forward`` / ``zero_pad``): the adapted
    parts' B outputs, which ``index_copy`` keeps to spread them over the fused q, k, v width, and
    lora_A's output that lora_B keeps (r per enabled part); traced, dev/litgpt_block.py."""
    att = layer.attention
    if plan.model_code != "litgpt" or not plan.model.block.fused_qkv or att.kind == MLA:
        return []
    q, kv = att.num_heads * att.head_dim, max(att.num_kv_heads, 1) * att.head_dim
    parts = [size for name, size in (("q", q), ("k", kv), ("v", kv)) if name in wanted]
    a = widths(plan).a
    return [a * sum(parts), a * plan.lora_rank * len(parts)] if parts else []


def _dora_results(layer: Layer, h: int, plan: Plan) -> list[int]:
    """DoRA keeps, per adapted linear and token, the base output and the LoRA output it scales
    (peft 0.21.2 dora.py:132-166): 2 + 4 B a d_out element with fp32 adapters outside autocast,
    2 + 2 otherwise (recorded on the CPU, research features/scripts/peft_dora_lora.out)."""
    if not plan.dora:
        return []
    wanted = lora_targets(plan.lora_targets, plan.model)
    per = 6 if not adapters_16bit(plan) and not plan.autocast else 4
    return [per * d_out for name, (_, d_out, copies) in layer.linears(h, plan.model.block).items()
            if name in wanted and copies == 1 and name != "router"]


def dora_transient(plan: Plan) -> tuple[int, int]:
    """The weight norm DoRA computes in each adapted linear's forward, all alive at once for one
    layer at a time (an identity of d_in², B·A, the merged weight, its norm): about 7 x d_out·d_in
    bytes with 16-bit adapters (9 over a quantized base, dequantized), 18 x with fp32 adapters —
    measured on the CPU (peft_dora_lora.out); the largest adapted linear's: (bytes per weight
    element, its elements)."""
    if not plan.dora or not plan.lora_rank:
        return 0, 0
    wanted = lora_targets(plan.lora_targets, plan.model)
    per = 18 if not adapters_16bit(plan) else 9 if plan.quantized_base else 7
    return per, max((d_in * d_out for layer in plan.model.layers
                     for name, (d_in, d_out, copies) in layer.linears(plan.model.hidden_size, plan.model.block).items()
                     if name in wanted and copies == 1), default=0)


def tp_divisors(layer: Layer, plan: Plan) -> tuple[int, int]:
    """What tensor parallelism divides the layer's attention and its MLP by: TP where the plan
    splits their projections (``Plan.tp_divides``; a MoE layer's MLP is its experts), else 1."""
    return plan.tp_divides("attention"), plan.tp_divides("experts" if layer.mlp.kind == "moe" else "mlp")


def rank_local(layer: Layer, plan: Plan) -> Layer:
    """The layer as one tensor-parallel rank computes it, for the op-by-op forward (``nograd``):
    heads and the MLP's width divided (``tp_divisors``); a rank keeps at least one KV head
    (replicated below TP)."""
    att, mlp = layer.attention, layer.mlp
    heads, width = tp_divisors(layer, plan)
    if heads == width == 1:
        return layer
    kv = max(1, att.num_kv_heads // heads) if att.num_kv_heads else 0
    return replace(layer, attention=replace(att, num_heads=max(1, att.num_heads // heads), num_kv_heads=kv),
                   mlp=replace(mlp, intermediate=max(1, mlp.intermediate // width),
                               shared_intermediate=mlp.shared_intermediate // width))


MLP_LINEARS = frozenset({"gate", "up", "down", "gate_up", "shared_gate", "shared_up", "shared_down"})
NOT_4BIT = ("experts_", "router", "shared_expert_gate")      # fused 3-D experts and routers: no Linear4bit


def dequantized(layer: Layer, model: ModelShape, plan: Plan) -> list[int]:
    """QLoRA: the bytes of the 16-bit weight bitsandbytes' ``matmul_4bit`` dequantizes for a
    training-sized batch (``gemm_4bit``'s dequantize + F.linear fallback, in forward and again for
    the input's gradient), per sublayer (attention, MLP): its largest 4-bit linear's — an upper
    bound where a fused projection (phi3's gate_up) is wider than the output projection, whose
    backward runs first (none without 4-bit weights)."""
    if not plan.quantized_base:
        return [0, 0]
    parts = [0, 0]
    for name, (d_in, d_out, _) in layer.linears(model.hidden_size, model.block).items():
        if not name.startswith(NOT_4BIT):
            part = 1 if name in MLP_LINEARS else 0
            parts[part] = max(parts[part], 2 * d_in * d_out)
    return parts


def sublayer_tensors(layer: Layer, model: ModelShape, plan: Plan) -> list[list[int]]:
    """Bytes per token of every tensor one decoder layer keeps for backward, in forward order, by
    sublayer (attention with its norms, then the MLP with its norms and LoRA's input copies).
    Under tensor parallelism the attention's and the MLP's own tensors are split (heads and the
    intermediate width) where the projections are (``tp_divisors``: DeepSpeed AutoTP's nn.Linears,
    transformers' TP plans where they name them); the norms, the residual stream's dropout masks
    and LoRA's input copies stay whole on every rank (no sequence parallelism in either)."""
    w, block, h = widths(plan), model.block, model.hidden_size
    divisors = tp_divisors(layer, plan)
    frozen = plan.lora_rank > 0
    parts: list[list[int]] = []
    sublayers = [lambda: _attention(layer, block, w, plan.seq_len, plan.attn == "eager", plan.sdpa_repeat_kv,
                                    plan.sdpa_causal_mask, _o_reads_copy(plan)),
                 lambda: _mlp(layer, block, h, w, frozen)]
    for index, sublayer in enumerate(sublayers):
        tensors: list[int] = []
        if index < block.pre_norms:
            tensors += _pre_norm(block, h, w, frozen, _readers(layer, block, index),
                                 shared_input=index > 0 and block.parallel_residual)
        elif block.raw_inputs and not frozen:
            tensors.append(w.a * h)
        tensors += [max(1, t // divisors[index]) for t in sublayer()]
        if index < block.post_norms:
            tensors += _post_norm(block, h, w, frozen)
        tensors += [h] * (block.dropout_masks // 2)
        parts.append(tensors)
    if frozen:
        parts[-1] += _lora_inputs(layer, h, plan)
    if plan.bnb_keeps_input and plan.load_in_4bit:
        for index, inputs in enumerate(_4bit_inputs(layer, h, w, block)):
            parts[index] += inputs
    return parts


def _o_reads_copy(plan: Plan) -> bool:
    """Whether o_proj keeps the attention output it reads: it trains, or its adapter reads that
    tensor itself (no dropout before it); a frozen o_proj saves only its weight for backward."""
    if not plan.lora_rank or (plan.bnb_keeps_input and plan.load_in_4bit):   # bitsandbytes' MatMul4Bit keeps it
        return True
    return "o" in lora_targets(plan.lora_targets, plan.model) and not plan.lora_dropout


def _4bit_inputs(layer: Layer, h: int, w: Widths, block: Block, every: bool = False) -> list[list[int]]:
    """bitsandbytes up to 0.43.1: ``MatMul4Bit`` saved each 4-bit linear's input for backward
    (``ctx.tensors = (A, B)``, autograd/_functions.py:516; 0.43.2 saves none, PR #1270): the
    attention's and the MLP's distinct inputs, the normed stream in its width, the projections'
    outputs in the compute width. ``every``: o_proj's too, which the attention keeps anyway while
    the graph's saved tensors live (``SHARED_READS``), but which ctx.tensors holds beyond them."""
    parts: list[list[int]] = [[], []]
    seen: set[str] = set()
    for name, (d_in, _, copies) in layer.linears(h, block).items():
        tensor = SHARED_READS.get(name, name) or (name if every else None)
        if copies != 1 or name.startswith(NOT_4BIT) or tensor in seen or not tensor:
            continue
        seen.add(tensor)
        parts[1 if name in MLP_LINEARS else 0].append((w.r if d_in == h else w.a) * d_in)
    return parts


def held_inputs(plan: Plan) -> int:
    """Bytes per token of the 4-bit linears' inputs that a held graph keeps past its backward
    (``Plan.graph_held``): bitsandbytes up to 0.43.1 keeps them as ``ctx.tensors``, an attribute
    autograd does not release after the node's backward, so they live as long as the graph; a loop
    that holds the loss holds them into the next micro-batch, to its loss."""
    if not (plan.graph_held and plan.bnb_keeps_input and plan.load_in_4bit):
        return 0
    h, w = plan.model.hidden_size, widths(plan)
    return sum(sum(map(sum, _4bit_inputs(layer, h, w, plan.model.block, every=True))) for layer in plan.model.layers)


def layer_tensors(layer: Layer, model: ModelShape, plan: Plan) -> list[int]:
    """Bytes per token of every tensor one decoder layer keeps for backward, in forward order."""
    return [t for part in sublayer_tensors(layer, model, plan) for t in part]


def attention_masks(plan: Plan, width: int) -> int:
    """Bytes of the masks transformers builds for a forward of b × s tokens (``masking_utils.py``),
    alive for the whole pass: eager attention gets an additive b × s × s mask in the embeddings'
    dtype (``width`` bytes) for each kind of layer (full, sliding, chunked); SDPA gets one only for
    a window or chunk no longer than the sequence — a boolean 1 × s × s view broadcast over the
    batch — or where transformers 4.53.1-4.57 build the causal one (``Plan.sdpa_causal_mask``: a
    boolean b × s × s, which checkpointing keeps as every layer's input until backward is done;
    without it the mask dies with the forward, each layer having kept its own converted copy);
    FlashAttention none."""
    s, b = plan.seq_len, plan.rows
    kinds = {FULL if layer.attention.kind == MLA else layer.attention.kind: layer.attention.window
             for layer in plan.model.layers if layer.attention.kind != LINEAR}
    if plan.attn == "eager":
        return len(kinds) * b * s * s * width
    if plan.attn == "sdpa":
        built = b * s * s if plan.sdpa_causal_mask and plan.grad_checkpointing else 0    # a checkpoint input
        return built + sum(s * s for kind, window in kinds.items() if kind != FULL and window and s >= window)
    return 0


def layer_bytes_per_token(layer: Layer, model: ModelShape, plan: Plan) -> int:
    """Everything one decoder layer keeps for backward, per token (no checkpointing)."""
    return sum(layer_tensors(layer, model, plan))


def checkpointed_bytes_per_token(model: ModelShape, plan: Plan) -> int:
    """With gradient checkpointing each layer keeps only its input (the residual stream)."""
    return widths(plan).r * model.hidden_size


def head_tensors(model: ModelShape, plan: Plan) -> list[int]:
    """The final norm feeds lm_head like any pre-norm feeds its linears: the same kept tensors."""
    return _pre_norm(model.block, model.hidden_size, widths(plan), frozen=plan.lora_rank > 0)
