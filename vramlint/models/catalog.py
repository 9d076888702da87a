"""The offline model catalog: popular models by HuggingFace id or short name, no network.

Entries live in ``data/catalog.json`` (built by ``dev/build_catalog.py``): each holds the model's
config.json, where that config comes from, and transformers' own parameter count for it, which
the tests hold vramlint's count to. An entry's ``aliases`` are other repos of the same
architecture (``meta-llama/Llama-3.1-8B-Instruct`` for ``meta-llama/Llama-3.1-8B``): the names a
vLLM config or a training script writes, resolved to the entry under the name written.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from importlib import resources

from vramlint.errors import UsageError
from vramlint.models.shape import ModelShape


@lru_cache(maxsize=1)
def entries() -> tuple[dict, ...]:
    text = resources.files("vramlint").joinpath("data/catalog.json").read_text()
    return tuple(json.loads(text)["models"])


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[dict, str]]:
    """Every way a user may write a model — ``meta-llama/Llama-3.1-8B``, ``Llama-3.1-8B``,
    ``llama-3.1-8b``, an alias with or without its organisation; case does not matter — to the
    entry and the id it names."""
    repos = [(repo, entry) for entry in entries() for repo in (entry["id"], *entry.get("aliases", ()))]
    index: dict[str, tuple[dict, str]] = {}
    for repo, entry in repos:                           # a repo's full name first, then its own name,
        index.setdefault(repo.lower(), (entry, repo))   # then the short ones ("gemma-2-27b" is a repo's)
    for repo, entry in repos:
        index.setdefault(repo.split("/")[-1].lower(), (entry, repo))
    for entry in entries():
        index.setdefault(entry["short"].lower(), (entry, entry["id"]))
    return index


def find(name: str) -> ModelShape | None:
    """The catalog's shape for a name, or None."""
    found = _index().get(name.strip().lower())
    if found is None:
        return None
    from vramlint.models.hfconfig import shape_from_dict
    entry, hf_id = found
    return shape_from_dict(dict(entry["config"]), name=hf_id)


def close_names(name: str) -> list[str]:
    return difflib.get_close_matches(name.lower(), list(_index()), n=3, cutoff=0.6)


def lookup(name: str) -> ModelShape:
    found = find(name)
    if found is None:
        close = close_names(name)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"model {name!r} is neither a config.json path, a folder holding one, nor in the "
                         f"offline catalog (vramlint models lists it){hint}")
    return found
