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
# The deepest released decoders have a few hundred layers; the builders make one Layer each, so a
# typo of 2**40 would hang the check instead of refusing the file.
LAYER_COUNTS = frozenset({"num_hidden_layers", "n_layer", "num_layers"})
MOST_LAYERS = 10_000


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
