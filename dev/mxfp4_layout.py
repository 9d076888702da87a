"""Dev-only: the bytes one MXFP4 expert takes in vLLM 0.19's Hopper layout, from the real code.

Runs the ``triton_kernels`` layouts vLLM vendors (``vllm/third_party/triton_kernels``) on CPU
tensors of the shapes ``Mxfp4MoEMethod.create_weights`` makes — w13 (2i, h/2) and w2 (h, i/2)
uint8 values, their (2i, h/32) and (h, i/32) scales — converted as ``mxfp4_utils._swizzle_mxfp4``
converts them (transposed, mx_axis 1, 8 warps), and adds the loaded scales the layer keeps.
Writes JSON ``[{"hidden": h, "intermediate": i, "bytes": n}, ...]`` for
``tests/test_vllm.py`` to hold ``vramlint.memory.parts.mxfp4`` to.

    pip download vllm==0.19.0 --no-deps && unzip vllm-0.19.0-*.whl 'vllm/third_party/*'
    pip install torch==2.13.0 triton
    PYTHONPATH=vllm/third_party python dev/mxfp4_layout.py > tests/data/mxfp4_layout.json
"""

from __future__ import annotations

import json
import sys

# (hidden, per-rank expert width after vLLM's round-up to 64): gpt-oss-20b/120b at TP 1, 2, 4, 8
# (2880 / TP = 2880, 1440, 720, 360 -> 384), and Qwen3-30B-A3B's and Qwen3-235B's expert widths.
SHAPES = ((2880, 2880), (2880, 1440), (2880, 768), (2880, 384), (2048, 768), (4096, 1536))


def expert_bytes(hidden: int, width: int) -> int:
    import torch
    from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
    from triton_kernels.tensor_details.layout_details.hopper_scale import HopperMXScaleLayout
    from triton_kernels.tensor_details.layout_details.hopper_value import HopperMXValueLayout

    total = 0
    for rows, cols in ((2 * width, hidden), (hidden, width)):
        values = torch.zeros(1, rows, cols // 2, dtype=torch.uint8)
        scales = torch.zeros(1, rows, cols // 32, dtype=torch.uint8)
        swizzled = convert_layout(wrap_torch_tensor(values.transpose(-2, -1), dtype=FP4), HopperMXValueLayout,
                                  mx_axis=1)
        swizzled_scales = convert_layout(wrap_torch_tensor(scales.transpose(-2, -1)), HopperMXScaleLayout,
                                         mx_axis=1, num_warps=8)
        total += (swizzled.storage.data.untyped_storage().nbytes()
                  + swizzled_scales.storage.data.untyped_storage().nbytes() + scales.numel())
    return total


def main() -> None:
    json.dump([{"hidden": h, "intermediate": i, "bytes": expert_bytes(h, i)} for h, i in SHAPES], sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
