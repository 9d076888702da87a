"""Replay a step's allocations through the caching-allocator model to get reserved memory.

The tensor sizes are the same ones the analytic model counts (``activations.layer_tensors``, the
model's modules, the optimizer's states); what the replay adds is their order, so the allocator
model can tell which freed blocks later requests reuse. The order follows PyTorch and
transformers: forward layer by layer, the loss, backward layer by layer in reverse (parameter
gradients appear as activations are released), then ``optimizer.step()`` — which on the first
step creates Adam's m and v inside whatever blocks backward left cached — and
``zero_grad(set_to_none=True)``. Two steps are replayed with ``empty_cache`` between them, as the
calibration runs did, and the second step's peaks are reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.memory import activations as act
from vramlint.memory.allocator import CachingAllocator
from vramlint.memory.states import trainable
from vramlint.memory.weights import DTYPE_BYTES
from vramlint.plan import Plan

LINEAR_GROUPS = ("attention", "mlp", "experts", "router")


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
        kept, inputs, casts, residual = self.forward()
        head, lsm = self.loss(kept)
        grads = self.backward(kept, inputs, casts, residual, head, lsm)
        self.optimizer(grads, first)

    # forward -------------------------------------------------------------------------------
    def forward(self):
        a, tokens, w, m = self.a, self.tokens, self.w, self.m
        residual = a.malloc(w.r * m.hidden_size * tokens)
        kept: list[list[int]] = []
        inputs: list[int | None] = []
        casts: list[list[int]] = []
        for layer in m.layers:
            layer_casts = self._casts(layer)
            tensors = [a.malloc(t * tokens) for t in act.layer_tensors(layer, m, self.plan)]
            new_residual = a.malloc(w.r * m.hidden_size * tokens)
            if self.plan.grad_checkpointing:
                for handle in tensors:
                    a.free(handle)
                inputs.append(residual)
                tensors = []
            else:
                inputs.append(None)
                a.free(residual)
            residual = new_residual
            kept.append(tensors)
            casts.append(layer_casts)
        return kept, inputs, casts, residual

    def _casts(self, layer) -> list[int]:
        if not self.plan.autocast:
            return []
        return [self.a.malloc(2 * size) for group, size in layer.modules if group in LINEAR_GROUPS]

    def loss(self, kept):
        a, m, tokens = self.a, self.m, self.tokens
        logits = tokens * m.vocab_size // self.plan.tensor_parallel
        head = [a.malloc(t * tokens) for t in self._head_tensors()]
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

    def _head_tensors(self) -> list[int]:
        total = act.head_bytes_per_token(self.m, self.plan)
        return [4 * self.m.hidden_size, total - 4 * self.m.hidden_size]

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
        grads += self._param_grads([("embedding", m.embedding_params)] if m.head_params else [])
        a.free(grad)
        return grads

    def _layer_backward(self, index, kept, checkpoint_input, casts, grad, grads) -> int:
        a, m, tokens, w = self.a, self.m, self.tokens, self.w
        layer = m.layers[index]
        if checkpoint_input is not None:
            casts = self._casts(layer)
            kept = [a.malloc(t * tokens) for t in act.layer_tensors(layer, m, self.plan)]
        grads += self._param_grads(list(layer.modules))
        widest = max(act.layer_tensors(layer, m, self.plan))
        scratch = a.malloc(widest * tokens)
        new_grad = a.malloc(w.r * m.hidden_size * tokens)
        for handle in kept + casts + [scratch, grad]:
            a.free(handle)
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
        out += list(layer.modules)
    if m.head_params:
        out.append(("head", m.head_params))
    return out


def simulate_training(plan: Plan) -> Peaks:
    """Torch-runtime training: weights loaded, two steps, peaks of the second (as measured)."""
    alloc = CachingAllocator()
    params = _trainable_tensors(plan)
    w_b = DTYPE_BYTES[plan.weights_dtype or "bfloat16"]
    for _, size in [("embedding", plan.model.embedding_params)] + [
            item for layer in plan.model.layers for item in layer.modules] + [("head", plan.model.head_params)]:
        if size:
            alloc.malloc(w_b * size)
    step = _Step(plan, alloc, params)
    step.run(first=True)
    alloc.empty_cache()
    alloc.reset_peaks()
    step.run(first=False)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)
