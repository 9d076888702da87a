"""Accelerate configs: the real files of the corpus, read as Accelerate reads them."""

from __future__ import annotations

import json

import pytest

from conftest import CORPUS, shared_or_skip
from vramlint.cli import main
from vramlint.documents import parse_yaml
from vramlint.readers.accelerate import read_accelerate

ACC = "accelerate"


def read(name: str):
    path = shared_or_skip(CORPUS / ACC / name)
    return read_accelerate(parse_yaml(path.read_text(), str(path)))


def check(capsys, path, *extra) -> tuple[int, dict]:
    code = main(["check", str(path), "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "2048",
                 "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)["files"][0]


def test_deepspeed_plugin_zero3():
    acc = read("huggingface__trl__examples__accelerate_configs__deepspeed_zero3.yaml")
    assert (acc.distributed_type.value, acc.zero_stage.value, acc.mixed_precision.value) == ("DEEPSPEED", 3, "bf16")
    assert acc.zero_stage.location.line == 9 and acc.num_processes.value == 8


def test_numeric_fsdp_strategy_and_legacy_prefetch_key():
    acc = read("neuralmagic__sparseml__fsdp_config.yaml")
    assert acc.fsdp_strategy.value == "FULL_SHARD" and any("1 is FULL_SHARD" in n for n in acc.notes)
    assert acc.mixed_precision.value == "no"


def test_fsdp2_reshard_after_forward():
    acc = read("huggingface__trl__examples__accelerate_configs__fsdp2.yaml")
    assert acc.fsdp_strategy.value == "FULL_SHARD"


def test_fsdp_version_is_read():
    """FSDP2's step keeps an all-gather output and a reduce-scatter input that FSDP1's flat
    parameters do without (memory/runtimes/fsdp/step.py); Accelerate's default is 1."""
    two = read("huggingface__trl__examples__accelerate_configs__fsdp2.yaml")
    one = read("hiyouga__LLaMA-Factory__examples__accelerate__fsdp_config.yaml")
    assert (two.fsdp_version.value, one.fsdp_version.value) == (2, 1)
    assert two.fsdp_version.location is not None and one.fsdp_version.location is None


def test_unquoted_no_is_read_as_yaml_false_and_noted():
    acc = read("huggingface__accelerate__tests__test_configs__0_30_0_sagemaker.yaml")
    assert acc.distributed_type.value == "NO" and any("unquoted NO" in n for n in acc.notes)


def test_zero3_yaml_plans_zero3_over_eight_gpus(capsys):
    code, out = check(capsys, shared_or_skip(CORPUS / ACC / "huggingface__trl__examples__accelerate_configs__deepspeed_zero3.yaml"))
    assert code == 0 and out["plan"]["zero_stage"] == 3 and out["plan"]["data_parallel"] == 8
    assert out["plan"]["precision"] == "bf16" and not out["findings"]


def test_num_processes_disagreeing_with_gpus_is_located(capsys):
    path = shared_or_skip(CORPUS / ACC / "hiyouga__LLaMA-Factory__examples__accelerate__fsdp_config.yaml")
    code, out = check(capsys, path)
    finding = next(f for f in out["findings"] if f["code"] == "VL302")
    assert (finding["line"], finding["column"]) == (19, 1) and "num_processes 2" in finding["message"]


def test_referenced_deepspeed_file_is_checked_with_the_yaml(tmp_path, capsys):
    (tmp_path / "ds_z2.json").write_text('{"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8,\n'
                                         ' "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}')
    (tmp_path / "accelerate.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
                                              "deepspeed_config:\n  deepspeed_config_file: ds_z2.json\n"
                                              "mixed_precision: bf16\nnum_processes: 8\n")
    code, out = check(capsys, tmp_path / "accelerate.yaml")
    assert out["plan"]["zero_stage"] == 2 and out["plan"]["precision"] == "bf16"
    batch = next(f for f in out["findings"] if f["code"] == "VL301")
    assert batch["path"].endswith("ds_z2.json") and code == 1


def test_missing_referenced_file_is_a_located_finding(tmp_path, capsys):
    (tmp_path / "accelerate.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
                                              "deepspeed_config:\n  deepspeed_config_file: nope.json\n")
    code, out = check(capsys, tmp_path / "accelerate.yaml")
    assert code == 1 and out["findings"][0]["code"] == "VL304" and out["findings"][0]["line"] == 4


@pytest.mark.parametrize("folder", ["accelerate", "deepspeed"])
def test_every_corpus_file_checks_without_usage_error(folder, capsys):
    for path in sorted(shared_or_skip(CORPUS / folder).iterdir()):
        code = main(["check", str(path), "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B",
                     "--seq-len", "2048", "--format", "json"])
        out, err = capsys.readouterr()
        assert code in (0, 1), (path.name, err)
        json.loads(out)


@pytest.mark.parametrize("yaml, words, line", [
    ("compute_environment: LOCAL_MACHINE\nmixed_precision: bf16\n", "A `distributed_type` must be specified", 1),
    ("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n"
     "  deepspeed_config_file: ds.json\n  zero_stage: 3\n", "will be ignored: ['zero_stage']", 5),
    ("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n"
     "  fsdp_reshard_after_forward: FULL_SHARD\n", "must be a bool (true/false) with fsdp_version 2", 5),
])
def test_accelerate_launch_refusals(tmp_path, capsys, yaml, words, line):
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}')
    (tmp_path / "accelerate.yaml").write_text(yaml)
    code, out = check(capsys, tmp_path / "accelerate.yaml")
    refused = next(f for f in out["findings"] if f["code"] == "VL308")
    assert code == 1 and words in refused["message"] and refused["line"] == line


def test_referenced_file_without_zero_section_is_refused(tmp_path, capsys):
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}}')
    (tmp_path / "accelerate.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
                                              "deepspeed_config:\n  deepspeed_config_file: ds.json\nnum_processes: 8\n")
    code, out = check(capsys, tmp_path / "accelerate.yaml")
    assert any(f["code"] == "VL308" and "ZeRO optimization config" in f["message"] for f in out["findings"])


