"""Replay an FSDP training step (``torch.distributed.fsdp``) as Accelerate wraps the model.

Accelerate's ``transformer_based_wrap`` makes each decoder layer a unit; the final norm and
lm_head (with the embedding, when tied) are one unit that is not resharded after forward; an
untied embedding is a unit of its own. What one unit costs, in the order FSDP2 allocates it
(recorded on the CPU by dev/trace_fsdp.py, tests/test_fsdp_trace.py):

- unshard: the local shard cast to the compute dtype (a transient of U/N) and the all-gather
  output (U), both on the all-gather copy-in stream, then the per-parameter unsharded tensors
  copied out of it (U). The all-gather output is kept until the next unit's all-gather
  (``AllGatherState``), so two are alive across a unit;
- backward: each parameter's unsharded gradient (U); at the unit's post-backward its parameters
  are freed, the gradients are copied into the reduce-scatter input (U, kept until the next
  reduce-scatter) and freed, and the reduce-scatter output (U/N, the reduce dtype) becomes an fp32
  gradient shard (4 B x U/N) that lives until ``zero_grad`` — both on the reduce-scatter stream
  (``_fsdp_collectives.py`` ``foreach_reduce``);
- ``optimizer.step()``: foreach AdamW over the fp32 shards (m and v on the first step, one
  shard-sized temporary).

FSDP1 all-gathers into the unit's flat parameter itself (on its unshard stream: no separate
output to keep) and, with ``use_orig_params`` as Accelerate sets it, concatenates the parameters'
gradients into a flat gradient (U) before the unit is resharded, reduce-scatters it on its
post-backward stream and frees it (``_flat_param.py``, ``_runtime_utils.py``; recorded too). Offloaded
shards, their gradients and the step live on the host.
"""

from __future__ import annotations

from vramlint.memory.parts.adapters import lora_tensors
from vramlint.memory.parts.allocator import CachingAllocator, Peaks
from vramlint.memory.parts.states import foreach, state_tensors
from vramlint.memory.runtimes.fsdp.states import (
    fsdp_base_bytes,
    fsdp_lora_units,
    fsdp_mixed,
    fsdp_shard_count,
    fsdp_stage,
    fsdp_states,
    fsdp_tail_holds_embedding,
    fsdp_tail_unit,
    fsdp_trained_bytes,
    fsdp_unit,
)
from vramlint.memory.runtimes.torch.step import Step, between_steps, replayed_micro_batches
from vramlint.plan import Plan

GATHER, REDUCE = 1, 2      # the all-gather (copy-in) and reduce-scatter streams: pools of their own


