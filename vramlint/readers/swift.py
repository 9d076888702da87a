"""ms-swift ``swift sft`` / ``swift pt`` → a :class:`Recipe` (docs/recipes.md, "ms-swift").

Read as ms-swift 4.6.0 parses its command line (and the YAML / JSON file a first argument names:
swift/cli/main.py ``parse_yaml_args``) into ``SftArguments`` over the HF ``Seq2SeqTrainingArguments``
(swift/arguments, swift/trainers/arguments.py; the wheel's sha256 8888ca2b88681aea...):

- ``tuner_type`` (3.x's ``train_type``) ``lora`` by default (base_args.py:121): LoRA rank 8 on
  ``all-linear``, dropout 0.05 (tuner_args.py:126-135), the adapters fp32 (PEFT's
  autocast_adapter_dtype; ``lora_dtype`` unset); ``full`` trains every weight in the load dtype
  (tuner.py:408-413: no fp32 copy outside DeepSpeed);
- the weights in ``torch_dtype``, else the checkpoint's, and bf16 / fp16 training to match
  (model_args.py:130-142);
- ``per_device_train_batch_size`` 1, gradient checkpointing on (trainers/arguments.py:130-135);
- ``max_length`` unset: samples are cut at the model's max_model_len (base_args.py:227-228), a cap
  far past most data, so the data's longest sample decides (read as a recipe without a cap);
- ``quant_method bnb`` with ``quant_bits`` 4 or 8 loads the base quantized (quant_args.py
  ``get_quantization_config``: without ``quant_method`` nothing is);
- ``deepspeed`` a file, or the name of a config ms-swift ships (``zero0`` ... ``zero3_offload``:
  swift/config, byte copies in data/shipped); ``fsdp`` the HF Trainer's;
- ``packing`` / ``padding_free`` need flash attention (sft_args.py ``_check_padding_free``);
- ``sequence_parallel_size`` splits each sequence's tokens over that many ranks (Ulysses / ring).
"""

from __future__ import annotations

from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import (TRAIN, Feature, Keys, Recipe, Refusal, dora_switch, dtype_name, optim_switches,
                                     positive, targets, truthy)
from vramlint.readers.trl import attention, hf_fsdp, optimizer

VERSION = "ms-swift 4.6.0"
# Keys only ms-swift's arguments have (a file it reads: ``swift sft config.yaml``)
OWN_KEYS = ("tuner_type", "train_type", "quant_bits", "attn_impl", "target_modules")
SPELLING = {"micro_batch": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps",
            "seq_len": "max_length", "grad_checkpointing": "gradient_checkpointing", "mixed_precision": "torch_dtype",
            "weights_dtype": "torch_dtype", "optimizer": "optim", "lora_rank": "lora_rank",
            "lora_targets": "target_modules", "attn": "attn_impl", "load_in_4bit": "quant_bits", "model": "model",
            "sequence_split": "sequence_parallel_size"}
# Tuners priced as LoRA of lora_rank on target_modules (their own adapters are that size or smaller)
LORA_LIKE = ("lora", "longlora", "adalora")
FLASH = ("flash_attn", "flash_attention_2", "flash_attention_3", "flash_attention_4")


def looks_like_swift(data: Any) -> bool:
    """A ``swift sft`` config file: its ``model`` and ms-swift's own tuner or quantization keys."""
    return isinstance(data, dict) and isinstance(data.get("model"), str) and any(k in data for k in OWN_KEYS)


def _tuner(keys: Keys) -> tuple[Fact, Fact, Fact, tuple[Feature, ...]]:
    """The tuner: LoRA's rank, targets and dropout (rank 0 for full training), and what is priced
    as another tuner."""
    kind = keys.get("tuner_type", "train_type", default="lora", why=f"{VERSION}: tuner_type lora (base_args.py:121)")
    name = str(kind.value).lower()
    targets_ = keys.get("target_modules", default=("all-linear",), convert=targets,
                        why=f"{VERSION}: all-linear (tuner_args.py:126)")
    dropout = keys.get("lora_dropout", default=0.05, why=f"{VERSION}: 0.05 (tuner_args.py:135)")
    if name == "full":
        return Fact(0, kind.location, kind.default), targets_, dropout, ()
    rank = keys.get("lora_rank", default=8, convert=positive, why=f"{VERSION}: 8 (tuner_args.py:133)")
    said = () if name in LORA_LIKE else (Feature(kind, f"tuner_type {name}: priced as LoRA of rank {rank.value} on "
                                                       f"{', '.join(targets_.value)}", "high"),)
    return rank, targets_, dropout, said


