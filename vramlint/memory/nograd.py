"""The forward that keeps nothing for backward, op by op: a no_grad prefill (``simulate_inference``)
and a checkpointed training forward (non-reentrant checkpointing's pack hook keeps only each
layer's input), replayed through the caching-allocator model. Every intermediate dies as soon as
the next op consumed it; what the replay adds over the analytic working set
(``memory/inference.py``) is the order and the temporaries — norms' fp32 copies, autocast's input
casts, PEFT's fp32 adapter path, RoPE's new q and k, the KV cache's copies, SDPA's output (and
its contiguous copy, ``activations.output_copied``), transformers' grouped_mm experts — so the
allocator model sees which blocks later requests reuse.
"""

from __future__ import annotations

from vramlint.memory.parts import activations as act
from vramlint.memory.parts.allocator import CachingAllocator, Peaks
from vramlint.memory.parts.adapters import base_quantization, lora_targets
from vramlint.memory.parts.weights import DTYPE_BYTES, bytes_per_param, replaced_embedding
from vramlint.plan import Plan


def load_weights(plan: Plan, alloc: CachingAllocator, dtype_bytes: float) -> None:
    """The model's parameters as it is loaded: one block per tensor (QLoRA: linears in NF4; for
    inference a quantized checkpoint's groups in its bits, as ``weights.weight_bytes`` counts them)."""
    m = plan.model
    for group, size in m.parameter_tensors:
        quant = base_quantization(plan)
        if quant is not None and group in quant.groups:     # bitsandbytes' nn.Linear replacements
            alloc.malloc(size * quant.bits / 8)
        else:
            alloc.malloc(size * (bytes_per_param(m, group, dtype_bytes) if plan.mode == "infer" else dtype_bytes))
    if plan.embedding_copy and plan.mode == "train":       # the replaced embedding a script still holds
        alloc.malloc(replaced_embedding(m, dtype_bytes))


def forward_layer(plan: Plan, alloc: CachingAllocator, layer, residual: int, tokens: int, w: act.Widths,
                 cache: bool = True) -> tuple[int, list[int]]:
    """One layer of a forward that keeps nothing for backward — a no_grad prefill, or a
    checkpointed training forward (the pack hook keeps only the layer's input): every
    intermediate dies as soon as the next op consumed it. With ``cache`` the KV cache keeps copies
    of k (after RoPE) and v (the whole prompt, sliding layers too). Widths: ``w.r`` for the
    residual stream and norm outputs, ``w.a`` for 16-bit compute (they differ under autocast),
    ``w.o`` for what a linear returns (fp32 from a 4-bit linear under autocast)."""
    m, h = plan.model, plan.model.hidden_size
    block, layer = m.block, act.rank_local(layer, plan)
    normed = _norm(alloc, block, h, tokens, w.r)
    kept, projected = _attention(alloc, plan, layer.attention, tokens, w, cache)
    if block.post_norms:                         # gemma2/3, olmo2: the sublayer output is normed first
        post = _norm(alloc, block, h, tokens, w.r)
        alloc.free(projected)
        projected = post
    residual = alloc.malloc(w.r * h * tokens)    # residual + attention; the caller still holds the layer input
    if not block.attention_output_held:         # gpt2's ``attn_output`` lives to the end of the block
        alloc.free(projected)
    alloc.free(normed)
    normed = _norm(alloc, block, h, tokens, w.r)
    down = _mlp(alloc, plan, layer.mlp, h, tokens, w)
    if block.post_norms > 1:
        post = _norm(alloc, block, h, tokens, w.r)
        alloc.free(down)
        down = post
    residual = _add(alloc, residual, [down, normed], w.r * h * tokens)
    if block.attention_output_held:
        alloc.free(projected)
    return residual, kept


def _norm(alloc: CachingAllocator, block, h: int, tokens: int, r: int) -> int:
    """A norm's temporaries in a forward that keeps nothing; returns its output (in the residual
    stream's dtype, ``r`` bytes). HF RMSNorm: fp32 copy, its square (for the mean), the
    normalised fp32 tensor, its cast back, ``weight *`` that. Gemma's and olmo2's norms stay fp32
    through the weight (``* (1 + weight)``, ``weight *``) and cast at the end. LayerNorm: one
    fused kernel."""
    m, f = (lambda width: alloc.malloc(width * h * tokens)), alloc.free
    if block.norm == "layer":
        return m(r)
    upcast = m(4)
    f(m(4))                                      # x.pow(2), consumed by mean()
    normalised = m(4)
    f(upcast)
    if block.norm == "fp32":
        scaled = m(4)
        f(normalised)
        out = m(r)
        f(scaled)
        return out
    cast = m(r)
    out = m(r)
    f(cast)
    f(normalised)
    return out