@pytest.mark.parametrize("name, words", [
    ("hiyouga__LLaMA-Factory__examples__accelerate__fsdp_config.yaml", "plan: FSDP1 FULL_SHARD bf16"),
    ("huggingface__trl__examples__accelerate_configs__fsdp2.yaml", "plan: FSDP2 FULL_SHARD bf16"),
    ("huggingface__trl__examples__accelerate_configs__deepspeed_zero3.yaml", "plan: ZeRO-3 bf16"),
    ("huggingface__trl__examples__accelerate_configs__multi_gpu.yaml", "plan: PyTorch DDP bf16"),
])
def test_the_text_report_names_the_runtime_estimated(capsys, name, words):
    path = shared_or_skip(CORPUS / ACC / name)
    main(["check", str(path), "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "2048",
          "--format", "text", "--verbose"])
    assert words in capsys.readouterr().out


def test_qlora_under_fsdp_computes_in_the_quant_storage_dtype_whatever_mixed_precision_says(tmp_path, capsys):
    """The alignment-handbook's FSDP-QLoRA config says mixed_precision 'no', but transformers'
    Trainer overrides FSDP's mixed precision with bnb_4bit_quant_storage (bfloat16): the root unit
    is gathered in 2 B a parameter, not 4."""
    path = tmp_path / "fsdp_qlora.yaml"
    path.write_text("distributed_type: FSDP\nmixed_precision: 'no'\nnum_processes: 2\nfsdp_config:\n"
                    "  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_use_orig_params: false\n")
    code, out = check(capsys, path, "--gpus", "2x80GB", "--model", "meta-llama/Llama-2-70b-hf", "--seq-len", "512",
                      "--load-in-4bit", "--grad-checkpointing")
    root = next(c for c in out["estimate"]["components"] if c["name"] == "root unit (unsharded)")
    assert root["formula"].startswith("2 B x 524,296,192 ")    # 2 x 32000 x 8192 + 8192
    assert any("bnb_4bit_quant_storage (bfloat16)" in a for a in out["estimate"]["assumptions"])
