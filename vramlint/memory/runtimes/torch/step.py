"""Replay a training step's allocations through the caching-allocator model to get reserved memory.

The tensor sizes are the same ones the analytic model counts (``activations.layer_tensors``, the
model's parameter tensors, the optimizer's states); what the replay adds is their order, so the
allocator model can tell which freed blocks later requests reuse. The order follows PyTorch and
transformers: forward layer by layer, the loss, backward layer by layer in reverse — within a
layer the MLP's backward before the attention's, each sublayer's gradients appearing as its
kept tensors are released (the order dev/trace_allocations.py records) — then
``optimizer.step()``, which on the first step creates Adam's m and v inside whatever blocks
backward left cached, and ``zero_grad(set_to_none=True)``. Two steps are replayed, the cache kept
between them as a training loop keeps it (``between_steps``), and the second step's peaks are
reported. Under (non-reentrant) gradient checkpointing the forward keeps nothing but each layer's
input, so it runs op by op like a no_grad forward (``nograd.forward_layer``), and backward
re-materialises one layer's kept tensors at a time.

This module holds the plain-PyTorch step, which the other runtimes' replays extend
(``runtimes/deepspeed/step.py``, ``runtimes/fsdp/step.py``); the op-by-op forward and the inference
prefill are in ``memory/nograd.py``.
"""

from __future__ import annotations

from vramlint.memory.nograd import forward_layer, load_weights
from vramlint.memory.parts import activations as act
from vramlint.memory.parts.adapters import lora_tensors, trainable_tensors, trained_bytes
from vramlint.memory.parts.allocator import CachingAllocator, Peaks
from vramlint.memory.parts.loss import into_lm_head, loss_head
from vramlint.memory.parts.states import PAGED_MIN, foreach, state_tensors
from vramlint.memory.parts.weights import DTYPE_BYTES
from vramlint.memory.runtimes.torch.states import ddp_buckets
from vramlint.plan import Plan

CAST_GROUPS = ("attention", "mlp", "router")     # grouped_mm experts are not autocast ops: never cast
SUBLAYER = {"attention": 0, "small": 0, "mlp": 1, "experts": 1, "router": 1}   # parameter group -> sublayer
# Under gradient accumulation the micro-batches after the first find the same tensors alive, and
# from the third on the allocator as the one before left it: replaying 3, 4 or 8 gives the same
# peaks on the 41 measured training setups (plain PyTorch and DeepSpeed) and on Llama-3.1-70B's
# ZeRO-1 example (2 would not: 928.0 GiB there where 3 and more give 935.9), so 3 are replayed.
REPLAYED_MICRO_BATCHES = 3


def replayed_micro_batches(plan: Plan) -> int:
    return min(plan.grad_accum, REPLAYED_MICRO_BATCHES)


def by_sublayer(tensors) -> list[list[tuple[str, int]]]:
    """A layer's (group, size) parameter tensors split into the attention's and the MLP's."""
    parts: list[list[tuple[str, int]]] = [[], []]
    for group, size in tensors:
        parts[SUBLAYER.get(group, 0)].append((group, size))
    return parts


