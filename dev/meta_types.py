"""Dev-only: every transformers model type with a causal-LM class, built on the meta device from its
default config (plus the values a real Hub config gives where the default config cannot be built),
with transformers' own ``num_parameters()``: tests/data/meta_types.json, which
tests/test_meta_types.py holds vramlint's meta-device path (``models/meta.py``) to, and
benchmarks/generic_fallback.py measures the generic decoder against.

    python dev/meta_types.py > tests/data/meta_types.json      # transformers 5.24.0, torch 2.13.0

Only what is not transformers' default is stored: the test rebuilds each default config from the
installed transformers (the same version: the file names it).
"""

from __future__ import annotations

import json
import sys
import warnings

# Values from the types' published configs (Hub config.json) where transformers' default config
# leaves something unset that the model's constructor needs.
REAL = {
    "hunyuan_v1_dense": {"rope_theta": 10000.0, "head_dim": 128},        # tencent/Hunyuan-7B-Instruct
    "hunyuan_v1_moe": {"rope_theta": 10000.0, "head_dim": 128},          # tencent/Hunyuan-A13B-Instruct
    "ministral": {"rope_theta": 100000000.0, "head_dim": 128},           # mistralai/Ministral-8B-Instruct-2410
    "nemotron": {"num_key_value_heads": 8},                              # nvidia/Minitron-8B-Base
    "reformer": {"is_decoder": True},                                    # google/reformer-crime-and-punishment
}


def build(model_type: str, overrides: dict):
    import torch
    import transformers
    from transformers.models.auto import modeling_auto as auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    config = CONFIG_MAPPING[model_type].from_dict({**CONFIG_MAPPING[model_type]().to_dict(), **overrides})
    cls = getattr(transformers, auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
    wanted = getattr(cls, "config_class", None)
    if wanted is not None and not isinstance(config, wanted):
        config = next((getattr(config, k) for k in getattr(config, "sub_configs", {}) or {}
                       if isinstance(getattr(config, k, None), wanted)), config)
    with torch.device("meta"):
        return cls._from_config(config)


def main() -> None:
    import transformers
    from transformers.models.auto import modeling_auto as auto
    from transformers.utils import logging
    logging.set_verbosity_error()
    warnings.simplefilter("ignore")
    out = {"transformers": transformers.__version__, "types": {}}
    for model_type in sorted(auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        overrides = REAL.get(model_type, {})
        try:
            model = build(model_type, overrides)
            entry = {"params": model.num_parameters()}
        except Exception as exc:  # noqa: BLE001 - a type transformers itself cannot build here
            entry = {"unbuildable": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"}
        if overrides:
            entry["overrides"] = overrides
        out["types"][model_type] = entry
        print(model_type, entry, file=sys.stderr)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
