"""LitGPT's own model code against what autograd really keeps.

tests/data/litgpt/litgpt_block.json was produced by dev/litgpt_block.py: LitGPT 0.5.13's ``GPT``
and its LoRA ``GPT`` (lora_query, lora_value, r 8, dropout 0.05) for configs of its own shrunk
to two layers, one bf16-true training forward on the CPU, the distinct storages the second
block's ops save. vramlint's ``layer_tensors`` for the same config read through
``models.litgpt`` must match within 2 %. The CPU's dropout keeps its mask in the input's dtype
(2 B an element) where CUDA's ``native_dropout`` keeps a bool (1 B): the LoRA cases' one dropout
(the fused qkv's) is counted at CUDA's byte.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import DATA

from vramlint.hardware import parse_gpus
from vramlint.memory.parts.activations import layer_tensors
from vramlint.models.hfconfig import shape_from_dict
from vramlint.models.litgpt import code_block, hf_config
from vramlint.plan import Plan

TRACE = json.loads((DATA / "litgpt" / "litgpt_block.json").read_text())


def _plan(entry: dict) -> Plan:
    fields, lora = entry["litgpt"], entry["lora"]
    shape = shape_from_dict(hf_config(fields))
    shape = replace(shape, block=code_block(fields, shape.block))
    adapters = dict(lora_rank=lora["lora_r"], lora_targets=("q_proj", "v_proj"), lora_dropout=lora["lora_dropout"],
                    adapter_dtype="bfloat16") if lora else {}
    return Plan(model=shape, cluster=parse_gpus("1xH100"), precision="bf16", runtime="torch", weights_dtype="bfloat16",
                micro_batch=1, seq_len=entry["seq"], sdpa_repeat_kv=True, model_code="litgpt", **adapters)


@pytest.mark.parametrize("case", sorted(TRACE["blocks"]))
def test_a_block_keeps_what_litgpt_saves(case):
    entry = TRACE["blocks"][case]
    plan = _plan(entry)
    traced = entry["bytes_per_token"] - (plan.model.hidden_size if entry["lora"] else 0)   # CUDA's 1-byte mask
    assert sum(layer_tensors(plan.model.layers[1], plan.model, plan)) == pytest.approx(traced, rel=0.02)
