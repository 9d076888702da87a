"""Replay DeepSpeed's step from ``deepspeed.initialize`` on (DeepSpeed 0.19 source).

``_ZeroStep`` is ZeRO-1/2 (``runtime/zero/stage_1_and_2.py``), ``_Zero3Step`` ZeRO-3
(``runtime/zero/stage3.py``, ``partitioned_param_coordinator.py``) with its all-gather and
reduce streams, each a pool of its own in the allocator model; ``_DeepSpeedStep`` ZeRO-0. Without
mixed precision the ZeRO replays hold 4-byte elements (``states.ds_width``) and skip the fp32
upcasts, which are the same tensor then (``.to(fp32)`` of an fp32 tensor). Two steps
(``runtimes/torch/step.py`` ``between_steps``), the second's peaks reported: ZeRO-3's
coordinator has traced the module order by then.
"""

from __future__ import annotations

from vramlint.memory.parts.adapters import quant_states, trainable, trainable_tensors
from vramlint.memory.parts.allocator import CachingAllocator, Peaks
from vramlint.memory.parts.states import state_tensors
from vramlint.memory.runtimes.deepspeed.states import (
    MAX_REDUCE_EVENTS,
    base_bytes,
    deepspeed_states,
    ds_width,
    zero3_fetches,
    zero3_keep_distance,
    zero3_kept,
    zero3_sub_groups,
    zero12_grad_partition,
)
from vramlint.memory.runtimes.torch.step import Step, between_steps, replayed_micro_batches
from vramlint.plan import Plan


class _DeepSpeedStep(Step):
    """DeepSpeed ZeRO-0 (``BF16_Optimizer``, or in fp32 the client optimizer itself): the states
    of ``states.py`` allocated at once; per-parameter gradients kept until the step, which
    converts them into a flat fp32 gradient buffer and runs the optimizer on the flat fp32 master
    copy (one temporary of the same size). The ZeRO stages have their own replays below
    (``_ZeroStep``, ``_Zero3Step``).
    """

    def __init__(self, plan: Plan, alloc: CachingAllocator, trained: list[int], micro_batches: int = 1) -> None:
        super().__init__(plan, alloc, trained, micro_batches)
        self.state_bytes = self.width        # the gradients' bytes (a tied weight's sum too)

    @property
    def width(self) -> int:
        """Bytes of the parameters and their gradients: 16-bit, or fp32 without mixed precision."""
        return ds_width(self.plan)

    def _param_grads(self, modules) -> list[int]:
        """As plain PyTorch's, in the parameters' width (no autocast under DeepSpeed) — except
        where the gradients are streamed to the host."""
        if self.plan.offload_optimizer != "none":
            return []
        return super()._param_grads(modules)

    def optimizer(self, grads: list[int], first: bool) -> None:
        """``BF16_Optimizer.step``: the gradients upcast into one flat fp32 buffer, then the
        optimizer's temporary; in fp32 the client optimizer steps the gradients as they are."""
        a, p = self.a, trainable(self.plan)
        if self.plan.offload_optimizer != "none":
            for handle in grads:
                a.free(handle)
            return
        fp32_grads = a.malloc(4 * p) if self.width == 2 else None
        temp = a.malloc(4 * p)
        for handle in [temp, fp32_grads, *grads]:
            if handle is not None:
                a.free(handle)


