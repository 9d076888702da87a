"""SGLang's start-up budget (memory/serving/sglang.py) and its launch (readers/sglang.py): the
arithmetic held to a published start-up log (tests/data/sglang, byte-exact, SOURCES.tsv), the
release's own defaults read from its source, its refusal and warning in its words, and one job
written as a launch line or as a ``--config`` file giving one answer."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import subprocess
import sys

import pytest

from conftest import DATA
from vramlint.hardware import parse_gpus
from vramlint.memory.serving.sglang import (SglangServing, auto_fraction, cell_size, chunked_prefill, kv_pool,
                                            pool_warning, prefill_graph_sizes, sglang_estimate)
from vramlint.models import read_model

LOG = DATA / "sglang" / "didier-durand__llms-in-clouds" / "docs" / "sglang.md"
GiB = 1 << 30


def _log(pattern: str) -> str:
    return re.search(pattern, LOG.read_text()).group(1)


def test_the_log_is_the_sources_bytes():
    (row,) = csv.DictReader((DATA / "sglang" / "SOURCES.tsv").open(), delimiter="\t")
    data = (DATA / "sglang" / row["file"]).read_bytes()
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == row["blob"]


def test_sglang_0_4_3s_pool_on_four_l4s_is_its_logged_token_count():
    """QwQ-32B (Qwen2.5-32B's shape) at TP 4 on 4x L4 under sglang 0.4.3.post4: the default
    fraction for TP 4 and the chunked prefill for a GPU under 25,000 MiB are the logged
    ServerArgs'; a token takes 2 KV heads x 128 x 64 layers x K, V x 2 B; and the free memory
    before and after loading, as logged (two decimals), give its max_total_num_tokens."""
    L4 = parse_gpus("4xL4").gpu
    serving = SglangServing(read_model("Qwen/Qwen2.5-32B-Instruct"), L4.memory_bytes, L4.sm, tp=4,
                            release="0.4.3.post4")
    assert auto_fraction(serving)[0] == float(_log(r"mem_fraction_static=([0-9.]+)"))
    assert chunked_prefill(serving) == int(_log(r"server_args=.*?chunked_prefill_size=(\d+)"))
    assert cell_size(serving) == 2 * 128 * 64 * 2 * 2
    logged = int(_log(r"TP0\] max_total_num_tokens=(\d+)"))
    before = float(_log(r"TP0\] Load weight begin\. avail mem=([0-9.]+) GB"))
    loaded = float(_log(r"TP0\] Load weight end\..*?mem usage=([0-9.]+) GB"))
    low = kv_pool(int((before - 0.005) * GiB), int((loaded + 0.005) * GiB), 0.85, cell_size(serving))[1]
    high = kv_pool(int((before + 0.005) * GiB), int((loaded - 0.005) * GiB), 0.85, cell_size(serving))[1]
    assert low <= logged <= high
    size = float(_log(r"TP0\] KV Cache is allocated\. #tokens: \d+, K size: ([0-9.]+) GB"))
    assert abs(logged * cell_size(serving) / 2 / GiB - size) < 0.005         # K alone: half of each token's cell


@pytest.mark.parametrize("release, gpu, tp, reserved", [
    ("0.4.3.post4", "H100", 1, None), ("0.4.3.post4", "H100", 8, None),
    ("0.5.2", "H100", 1, (9.5 + 1 / 2) * 1024),
    ("0.5.2", "H200", 8, (12 + 8 / 2) * 1024),
    ("0.5.23", "H100", 1, 512 + 8192 * 1.5 + 1 / 8 * 1024 + 256 * 2 + 58 * 8),
    ("0.5.23", "L4", 2, 512 + 4096 * 1.5 + 2 / 8 * 1024 + 48 * 2 + 50 * 8),
])
def test_the_automatic_fraction_is_the_releases_formula(release, gpu, tp, reserved):
    """Three eras of ``mem_fraction_static`` when the launch leaves it to SGLang: by TP size (up to
    0.4.7: 0.88 at TP 1, 0.81 at TP 8), by GPU tier (0.4.8-0.5.2), by the prefill and CUDA-graph
    reserve (0.5.3 on: chunked prefill 8,192 and 256 decode graphs on an H100, 4,096 and 48 on an
    L4, 58 and 50 prefill graph sizes), each reserve written out here from the release's source,
    in MiB of the GPU as vramlint knows it."""
    card = parse_gpus(gpu).gpu
    serving = SglangServing(read_model("meta-llama/Llama-3.1-8B"), card.memory_bytes, card.sm, tp=tp, release=release)
    mem = card.memory_bytes / (1 << 20)
    expected = {1: 0.88, 8: 0.81}[tp] if reserved is None else round((mem - reserved) / mem, 3)
    assert auto_fraction(serving)[0] == expected


def test_the_prefill_graph_sizes_are_sglangs():
    assert len(prefill_graph_sizes(8192)) == 58 and prefill_graph_sizes(4096)[-1] == 4096
    assert len(prefill_graph_sizes(4096)) == 50


def test_a_fraction_the_weights_overrun_is_refused_in_the_releases_words():
    H100 = parse_gpus("H100").gpu
    model = read_model("meta-llama/Llama-3.1-70B-Instruct")
    new = sglang_estimate(SglangServing(model, H100.memory_bytes, H100.sm, tp=2, mem_fraction_static=0.5))
    old = sglang_estimate(SglangServing(model, H100.memory_bytes, H100.sm, tp=2, mem_fraction_static=0.5,
                                        release="0.4.3.post4"))
    assert new.max_total_num_tokens == old.max_total_num_tokens == 0
    assert new.refusal.startswith("ValueError: Loaded weights leave no GPU memory for the KV cache under "
                                  "--mem-fraction-static=0.5. Raise --mem-fraction-static above 0.8")
    assert old.refusal == "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    auto = sglang_estimate(SglangServing(model, H100.memory_bytes, H100.sm, tp=2))
    assert auto.mem_fraction_static == 0.827 and auto.refusal            # 0.5.23's own choice leaves 70B no pool
    fits = sglang_estimate(SglangServing(model, H100.memory_bytes, H100.sm, tp=2, mem_fraction_static=0.9))
    assert not fits.refusal and fits.max_total_num_tokens > 0


def test_a_pool_shorter_than_the_context_is_sglangs_warning():
    H100 = parse_gpus("H100").gpu
    serving = SglangServing(read_model("meta-llama/Llama-3.1-8B-Instruct"), H100.memory_bytes, H100.sm,
                            mem_fraction_static=0.3, context_length=131072)
    est = sglang_estimate(serving)
    assert est.max_total_num_tokens < 131072
    assert pool_warning(serving, est).startswith(f"SGLang 0.5.23 warns at start-up: KV pool holds "
                                                 f"{est.max_total_num_tokens} tokens, fewer than --context-length "
                                                 "131072. One full-length request cannot fit")
    older = SglangServing(serving.model, H100.memory_bytes, H100.sm, mem_fraction_static=0.3, context_length=131072,
                          release="0.5.22")          # no such warning before 0.5.23: requests are capped silently
    said = pool_warning(older, sglang_estimate(older))
    assert "warns" not in said and f"caps each request at {sglang_estimate(older).max_total_num_tokens - 1:,}" in said


CONFIG = "model-path: meta-llama/Llama-3.1-8B-Instruct\nmem-fraction-static: 0.3\ncontext-length: 131072\n"


def test_a_launch_line_and_its_config_file_give_one_answer(tmp_path):
    """``python -m sglang.launch_server`` with flags, ``sglang serve --config`` with the same keys
    in a YAML and one flag over it, and the YAML checked alone with the GPUs the line states."""
    (tmp_path / "server.yaml").write_text(CONFIG)
    (tmp_path / "line.sh").write_text("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                                      "--tp 2 --mem-fraction-static 0.3 --context-length 131072 --port 30000\n")
    (tmp_path / "config.sh").write_text("sglang serve --config server.yaml --tp-size 2\n")
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", "line.sh", "config.sh", "--gpus", "H100",
                           "--format", "json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line, config = json.loads(proc.stdout)["files"]
    assert line["kind"] == config["kind"] == "sglang" and config["reads"] == ["server.yaml"]
    assert line["max_total_num_tokens"] == config["max_total_num_tokens"] > 0
    assert line["gpus"]["per_node"] == config["gpus"]["per_node"] == 2
    assert line["serving"]["tensor_parallel"] == 2 and line["sglang_version"] == "0.5.23"
    alone = subprocess.run([sys.executable, "-m", "vramlint", "check", "server.yaml", "--gpus", "H100", "--format",
                            "json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    (entry,) = json.loads(alone.stdout)["files"]
    assert alone.returncode == 0 and entry["kind"] == "sglang"
    assert [f["code"] for f in entry["findings"]] == ["VL409"] and entry["findings"][0]["line"] == 3


def test_the_repositorys_pin_is_the_release_checked(tmp_path):
    (tmp_path / "server.yaml").write_text("model-path: meta-llama/Llama-3.1-8B-Instruct\ntp-size: 8\n")
    (tmp_path / "requirements.txt").write_text("sglang[all]==0.4.3.post4\n")
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", "server.yaml", "--gpus", "8xH100", "--format",
                           "json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    (entry,) = json.loads(proc.stdout)["files"]
    assert entry["sglang_version"] == "0.4.3.post4" and entry["mem_fraction_static"] == 0.81


def test_a_tp_size_the_heads_do_not_divide_is_sglangs_assertion(tmp_path):
    """Qwen2.5-7B has 28 heads and 4 KV heads: TP 8 fails SGLang's attention assertion while the
    model is built (VL410); TP 4 starts."""
    (tmp_path / "eight.yaml").write_text("model-path: Qwen/Qwen2.5-7B-Instruct\ntp-size: 8\n")
    (tmp_path / "four.yaml").write_text("model-path: Qwen/Qwen2.5-7B-Instruct\ntp-size: 4\n")
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", "eight.yaml", "four.yaml", "--gpus", "H100",
                           "--format", "json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    eight, four = json.loads(proc.stdout)["files"]
    assert [(f["code"], f["line"]) for f in eight["findings"]] == [("VL410", 2)]
    assert "total_num_heads 28 % tp_size 8 != 0" in eight["findings"][0]["message"]
    assert eight["findings"][0]["hint"] == "--tp-size 1, 2, 4"
    assert four["findings"] == [] and proc.returncode == 1


def test_what_the_budget_leaves_out_is_a_finding_not_a_note(tmp_path):
    (tmp_path / "dp.yaml").write_text("model-path: meta-llama/Llama-3.1-8B-Instruct\ntp-size: 2\n"
                                      "enable-dp-attention: true\n")
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", "dp.yaml", "--gpus", "H100", "--format",
                           "json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    (entry,) = json.loads(proc.stdout)["files"]
    assert [(f["code"], f["line"]) for f in entry["findings"]] == [("VL210", 3)]
    assert entry["findings"][0]["message"].startswith("DP attention")
