"""The command line end to end: exit codes, located findings, JSON output, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import CORPUS, EXAMPLES, shared_or_skip
from vramlint.cli import main

OVER = str(EXAMPLES / "llama70b-zero1-8xh100.json")
FITS = str(EXAMPLES / "llama8b-zero3-8xh100.json")


def test_over_budget_config_fails_with_a_located_finding(capsys):
    code = main(["check", OVER, "--gpus", "8x80GB", "--model", "meta-llama/Llama-3.1-70B", "--seq-len", "4096"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{OVER}:2:3  VL201 error  per-GPU peak" in out          # line of train_micro_batch_size_per_gpu
    assert "hint:" in out


def test_fitting_config_passes(capsys):
    code = main(["check", FITS, "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096"])
    assert code == 0
    assert "fits" in capsys.readouterr().out


def test_json_report_has_findings_and_components(capsys):
    code = main(["check", OVER, "--gpus", "8x80GB", "--model", "llama-3.1-70b", "--seq-len", "4096",
                 "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    finding = doc["files"][0]["findings"][0]
    assert {k: finding[k] for k in ("code", "name", "severity", "line", "column")} == \
        {"code": "VL201", "name": "exceeds-gpu-memory", "severity": "error", "line": 2, "column": 3}
    est = doc["files"][0]["estimate"]
    assert est["per_gpu_peak_bytes"] == sum(c["bytes"] for c in est["components"] if c["where"] == "gpu")
    assert all(c["formula"] and c["source"] for c in est["components"])


def test_near_threshold_warns_and_strict_fails(capsys):
    args = ["check", FITS, "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096",
            "--near-threshold", "0.3"]
    assert main(args) == 0
    assert "VL202 warning" in capsys.readouterr().out
    assert main(args + ["--strict"]) == 1


@pytest.mark.parametrize("args, words", [
    (["check", FITS, "--gpus", "8xfoo", "--model", "llama-3.1-8b", "--seq-len", "1"], "unknown GPU"),
    (["check", FITS, "--gpus", "8xH100", "--model", "no-such-model", "--seq-len", "1"], "offline catalog"),
    (["check", "missing.json", "--gpus", "8xH100", "--model", "llama-3.1-8b", "--seq-len", "1"], "cannot read"),
    (["check", FITS, "--gpus", "8xH100", "--model", "llama-3.1-8b"], "--seq-len is required"),
    (["model", "no-such-model"], "offline catalog"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys, args, words):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_template_with_placeholders_is_a_located_parse_error(capsys):
    path = str(shared_or_skip(CORPUS / "deepspeed" / "microsoft__Megatron-DeepSpeed__examples_deepspeed__MoE__ds_config_gpt_TEMPLATE.json"))
    assert main(["check", path, "--gpus", "8xH100", "--model", "gpt2", "--seq-len", "1024"]) == 1
    assert f"{path}:2:24  VL001 error" in capsys.readouterr().out


def test_every_corpus_deepspeed_file_checks_without_traceback(capsys):
    for path in sorted(shared_or_skip(CORPUS / "deepspeed").iterdir()):
        code = main(["check", str(path), "--gpus", "8xA100-80GB", "--model", "llama-3.1-8b", "--seq-len", "2048",
                     "--format", "json"])
        out, err = capsys.readouterr()
        assert code in (0, 1), (path.name, err)
        assert json.loads(out)["files"][0]["path"] == str(path)


def test_model_json_has_the_documented_keys(capsys):
    assert main(["model", "meta-llama/Llama-2-70b-hf", "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["params"] == 68_976_648_192 and info["kv_bytes_per_token"] == 327_680
    assert {"model_type", "params", "active_params", "largest_layer_params", "kv_bytes_per_token", "layers"} <= info.keys()


def test_model_shows_what_vllm_loads_beside_the_parameters(capsys):
    """Gemma 3 in vLLM: the SigLIP tower and the two RoPE tables (local, and global at 8x positions)."""
    assert main(["model", "google/gemma-3-12b-it", "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["vision_params"] == 421_290_864
    assert info["vllm_rope_tables"] == [{"positions": 131072, "rotary_dim": 256},
                                        {"positions": 1048576, "rotary_dim": 256}]
    assert main(["model", "google/gemma-3-12b-it"]) == 0
    assert "vision tower" in capsys.readouterr().out


def test_lint_path_imports_no_torch():
    """A pre-commit hook must start fast: checking a hand-modelled type, from a DeepSpeed file or a
    recipe, imports no torch, transformers, huggingface_hub or deepspeed."""
    recipe = str(EXAMPLES / "recipes" / "axolotl-qlora-llama3.1-8b.yml")
    code = ("import sys; from vramlint.cli import main; "
            f"main(['check', {FITS!r}, '--gpus', '8xH100', '--model', 'llama-3.1-8b', '--seq-len', '4096']); "
            f"main(['check', {recipe!r}, '--gpus', '1x24GB']); "
            "heavy = {'torch', 'transformers', 'huggingface_hub', 'deepspeed'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("[]")


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "vramlint", "model", "gpt2", "--format", "json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and json.loads(proc.stdout)["params"] == 124_439_808


def test_kind_overrides_content_detection(tmp_path, capsys):
    path = tmp_path / "serve.yaml"
    path.write_text("max_tokens: 50\ntemperature: 0.7\nmodel: x\n")       # a client's settings: skipped
    assert main(["check", str(path), "--gpus", "1xH100", "--model", "gpt2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["notes"]
    assert main(["check", str(path), "--gpus", "1xH100", "--model", "gpt2", "--kind", "vllm", "--format", "json"]) == 1
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)["files"][0]["findings"]}
    assert codes == {"VL101", "VL006"}      # vllm serve refuses max_tokens, temperature; model x is checked as gpt2
