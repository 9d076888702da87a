"""Dev-only: the dtype PEFT leaves LoRA adapters in, by how the base is loaded and wrapped.

A shrunk llama (torch_probe.shrunk_config) loaded in bf16, fp32, and through bitsandbytes NF4
(bf16 compute), wrapped by ``peft.get_peft_model`` with its default ``autocast_adapter_dtype=True``
and with it off (axolotl's ``peft_autocast_adapter_dtype: false``). Records the element size of
every trainable parameter. Writes ``tests/data/adapter_dtypes.json``:
``{"<base>:<autocast>": {"element_bytes": [...distinct sizes], "dtypes": [...]}, "source": ...}``.

    pip install torch==2.13.0 transformers peft bitsandbytes     # never vramlint dependencies
    python dev/adapter_dtypes.py > tests/data/adapter_dtypes.json
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings

import torch
import transformers
from step_peaks import SMALL
from torch_probe import shrunk_config


def wrapped(base: str, autocast: bool) -> dict:
    import peft
    from qlora_peaks import load_4bit

    if base == "nf4":
        _, model = load_4bit("llama")
    else:
        config = shrunk_config("llama", SMALL)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, base))
    model = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules="all-linear"),
                                autocast_adapter_dtype=autocast)
    trained = [p for p in model.parameters() if p.requires_grad]
    return {"element_bytes": sorted({p.element_size() for p in trained}),
            "dtypes": sorted({str(p.dtype) for p in trained})}


def main() -> None:
    warnings.filterwarnings("ignore")
    import bitsandbytes
    import peft

    with contextlib.redirect_stdout(sys.stderr):      # DeepSpeed's accelerator line, progress bars
        found = {f"{base}:{autocast}": wrapped(base, autocast)
                 for base in ("bfloat16", "float32", "nf4") for autocast in (True, False)}
    found["source"] = (f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, "
                       f"bitsandbytes {bitsandbytes.__version__}")
    json.dump(found, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
