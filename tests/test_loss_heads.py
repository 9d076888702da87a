"""The loss head (memory/loss.py) against the real loss functions, recorded on the CPU by
dev/loss_heads.py: transformers 5.24's ForCausalLMLoss and torchtune 0.6.1's
CEWithChunkedOutputLoss, per logit: what stays for backward, the forward's peak (the 16-bit
logits, 2 B, included) and backward's first moment."""

from __future__ import annotations

import json

import pytest

from conftest import DATA
from vramlint.hardware import parse_gpus
from vramlint.memory.parts.loss import loss_head
from vramlint.models import read_model
from vramlint.plan import Plan

RECORDED = json.loads((DATA / "loss_heads.json").read_text())


def _plan(kind: str, shape: dict, lora_rank: int = 0) -> Plan:
    model = read_model("meta-llama/Llama-3.2-1B")
    model = model.__class__(**{**model.__dict__, "vocab_size": shape["V"]})
    return Plan(model=model, cluster=parse_gpus("1xH100"), precision="bf16", runtime="torch",
                weights_dtype="bfloat16", micro_batch=shape["B"], seq_len=shape["S"], loss=kind,
                lora_rank=lora_rank)


@pytest.mark.parametrize("kind", ["full", "chunked"])
def test_the_loss_keeps_and_adds_what_the_library_does(kind):
    record = RECORDED[kind]
    shape = record["shape"]
    head = loss_head(_plan(kind, shape))
    count = shape["B"] * shape["S"] * shape["V"]
    assert head.kept[0] / count == pytest.approx(record["kept"], abs=0.01)
    assert (head.kept[0] + head.forward[0]) / count == pytest.approx(record["forward_peak"] + 2, abs=0.01)
    assert head.backward[0] / count == pytest.approx(record["backward_peak_over_kept"], abs=0.01)


def test_the_fused_heads_never_hold_the_logits():
    """Liger, Cut Cross-Entropy and TRL's fused head hold a chunk, a tile or per-token numbers:
    far under the 16-bit logits alone (read from their sources, memory/loss.py). LoRA: the
    lm_head's own gradient, which a full fine-tune keeps anyway, is not theirs."""
    shape = {"B": 4, "S": 4096, "V": 128256}
    logits = 2 * shape["B"] * shape["S"] * shape["V"]
    for kind in ("liger", "cce", "trl"):
        head = loss_head(_plan(kind, shape, lora_rank=16))
        assert head.kept[0] + max(head.forward[0], head.backward[0]) < logits / 4, kind
