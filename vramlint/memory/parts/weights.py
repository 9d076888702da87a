"""Bytes of a checkpoint's weights: dtype for everything, fewer bits where a quantizer stores them.

Quantized groups (see ``models/quantization.py``) take ``bits / 8`` bytes per parameter, scales
included; embeddings, lm_head, norms, biases and routers keep the checkpoint's dtype (16 bit in
every quantized checkpoint we know). Worked example (docs/reference.md section 1): Llama-2-70B in fp16
is 68,976,648,192 x 2 bytes.
"""

from __future__ import annotations

from vramlint.models.shape import ModelShape

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def bytes_per_param(shape: ModelShape, group: str, dtype_bytes: int | None = None) -> float:
    """Bytes one parameter of a layer group takes as stored: the quantizer's bits / 8 where it
    stores that group, else the dtype (``dtype_bytes`` overrides the checkpoint's)."""
    quant = shape.quantization
    if quant is not None and group in quant.groups:
        return quant.bits / 8
    return dtype_bytes or DTYPE_BYTES[shape.dtype]


def weight_bytes(shape: ModelShape, dtype_bytes: int | None = None) -> int:
    """Total bytes of the weights as stored: ``dtype_bytes`` overrides the checkpoint dtype."""
    groups = shape.layer_params
    quantized = shape.quantization.groups if shape.quantization else frozenset()
    plain = shape.params - sum(getattr(groups, g) for g in quantized)
    return int(plain * (dtype_bytes or DTYPE_BYTES[shape.dtype])
               + sum(getattr(groups, g) * bytes_per_param(shape, g) for g in quantized))


def replaced_embedding(shape: ModelShape, dtype_bytes: int) -> int:
    """The token embeddings a script swapped out and still holds (``Plan.embedding_copy``): V·h in
    the load dtype."""
    return shape.vocab_size * shape.hidden_size * dtype_bytes


def expert_bytes(shape: ModelShape, dtype_bytes: int | None = None) -> int:
    """Bytes of the routed experts alone (part of ``weight_bytes``): what expert parallelism
    spreads over its ranks instead of splitting each expert."""
    return int(shape.layer_params.experts * bytes_per_param(shape, "experts", dtype_bytes))
