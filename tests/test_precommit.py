"""The real pre-commit, installing this checkout's hook into a fresh git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT

PRE_COMMIT = [sys.executable, "-m", "pre_commit"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp("training-repo")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home")),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    (repo / "pyproject.toml").write_text('[tool.vramlint]\ngpus = "8xH100"\nseq_len = 4096\n'
                                         '[[tool.vramlint.overrides]]\nfiles = "*70b*"\nmodel = "meta-llama/Llama-3.1-70B"\n'
                                         '[[tool.vramlint.overrides]]\nfiles = "*"\nmodel = "meta-llama/Llama-3.1-8B"\n')
    shutil.copy(EXAMPLES / "llama70b-zero1-8xh100.json", repo / "ds_config_70b.json")
    shutil.copy(EXAMPLES / "llama8b-zero3-8xh100.json", repo / "ds_config_8b.json")
    (repo / "notes.json").write_text("{}")          # not a DeepSpeed name: the hook must skip it
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    return repo, env


def try_repo(project, *files: str) -> subprocess.CompletedProcess:
    repo, env = project
    return subprocess.run(PRE_COMMIT + ["try-repo", str(ROOT), "vramlint", "--verbose", "--files", *files],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=600)


def test_hook_fails_on_an_over_budget_config(project):
    proc = try_repo(project, "ds_config_70b.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ds_config_70b.json:2:3  VL201 error" in proc.stdout


def test_hook_passes_on_a_config_that_fits(project):
    proc = try_repo(project, "ds_config_8b.json", "notes.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Passed" in proc.stdout


def test_hook_file_pattern_matches_what_teams_call_deepspeed_configs():
    import re

    import yaml
    hook = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())[0]
    assert hook["id"] == "vramlint" and hook["require_serial"] is True
    pattern = re.compile(hook["files"])
    for name in ["ds_config.json", "configs/ds_z3_offload.json", "deepspeed_zero2.json", "zero3.json",
                 "zero_stage2_config.json", "configs/ds_configs/stage3_no_offloading.conf", "ZeRO-1.json",
                 "accelerate_config.yaml", "recipes/accelerate_configs/ddp.yaml", "fsdp_config.yaml",
                 "deepspeed_zero3.yaml", "default_config.yml", "multi_gpu.yaml", "configs/vllm.yaml",
                 "serve_llama70b.yaml", "vllm_config.yml"]:
        assert pattern.search(name), name
    for name in ["package.json", "config.json", "tokenizer.json", "train.yaml", ".github/workflows/ci.yml"]:
        assert not pattern.search(name), name
