"""Bytes per weight from ``quantization_config`` (or ModelOpt's ``hf_quant_config.json``).

Every method stores the big linear weights in few bits plus scales, and leaves embeddings,
lm_head, norms and biases in 16 bit. The stored bits per quantized weight, scales included:

- bitsandbytes 4-bit (NF4/FP4): 4 bits + one fp32 absmax per 64-weight block (+0.5 bit), or with
  double quantization an 8-bit absmax (+0.125) and one fp32 per 256 absmax (+0.002)
  (bitsandbytes ``quantize_4bit`` blocksize 64, ``compress_statistics``). 8-bit (LLM.int8): 8 bits
  + one fp32 scale per output row (negligible, counted as 8).
- GPTQ / AWQ with ``bits`` b and ``group_size`` g: b bits + an fp16 scale and a b-bit zero point
  per group: b + (16 + b) / g (4-bit, g=128: 4.16 bits; docs/reference.md section 6 quotes ~4.25).
- FP8 (``fp8``, ``fbgemm_fp8``, ModelOpt FP8, compressed-tensors float 8): 8 bits + one fp32 scale
  per 128x128 block (``weight_block_size``) or per tensor/channel (negligible).
- MXFP4 (gpt-oss): 4 bits + one 8-bit shared exponent per 32 weights = 4.25 bits, experts only.
- NVFP4 (ModelOpt, compressed-tensors ``nvfp4``): 4 bits + one fp8 scale per 16 weights = 4.5 bits.
- compressed-tensors int groups: ``num_bits`` + a 16-bit scale per ``group_size`` (and a zero point
  where ``symmetric`` is false).

Which layers: the decoder's linear weights (attention, MLP, experts); routers and everything
outside the decoder blocks stay in 16 bit. ``modules_to_not_convert`` / ``ignore`` entries that
name attention, MLP or experts take that group out.
"""

from __future__ import annotations

from functools import lru_cache

from typing import Any

from vramlint.models.shape import Quantization

ALL = frozenset({"attention", "mlp", "experts"})


def _positive(value: Any) -> bool:
    """A size a config can mean (a malformed one reads as absent: the formats' defaults apply)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e9


def _excluded_groups(patterns: Any) -> frozenset[str]:
    """Groups that ``modules_to_not_convert`` / ``ignore`` keep in 16 bit."""
    if not isinstance(patterns, list):
        return frozenset()
    text = " ".join(str(p) for p in patterns)
    out = set()
    if "attn" in text or "attention" in text:
        out.add("attention")
    if "experts" in text and "shared" not in text:
        out.add("experts")
    if ".mlp" in text.replace(".mlp.gate", "").replace(".mlp.router", ""):
        out.add("mlp")
    return frozenset(out)


# What bitsandbytes quantizes when transformers loads a model with it: every nn.Linear (attention,
# dense MLPs, shared experts), never transformers 5's fused routed experts, which are 3-D
# nn.Parameters (replace_with_bnb_linear; seen on the CPU for mixtral, qwen3_moe, gpt_oss and
# deepseek_v3: their experts stay in the load dtype).
BNB_LINEARS = frozenset({"attention", "mlp"})


@lru_cache(maxsize=1)
def nf4() -> Quantization:
    """QLoRA's base weights: bitsandbytes NF4 with double quantization, on the linears it replaces."""
    q = _bnb({"load_in_4bit": True, "bnb_4bit_use_double_quant": True, "bnb_4bit_quant_type": "nf4"})
    return Quantization(q.method, q.bits, BNB_LINEARS, q.detail)


@lru_cache(maxsize=4)
def four_bit(kind: str = "nf4-dq") -> Quantization:
    """A bitsandbytes 4-bit base by its kind: ``nf4`` / ``fp4``, ``-dq`` with double-quantized absmax
    (LitGPT's ``quantize: bnb.nf4`` is single-quantized: 4.5 bits a weight); QLoRA's is nf4-dq."""
    if kind == "nf4-dq":
        return nf4()
    q = _bnb({"load_in_4bit": True, "bnb_4bit_use_double_quant": kind.endswith("-dq"),
              "bnb_4bit_quant_type": kind.removesuffix("-dq")})
    return Quantization(q.method, q.bits, BNB_LINEARS, q.detail)


def int8() -> Quantization:
    """An LLM.int8 base (``load_in_8bit``): bitsandbytes' ``Linear8bitLt`` on the linears it
    replaces, int8 values and an fp32 scale per output row (``Int8Params``: CB and SCB)."""
    q = _bnb({"load_in_8bit": True})
    return Quantization(q.method, q.bits, BNB_LINEARS, q.detail)


def _bnb(q: dict) -> Quantization | None:
    if q.get("load_in_4bit") or q.get("_load_in_4bit"):
        double = bool(q.get("bnb_4bit_use_double_quant"))
        bits = 4 + (8 / 64 + 32 / (64 * 256) if double else 32 / 64)
        kind = q.get("bnb_4bit_quant_type", "fp4")
        return Quantization(f"bitsandbytes-4bit ({kind})", bits, ALL,
                            f"4 bit + absmax per 64 {'(double-quantized) ' if double else ''}= {bits:.3f} bits")
    if q.get("load_in_8bit") or q.get("_load_in_8bit"):
        return Quantization("bitsandbytes-8bit", 8.0, ALL, "int8 + fp32 scale per row")
    return None


