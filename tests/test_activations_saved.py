"""Activations against what autograd really keeps, family by family.

tests/data/saved_tensors.json was produced by dev/saved_tensors.py: for each model type's default
config (two layers, eight experts, dropout off) one bf16 training forward of transformers on the
CPU, summing the distinct storages the first decoder layer's ops save for backward. vramlint's
``layer_tensors`` must match within 2 %. The CPU's SDPA differs from CUDA's where it falls back
to the math path (fp32 scores, b·heads·s²): falcon's expanded multi-query k/v and DeepSeek's
unequal q/v head sizes — those two are held to the parts outside attention only by the H200
measurements elsewhere, and left out here.
"""

from __future__ import annotations

import json

import pytest

from conftest import DATA

from vramlint.hardware import parse_gpus
from vramlint.memory.parts.activations import layer_tensors
from vramlint.models.hfconfig import shape_from_dict
from vramlint.plan import Plan

SAVED = json.loads((DATA / "saved_tensors.json").read_text())
CPU_MATH_PATH = {"falcon:sdpa", "deepseek_v3:sdpa"}


def test_every_family_with_an_attention_kernel_is_covered():
    covered = {key.split(":")[0] for key in SAVED if key not in CPU_MATH_PATH}
    assert len(covered) >= 16
    assert {key.split(":")[1] for key in SAVED} == {"sdpa", "eager"}


@pytest.mark.parametrize("case", sorted(set(SAVED) - CPU_MATH_PATH))
def test_first_layer_keeps_what_autograd_saves(case):
    entry = SAVED[case]
    model = shape_from_dict(dict(entry["config"]))
    plan = Plan(model=model, cluster=parse_gpus("1xH100"), precision="bf16", runtime="torch",
                weights_dtype="bfloat16", micro_batch=1, seq_len=entry["seq"], attn=case.split(":")[1])
    counted = sum(layer_tensors(model.layers[0], model, plan))
    assert counted == pytest.approx(entry["bytes_per_token"], rel=0.02)
