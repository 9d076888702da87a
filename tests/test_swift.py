"""ms-swift's ``swift sft`` / ``swift pt`` launch lines (readers/swift.py, launch.py ``_swift``): its
own example scripts (tests/data/swift, byte-exact copies of modelscope/ms-swift's examples/train, each
with the memory its first line states), ms-swift 4.6.0's defaults, and the DeepSpeed configs it ships
(vramlint/data/shipped/ms-swift, byte-exact)."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest

from test_megatron_moe import _check       # vramlint check --format json, the first file's entry

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "swift"
GIB = 2 ** 30


def _plan(tmp_path, line: str, gpus: str = "1xA100-80GB"):
    from vramlint.checker import check_file
    from vramlint.hardware import parse_gpus
    from vramlint.jobs.result import Context
    script = tmp_path / "train.sh"
    script.write_text(line)
    return check_file(str(script), Context(parse_gpus(gpus)))[0]


def test_the_examples_and_the_shipped_configs_are_ms_swifts_bytes():
    rows = list(csv.DictReader((DATA / "SOURCES.tsv").open(), delimiter="\t"))
    assert len(rows) >= 40
    for row in rows:
        data = (DATA / row["file"]).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == row["blob"], row["file"]
    shipped = ROOT / "vramlint" / "data" / "shipped"
    copies = [r for r in csv.DictReader((shipped / "SOURCES.tsv").open(), delimiter="\t")
              if r["local_path"].startswith("ms-swift/")]
    assert len(copies) == 6
    for row in copies:                         # each the blob its note names, at the commit it names
        data = (shipped / row["local_path"]).read_bytes()
        blob = row["notes"].split("git blob ")[1].split(";")[0]
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, row["local_path"]


@pytest.mark.parametrize("example, stated, gpus", [
    ("examples/train/lora_sft.sh", 22.0, "1xA100-80GB"),
    ("examples/train/multi-gpu/deepspeed/train_zero3.sh", 16.0, "2xA100-80GB"),
])
def test_its_examples_are_read_and_priced_near_what_their_first_line_states(example, stated, gpus):
    """The README's LoRA example (Qwen2.5-7B-Instruct, rank 8 on all-linear, 2,048 tokens, bf16: "22GB")
    and the ZeRO-3 one (``--deepspeed zero3``: ms-swift's own swift/config/zero3.json, read from
    vramlint's byte copy; "16GiB * 2"): estimated within 10 %. They were VL011 ("ms-swift jobs are
    not read yet")."""
    entry = _check(DATA / example, "--gpus", gpus)
    assert entry["status"] == "estimated" and entry["via"].startswith("swift, line")
    estimate = entry["estimate"]["per_gpu_peak_bytes"] / GIB
    assert abs(estimate - stated) / stated < 0.10, estimate
    if "zero3" in example:
        assert any("ms-swift:swift/config/zero3.json" in note for note in entry["notes"])


def test_without_nproc_per_node_over_several_visible_gpus_the_model_is_spread_and_not_priced():
    """ms-swift runs one process, which spreads the model over every GPU CUDA_VISIBLE_DEVICES names
    (device_map: ``is_mp``); vramlint does not price that layout: VL011, never a one-GPU estimate."""
    entry = _check(DATA / "examples/train/multi-gpu/device_map/train.sh", "--gpus", "2xA100-80GB")
    assert entry["status"] == "not estimated"
    assert any(f["code"] == "VL011" and "device_map" in f["message"] for f in entry["findings"])


def test_ms_swifts_own_defaults_stand_where_the_line_states_nothing(tmp_path):
    """``swift sft --model M --dataset D``: LoRA rank 8 on all-linear (tuner_type lora), micro-batch 1,
    gradient checkpointing on, the weights in the checkpoint's dtype; ``--tuner_type full`` (3.x:
    ``--train_type``) trains every weight; ``--quant_bits 4`` alone quantizes nothing, with
    ``--quant_method bnb`` the base is 4-bit; ``swift pt`` is pretraining."""
    base = "swift {verb} --model Qwen/Qwen2.5-7B-Instruct --dataset d --max_length 1024 {extra}\n"
    plan = _plan(tmp_path, base.format(verb="sft", extra="")).plan
    assert (plan.lora_rank, plan.lora_targets, plan.micro_batch, plan.grad_checkpointing) == \
        (8, ("all-linear",), 1, True)
    assert plan.weights_dtype == "bfloat16" and plan.seq_len == 1024
    assert _plan(tmp_path, base.format(verb="sft", extra="--train_type full")).plan.lora_rank == 0
    assert not _plan(tmp_path, base.format(verb="sft", extra="--quant_bits 4")).plan.load_in_4bit
    assert _plan(tmp_path, base.format(verb="sft", extra="--quant_method bnb --quant_bits 4")).plan.load_in_4bit
    script = tmp_path / "pt.sh"
    script.write_text(base.format(verb="pt", extra=""))
    assert "ms-swift recipe, stage pt" in _check(script, "--gpus", "1xA100-80GB")["estimate"]["assumptions"]


def test_packing_without_flash_attention_is_refused_and_rlhf_stays_unread(tmp_path):
    """``--packing true`` needs a flash attention implementation (sft_args.py ``_check_padding_free``
    raises); ``swift rlhf`` is not read (VL011)."""
    script = tmp_path / "train.sh"
    script.write_text("swift sft --model Qwen/Qwen2.5-7B-Instruct --dataset d --packing true\n")
    found = _check(script, "--gpus", "1xA100-80GB")["findings"]
    assert any('The "packing" feature requires a flash attention implementation' in f["message"] for f in found)
    script.write_text("swift sft --model Qwen/Qwen2.5-7B-Instruct --dataset d --packing true --attn_impl flash_attn\n")
    assert not any("flash attention implementation" in f["message"]
                   for f in _check(script, "--gpus", "1xA100-80GB")["findings"])
    script.write_text("swift rlhf --rlhf_type dpo --model Qwen/Qwen2.5-7B-Instruct --dataset d\n")
    entry = _check(script, "--gpus", "1xA100-80GB")
    assert any(f["code"] == "VL011" and "ms-swift jobs (swift rlhf)" in f["message"] for f in entry["findings"])


def test_sequence_parallel_splits_the_tokens_and_unpriced_bits_are_said(tmp_path):
    """``--sequence_parallel_size 2`` keeps each rank's half of the 8,192 tokens' activations and logits
    (the shared split, as a recipe's context / sequence parallel degree); hqq at 2 bits, which the
    estimate cannot store, is priced as a 16-bit base and said (VL211); a stated ``--fp16 true`` beside
    ``--torch_dtype bfloat16`` is the precision, located at that flag."""
    base = "NPROC_PER_NODE=2 swift sft --model Qwen/Qwen2.5-7B-Instruct --dataset d --max_length 8192 {extra}\n"
    whole = _plan(tmp_path, base.format(extra="")).plan
    split = _plan(tmp_path, base.format(extra="--sequence_parallel_size 2")).plan
    assert (whole.seq_len, split.seq_len) == (8192, 4096)
    script = tmp_path / "q.sh"
    script.write_text(base.format(extra="--quant_method hqq --quant_bits 2"))
    found = _check(script, "--gpus", "2xA100-80GB")["findings"]
    assert any(f["code"] == "VL211" and "hqq quantization to 2 bits" in f["message"] for f in found)
    mixed = _plan(tmp_path, base.format(extra="--torch_dtype bfloat16 --fp16 true")).plan
    assert mixed.precision == "fp16"
