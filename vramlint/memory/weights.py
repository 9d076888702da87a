"""Bytes of a checkpoint's weights: dtype for everything, fewer bits where a quantizer stores them.

Quantized groups (see ``models/quantization.py``) take ``bits / 8`` bytes per parameter, scales
included; embeddings, lm_head, norms, biases and routers keep the checkpoint's dtype (16 bit in
every quantized checkpoint we know). Worked example (REFERENCE.md section 1): Llama-2-70B in fp16
is 68,976,648,192 x 2 bytes.
"""

from __future__ import annotations

from vramlint.models.shape import ModelShape

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def weight_bytes(shape: ModelShape, dtype_bytes: int | None = None) -> int:
    """Total bytes of the weights as stored: ``dtype_bytes`` overrides the checkpoint dtype."""
    per_param = dtype_bytes or DTYPE_BYTES[shape.dtype]
    quant = shape.quantization
    groups = shape.layer_params
    quantized = 0
    if quant is not None:
        quantized = sum(getattr(groups, g) for g in quant.groups)
    plain = shape.params - quantized
    return int(plain * per_param + (quantized * quant.bits / 8 if quant else 0))


def expert_bytes(shape: ModelShape, dtype_bytes: int | None = None) -> int:
    """Bytes of the routed experts alone (part of ``weight_bytes``): what expert parallelism
    spreads over its ranks instead of splitting each expert."""
    experts, quant = shape.layer_params.experts, shape.quantization
    if quant is not None and "experts" in quant.groups:
        return int(experts * quant.bits / 8)
    return experts * (dtype_bytes or DTYPE_BYTES[shape.dtype])
