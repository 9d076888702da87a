"""Replay a step's allocations through the caching-allocator model to get reserved memory.

The tensor sizes are the same ones the analytic model counts (``activations.layer_tensors``, the
model's modules, the optimizer's states); what the replay adds is their order, so the allocator
model can tell which freed blocks later requests reuse. The order follows PyTorch and
transformers: forward layer by layer, the loss, backward layer by layer in reverse (parameter
gradients appear as activations are released), then ``optimizer.step()`` — which on the first
step creates Adam's m and v inside whatever blocks backward left cached — and
``zero_grad(set_to_none=True)``. Two steps are replayed with ``empty_cache`` between them, as the
calibration runs did, and the second step's peaks are reported. Under (non-reentrant) gradient
checkpointing the forward keeps nothing but each layer's input, so it runs op by op like a
no_grad forward (``_nograd_layer``: every temporary, autocast's input casts, PEFT's fp32 adapter
path), and backward re-materialises one layer's kept tensors at a time.

The other runtimes replay what their source does: DeepSpeed from ``deepspeed.initialize`` on
(``_ZeroStep`` for ZeRO-1/2, ``_Zero3Step`` with its all-gather and reduce streams, each a pool of
its own; two steps, no ``empty_cache``), FSDP's flat shards and unsharded layers, and a no_grad
prefill for inference (``simulate_inference``).
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.memory import activations as act
from vramlint.memory.allocator import CachingAllocator
from vramlint.memory.states import (deepspeed_states, fsdp_states, lora_targets, trainable, zero3_kept,
                                     zero3_sub_groups)
from vramlint.memory.weights import DTYPE_BYTES
from vramlint.models.quantization import nf4
from vramlint.plan import Plan

LINEAR_GROUPS = ("attention", "mlp", "experts", "router")
CAST_GROUPS = ("attention", "mlp", "router")     # grouped_mm experts are not autocast ops: never cast


@dataclass(frozen=True)
class Peaks:
    allocated: int
    reserved: int


class _Step:
    """One training step of the torch runtime, replayed into an allocator."""

    def __init__(self, plan: Plan, alloc: CachingAllocator, params: list[tuple[str, int]]) -> None:
        self.plan, self.a = plan, alloc
        self.m = plan.model
        self.tokens = plan.micro_batch * plan.seq_len
        self.w = act.widths(plan)
        self.params = params
        self.state_bytes = 4 if plan.lora_rank else DTYPE_BYTES[plan.weights_dtype or "bfloat16"]
        self.states: list[int] = []

    def run(self, first: bool) -> None:
        size = act.attention_masks(self.plan, self.w.r)      # alive through forward and backward
        masks = self.a.malloc(size) if size else None
        kept, inputs, casts, residual = self.forward()
        head, lsm = self.loss(kept)
        grads = self.backward(kept, inputs, casts, residual, head, lsm)
        if masks is not None:
            self.a.free(masks)
        self.optimizer(grads, first)

    # forward -------------------------------------------------------------------------------
    def forward(self):
        a, tokens, w, m = self.a, self.tokens, self.w, self.m
        residual = a.malloc(w.r * m.hidden_size * tokens)
        kept: list[list[int]] = []
        inputs: list[int | None] = []
        casts: list[list[int]] = []
        for index, layer in enumerate(m.layers):
            gathered = self._gather(index)
            layer_casts = self._casts(layer)
            if self.plan.grad_checkpointing:    # the pack hook keeps nothing: the forward runs as under no_grad
                inputs.append(residual)
                residual, tensors = _nograd_layer(self.plan, a, layer, residual, tokens, w, cache=False)
            else:
                tensors = [a.malloc(t * tokens) for t in act.layer_tensors(layer, m, self.plan)]
                inputs.append(None)
                new_residual = a.malloc(w.r * m.hidden_size * tokens)
                a.free(residual)
                residual = new_residual
            kept.append(tensors)
            casts.append(layer_casts)
            self._release(index, gathered, forward=True)
        return kept, inputs, casts, residual

    def _gather(self, index: int) -> list[int]:
        """Parameters fetched for one layer (ZeRO-3 / FSDP); none here."""
        return []

    def _release(self, index: int, gathered: list[int], forward: bool) -> None:
        """After a layer's forward or backward: what was gathered for it is freed."""
        for handle in gathered:
            self.a.free(handle)

    def _casts(self, layer) -> list[int]:
        if not self.plan.autocast:
            return []
        return [self.a.malloc(2 * size) for group, size in layer.parameter_tensors if group in CAST_GROUPS]

    def loss(self, kept):
        a, m, tokens = self.a, self.m, self.tokens
        logits = tokens * m.vocab_size // self.plan.tensor_parallel
        head = [a.malloc(t * tokens) for t in act.head_tensors(m, self.plan)]
        lm_cast = a.malloc(2 * m.vocab_size * m.hidden_size) if self.plan.autocast else None
        bf16 = a.malloc(2 * logits)
        extra = [a.malloc(2 * logits)] if m.block.logit_softcap else []
        upcast = a.malloc(4 * logits)
        lsm = a.malloc(4 * logits)
        a.free(upcast)
        a.free(bf16)
        if lm_cast is not None:
            head.append(lm_cast)
        return head + extra, lsm

    # backward ------------------------------------------------------------------------------
    def backward(self, kept, inputs, casts, residual, head, lsm) -> list[int]:
        a, m, tokens, w = self.a, self.m, self.tokens, self.w
        if self.plan.grad_checkpointing and self.plan.autocast:
            for layer_casts in casts:            # autocast's cache dies with the autocast region
                for handle in layer_casts:
                    a.free(handle)
            casts = [[] for _ in casts]
        logits = tokens * m.vocab_size // self.plan.tensor_parallel
        g_out = a.malloc(4 * logits)
        g_in = a.malloc(4 * logits)
        a.free(g_out)
        a.free(lsm)
        g_16 = a.malloc(2 * logits)
        a.free(g_in)
        grad = a.malloc(w.r * m.hidden_size * tokens)
        grads = self._param_grads([("head", m.head_params or m.vocab_size * m.hidden_size)])
        for handle in head + [g_16, residual]:
            a.free(handle)
        for index in reversed(range(m.num_layers)):
            grad = self._layer_backward(index, kept[index], inputs[index], casts[index], grad, grads)
        if m.head_params:
            grads += self._param_grads([("embedding", m.embedding_params)])
        elif not self.plan.lora_rank:   # tied: the embedding's dense gradient, added into lm_head's in place
            a.free(a.malloc(self.state_bytes * m.embedding_params))
        a.free(grad)
        return grads

    def _layer_backward(self, index, kept, checkpoint_input, casts, grad, grads) -> int:
        a, m, tokens, w = self.a, self.m, self.tokens, self.w
        layer = m.layers[index]
        gathered = self._gather(index)
        if checkpoint_input is not None:
            casts = self._casts(layer)
            kept = [a.malloc(t * tokens) for t in act.layer_tensors(layer, m, self.plan)]
        grads += self._param_grads(list(layer.parameter_tensors))
        widest = max(act.layer_tensors(layer, m, self.plan))
        scratch = a.malloc(widest * tokens)
        new_grad = a.malloc(w.r * m.hidden_size * tokens)
        for handle in kept + casts + [scratch, grad]:
            a.free(handle)
        self._release(index, gathered, forward=False)
        if checkpoint_input is not None:
            a.free(checkpoint_input)
        return new_grad

    def _param_grads(self, modules) -> list[int]:
        if self.plan.lora_rank:
            return []
        return [self.a.malloc(self.state_bytes * size) for _, size in modules if size]

    # optimizer -----------------------------------------------------------------------------
    def optimizer(self, grads: list[int], first: bool) -> None:
        a = self.a
        sizes = [size for _, size in self.params]
        if self.plan.lora_rank:
            grads = [a.malloc(self.state_bytes * size) for size in sizes]
        if first and self.plan.optimizer == "adamw":
            for size in sizes:
                self.states += [a.malloc(self.state_bytes * size), a.malloc(self.state_bytes * size)]
        temps = [a.malloc(self.state_bytes * size) for size in sizes] if self.plan.optimizer == "adamw" else []
        for handle in temps + grads:
            a.free(handle)


