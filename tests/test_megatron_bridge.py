"""Megatron-Bridge's ConfigContainer YAML read as the Megatron-core job it is (readers/megatron_bridge.py).

Files (tests/data/megatron_bridge/SOURCES.tsv): the ConfigContainer a Llama-3.2-1B run on 8 x H100
logged beside its memory line (verdimrc/playground-nemo-2.0-gh, lines 675-1318 of the markdown);
four of Megatron-Bridge's own dry-run dumps (a9497c6b: Llama-3 8B and 70B SFT with fp8, DeepSeek-V3, Qwen3-235B-A22B);
its Llama-3 8B override example.
"""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "megatron_bridge"
MIB = 2 ** 20


def _check(path, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", str(path), "--format", "json", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)["files"][0]


def _codes(entry: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in entry["findings"]]


def test_the_files_are_their_sources_bytes():
    rows = list(csv.DictReader((DATA / "SOURCES.tsv").open(), delimiter="\t"))
    assert len(rows) == 6
    for row in rows:
        assert (DATA / row["file"]).is_file(), row["file"]
        assert row["commit"] in row["url"]
    # lines 675-1318 of the markdown at 6129a1ad, as stored (the slice's bytes, read again there)
    logged = (DATA / "llama32_1b_run_config.yaml").read_bytes()
    assert hashlib.sha256(logged).hexdigest()[:12] == "53d7db9dc127"
    assert yaml.safe_load(logged)["_target_"] == "megatron.bridge.training.config.ConfigContainer"


def test_the_logged_config_and_the_same_launch_line_give_one_answer():
    """The run's ConfigContainer and Megatron-LM's pretrain_gpt.py line of the same arguments
    (tests/data/published/megatron.jsonl row 2, the same run) are one job: one estimate, within
    10 % of the max allocated the run printed (12,003.6 MiB)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from checked import without_context
    from megatron_published import ROWS, estimate
    row = next(json.loads(line) for line in Path(ROWS).read_text().splitlines() if json.loads(line)["id"] == 2)
    line = estimate(row)["estimate"]
    bridge = _check(DATA / "llama32_1b_run_config.yaml", "--gpus", "8x80GB")
    assert bridge["kind"] == "megatron-bridge"
    assert without_context(bridge["estimate"]) == pytest.approx(without_context(line), rel=1e-3)
    assert without_context(bridge["estimate"]) / MIB == pytest.approx(row["max_allocated_mib"], rel=0.10)
    plan = bridge["plan"]
    assert (plan["micro_batch"], plan["seq_len"], plan["data_parallel"]) == (1, 1024, 8)   # dataset's, not 131072
    assert plan["origins"]["seq_len"].endswith("llama32_1b_run_config.yaml:61:3")         # dataset.sequence_length


def test_the_dumped_mixed_precision_wins_over_the_model_and_ddp_sections():
    """The dry-run dump's MixedPrecisionConfig (bf16, fp8 e4m3, grad_reduce_in_fp32 true) is what
    runtime_config_update copies over model.fp8 null and ddp.grad_reduce_in_fp32 false: a 4-byte
    gradient buffer, and fp8 said where the recipe sets it."""
    entry = _check(DATA / "llama3_8b_sft_gb200_fp8_mx_v1.yaml", "--gpus", "8xH100")
    fp8 = [f for f in entry["findings"] if f["code"] == "VL210" and "fp8" in f["message"]]
    assert fp8 and fp8[0]["line"] == 219
    buffer = next(c for c in entry["estimate"]["components"] if c["name"] == "gradient buffer")
    assert buffer["formula"].startswith("4 B x 8,030,261,248")
    assert entry["plan"]["seq_len"] == 4096                            # dataset.seq_length, not model's 16384
    assert "stage sft" in " ".join(entry["estimate"]["assumptions"])


def test_a_bridge_job_that_does_not_fit_is_hinted_in_its_own_keys():
    entry = _check(DATA / "llama3_70b_sft_gb200_fp8_mx_v1.yaml", "--gpus", "4x8xH100")
    over = next(f for f in entry["findings"] if f["code"] == "VL201")
    assert "model.tensor_model_parallel_size: " in over["hint"] or "model.recompute_granularity" in over["hint"]
    assert "--" not in over["hint"]


def test_what_cannot_be_read_is_said_never_skipped():
    """An override file (the rest of its job is a Python recipe): VL011, never skipped (NeMo 1.x's
    configs are read: tests/test_nemo.py)."""
    override = _check(DATA / "llama3_8b_pretrain_override_example.yaml", "--gpus", "8xH100")
    assert any(c == "VL011" and "override file" in m for c, m in _codes(override))


def test_a_mixed_precision_recipe_by_name_states_the_same_job(tmp_path):
    """``mixed_precision: bf16_mixed`` (the name a recipe passes) in place of the dumped dataclass and
    the model's bf16: bf16 parameters and the fp32 gradient buffer the recipe sets, the same estimate."""
    data = yaml.safe_load((DATA / "llama32_1b_run_config.yaml").read_text())
    data["mixed_precision"] = "bf16_mixed"
    for section in ("model", "optimizer"):
        data[section].pop("bf16")
    data["ddp"].pop("grad_reduce_in_fp32")
    named = tmp_path / "run_config.yaml"
    named.write_text(yaml.safe_dump(data))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from checked import without_context
    same = _check(named, "--gpus", "8x80GB")
    logged = _check(DATA / "llama32_1b_run_config.yaml", "--gpus", "8x80GB")
    assert without_context(same["estimate"]) == without_context(logged["estimate"])


@pytest.mark.parametrize("key, value, words", [
    ("hybrid_override_pattern", "M-G-M*-M-M-M*-M-", "Gated DeltaNet (G)"),
    ("heterogeneous_layers_config_path", "nemotron_super.json", "heterogeneous layers"),
])
def test_a_provider_whose_layers_are_not_priced_is_not_estimated_as_a_dense_gpt(tmp_path, key, value, words):
    """The logged run's config with a hybrid pattern of Gated DeltaNet layers, or a shape per layer:
    VL011 at that key, never the estimate of the dense GPT the other keys describe."""
    data = yaml.safe_load((DATA / "llama32_1b_run_config.yaml").read_text())
    data["model"][key] = value
    changed = tmp_path / "run_config.yaml"
    changed.write_text(yaml.safe_dump(data))
    entry = _check(changed, "--gpus", "8x80GB")
    assert not entry.get("estimate")
    assert any(f["code"] == "VL011" and words in f["message"] for f in entry["findings"])


def test_a_mamba_providers_pattern_is_priced_as_megatron_lms_hybrid_stack(tmp_path):
    """A Nemotron-H-style ``model.hybrid_override_pattern`` (with the dump's ``mamba_num_heads: null``,
    TransformerConfig's d_inner / head_dim: 2 x 2048 / 64) is the hybrid stack pretrain_hybrid.py builds
    from the same flags: its Mamba, attention and MLP layers, estimated (it was VL011)."""
    data = yaml.safe_load((DATA / "llama32_1b_run_config.yaml").read_text())
    data["model"]["hybrid_override_pattern"] = "M-M-M*-M-M-M*-M-"
    changed = tmp_path / "run_config.yaml"
    changed.write_text(yaml.safe_dump(data))
    entry = _check(changed, "--gpus", "8x80GB")
    assert entry["model"].startswith("Megatron hybrid: 16 layers (7 Mamba, 2 attention, 7 MLP; Mamba 64 heads x 64")
    assert entry["status"] == "estimated"


def test_a_config_that_states_no_precision_is_fp32_said_in_its_keys(tmp_path):
    """No mixed_precision recipe and no model.bf16: Bridge trains in fp32 (its recipes have no fp32
    one); the estimate says so in Bridge's words, not Megatron-LM's --bf16."""
    data = yaml.safe_load((DATA / "llama32_1b_run_config.yaml").read_text())
    data.pop("mixed_precision")
    for section in ("model", "optimizer"):
        data[section].pop("bf16")
    plain = tmp_path / "run_config.yaml"
    plain.write_text(yaml.safe_dump(data))
    entry = _check(plain, "--gpus", "8x80GB")
    assert "no mixed_precision recipe" in entry["plan"]["origins"]["mixed_precision"]
    assert next(c for c in entry["estimate"]["components"] if c["name"] == "parameters")["formula"].startswith("4 B")


def test_deepseek_v3s_recipe_is_priced_as_latent_attention_on_its_pipeline_layout(tmp_path):
    """Bridge's DeepSeek-V3 recipe (was VL011): multi-latent attention and its MoE layers as
    DeepSeek's, over ``pipeline_model_parallel_layout: Et|(tt|)*30mL`` (61 layers over 32 stages,
    PP 8 x 4 virtual): PP rank 0 holds stages 0, 8, 16, 24 (1 + 2 + 2 + 2 layers), the last rank
    stages 7, 15, 23 and 31 (2 + 2 + 2 + the MTP and the loss). Its MTP layer is priced there (it was
    said, VL210): an MoE layer as the decoder's last, its embedding, and its loss."""
    from vramlint.checker import check_file
    from vramlint.hardware import parse_gpus
    from vramlint.jobs.result import Context
    from vramlint.memory.runtimes.megatron.layout import ranks
    entry = _check(DATA / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml", "--gpus", "128x8xH100")
    assert entry["estimate"] and "multi-latent attention (q latent 1536, kv latent 512" in entry["model"]
    assert not any("multi-token prediction" in m for c, m in _codes(entry))
    assert any(note.startswith("multi-token prediction: 1 depth(s) of 1 layer(s)")
               for note in entry["estimate"]["assumptions"])
    plan = check_file(str(DATA / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"),
                      Context(parse_gpus("128x8xH100")))[0].plan
    held = [sum(len(stage.layers) for stage in rank.stages) for rank in ranks(plan)]
    assert (held[0], held[-1], sum(held), plan.parallelism.stages_per_rank) == (7, 6, 61, 4)
