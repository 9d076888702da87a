"""Dev-only: what torchtitan's llama3 block keeps for backward under each activation-checkpointing
policy, and the loss head's peaks, recorded on the CPU (memory/runtimes/torchtitan/activations.py).

The block is torchtitan v0.2.2's (torchtitan/models/llama3/model/model.py:141-169 RoPE in complex
fp32, :229-305 attention with separate wq/wk/wv and SDPA with enable_gqa, :342 w2(silu(w1 x) * w3 x),
:382-413 nn.RMSNorm pre-norms), computed in bf16 as FSDP2's MixedPrecisionPolicy(param_dtype=bf16)
runs it. The policies are v0.2.2's (torchtitan/distributed/activation_checkpoint.py): "full"
wraps the block in a non-reentrant checkpoint; "op" saves the outputs of the ops in
``_op_sac_save_list`` (llama3/infra/parallelize.py:35-51) except every second mm; the CPU's flash
kernel (``_scaled_dot_product_flash_attention_for_cpu``, same outputs as CUDA's flash op: out and
logsumexp) stands in for the CUDA SDPA ops of that list. The loss is v0.2.2's
``cross_entropy(pred.flatten(0, 1).float(), labels)`` with ``del pred`` before backward
(torchtitan/components/loss.py, train.py); under TP its logits are Shard(-1) DTensors and the loss runs
in torch's ``loss_parallel()`` (torchtitan's train context), traced on a one-rank gloo mesh: the same
handlers (torch/distributed/tensor/parallel/loss.py) run on any mesh. Their local tensors are made
under DTensor's dispatch, which a dispatch mode above it does not see, so that loss is watched
through the profiler's memory events (every allocation and free of the CPU allocator) instead.

Every storage an aten op makes is watched until it dies (parameters and the block's input
excepted). Prints JSON: per policy the bytes kept after forward and the peak above that in
backward, per token; for the loss the peaks per logit.

    python3 -m venv /tmp/tt && /tmp/tt/bin/pip install torch==2.13.0
    /tmp/tt/bin/python dev/torchtitan_block.py > tests/data/torchtitan_block.json
"""

from __future__ import annotations

import json
import weakref
from collections import defaultdict
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

aten = torch.ops.aten
SAVE = {aten.mm.default, aten._scaled_dot_product_flash_attention_for_cpu.default,
        aten._scaled_dot_product_efficient_attention.default, aten._scaled_dot_product_flash_attention.default,
        aten.max.default}


class Live(TorchDispatchMode):
    """Bytes of the storages aten ops made that are still alive, and their peak."""

    def __init__(self, exclude: set[int]) -> None:
        super().__init__()
        self.exclude, self.alive, self.now, self.peak = exclude, {}, 0, 0

    def _free(self, ptr: int) -> None:
        self.now -= self.alive.pop(ptr)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                s = t.untyped_storage()
                ptr = s.data_ptr()
                if ptr and ptr not in self.exclude and ptr not in self.alive:
                    self.alive[ptr] = s.nbytes()
                    self.now += s.nbytes()
                    self.peak = max(self.peak, self.now)
                    weakref.finalize(s, self._free, ptr)
        return out


def kept_per_token(call, skip: set[int], tokens: int) -> float:
    """Bytes a token that ``call()``'s output keeps alive for backward (its own storage and the
    storages in ``skip`` left out), its backward then run (the torchtitan 0.2.2 / 0.3.0 traces)."""
    with Live(skip) as live:
        out = call()
        kept = live.now - out.untyped_storage().nbytes()
        live.peak = live.now
        out.backward(torch.ones_like(out))
    return kept / tokens


def saved_tensors(call, skip: set[int], tokens: int) -> list:
    """What autograd saves in ``call()``, in order: [shape, dtype, bytes a token], each storage once."""
    seen: dict = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip and ptr not in seen:
            seen[ptr] = [list(t.shape), str(t.dtype).removeprefix("torch."), t.untyped_storage().nbytes() / tokens]
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        call()
    return list(seen.values())


def storages(*tensors) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors}


def rope(xq, xk, freqs):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs.view(1, xq_.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * f).flatten(3).type_as(xq), torch.view_as_real(xk_ * f).flatten(3).type_as(xk)


class Block(nn.Module):
    def __init__(self, h: int, heads: int, kv: int, ffn: int) -> None:
        super().__init__()
        d = h // heads
        self.heads, self.kv, self.d = heads, kv, d
        self.wq, self.wk = nn.Linear(h, heads * d, bias=False), nn.Linear(h, kv * d, bias=False)
        self.wv, self.wo = nn.Linear(h, kv * d, bias=False), nn.Linear(heads * d, h, bias=False)
        self.w1, self.w2 = nn.Linear(h, ffn, bias=False), nn.Linear(ffn, h, bias=False)
        self.w3 = nn.Linear(h, ffn, bias=False)
        self.attention_norm, self.ffn_norm = nn.RMSNorm(h, eps=1e-5), nn.RMSNorm(h, eps=1e-5)

    def attention(self, x, freqs):
        b, s, _ = x.shape
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        q, k, v = q.view(b, s, -1, self.d), k.view(b, s, -1, self.d), v.view(b, s, -1, self.d)
        q, k = rope(q, k, freqs)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                           enable_gqa=True).transpose(1, 2).contiguous()
        return self.wo(o.view(b, s, -1))

    def _ffn(self, h):
        n = self.ffn_norm(h)
        return self.w2(F.silu(self.w1(n)) * self.w3(n))


