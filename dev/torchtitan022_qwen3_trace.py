"""Dev-only: what torchtitan 0.2.2's own qwen3 block keeps for backward, recorded on the CPU
(memory/runtimes/torchtitan/activations.py; tests/data/torchtitan022_qwen3_trace.json).

The block is the wheel's (``Qwen3Model`` of ``qwen3_args["debugmodel"]`` and of a narrow GQA shape,
one layer; torchtitan/models/qwen3/model/model.py: separate wq / wk / wv, RMSNorm over each head's q
and k, RoPE with the cos / sin cache cast to the activations' dtype, SDPA), its parameters in bf16 as
FSDP2's MixedPrecisionPolicy computes, the model's rope_cache buffer kept fp32. The policies are
0.2.2's own ``apply_ac`` (distributed/activation_checkpoint.py) with qwen3's ``_op_sac_save_list``
(models/qwen3/infra/parallelize.py:39-54), the CPU's flash op added to it as it stands in for the
CUDA SDPA ops there. Kept: what the block holds after its forward, per token (its parameters, input,
the model's buffers and positions excluded), and, without checkpointing, each saved tensor.

    python3 -m venv /tmp/tt2 && /tmp/tt2/bin/pip install torch==2.13.0 torchtitan==0.2.2 triton
    /tmp/tt2/bin/python dev/torchtitan022_qwen3_trace.py > tests/data/torchtitan022_qwen3_trace.json
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchtitan_block import kept_per_token, saved_tensors, storages  # noqa: E402

B, L = 2, 256
CPU_SDPA = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


def _model(shape: str):
    from torchtitan.models.qwen3 import qwen3_args
    from torchtitan.models.qwen3.model.model import Qwen3Model
    args = qwen3_args["debugmodel"]
    if shape == "narrow":                  # four query heads to each key/value head, q wider than h
        args = dataclasses.replace(args, n_heads=8, n_kv_heads=2, head_dim=64, hidden_dim=512)
    args = dataclasses.replace(args, n_layers=1, max_seq_len=L)
    torch.manual_seed(0)
    model = Qwen3Model(args)
    with torch.no_grad():
        model.init_weights()
    for parameter in model.parameters():
        parameter.data = parameter.data.to(torch.bfloat16)
    return args, model


def run_block(shape: str, policy: str) -> dict:
    from torchtitan.config.job_config import ActivationCheckpoint
    from torchtitan.distributed.activation_checkpoint import apply_ac
    from torchtitan.models.qwen3.infra.parallelize import _op_sac_save_list
    args, model = _model(shape)
    if policy != "none":
        config = ActivationCheckpoint(mode="full" if policy == "full" else "selective", selective_ac_option="op")
        apply_ac(model, config, op_sac_save_list=_op_sac_save_list | {CPU_SDPA})
    x = torch.randn(B, L, args.dim, dtype=torch.bfloat16, requires_grad=True)
    skip = storages(*model.parameters(), *model.buffers(), x)
    kept = kept_per_token(lambda: model.layers["0"](x, model.rope_cache, None, None), skip, B * L)
    return {"shape": {"h": args.dim, "heads": args.n_heads, "kv": args.n_kv_heads, "head_dim": args.head_dim,
                      "ffn": args.hidden_dim}, "policy": policy, "b": B, "s": L, "kept_per_token": kept}


def saved(shape: str) -> list:
    """The tensors autograd saves in the block's forward without checkpointing, in order."""
    args, model = _model(shape)
    x = torch.randn(B, L, args.dim, dtype=torch.bfloat16, requires_grad=True)
    skip = storages(*model.parameters(), *model.buffers(), x)
    return saved_tensors(lambda: model.layers["0"](x, model.rope_cache, None, None), skip, B * L)


def main() -> None:
    out = {"torch": torch.__version__, "torchtitan": __import__("importlib.metadata").metadata.version("torchtitan"),
           "blocks": [run_block(shape, policy) for shape in ("debugmodel", "narrow")
                      for policy in ("none", "full", "op")],
           "saved": {shape: saved(shape) for shape in ("debugmodel", "narrow")}}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
