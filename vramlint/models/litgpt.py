"""LitGPT's models: its own configs and its own model code (litgpt 0.5.13, ``litgpt/config.py``,
``litgpt/model.py``).

LitGPT converts a Hugging Face checkpoint into ``Config.from_name(<name>)`` and runs it in its
own ``GPT``, whose blocks keep other tensors for backward than transformers' do:

- one fused ``qkv`` linear; ``q``, ``k``, ``v`` are views of its output (v keeps it alive whole);
- RoPE ends in ``torch.cat((roped, x[..., rope_n_elem:]))`` whatever the rotary share: q and k
  are new head-major tensors, so SDPA's output is head-major and ``y.reshape`` before ``proj``
  copies it (``CausalSelfAttention.forward``, litgpt/model.py:457-566);
- grouped KV heads are ``repeat_interleave``d to every head before SDPA (model.py:533-537);
- ``RMSNorm`` multiplies its weight in fp32 and casts the product (model.py ``RMSNorm.forward``);
- no dropout in a block; ``lm_head`` is its own weight (a tied checkpoint's embedding is copied
  into it: ``convert_hf_checkpoint``), unless pretraining ties them (``train.tie_embeddings``).

Recorded on the CPU block by block against LitGPT's own code (dev/litgpt_block.py,
tests/data/litgpt/litgpt_block.json). The configs' fields are vendored from litgpt 0.5.13
(dev/litgpt_configs.py, data/litgpt_configs.json).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from vramlint.models.shape import Block, ModelShape
from vramlint.packaged import data_json

VERSION = "litgpt 0.5.13"


@lru_cache(maxsize=1)
def configs() -> dict[str, dict]:
    return data_json("litgpt_configs.json")["configs"]


def config_named(name: str) -> tuple[str, dict] | None:
    """``Config.from_name``: a config's own name, else the Hugging Face repository it converts
    (``org/name`` or ``name``: what ``litgpt download`` and ``checkpoints/<org>/<name>`` use)."""
    table = configs()
    if name in table:
        return name, table[name]
    short = name.rsplit("/", 1)[-1]
    for own, fields in table.items():
        if fields.get("hf") == name or (fields.get("hf") or "").rsplit("/", 1)[-1] == short:
            return own, fields
    return None


# ``litgpt.Config``'s defaults (config.py dataclass fields) for what a ``model_config`` leaves out
DEFAULTS = {"block_size": 4096, "n_layer": 16, "n_embd": 4096, "vocab_size": 50254, "padding_multiple": 512,
            "norm_class_name": "LayerNorm", "parallel_residual": True, "n_head": 32, "rotary_percentage": 0.25,
            "bias": True, "mlp_class_name": "GptNeoxMLP"}


def config_of(given: dict) -> dict:
    """A ``model_config`` as ``Config.__post_init__`` completes it (config.py:122-144): the head
    size n_embd / n_head, the vocabulary padded to a multiple of ``padding_multiple``, query groups
    one per head, the MLP 4 x n_embd wide (a LLaMA MLP without one: LitGPT raises, None here)."""
    c = {**DEFAULTS, **{k: v for k, v in given.items() if v is not None}}
    c.setdefault("head_size", c["n_embd"] // c["n_head"])
    c.setdefault("padded_vocab_size", -(-c["vocab_size"] // c["padding_multiple"]) * c["padding_multiple"])
    c.setdefault("n_query_groups", c["n_head"])
    if "intermediate_size" not in c and c["mlp_class_name"] != "LLaMAMLP":
        c["intermediate_size"] = 4 * c["n_embd"]
    return c


def config_for(shape: ModelShape) -> dict | None:
    """The LitGPT config a Hugging Face model converts to, where LitGPT has one."""
    found = config_named(shape.name) if shape.name else None
    return found[1] if found else None


def hf_config(fields: dict, tie: bool = False) -> dict:
    """A LitGPT config as the config.json of the same shapes: the family whose parameters and
    linears match (LLaMA-like, Gemma, GPT-NeoX-like with LayerNorms, Mixtral-like experts); the
    vocabulary LitGPT pads to (``padded_vocab_size``); lm_head untied unless ``tie``."""
    mlp, layer_norm = fields.get("mlp_class_name"), fields.get("norm_class_name") == "LayerNorm"
    heads, groups = fields["n_head"], fields.get("n_query_groups", fields["n_head"])
    config = {"vocab_size": fields["padded_vocab_size"], "num_hidden_layers": fields["n_layer"],
              "hidden_size": fields["n_embd"], "num_attention_heads": heads, "num_key_value_heads": groups,
              "head_dim": fields.get("head_size"), "intermediate_size": fields.get("intermediate_size"),
              "max_position_embeddings": fields.get("block_size"), "tie_word_embeddings": tie,
              "torch_dtype": "bfloat16"}
    if mlp == "LLaMAMoE":
        config |= {"model_type": "mixtral", "num_local_experts": fields.get("n_expert"),
                   "num_experts_per_tok": fields.get("n_expert_per_token"),
                   "intermediate_size": fields.get("moe_intermediate_size") or fields.get("intermediate_size")}
    elif mlp == "GemmaMLP":
        config["model_type"] = "gemma2" if fields.get("post_attention_norm") else "gemma"
        config |= {"attn_logit_softcapping": fields.get("attention_logit_softcapping"),
                   "final_logit_softcapping": fields.get("final_logit_softcapping")}
    elif layer_norm and mlp == "GptNeoxMLP" and groups != heads:    # Falcon: multi-query, or the new decoder
        config |= {"model_type": "falcon", "multi_query": groups == 1, "new_decoder_architecture": groups > 1,
                   "num_kv_heads": groups, "parallel_attn": bool(fields.get("parallel_residual")),
                   "bias": bool(fields.get("bias")), "ffn_hidden_size": fields.get("intermediate_size")}
    elif layer_norm and mlp == "GptNeoxMLP":
        config |= {"model_type": "gpt_neox", "use_parallel_residual": bool(fields.get("parallel_residual")),
                   "rotary_pct": fields.get("rotary_percentage", 1.0), "attention_bias": bool(fields.get("bias"))}
    else:
        config |= {"model_type": "qwen3" if fields.get("norm_qk") else "llama",
                   "attention_bias": bool(fields.get("attn_bias") or fields.get("bias"))}
    return {k: v for k, v in config.items() if v is not None}


def code_block(fields: dict | None, block: Block) -> Block:
    """The block LitGPT's code runs (module docstring), from its config where LitGPT has one,
    else from what the Hugging Face family's block says of its norms and residuals."""
    if fields is None:
        norm = "layer" if block.norm == "layer" else "fp32"
        return replace(block, norm=norm, fused_qkv=True, rope_cat=block.rope, dropout_masks=0, act="native",
                       attention_output_held=True, learned_positions=False)
    return Block(norm="layer" if fields.get("norm_class_name") == "LayerNorm" else "fp32",
                 pre_norms=1 if fields.get("shared_attention_norm") else 2,
                 post_norms=2 if fields.get("post_attention_norm") else 0,
                 fused_qkv=True, rope=True, rope_cat=True, parallel_residual=bool(fields.get("parallel_residual")),
                 attention_output_held=True, qk_norm=bool(fields.get("norm_qk")),
                 logit_softcap=bool(fields.get("final_logit_softcapping")),
                 score_softcap=bool(fields.get("attention_logit_softcapping")),
                 default_attn="eager" if fields.get("attention_logit_softcapping") else "sdpa")


def own_code(shape: ModelShape, converted: bool = True) -> ModelShape:
    """The model as LitGPT runs it: its blocks (``code_block``), and lm_head a weight of its own
    where a ``converted`` Hugging Face checkpoint ties it (``convert_hf_checkpoint`` copies the
    embedding into it); a shape built from LitGPT's own config already says."""
    head = shape.head_params or (shape.vocab_size * shape.hidden_size if converted else 0)
    return replace(shape, block=code_block(config_for(shape), shape.block), head_params=head)
