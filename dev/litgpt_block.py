"""Dev-only: what LitGPT's own model code keeps for backward, one block and the loss head,
recorded on the CPU (tests/data/litgpt/litgpt_block.json; readers/litgpt.py, memory/parts/loss.py).

LitGPT 0.5.13 runs its own ``GPT`` (litgpt/model.py), not transformers': one fused ``qkv``
linear, RoPE ending in ``torch.cat``, grouped k / v ``repeat_interleave``d to every head before
SDPA, its ``RMSNorm`` multiplying the weight in fp32 (litgpt/model.py RMSNorm.forward). Under
``precision: bf16-true`` every parameter is bf16 and nothing is autocast; LoRA (litgpt/lora.py)
adds ``lora_dropout(x) @ A^T @ B^T`` to each adapted linear, the fused qkv's zero-padded.

For each case (a config of litgpt's own, shrunk to two layers with its kind of attention, MLP and
norm kept) one training forward at ``SEQ`` tokens sums the distinct storages the second block's
ops save (parameters and buffers excluded; the first block's input needs no gradient under LoRA,
so its norm saves less than every other block's), as ``dev/saved_tensors.py`` does for transformers. The loss is
the fine-tuning scripts' (litgpt/finetune/lora.py ``model(input_ids, lm_head_chunk_size=128)``,
``chunked_cross_entropy``) and full.py's (whole logits, 128-row chunks): what stays alive from the
forward to the backward, per logit.

    python3 -m venv /tmp/lgv && /tmp/lgv/bin/pip install torch==2.13.0 litgpt==0.5.13
    /tmp/lgv/bin/python dev/litgpt_block.py > tests/data/litgpt/litgpt_block.json
"""

from __future__ import annotations

import json
import sys
import warnings

import torch

SEQ = 256
CASES = ("Llama-2-7b-hf", "Meta-Llama-3-8B", "tiny-llama-1.1b", "phi-2", "falcon-7b", "stablelm-base-alpha-3b",
         "gemma-2b", "Mistral-7B-v0.1", "gemma-2-2b")
LORA = dict(lora_r=8, lora_alpha=16, lora_dropout=0.05, lora_query=True, lora_key=False, lora_value=True)


def shrunk(name: str) -> dict:
    """The config's own kinds at a CPU's size: two layers, 4 heads of 64, its KV sharing kept."""
    from litgpt.config import Config
    c = Config.from_name(name)
    groups = 4 if c.n_query_groups == c.n_head else (1 if c.n_query_groups == 1 else 2)
    return dict(name=name, n_layer=2, n_embd=256, n_head=4, head_size=64, n_query_groups=groups,
                intermediate_size=688, vocab_size=512, padded_vocab_size=512, block_size=SEQ,
                rotary_percentage=c.rotary_percentage, parallel_residual=c.parallel_residual,
                shared_attention_norm=c.shared_attention_norm, bias=c.bias, mlp_class_name=c.mlp_class_name,
                norm_class_name=c.norm_class_name, norm_eps=c.norm_eps, scale_embeddings=c.scale_embeddings,
                gelu_approximate=c.gelu_approximate, attn_bias=c.attn_bias,
                # Gemma-2's: attention scores softcapped in LitGPT's own attention (no SDPA), the
                # logits softcapped, post-norms; sliding on the first of each pair of layers
                attention_logit_softcapping=c.attention_logit_softcapping,
                final_logit_softcapping=c.final_logit_softcapping, post_attention_norm=c.post_attention_norm,
                post_mlp_norm=c.post_mlp_norm, attention_scores_scalar=c.attention_scores_scalar and 64,
                sliding_window_size=c.sliding_window_size,
                sliding_window_indices=c.sliding_window_indices and [1, 0])


def _second_block_bytes(model, ids) -> int:
    tag = {"block": -1}
    for index, block in enumerate(model.transformer.h):
        block.register_forward_pre_hook(lambda module, args, index=index: tag.__setitem__("block", index))
    model.transformer.ln_f.register_forward_pre_hook(lambda module, args: tag.__setitem__("block", -1))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    params |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    saved: dict[int, tuple[int, int]] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved.setdefault(storage.data_ptr(), (storage.nbytes(), tag["block"]))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(ids)
    return sum(size for size, block in saved.values() if block == 1)


def block_case(case: tuple[str, str]) -> tuple[str, dict]:
    warnings.filterwarnings("ignore")
    name, mode = case
    fields = shrunk(name)
    torch.set_default_dtype(torch.bfloat16)
    if mode == "lora":
        from litgpt.lora import GPT, Config, mark_only_lora_as_trainable
        model = GPT(Config(**fields, **LORA))
        mark_only_lora_as_trainable(model)
    else:
        from litgpt.model import GPT, Config
        model = GPT(Config(**fields))
    model.train()
    ids = torch.randint(0, 512, (1, SEQ))
    total = _second_block_bytes(model, ids)
    return f"{name}:{mode}", {"seq": SEQ, "bytes_per_token": total / SEQ, "litgpt": fields,
                              "lora": LORA if mode == "lora" else None,
                              "source": f"torch {torch.__version__}, litgpt 0.5.13, bf16-true"}


def loss_case(case: tuple[str, int]) -> tuple[str, dict]:
    """Bytes per logit alive after the loss's forward (the finetune scripts' ``logits`` and what
    ``cross_entropy`` keeps), with the hidden states' own excluded."""
    from litgpt.utils import chunked_cross_entropy
    kind, rows = case
    torch.manual_seed(0)
    vocab, hidden, seq = 4096, 64, 512
    x = torch.randn(rows, seq, hidden, dtype=torch.bfloat16, requires_grad=True)
    head = torch.nn.Linear(hidden, vocab, bias=False, dtype=torch.bfloat16)
    targets = torch.randint(0, vocab, (rows, seq))
    alive: dict[int, int] = {}

    def pack(tensor):
        alive.setdefault(tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        if kind == "chunked-head":          # lora.py / adapter.py
            logits = [head(x_i) for x_i in x.split(128, dim=1)]
            logits[-1] = logits[-1][..., :-1, :]
            loss = chunked_cross_entropy(logits, targets[..., 1:])
            held = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in logits}
        else:                               # full.py / pretrain.py
            logits = head(x)
            loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
            held = {logits.untyped_storage().data_ptr(): logits.untyped_storage().nbytes()}
    saved = {ptr: n for ptr, n in alive.items() if ptr != x.untyped_storage().data_ptr()
             and ptr != head.weight.untyped_storage().data_ptr() and n >= 128 * vocab}
    del loss
    count = rows * seq * vocab
    return f"{kind}:{rows}", {"logits": count, "kept_per_logit": sum({**saved, **held}.values()) / count,
                              "source": f"torch {torch.__version__}, litgpt 0.5.13 utils.chunked_cross_entropy"}


def main() -> None:
    out = {"blocks": dict(block_case((n, m)) for n in CASES for m in ("full", "lora")),
           "loss": dict(loss_case((k, r)) for k in ("chunked-head", "whole") for r in (1, 2))}
    for key, entry in out["blocks"].items():
        print(key, entry["bytes_per_token"], file=sys.stderr)
    for key, entry in out["loss"].items():
        print(key, entry["kept_per_logit"], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