def _trainable_tensors(plan: Plan) -> list[tuple[str, int]]:
    m = plan.model
    if plan.lora_rank:
        per_layer = trainable(plan) // max(1, m.num_layers)
        return [("lora", per_layer)] * m.num_layers
    out = [("embedding", m.embedding_params)]
    for layer in m.layers:
        out += list(layer.parameter_tensors)
    if m.head_params:
        out.append(("head", m.head_params))
    return out


def simulate_training(plan: Plan) -> Peaks:
    """Torch-runtime training: weights loaded, two steps, peaks of the second (as measured)."""
    alloc = CachingAllocator()
    params = _trainable_tensors(plan)
    w_b = DTYPE_BYTES[plan.weights_dtype or "bfloat16"]
    q_b = nf4().bits / 8
    for group, size in [("embedding", plan.model.embedding_params)] + [
            item for layer in plan.model.layers for item in layer.parameter_tensors] + [("head", plan.model.head_params)]:
        if size:
            alloc.malloc(size * (q_b if plan.load_in_4bit and group in LINEAR_GROUPS else w_b))
    step = _Step(plan, alloc, params)
    step.run(first=True)
    alloc.empty_cache()
    alloc.reset_peaks()
    step.run(first=False)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)


def _load_weights(plan: Plan, alloc: CachingAllocator, dtype_bytes: float) -> None:
    for size in plan.model.tensor_sizes:
        if size:
            alloc.malloc(dtype_bytes * size)