def _grouped(method: str, bits: float, group: Any, groups: frozenset[str], zero: bool = True) -> Quantization:
    """``bits`` per weight plus, per group, an fp16 scale and (asymmetric) a ``bits``-wide zero point."""
    size = int(group) if _positive(group) else 0
    extra = 16 + bits if zero else 16
    total = bits + extra / size if size else bits
    detail = f"{bits:g} bit + fp16 scale{' and zero' if zero else ''} per {size or 'row'} = {total:.3f} bits"
    return Quantization(method, total, groups, detail)


def _compressed_tensors(q: dict, groups: frozenset[str]) -> Quantization | None:
    fmt = str(q.get("format", ""))
    config_groups = q.get("config_groups")
    for group in config_groups.values() if isinstance(config_groups, dict) else ():
        weights = group.get("weights") if isinstance(group, dict) else None
        bits = weights.get("num_bits") if isinstance(weights, dict) else None
        if not _positive(bits):
            continue
        if "nvfp4" in fmt or (weights.get("type") == "float" and bits == 4):
            return Quantization("compressed-tensors nvfp4", 4.5, groups, "4 bit + fp8 scale per 16 = 4.5 bits")
        if weights.get("type") == "float":
            return Quantization("compressed-tensors fp8", float(bits), groups, f"{bits} bit float")
        size = weights.get("group_size") if weights.get("strategy") == "group" else 0
        return _grouped(f"compressed-tensors int{bits}", float(bits), size, groups,
                        zero=not weights.get("symmetric", True))
    return None


def _modelopt(algo: str, groups: frozenset[str]) -> Quantization | None:
    algo = algo.upper()
    if "NVFP4" in algo:
        return Quantization("modelopt nvfp4", 4.5, groups, "4 bit + fp8 scale per 16 = 4.5 bits")
    if "FP8" in algo:
        return Quantization("modelopt fp8", 8.0, groups, "8 bit + per-tensor scale")
    return None


def read_quantization(q: Any) -> Quantization | None:
    """A ``quantization_config`` (or ModelOpt ``quantization`` section) → how weights are stored."""
    if not isinstance(q, dict):
        return None
    method = str(q.get("quant_method") or q.get("quant_algo") or "").lower()
    skipped = _excluded_groups(q.get("modules_to_not_convert") or q.get("ignore")
                               or q.get("exclude_modules") or q.get("llm_int8_skip_modules"))
    groups = ALL - skipped
    if method == "bitsandbytes" or "load_in_4bit" in q or "load_in_8bit" in q:
        return _bnb(q)
    if method in ("gptq", "awq", "auto-round"):
        bits = q.get("bits", 4)
        return _grouped(method, float(bits) if _positive(bits) else 4.0, q.get("group_size", 128), groups)
    if method in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size")
        blocked = isinstance(block, list) and len(block) == 2 and all(map(_positive, block))
        extra = 32 / (block[0] * block[1]) if blocked else 0.0
        return Quantization(method, 8 + extra, groups,
                            f"8 bit + fp32 scale per {block[0]}x{block[1]} block" if extra else "8 bit + scale")
    if method == "mxfp4":
        return Quantization("mxfp4", 4.25, frozenset({"experts"}), "4 bit + 8-bit exponent per 32 = 4.25 bits")
    if method == "compressed-tensors":
        return _compressed_tensors(q, groups)
    if method in ("modelopt", "fp8_static") or q.get("quant_algo"):
        return _modelopt(str(q.get("quant_algo") or ""), groups)
    return None


# vLLM's ``--quantization`` methods that quantize an unquantized checkpoint while it loads
# (vLLM 0.19 ``Fp8OnlineLinearMethod`` / ``Fp8OnlineMoEMethod``: each layer materialized from the
# meta device and cast to fp8 with a per-tensor scale, so no 16-bit copy of the model is ever
# whole on the GPU; ``ExpertsInt8Config``: the experts in int8 with a scale per output channel;
# ``BitsAndBytesModelLoader._quantized_4bit_generator``: every linear and the fused experts in NF4
# with double quantization, ``quantize_4bit(compress_statistics=True, quant_type="nf4")``).
ONLINE = {"fp8": Quantization("fp8 (online, vLLM)", 8.0, ALL, "8 bit + per-tensor scale, quantized while loading"),
          "experts_int8": Quantization("experts_int8 (online, vLLM)", 8.0, frozenset({"experts"}),
                                       "experts int8 + per-channel scale, quantized while loading"),
          "bitsandbytes": Quantization("bitsandbytes nf4 (in-flight, vLLM)", nf4().bits, ALL,
                                       f"{nf4().detail}, quantized while loading")}
