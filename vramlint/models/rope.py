"""The cos/sin tables vLLM builds for rotary embeddings, from a model's config.

vLLM's ``get_rope`` (``model_executor/layers/rotary_embedding``, 0.19) gives each distinct rotary
embedding — one per (head size, rotary dim, max_position, RoPE parameters, dtype), shared by the
layers that ask for the same one — a ``cos_sin_cache`` buffer of positions x rotary_dim in the
model's dtype, created on the GPU while the model loads: it is part of vLLM's "Model loading took"
and is replicated on every tensor-parallel rank. Most models have one table; Gemma 3 has two (its
sliding layers use ``rope_local_base_freq`` without scaling). The positions depend on the scaling
type, as each class computes them:

- default, ``llama3``, mrope: ``max_position_embeddings``;
- ``linear`` (one factor) and ``dynamic``: ``max_position_embeddings x factor``
  (``LinearScalingRotaryEmbedding``, ``DynamicNTKScalingRotaryEmbedding``);
- ``yarn``, ``deepseek_yarn``: ``original_max_position_embeddings x factor``;
- ``longrope``: the short table (original) and the long one (``max_position_embeddings``) in one.

transformers builds no such table (it computes cos and sin per forward), so only vLLM counts them.
"""

from __future__ import annotations

from typing import Any

from vramlint.models.config import HfConfig
from vramlint.models.shape import LINEAR, MLA, SLIDING, ModelShape

PARTIAL = {"gpt_neox": 0.25, "qwen3_next": 0.25}     # transformers' defaults where the config may omit it
LOCAL_BASE = {"gemma3_text": 10000.0}                 # Gemma3TextConfig.rope_local_base_freq


def _scaling(c: HfConfig, kind: str) -> dict[str, Any]:
    """A layer kind's RoPE parameters: ``rope_scaling`` (transformers v4) or ``rope_parameters``
    (v5, for Gemma 3 keyed by layer type); Gemma 3's sliding layers' are unscaled (v4)."""
    params = c.get("rope_parameters")
    if isinstance(params, dict) and kind in params and isinstance(params[kind], dict):
        return params[kind]
    local = c.get("rope_local_base_freq") or LOCAL_BASE.get(c.defaults_for)
    if kind == "sliding_attention" and local is not None:
        return {"rope_type": "default", "rope_theta": local}
    scaling = c.get("rope_scaling")
    base = params if isinstance(params, dict) else {}
    return {**base, **scaling} if isinstance(scaling, dict) else base


def _positions(positions: int, scaling: dict[str, Any]) -> int:
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    factor = scaling.get("factor") or 1
    original = scaling.get("original_max_position_embeddings") or positions
    if kind in ("linear", "dynamic") and isinstance(factor, (int, float)):
        return int(positions * factor)
    if kind in ("yarn", "deepseek_yarn") and isinstance(factor, (int, float)):
        return int(original * factor)
    if kind == "longrope":
        return int(original) + positions
    return positions


def _rotary_dim(c: HfConfig, head_dim: int, scaling: dict[str, Any]) -> int:
    partial = (c.get("partial_rotary_factor") or scaling.get("partial_rotary_factor") or c.get("rotary_pct")
               or PARTIAL.get(c.defaults_for, 1.0))
    return int(head_dim * float(partial))


def rope_tables(c: HfConfig, shape: ModelShape) -> tuple[tuple[int, int], ...]:
    """(positions, rotary_dim) of every distinct table vLLM builds for this model."""
    if not shape.block.rope or not shape.max_position_embeddings:
        return ()
    tables: dict[tuple, tuple[int, int]] = {}
    for layer in shape.layers:
        att = layer.attention
        if att.kind == LINEAR:
            continue
        scaling = _scaling(c, "sliding_attention" if att.kind == SLIDING else "full_attention")
        head = c.int("qk_rope_head_dim") if att.kind == MLA else att.head_dim
        dim = head if att.kind == MLA else _rotary_dim(c, head, scaling)
        table = (_positions(shape.max_position_embeddings, scaling), dim)
        tables.setdefault((table, repr(sorted(scaling.items()))), table)
    return tuple(tables.values())
