"""The offline catalog: exact counts, coverage of every family, lookups by id and short name."""

from __future__ import annotations

import re

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


SIZED = [e for e in entries() if named_size(e)]


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
