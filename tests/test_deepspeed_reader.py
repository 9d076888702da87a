"""DeepSpeed facts from real files, including the legacy forms."""

from __future__ import annotations

import pytest

from conftest import CORPUS, shared_or_skip
from vramlint.documents import parse_json
from vramlint.readers.deepspeed import read_deepspeed

DS = "deepspeed"


def read(name: str):
    path = shared_or_skip(CORPUS / DS / name)
    return read_deepspeed(parse_json(path.read_text(), str(path)))


def test_zero3_with_cpu_offload_and_auto_precision():
    ds = read("huggingface__accelerate__tests__deepspeed__ds_config_zero3.json")
    assert ds.zero_stage.value == 3
    assert (ds.offload_optimizer.value, ds.offload_param.value) == ("cpu", "cpu")
    assert ds.precision.value == "auto" and ds.micro_batch.value == "auto"
    assert ds.zero_stage.location.line > 1


def test_legacy_boolean_zero_optimization_is_stage_1():
    ds = read("microsoft__DeepSpeedExamples__Megatron-LM__scripts__ds_config.json")
    assert ds.zero_stage.value == 1 and ds.notes


def test_legacy_cpu_offload_flag_is_optimizer_offload():
    ds = read("microsoft__DeepSpeedExamples__Megatron-LM__scripts__ds_zero2_cpu_offload_config.json")
    assert ds.zero_stage.value == 2 and ds.offload_optimizer.value == "cpu"
    assert ds.precision.value == "fp16"


def test_no_zero_section_means_stage_0_and_defaults_have_no_location():
    ds = read("microsoft__DeepSpeedExamples__BingBertSquad__deepspeed_bsz24_config.json")
    assert ds.zero_stage.value == 0 and ds.zero_stage.location is None
    assert ds.micro_batch.value == 3 and ds.train_batch.value == 24


@pytest.mark.parametrize("text, precision", [
    ('{"bf16": {"enabled": true}}', "bf16"), ('{"bfloat16": {"enabled": true}}', "bf16"),
    ('{"fp16": {"enabled": true}}', "fp16"), ('{"fp16": {"enabled": false}}', "fp32"),
    ('{"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}', "auto"), ('{}', "fp32"),
])
def test_precision(text, precision):
    assert read_deepspeed(parse_json(text)).precision.value == precision


def test_every_corpus_file_reads_without_error():
    for path in sorted(shared_or_skip(CORPUS / DS).iterdir()):
        if "TEMPLATE" in path.name:
            continue
        ds = read_deepspeed(parse_json(path.read_text(), str(path)))
        assert ds.zero_stage.value in (0, 1, 2, 3), path.name


def test_zero_buffer_sizes_are_read_under_both_key_names():
    ds = read("microsoft__DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3__examples__ds_zero_stage_infinity_config.json")
    sizes = {name: fact.value for name, fact in ds.buffers.items()}
    # JSON writes 1e9 as a float; DeepSpeed (pydantic) reads it as an int
    assert sizes == {"reduce_bucket_size": 90_000_000, "sub_group_size": 100_000_000,
                     "max_live_parameters": 1_000_000_000, "max_reuse_distance": 1_000_000_000,
                     "prefetch_bucket_size": 50_000_000}
    assert ds.buffers["reduce_bucket_size"].location.line == 13


def test_auto_buffer_sizes_are_filled_from_the_hidden_size_as_the_hf_trainer_does():
    from vramlint.hardware import parse_gpus
    from vramlint.models import read_model
    from vramlint.plan import Flags, plan_from_deepspeed
    ds = read("axolotl-ai-cloud__axolotl__deepspeed_configs__zero3_bf16.json")
    assert ds.buffers["reduce_bucket_size"].value == "auto"
    model = read_model("meta-llama/Llama-3.1-8B")
    plan = plan_from_deepspeed(ds, model, parse_gpus("8xH100"), Flags(seq_len=2048))
    assert plan.reduce_bucket_size == 4096 ** 2
    assert plan.prefetch_bucket_size == int(0.9 * 4096 ** 2)
    assert plan.param_persistence_threshold == 40960
    # the short pydantic names: no parameter is a sub-group of its own, nothing is kept for reuse
    assert (plan.sub_group_size, plan.max_reuse_distance) == (0, 0)
    assert plan.origins["reduce_bucket_size"].location.line == ds.buffers["reduce_bucket_size"].location.line
    assert any("hidden_size**2" in note for note in plan.assumptions)


def test_overlap_comm_gives_zero2_its_second_bucket():
    """DeepSpeed's setup_buckets allocates a second IPG buffer for the reduction stream when
    ``overlap_comm`` is on (off by default below stage 3): 2 B x reduce_bucket_size more in backward."""
    from dataclasses import replace

    from vramlint.hardware import parse_gpus
    from vramlint.memory.runtimes.deepspeed.states import deepspeed_states
    from vramlint.models import read_model
    from vramlint.plan import Flags, plan_from_deepspeed
    model, gpus = read_model("meta-llama/Llama-3.2-1B"), parse_gpus("8xH100")
    ds = read("huggingface__accelerate__examples__deepspeed_config_templates__zero_stage2_config.json")
    assert ds.overlap_comm.value is True and ds.overlap_comm.location.line > 1
    plan = plan_from_deepspeed(ds, model, gpus, Flags(seq_len=2048))
    assert plan.overlap_comm and plan.reduce_bucket_size == 2048 ** 2          # "auto": hidden_size**2
    without = ds.overlap_comm.__class__(None, None)                            # the key absent: DeepSpeed's default
    assert not plan_from_deepspeed(replace(ds, overlap_comm=without), model, gpus, Flags(seq_len=2048)).overlap_comm
    buckets = [sum(c.bytes for c in deepspeed_states(p).backward if c.name.startswith("IPG"))
               for p in (plan, plan.with_changes(overlap_comm=False))]
    assert buckets == [4 * 2048 ** 2, 2 * 2048 ** 2]
