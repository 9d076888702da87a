"""Model-state bytes against DeepSpeed's own estimators, for the same parameter counts.

Runs where the ``crosscheck`` extra is installed (CI installs it; see .ci/run). Each difference
is a mechanism documented in docs/memory-model.md ("DeepSpeed's estimators"), asserted exactly
here so that a change on either side shows.
"""

from __future__ import annotations

import pytest

stage_1_and_2 = pytest.importorskip("deepspeed.runtime.zero.stage_1_and_2")
stage3 = pytest.importorskip("deepspeed.runtime.zero.stage3")

from vramlint.hardware import parse_gpus  # noqa: E402
from vramlint.memory.runtimes.deepspeed.states import deepspeed_states, zero12_grad_partition, zero3_sub_groups  # noqa: E402
from vramlint.models import read_model  # noqa: E402
from vramlint.plan import Plan  # noqa: E402

MODELS = ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "mistralai/Mixtral-8x7B-v0.1"]
CLUSTERS = ["8xH100", "2x8xH100"]


def states_on_gpu(plan: Plan) -> int:
    """What DeepSpeed's estimators count: resting states + gradients (no step temporaries)."""
    s = deepspeed_states(plan)
    return sum(c.bytes for c in s.resting + s.gradients)


def make(model, gpus, stage, opt="none", par="none") -> Plan:
    return Plan(model=read_model(model), cluster=parse_gpus(gpus), precision="bf16", zero_stage=stage,
                offload_optimizer=opt, offload_param=par)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("gpus", CLUSTERS)
def test_zero2_without_offload_differs_by_the_fp32_gradient_partition(model, gpus):
    plan = make(model, gpus, 2)
    p, n = plan.model.params, plan.data_parallel
    _, ds_gpu = stage_1_and_2.estimate_zero2_model_states_mem_needs(
        p, plan.cluster.per_node, plan.cluster.nodes, cpu_offload=False)
    # DeepSpeed: 2P + 18P/N (16-bit and fp32 gradient partitions); the fp32 one exists only inside
    # step(), where vramlint counts it with the flattened copy and AdamW's temporary; the 16-bit one
    # holds the whole parameters that overlap the fullest rank's part, not 2P/N
    overlap = 2 * zero12_grad_partition(plan) - 2 * p / n
    assert overlap >= 0
    assert ds_gpu - states_on_gpu(plan) == pytest.approx(4 * p / n - overlap, abs=n + 2)
    step = sum(c.bytes for c in deepspeed_states(plan).step)
    assert step == pytest.approx(6 * p / n, abs=n + 2)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("gpus", CLUSTERS)
