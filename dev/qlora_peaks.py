"""Dev-only: a QLoRA training step's allocated peak, from transformers, PEFT and bitsandbytes.

For a few model types' default configs shrunk to a small width (step_peaks.py's), saves the
model, loads it back the way QLoRA scripts do — ``BitsAndBytesConfig`` NF4 with double
quantization and bf16 compute — and trains two steps on the CPU with a PEFT LoRA adapter
(r=16, all-linear, no dropout: the CPU's dropout keeps a float noise tensor where CUDA keeps a
bool mask) and foreach AdamW, counting the storages aten ops create while a tensor holds them
(``torch_probe.StorageWatch``). Two regimes: the unquantized parameters (embeddings, norms,
lm_head) left in bf16 and no autocast; or upcast to fp32 (what peft's
``prepare_model_for_kbit_training`` does, and TRL's SFTTrainer's float32 default) under bf16
autocast. Each with and without gradient checkpointing. ``--wide``: the same, checkpointed, at
hidden 2048 and MLP 8192 over 512 tokens (four types), where a layer's backward is the peak and
the 16-bit weight bitsandbytes dequantizes for each matmul shows; into ``qlora_peaks_wide.json``.
Writes ``tests/data/qlora_peaks.json``:
``{"<type>:<regime>:<gc>": {"seq", "fp32", "checkpointing", "resting", "adapters",
"peak_above_resting", "config", "source"}}`` — ``resting``: every parameter and quantization-state
storage; ``peak_above_resting``: the second step's peak above them (Adam's states included).

    pip install torch==2.13.0 transformers peft bitsandbytes   # never vramlint dependencies
    python dev/qlora_peaks.py > tests/data/qlora_peaks.json
    python dev/qlora_peaks.py --wide > tests/data/qlora_peaks_wide.json
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import warnings

import torch
import transformers
from step_peaks import SMALL, Live
from torch_probe import StorageWatch, dump_cases, shrunk_config

SEQ = 1024
TYPES = ["llama", "qwen2", "gemma2", "phi3", "gpt_neox"]
WIDE = {"hidden_size": 2048, "n_embd": 2048, "intermediate_size": 8192, "num_attention_heads": 16, "n_head": 16,
        "head_dim": 128, "vocab_size": 8000}
WIDE_SEQ = 512


def load_4bit(model_type: str, storage=None, attn: str | None = None, widths: dict | None = None):
    """The type's shrunk config (untied), saved with random bf16 weights and loaded back through
    bitsandbytes NF4 + double quantization, computing in bf16; ``storage`` is
    ``bnb_4bit_quant_storage`` (uint8 unless given), ``attn`` the attention kernel (transformers'
    default unless given). The config and the loaded model."""
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    config = shrunk_config(model_type, widths or SMALL)
    config.tie_word_embeddings = False
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_storage=storage or torch.uint8)
    with tempfile.TemporaryDirectory() as folder:
        AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, quantization_config=quant, dtype=torch.bfloat16,
                                                     device_map="cpu", attn_implementation=attn)
    return config, model


def quant_state_bytes(model) -> int:
    """Every 4-bit weight's absmax: a byte per 64 values, and the fp32 absmax of those per 256."""
    return sum(m.weight.quant_state.absmax.nbytes + m.weight.quant_state.state2.absmax.nbytes
               for m in model.modules() if getattr(getattr(m, "weight", None), "quant_state", None) is not None)


def quantized_model(model_type: str, fp32: bool, checkpointing: bool, widths: dict | None = None):
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    config, model = load_4bit(model_type, attn="sdpa", widths=widths)
    model.config.use_cache = False
    kwargs = {"use_reentrant": False}
    if fp32:
        model = prepare_model_for_kbit_training(model, checkpointing, gradient_checkpointing_kwargs=kwargs)
    elif checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear"))
    model.train()
    return config, model


def resting_storages(model) -> dict[int, int]:
    """Every parameter's storage and the 4-bit weights' quantization state (absmax, codes)."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in model.parameters()}
    for module in model.modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if state is not None:
            for t in (state.absmax, state.code, state.offset, state.state2.absmax, state.state2.code):
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return storages


def measure(case: tuple) -> tuple[str, dict]:
    """One case in a fresh process; what its imports print (DeepSpeed's accelerator line) goes to stderr."""
    with contextlib.redirect_stdout(sys.stderr):
        return _measure(case)


def _measure(case: tuple) -> tuple[str, dict]:
    warnings.filterwarnings("ignore")
    model_type, fp32, checkpointing, wide = (*case, False)[:4]
    config, model = quantized_model(model_type, fp32, checkpointing, WIDE if wide else None)
    seq = WIDE_SEQ if wide else SEQ
    resting = resting_storages(model)
    adapters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(adapters, lr=1e-5, foreach=True)
    ids = torch.randint(0, config.vocab_size, (1, seq))
    peaks = []
    for _ in range(2):
        live = Live()
        with StorageWatch(set(resting), live.new, live.free):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=fp32):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            del loss
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        peaks.append(live.peak)
    # the second step's count leaves out Adam's states: the first step created them
    adam = sum(s.untyped_storage().nbytes() for state in optimizer.state.values() for s in state.values() if s.dim())
    key = f"{model_type}:{'fp32-autocast' if fp32 else 'bf16'}:{'gc' if checkpointing else 'no-gc'}{':wide' * wide}"
    import bitsandbytes
    import peft
    return key, {"seq": seq, "fp32": fp32, "checkpointing": checkpointing, "resting": sum(resting.values()),
                 "adapters": sum(p.numel() for p in adapters), "peak_above_resting": peaks[1] + adam,
                 "config": config.to_diff_dict(),
                 "source": f"torch {torch.__version__}, transformers {transformers.__version__}, peft "
                           f"{peft.__version__}, bitsandbytes {bitsandbytes.__version__}"}


def main() -> None:
    if "--wide" in sys.argv[1:]:       # gemma2 left out: transformers 5.24 refuses it SDPA
        cases = [(t, fp32, True, True) for t in TYPES if t != "gemma2" for fp32 in (False, True)]
    else:
        cases = [(t, fp32, gc) for t in TYPES for fp32 in (False, True) for gc in (True, False)]
    dump_cases(measure, cases, "peak_above_resting")


if __name__ == "__main__":
    main()
