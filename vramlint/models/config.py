"""A HuggingFace config dict with its model type's transformers defaults behind it.

``save_pretrained`` writes only the values that differ from the class defaults, so a real
config.json may omit ``num_key_value_heads`` or ``vocab_size``. :class:`HfConfig` answers a key
from the file first, then from the defaults of that model type (``data/model_defaults.json``,
dumped from transformers' configuration classes by ``dev/model_defaults.py``), and remembers
which keys came from where so reports can say so.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from vramlint.packaged import data_json

_MISSING = object()
# Config keys and the spellings configuration classes give them (their ``attribute_map``): the
# generic decoder reads the sizes by them, the meta-device path the expert counts, and the limits
# below hold every spelling.
SPELLINGS = {
    "hidden_size": ("n_embd", "d_model", "dim", "model_dim", "hidden_dim"),
    "num_hidden_layers": ("n_layer", "num_layers", "n_layers", "num_decoder_layers"),
    "num_attention_heads": ("n_head", "num_heads", "n_heads", "num_attention_head"),
    "num_key_value_heads": ("num_kv_heads", "n_kv_heads", "multi_query_group_num", "num_key_value_groups"),
    "intermediate_size": ("ffn_dim", "n_inner", "ffn_hidden_size", "d_ff", "mlp_dim", "ffn_intermediate_size"),
    "max_position_embeddings": ("n_positions", "max_seq_len", "seq_length", "max_sequence_length"),
    "vocab_size": ("padded_vocab_size", "n_vocab"),
}
EXPERT_COUNTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
TOP_K = ("num_experts_per_tok", "moe_top_k", "top_k", "moe_k", "num_selected_experts")
# Sizes far past any released model's: the builders make one Layer each and transformers' meta
# build one module per expert in some types, so a typo of 2**40 would hang the check (or fill the
# memory) instead of refusing the file. The deepest released decoders have 126-128 layers
# (Llama-3.1-405B, hrm_text; dev/meta_types.py over transformers 5.24's defaults), Llama-3.1-405B's
# hidden size is 16,384, Qwen3-Next routes over 512 experts, Gemma 3's vocabulary is 262,144: the
# limits are 8x to 64x past them, the layers' 2.5x (the step replays grow with the layer count).
LAYER_COUNTS = frozenset({"num_hidden_layers", *SPELLINGS["num_hidden_layers"]})
MOST_LAYERS = 320
_MOST = {"num_hidden_layers": MOST_LAYERS, "hidden_size": 1 << 17, "intermediate_size": 1 << 20,
         "num_attention_heads": 1 << 12, "num_key_value_heads": 1 << 12, "vocab_size": 1 << 24}
LIMITS = {**{spelling: most for key, most in _MOST.items() for spelling in (key, *SPELLINGS[key])},
          "moe_intermediate_size": 1 << 20, **dict.fromkeys(EXPERT_COUNTS, 1 << 14)}


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
    return data_json("model_defaults.json")


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
