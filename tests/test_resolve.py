"""Model resolution by Hugging Face id: the local cache as huggingface_hub itself writes it, a pinned
revision, a LoRA adapter repository, offline mode, and (only when asked) a download through the
real huggingface_hub client — from a Hub served on loopback (tests/fakehub.py), never the network."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from fakehub import FakeHub
from vramlint.errors import UsageError
from vramlint.models.catalog import _index
from vramlint.models.resolve import resolve

hub_client = pytest.importorskip("huggingface_hub")

LLAMA = dict(_index()["meta-llama/llama-3.1-8b"][0]["config"])
FINETUNE = "my-org/llama-3.1-8b-sft-v3"
SHORT = {**LLAMA, "num_hidden_layers": 16}
ADAPTER = {"base_model_name_or_path": "meta-llama/Llama-3.1-8B", "peft_type": "LORA", "r": 16,
           "target_modules": ["q_proj", "v_proj"], "lora_alpha": 32}
REPOS = {FINETUNE: {"main": {"config.json": json.dumps(LLAMA).encode(),
                             "model.safetensors.index.json": b'{"metadata": {"total_size": 16060522496}}'},
                    "v2": {"config.json": json.dumps(SHORT).encode()}},
         "my-org/sft-lora": {"main": {"adapter_config.json": json.dumps(ADAPTER).encode()}},
         "my-org/gated": {"main": {"config.json": json.dumps(LLAMA).encode()}}}


@pytest.fixture()
def hub():
    with FakeHub(REPOS, gated={"my-org/gated": {"hf_good"}}) as served:
        yield served


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """An empty cache where huggingface_hub and vramlint both look, and no user token."""
    folder = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(folder))
    for name in ("HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return folder


def fill(hub, cache, repo: str, *files: str, revision: str = "main") -> None:
    """The cache as huggingface_hub writes it when transformers or `hf download` fetch a model."""
    for name in files:
        hub_client.hf_hub_download(repo, name, revision=revision, endpoint=hub.url, cache_dir=str(cache), token=False)


def test_a_fine_tune_in_the_cache_resolves_like_its_base(hub, cache):
    fill(hub, cache, FINETUNE, "config.json", "model.safetensors.index.json")
    shape = resolve(FINETUNE)
    assert shape.resolved_by == "cache" and shape.params == 8_030_261_248 and shape.name == FINETUNE
    assert any("16,060,522,496 bytes" in note for note in shape.notes)      # the index's total_size, said
    assert (cache / "models--my-org--llama-3.1-8b-sft-v3" / "refs" / "main").read_text() == hub.commit(FINETUNE)


def test_the_revision_a_recipe_pins_is_the_snapshot_read(hub, cache, tmp_path, capsys):
    fill(hub, cache, FINETUNE, "config.json")
    fill(hub, cache, FINETUNE, "config.json", revision="v2")
    assert resolve(FINETUNE, "v2").num_layers == 16 and resolve(FINETUNE).num_layers == 32
    assert resolve(FINETUNE, hub.commit(FINETUNE, "v2")).num_layers == 16      # a commit sha is a snapshot
    from vramlint.cli import main
    recipe = tmp_path / "sft.yaml"
    recipe.write_text(f"model_name_or_path: {FINETUNE}\nmodel_revision: v2\nper_device_train_batch_size: 1\n"
                      "learning_rate: 1.0e-5\ndtype: bfloat16\n")
    assert main(["check", str(recipe), "--gpus", "1xH100", "--format", "json"]) in (0, 1)
    entry = json.loads(capsys.readouterr().out)["files"][0]
    assert entry["model"] == FINETUNE and entry["estimate"]


def test_an_adapter_repository_resolves_to_its_base_with_the_adapter(hub, cache):
    fill(hub, cache, "my-org/sft-lora", "adapter_config.json")
    shape = resolve("my-org/sft-lora")
    adapter = 16 * 32 * ((4096 + 4096) + (4096 + 1024))           # r x (d_in + d_out) for q and v, 32 layers
    assert shape.params == 8_030_261_248 + adapter and "LoRA adapter (r=16 on q_proj, v_proj)" in shape.notes[-1]


def test_an_unresolved_model_says_the_command_that_fetches_it(cache):
    with pytest.raises(UsageError) as caught:
        resolve(FINETUNE, "v2")
    assert f"`hf download {FINETUNE} config.json --revision v2`" in str(caught.value)
    assert "--download" in str(caught.value)


def test_offline_mode_never_downloads(cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError, match="HF_HUB_OFFLINE is set"):
        resolve(FINETUNE, allow_download=True)


def run(args: list[str], hub, cache, **env) -> subprocess.CompletedProcess:
    """vramlint in a process of its own: huggingface_hub reads HF_ENDPOINT when it is imported."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    environment.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(cache), HF_HOME=str(cache.parent / "home"), **env)
    return subprocess.run([sys.executable, "-m", "vramlint", *args], capture_output=True, text=True, timeout=120,
                          env=environment, cwd=ROOT)


def test_download_fetches_the_config_only_when_asked(hub, cache):
    without = run(["model", FINETUNE, "--format", "json"], hub, cache)
    assert without.returncode == 2 and "hf download" in without.stderr and not hub.requests
    fetched = run(["model", FINETUNE, "--download", "--format", "json"], hub, cache)
    assert fetched.returncode == 0, fetched.stderr
    assert json.loads(fetched.stdout)["resolved_by"] == "hub"
    assert not [line for line in hub.requests if line.endswith((".safetensors", ".bin", ".pt"))]    # never weights
    assert any(line.endswith("/config.json") for line in hub.requests)
    again = run(["model", FINETUNE, "--format", "json"], hub, cache, HF_HUB_OFFLINE="1")
    assert again.returncode == 0 and json.loads(again.stdout)["resolved_by"] == "cache"


def test_a_gated_model_is_downloaded_with_the_users_token(hub, cache):
    refused = run(["model", "my-org/gated", "--download"], hub, cache)
    assert refused.returncode == 2 and "gated" in refused.stderr and refused.stderr.count("\n") == 1
    allowed = run(["model", "my-org/gated", "--download", "--format", "json"], hub, cache, HF_TOKEN="hf_good")
    assert allowed.returncode == 0, allowed.stderr


def test_the_cache_path_imports_no_huggingface_hub(hub, cache):
    fill(hub, cache, FINETUNE, "config.json")
    code = (f"import sys; from vramlint.models.resolve import resolve; resolve({FINETUNE!r}); "
            "print('huggingface_hub' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "HF_HUB_CACHE": str(cache)}).stdout
    assert out.strip() == "False"