class Step:
    """One training step of the torch runtime, replayed into an allocator: ``micro_batches``
    forward and backward passes, then the optimizer. The DeepSpeed and FSDP replays subclass it,
    each doing with a micro-batch's gradients what its runtime does (``_param_grads``,
    ``_end_of_micro_batch``)."""

    def __init__(self, plan: Plan, alloc: CachingAllocator, trained: list[int], micro_batches: int = 1) -> None:
        self.plan, self.a = plan, alloc
        self.micro_batches = micro_batches
        self.m = plan.model
        self.tokens = plan.rows * plan.seq_len
        self.w = act.widths(plan)
        self.trained = trained          # the sizes of the tensors the optimizer holds, in its order
        self.state_bytes = trained_bytes(plan)
        self.states: list[int] = []
        self.micro_batch = 0            # which micro-batch of the step is running
        self.tied: tuple[int, int] | None = None     # a tied lm_head's gradient, waiting for the embedding's
        self.graph: int | None = None   # the previous micro-batch's graph's ctx tensors (Plan.graph_held)

    def run(self, first: bool) -> None:
        grads: list[int] = []
        for micro_batch in range(self.micro_batches):
            self.micro_batch = micro_batch
            size = act.attention_masks(self.plan, self.w.r)      # alive through forward and backward
            masks = self.a.malloc(size) if size else None
            kept, inputs, casts, residual = self.forward()
            head, lsm = self.loss(kept)
            if self.graph is not None:       # the loop's new loss: the previous graph goes (Plan.graph_held)
                self.a.free(self.graph)
                self.graph = None
            grads += self.backward(kept, inputs, casts, residual, head, lsm)
            held = act.held_inputs(self.plan) * self.tokens
            self.graph = self.a.malloc(held) if held else None
            if masks is not None:
                self.a.free(masks)
            if micro_batch < self.micro_batches - 1:
                self._end_of_micro_batch()
        self.optimizer(grads, first)

    @property
    def accumulating(self) -> bool:
        """A later micro-batch: its gradients add into the first one's."""
        return self.micro_batch > 0

    @property
    def syncing(self) -> bool:
        """The step's last micro-batch (the others run under ``no_sync``), or every one where the
        loop syncs each (``Plan.sync_each_batch``)."""
        return self.micro_batch == self.micro_batches - 1 or self.plan.sync_each_batch

    def _end_of_micro_batch(self) -> None:
        """The end of a micro-batch's backward, before the next micro-batch of the step: plain
        PyTorch has nothing to do (AccumulateGrad already added into ``.grad``); ZeRO reduces what
        it holds, FSDP finishes its last units. (ZeRO-3 and FSDP run theirs at the step's end too.)"""

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
                residual, tensors = forward_layer(self.plan, a, layer, residual, tokens, w, cache=False)
            else:
                tensors = self._keep(layer)
                inputs.append(None)
                new_residual = a.malloc(w.r * m.hidden_size * tokens)
                a.free(residual)
                residual = new_residual
            kept.append(tensors)
            casts.append(layer_casts)
            self._release(index, gathered, forward=True)
        return kept, inputs, casts, residual

    def _keep(self, layer) -> list[list[int]]:
        """A layer's forward with autograd on: what it keeps for backward, by sublayer, and — for
        transformers' grouped_mm experts — the transients around it: the gate_up and down outputs before their
        sentinel ``masked_fill`` copies, the routing-weighted output and its re-ordered copy."""
        a, tokens = self.a, self.tokens
        kept = [[a.malloc(t * tokens) for t in part] for part in act.sublayer_tensors(layer, self.m, self.plan)]
        mlp = layer.mlp
        if mlp.kind == "moe":
            e, k = self.w.r, mlp.experts_per_token
            for width in (2 * mlp.intermediate, self.m.hidden_size, self.m.hidden_size, self.m.hidden_size):
                a.free(a.malloc(e * k * width * tokens))
        return kept

    def _gather(self, index: int) -> list[int]:
        """Parameters fetched for one layer (ZeRO-3 / FSDP); none here."""
        return []

    def _release(self, index: int, gathered: list[int], forward: bool) -> None:
        """After a layer's forward or backward: what was gathered for it is freed."""
        for handle in gathered:
            self.a.free(handle)

    def _casts(self, layer) -> list[list[int]]:
        """autocast's 16-bit copies of the layer's linear weights, by sublayer (none of 4-bit
        linears: bitsandbytes dequantizes inside its matmul)."""
        if not self.plan.autocast or self.plan.quantized_base:
            return [[], []]
        return [[self.a.malloc(2 * size) for group, size in part if group in CAST_GROUPS]
                for part in by_sublayer(layer.parameter_tensors)]

    @property
    def outputs_to_fp32(self) -> bool:
        """Accelerate's ``prepare_model`` under mixed precision (``native_amp``: every runtime but
        DeepSpeed) wraps the forward in ``convert_outputs_to_fp32``, so the logits it returns get
        an fp32 copy that lives until the outputs die, once the loss is taken (recorded under FSDP,
        whose plans are Accelerate's; a plain ``torch.autocast`` script has none)."""
        plan = self.plan
        return plan.precision != "fp32" and (plan.runtime == "fsdp" or
                                             (plan.runtime == "torch" and plan.source == "accelerate"))

    def loss(self, kept):
        a, m, tokens = self.a, self.m, self.tokens
        logits = tokens * m.vocab_size   # gathered on every TP rank (training._logits)
        head = [a.malloc(t * tokens) for t in act.head_tensors(m, self.plan)]
        lm_cast = a.malloc(2 * m.vocab_size * m.hidden_size) if self.plan.autocast else None
        if self.plan.loss not in ("full", "full-4.48"):   # memory/loss.py: what it keeps, and its forward's moment
            sizes = loss_head(self.plan)
            kept_loss = a.malloc(sizes.kept[0])
            a.free(a.malloc(sizes.forward[0]))
            return head + ([lm_cast] if lm_cast is not None else []), kept_loss
        bf16 = a.malloc(2 * logits)
        extra = [a.malloc(2 * logits)] if m.block.logit_softcap else []
        upcast = a.malloc(4 * logits)
        shifted = a.malloc(4 * logits) if self.plan.loss == "full-4.48" else None
        lsm = a.malloc(4 * logits)
        a.free(upcast)
        if shifted is not None:
            a.free(shifted)
        converted = a.malloc(4 * logits) if self.outputs_to_fp32 else None
        a.free(bf16)
        if converted is not None:           # dies with the outputs, once the loss is taken
            a.free(converted)
        if lm_cast is not None:
            head.append(lm_cast)
        return head + extra, lsm

    # backward ------------------------------------------------------------------------------
    def backward(self, kept, inputs, casts, residual, head, lsm) -> list[int]:
        a, m, tokens, w = self.a, self.m, self.tokens, self.w
        if self.plan.grad_checkpointing and self.plan.autocast:
            for layer_casts in casts:            # autocast's cache dies with the autocast region
                for handle in layer_casts[0] + layer_casts[1]:
                    a.free(handle)
            casts = [[[], []] for _ in casts]
        logits = tokens * m.vocab_size   # gathered on every TP rank (memory/loss.py)
        handed = into_lm_head(self.plan).bytes    # what the loss's backward hands lm_head's
        if self.plan.loss not in ("full", "full-4.48"):
            g_16 = a.malloc(handed)
            a.free(lsm)
        else:
            g_out = a.malloc(4 * logits)
            g_in = a.malloc(4 * logits)
            a.free(g_out)
            a.free(lsm)
            g_16 = a.malloc(handed)
            a.free(g_in)
        grad = a.malloc(w.r * m.hidden_size * tokens)
        # lm_head's gradient, then the final norm's: under DeepSpeed the first gradient hook to fire
        # (a tied lm_head's waits for the embedding's), which sets up the reduce bucket
        frozen = self.plan.lora_rank > 0        # LoRA: only the layers' adapters get gradients
        grads = [] if frozen else self._param_grads([("head", m.head_params or m.vocab_size * m.hidden_size),
                                                     ("small", m.final_norm_params)])
        for handle in head + [g_16, residual]:
            a.free(handle)
        for index in reversed(range(m.num_layers)):
            grad = self._layer_backward(index, kept[index], inputs[index], casts[index], grad, grads)
        if not frozen and m.head_params:
            grads += self._param_grads([("embedding", m.embedding_params)])
        elif not frozen:
            grads += self._tied_embedding_grad()
        a.free(grad)
        return grads

    def _held_for_tied(self, group: str, grad: int, size: int) -> bool:
        """A tied lm_head's gradient is not a parameter's gradient yet: autograd holds it in its
        input buffer until the embedding's arrives (``_tied_embedding_grad``)."""
        if group != "head" or self.m.head_params:
            return False
        self.tied = (grad, size)
        return True

    def _summed_tied(self) -> tuple[int, int] | None:
        """A tied weight: the embedding's dense gradient and lm_head's, held since the loss, summed
        into a third tensor (``embedding_dense_backward``, then ``add``: recorded, plain PyTorch
        and DeepSpeed alike); the sum and its size."""
        if self.tied is None:
            return None
        a, (head, size) = self.a, self.tied
        self.tied = None
        dense = a.malloc(self.state_bytes * size)
        total = a.malloc(self.state_bytes * size)
        a.free(head)
        a.free(dense)
        return total, size

    def _tied_embedding_grad(self) -> list[int]:
        """The sum, which AccumulateGrad keeps as ``.grad`` (in a later micro-batch adds into it
        and frees)."""
        summed = self._summed_tied()
        if summed is None:
            return []
        if self.accumulating:
            self.a.free(summed[0])
            return []
        return [summed[0]]

    def _layer_backward(self, index, kept, checkpoint_input, casts, grad, grads) -> int:
        a, m, tokens, w = self.a, self.m, self.tokens, self.w
        layer = m.layers[index]
        gathered = self._gather(index)
        if checkpoint_input is not None:
            casts = self._casts(layer)
            kept = self._keep(layer)
        sizes = act.sublayer_tensors(layer, m, self.plan)
        params = by_sublayer(lora_tensors(layer, self.plan) if self.plan.lora_rank else layer.parameter_tensors)
        dequantized = act.dequantized(layer, m, self.plan)
        for part in reversed(range(len(sizes))):    # the MLP's backward runs first, then the attention's
            grads += self._param_grads(params[part])
            if dequantized[part]:       # QLoRA: a 4-bit weight in 16 bit for its input's gradient
                a.free(a.malloc(dequantized[part]))
            scratch = a.malloc(max(sizes[part]) * tokens)
            new_grad = a.malloc(w.r * m.hidden_size * tokens)   # the gradient of the sublayer's input
            for handle in kept[part] + casts[part] + [scratch, grad]:
                a.free(handle)
            grad = new_grad
        self._release(index, gathered, forward=False)
        if checkpoint_input is not None:
            a.free(checkpoint_input)
        return grad

    def _param_grads(self, modules) -> list[int]:
        """Each parameter's gradient as backward produces it (with LoRA the adapters', fp32, as
        their sublayer's backward runs). A weight autocast cast gets its
        gradient in 16 bit first (the matmul's), which the cast's backward (``ToCopyBackward``)
        turns into the fp32 gradient that AccumulateGrad keeps: the 16-bit one dies right after.
        In a later micro-batch AccumulateGrad adds the new gradient into ``.grad`` in place
        (``variable_grad += new_grad``) and the new one dies too."""
        grads = []
        for group, size in modules:
            if not size:
                continue
            cast = self.a.malloc(2 * size) if self.plan.autocast and group in CAST_GROUPS + ("head",) else None
            grad = self.a.malloc(self.state_bytes * size)
            if cast is not None:
                self.a.free(cast)
            if self._held_for_tied(group, grad, size):
                continue
            grads.append(grad)
            if self.accumulating or self.plan.optimizer_in_bwd:    # added into .grad, or stepped and freed
                self.a.free(grads.pop())
        return grads

    # optimizer -----------------------------------------------------------------------------
    def optimizer(self, grads: list[int], first: bool) -> None:
        a = self.a
        if first:
            held = [size for size in self.trained if not self.plan.paged_optimizer or size < PAGED_MIN]
            self.states += [a.malloc(size) for size in state_tensors(self.plan, held, self.state_bytes)]
        temps = [a.malloc(self.state_bytes * size) for size in self.trained] if foreach(self.plan) else []
        for handle in temps + grads:
            a.free(handle)


