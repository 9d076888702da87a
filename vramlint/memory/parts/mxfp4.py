"""How vLLM 0.19 lays out MXFP4 experts (gpt-oss) on each GPU architecture.

A checkpoint stores each routed expert's weights at 4.25 bits (``models/quantization.py``), but
the bytes a GPU holds after loading depend on the MoE kernel vLLM picks for its compute capability
(``fused_moe/oracle/mxfp4.py`` ``select_mxfp4_moe_backend``, ``mxfp4_round_up_hidden_size_and_
intermediate_size``, ``convert_to_mxfp4_moe_kernel_format``), per MoE layer of E local experts,
hidden size h and per-rank expert width i:

- Hopper (capability 9.x): OpenAI's Triton kernels (``triton_kernels``, vendored in vLLM). i rounds
  up to 64. ``_swizzle_mxfp4`` rewrites the packed values in ``HopperMXValueLayout``, which pads
  both matrix dims to 64 bytes (gpt-oss's 1440-byte rows become 1472), and the scales in
  ``HopperMXScaleLayout``, rows padded to 256 (2·8 warps·2·8). The swizzled scales go into the
  kernel's PrecisionConfig while the loaded ``w13_weight_scale`` / ``w2_weight_scale`` stay on the
  layer: the scales are held twice. Biases are upcast to fp32.
- Blackwell (10.x): FlashInfer's TRT-LLM kernel. h and i round up to 256; weights and scales are
  shuffled in place of the loaded ones; biases in fp32.
- Ampere, Ada and the rest (8.x, 12.x): Marlin. i rounds up to 128 and h to 256; weights and
  scales repacked in place; biases in the model dtype.

vLLM's "Model loading took" for gpt-oss-20b on an H100 (13.64 GiB, shared/groundtruth) is the
4.25-bit count plus the Hopper terms: 0.58 GiB of swizzled scales, 0.20 GiB of value padding,
0.01 GiB of fp32 biases. Where the GPU's architecture is not known (a size such as ``80GB``),
Hopper's layout is assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.models.shape import ModelShape

BLOCK = 32                 # weights per shared 8-bit exponent


@dataclass(frozen=True)
class Kernel:
    """An MXFP4 MoE kernel's storage rules: how it rounds h and i, its bias dtype (0: the model's),
    and whether it is a modular kernel whose buffers come from vLLM's MoE workspace."""

    name: str
    round_h: int
    round_i: int
    bias_bytes: int
    workspace: bool

    def pad(self, h: int, i: int) -> tuple[int, int]:
        """The hidden size and per-rank expert width as this kernel rounds them up."""
        return _up(h, self.round_h), _up(i, self.round_i)


# OAITritonMxfp4ExpertsMonolithic and TrtLlmMxfp4ExpertsMonolithic run whole (no workspace: the
# gpt-oss log's activation peak has none); MarlinExperts.workspace_shapes are TritonExperts'
TRITON = Kernel("Triton (Hopper)", 1, 64, 4, False)
TRTLLM = Kernel("FlashInfer TRT-LLM (Blackwell)", 256, 256, 4, False)
MARLIN = Kernel("Marlin", 256, 128, 0, True)


def kernel_for(sm: int | None) -> Kernel:
    """The kernel vLLM 0.19 picks on this compute capability (``_get_priority_backends`` order:
    TRT-LLM needs family 10.x, the Triton kernels 9.0 to 10.x, Marlin runs from 8.0)."""
    if sm is None or 90 <= sm < 100:
        return TRITON
    return TRTLLM if 100 <= sm < 110 else MARLIN


def _up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def expert_layout_bytes(kernel: Kernel, h: int, i: int) -> int:
    """Bytes of one expert's w13 (2i x h) and w2 (h x i) values and scales."""
    if kernel is not TRITON:
        return (3 * i * h) // 2 + 3 * i * h // BLOCK
    values = _up(2 * i, 64) * _up(h // 2, 64) + _up(h, 64) * _up(i // 2, 64)
    loaded_scales = 2 * i * (h // BLOCK) + h * (i // BLOCK)
    swizzled_scales = _up(2 * i, 256) * _up(h // BLOCK, 2) + _up(h, 256) * _up(i // BLOCK, 2)
    return values + loaded_scales + swizzled_scales


def expert_bytes(model: ModelShape, sm: int | None, split: int, spread: int, dtype_bytes: int) -> tuple[int, str]:
    """One rank's routed experts, all layers: each expert's width split ``split`` ways (TP x DP)
    or whole experts spread over ``spread`` ranks (expert parallelism). A layer's expert biases
    are its expert parameters beyond the 3·E·h·i weights (gpt-oss has them: w13 2i, w2 h)."""
    kernel = kernel_for(sm)
    total = 0.0
    for layer in model.layers:
        mlp = layer.mlp
        if not mlp.experts:
            continue
        h, i = kernel.pad(model.hidden_size, mlp.intermediate // split)
        biased = layer.params.experts > 3 * mlp.experts * model.hidden_size * mlp.intermediate
        bias = (2 * i + h) * (kernel.bias_bytes or dtype_bytes) if biased else 0
        total += mlp.experts / spread * (expert_layout_bytes(kernel, h, i) + bias)
    assumed = "; Hopper assumed: the GPU's architecture is not known" if sm is None else ""
    return int(total), f"laid out for vLLM's {kernel.name} kernel{assumed}"
