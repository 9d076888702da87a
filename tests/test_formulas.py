"""Every formula the breakdown prints states the bytes printed beside it (``tests/formulas.py``
reads the arithmetic): over every training recipe of tests/data/recipes, every ZeRO stage in fp32
and 16-bit with and without offload and LoRA, and vLLM configs — a formula that says ``4 B x P``
beside a quarter of that, or one that states arithmetic the evaluator cannot read, fails here."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from conftest import DATA, EXAMPLES
from formulas import evaluate, tolerance
from vramlint.checker import Context, check_file
from vramlint.hardware import parse_gpus
from vramlint.memory.parts.adapters import trainable
from vramlint.models import read_model

# Formulas that state no arithmetic: measured constants, and descriptions of what depends on the
# other rows or on a per-block layout (bitsandbytes' absmax, NF4 bits).
DESCRIPTIVE = (r"^measured\b", r"measured: ", r"^32 MiB cuBLAS", r"absmax", r"scale per row", r"paged", r"^\(P: 0\.5 B",
               r"− the above$", r"\(\d+\.\d\d GiB\)", r"^offloaded( to \w+)?$", r"^not replayed$",
               r"^\d+ x rank \d+ buffers")
RECIPES = sorted(p for p in (DATA / "recipes").rglob("*") if p.suffix in (".yaml", ".yml", ".json")
                 and "deepspeed" not in p.name.lower() and "accelerate" not in str(p.parent).lower())
MODELS = ("meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B")


def _env(plan) -> dict:
    """The symbols as the estimate used them: a tensor-parallel rank's model."""
    if plan.tensor_parallel > 1:
        plan = plan.with_changes(model=plan.model.tp_local(plan.tensor_parallel, plan.tp_split))
    c = plan.cluster
    return {"P": plan.model.params, "T": trainable(plan), "N_d": plan.data_parallel, "nodes": c.nodes,
            "GPUs": c.world_size, "per_node": c.per_node}


def _rows(path: Path, gpus: str = "8xH100", model: str | None = None, **values) -> list:
    context = Context(parse_gpus(gpus), values, frozenset(values), model=read_model(model) if model else None)
    rows = []
    for result in check_file(str(path), context):
        if result.estimate is not None:
            rows += [(c, _env(result.plan)) for c in result.estimate.components]
        if result.serving is not None:
            rows += [(c, {"P": 0, "T": 0, "N_d": 1}) for c in result.serving[1].components]
    return rows


def _assert_stated(rows: list) -> int:
    for component, env in rows:
        value = evaluate(component.formula, env)
        if value is None:
            assert any(re.search(p, component.formula) for p in DESCRIPTIVE), \
                f"{component.name}: {component.formula!r} states arithmetic the test cannot read"
            continue
        assert abs(value - component.bytes) <= tolerance(component.formula, value, env), \
            f"{component.name}: {component.formula!r} is {value:,.0f} B, printed beside {component.bytes:,} B"
    return len(rows)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(DATA / "recipes")))
def test_recipe_formulas_state_their_bytes(path):
    _assert_stated(_rows(path))


@pytest.mark.parametrize("stage,precision,offload,lora", list(itertools.product(
    (0, 1, 2, 3), ("bf16", "fp16", "fp32"), ("none", "cpu"), (0, 16))))
def test_deepspeed_formulas_state_their_bytes(tmp_path, stage, precision, offload, lora):
    zero = {"stage": stage, "offload_optimizer": {"device": offload}}
    if stage == 3 and offload == "cpu":
        zero["offload_param"] = {"device": "cpu"}
    config = {"zero_optimization": zero, "train_micro_batch_size_per_gpu": 2}
    if precision != "fp32":
        config[precision] = {"enabled": True}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    extra = {"lora_rank": lora} if lora else {}
    for model in MODELS:
        assert _assert_stated(_rows(path, model=model, seq_len=2048, **extra))


@pytest.mark.parametrize("tp,model", list(itertools.product((1, 2, 4), MODELS + ("Qwen/Qwen2.5-VL-7B-Instruct",))))
def test_vllm_formulas_state_their_bytes(tmp_path, tp, model):
    path = tmp_path / "vllm.yaml"
    path.write_text(f"model: {model}\ntensor-parallel-size: {tp}\nmax-model-len: 8192\nenable-lora: true\n")
    assert _assert_stated(_rows(path))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("vllm-*.yaml")), ids=lambda p: p.name)
def test_example_vllm_formulas_state_their_bytes(path):
    assert _assert_stated(_rows(path))


def test_the_evaluator_reads_what_the_breakdown_writes():
    env = {"P": 8, "T": 2, "N_d": 4, "nodes": 2, "GPUs": 16, "per_node": 8}
    assert evaluate("4 B x P / N_d", env) == 8
    assert evaluate("2 B + 4 B x (P + T) / N_d (then AdamW's temporary)", env) == 15
    assert evaluate("12 B x b·s·V = 12 x 1,000", env) == 12_000
    assert evaluate("2 B x reduce_bucket_size (500,000,000), allocated at init", env) == 1e9
    assert evaluate("18 B x 1,000 / nodes x 1.5 (the parameters the optimizer holds)", env) == 13_500
    assert evaluate("(4 B x P / 8 (fp32) + 12 B x P / 8) x GPUs per node", env) == 128
    assert evaluate("2 B x 1,000 params / (TP 2 x PP 1)", env) == 1000
    assert evaluate("measured, DeepSpeed ZeRO-1", env) is None