def between_steps(plan: Plan, alloc: CachingAllocator) -> None:
    """From the first replayed step to the second, whose peaks are reported. A training loop does
    not empty PyTorch's cache (HF Trainer, Accelerate and DeepSpeed do not by default), so what the
    first step reserved stays reserved and the second reaches its peak on top of it: the loop's
    steady state, which nvidia-smi shows for the rest of the run. A loop that calls
    ``torch.cuda.empty_cache()`` before each step (``plan.empty_cache_each_step``; the calibration
    runs of measure.py did) gets back every segment that holds nothing by then."""
    if plan.empty_cache_each_step:
        alloc.empty_cache()
    alloc.reset_peaks()


def simulate_training(plan: Plan) -> Peaks:
    """Torch-runtime training: weights loaded (with LoRA, then PEFT's adapters on top), two
    steps, peaks of the second."""
    alloc = CachingAllocator()
    load_weights(plan, alloc, DTYPE_BYTES[plan.weights_dtype or "bfloat16"])
    trained = trainable_tensors(plan)
    step = Step(plan, alloc, trained, replayed_micro_batches(plan))
    for size in trained if plan.lora_rank else []:      # get_peft_model: each adapter's A and B
        alloc.malloc(step.state_bytes * size)
    for size in ddp_buckets(plan):          # DistributedDataParallel(model): the Reducer's buckets
        alloc.malloc(size)
    step.run(first=True)
    between_steps(plan, alloc)
    step.run(first=False)
    return Peaks(alloc.peak_allocated, alloc.peak_reserved)
