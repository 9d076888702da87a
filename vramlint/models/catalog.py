"""The offline model catalog: popular models by HuggingFace id or short name, no network.

Entries live in ``data/catalog.json`` (built by ``dev/build_catalog.py``): each holds the model's
config.json, where that config comes from, and transformers' own parameter count for it, which
the tests hold vramlint's count to. An entry's ``aliases`` are other repos of the same
architecture (``meta-llama/Llama-3.1-8B-Instruct`` for ``meta-llama/Llama-3.1-8B``): the names a
vLLM config or a training script writes, resolved to the entry under the name written.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from functools import lru_cache

from vramlint.errors import UsageError
from vramlint.models.shape import ModelShape
from vramlint.packaged import data_json


@lru_cache(maxsize=1)
def entries() -> tuple[dict, ...]:
    return tuple(data_json("catalog.json")["models"])


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


# Organisations that re-upload other publishers' checkpoints with the config.json unchanged: a
# name under one is the catalog's model of the same repository name (NousResearch's Llama 2 / 3
# and unsloth's uploads, which issue reports and recipes name most; huggyllama's and alpindale's
# Llama copies).
MIRRORS = ("nousresearch", "unsloth", "huggyllama", "alpindale")
# Published fine-tunes that keep their base's config.json (the sizes that shape memory): the name
# as written resolves to the base's shape (each checked against the release's config.json).
RELEASES = {
    "lmsys/vicuna-7b-v1.5": "meta-llama/Llama-2-7b-hf", "lmsys/vicuna-13b-v1.5": "meta-llama/Llama-2-13b-hf",
    "huggingfaceh4/zephyr-7b-beta": "mistralai/Mistral-7B-v0.1",
    "huggingfaceh4/zephyr-7b-alpha": "mistralai/Mistral-7B-v0.1",
    "alignment-handbook/zephyr-7b-sft-full": "mistralai/Mistral-7B-v0.1",
}
# Suffixes of a release of the same architecture: the chat / instruct tunes keep the base's sizes.
# ``-bnb-4bit`` (unsloth's pre-quantized uploads) keeps them too, with every linear stored in NF4;
# ``-unsloth-bnb-4bit`` ("dynamic" 4-bit) leaves modules of its own choosing in 16 bits, listed
# only in its config.json: not resolved here, so its weights are never guessed.
VARIANT = re.compile(r"(?i)(?<!-unsloth)(-bnb-4bit)$|-(instruct|chat|it|hf|chat-hf|sft|base)$")
# Families whose instruct releases differ from the base in a key that shapes memory: Qwen2's and
# Qwen2.5's Instruct configs cap max_position_embeddings at 32768 (the bases: 131072), which is
# vLLM's default max_model_len. Their -Instruct names resolve only where the catalog has them.
POSITIONS_DIFFER = re.compile(r"(?i)^qwen2(\.5)?-")
BNB_4BIT = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16"}


def find(name: str) -> ModelShape | None:
    """The catalog's shape for a name, or None: the name as written, else a mirror's or a release
    variant's catalog model (said in the shape's notes)."""
    from vramlint.models.hfconfig import shape_from_dict
    written = name.strip()
    found = _index().get(written.lower())
    if found is not None:
        entry, hf_id = found
        return shape_from_dict(dict(entry["config"]), name=hf_id)
    same = _same_architecture(written)
    if same is None:
        return None
    (entry, hf_id), why, quantized = same
    config = dict(entry["config"], quantization_config=BNB_4BIT) if quantized else dict(entry["config"])
    shape = shape_from_dict(config, name=written)
    return replace(shape, notes=shape.notes + (f"{written} read as the catalog's {hf_id} ({why})",))


def _same_architecture(name: str) -> tuple[tuple[dict, str], str, bool] | None:
    """A mirror's upload, a known fine-tune, or a chat / instruct / -bnb-4bit variant of a catalog
    model: the entry, why it is the same architecture, and whether its linears are stored in NF4."""
    org, _, repo = name.lower().rpartition("/")
    index = _index()
    if name.lower() in RELEASES:
        return index[RELEASES[name.lower()].lower()], f"a fine-tune of {RELEASES[name.lower()]} with its config", False
    quantized, stem = False, repo
    for _ in range(3):                         # -Instruct-bnb-4bit, -chat-hf: a suffix at a time
        if org in MIRRORS and stem in index:
            break
        match = VARIANT.search(stem)
        if match is None or match.group(2) and match.group(2).lower() == "instruct" and POSITIONS_DIFFER.match(stem):
            break
        quantized = quantized or bool(match.group(1))
        stem = stem[:match.start()]
        if stem in index:
            break
    if stem in index and (stem != repo or org in MIRRORS):
        who = f"a re-upload by {name.split('/')[0]}" if org in MIRRORS else "a release of the same architecture"
        what = "; its linears stored in bitsandbytes NF4" if quantized else ""
        return index[stem], who + what, quantized
    return None


def family(name: str) -> str:
    """A model name's family and version without its size: ``Qwen/Qwen1.5-7B-Chat`` -> ``qwen1.5``,
    ``gemma-2-9b`` -> ``gemma-2``, ``gemma-2b`` -> ``gemma``, ``Qwen2-VL-7B`` -> ``qwen2-vl`` (a
    vision or MoE line is an architecture of its own). Suggestions stay within one."""
    repo = name.lower().rsplit("/", 1)[-1].removeprefix("meta-")
    match = re.match(r"[a-z]+(?:[-_]?v?\d+(?:\.\d+)?(?![\d.]*[bmk]\b))?(?:[-_](?:vl|moe|coder|math|audio|omni|next))?",
                     repo)
    return match.group(0) if match else repo


def close_names(name: str) -> list[str]:
    """Catalog names close to ``name`` and of its family (never another architecture's)."""
    own = family(name)
    names = [n for n in _index() if family(n) == own]
    return difflib.get_close_matches(name.lower().rsplit("/", 1)[-1], names, n=3, cutoff=0.6)


def lookup(name: str) -> ModelShape:
    found = find(name)
    if found is None:
        close = close_names(name)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"model {name!r} is neither a config.json path, a folder holding one, nor in the "
                         f"offline catalog (vramlint models lists it){hint}")
    return found
