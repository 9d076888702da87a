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
from vramlint.models.config import EXPERT_COUNTS, SPELLINGS, TOP_K, HfConfig
from vramlint.models.shape import ModelShape


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
        top_k = c.opt_int(*TOP_K) or 2
        width = c.opt_int("moe_intermediate_size", "expert_intermediate_size") or c.int("intermediate_size")
        shared = c.opt_int("shared_expert_intermediate_size") or (c.opt_int("n_shared_experts") or 0) * width
        moe = lambda i, h: routed(h, count, top_k, width, shared=shared)  # noqa: E731
    return llama_like(c, moe=moe)
