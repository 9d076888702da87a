"""The generic fallback's error: for every transformers causal-LM model type that builds
(tests/data/meta_types.json, recorded by dev/meta_types.py), the parameters vramlint's generic
decoder reads from the default config (models/generic.py: Llama-like layers over the standard
keys) against transformers' own count. Prints one row per type and the summary (median and worst
|error|, and the types the generic reader cannot read at all). Needs transformers (the default
configs come from it).

    python benchmarks/generic_fallback.py
"""

from __future__ import annotations

import json
import statistics
import warnings
from pathlib import Path

from vramlint.errors import UsageError
from vramlint.models.config import HfConfig
from vramlint.models.generic import generic, standard

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "meta_types.json"


def main() -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    warnings.simplefilter("ignore")
    types = json.loads(DATA.read_text())["types"]
    errors, unread = {}, []
    for model_type, entry in sorted(types.items()):
        if "params" not in entry:
            continue
        raw = {**CONFIG_MAPPING[model_type]().to_dict(), **entry.get("overrides", {})}
        try:
            count = generic(HfConfig(standard(raw), model_type)).params
        except (KeyError, ValueError, TypeError, ZeroDivisionError, UsageError):
            unread.append(model_type)
            continue
        errors[model_type] = count / entry["params"] - 1
        print(f"{model_type:<32} {entry['params']:>16,} {count:>16,} {errors[model_type]:+8.1%}")
    values = [abs(e) for e in errors.values()]
    print(f"\n{len(errors)} types read: median |error| {statistics.median(values):.1%}, worst {max(values):.1%} "
          f"({max(errors, key=lambda t: abs(errors[t]))}); within 5 %: {sum(v <= 0.05 for v in values)}")
    print(f"{len(unread)} types the generic reader cannot read: {', '.join(unread)}")


if __name__ == "__main__":
    main()
