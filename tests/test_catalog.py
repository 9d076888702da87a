"""The offline catalog: exact counts, coverage of every family, lookups by id and short name."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from vramlint.errors import UsageError
from vramlint.models import read_model
from vramlint.models.catalog import entries, lookup

FAMILIES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
            "gemma3", "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon", "deepseek_v2", "deepseek_v3",
            "olmo2", "starcoder2", "gpt_oss", "llama4"}


@pytest.mark.parametrize("entry", entries(), ids=lambda e: e["short"])
def test_catalog_count_equals_transformers(entry):
    shape = lookup(entry["id"])
    assert shape.params == entry["params"]
    assert entry["source"]


def named_size(entry: dict) -> float | None:
    """The total size a model's name states ("Llama-3.1-70B" → 70e9); None for names that give
    none, or give MoE active sizes or expert counts ("17B-16E", "A2.7B", "8x7B")."""
    name = entry["id"].split("/")[-1]
    match = re.search(r"(?<![\dxA.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", name)
    if not match or re.search(r"\d+E\b|-A\d|\dx\d", name):
        return None
    return float(match.group(1)) * 1e9


# Named for its parameters without the embedding: MiniCPM-2B is 2.4B and a 0.3B embedding (model card).
NON_EMBEDDING_NAMES = {"openbmb/MiniCPM-2B-sft-bf16"}
SIZED = [e for e in entries() if named_size(e) and e["id"] not in NON_EMBEDDING_NAMES]


@pytest.mark.parametrize("entry", [e for e in entries() if e["id"] in NON_EMBEDDING_NAMES], ids=lambda e: e["short"])
def test_a_model_named_for_its_non_embedding_parameters_has_that_many_beside_it(entry):
    embedding = entry["config"]["vocab_size"] * entry["config"]["hidden_size"]
    assert 0.75 < (entry["params"] - embedding) / named_size(entry) < 1.35, entry["id"]


@pytest.mark.parametrize("entry", SIZED, ids=lambda e: e["short"])
def test_catalog_count_agrees_with_the_size_in_the_name(entry):
    """A transcription slip shows as a count far from the size the model is named for."""
    assert 0.75 < entry["params"] / named_size(entry) < 1.35, (entry["id"], entry["params"])


def test_catalog_spans_sizes_and_families():
    shapes = [lookup(e["id"]) for e in entries()]
    assert len(shapes) >= 40
    assert min(s.params for s in shapes) < 0.6e9 and max(s.params for s in shapes) >= 671e9
    assert FAMILIES <= {s.model_type for s in shapes} | {"gemma3_text"}


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B", "Llama-3.1-8B", "llama-3.1-8b", "META-LLAMA/LLAMA-3.1-8B"])
def test_lookup_spellings(name):
    assert read_model(name).params == 8_030_261_248


def test_unknown_name_suggests_close_ones():
    with pytest.raises(UsageError, match="did you mean.*llama-3.1-8b"):
        read_model("llama-3.1-9b")


ALIASED = [(entry, alias) for entry in entries() for alias in entry.get("aliases", ())]


@pytest.mark.parametrize(("entry", "alias"), ALIASED, ids=[alias for _, alias in ALIASED])
def test_an_alias_is_its_entry_under_the_name_written(entry, alias):
    """An instruction-tuned or renamed release resolves, with or without its organisation, to the
    architecture it shares — and reports itself by the name the user wrote."""
    shape, base = lookup(alias), lookup(entry["id"])
    assert shape.name == alias and lookup(alias.split("/")[-1]).name == alias
    assert replace(shape, name=base.name) == base


def test_every_name_means_one_model():
    """No alias, id or short name is spelled like another entry's (the index would keep the
    first one silently)."""
    owners: dict[str, set[str]] = {}
    for entry in entries():
        repos = [entry["id"], *entry.get("aliases", ())]
        for name in repos + [repo.split("/")[-1] for repo in repos] + [entry["short"]]:
            owners.setdefault(name.lower(), set()).add(entry["id"])
    assert len(owners) > 3 * len(entries())
    assert {name: ids for name, ids in owners.items() if len(ids) > 1} == {}


def test_a_variant_keeps_what_its_release_changed():
    """Qwen2.5's Instruct releases cap max_position_embeddings at 32768 where the base models state
    131072 (vLLM's default max_model_len); the architecture is the base model's."""
    instruct, base = lookup("Qwen/Qwen2.5-7B-Instruct"), lookup("Qwen/Qwen2.5-7B")
    assert (instruct.max_position_embeddings, base.max_position_embeddings) == (32768, 131072)
    assert instruct.params == base.params == 7_615_616_512
    assert lookup("Meta-Llama-3-8B").max_position_embeddings == 8192


# What the catalog holds against the published configs -----------------------------------------

from pathlib import Path  # noqa: E402

from conftest import DATA, SHARED  # noqa: E402

MEMORY_FIELDS = ("params", "active_params", "num_layers", "hidden_size", "vocab_size", "dtype", "kv_bytes_per_token",
                 "max_position_embeddings", "vision_params", "quantization", "layers", "weight_bytes")
# Where an entry knowingly differs from the copy it was built from, and why.
KNOWN = {"meta-llama/Llama-4-Scout-17B-16E-Instruct": {"vision_params"},      # the copy leaves out vision_config
         "meta-llama/Llama-4-Maverick-17B-128E-Instruct": {"vision_params"}}   # (catalog.json _about)
# Published configs without a dtype: the checkpoints are fp32 (GPT-2's) or quantized (gpt-oss: MXFP4
# experts, bf16 elsewhere), which is what transformers loads them as.
NO_DTYPE = {"openai-community/gpt2-medium", "openai-community/gpt2-large", "openai-community/gpt2-xl",
            "openai/gpt-oss-20b", "openai/gpt-oss-120b"}


def published(entry: dict) -> Path | None:
    """The stored copy of the config.json an entry was built from: the shared corpus, or
    tests/data/hf_configs (sources in its SOURCES.tsv)."""
    copy = DATA / "hf_configs" / entry["id"].replace("/", "__") / "config.json"
    if copy.is_file():
        return copy
    match = re.search(r"(corpus/hf_models/\S+\.json)", entry["source"])
    return SHARED / match.group(1) if match and (SHARED / match.group(1)).is_file() else None


WITH_COPY = [e for e in entries() if published(e)]


def test_most_entries_are_held_to_a_stored_published_config():
    """14 entries have their copy in tests/data/hf_configs; with ../shared beside the repo, its corpus adds 34."""
    in_repo = [e for e in WITH_COPY if published(e).is_relative_to(DATA)]
    assert len(in_repo) >= 14
    if (SHARED / "corpus" / "hf_models").is_dir():
        assert len(WITH_COPY) >= 48


@pytest.mark.parametrize("entry", WITH_COPY, ids=lambda e: e["short"])
def test_catalog_entry_builds_the_model_its_published_config_builds(entry):
    from vramlint.models.hfconfig import load_json, shape_from_dict
    from vramlint.reporters.json_report import model_dict
    ours, theirs = model_dict(lookup(entry["id"])), model_dict(shape_from_dict(load_json(published(entry))))
    for field in set(MEMORY_FIELDS) - KNOWN.get(entry["id"], set()):
        assert ours[field] == theirs[field], field


@pytest.mark.parametrize("entry", entries(), ids=lambda e: e["short"])
def test_catalog_entry_carries_its_checkpoint_dtype(entry):
    config, text = entry["config"], entry["config"].get("text_config") or {}
    said = any(key in part for part in (config, text) for key in ("torch_dtype", "dtype"))
    assert said or entry["id"] in NO_DTYPE
    if entry["id"] == "Qwen/Qwen3-1.7B":
        assert lookup(entry["id"]).dtype == "bfloat16"       # was loaded as float32: twice the memory
