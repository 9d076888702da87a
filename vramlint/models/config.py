"""A HuggingFace config dict with its model type's transformers defaults behind it.

``save_pretrained`` writes only the values that differ from the class defaults, so a real
config.json may omit ``num_key_value_heads`` or ``vocab_size``. :class:`HfConfig` answers a key
from the file first, then from the defaults of that model type (``data/model_defaults.json``,
dumped from transformers' configuration classes by ``dev/model_defaults.py``), and remembers
which keys came from where so reports can say so.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from typing import Any

_MISSING = object()
# Sizes far past any released model's: the builders make one Layer each and transformers' meta
# build one module per expert in some types, so a typo of 2**40 would hang the check (or fill the
# memory) instead of refusing the file. The deepest released decoders have 126-128 layers
# (Llama-3.1-405B, hrm_text), the widest hidden size is 25,600 (Llama-3.1-405B: 16,384), the most
# routed experts 512 (Qwen3-Next), the largest vocabulary 262,144 (Gemma 3).
LAYER_COUNTS = frozenset({"num_hidden_layers", "n_layer", "num_layers"})
MOST_LAYERS = 320
LIMITS = {**dict.fromkeys(LAYER_COUNTS, MOST_LAYERS),
          **dict.fromkeys(("hidden_size", "n_embd", "d_model"), 1 << 17),
          **dict.fromkeys(("intermediate_size", "moe_intermediate_size", "ffn_hidden_size", "n_inner"), 1 << 20),
          **dict.fromkeys(("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"), 1 << 14),
          **dict.fromkeys(("num_attention_heads", "num_key_value_heads", "n_head"), 1 << 12),
          "vocab_size": 1 << 24}


def check_limits(raw: dict[str, Any], where: str = "") -> None:
    """Refuse a config whose sizes no model has (``LIMITS``), in it and in its sub-configs
    (``text_config``...), in one line that names the key."""
    for key, value in raw.items():
        if isinstance(value, dict):
            check_limits(value, f"{where}{key}.")
        elif key in LIMITS and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and not value <= LIMITS[key]:
            raise ValueError(f"{where}{key} {value!r} is past {LIMITS[key]:,}, beyond any released model: "
                             "not a config vramlint can check")


@lru_cache(maxsize=1)
def model_defaults() -> dict[str, dict[str, Any]]:
    text = resources.files("vramlint").joinpath("data/model_defaults.json").read_text()
    return json.loads(text)


def absent_sub_config(model_type: str | None, key: str) -> dict[str, Any] | None:
    """What transformers builds a composite config's ``key`` sub-config from when the file has none
    (``SubConfigSpec.init_kwargs``; empty where the sub-config class's own defaults apply; None
    where the sub-config is optional and so not built at all)."""
    specs = model_defaults().get("_absent_sub_configs", {}).get(model_type or "", {})
    spec = specs.get(key, {})
    return None if spec is None else dict(spec)


class HfConfig:
    """Read-only view: file values over the model type's transformers defaults."""

    def __init__(self, raw: dict[str, Any], defaults_for: str) -> None:
        self.raw = raw
        self.defaults = model_defaults().get(defaults_for, {})
        self.defaults_for = defaults_for

    def get(self, *keys: str, default: Any = None) -> Any:
        """The first key present in the file (a ``None`` value counts as present), else the first
        key with a transformers default, else ``default``. Aliases are tried in the order given."""
        for key in keys:
            if key in self.raw:
                return self.raw[key]
        for key in keys:
            value = self.defaults.get(key, _MISSING)
            if value is not _MISSING:
                return value
        return default

    def int(self, *keys: str, default: int | None = None) -> int:
        value = self.get(*keys, default=default)
        if value is None:
            raise KeyError(keys[0])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value != int(value):
            raise ValueError(f"{keys[0]} must be an integer, got {value!r}")
        if keys[0] in LAYER_COUNTS and not 1 <= value <= MOST_LAYERS:
            raise ValueError(f"{keys[0]} must be between 1 and {MOST_LAYERS:,}, got {value!r}")
        return int(value)

    def opt_int(self, *keys: str) -> int | None:
        value = self.get(*keys)
        return None if value is None else self.int(*keys)

    def flag(self, *keys: str, default: bool = False) -> bool:
        return bool(self.get(*keys, default=default))
