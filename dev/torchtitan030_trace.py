"""Dev-only: what torchtitan 0.3.0's own block and chunked loss hold, recorded on the CPU
(memory/runtimes/torchtitan/activations.py ``op_fused``, step.py ``_chunked_loss``).

The block is the wheel's own (``model_registry("debugmodel")`` of llama3 and qwen3, one layer, built
as the trainer builds it and cast to bf16 as FSDP2's MixedPrecisionPolicy computes): the fused QKV
projection, qwen3's q / k norms, each block's RoPE cache. FlexAttention's backward does not run on
the CPU, so SDPA stands in for it (``ScaledDotProductAttention``: the same saved out + logsumexp);
the wheel's policies wrap it (FullAC, SelectiveAC), SelectiveAC's save list given the CPU's flash
op beside the CUDA ones it lists (as FlexAttention's HOP is on a GPU). Kept: what the block holds
after its forward, per token (its parameters, input, RoPE cache and positions excluded).

The loss is the wheel's ``ChunkedLossWrapper`` over a bf16 output projection (CrossEntropyLoss,
eager), called as the trainer calls it (forward and each chunk's backward inside the call), its
peak above the hidden states per logit of a chunk, and what is alive when the call returns.

    python3 -m venv /tmp/tt3 && /tmp/tt3/bin/pip install torch==2.13.0 torchtitan==0.3.0 triton torchao
    /tmp/tt3/bin/python dev/torchtitan030_trace.py > tests/data/torchtitan030_trace.json
"""

from __future__ import annotations

import json
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchtitan_block import Live, kept_per_token, saved_tensors, storages  # noqa: E402

B, L = int(os.environ.get("TRACE_B", 2)), 256


def _with_cpu_attention(acm) -> None:
    """SelectiveAC's save list, plus the CPU's SDPA op standing in for FlexAttention's HOP."""
    listed = acm._get_default_save_ops

    def save_ops():
        return listed() | {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}
    acm._get_default_save_ops = save_ops


def _one_block(name: str):
    """The registry's debugmodel of ``name`` cut to one block, SDPA in FlexAttention's place, its
    parameters in bf16 as FSDP2 computes (the RoPE caches keep their dtype): (config, model)."""
    from torchtitan.models.common.attention import ScaledDotProductAttention
    registry = __import__(f"torchtitan.models.{name}", fromlist=["model_registry"]).model_registry
    config = registry("debugmodel").model
    config.layers = config.layers[:1]
    config.layers[0].attention.inner_attention = ScaledDotProductAttention.Config()
    torch.manual_seed(0)
    model = config.build()
    model.init_states()
    for parameter in model.parameters():
        parameter.data = parameter.data.to(torch.bfloat16)
    return config, model


def run_block(name: str, policy: str) -> dict:
    import torchtitan.distributed.activation_checkpoint as acm
    config, model = _one_block(name)
    if policy != "none":
        _with_cpu_attention(acm)
        (acm.FullAC if policy == "full" else acm.SelectiveAC).Config().build().apply(model)
    x = torch.randn(B, L, config.dim, dtype=torch.bfloat16, requires_grad=True)
    positions = torch.arange(L).repeat(B, 1)
    skip = storages(*model.parameters(), *model.buffers(), x, positions)
    kept = kept_per_token(lambda: model.layers["0"](x, None, positions), skip, B * L)
    attention = config.layers[0].attention
    qkv = attention.qkv_linear
    shape = {"h": config.dim, "heads": qkv.n_heads, "kv": qkv.n_kv_heads, "head_dim": qkv.head_dim,
             "ffn": config.layers[0].feed_forward.w1.out_features, "qk_norm": attention.qk_norm is not None}
    return {"model": name, "policy": policy, "shape": shape, "b": B, "s": L, "kept_per_token": kept}


def run_loss(chunks: int, b: int, s: int, h: int, vocab: int) -> dict:
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
    from torchtitan.config import CompileConfig
    torch.manual_seed(0)
    head = nn.Linear(h, vocab, bias=False).to(torch.bfloat16)
    hidden = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (b, s))
    wrapper = ChunkedLossWrapper.Config(num_chunks=chunks, loss_fn=CrossEntropyLoss.Config(global_vocab_size=vocab))
    loss_fn = wrapper.build(compile_config=CompileConfig())
    loss_fn.set_lm_head(head)
    with Live(storages(*head.parameters(), hidden, labels)) as live:
        loss, _ = loss_fn(hidden, labels, torch.tensor(b * s))
        after = live.now
    rows = b * s // chunks
    logits = rows * vocab
    return {"chunks": chunks, "b": b, "s": s, "h": h, "vocab": vocab, "peak": live.peak, "after": after,
            "peak_per_chunk_logit": live.peak / logits}


def saved(name: str) -> list:
    """The tensors autograd saves in the block's forward without checkpointing, in order (shape,
    dtype, bytes a token): what ``none`` counts, term by term."""
    config, model = _one_block(name)
    x = torch.randn(B, L, config.dim, dtype=torch.bfloat16, requires_grad=True)
    positions = torch.arange(L).repeat(B, 1)
    skip = storages(*model.parameters(), *model.buffers(), x, positions)
    return saved_tensors(lambda: model.layers["0"](x, None, positions), skip, B * L)


def main() -> None:
    out = {"torch": torch.__version__, "torchtitan": __import__("importlib.metadata").metadata.version("torchtitan"),
           "blocks": [run_block(name, policy) for name in ("llama3", "qwen3") for policy in ("none", "full", "op")],
           "saved": {name: saved(name) for name in ("llama3", "qwen3")},
           "loss": [run_loss(8, 2, 256, 256, 4096), run_loss(4, 1, 512, 512, 4096), run_loss(8, 1, 512, 256, 8192)]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