def _linear(alloc: CachingAllocator, plan: Plan, n_in: int, n_out: int, tokens: int, w: act.Widths,
            name: str = "", cast: bool = False) -> int:
    """One linear in a forward that keeps nothing; returns its output. Under autocast a linear on
    the fp32 residual stream first casts its input to 16 bit (``cast``). A PEFT LoRA adapter on it
    (fp32 weights) casts the input to fp32, runs A then B, scales, adds that to the base output
    (the sum promoted to fp32) and casts the sum back; 16-bit adapters (DeepSpeed, FSDP) skip the
    casts."""
    m, f = (lambda width, n: alloc.malloc(width * n * tokens)), alloc.free
    cast_in = m(w.a, n_in) if cast and w.r != w.a else None
    out = m(w.o, n_out)
    if cast_in is not None:
        f(cast_in)
    if not (plan.lora_rank and name in lora_targets(plan.lora_targets, plan.model)):
        return out
    wide = w.a if act.adapters_16bit(plan) else 4     # the adapters' dtype: fp32 (PEFT) or the compute one
    x32 = m(4, n_in) if wide == 4 else None             # PEFT's cast of the input to the adapters' dtype
    dropped = m(wide, n_in) if plan.lora_dropout else None     # the dropout's output; its mask dies at once
    if dropped is not None:
        f(m(1, n_in))
    low = m(wide, plan.lora_rank)                       # A, B, the scaled output, the sum
    b = m(wide, n_out)
    f(low)
    scaled = m(wide, n_out)
    f(b)
    total = m(max(wide, w.o), n_out)
    f(scaled)
    f(out)
    if wide == 4:                                       # cast back to the base output's dtype
        out = m(w.o, n_out)
        f(total)
    else:
        out = total
    for handle in (x32, dropped):
        if handle is not None:
            f(handle)
    return out


def _attention(alloc: CachingAllocator, plan: Plan, att, tokens: int, w: act.Widths, cache: bool):
    """transformers' attention forward keeping nothing: projections (one fused tensor whose views
    are q, k, v, or three), RoPE's new q and k, with a cache its ``torch.cat`` copies of k and v
    (after which the pre-cache k and v die), eager attention's scores, softmax in fp32 and their
    16-bit cast, the output (and its contiguous copy where it is head-major), o_proj. Returns the
    cache tensors and o_proj's output."""
    block, h, a = plan.model.block, plan.model.hidden_size, w.a
    q, kv = att.num_heads * att.head_dim, max(att.num_kv_heads, 1) * att.head_dim
    m, f = (lambda n: alloc.malloc(a * n * tokens)), alloc.free
    if block.fused_qkv:
        fused = _linear(alloc, plan, h, q + 2 * kv, tokens, w, "qkv", cast=True)
        q_h = k_h = v_h = None
    else:
        fused, (q_h, k_h, v_h) = None, (_linear(alloc, plan, h, n, tokens, w, name, cast=True)
                                        for name, n in (("q", q), ("k", kv), ("v", kv)))
    q_rot = k_rot = None
    if block.rope:
        # cos/sin take the residual stream's dtype: under autocast RoPE's q and k come out fp32,
        # and SDPA (an autocast op) casts them back to 16 bit
        q_rot, k_rot = (alloc.malloc(w.r * n * tokens) for n in (q, kv))
        for handle in (q_h, k_h):
            if handle is not None:
                f(handle)
        if w.r != w.a:
            cast = m(q), m(kv)
            f(q_rot)
            f(k_rot)
            q_rot, k_rot = cast
    kept = [m(kv), m(kv)] if cache else []       # DynamicCache: torch.cat onto an empty tensor
    if cache:
        for handle in (k_rot, v_h) + ((fused,) if block.rope else ()):
            if handle is not None:               # key/value_states now name the cache
                f(handle)
    if plan.attn == "eager":                     # b x heads x s x s: scores, + mask, fp32 softmax, cast
        scores = att.num_heads * plan.seq_len
        logits = m(scores)
        masked = m(scores)
        f(logits)
        soft = alloc.malloc(4 * scores * tokens)
        f(masked)
        probs = m(scores)
        f(soft)
    out = m(q)
    if plan.attn == "eager":
        f(probs)
    if act.output_copied(block, plan.attn == "eager"):   # transpose(1, 2).contiguous() copies
        contiguous = m(q)
        f(out)
        out = contiguous
    projected = _linear(alloc, plan, q, h, tokens, w, "o")
    f(out)
    done = (q_rot,) if block.rope else (fused,)
    if not cache:
        done += (k_rot, v_h) + ((fused,) if block.rope else ())
    for handle in done:
        if handle is not None:
            f(handle)
    return kept, projected