def _precision(keys: Keys) -> tuple[Fact, Fact]:
    """The load dtype and the training precision it sets (model_args.py:130-142: bf16 for bfloat16,
    fp16 for float16 and float32); unstated, the checkpoint's dtype and bf16 where the GPU has it."""
    dtype = keys.get("torch_dtype", default=None)
    if dtype.value is None:
        why = f"{VERSION}: torch_dtype unset, the checkpoint's dtype (model_args.py:120-125)"
        return Fact("auto", None, why), Fact("auto", None, why)
    name = dtype_name(dtype.value)
    stated = next((flag for flag in ("bf16", "fp16") if truthy(keys.raw(flag))), None)
    if stated:                                  # the Trainer's own flag, stated, stands (model_args.py:139-142)
        return Fact(name, dtype.location), keys.fact(stated, stated)
    return Fact(name, dtype.location), Fact("bf16" if name == "bfloat16" else "fp16", dtype.location)


# The methods that quantize the base as it loads (quant_args.py:33-36; awq / gptq checkpoints are
# pre-quantized, read from their config); priced at 4 or 8 bits, as bitsandbytes stores them
ON_THE_FLY = ("bnb", "hqq", "eetq", "quanto", "fp8")
PRICED_BITS = ("4", "8")


def _quantized(keys: Keys) -> tuple[Fact, Fact]:
    """4- or 8-bit on the fly with ``quant_method`` (priced as bitsandbytes' storage: ``_features`` says so
    for the others); ``quant_bits`` alone quantizes nothing (``get_quantization_config`` returns None)."""
    method, bits = keys.get("quant_method", default=None), keys.get("quant_bits", default=None)
    on = str(method.value).lower() in ON_THE_FLY
    where, why = bits.location or method.location, f"{VERSION}: quant_method unset, no quantization (quant_args.py:33)"
    return Fact(on and str(bits.value) == "4", where, why), Fact(on and str(bits.value) == "8", where, why)


# The DeepSpeed configs ms-swift ships, named by ``--deepspeed`` (sft_args.py ``_init_deepspeed``)
SHIPPED_DEEPSPEED = ("zero0", "zero1", "zero2", "zero2_offload", "zero3", "zero3_offload")


def _deepspeed(keys: Keys) -> Fact:
    """A DeepSpeed file, or a config ms-swift ships, by its name: the file it opens, swift/config/<name>.json
    (vramlint reads its own byte copy: shipped.py)."""
    fact = keys.get("deepspeed", default=None)
    if isinstance(fact.value, str) and fact.value in SHIPPED_DEEPSPEED:
        return Fact(f"swift/config/{fact.value}.json", fact.location, fact.default)
    return fact


def _features(keys: Keys) -> tuple[Feature, ...]:
    """What the arguments turn on that the estimate prices another way (VL210: the job needs more;
    "high", VL211: less)."""
    out = []
    saved = keys.get("modules_to_save", default=None)
    if saved.value:
        out.append(Feature(saved, f"modules_to_save {saved.value}: PEFT trains a full copy of each (its weights, "
                                  "gradients and Adam states)"))
    for name, what in (("use_galore", "GaLore keeps projected optimizer states"),
                       ("lisa_activated_layers", "LISA trains a few layers at a time: priced as full training")):
        if truthy(keys.raw(name)):
            out.append(Feature(keys.fact(name, keys.raw(name)), what, "high"))
    if str(keys.raw("tuner_backend") or "").lower() == "unsloth":
        out.append(Feature(keys.fact("tuner_backend", "unsloth"), "Unsloth's kernels and offloaded checkpoints",
                           "high"))
    method, bits = str(keys.raw("quant_method") or "").lower(), str(keys.raw("quant_bits"))
    if method in ON_THE_FLY and bits not in PRICED_BITS:
        out.append(Feature(keys.fact("quant_method", method), f"{method} quantization to {bits} bits: priced as a "
                                                               "16-bit base", "high"))
    elif method in ON_THE_FLY and method != "bnb":
        out.append(Feature(keys.fact("quant_method", method), f"{method} quantization: priced as bitsandbytes' "
                                                               f"storage of {bits} bits", "low"))
    return tuple(out)