def _nograd_layer(plan: Plan, alloc: CachingAllocator, layer, residual: int, tokens: int, w: act.Widths,
                 cache: bool = True) -> tuple[int, list[int]]:
    """One layer of a forward that keeps nothing for backward — a no_grad prefill, or a
    checkpointed training forward (the pack hook keeps only the layer's input): every
    intermediate dies as soon as the next op consumed it. With ``cache`` the KV cache keeps copies
    of k (after RoPE) and v (the whole prompt, sliding layers too). Widths: ``w.r`` for the
    residual stream and norm outputs, ``w.a`` for 16-bit compute (they differ under autocast)."""
    m, h = plan.model, plan.model.hidden_size
    block = m.block
    normed = _nograd_norm(alloc, block, h, tokens, w.r)
    kept, projected = _nograd_attention(alloc, plan, layer.attention, tokens, w, cache)
    if block.post_norms:                         # gemma2/3, olmo2: the sublayer output is normed first
        post = _nograd_norm(alloc, block, h, tokens, w.r)
        alloc.free(projected)
        projected = post
    residual = alloc.malloc(w.r * h * tokens)    # residual + attention; the caller still holds the layer input
    alloc.free(projected)
    alloc.free(normed)
    normed = _nograd_norm(alloc, block, h, tokens, w.r)
    down = _nograd_mlp(alloc, plan, layer.mlp, h, tokens, w)
    if block.post_norms > 1:
        post = _nograd_norm(alloc, block, h, tokens, w.r)
        alloc.free(down)
        down = post
    residual = _add(alloc, residual, [down, normed], w.r * h * tokens)
    return residual, kept


