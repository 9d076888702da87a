"""No crash on any input: property tests over arbitrary JSON and arbitrary config-shaped files."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramlint.cli import main
from vramlint.documents import ParseError, parse_json

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=8),
                    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children,
                                                                                       max_size=4),
                    max_leaves=12)
DS_KEYS = ["train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization",
           "fp16", "bf16", "stage", "offload_optimizer", "offload_param", "device", "enabled", "ratio",
           "reduce_bucket_size", "sub_group_size", "stage3_max_reuse_distance", "stage3_prefetch_bucket_size"]
VALUES = st.one_of(st.integers(-3, 300), st.booleans(), st.none(), st.sampled_from(["auto", "cpu", "none", "nvme", ""]),
                   st.floats(-1, 2, allow_nan=False), st.sampled_from([0, 5e8, 1e12, 1e308]))
CONFIG = st.recursive(VALUES, lambda children: st.dictionaries(st.sampled_from(DS_KEYS), children, max_size=5),
                      max_leaves=15)


@given(JSON)
def test_json_round_trips(value):
    assert parse_json(json.dumps(value)).data == value


@given(st.text(max_size=60))
def test_any_text_parses_or_fails_with_a_position(text):
    try:
        parse_json(text)
    except ParseError as exc:
        assert exc.line >= 1 and exc.column >= 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(DS_KEYS), CONFIG, min_size=1, max_size=5))
def test_any_deepspeed_shaped_file_gives_findings_not_tracebacks(tmp_path, capsys, config):
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config))
    code = main(["check", str(path), "--gpus", "8xH100", "--model", "gpt2", "--seq-len", "512", "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert "internal error" not in err and "Traceback" not in err
    json.loads(out)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["distributed_type", "mixed_precision", "num_processes", "num_machines",
                                        "compute_environment", "deepspeed_config", "fsdp_config", "zero_stage",
                                        "fsdp_sharding_strategy", "fsdp_version", "fsdp_reshard_after_forward"]),
                       CONFIG, min_size=1, max_size=6))
def test_any_accelerate_shaped_file_gives_findings_not_tracebacks(tmp_path, capsys, config):
    import yaml
    config.setdefault("compute_environment", "LOCAL_MACHINE")
    path = tmp_path / "accelerate_config.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main(["check", str(path), "--gpus", "8xH100", "--model", "gpt2", "--seq-len", "512", "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2) and "internal error" not in err and "Traceback" not in err, err


VLLM_VALUES = st.one_of(VALUES, st.sampled_from(["x", "8k", "2", "", "auto", "fp8"]), st.just(float("inf")),
                       st.just(float("nan")), st.lists(st.integers(0, 4), max_size=2))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size",
                                        "enable-expert-parallel", "gpu-memory-utilization", "max-model-len",
                                        "max-num-seqs", "max-num-batched-tokens", "kv-cache-dtype",
                                        "kv-cache-memory-bytes", "cpu-offload-gb", "dtype", "performance-mode",
                                        "no-enable-chunked-prefill", "limit-mm-per-prompt", "quantization",
                                        "speculative-config"]),
                       VLLM_VALUES, min_size=1, max_size=6))
def test_any_vllm_shaped_file_gives_findings_not_tracebacks(tmp_path, capsys, config):
    import yaml
    path = tmp_path / "vllm.yaml"
    path.write_text(yaml.safe_dump({"model": "Qwen/Qwen3-30B-A3B", **config}))
    code = main(["check", str(path), "--gpus", "8xH100", "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "internal error" not in err and "Traceback" not in err, err
    json.loads(out)


def test_non_positive_micro_batch_is_a_finding_and_the_estimate_stays_sane(tmp_path, capsys):
    path = tmp_path / "ds_config.json"
    path.write_text('{"train_micro_batch_size_per_gpu": -4, "zero_optimization": {"stage": 2}}')
    assert main(["check", str(path), "--gpus", "8xH100", "--model", "gpt2", "--seq-len", "512", "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)["files"][0]
    assert {"VL102", "VL301"} <= {f["code"] for f in out["findings"]}
    assert out["plan"]["micro_batch"] == 1 and all(c["bytes"] >= 0 for c in out["estimate"]["components"])


CATALOG_CONFIGS = [e["config"] for e in __import__("vramlint.models.catalog", fromlist=["entries"]).entries()]
ODD = st.one_of(st.sampled_from([0, -1, 1, 2**40, None, "x", "", 2.5, True, [], {}, [1, "a"], {"a": 1},
                                 float("inf")]), st.integers(-5, 10**6))


@settings(max_examples=60, deadline=None, derandomize=True,       # CI sees the same 60; seeds 1-45 were run by hand
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(CATALOG_CONFIGS), st.data())
def test_any_mutated_model_config_is_read_or_refused_in_one_line(tmp_path, capsys, config, data):
    """A real config.json with a few values replaced by ones no model has: a model or a one-line
    usage error (exit 2), never an internal error — nested sections (text_config, vision_config,
    quantization_config, rope_scaling) included."""
    config = json.loads(json.dumps(config))
    for _ in range(data.draw(st.integers(1, 3))):
        holder = config
        nested = [k for k, v in config.items() if isinstance(v, dict)]
        if nested and data.draw(st.booleans()):
            holder = config[data.draw(st.sampled_from(sorted(nested)))]
        if holder:
            holder[data.draw(st.sampled_from(sorted(holder)))] = copy.deepcopy(data.draw(ODD))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code = main(["estimate", "--model", str(path), "--gpus", "1xH100", "--train", "--micro-batch", "1",
                 "--seq-len", "256", "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2) and "internal error" not in err and "Traceback" not in err, err


MULTIMODAL = [e["config"] for e in __import__("vramlint.models.catalog", fromlist=["entries"]).entries()
              if "vision_config" in e["config"]]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(MULTIMODAL), st.data())
def test_a_mutated_vision_config_counts_no_negative_tower(config, data):
    """Odd values in a tower's config or the wrapper's projector settings (vision_feature_layer
    -30 once gave vLLM's LLaVA tower a negative size): a count of at least 0 on both runtimes, or
    a one-line usage error."""
    from vramlint.errors import UsageError
    from vramlint.models.hfconfig import shape_from_dict
    config = json.loads(json.dumps(config))
    holder = config["vision_config"] if data.draw(st.booleans()) else config
    key = data.draw(st.sampled_from(sorted(set(holder) | {"vision_feature_layer", "num_hidden_layers"})))
    holder[key] = copy.deepcopy(data.draw(ODD))
    try:
        shape = shape_from_dict(config)
    except UsageError:
        return
    assert shape.vision is None or (shape.vision.params >= 0 and shape.vision.vllm_params >= 0)
