"""Machine formats: SARIF 2.1.0 structure, GitHub annotations, format auto-selection."""

from __future__ import annotations

import json

from conftest import EXAMPLES
from vramlint.cli import main
from vramlint.rules import RULES

OVER = str(EXAMPLES / "llama70b-zero1-8xh100.json")
ARGS = ["check", OVER, "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-70B", "--seq-len", "4096"]


def test_sarif_has_the_required_structure(capsys):
    assert main(ARGS + ["--format", "sarif"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "vramlint" and {r["id"] for r in driver["rules"]} == set(RULES)
    result = run["results"][0]
    assert result["ruleId"] == "VL201" and result["level"] == "error"
    assert driver["rules"][result["ruleIndex"]]["id"] == "VL201"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (2, 3)
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(".json")
    assert result["message"]["text"]


def test_github_annotations(capsys):
    assert main(ARGS + ["--format", "github"]) == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith(f"::error file={OVER},line=2,col=3,title=VL201 exceeds-gpu-memory::per-GPU peak")


def test_auto_format_is_github_inside_actions(capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    main(ARGS)
    assert capsys.readouterr().out.startswith("::error ")
    monkeypatch.delenv("GITHUB_ACTIONS")
    main(ARGS)
    assert capsys.readouterr().out.startswith(f"{OVER}:2:3")


def test_plain_text_when_no_color(capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    main(ARGS)
    assert "\x1b[" not in capsys.readouterr().out


def test_a_vllm_files_json_entry_leads_with_vllms_own_numbers(capsys):
    """Weights per GPU, the KV cache's bytes and tokens and the concurrency at the top of a vLLM
    file's entry, with the release whose budget they reproduce, equal to the serving section's."""
    main(["check", str(EXAMPLES / "vllm-llama8b-l4.yaml"), "--gpus", "1xL4", "--format", "json"])
    entry = json.loads(capsys.readouterr().out)["files"][0]
    serving = entry["serving"]
    assert entry["vllm_version"] == "0.19.0"
    assert (entry["kv_cache_bytes"], entry["kv_cache_tokens"], entry["max_concurrency"]) == (
        serving["kv_cache_bytes"], serving["kv_cache_tokens"], serving["max_concurrency"])
    weights = sum(c["bytes"] for c in serving["components"] if c["name"] == "weights")
    assert weights <= entry["weights_bytes_per_gpu"] < weights * 1.01
