"""Dev-only: what torch's AdamW step allocates for a moment, foreach against fused, on the CPU;
and the state bytes bitsandbytes' paged 32-bit AdamW keeps per element.

Parameters of a few shapes (bf16 and fp32) with gradients set; one step to create the states,
then a second step watched (torch_probe.StorageWatch): the peak of the storages it creates and
frees. Writes ``tests/data/optimizer_steps.json``: ``{"<impl>:<dtype>": {"transient_per_element"},
"paged_32bit_state_per_element": ...}``.

    pip install torch==2.13.0 bitsandbytes     # never vramlint dependencies
    python dev/optimizer_steps.py > tests/data/optimizer_steps.json
"""

from __future__ import annotations

import json
import sys

import torch
from loss_heads import Ledger
from torch_probe import StorageWatch

SHAPES = [(1024, 1024), (4096, 64), (64, 1000)]


def _params(dtype: torch.dtype) -> list[torch.nn.Parameter]:
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*shape, dtype=dtype)) for shape in SHAPES]
    for p in params:
        p.grad = torch.randn_like(p)
    return params


def transient(impl: str, dtype: torch.dtype) -> float:
    params = _params(dtype)
    optimizer = torch.optim.AdamW(params, lr=1e-5, **{impl: True})
    optimizer.step()
    exclude = {t.untyped_storage().data_ptr() for p in params for t in [p, p.grad]}
    exclude |= {t.untyped_storage().data_ptr() for s in optimizer.state.values() for t in s.values()
                if isinstance(t, torch.Tensor)}
    ledger = Ledger()
    with StorageWatch(exclude, ledger.new, ledger.free):
        optimizer.step()
    return ledger.peak / sum(p.numel() for p in params)


def paged_32bit_state(dtype: torch.dtype) -> float:
    import bitsandbytes
    params = _params(dtype)
    optimizer = bitsandbytes.optim.PagedAdamW32bit(params, lr=1e-5)
    optimizer.step()
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for s in optimizer.state.values()
                for t in s.values() if isinstance(t, torch.Tensor) and t.numel() > 1}
    return sum(storages.values()) / sum(p.numel() for p in params)


def main() -> None:
    import bitsandbytes
    found = {f"{impl}:{str(dtype).split('.')[-1]}": {"transient_per_element": round(transient(impl, dtype), 4)}
             for impl in ("foreach", "fused") for dtype in (torch.bfloat16, torch.float32)}
    found["paged_32bit_state_per_element"] = {str(d).split(".")[-1]: round(paged_32bit_state(d), 4)
                                              for d in (torch.bfloat16, torch.float32)}
    found["source"] = (f"torch {torch.__version__} AdamW (foreach=True / fused=True), bitsandbytes "
                       f"{bitsandbytes.__version__} PagedAdamW32bit; CPU; shapes {SHAPES}")
    json.dump(found, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
