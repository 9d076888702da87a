"""Each rule on real files or minimal ones: it fires where the framework would complain, at the
right line, and stays quiet otherwise."""

from __future__ import annotations

import json

import pytest

from conftest import CORPUS, EXAMPLES, shared_or_skip
from vramlint.cli import main
from vramlint.rules.batch import resolve

GPU_ARGS = ["--gpus", "4xH100", "--model", "Qwen/Qwen2.5-7B", "--seq-len", "2048", "--grad-checkpointing"]


def findings(capsys, path, *extra) -> list[dict]:
    main(["check", str(path), *GPU_ARGS, "--format", "json", *extra])
    return json.loads(capsys.readouterr().out)["files"][0]["findings"]


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("tb, mb, ga, world, verdict", [
    (100, 8, None, 4, "100 != 8 * 3 * 4"),            # DeepSpeed's floor division, then its assertion
    (96, 8, None, 4, (96, 8, 3)),
    (None, 8, 2, 4, (64, 8, 2)),
    (64, None, None, 4, (64, 16, 1)),
    (64, None, 4, 4, (64, 4, 4)),
    (None, None, 4, 4, "Either train_batch_size or train_micro_batch_size_per_gpu"),
    (8, 16, None, 4, "Gradient accumulation steps: 0 has to be greater than 0"),
    (1, 0, None, 8, "Micro batch size per gpu: 0 has to be greater than 0"),      # before dividing by it
    (64, None, 0, 8, "Gradient accumulation steps: 0 has to be greater than 0"),
])
def test_deepspeed_batch_arithmetic(tb, mb, ga, world, verdict):
    got = resolve(tb, mb, ga, world)
    assert (verdict in got) if isinstance(verdict, str) else got == verdict


def test_typo_inside_zero_optimization_is_an_error_with_did_you_mean(capsys):
    path = shared_or_skip(CORPUS / "deepspeed" / "microsoft__DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3__examples__ds_zero_stage_infinity_config.json")
    typo = next(f for f in findings(capsys, path) if f["code"] == "VL101")
    assert typo["severity"] == "error" and "stage3_param_persitence_threshold" in typo["message"]
    assert typo["hint"] == "did you mean 'stage3_param_persistence_threshold'?"
    assert path.read_text().splitlines()[typo["line"] - 1].strip().startswith('"stage3_param_persitence_threshold"')


def test_reordered_words_are_suggested(capsys):
    path = shared_or_skip(CORPUS / "deepspeed" / "microsoft__DeepSpeedExamples__Megatron-LM__model_size_test__ds_zero-offload_10B_config.json")
    typo = next(f for f in findings(capsys, path) if f["code"] == "VL101")
    assert typo["hint"] == "did you mean 'overlap_comm'?"


def test_unknown_top_level_deepspeed_key_is_only_a_warning(capsys):
    path = shared_or_skip(CORPUS / "deepspeed" / "microsoft__DeepSpeedExamples__training__imagenet__config__ds_fp16_z1_config.json")
    unknown = [f for f in findings(capsys, path) if f["code"] == "VL101"]
    assert [f["severity"] for f in unknown] == ["warning"] and "cuda_visible_devices" in unknown[0]["message"]


def test_accelerate_unknown_top_level_key_is_an_error_nested_a_warning(capsys):
    bad = shared_or_skip(CORPUS / "accelerate" / "huggingface__accelerate__tests__test_configs__invalid_keys.yaml")
    assert {f["severity"] for f in findings(capsys, bad) if f["code"] == "VL101"} == {"error"}
    nested = shared_or_skip(CORPUS / "accelerate" / "neuralmagic__sparseml__fsdp_config.yaml")
    legacy = next(f for f in findings(capsys, nested) if f["code"] == "VL101")
    assert legacy["severity"] == "warning" and legacy["hint"] == "did you mean 'fsdp_backward_prefetch'?"


def test_wrong_type_and_value(tmp_path, capsys):
    path = write(tmp_path, "ds_config.json", '{"train_micro_batch_size_per_gpu": 1,\n "zero_optimization": {"stage": 4}}')
    wrong = next(f for f in findings(capsys, path) if f["code"] == "VL102")
    assert wrong["line"] == 2 and "stage" in wrong["message"]


