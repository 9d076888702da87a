"""Dev-only: what the real loss functions keep and add, per logit, recorded on the CPU.

A bf16 lm_head over bf16 hidden states (B x S x H), then the loss as each library computes it:
transformers' ``ForCausalLMLoss`` (the model's ``loss_function``: upcast, shift, cross-entropy) and
torchtune's ``CEWithChunkedOutputLoss`` over the model's 8 logit chunks (``chunked_output``). Every
storage an aten op creates is watched (torch_probe.StorageWatch): the peak of the loss's own new
allocations in its forward, what is still alive once it returns (kept for backward), and the
peak of new allocations in ``loss.backward()`` down to the logits' gradient (the lm_head's
backward stopped by detaching the hidden states' path: ``logits.retain_grad``). Per logit
(B·S·V). Writes ``tests/data/loss_heads.json``: ``{name: {"kept", "forward", "backward", ...}}``.

    pip install torch==2.13.0 transformers torchtune==0.6.1 torchao==0.10.0   # never vramlint dependencies
    python dev/loss_heads.py > tests/data/loss_heads.json
"""

from __future__ import annotations

import contextlib
import json
import sys

import torch
from torch_probe import StorageWatch

B, S, H, V = 2, 512, 64, 8192


class Ledger:
    def __init__(self) -> None:
        self.live: dict[int, int] = {}
        self.now = self.peak = 0

    def new(self, ptr: int, nbytes: int, op: str) -> None:
        self.live[ptr] = nbytes
        self.now += nbytes
        self.peak = max(self.peak, self.now)

    def free(self, ptr: int) -> None:
        self.now -= self.live.pop(ptr, 0)

    def reset(self) -> None:
        self.peak = self.now


def record(name: str, chunked: bool) -> dict:
    torch.manual_seed(0)
    head = torch.nn.Linear(H, V, bias=False, dtype=torch.bfloat16)
    hidden = torch.randn(B, S, H, dtype=torch.bfloat16)
    labels = torch.randint(0, V, (B, S))
    if chunked:
        from torchtune.modules.loss import CEWithChunkedOutputLoss
        loss_fn = CEWithChunkedOutputLoss(num_output_chunks=8)
        logits = [head(c).detach().requires_grad_() for c in hidden.chunk(8, dim=1)]
    else:
        from transformers.loss.loss_utils import ForCausalLMLoss
        logits = head(hidden).detach().requires_grad_()
    ledger = Ledger()
    exclude = {t.untyped_storage().data_ptr() for t in [head.weight, hidden, labels]
               + (logits if chunked else [logits])}
    with StorageWatch(exclude, ledger.new, ledger.free):
        loss = loss_fn(logits, labels) if chunked else ForCausalLMLoss(logits, labels, V)
        forward, kept = ledger.peak, ledger.now
        ledger.reset()
        loss.backward()
        backward = ledger.peak - kept
    n = B * S * V
    return {"kept": round(kept / n, 3), "forward_peak": round(forward / n, 3),
            "backward_peak_over_kept": round(backward / n, 3), "logits_before": 2.0,
            "shape": {"B": B, "S": S, "H": H, "V": V}}


def main() -> None:
    import torchtune
    import transformers
    with contextlib.redirect_stdout(sys.stderr):
        found = {"full": record("full", False), "chunked": record("chunked", True)}
    found["source"] = (f"torch {torch.__version__}, transformers {transformers.__version__} ForCausalLMLoss, "
                       f"torchtune {torchtune.__version__} CEWithChunkedOutputLoss(num_output_chunks=8); CPU, "
                       "the logits (2 B each) exist before the loss and are not counted in its allocations")
    json.dump(found, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
