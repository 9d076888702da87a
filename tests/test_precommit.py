"""The real pre-commit, installing this checkout's hook into a fresh git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT

PRE_COMMIT = [sys.executable, "-m", "pre_commit"]


def _git_repo(tmp_path_factory, name: str):
    """An empty git repository with a pre-commit home of its own, and the environment to run in it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp(name)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home")),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    return repo, env


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    repo, env = _git_repo(tmp_path_factory, "training-repo")
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
    from vramlint.patterns import EXCLUDE, FILES, wanted
    assert (hook["files"], hook["exclude"]) == (FILES, EXCLUDE)       # one place for the patterns
    files, exclude = re.compile(hook["files"]), re.compile(hook["exclude"])
    for name in ["ds_config.json", "configs/ds_z3_offload.json", "deepspeed_zero2.json", "zero3.json",
                 "zero_stage2_config.json", "configs/ds_configs/stage3_no_offloading.conf", "ZeRO-1.json",
                 "accelerate_config.yaml", "recipes/accelerate_configs/ddp.yaml", "fsdp_config.yaml",
                 "deepspeed_zero3.yaml", "default_config.yml", "multi_gpu.yaml", "configs/vllm.yaml",
                 "serve_llama70b.yaml", "vllm_config.yml", "ds.json", "configs/ds.json", "train.yaml",
                 "examples/llama-3/qlora-1b.yml", "recipes/configs/llama3_1/8B_lora.yaml", "sft/config_full.yaml",
                 "configs/config.yaml", "config.json"]:        # decided by content: a recipe, or a model's config
        assert files.search(name) and not exclude.search(name) and wanted(name), name
    for name in ["package.json", "tokenizer.json",
                 ".github/workflows/ci.yml", ".pre-commit-config.yaml", "model.safetensors.index.json"]:
        assert not (files.search(name) and not exclude.search(name)) and not wanted(name), name


@pytest.fixture(scope="module")
def recipe_repo(tmp_path_factory):
    """A training repository of recipes, set up as the README says: only the GPUs in the settings."""
    repo, env = _git_repo(tmp_path_factory, "recipe-repo")
    (repo / "pyproject.toml").write_text('[tool.vramlint]\ngpus = "8xH100"\n')
    (repo / "examples" / "recipes").mkdir(parents=True)
    for name in ("trl-sft-llama3.1-8b-ddp.yaml", "trl-sft-llama3.1-8b-zero3.yaml", "ds_zero3.json",
                 "axolotl-qlora-llama3.1-8b.yml"):
        shutil.copy(EXAMPLES / "recipes" / name, repo / "examples" / "recipes" / name)
    llamafactory = ROOT / "tests" / "data" / "recipes" / "hiyouga__LLaMA-Factory" / "examples" / "inference"
    shutil.copy(llamafactory / "llama3_lora_sft.yaml", repo / "infer.yaml")
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    return repo, env


def test_hook_checks_recipes_with_only_the_gpus_set(recipe_repo):
    proc = try_repo(recipe_repo, "examples/recipes/trl-sft-llama3.1-8b-ddp.yaml",
                    "examples/recipes/axolotl-qlora-llama3.1-8b.yml", "infer.yaml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "examples/recipes/trl-sft-llama3.1-8b-ddp.yaml:11:1  VL201 error" in proc.stdout
    assert "hint: fsdp: full_shard auto_wrap" in proc.stdout


def test_hook_on_a_deepspeed_file_alone_checks_the_recipe_that_runs_it(recipe_repo):
    proc = try_repo(recipe_repo, "examples/recipes/ds_zero3.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Passed" in proc.stdout and "(run by examples/recipes/trl-sft-llama3.1-8b-zero3.yaml)" in proc.stdout