def _mlp(alloc: CachingAllocator, plan: Plan, mlp, h: int, tokens: int, w: act.Widths) -> int:
    """The MLP's intermediates in evaluation order; returns the output handle. Under autocast the
    projections of the fp32 norm output cast it first, and GPT-2's tanh-GELU chain runs in fp32
    after autocast's fp32 ``pow``."""
    a, block = w.o, plan.model.block
    m, f = (lambda n: alloc.malloc(a * n * tokens)), alloc.free
    i = mlp.intermediate
    if mlp.kind == "moe":
        return _experts(alloc, mlp, h, tokens, w.r)
    if mlp.kind == "gated" and block.fused_gate_up:   # phi3: the chunk views keep the fused output to the end
        fused = _linear(alloc, plan, h, 2 * i, tokens, w, "gate_up", cast=True)
        act_ = m(i)
        product = m(i)
        f(act_)
        down = _linear(alloc, plan, i, h, tokens, w, "down")
        f(product)
        f(fused)
        return down
    if mlp.kind == "gated":
        gate = _linear(alloc, plan, h, i, tokens, w, "gate", cast=True)
        act_ = m(i)
        f(gate)
        up = _linear(alloc, plan, h, i, tokens, w, "up", cast=True)
        product = m(i)
        f(act_)
        f(up)
    else:
        product = _linear(alloc, plan, h, i, tokens, w, "up", cast=True)
        if block.act == "gelu_new":     # python tanh-GELU: 0.5·x lives to the end, temporaries in pairs
            g = 4 if w.r != w.a else a   # autocast runs pow in fp32 and the chain stays fp32
            half, first = m(i), alloc.malloc(g * i * tokens)
            second = alloc.malloc(g * i * tokens)
            f(first)
            f(half)
            f(product)
            product = second
        else:
            temp = m(i)
            f(product)
            product = temp
    fp32_product = w.r != w.a and block.act == "gelu_new"
    down = _linear(alloc, plan, i, h, tokens, w, "down", cast=fp32_product)
    f(product)
    return down


def _experts(alloc: CachingAllocator, mlp, h: int, tokens: int, e: int) -> int:
    """transformers' ``grouped_mm_experts_forward`` (5.17, as measured) under no_grad: every
    routed copy of a token at once, sorted by expert. The gathered input lives to the end of the
    function; each grouped_mm output is copied once more by the sentinel ``masked_fill``; the
    expert output is weighted, put back in token order and summed over the k copies. ``e``: the
    experts' bytes per element, their weights' dtype (grouped_mm is no autocast op)."""
    m, f = (lambda n: alloc.malloc(e * n * tokens)), alloc.free
    k, i = mlp.experts_per_token, mlp.intermediate
    logits = alloc.malloc(4 * mlp.experts * tokens)          # router softmax in fp32
    order = [alloc.malloc(8 * k * tokens) for _ in range(2)]  # sorted expert ids and the permutation
    gathered = m(k * h)
    proj = m(2 * k * i)
    masked = m(2 * k * i)
    f(proj)
    act_ = m(k * i)
    product = m(k * i)
    f(act_)
    f(masked)
    down = m(k * h)
    f(product)
    masked = m(k * h)
    f(down)
    weighted = m(k * h)
    back = m(k * h)
    f(weighted)
    out = m(h)
    for handle in [back, masked, gathered, logits] + order:
        f(handle)
    return out


def _add(alloc: CachingAllocator, residual: int, consumed: list[int], size: int) -> int:
    new = alloc.malloc(size)
    for handle in [residual] + consumed:
        alloc.free(handle)
    return new


def simulate_inference(plan: Plan) -> Peaks:
    """A no_grad prefill with a KV cache: weights loaded, then one forward pass."""
    alloc = CachingAllocator()
    m = plan.model
    a = DTYPE_BYTES[plan.weights_dtype or m.dtype]
    load_weights(plan, alloc, a)
    alloc.reset_peaks()
    tokens = plan.micro_batch * plan.seq_len
    embeddings = hidden = alloc.malloc(a * m.hidden_size * tokens)   # ``inputs_embeds`` lives to the end
    if m.block.learned_positions:               # the sum with the positions is the first layer's input
        hidden = alloc.malloc(a * m.hidden_size * tokens)
    masks = act.attention_masks(plan, a)
    if masks:
        alloc.malloc(masks)
    for layer in m.layers:
        output, _cache = forward_layer(plan, alloc, layer, hidden, tokens, act.Widths(a, a, a))
        if hidden != embeddings:
            alloc.free(hidden)
        hidden = output
    logits = alloc.malloc(6 * plan.micro_batch * (plan.seq_len if plan.prompt_logits else 1) * m.vocab_size)
    alloc.free(logits)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)
