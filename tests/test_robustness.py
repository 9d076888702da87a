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


# Every cause the fuzz run over all commands found (issue 29), each closed -------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from conftest import EXAMPLES, ROOT  # noqa: E402

DS = str(EXAMPLES / "llama8b-zero3-8xh100.json")
JOB = ["--model", "llama-3.1-8b", "--seq-len", "1024"]


def _cli(*argv: str, stdout=subprocess.PIPE, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vramlint", *argv], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=60, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _one_line_usage_error(capsys, argv: list[str], words: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("vramlint: error: ") and words in err, err


@pytest.mark.parametrize("gpus,words", [
    ("1x" + "9" * 400 + "GB", "unknown GPU"),                  # OverflowError in units.parse_size
    ("9" * 5000 + "xH100", "GPUs a node and"),               # int() past 4,300 digits in hardware.parse_gpus
    ("8x0GB", "is no GPU's memory"),                         # ZeroDivisionError in the text reporter
    ("10000000x80GB", "GPUs a node and"),                    # plan killed after 30 s at 415 MB
    ("2x2000xH100", "at most 1024 GPUs a node"),
])
def test_gpu_specs_past_any_machine_are_one_line_usage_errors(capsys, gpus, words):
    for command in (["check", DS, *JOB], ["plan", *JOB], ["estimate", "--train", *JOB]):
        _one_line_usage_error(capsys, [*command, "--gpus", gpus], words)


def test_a_huge_cluster_plans_in_bounded_time(capsys):
    """zero12_grad_partition walked every rank (a list of 10^6): now only the ranks where a tensor
    starts or ends, with the same answer."""
    from vramlint.hardware import parse_gpus
    from vramlint.memory.runtimes.deepspeed.states import zero12_grad_partition
    from vramlint.models import read_model
    from vramlint.plan import plan_from_flags
    model = read_model("llama-3.2-1b")
    for gpus in ("2xH100", "8xH100", "3x7xH100"):
        plan = plan_from_flags(model, parse_gpus(gpus), {"train": True, "seq_len": 512, "zero_stage": 2})
        sizes, n = [0], plan.data_parallel       # the definition, every rank walked
        from vramlint.memory.parts.adapters import trainable_tensors
        sizes = trainable_tensors(plan)
        padded = -(-sum(sizes) // (2 * n)) * (2 * n)
        part, held, start = padded // n, [0] * n, 0
        for size in sizes:
            for rank in range(start // part, min(n - 1, (start + size - 1) // part) + 1):
                held[rank] += size
            start += size
        assert zero12_grad_partition(plan) == max(held)
    assert main(["plan", "--model", "llama-3.1-8b", "--seq-len", "2048", "--gpus", "1024x1024xH100",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("raw,name", [('{"train_micro_batch_size_per_gpu": ' + "9" * 5000 + "}", "ds.json"),
                                      ("train_micro_batch_size_per_gpu: " + "9" * 5000 + "\n", "ds.yaml")])
def test_a_number_of_thousands_of_digits_is_a_located_vl004(tmp_path, capsys, raw, name):
    path = tmp_path / name
    path.write_text(raw)
    assert main(["check", str(path), "--gpus", "8xH100", *JOB, "--format", "json"]) == 1
    assert [f["code"] for f in json.loads(capsys.readouterr().out)["files"][0]["findings"]] == ["VL004"]


@pytest.mark.parametrize("toml,words", [
    ("tool = 3\n", "tool is a int, not a table"),                                 # AttributeError in load_settings
    ("[tool]\nvramlint = 3\n", "is not of type 'object'"),
    ("[tool.vramlint]\ngpus = " + "{a=" * 2000 + "1" + "}" * 2000 + "\n", "nested too deep"),   # RecursionError
    ('[tool.vramlint]\ngpus = "8xH100"\n[[tool.vramlint.overrides]]\nfiles = "' + "*" * 3000 + 'x"\n',
     "is too complex"),                                                           # a glob that backtracks for minutes
])
def test_settings_of_the_wrong_shape_are_one_line_usage_errors(tmp_path, capsys, monkeypatch, toml, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(toml)
    _one_line_usage_error(capsys, ["check", DS, *JOB, "--gpus", "8xH100"], words)


def test_names_no_filesystem_takes_and_an_empty_name(capsys):
    _one_line_usage_error(capsys, ["check", "a" * 300, "--gpus", "8xH100"], "cannot read")   # OSError in expand
    _one_line_usage_error(capsys, ["check", "", "--gpus", "8xH100"], "an empty file name")  # it exited 0


def test_a_walk_past_any_repository_stops_with_a_usage_error(tmp_path, capsys, monkeypatch):
    """``vramlint check /`` walked the whole machine."""
    import vramlint.files
    monkeypatch.setattr(vramlint.files, "MOST_WALKED", 50)
    for i in range(60):
        (tmp_path / f"f{i}.txt").write_text("x")
    _one_line_usage_error(capsys, ["check", str(tmp_path), "--gpus", "8xH100"], "more than 50 files and folders")


@pytest.mark.parametrize("command", [["check", DS, *JOB, "--gpus", "8xH100"], ["gpus"], ["models"], ["rule"],
                                     ["model", "gpt2"], ["plan", *JOB, "--gpus", "8xH100"]])
def test_closed_and_full_standard_output_are_exit_2_in_one_line(command):
    """Was an internal error ('NoneType' object has no attribute 'flush', No space left on device)
    and exit 120 from the interpreter's final flush."""
    closed = subprocess.run([sys.executable, "-m", "vramlint", *command], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, timeout=60, close_fds=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2 and closed.stderr.strip() == "vramlint: error: standard output is closed"
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            proc = _cli(*command, stdout=full)
        assert proc.returncode == 2
        assert proc.stderr.strip() == "vramlint: error: cannot write the output (No space left on device)"


def test_a_control_sequence_in_a_config_value_never_reaches_a_ci_log(tmp_path, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text('model_name_or_path: "x/\\e[31mred\\r"\nper_device_train_batch_size: 1\nlearning_rate: 1\n')
    for fmt in ("github", "text"):
        main(["check", str(path), "--gpus", "8xH100", "--format", fmt])
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\r" not in out and "\\x1b[31mred" in out, fmt