def test_conflicting_precision(tmp_path, capsys):
    path = write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": 1,\n"fp16": {"enabled": true},\n'
                                      '"bf16": {"enabled": true}}')
    assert any(f["code"] == "VL306" and f["line"] == 2 for f in findings(capsys, path))


def test_offload_param_below_stage_3(tmp_path, capsys):
    path = write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2,\n'
                                      '  "offload_param": {"device": "cpu"}}}')
    assert any(f["code"] == "VL307" and f["severity"] == "warning" for f in findings(capsys, path))


def test_unresolved_auto_is_information_not_failure(capsys):
    path = shared_or_skip(CORPUS / "deepspeed" / "axolotl-ai-cloud__axolotl__deepspeed_configs__zero3.json")
    code = main(["check", str(path), *GPU_ARGS, "--format", "json"])
    out = json.loads(capsys.readouterr().out)["files"][0]
    assert any(f["code"] == "VL305" and f["severity"] == "info" for f in out["findings"]) and code == 0


def test_host_ram_exceeded(capsys):
    args = ["check", str(EXAMPLES / "llama70b-zero3-offload-8xh100.json"), "--gpus", "8xH100", "--model",
            "meta-llama/Llama-3.1-70B", "--seq-len", "4096", "--grad-checkpointing"]
    assert main(args + ["--host-ram", "1TB"]) == 1
    assert "VL203" in capsys.readouterr().out
    assert main(args + ["--host-ram", "2TB"]) == 0


def test_inline_and_file_suppressions(tmp_path, capsys):
    yaml = ("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: bf16\n"
            "num_processes: 2  # vramlint: disable=world-size-mismatch\n")
    assert not any(f["code"] == "VL302" for f in findings(capsys, write(tmp_path, "accelerate_a.yaml", yaml)))
    above = yaml.replace("num_processes: 2  # vramlint: disable=world-size-mismatch",
                         "# vramlint: disable=VL302\nnum_processes: 2")
    assert not any(f["code"] == "VL302" for f in findings(capsys, write(tmp_path, "accelerate_b.yaml", above)))
    plain = yaml.replace("  # vramlint: disable=world-size-mismatch", "")
    assert any(f["code"] == "VL302" for f in findings(capsys, write(tmp_path, "accelerate_c.yaml", plain)))
    whole = "# vramlint: disable-file=VL302,exceeds-gpu-memory\n" + plain
    assert findings(capsys, write(tmp_path, "accelerate_d.yaml", whole)) == []


def test_hjson_only_syntax_warns_for_the_hf_path(tmp_path, capsys):
    path = write(tmp_path, "ds_config.json", '{\n  // ZeRO-2 for the 7B runs\n  "train_micro_batch_size_per_gpu": 1,\n'
                                              '  "zero_optimization": {"stage": 2,},\n}')
    found = findings(capsys, path)
    hjson = next(f for f in found if f["code"] == "VL002")
    assert hjson["severity"] == "warning" and "comments and trailing commas" in hjson["message"]


def test_a_section_deepspeed_removed_is_a_warning_with_its_own_error(capsys, tmp_path):
    """DeepSpeed 0.19.7 refuses elasticity, Sparse Attention, MoQ, MiCS and friends
    (``_reject_removed_config_keys``); earlier releases accept them, so a warning, not an error,
    and not also an unknown key."""
    path = write(tmp_path, "ds_config.json", '{"train_micro_batch_size_per_gpu": 1,\n'
                                             ' "elasticity": {"enabled": true},\n'
                                             ' "zero_optimization": {"stage": 3, "mics_shard_size": 8}}')
    found = [f for f in findings(capsys, path) if f["code"].startswith("VL1")]
    assert [(f["code"], f["severity"], f["line"]) for f in found] == [("VL103", "warning", 2), ("VL103", "warning", 3)]
    assert "DeepSpeedConfigError: Elastic training has been removed" in found[0]["message"]
    assert "MiCS ZeRO-3 sharding has been removed" in found[1]["message"]
