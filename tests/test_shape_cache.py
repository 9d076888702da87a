"""The shape cache (models/shape_cache.py): what transformers builds for a config not modelled by
hand is kept on disk, keyed by the config and the builders' versions, so the next check imports
neither torch nor transformers; kept only in the cache folder, written whole, silent on a pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("transformers")
OLMO = {"model_type": "olmo", "architectures": ["OlmoForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 4, "vocab_size": 1024,
        "max_position_embeddings": 512, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 1}


def _run(code: str, cache, config) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "VRAMLINT_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)})


READ = ("import sys, json; from vramlint.models import read_model; s = read_model(sys.argv[1]); "
        "print(json.dumps([s.params, s.shape_by, 'torch' in sys.modules, 'transformers' in sys.modules]))")


def test_a_second_read_builds_nothing_and_gives_the_same_shape(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(OLMO))
    first = _run(READ, tmp_path / "cache", config)
    assert first.returncode == 0 and first.stderr == "", first.stderr          # no status line on a pipe
    params, by, torch_loaded, _ = json.loads(first.stdout)
    assert by == "transformers" and torch_loaded
    second = _run(READ, tmp_path / "cache", config)
    assert json.loads(second.stdout) == [params, "transformers", False, False]
    entries = list((tmp_path / "cache" / "shapes").iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".json"                    # no temporary file left


def test_the_stored_shape_is_the_built_one_and_a_changed_config_is_another_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMLINT_CACHE_DIR", str(tmp_path))
    from vramlint.models import shape_cache
    from vramlint.models.meta import meta_shape
    built, _ = meta_shape(OLMO)
    name = shape_cache.key(OLMO)
    shape_cache.store(name, built)
    assert shape_cache.load(name) == built
    assert shape_cache.key({**OLMO, "num_hidden_layers": 3}) != name


def test_an_unusable_cache_folder_or_entry_is_rebuilt_silently(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(OLMO))
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    proc = _run(READ, blocked / "cache", config)                    # the folder cannot be made
    assert proc.returncode == 0 and proc.stderr == "" and json.loads(proc.stdout)[1] == "transformers"
    cache = tmp_path / "cache"
    _run(READ, cache, config)
    (entry,) = (cache / "shapes").iterdir()
    entry.write_text('{"$": "os.system", "x": 1}')                   # a hostile entry constructs nothing
    proc = _run(READ, cache, config)
    assert proc.returncode == 0 and json.loads(proc.stdout)[2] is True    # rebuilt


def test_the_command_line_keeps_replays_and_the_memory_model_alone_writes_nothing(tmp_path):
    """Replays are kept between runs by the command line (vramlint.cache.Replays as
    memory.reserve.STORE), keyed by the plan and vramlint's code; the memory model used as a
    library reads and writes no file; an entry that cannot be read is replayed again."""
    argv = [sys.executable, "-m", "vramlint", "check", "examples/llama8b-zero3-8xh100.json", "--gpus", "8xH100",
            "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096", "--format", "json"]
    env = {**os.environ, "VRAMLINT_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    (entry,) = (tmp_path / "cache" / "replays").iterdir()
    peak = json.loads(first.stdout)["files"][0]["estimate"]["per_gpu_peak_bytes"]
    entry.write_text("[1, ")                                        # half a file: replayed again
    again = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert json.loads(again.stdout)["files"][0]["estimate"]["per_gpu_peak_bytes"] == peak
    library = ("from vramlint.models import read_model; from vramlint.hardware import parse_gpus; "
               "from vramlint.plan import plan_from_flags; from vramlint.memory import estimate; "
               "p = plan_from_flags(read_model('meta-llama/Llama-3.2-1B'), parse_gpus('1xH100'), "
               "{'train': True, 'seq_len': 1024}); print(estimate(p).per_gpu_peak)")
    proc = subprocess.run([sys.executable, "-c", library], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**env, "VRAMLINT_CACHE_DIR": str(tmp_path / "library")})
    assert proc.returncode == 0 and int(proc.stdout) > 0 and not (tmp_path / "library").exists()