def _refusals(keys: Keys) -> tuple[Refusal, ...]:
    """ms-swift's own start-up checks, verbatim: packing and padding-free need flash attention
    (sft_args.py ``_check_padding_free``)."""
    for name in ("packing", "padding_free"):
        if truthy(keys.raw(name)) and str(keys.raw("attn_impl") or "") not in FLASH:
            return (Refusal("always", name, f'The "{name}" feature requires a flash attention implementation. '
                                            'Please use one of: "flash_attn", "flash_attention_2", '
                                            '"flash_attention_3", "flash_attention_4".'),)
    return ()


# Tasks whose head is no vocabulary (model_args.py:72 task_type): a classification, reranking or
# embedding head, priced as a one-output head with no logits (ModelShape.as_value_model)
HEADLESS = ("seq_cls", "reranker", "embedding")


def _switches(keys: Keys) -> dict[str, Fact]:
    """The optimizer's flavour, DoRA, and Liger's fused cross-entropy (``use_liger_kernel``)."""
    out = optim_switches(keys.get("optim", default="adamw_torch_fused", why="HF TrainingArguments optim default"))
    out |= dora_switch(keys, "use_dora")
    liger = keys.get("use_liger_kernel", default=False, convert=truthy)
    if liger.value:
        out["loss"] = Fact("liger", liger.location)
    return out


def read_swift(document: Document, trainer: Fact | None = None) -> Recipe:
    """``swift sft`` (``trainer``: the subcommand, ``pt`` for pretraining) as the recipe it parses."""
    keys = Keys(document, f"{VERSION} default")
    rank, where, dropout, tuned = _tuner(keys)
    weights, mixed = _precision(keys)
    four, eight = _quantized(keys)
    stage = trainer if trainer is not None and trainer.value in ("sft", "pt") else Fact("sft", None, "swift sft")
    return Recipe(
        document=document, framework="swift", title="ms-swift", task=TRAIN, stage=stage,
        model=keys.get("model", "model_id_or_path"),
        revision=keys.get("model_revision", default="main"),
        micro_batch=keys.get("per_device_train_batch_size", default=1, convert=positive,
                             why=f"{VERSION}: 1 (trainers/arguments.py:130)"),
        grad_accum=keys.get("gradient_accumulation_steps", default=1, convert=positive,
                            why=f"{VERSION}: ceil(16 / batch / world size) (trainers/arguments.py:291); a step's "
                                "peak is one micro-batch's"),
        seq_len=keys.get("max_length", default=None, convert=positive,
                         why=f"{VERSION}: samples cut at the model's max_model_len (base_args.py:227-228), so the "
                             "data's longest one decides"),
        packing=keys.get("packing", default=False, convert=truthy, why=f"{VERSION}: off (base_args.py:133)"),
        grad_checkpointing=keys.get("gradient_checkpointing", default=True, convert=truthy,
                                    why=f"{VERSION}: on (trainers/arguments.py:135)"),
        mixed_precision=mixed, weights_dtype=weights,
        optimizer=optimizer(keys, "adamw_torch_fused", "HF TrainingArguments optim default (torch >= 2.8)"),
        lora_rank=rank, lora_targets=where, lora_dropout=dropout,
        load_in_4bit=four, load_in_8bit=eight,
        attn=attention(keys, "attn_impl"),
        deepspeed=_deepspeed(keys), fsdp=hf_fsdp(keys),
        max_grad_norm=keys.get("max_grad_norm", default=1.0, why="HF TrainingArguments default"),
        keys=SPELLING, features=tuned + _features(keys), refusals=_refusals(keys), release=VERSION,
        switches=_switches(keys), value_head=str(keys.raw("task_type") or "causal_lm") in HEADLESS,
        sequence_split=keys.get("sequence_parallel_size", default=1, convert=positive,
                                why=f"{VERSION}: 1 (template_args.py:141)"),
    )


__all__ = ["looks_like_swift", "read_swift"]