def _nograd_norm(alloc: CachingAllocator, block, h: int, tokens: int, r: int) -> int:
    """A norm's temporaries in a forward that keeps nothing; returns its output (in the residual
    stream's dtype, ``r`` bytes). HF RMSNorm: fp32 copy, its square (for the mean), the
    normalised fp32 tensor, its cast back, ``weight *`` that. Gemma's norm stays fp32 through
    ``* (1 + weight)`` and casts at the end. LayerNorm: one fused kernel."""
    m, f = (lambda width: alloc.malloc(width * h * tokens)), alloc.free
    if block.norm == "layer":
        return m(r)
    upcast = m(4)
    f(m(4))                                      # x.pow(2), consumed by mean()
    normalised = m(4)
    f(upcast)
    if block.norm == "gemma":
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
    (the sum promoted to fp32) and casts the sum back."""
    m, f = (lambda width, n: alloc.malloc(width * n * tokens)), alloc.free
    cast_in = m(w.a, n_in) if cast and w.r != w.a else None
    out = m(w.a, n_out)
    if cast_in is not None:
        f(cast_in)
    if not (plan.lora_rank and name in lora_targets(plan.lora_targets)):
        return out
    x32 = m(4, n_in)
    low = m(4, plan.lora_rank)
    b = m(4, n_out)
    f(low)
    scaled = m(4, n_out)
    f(b)
    total = m(4, n_out)
    f(scaled)
    f(out)
    out = m(w.a, n_out)
    f(total)
    f(x32)
    return out


def _nograd_attention(alloc: CachingAllocator, plan: Plan, att, tokens: int, w: act.Widths, cache: bool):
    """transformers' attention forward keeping nothing: projections (one fused tensor whose views
    are q, k, v, or three), RoPE's new q and k, with a cache its ``torch.cat`` copies of k and v
    (after which the pre-cache k and v die), eager attention's scores, softmax in fp32 and their
    16-bit cast, the output and its transposed contiguous copy, o_proj. Returns the cache tensors
    and o_proj's output."""
    block, h, a = plan.model.block, plan.model.hidden_size, w.a
    q, kv = att.num_heads * att.head_dim, max(att.num_kv_heads, 1) * att.head_dim
    m, f = (lambda n: alloc.malloc(a * n * tokens)), alloc.free
    if block.fused_qkv:
        fused = _linear(alloc, plan, h, q + 2 * kv, tokens, w, "q", cast=True)
        q_h = k_h = v_h = None
    else:
        fused, (q_h, k_h, v_h) = None, (_linear(alloc, plan, h, n, tokens, w, name, cast=True)
                                        for name, n in (("q", q), ("k", kv), ("v", kv)))
    q_rot = k_rot = None
    if block.rope:
        q_rot, k_rot = m(q), m(kv)
        for handle in (q_h, k_h):
            if handle is not None:
                f(handle)
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
    contiguous = m(q)                            # transpose(1, 2).contiguous()
    f(out)
    projected = _linear(alloc, plan, q, h, tokens, w, "o")
    f(contiguous)
    done = (q_rot,) if block.rope else (fused,)
    if not cache:
        done += (k_rot, v_h) + ((fused,) if block.rope else ())
    for handle in done:
        if handle is not None:
            f(handle)
    return kept, projected


def _nograd_mlp(alloc: CachingAllocator, plan: Plan, mlp, h: int, tokens: int, w: act.Widths) -> int:
    """The MLP's intermediates in evaluation order; returns the output handle. Under autocast the
    projections of the fp32 norm output cast it first, and GPT-2's tanh-GELU chain runs in fp32
    after autocast's fp32 ``pow``."""
    a, block = w.a, plan.model.block
    m, f = (lambda n: alloc.malloc(a * n * tokens)), alloc.free
    i = mlp.intermediate
    if mlp.kind == "moe":
        return _nograd_experts(alloc, mlp, h, tokens, w.r)
    if mlp.kind == "gated" and block.fused_gate_up:   # phi3: the chunk views keep the fused output to the end
        fused = _linear(alloc, plan, h, 2 * i, tokens, w, "up", cast=True)
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


def _nograd_experts(alloc: CachingAllocator, mlp, h: int, tokens: int, a: int) -> int:
    """transformers' ``grouped_mm_experts_forward`` (5.17, as measured) under no_grad: every
    routed copy of a token at once, sorted by expert. The gathered input lives to the end of the
    function; each grouped_mm output is copied once more by the sentinel ``masked_fill``; the
    expert output is weighted, put back in token order and summed over the k copies."""
    m, f = (lambda n: alloc.malloc(a * n * tokens)), alloc.free
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
    _load_weights(plan, alloc, a)
    alloc.reset_peaks()
    tokens = plan.micro_batch * plan.seq_len
    embeddings = hidden = alloc.malloc(a * m.hidden_size * tokens)   # ``inputs_embeds`` lives to the end
    if m.block.learned_positions:               # the sum with the positions is the first layer's input
        hidden = alloc.malloc(a * m.hidden_size * tokens)
    masks = act.attention_masks(plan, a)
    if masks:
        alloc.malloc(masks)
    for layer in m.layers:
        output, _cache = _nograd_layer(plan, alloc, layer, hidden, tokens, act.Widths(a, a))
        if hidden != embeddings:
            alloc.free(hidden)
        hidden = output
    logits = alloc.malloc(6 * plan.micro_batch * m.vocab_size)
    alloc.free(logits)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)


