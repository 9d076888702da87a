"""transformers 4.x against 5.x, on the recorded allocation order of one training step.

tests/data/tf<release>_<model>_<kind>_b<B>s<S>[_gc|_mask].json were recorded on the CPU by
dev/trace_transformers.py (torch 2.13.0) with transformers 4.48.3 ("tf448"), 4.57.6 ("tf457") and
5.24.0 ("tf5"): every storage an aten op created and freed in two AdamW steps of a plain loop,
``model(input_ids=ids, labels=ids)`` with no attention_mask and ``use_cache=False`` ("_mask":
an all-ones attention_mask passed, as a collator does). Replayed through the allocator model
(dev/trace_allocations.py ``replay``), the second step's allocated peak is what the release's
real op order reaches; vramlint's replay of the same run, with the trace's transformers as its
stack, must reach it within 2 %.

What 4.57 keeps that 5.24 does not, read in the traces: given no attention_mask, 4.53.1-4.57
build SDPA a causal mask (``find_packed_sequence_indices`` never returns None), every layer keeps
its b × s × s conversion in the compute dtype, and the mask turns 4.54's ``enable_gqa`` off, so
k and v are repeated to every head. 4.48 keeps the loss's shifted fp32 copy of the logits and
repeats k and v whatever the mask.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from conftest import DATA, ROOT

sys.path.insert(0, str(ROOT / "dev"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from accuracy import plan_for  # noqa: E402
from trace_allocations import replay  # noqa: E402

from vramlint.memory.runtimes.torch.step import simulate_training  # noqa: E402
from vramlint.stack import Pinned, Stack, plan_for_stack  # noqa: E402

TRACES = ("tf448_llama_bf16_adamw_b2s512.json", "tf457_llama_bf16_adamw_b2s512.json",
          "tf457_llama_bf16_adamw_b2s512_mask.json", "tf457_llama1b-l2_bf16_adamw_b1s2048.json",
          "tf457_qwen2_amp_adamw_b2s512_gc.json", "tf5_llama_bf16_adamw_b2s512.json",
          "tf5_llama1b-l2_bf16_adamw_b1s2048.json", "tf5_qwen2_amp_adamw_b2s512_gc.json")
PAIRS = [(name, "tf5" + name[5:]) for name in TRACES if name.startswith("tf457") and "mask" not in name]
MIB = 1 << 20


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def vramlint_plan(trace: dict):
    """The recorded run as vramlint plans it, on the trace's own transformers and torch."""
    setup = trace["setup"]
    scenario = {"kind": setup["kind"], "micro_batch": setup["batch"], "seq": setup["seq"],
                "grad_checkpointing": setup["checkpointing"]}
    plan = plan_for({"model": setup["model_type"], "config": {**setup["config"], "model_type": setup["model_type"]},
                     "scenario": scenario, "gpu_total": 150_109_880_320, "attn_implementation": "sdpa"})
    plan = dataclasses.replace(plan, attention_mask=setup["attention_mask"] or setup["use_cache_default"])
    stack = Stack({"transformers": Pinned(trace["transformers"], "the trace"),
                   "torch": Pinned(trace["torch"].split("+")[0], "the trace")})
    return plan_for_stack(plan, stack)


def replayed(name: str) -> int:
    return replay(load(name))[1][0]


@pytest.mark.parametrize("name", TRACES)
def test_each_release_replays_as_its_recorded_op_order(name):
    trace = load(name)
    assert simulate_training(vramlint_plan(trace)).allocated == pytest.approx(replayed(name), rel=0.02)


@pytest.mark.parametrize("old, new", PAIRS)
def test_what_4_57_keeps_that_5_does_not_is_modelled(old, new):
    """The recorded 4.57 - 5.24 difference at the step's peak (7 MiB for the tiny model, 40 MiB at
    Llama-3.2-1B's widths, 0.5 MiB checkpointed) is vramlint's within 1 MiB: without the mask term
    vramlint gave 4.57 and 5.24 the same peak."""
    real = replayed(old) - replayed(new)
    modelled = (simulate_training(vramlint_plan(load(old))).allocated
                - simulate_training(vramlint_plan(load(new))).allocated)
    assert real > 0
    assert modelled == pytest.approx(real, abs=MIB)


def test_a_step_that_passes_the_attention_mask_keeps_nothing_more_on_4_57():
    """With the collator's attention_mask the 4.57 step is the 5.24 one, but for the b × s boolean
    copy of that mask (1 KiB here), and vramlint adds nothing for it."""
    masked, plain = "tf457_llama_bf16_adamw_b2s512_mask.json", "tf5_llama_bf16_adamw_b2s512.json"
    assert replayed(masked) - replayed(plain) == 2 * 512
    plan = vramlint_plan(load(masked))
    assert not plan.sdpa_causal_mask and not plan.sdpa_repeat_kv


def test_the_mask_term_is_said_and_only_for_its_releases():
    """4.53.0 had no packed-sequence check and 5.0 skips the mask again: only 4.53.1-4.57 build it."""
    trace = load("tf457_llama_bf16_adamw_b2s512.json")
    for version, built in (("4.53.0", False), ("4.53.1", True), ("4.57.6", True), ("5.0.0", False)):
        plan = vramlint_plan({**trace, "transformers": version})
        assert plan.sdpa_causal_mask is built
        assert any("causal mask" in note for note in plan.assumptions) is built