class FsdpStep(Step):
    """One FSDP training step: units unsharded around their forward and backward, gradients
    reduce-scattered into fp32 shards at each unit's post-backward."""

    def __init__(self, plan: Plan, alloc: CachingAllocator) -> None:
        super().__init__(plan, alloc, [], replayed_micro_batches(plan))
        self.n = fsdp_shard_count(plan)
        self.c_b = 4 if plan.precision == "fp32" else 2
        self.state_bytes = self.c_b          # the gradients' bytes (a tied weight's sum too)
        self.shard_b = fsdp_trained_bytes(plan)    # a trained shard's, its gradient shard's and Adam's moments' bytes
        self.fsdp2 = plan.fsdp_version == 2
        self.lora = fsdp_lora_units(plan)    # LoRA: the adapters are units of their own, the base's frozen
        # a frozen base shard is in the compute dtype: nothing to cast, but an offloaded one is copied in
        self.cast = not self.lora or plan.offload_param != "none"
        self.resharding = fsdp_stage(plan) == 3
        self.root_first = fsdp_tail_holds_embedding(plan)    # the lm_head unit is gathered first
        self.tail_sizes = list(fsdp_tail_unit(plan))
        self.offload = plan.offload_param != "none"
        self.all_gather: int | None = None       # FSDP2: the last all-gather's output
        self.reduce_scatter: int | None = None   # FSDP2: the last reduce-scatter's input
        self.held: dict[int, list[int]] = {}     # units kept unsharded from forward to backward, or prefetched
        self.prefetching = False
        self.shard_grads: list[int] = []
        self.tail: list[int] = []               # the unit that holds lm_head, while unsharded
        self.tail_grads: list[int] = []         # its gradients, kept to its post-backward
        self.layer_grads: list[int] = []        # the current layer's unsharded gradients
        self.accumulated: dict[object, list[int]] = {}    # no_sync: each unit's unsharded gradients

    # units ---------------------------------------------------------------------------------
    def _unshard(self, sizes: list[int]) -> list[int]:
        """One unit's all-gather: the unsharded parameters (one flat parameter under FSDP1)."""
        a, total = self.a, sum(sizes)
        # the local shard in the compute dtype; offloaded, its fp32 copy to the GPU (not recorded: on
        # the CPU the host is the device)
        copy = fsdp_base_bytes(self.plan) if self.lora else self.shard_b if self.offload else self.c_b
        cast = a.malloc(copy * -(-total // self.n), GATHER) if self.cast else None
        if not self.fsdp2:
            flat = a.malloc(self.c_b * self.n * -(-total // self.n), GATHER)
            if cast is not None:
                a.free(cast)
            return [flat]
        out = a.malloc(self.c_b * total, GATHER)
        if cast is not None:
            a.free(cast)
        params = [a.malloc(self.c_b * size) for size in sizes if size]
        if self.all_gather is not None:
            a.free(self.all_gather)
        self.all_gather = out
        return params

    def _post_backward(self, unit: object, params: list[int], grads: list[int], trained: int) -> None:
        """A unit's parameters resharded (FSDP1: once its flat gradient is made), its gradients
        reduce-scattered into an fp32 shard. Under ``no_sync`` (a micro-batch before the step's
        last) nothing is reduced: FSDP2 keeps each parameter's unsharded gradient
        (``unsharded_accumulated_grad``), a later micro-batch's are added into them and freed, and
        the step's last micro-batch reduce-scatters the sum; FSDP1 keeps the unit's unsharded flat
        gradient, makes a new one in each later micro-batch and adds the kept one into it, which
        is freed: the sum is kept for the next micro-batch, or reduced in the step's last
        (recorded, ``dev/trace_fsdp.py --accumulate --micro-batches 3``)."""
        a = self.a
        if self.fsdp2 or not trained:
            for handle in params:
                a.free(handle)
            params = []
        if not trained:
            return
        kept = self.accumulated.pop(unit, [])
        if self.fsdp2 and kept:
            for handle in grads:
                a.free(handle)
            grads, kept = kept, []
        if self.fsdp2 and not self.syncing:
            self.accumulated[unit] = grads
            return
        shard = -(-trained // self.n)
        if self.fsdp2:
            if self.reduce_scatter is not None:
                a.free(self.reduce_scatter)
            self.reduce_scatter = a.malloc(self.c_b * trained)
            flat = None
        else:                   # use_orig_params: the gradients concatenated into the flat gradient
            flat = a.malloc(self.c_b * trained)
        for handle in grads + params:
            a.free(handle)
        if not self.syncing:            # a middle micro-batch: the new sum kept, the old one freed
            for handle in kept:
                a.free(handle)
            self.accumulated[unit] = [flat]
            return
        out = a.malloc(self.c_b * shard, REDUCE)
        if self.offload:
            pass
        elif self.accumulating and self.plan.sync_each_batch:     # added into the unit's gradient shard
            a.free(a.malloc(self.shard_b * shard, REDUCE))
        else:
            self.shard_grads.append(a.malloc(self.shard_b * shard, REDUCE))
        a.free(out)
        for handle in kept + ([flat] if flat is not None else []):
            a.free(handle)

    def _layer_sizes(self, index: int) -> list[int]:
        return fsdp_unit(self.plan, self.m.layers[index])

    def _gather(self, index: int) -> list[int]:
        """A layer's parameters (kept from forward, or prefetched); in backward FSDP1's
        BACKWARD_PRE then prefetches the layer before it."""
        params = self.held.pop(index) if index in self.held else self._unshard(self._layer_sizes(index))
        if self.prefetching and index > 0:
            self.held[index - 1] = self._unshard(self._layer_sizes(index - 1))
        return params

    def backward(self, kept, inputs, casts, residual, head, lsm) -> list[int]:
        """FSDP1's root pre-backward prefetches the last layer at the loss."""
        self.prefetching = not self.fsdp2 and self.resharding
        if self.prefetching:
            last = self.m.num_layers - 1
            self.held[last] = self._unshard(self._layer_sizes(last))
        grads = super().backward(kept, inputs, casts, residual, head, lsm)
        self.prefetching = False
        return grads

    def _release(self, index: int, gathered: list[int], forward: bool) -> None:
        if forward and not self.resharding:
            self.held[index] = gathered
        elif forward:
            for handle in gathered:
                self.a.free(handle)
        else:
            trained = sum(self._layer_sizes(index))
            if self.lora:
                trained = sum(size for _, size in lora_tensors(self.m.layers[index], self.plan))
            self._post_backward(index, gathered, self.layer_grads, trained)
            self.layer_grads = []

    # forward, loss, backward ---------------------------------------------------------------
    def forward(self):
        """The unit that holds lm_head is not resharded after its forward. Under FSDP1 it is the
        root (embedding, final norm, lm_head), gathered first; under FSDP2 a tied tail is gathered
        first too, for the embedding, an untied one after the layers, the untied embedding being
        a unit of its own, resharded after use."""
        m = self.m
        if self.root_first:
            self.tail = self._unshard(self.tail_sizes)
        else:
            for handle in self._unshard([m.embedding_params]):
                self.a.free(handle)
        out = super().forward()
        if not self.root_first:
            self.tail = self._unshard(self.tail_sizes)
        return out

    def loss(self, kept):
        """The root's post-forward, once the loss is computed, frees the last all-gather output."""
        out = super().loss(kept)
        if self.all_gather is not None:
            self.a.free(self.all_gather)
            self.all_gather = None
        return out

    def _param_grads(self, modules) -> list[int]:
        """Unsharded gradients in the compute dtype, kept per unit until its post-backward. FSDP2's
        untied tail is reduce-scattered as soon as lm_head's gradient is made; a unit that holds
        the embedding waits for the embedding's, at the end of backward. (The final norm's few
        elements are left out.)"""
        for group, size in modules:
            if group == "head" and not self.root_first:
                self._post_backward("tail", self.tail, [self.a.malloc(self.c_b * size)], sum(self.tail_sizes))
                self.tail = []
            elif group in ("head", "embedding") and self.root_first:
                grad = self.a.malloc(self.c_b * size)
                if not self._held_for_tied(group, grad, size):
                    self.tail_grads.append(grad)
            elif group == "embedding":
                self._embedding_backward()
            elif size and group != "small":
                self.layer_grads.append(self.a.malloc(self.c_b * size))
        return []

    def _embedding_backward(self) -> None:
        """An untied embedding's unit, gathered again for its backward and reduce-scattered."""
        size = self.m.embedding_params
        params = self._unshard([size])
        self._post_backward("embedding", params, [self.a.malloc(self.c_b * size)], size)

    def _tied_embedding_grad(self) -> list[int]:
        """The sum of a tied weight's two gradients (``Step._summed_tied``) is the tail unit's
        gradient, reduced at its post-backward."""
        summed = self._summed_tied()
        if summed is not None:
            self.tail_grads.append(summed[0])
        return []

    def _end_of_micro_batch(self) -> None:
        """The end of backward: the unit with the embedding (or LoRA's frozen tail) is resharded
        last; the last all-gather and reduce-scatter buffers are released."""
        a = self.a
        if self.tail:
            self._post_backward("tail", self.tail, self.tail_grads, sum(self.tail_sizes) if self.tail_grads else 0)
        self.tail, self.tail_grads = [], []
        for handle in (self.all_gather, self.reduce_scatter):
            if handle is not None:
                a.free(handle)
        self.all_gather = self.reduce_scatter = None

    def optimizer(self, grads: list[int], first: bool) -> None:
        a = self.a
        self._end_of_micro_batch()
        if self.offload:
            return
        shards = [-(-size // self.n) for size in self._trained_sizes()]     # one DTensor shard per parameter
        if first:
            self.states += [a.malloc(size) for size in state_tensors(self.plan, shards, self.shard_b)]
        temps = [a.malloc(self.shard_b * shard) for shard in shards] if foreach(self.plan) else []
        for handle in temps + self.shard_grads:
            a.free(handle)
        self.shard_grads = []

    def _trained_sizes(self) -> list[int]:
        if self.plan.lora_rank:
            return [size for layer in self.m.layers for _, size in lora_tensors(layer, self.plan)]
        return list(self.m.tensor_sizes)


def _fsdp1_lazy_init(plan: Plan, alloc: CachingAllocator) -> None:
    """FSDP1's lazy initialisation, at the first forward (``FlatParamHandle.init_flat_param_attributes``,
    root unit first, then the layers): each unit's low-precision shard (``_mp_shard``), its padded
    unsharded flat parameter (``_full_param_padded``) and, under mixed precision, the full-precision
    one (``_full_prec_full_param_padded``) are allocated and their storage freed at once — a LoRA
    model's frozen base is in the compute dtype already, so only the unsharded one. What is
    left is cached segments the size of the largest unit, up to 4 B x its elements — which the fp32
    logits later reuse (recorded, dev/trace_fsdp.py)."""
    n, mixed = fsdp_shard_count(plan), fsdp_mixed(plan)
    stored = fsdp_base_bytes(plan) if fsdp_lora_units(plan) else fsdp_trained_bytes(plan)   # no low-precision copy
    units = [sum(fsdp_tail_unit(plan))] + [sum(fsdp_unit(plan, layer)) for layer in plan.model.layers]
    for total in units:
        shard = -(-total // n)
        sizes = [2 * shard] if mixed else []
        if n > 1:
            sizes += [(2 if mixed else stored) * n * shard] + ([4 * n * shard] if mixed else [])
        for size in sizes:
            alloc.free(alloc.malloc(size))


def simulate_fsdp(plan: Plan) -> Peaks:
    """The fp32 shards at rest, two steps, the second's peaks (Adam's states from the first)."""
    alloc = CachingAllocator()
    for component in fsdp_states(plan).resting:
        if component.bytes and component.name == "parameter shards":
            alloc.malloc(component.bytes)
    if plan.fsdp_version == 1:
        _fsdp1_lazy_init(plan, alloc)
    step = FsdpStep(plan, alloc)
    step.run(first=True)
    between_steps(plan, alloc)
    step.run(first=False)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)
