"""vLLM ``vllm serve --config`` YAML → the facts that shape its memory (docs/config-formats.md §C).

Every key is a command-line flag: ``tensor-parallel-size`` and ``tensor_parallel_size`` are the
same flag (vLLM normalises dashes up to the first dot), boolean flags may appear as ``no-<flag>``,
and integer sizes accept ``8k`` (1000s) / ``8K`` (1024s) / ``80g``. A YAML whose keys are mostly
not vLLM flags (a client's settings, another tool's harness) is not a vLLM config.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact
from vramlint.schemas import load_schema

UNITS = {"k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def normalise(key: str) -> str:
    """vLLM's flag normalisation: dashes become underscores (up to the first '.')."""
    head, dot, tail = str(key).partition(".")
    return head.replace("-", "_") + dot + tail


def human_int(value: Any) -> int | None:
    """``8192``, ``"8k"`` (8000), ``"8K"`` (8192), ``"1.5g"``; None if not a size."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = re.fullmatch(r"([0-9.]+)([kKmMgGtT]?)", str(value).strip())
    if not match:
        return None
    return int(float(match.group(1)) * UNITS.get(match.group(2), 1))


@dataclass(frozen=True)
class VllmConfig:
    document: Document
    keys: dict[str, str]                     # normalised key -> key as written
    model: Fact
    tensor_parallel: Fact
    pipeline_parallel: Fact
    gpu_memory_utilization: Fact
    max_model_len: Fact                      # int, "auto"/-1, or None (derived from the model)
    max_num_seqs: Fact
    max_num_batched_tokens: Fact
    kv_cache_dtype: Fact
    dtype: Fact
    block_size: Fact
    kv_cache_memory_bytes: Fact
    cpu_offload_gb: Fact
    data_parallel: Fact
    expert_parallel: Fact                    # enable_expert_parallel (``no-enable-expert-parallel``: False)
    quantization: Fact                       # --quantization: a method name, or None (the checkpoint's own)
    language_model_only: Fact
    limit_mm_per_prompt: Fact                # {"image": 0, ...} or its JSON text
    performance_mode: Fact
    chunked_prefill: Fact                    # enable_chunked_prefill (``no-enable-chunked-prefill``: False)
    speculative: Fact                        # speculative_config: a mapping or its JSON text
    mm_encoder_tp_mode: Fact                 # "weights" (default: the tower split over TP) or "data"
    enable_lora: Fact
    max_loras: Fact
    max_lora_rank: Fact
    fully_sharded_loras: Fact
    notes: tuple[str, ...] = field(default=())

    def location_of(self, key: str):
        """Where the key is written; None where it is not (a value another tool's flags fix:
        OpenRLHF's engines' ``dtype``)."""
        written = self.keys.get(key)
        return self.document.locate(f"$.{written}") if written and self.document.has(f"$.{written}") else None

    @property
    def draft_model(self) -> str | None:
        """What speculative decoding loads beside the model: a draft model or head (EAGLE, Medusa,
        a small model), or MTP layers of the checkpoint; None for n-gram lookup, which loads nothing."""
        spec = mapping(self.speculative.value)
        if not spec:
            return None
        method = str(spec.get("method") or "")
        if method in ("ngram", "suffix"):
            return None
        return str(spec.get("model") or method or "a draft model")

    @property
    def draft_tp(self) -> int | None:
        tp = mapping(self.speculative.value).get("draft_tensor_parallel_size")
        return tp if isinstance(tp, int) and not isinstance(tp, bool) and tp >= 1 else None

    def tower_off(self, modalities: frozenset[str]) -> bool:
        """Whether vLLM leaves out a tower built for ``modalities``: ``language_model_only``, or a
        ``limit_mm_per_prompt`` of 0 for every one of them (vLLM 0.19 ``_mark_tower_model``; a count
        or ``{"count": n}``, the mapping or its JSON; a modality not named allows 999)."""
        if self.language_model_only.value is True:
            return True
        limits = mapping(self.limit_mm_per_prompt.value)

        def count(modality: str):
            limit = limits.get(modality)
            return limit.get("count") if isinstance(limit, dict) else limit

        return all(count(m) == 0 and not isinstance(count(m), bool) for m in modalities)


def mapping(value: Any) -> dict:
    """A dict-valued flag as vLLM takes it: the mapping, or its JSON text (anything else: empty)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def known_flags() -> set[str]:
    return set(load_schema("vllm")["properties"])


def looks_like_vllm(data: Any) -> bool:
    """Most keys are vllm serve flags (client configs and other harnesses share a few, like model)."""
    if not isinstance(data, dict) or not data:
        return False
    known = known_flags()
    hits = sum(1 for key in data if normalise(key) in known)
    return hits * 2 >= len(data) and hits >= 1


def read_vllm(doc: Document) -> VllmConfig:
    data = doc.data if isinstance(doc.data, dict) else {}
    keys = {normalise(k): k for k in data}
    values = {normalise(k): v for k, v in data.items()}

    def fact(key: str, default: Any = None) -> Fact:
        written = keys.get(key)
        return Fact(values.get(key, default), doc.locate(f"$.{written}") if written else None)

    def flag(key: str, default: bool) -> Fact:
        """A boolean flag, or its ``no-`` form (argparse's BooleanOptionalAction)."""
        if values.get(f"no_{key}") is True:
            return Fact(False, doc.locate(f"$.{keys[f'no_{key}']}"))
        return fact(key, default)

    return VllmConfig(doc, keys, fact("model"), fact("tensor_parallel_size", 1), fact("pipeline_parallel_size", 1),
                      fact("gpu_memory_utilization", 0.9), fact("max_model_len"), fact("max_num_seqs"),
                      fact("max_num_batched_tokens"), fact("kv_cache_dtype", "auto"), fact("dtype", "auto"),
                      fact("block_size", 16), fact("kv_cache_memory_bytes"), fact("cpu_offload_gb", 0),
                      fact("data_parallel_size", 1),
                      flag("enable_expert_parallel", False), fact("quantization"), flag("language_model_only", False),
                      fact("limit_mm_per_prompt"), fact("performance_mode"), flag("enable_chunked_prefill", True),
                      fact("speculative_config"), fact("mm_encoder_tp_mode", "weights"), flag("enable_lora", False),
                      fact("max_loras", 1), fact("max_lora_rank", 16), flag("fully_sharded_loras", False))


def normalised_document(doc: Document) -> Document:
    """The same document with underscore keys, each keeping the position of the key as written,
    so schema findings point at the line a person wrote."""
    data = doc.data if isinstance(doc.data, dict) else {}
    positions = {"$": (1, 1)}
    for key in data:
        written = doc.positions.get(f"$.{key}")
        if written:
            positions[f"$.{normalise(key)}"] = written
    for path, where in doc.positions.items():
        head = path.split(".")[1] if path.count(".") > 1 else None
        if head is not None:
            positions.setdefault(path.replace(f"$.{head}", f"$.{normalise(head)}", 1), where)
    return Document(doc.path, doc.text, {normalise(k): v for k, v in data.items()}, positions)
