"""Dev-only: what a mixture-of-experts model holds once transformers loads it in 4 bit, on the CPU.

bitsandbytes replaces nn.Linear modules only, and transformers 5 fuses routed experts into 3-D
nn.Parameters, so a QLoRA MoE keeps its experts in the load dtype. Four MoE types' default
configs shrunk to two layers (hidden 512, 8 experts, vocab 8000), saved and loaded with NF4 +
double quantization in bf16: every parameter's storage and each 4-bit weight's quantization state
(``qlora_peaks.resting_storages``). Writes JSON ``{type: {"config", "resting"}}``.

    pip install torch==2.13.0 transformers bitsandbytes   # never vramlint dependencies
    python dev/qlora_moe_storage.py > tests/data/qlora_moe_storage.json
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings

from qlora_peaks import load_4bit, resting_storages

TYPES = ["mixtral", "qwen3_moe", "gpt_oss", "deepseek_v3"]


def resting(model_type: str) -> dict:
    config, model = load_4bit(model_type)
    return {"config": config.to_diff_dict(), "resting": sum(resting_storages(model).values())}


def main() -> None:
    warnings.filterwarnings("ignore")
    with contextlib.redirect_stdout(sys.stderr):      # DeepSpeed's import-time log line, via transformers
        found = {t: resting(t) for t in TYPES}
    json.dump(found, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