class _DeepSpeedStep(_Step):
    """DeepSpeed ZeRO-0 (``BF16_Optimizer``), and any stage in fp32: the states of
    ``memory/states.py`` allocated at once; per-parameter 16-bit gradients kept until the step,
    which converts them into a flat fp32 gradient buffer (the local partition above ZeRO-0) and
    runs the client optimizer on the flat fp32 master copy (one temporary of the same size). The
    16-bit ZeRO stages have their own replays below (``_ZeroStep``, ``_Zero3Step``).
    """

    def _param_grads(self, modules) -> list[int]:
        if self.plan.zero_stage == 3 or self.plan.offload_optimizer != "none":
            return []       # reduce-scattered into the partition, or streamed to the host
        return [self.a.malloc(2 * size) for _, size in modules if size]

    def _gather(self, index: int) -> list[int]:
        """ZeRO-3 all-gathers (or fetches from the host) each module's 16-bit parameters before
        use and releases them after, when there is anything to gather."""
        plan = self.plan
        if plan.zero_stage != 3 or (plan.data_parallel == 1 and plan.offload_param == "none"):
            return []
        return [self.a.malloc(2 * size) for _, size in self.m.layers[index].modules if size]

    def optimizer(self, grads: list[int], first: bool) -> None:
        a, plan = self.a, self.plan
        p, n = plan.model.params, plan.data_parallel
        if plan.offload_optimizer != "none":
            for handle in grads:
                a.free(handle)
            return
        part = p if plan.zero_stage == 0 else -(-p // n)
        group = min(plan.sub_group_size, part) if plan.zero_stage == 3 else part
        fp32_grads = a.malloc(4 * group)
        if plan.zero_stage:                 # ZeRO-1/2 release the 16-bit gradients once reduced
            for handle in grads:
                a.free(handle)
        temp = a.malloc(4 * group)
        for handle in [temp, fp32_grads] + (grads if plan.zero_stage == 0 else []):
            a.free(handle)


class _HookedStep(_Step):
    """DeepSpeed ZeRO's gradient hooks: each gradient autograd produces is taken (``_take``) by
    the stage's reduction as soon as its accumulation hook fires."""

    tied: tuple[int, int] | None = None

    def _param_grads(self, modules) -> list[int]:
        for group, size in modules:
            if not size:
                continue
            grad = self.a.malloc(2 * size)
            if group == "head" and not self.m.head_params:
                # a tied weight: autograd sums lm_head's and the embedding's gradients, so the
                # first waits in the engine's buffer and the hook fires once, after the embedding
                self.tied = (grad, size)
                continue
            self._take(grad, size)
        return []

    def _take(self, grad: int, size: int) -> None:
        raise NotImplementedError

    def _end_of_backward(self) -> None:
        if self.tied is not None:
            self._take(*self.tied)
            self.tied = None


class _ZeroStep(_HookedStep):
    """ZeRO-1/2 (``runtime/zero/stage_1_and_2.py``).

    Each 16-bit gradient autograd produces is copied into the ``reduce_bucket_size`` IPG bucket
    (allocated at the first gradient hook of the step, released at the epilogue) and freed; a
    full bucket is reduced and copied into the flat ``grads_in_partition`` buffer (allocated at
    the first flush). A gradient larger than the bucket bypasses it until the next flush. ZeRO-2
    does this in the hooks, during backward; ZeRO-1's hooks only set the bucket up and the copies
    run after backward, in parameter order, so its gradients pile up until then. The step
    flattens the partition once more, upcasts it to fp32, frees both 16-bit copies, and runs the
    client optimizer on the flat fp32 master (AdamW creates m and v at its first step). With the
    optimizer offloaded there is no partition on the GPU: a flushed bucket's gradients go to the
    host one by one (an fp64 upcast for the norm, an fp32 upcast for the copy) and the optimizer
    steps on the host.
    """

    def __init__(self, plan: Plan, alloc: CachingAllocator) -> None:
        super().__init__(plan, alloc, [])
        self.part = -(-plan.model.params // plan.data_parallel)
        self.bucket: int | None = None
        self.partition: int | None = None
        self.filled = 0
        self.oversized: list[int] = []
        self.sizes: list[int] = []
        self.pending: list[tuple[int, int]] = []

    def _take(self, grad: int, size: int) -> None:
        if self.bucket is None:
            self.bucket = self.a.malloc(2 * self.plan.reduce_bucket_size)
        if self.plan.zero_stage == 1:
            self.pending.append((grad, size))
        else:
            self._copy(grad, size)

    def _copy(self, grad: int, size: int) -> None:
        if self.filled + size > self.plan.reduce_bucket_size:
            self._flush()
        self.filled += size
        self.sizes.append(-(-size // self.plan.data_parallel))
        if size > self.plan.reduce_bucket_size:
            self.oversized.append(grad)
        else:
            self.a.free(grad)

    def _flush(self) -> None:
        if self.plan.offload_optimizer != "none":      # each gradient goes to the host's fp32 partition:
            for size in self.sizes:                      # its fp64 norm and its fp32 upcast, one at a time
                self.a.free(self.a.malloc(8 * size))
                self.a.free(self.a.malloc(4 * size))
        elif self.partition is None:
            self.partition = self.a.malloc(2 * self.part)
        for grad in self.oversized:
            self.a.free(grad)
        self.oversized, self.sizes, self.filled = [], [], 0

    def optimizer(self, grads: list[int], first: bool) -> None:
        a = self.a
        self._end_of_backward()
        for grad, size in reversed(self.pending):        # reduce_gradients walks the group in order
            self._copy(grad, size)
        self.pending = []
        self._flush()
        a.free(self.bucket)
        self.bucket = None
        if self.plan.offload_optimizer != "none":      # the CPU optimizer steps on the host
            return
        _norm_upcasts(self.plan, a)
        flat = a.malloc(2 * self.part)
        fp32 = a.malloc(4 * self.part)
        a.free(flat)
        a.free(self.partition)
        self.partition = None
        if first:
            self.states += [a.malloc(4 * self.part), a.malloc(4 * self.part)]
        temp = a.malloc(4 * self.part)
        a.free(temp)
        a.free(fp32)


def _zero_init(plan: Plan, alloc: CachingAllocator) -> None:
    """``deepspeed.initialize`` for ZeRO-1/2 on a model moved to the GPU: the 16-bit parameters
    are flattened into one buffer (the originals freed; when the GPU cannot hold both, DeepSpeed
    moves the originals to the host and empties the cache first), the fp32 master partition is a
    clone upcast (the clone freed), and ``initialize_optimizer_states`` allocates and drops one
    fp32 gradient partition."""
    m = plan.model
    part = -(-m.params // plan.data_parallel)
    if plan.offload_optimizer != "none":        # the gradient staging buffer for the copies to the host
        alloc.malloc(2 * max(m.tensor_sizes))
    originals = [alloc.malloc(2 * size) for size in m.tensor_sizes if size]
    on_gpu = alloc.reserved + 2 * m.params <= plan.cluster.gpu.memory_bytes    # flatten_on_accelerator
    if not on_gpu:
        for handle in originals:
            alloc.free(handle)
        alloc.empty_cache()
    alloc.malloc(2 * m.params)
    for handle in originals if on_gpu else []:
        alloc.free(handle)
    clone = alloc.malloc(2 * part)
    if plan.offload_optimizer == "none":        # the fp32 master and its first gradient stay on the GPU
        alloc.malloc(4 * part)
        alloc.free(alloc.malloc(4 * part))
    alloc.free(clone)


GATHER, REDUCE = 1, 2      # DeepSpeed's all-gather and reduce-and-partition CUDA streams
MAX_REDUCE_EVENTS = 2      # stage3.py max_param_reduce_events: reductions in flight before the host waits
NORM_CHUNK = 250_000_000   # stage3.py _constant_buffered_norm2: fp64 norms in chunks of this many elements


def _norm_upcasts(plan: Plan, alloc: CachingAllocator) -> None:
    """The gradient norm (for clipping and the logged norm): ZeRO's ``get_grad_norm_direct``
    upcasts each gradient piece of the local partition to fp64 (``get_norm_dtype``), one at a
    time, 8 B per element."""
    part = -(-plan.model.params // plan.data_parallel)
    for size in plan.model.tensor_sizes:
        if size:
            alloc.free(alloc.malloc(8 * min(-(-size // plan.data_parallel), part)))


class _Zero3Step(_HookedStep):
    """ZeRO-3 (``runtime/zero/stage3.py``, ``partitioned_param_coordinator.py``).

    Parameters that are partitioned over several GPUs or offloaded are fetched for each module on
    the all-gather stream and released after it; from the second step on, when the coordinator
    knows the module order, a module whose parameters come back within
    ``stage3_max_reuse_distance`` elements keeps them (the last layers stay gathered from their
    forward to their backward). Each 16-bit gradient is copied into the IPG bucket (allocated at
    initialisation) and freed; a full bucket is reduce-scattered into the gradient partition, or,
    with the optimizer offloaded, staged per parameter on the reduce stream (a 16-bit GPU copy
    alive until the bucket is done, an fp32 upcast per parameter) on its way to the host. The
    step walks the sub-groups: flatten + fp32 upcast of the gradients, AdamW's m and v (first
    step) and one temporary.
    """

    def __init__(self, plan: Plan, alloc: CachingAllocator) -> None:
        super().__init__(plan, alloc, [])
        self.fetching = plan.offload_param != "none" or plan.data_parallel > 1
        self.kept = zero3_kept(plan.model, plan.max_reuse_distance)
        self.traced = False
        self.held: dict[int, list[int]] = {}
        self.filled = 0
        self.bucket: list[int] = []
        self.oversized: list[int] = []
        self.window: list[int] = []
        self.flushed: list[list[int]] = []

    def _gather(self, index: int) -> list[int]:
        if not self.fetching:
            return []
        if index in self.held:
            return self.held.pop(index)
        layer = self.m.layers[index]     # over several GPUs one flat buffer per module; from the host per tensor
        parts = layer.parameter_tensors if self.plan.data_parallel == 1 else layer.modules
        return [self.a.malloc(2 * size, GATHER) for _, size in parts if size]

    def _release(self, index: int, gathered: list[int], forward: bool) -> None:
        if forward and self.traced and index in self.kept.layers:
            self.held[index] = gathered
            return
        super()._release(index, gathered, forward)

    def forward(self):
        """The embedding is fetched first; a tied one is what lm_head uses again after the last
        layer, so a traced step keeps it gathered when the layers are within the reuse distance."""
        self.embedding = self._fetch(self.m.embedding_params)
        if self.embedding is not None and not (self.traced and self.kept.embedding):
            self.a.free(self.embedding)
            self.embedding = None
        return super().forward()

    def loss(self, kept):
        if self.embedding is None:
            self.embedding = self._fetch(self.m.head_params or self.m.embedding_params)
        return super().loss(kept)

    def _fetch(self, size: int) -> int | None:
        return self.a.malloc(2 * size, GATHER) if self.fetching and size else None

    def _param_grads(self, modules) -> list[int]:
        if any(group == "head" for group, _ in modules) and self.embedding is not None:
            self.a.free(self.embedding)          # lm_head's parameters go once its backward is done
            self.embedding = None
        return super()._param_grads(modules)

    def _take(self, grad: int, size: int) -> None:
        if self.filled + size > self.plan.reduce_bucket_size:
            self._flush()
        if size > self.plan.reduce_bucket_size:
            self.oversized.append(grad)
        else:
            self.window.append(grad)         # copied on the reduce stream: record_stream defers the free
        self.bucket.append(size)
        self.filled += size

    def _flush(self) -> None:
        a, n = self.a, self.plan.data_parallel
        if self.plan.offload_optimizer != "none":
            copies = []
            for size in self.bucket:
                piece = -(-size // n)
                copies.append(a.malloc(2 * piece, REDUCE))
                a.free(a.malloc(8 * min(piece, NORM_CHUNK), REDUCE))
                a.free(a.malloc(4 * piece, REDUCE))
            for handle in copies:
                a.free(handle)
        if len(self.flushed) > MAX_REDUCE_EVENTS:       # the host waits for the oldest reduction
            for handle in self.flushed.pop(0):
                a.free(handle)
        self.flushed.append(self.window + self.oversized)
        self.bucket, self.oversized, self.window, self.filled = [], [], [], 0

    def _synchronize(self) -> None:
        """``reduce_and_partition_stream.synchronize()`` at the end of backward: every gradient
        block recorded on the reduce stream is reusable again."""
        for window in self.flushed:
            for handle in window:
                self.a.free(handle)
        self.flushed = []

    def optimizer(self, grads: list[int], first: bool) -> None:
        a = self.a
        self._end_of_backward()
        self._flush()
        self._synchronize()
        self.traced = True
        if self.plan.offload_optimizer != "none":
            return
        _norm_upcasts(self.plan, a)
        for group in zero3_sub_groups(self.plan):
            flat = a.malloc(2 * group)
            fp32 = a.malloc(4 * group)
            a.free(flat)
            if first:
                self.states += [a.malloc(4 * group), a.malloc(4 * group)]
            temp = a.malloc(4 * group)
            a.free(temp)
            a.free(fp32)


def _zero3_init(plan: Plan, alloc: CachingAllocator) -> None:
    """``deepspeed.initialize`` for ZeRO-3: each parameter is partitioned (offloaded partitions go
    to the host); the partitions are defragmented into one flat buffer (through the host, with
    ``empty_cache`` between); each sub-group's fp32 master is a clone of its fp32 conversion;
    ``initialize_optimizer_states`` allocates and drops one fp32 gradient buffer; then the IPG
    bucket and the 16-bit gradient partition are allocated for good."""
    m, n = plan.model, plan.data_parallel
    part = -(-m.params // n)
    groups = zero3_sub_groups(plan)
    sizes = [size for size in m.tensor_sizes if size]
    # under zero.Init each parameter is partitioned as it is created; a model built on the GPU
    # first (as the calibration runs did) leaves its freed full-size blocks cached
    originals = [None] * len(sizes) if plan.zero_init else [alloc.malloc(2 * size) for size in sizes]
    if plan.offload_param == "none":
        partitions = []
        for handle, size in zip(originals, sizes):
            partitions.append(alloc.malloc(2 * -(-size // n)))
            if handle is not None:
                alloc.free(handle)
        for handle in partitions:          # zero/utils.py defragment: via the host, then empty_cache
            alloc.free(handle)
        alloc.empty_cache()
        alloc.malloc(2 * part)
    else:
        for handle in originals:
            if handle is not None:
                alloc.free(handle)
    if plan.offload_optimizer == "none":
        for group in groups:                     # _create_fp32_partitions: .to(fp32), then .clone()
            converted = alloc.malloc(4 * group)
            alloc.malloc(4 * group)
            alloc.free(converted)
        alloc.free(alloc.malloc(4 * max(groups)))
    alloc.malloc(2 * plan.reduce_bucket_size)
    if plan.offload_optimizer == "none":
        alloc.malloc(2 * part)


def _deepspeed_persistent(plan: Plan, alloc: CachingAllocator) -> None:
    """What ``deepspeed.initialize`` leaves on the GPU (see memory/states.py for the bytes)."""
    for component in deepspeed_states(plan).resting:
        if component.bytes:
            alloc.malloc(component.bytes)


def simulate_deepspeed(plan: Plan) -> Peaks:
    alloc = CachingAllocator()
    if plan.zero_stage in (1, 2) and plan.precision != "fp32":
        _zero_init(plan, alloc)
        step = _ZeroStep(plan, alloc)
    elif plan.zero_stage == 3 and plan.precision != "fp32":
        _zero3_init(plan, alloc)
        step = _Zero3Step(plan, alloc)
    else:
        _deepspeed_persistent(plan, alloc)
        step = _DeepSpeedStep(plan, alloc, [])
    step.run(first=True)
    alloc.reset_peaks()      # no empty_cache between steps; step 2 is the steady state (ZeRO-3 has traced)
    step.run(first=False)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)


class _FsdpStep(_Step):
    """FSDP: flat fp32 shards at rest; FULL_SHARD unshards each decoder layer's parameters in the
    compute dtype for its forward and again for its backward; gradients are reduce-scattered into
    fp32 shards, which the optimizer steps with one shard-sized temporary."""

    def _param_grads(self, modules) -> list[int]:
        return []

    def _gather(self, index: int) -> list[int]:
        if self.plan.fsdp_strategy not in ("FULL_SHARD", "HYBRID_SHARD"):
            return []
        c_b = 4 if self.plan.precision == "fp32" else 2
        return [self.a.malloc(c_b * size) for _, size in self.m.layers[index].modules if size]

    def optimizer(self, grads: list[int], first: bool) -> None:
        if self.plan.offload_param != "none":
            return
        shard = -(-self.plan.model.params // self.plan.data_parallel)
        gradients = self.a.malloc(4 * shard)
        temp = self.a.malloc(4 * shard)
        self.a.free(temp)
        self.a.free(gradients)


def simulate_fsdp(plan: Plan) -> Peaks:
    alloc = CachingAllocator()
    for component in fsdp_states(plan).resting:
        if component.bytes and component.name != "unsharded units":    # units are gathered per layer
            alloc.malloc(component.bytes)
    step = _FsdpStep(plan, alloc, [])
    step.run(first=True)
    alloc.reset_peaks()
    step.run(first=False)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)
