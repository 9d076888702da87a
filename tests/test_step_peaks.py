"""A whole training step's allocated peak, family by family, against transformers itself.

tests/data/step_peaks.json was produced by dev/step_peaks.py: two bf16 training steps of each
model type's default config shrunk to a small width (two layers, hidden 512, vocab 8000, seq
1024), on the CPU, under a TorchDispatchMode that adds up the storages aten ops create while a
tensor holds them — ``max_memory_allocated`` above the parameters, second step (Adam's states
already there). vramlint's peak moment, less the states at rest, must match within 2 %.
"""

from __future__ import annotations

import json

import pytest

from conftest import DATA

from vramlint.hardware import parse_gpus
from vramlint.memory.training import training_peak
from vramlint.models.hfconfig import shape_from_dict
from vramlint.plan import Plan

PEAKS = json.loads((DATA / "step_peaks.json").read_text())


def test_the_step_peaks_cover_the_families():
    assert len(PEAKS) >= 17 and any(entry["attn"] == "eager" for entry in PEAKS.values())


@pytest.mark.parametrize("model_type", sorted(PEAKS))
def test_step_peak_above_the_weights_matches_transformers(model_type):
    entry = PEAKS[model_type]
    model = shape_from_dict(dict(entry["config"]))
    plan = Plan(model=model, cluster=parse_gpus("1xH100"), precision="bf16", runtime="torch",
                weights_dtype="bfloat16", micro_batch=1, seq_len=entry["seq"], attn=entry["attn"])
    peak, _, states = training_peak(plan)
    resting = sum(c.bytes for c in states.resting)
    assert sum(c.bytes for c in states.resting if c.name.startswith("optimizer")) == entry["adam_states"]
    assert peak.bytes - resting == pytest.approx(entry["peak_above_weights"], rel=0.02)
