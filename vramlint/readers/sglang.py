"""SGLang server arguments → the facts that size its memory: a ``--config`` YAML of
``python -m sglang.launch_server`` / ``sglang serve``, or the launch line's flags read as one.

SGLang 0.5.23 reads a config file's keys as its long flags, dashes and underscores alike
(utils/server_args_config_parser.py ``_config_keys``), the command line winning over the file;
``--tp`` and ``--dp`` are argparse's abbreviations of ``--tp-size`` / ``--dp-size``, ``--model``
an alias of ``--model-path``, ``--tensor-parallel-size`` of ``--tp-size``
(arg_groups/fields/parallel.py, model.py). Defaults that depend on the GPU (the memory fraction,
the chunked prefill size, the decode CUDA graphs' batch) are SGLang's own choice, left to
``memory/serving/sglang.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact

ALIASES = {"model": "model_path", "tp": "tp_size", "tensor_parallel_size": "tp_size", "dp": "dp_size",
           "data_parallel_size": "dp_size", "pp": "pp_size", "pipeline_parallel_size": "pp_size"}
# Keys only SGLang's server has (vLLM spells its own differently): a file with one is SGLang's.
MARKS = ("model_path", "mem_fraction_static", "tp_size", "chunked_prefill_size", "max_total_tokens",
         "cuda_graph_max_bs", "max_running_requests", "enable_dp_attention")
# What SGLang turns on that the budget here does not model, with the way the estimate is off.
UNPRICED = {"enable_dp_attention": "DP attention (its own reserve and a per-rank KV pool)",
                "speculative_algorithm": "speculative decoding (the draft's weights and KV pool)",
                "disaggregation_mode": "prefill / decode disaggregation",
                "cpu_offload_gb": "CPU offload of weights", "enable_lora": "LoRA adapters' memory pool"}


def key_of(key: Any) -> str:
    name = str(key).lstrip("-").replace("-", "_")
    return ALIASES.get(name, name)


def looks_like_sglang(data: Any) -> bool:
    """A key as only SGLang spells it (``model-path``, ``mem-fraction-static``, ...): an alias such
    as ``model`` or ``tp`` is everyone's, and says nothing."""
    return isinstance(data, dict) and any(str(k).lstrip("-").replace("-", "_") in MARKS for k in data)


@dataclass(frozen=True)
class SglangConfig:
    document: Document
    keys: dict[str, str]                       # SGLang's name -> the key as written
    model: Fact
    tp: Fact
    dp: Fact
    pp: Fact
    mem_fraction_static: Fact
    chunked_prefill_size: Fact
    cuda_graph_max_bs: Fact
    max_running_requests: Fact
    max_total_tokens: Fact
    context_length: Fact
    kv_cache_dtype: Fact
    dtype: Fact
    page_size: Fact
    disable_cuda_graph: Fact
    not_modelled: tuple[tuple[str, Fact], ...]

    def location_of(self, name: str):
        return self.document.locate(f"$.{self.keys.get(name, name)}")


def read_sglang(document: Document) -> SglangConfig:
    data = document.data if isinstance(document.data, dict) else {}
    keys = {key_of(k): str(k) for k in data}

    def fact(name: str, default: Any = None) -> Fact:
        if name in keys:
            return Fact(data[keys[name]], document.locate(f"$.{keys[name]}"))
        return Fact(default, None, "SGLang default")
    off = tuple((name, fact(name)) for name in UNPRICED
                if name in keys and data[keys[name]] not in (None, False, 0, "null", "", "false", "False"))
    return SglangConfig(document, keys, fact("model_path"), fact("tp_size", 1), fact("dp_size", 1), fact("pp_size", 1),
                        fact("mem_fraction_static"), fact("chunked_prefill_size"), fact("cuda_graph_max_bs"),
                        fact("max_running_requests"), fact("max_total_tokens"), fact("context_length"),
                        fact("kv_cache_dtype", "auto"), fact("dtype", "auto"), fact("page_size", 1),
                        fact("disable_cuda_graph", False), off)


def count(fact: Fact, default: int | None = None) -> int | None:
    """A positive whole number as SGLang's argparse takes it (``"4"`` too), else ``default``."""
    value = fact.value
    if isinstance(value, bool):
        return default
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return default
    return number if number >= 1 else default


def fraction(fact: Fact) -> float | None:
    """``--mem-fraction-static`` in (0, 1], else None (SGLang chooses)."""
    try:
        value = float(fact.value) if fact.value is not None and not isinstance(fact.value, bool) else None
    except (TypeError, ValueError):
        return None
    return value if value is not None and 0 < value <= 1 else None