def block_forward(block: Block, x, freqs):
    h = x + block.attention(block.attention_norm(x), freqs)
    return h + block._ffn(h)


def op_policy():
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == aten.mm.default:
            meta[mode] += 1
        save = func in SAVE and not (func == aten.mm.default and meta[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy)


def run_block(policy: str, h: int, heads: int, kv: int, ffn: int, b: int, s: int) -> dict:
    torch.manual_seed(0)
    block = Block(h, heads, kv, ffn).to(torch.bfloat16)
    d = h // heads
    freqs = torch.polar(torch.ones(s, d // 2), torch.randn(s, d // 2))
    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    exclude = {p.untyped_storage().data_ptr() for p in block.parameters()} | {x.untyped_storage().data_ptr(),
                                                                              freqs.untyped_storage().data_ptr()}
    fn = partial(block_forward, block)
    with Live(exclude) as live:
        if policy == "none":
            out = fn(x, freqs)
        elif policy == "full":
            out = checkpoint(fn, x, freqs, use_reentrant=False, preserve_rng_state=False)
        else:
            out = checkpoint(fn, x, freqs, use_reentrant=False, preserve_rng_state=False, context_fn=op_policy)
        out_bytes = out.untyped_storage().nbytes()
        kept = live.now - out_bytes
        live.peak = live.now
        grad = torch.ones_like(out)
        base = live.now
        out.backward(grad)
        backward = live.peak - base
    tokens = b * s
    return {"kept_per_token": kept / tokens, "backward_peak_per_token": backward / tokens}


def run_loss(compiled: bool, h: int, vocab: int, b: int, s: int) -> dict:
    torch.manual_seed(0)
    head = nn.Linear(h, vocab, bias=False).to(torch.bfloat16)
    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (b, s))
    exclude = {p.untyped_storage().data_ptr() for p in head.parameters()} | {x.untyped_storage().data_ptr(),
                                                                             labels.untyped_storage().data_ptr()}
    with Live(exclude) as live:
        pred = head(x)
        loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
        forward_peak = live.peak
        del pred
        after = live.now
        live.peak = live.now
        loss.backward()
        backward_peak = live.peak
    logits = b * s * vocab
    return {"forward_peak_per_logit": forward_peak / logits, "kept_per_logit": after / logits,
            "backward_peak_per_logit": backward_peak / logits}


def run_loss_parallel(h: int, vocab: int, b: int, s: int) -> dict:
    """The loss of the ColwiseParallel output's Shard(-1) logits under ``loss_parallel()``, per
    logit of the rank's shard (the head's input and weight excluded, as ``run_loss`` has them)."""
    import os

    import torch.distributed as dist
    import torch.profiler as profiler
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import loss_parallel

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,))
    torch.manual_seed(0)
    x = distribute_tensor(torch.randn(b, s, h, dtype=torch.bfloat16), mesh, [Replicate()]).requires_grad_()
    weight = distribute_tensor(torch.randn(vocab, h, dtype=torch.bfloat16), mesh, [Shard(0)])
    labels = torch.randint(0, vocab, (b, s))
    marks = ("forward", "backward", "end")
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        with profiler.record_function(marks[0]), loss_parallel():
            pred = F.linear(x, weight)
            loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
        del pred
        with profiler.record_function(marks[1]), loss_parallel():
            loss.backward()
        with profiler.record_function(marks[2]):
            pass
    dist.destroy_process_group()
    live, peaks, current = 0, {}, None
    for event in sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns()):
        if event.name() in marks and event.name() not in peaks:
            current = event.name()
            peaks[current] = (live, live)
        elif event.name() == "[memory]" and current is not None:
            live += event.nbytes()
            peaks[current] = (peaks[current][0], max(peaks[current][1], live))
    logits = b * s * vocab
    return {"forward_peak_per_logit": peaks["forward"][1] / logits,
            "kept_per_logit": peaks["backward"][0] / logits,
            "backward_peak_per_logit": peaks["backward"][1] / logits}


SHAPES = ({"h": 512, "heads": 8, "kv": 2, "ffn": 1792, "b": 2, "s": 256},
          {"h": 1024, "heads": 16, "kv": 4, "ffn": 3584, "b": 1, "s": 256},
          {"h": 512, "heads": 8, "kv": 8, "ffn": 1024, "b": 1, "s": 256})


def main() -> None:
    """The block's kept bytes per token under each policy at three shapes (kv: key/value heads,
    head_dim h / heads; the block's own input excluded: the caller holds it), and the loss's."""
    out = {"torch": torch.__version__, "blocks": [], "loss": run_loss(False, 512, 4096, 2, 256),
           "loss_parallel": run_loss_parallel(512, 4096, 2, 256)}
    for shape in SHAPES:
        out["blocks"].append({"shape": shape, **{policy: run_block(policy, **shape)["kept_per_token"]
                                                 for policy in ("none", "full", "op")}})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