def test_zero2_cpu_offload_adds_the_measured_gradient_staging(model, gpus):
    plan = make(model, gpus, 2, opt="cpu")
    p = plan.model.params
    ds_cpu, ds_gpu = stage_1_and_2.estimate_zero2_model_states_mem_needs(p, plan.cluster.per_node, plan.cluster.nodes)
    assert states_on_gpu(plan) - ds_gpu == 2 * max(plan.model.tensor_sizes)      # the largest parameter tensor
    assert deepspeed_states(plan).host[0].bytes == ds_cpu


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("gpus", CLUSTERS)
@pytest.mark.parametrize("opt, par", [("none", "none"), ("cpu", "none"), ("cpu", "cpu")])
def test_zero3_differs_by_the_ipg_bucket_and_gradient_partitions(model, gpus, opt, par):
    plan = make(model, gpus, 3, opt, par)
    p, n, largest = plan.model.params, plan.data_parallel, plan.model.largest_layer_params
    ds_cpu, ds_gpu, _ = stage3.estimate_zero3_model_states_mem_needs(
        p, largest, plan.cluster.per_node, plan.cluster.nodes, cpu_offload=opt != "none",
        cpu_offload_params=par != "none")
    # DeepSpeed budgets 4 B x the largest layer; stage3.py allocates the IPG bucket at init instead,
    # and keeps parameters under the persistence threshold gathered on every GPU
    extra = 2 * plan.reduce_bucket_size - 4 * largest
    persistent = sum(size for size in plan.model.tensor_sizes if size < plan.param_persistence_threshold)
    extra += 2 * persistent if par != "none" or n > 1 else 0
    if opt == "none":
        group = max(zero3_sub_groups(plan))
        # + 16-bit gradient partition (2P/N) + fp32 gradients of one sub-group − DeepSpeed's 4P/N fp32 grads
        extra += -(-2 * p // n) + 4 * group - (-(-4 * p // n))
    assert states_on_gpu(plan) - ds_gpu == pytest.approx(extra, abs=4 * n + 8)
    if opt == "cpu":
        assert deepspeed_states(plan).host[0].bytes == pytest.approx(ds_cpu, rel=1e-9)


def test_the_schema_knows_every_key_deepspeed_validates():
    """DeepSpeed validates zero_optimization (and its offload sections), fp16, bf16 and
    tensor_parallel (AutoTP) with pydantic models that forbid extra keys: every field and alias of those models is in the schema,
    so no valid key is reported as unknown (five ZeRO keys of DeepSpeed 0.19.8 were)."""
    import json
    from deepspeed.runtime.precision_config import DeepSpeedBF16Config, DeepSpeedFP16Config
    from deepspeed.runtime.tensor_parallel.config import TPConfig, TPTrainingConfig
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    from deepspeed.runtime.zero.offload_config import (DeepSpeedZeroOffloadOptimizerConfig,
                                                       DeepSpeedZeroOffloadParamConfig)
    from conftest import ROOT
    schema = json.loads((ROOT / "schemas" / "deepspeed.schema.json").read_text())

    def section(node: dict) -> set[str]:
        return set(next(a for a in node.get("anyOf", [node]) if a.get("type") == "object")["properties"])

    def names(model) -> set[str]:
        return {name for field, info in model.model_fields.items() for name in (field, info.alias) if name}

    zero = next(a for a in schema["properties"]["zero_optimization"]["anyOf"] if a.get("type") == "object")
    for known, model in [(section(schema["properties"]["zero_optimization"]), DeepSpeedZeroConfig),
                         (section(zero["properties"]["offload_optimizer"]), DeepSpeedZeroOffloadOptimizerConfig),
                         (section(zero["properties"]["offload_param"]), DeepSpeedZeroOffloadParamConfig),
                         (section(schema["properties"]["fp16"]), DeepSpeedFP16Config),
                         (section(schema["properties"]["bf16"]), DeepSpeedBF16Config),
                         (section(schema["properties"]["tensor_parallel"]), TPTrainingConfig),
                         (section(schema["properties"]["tensor_parallel"]["properties"]["tp"]), TPConfig)]:
        assert names(model) <= known, (model.__name__, sorted(names(model) - known))


def test_the_removed_sections_are_deepspeeds_own():
    """vramlint's table of what DeepSpeed removed is DeepSpeed's (0.19.7 and later), message for message."""
    import deepspeed.runtime.config as ds_config
    from vramlint.rules.schema import DEEPSPEED_REMOVED
    if not hasattr(ds_config, "_REMOVED_TOP_LEVEL_CONFIG_KEYS"):
        pytest.skip("DeepSpeed before 0.19.7 removed nothing")
    for ours, theirs in [(DEEPSPEED_REMOVED["$"], ds_config._REMOVED_TOP_LEVEL_CONFIG_KEYS),
                         (DEEPSPEED_REMOVED["$.zero_optimization"], ds_config._REMOVED_ZERO_CONFIG_KEYS)]:
        assert set(ours) == set(theirs)
        for key, message in ours.items():
            assert theirs[key].startswith(message.rstrip(".")), key


def test_the_schema_knows_the_top_level_keys_deepspeeds_config_reads():
    """Every key DeepSpeed's runtime/config.py reads from the whole config (``param_dict[K]``,
    ``param_dict.get(K)``, ``get_scalar_param(param_dict, K, ...)``, ``K in param_dict``) is in the
    schema, so none is reported as having no effect (six of DeepSpeed 0.19.8's were)."""
    import ast
    import inspect
    import json
    import deepspeed.runtime.config as ds_config
    from conftest import ROOT

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and isinstance(getattr(ds_config, node.id, None), str):
            return getattr(ds_config, node.id)
        return None

    def is_config(node) -> bool:
        return isinstance(node, ast.Name) and node.id == "param_dict"

    read = set()
    for node in ast.walk(ast.parse(inspect.getsource(ds_config))):
        if isinstance(node, ast.Subscript) and is_config(node.value):
            read.add(value(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and is_config(node.func.value) and node.args:
            read.add(value(node.args[0]))
        elif isinstance(node, ast.Call) and len(node.args) > 1 and is_config(node.args[0]):
            read.add(value(node.args[1]))
        elif isinstance(node, ast.Compare) and any(is_config(c) for c in node.comparators):
            read.add(value(node.left))
    known = set(json.loads((ROOT / "schemas" / "deepspeed.schema.json").read_text())["properties"])
    read.discard(None)
    assert len(read) > 20 and read <= known, sorted(read - known)
