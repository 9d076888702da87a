"""A decoder read from the standard config keys, for a model type neither modelled by hand nor
buildable through transformers here (not installed, or the type needs the repository's own code).

Most decoders transformers knows are a Llama in what decides memory: an embedding, N blocks of
attention (q, k, v, o over heads and key-value heads) and a gated MLP or a mixture of experts, a
final norm and an lm_head. The keys that say so have a handful of spellings across model types
(``attribute_map`` in each configuration class: ``n_embd``, ``d_model``, ``n_layer``, ``n_head``,
``ffn_dim`` ...); they are read as such, the block is a Llama's, and everything else a model adds is
not counted. It is an approximation and says so: a warning finding (VL008) wherever it is used.
"""

from __future__ import annotations

from typing import Any

from vramlint.models.architectures import llama_like, routed
from vramlint.models.config import HfConfig
from vramlint.models.shape import ModelShape

# standard key -> the spellings configuration classes use for it (their attribute_map)
SPELLINGS = {
    "hidden_size": ("n_embd", "d_model", "dim", "model_dim", "hidden_dim"),
    "num_hidden_layers": ("n_layer", "num_layers", "n_layers", "num_decoder_layers"),
    "num_attention_heads": ("n_head", "num_heads", "n_heads", "num_attention_head"),
    "num_key_value_heads": ("num_kv_heads", "n_kv_heads", "multi_query_group_num", "num_key_value_groups"),
    "intermediate_size": ("ffn_dim", "n_inner", "ffn_hidden_size", "d_ff", "mlp_dim", "ffn_intermediate_size"),
    "max_position_embeddings": ("n_positions", "max_seq_len", "seq_length", "max_sequence_length"),
    "vocab_size": ("padded_vocab_size", "n_vocab"),
}
EXPERT_COUNTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def standard(raw: dict[str, Any]) -> dict[str, Any]:
    """The config with each standard key filled from the first spelling it uses; a composite
    config's language model is its ``text_config`` (with the top level's dtype and tying)."""
    text = raw.get("text_config")
    out = {**{k: raw[k] for k in ("torch_dtype", "dtype", "tie_word_embeddings") if k in raw}, **text} \
        if isinstance(text, dict) else dict(raw)
    for key, spellings in SPELLINGS.items():
        if key not in out:
            found = next((out[s] for s in spellings if isinstance(out.get(s), int) and not isinstance(out.get(s), bool)),
                         None)
            if found is not None:
                out[key] = found
    if "intermediate_size" not in out and isinstance(out.get("hidden_size"), int):
        out["intermediate_size"] = 4 * out["hidden_size"]      # transformers' n_inner default: 4 x hidden
    return out


def generic(c: HfConfig) -> ModelShape:
    """Llama's block over the file's sizes; a mixture of experts where the file counts experts."""
    raw = c.raw
    count = next((raw[k] for k in EXPERT_COUNTS if isinstance(raw.get(k), int) and raw[k] > 1), 0)
    moe = None
    if count:
        top_k = c.opt_int("num_experts_per_tok", "moe_top_k", "top_k", "num_selected_experts") or 2
        width = c.opt_int("moe_intermediate_size", "expert_intermediate_size") or c.int("intermediate_size")
        shared = c.opt_int("shared_expert_intermediate_size") or (c.opt_int("n_shared_experts") or 0) * width
        moe = lambda i, h: routed(h, count, top_k, width, shared=shared)  # noqa: E731
    return llama_like(c, moe=moe)