class _HookedStep(Step):
    """DeepSpeed ZeRO's gradient hooks: each gradient autograd produces is taken (``_take``) by
    the stage's reduction as soon as its accumulation hook fires."""

    @property
    def width(self) -> int:
        """Bytes of an element of the parameters, gradients and buckets (``states.ds_width``)."""
        return ds_width(self.plan)

    def _param_grads(self, modules) -> list[int]:
        for group, size in modules:
            if not size:
                continue
            grad = self.a.malloc(self.width * size)
            if not self._held_for_tied(group, grad, size):
                self._take(grad, size)
        return []

    def _tied_embedding_grad(self) -> list[int]:
        """The sum of a tied weight's two gradients (``Step._summed_tied``) is what the hook fires
        for, once, at the end of backward (recorded on the CPU, dev/trace_deepspeed.py)."""
        self.tied = self._summed_tied()
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
    (allocated at the first gradient hook of the step, with ``overlap_comm`` a second one beside
    it, released at the epilogue) and freed; a
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
        super().__init__(plan, alloc, [], replayed_micro_batches(plan))
        self.part = -(-trainable(plan) // plan.data_parallel)
        self.bucket: int | None = None
        self.second: int | None = None
        self.partition: int | None = None
        self.filled = 0
        self.oversized: list[int] = []
        self.sizes: list[int] = []
        self.pending: list[tuple[int, int]] = []

    def _take(self, grad: int, size: int) -> None:
        if self.bucket is None:     # setup_buckets: a second buffer with overlap_comm, for the reduction stream
            self.bucket = self.a.malloc(self.width * self.plan.reduce_bucket_size)
            self.second = self.a.malloc(self.width * self.plan.reduce_bucket_size) if self.plan.overlap_comm else None
        if self.plan.zero_stage == 2:
            self._copy(grad, size)
        elif self.accumulating:     # AccumulateGrad added it into the .grad ZeRO-1 keeps
            self.a.free(grad)
        else:
            self.pending.append((grad, size))

    def _end_of_micro_batch(self) -> None:
        """A micro-batch before the step's last: ZeRO-2's epilogue reduces what is left in the
        bucket into ``grads_in_partition`` and releases the buckets; ZeRO-1 reduces nothing
        before the boundary (``allreduce_gradients``), so its gradients and bucket stay."""
        self._end_of_backward()
        if self.plan.zero_stage == 2:
            self._flush()
            self._release_buckets()

    def _release_buckets(self) -> None:
        for handle in (self.bucket, self.second):
            if handle is not None:
                self.a.free(handle)
        self.bucket = self.second = None

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
                if self.width == 2:
                    self.a.free(self.a.malloc(4 * size))
        elif self.partition is None:      # the whole parameters overlapping the rank's part
            self.partition = self.a.malloc(self.width * zero12_grad_partition(self.plan))
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
        self._release_buckets()
        if self.plan.offload_optimizer != "none":      # the CPU optimizer steps on the host
            return
        _norm_upcasts(self.plan, a)
        flat = a.malloc(self.width * self.part)
        fp32 = a.malloc(4 * self.part) if self.width == 2 else flat
        if fp32 != flat:
            a.free(flat)
        a.free(self.partition)
        self.partition = None
        if first:
            self.states += [a.malloc(size) for size in state_tensors(self.plan, [self.part], 4)]
        if self.plan.optimizer == "adamw":
            a.free(a.malloc(4 * self.part))
        a.free(fp32)


def _gathered(plan: Plan, group: str, size: int, width: int) -> int:
    """Bytes of a module's gathered parameters: ``width`` a value, QLoRA's 4-bit linears packed."""
    return base_bytes(plan, group, size) if plan.load_in_4bit else width * size


def _load_frozen_base(plan: Plan, alloc: CachingAllocator) -> None:
    """With LoRA the base model's parameters, frozen: loaded once, never flattened or freed."""
    if plan.lora_rank:
        for group, size in plan.model.parameter_tensors:
            alloc.malloc(base_bytes(plan, group, size))
        if plan.load_in_4bit:
            alloc.malloc(quant_states(plan))


def _zero_init(plan: Plan, alloc: CachingAllocator) -> None:
    """``deepspeed.initialize`` for ZeRO-1/2 on a model moved to the GPU: the trainable parameters
    are flattened into one buffer (the originals freed; when the GPU cannot hold both, DeepSpeed
    moves the originals to the host and empties the cache first), the fp32 master partition is a
    clone upcast (the 16-bit clone freed; an fp32 clone is the master itself), and
    ``initialize_optimizer_states`` allocates and drops one fp32 gradient partition."""
    trained = trainable_tensors(plan)
    t, w = sum(trained), ds_width(plan)
    part = -(-t // plan.data_parallel)
    if plan.offload_optimizer != "none":        # the gradient staging buffer for the copies to the host
        alloc.malloc(w * max(trained))
    _load_frozen_base(plan, alloc)
    originals = [alloc.malloc(w * size) for size in trained]
    on_gpu = alloc.reserved + w * t <= plan.cluster.gpu.memory_bytes    # flatten_on_accelerator
    if not on_gpu:
        for handle in originals:
            alloc.free(handle)
        alloc.empty_cache()
    alloc.malloc(w * t)
    for handle in originals if on_gpu else []:
        alloc.free(handle)
    clone = alloc.malloc(w * part)
    if plan.offload_optimizer == "none":        # the fp32 master and its first gradient stay on the GPU
        if w == 2:
            alloc.malloc(4 * part)
        alloc.free(alloc.malloc(4 * part))
    if w == 2 or plan.offload_optimizer != "none":
        alloc.free(clone)


GATHER, REDUCE = 1, 2      # DeepSpeed's all-gather and reduce-and-partition CUDA streams
NORM_CHUNK = 250_000_000   # stage3.py _constant_buffered_norm2: fp64 norms in chunks of this many elements


def _norm_upcasts(plan: Plan, alloc: CachingAllocator) -> None:
    """The gradient norm (for clipping and the logged norm): ZeRO's ``get_grad_norm_direct``
    upcasts each gradient piece of the local partition to fp64 (``get_norm_dtype``), one at a
    time, 8 B per element."""
    part = -(-trainable(plan) // plan.data_parallel)
    for size in trainable_tensors(plan):
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
        super().__init__(plan, alloc, [], replayed_micro_batches(plan))
        self.fetching = zero3_fetches(plan)
        self.kept = zero3_kept(plan.model, zero3_keep_distance(plan))
        self.traced = False
        self.embedding: int | None = None        # the gathered embedding / lm_head, while it is
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
        return [self.a.malloc(_gathered(self.plan, group, size, self.width), GATHER) for group, size in parts if size]

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
        return self.a.malloc(self.width * size, GATHER) if self.fetching and size else None

    def _param_grads(self, modules) -> list[int]:
        """lm_head's parameters go once its backward is done — unless they are a tied embedding the
        coordinator keeps: the embedding's own backward, after the layers', uses them again."""
        tied_kept = self.traced and self.kept.embedding
        if any(group == "head" for group, _ in modules) and self.embedding is not None and not tied_kept:
            self.a.free(self.embedding)
            self.embedding = None
        return super()._param_grads(modules)

    def _end_of_backward(self) -> None:
        """The tied weight's summed gradient taken, the embedding kept gathered for it is released
        (recorded: dev/trace_deepspeed.py ... --world 2 --config hidden_size=512 ...)."""
        super()._end_of_backward()
        if self.embedding is not None:
            self.a.free(self.embedding)
            self.embedding = None

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
        flat = self._scatter_buffer()
        if self.plan.offload_optimizer != "none":
            copies = []
            for size in self.bucket:
                piece = -(-size // n)
                copies.append(a.malloc(self.width * piece, REDUCE))
                a.free(a.malloc(8 * min(piece, NORM_CHUNK), REDUCE))
                if self.width == 2:
                    a.free(a.malloc(4 * piece, REDUCE))
            for handle in copies:
                a.free(handle)
        if flat is not None:
            a.free(flat)
        if len(self.flushed) > MAX_REDUCE_EVENTS:       # the host waits for the oldest reduction
            for handle in self.flushed.pop(0):
                a.free(handle)
        self.flushed.append(self.window + self.oversized)
        self.bucket, self.oversized, self.window, self.filled = [], [], [], 0

    def _scatter_buffer(self) -> int | None:
        """``reduce_scatter_coalesced`` (runtime/comm/coalesced_collectives.py) concatenates the
        bucket's gradients, each padded to a multiple of the ranks, into one flat 16-bit buffer on
        the reduce stream — even on one GPU — unless the bucket is a single gradient that needs no
        padding; the partitions are views of it until they are copied into the gradient partition."""
        n, sizes = self.plan.data_parallel, self.bucket
        if not sizes or (len(sizes) == 1 and sizes[0] % n == 0):
            return None
        return self.a.malloc(self.width * n * sum(-(-size // n) for size in sizes), REDUCE)

    def _synchronize(self) -> None:
        """``reduce_and_partition_stream.synchronize()`` at the end of backward: every gradient
        block recorded on the reduce stream is reusable again."""
        for window in self.flushed:
            for handle in window:
                self.a.free(handle)
        self.flushed = []

    def _end_of_micro_batch(self) -> None:
        """The end of a micro-batch's backward: the last bucket reduce-scattered, added into the
        gradient partition in place (``partition_grads`` past ``micro_step_id`` 0)."""
        self._end_of_backward()
        self._flush()
        self._synchronize()
        self.traced = True

    def optimizer(self, grads: list[int], first: bool) -> None:
        a = self.a
        self._end_of_micro_batch()
        if self.plan.offload_optimizer != "none":
            return
        _norm_upcasts(self.plan, a)
        for group in zero3_sub_groups(self.plan):
            flat = a.malloc(self.width * group)
            fp32 = a.malloc(4 * group) if self.width == 2 else flat
            if fp32 != flat:
                a.free(flat)
            if first:
                self.states += [a.malloc(size) for size in state_tensors(self.plan, [group], 4)]
            if self.plan.optimizer == "adamw":
                a.free(a.malloc(4 * group))
            a.free(fp32)


def _zero3_init(plan: Plan, alloc: CachingAllocator) -> None:
    """``deepspeed.initialize`` for ZeRO-3: each parameter is partitioned (offloaded partitions go
    to the host); the trainable ones' partitions are defragmented into one flat buffer (through
    the host, with ``empty_cache`` between; LoRA's frozen base keeps its partitions); each
    sub-group's fp32 master is a clone of its fp32 conversion (without mixed precision, the
    partition itself: stage3.py ``_create_fp32_partitions``); ``initialize_optimizer_states``
    allocates and drops one fp32 gradient buffer; then the IPG bucket and the gradient partition
    are allocated for good, and every trainable parameter is gathered once."""
    n, w = plan.data_parallel, ds_width(plan)
    trained = trainable_tensors(plan)
    part = -(-sum(trained) // n)
    groups = zero3_sub_groups(plan)
    frozen = [base_bytes(plan, group, size) for group, size in plan.model.parameter_tensors] if plan.lora_rank else []
    sizes = frozen + [w * size for size in trained]        # bytes
    if plan.load_in_4bit:
        alloc.malloc(quant_states(plan))
    # under zero.Init each parameter is partitioned as it is created; a model built on the GPU
    # first (as the calibration runs did) leaves its freed full-size blocks cached
    originals = [None] * len(sizes) if plan.zero_init else [alloc.malloc(size) for size in sizes]
    if plan.offload_param == "none":
        partitions = []
        for handle, size in zip(originals, sizes):
            partitions.append(alloc.malloc(w * -(-size // (w * n))))
            if handle is not None:
                alloc.free(handle)
        for handle in partitions[len(frozen):]:     # zero/utils.py defragment: via the host, then empty_cache
            alloc.free(handle)
        alloc.empty_cache()
        alloc.malloc(w * part)
    else:
        for handle in originals:
            if handle is not None:
                alloc.free(handle)
    if plan.offload_optimizer == "none":
        for group in groups if w == 2 else []:     # _create_fp32_partitions: .to(fp32), then .clone()
            converted = alloc.malloc(4 * group)
            alloc.malloc(4 * group)
            alloc.free(converted)
        alloc.free(alloc.malloc(4 * max(groups)))
    alloc.malloc(w * plan.reduce_bucket_size)
    if plan.offload_optimizer == "none":
        alloc.malloc(w * part)
    for size in trained:     # create_reduce_and_remove_grad_hooks: param.all_gather() of each, released
        alloc.free(alloc.malloc(w * size))


def _deepspeed_persistent(plan: Plan, alloc: CachingAllocator) -> None:
    """What ``deepspeed.initialize`` leaves on the GPU (see states.py beside it for the bytes)."""
    for component in deepspeed_states(plan).resting:
        if component.bytes:
            alloc.malloc(component.bytes)


def initialize(plan: Plan, alloc: CachingAllocator) -> Step:
    """``deepspeed.initialize`` replayed into ``alloc``; returns the stage's step."""
    if plan.zero_stage in (1, 2):
        _zero_init(plan, alloc)
        return _ZeroStep(plan, alloc)
    if plan.zero_stage == 3:
        _zero3_init(plan, alloc)
        return _Zero3Step(plan, alloc)
    _deepspeed_persistent(plan, alloc)
    return _DeepSpeedStep(plan, alloc, [], replayed_micro_batches(plan))     # later micro-batches add into .grad


def simulate_deepspeed(plan: Plan) -> Peaks:
    alloc = CachingAllocator()
    step = initialize(plan, alloc)
    step.run(first=True)
    between_steps(plan, alloc)
    step.run(first=False)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)
