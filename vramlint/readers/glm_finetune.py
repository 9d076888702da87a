"""ChatGLM3's and GLM-4's ``finetune_demo`` configs → a :class:`Recipe`.

``python finetune_hf.py DATA_DIR MODEL_DIR configs/lora.yaml`` reads the YAML into its own
``FinetuningConfig`` (THUDM/ChatGLM3 finetune_demo/finetune_hf.py:160-205 at 034cc38): a
``data_config``, ``max_input_length`` and ``max_output_length`` at the top, HF
``Seq2SeqTrainingArguments`` nested under ``training_args`` and a PEFT config under
``peft_config`` (LORA or PREFIX_TUNING; none: a full fine-tune). The model is the command line's
``MODEL_DIR``, never the file's, so ``--model`` (or the settings) names it.

What the script does with it, read from the same file: each sample is cut to ``max_input_length``
prompt and ``max_output_length`` answer tokens, ``max_input_length + max_output_length + 1`` in all
(:325); the model loads without a ``torch_dtype`` (transformers 4.x: fp32) and every trainable
parameter is cast to fp32 (:380-383); gradient checkpointing is always on (:516); LoRA adapts what
the config's ``target_modules`` name, else PEFT's default for the model type.
"""

from __future__ import annotations

from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import TRAIN, Feature, Keys, Recipe, positive, targets
from vramlint.readers.trl import mixed_precision, optimizer

VERSION = "ChatGLM3 finetune_demo (finetune_hf.py at 034cc38)"
SPELLING = {"micro_batch": "training_args.per_device_train_batch_size",
            "grad_accum": "training_args.gradient_accumulation_steps", "seq_len": "max_input_length",
            "mixed_precision": "training_args.bf16", "optimizer": "training_args.optim", "lora_rank": "peft_config.r",
            "lora_targets": "peft_config.target_modules"}


def looks_like_glm_finetune(data: Any) -> bool:
    """Seq2Seq training arguments nested under ``training_args`` beside the demo's own lengths."""
    return (isinstance(data, dict) and isinstance(data.get("training_args"), dict)
            and any(k in data for k in ("max_input_length", "max_output_length", "peft_config", "data_config")))


def _seq_len(keys: Keys) -> Fact:
    prompt, answer = keys.get("max_input_length"), keys.get("max_output_length")
    if not all(isinstance(f.value, int) and not isinstance(f.value, bool) for f in (prompt, answer)):
        return prompt if prompt.from_file else answer    # missing or not a count: rules.recipe says so
    return Fact(prompt.value + answer.value + 1, prompt.location, "")


def _peft(keys: Keys) -> tuple[Fact, Fact, Fact, tuple[Feature, ...]]:
    kind = keys.get("peft_config.peft_type", default=None, why=f"{VERSION}: no peft_config, a full fine-tune")
    word = str(kind.value or "").upper()
    if word == "LORA":
        return (keys.get("peft_config.r", default=8, convert=positive, why="PEFT LoraConfig r default"),
                keys.get("peft_config.target_modules", default=("peft-default",), convert=targets,
                         why="PEFT's targets for the model type"),
                keys.get("peft_config.lora_dropout", default=0.0, why="PEFT LoraConfig default"), ())
    if word:
        feature = Feature(kind, f"{word.lower()} trains a small prefix encoder beside a frozen base: priced as a full "
                                "fine-tune", "high")
        return Fact(0, kind.location), Fact(("all-linear",)), Fact(0.0), (feature,)
    return Fact(0, kind.location, kind.default), Fact(("all-linear",)), Fact(0.0), ()


def read_glm_finetune(document: Document) -> Recipe:
    keys = Keys(document, f"{VERSION} default")
    rank, where, dropout, features = _peft(keys)
    return Recipe(
        document=document, framework="glm", title="ChatGLM / GLM-4 finetune_demo", task=TRAIN,
        stage=Fact("sft", None, f"{VERSION}: Seq2SeqTrainer on prompt + answer"),
        model=Fact(None, None, "finetune_hf.py MODEL_DIR (the command line's)"),
        revision=Fact("main"),
        micro_batch=keys.get("training_args.per_device_train_batch_size", default=8, convert=positive,
                             why="HF TrainingArguments default"),
        grad_accum=keys.get("training_args.gradient_accumulation_steps", default=1, convert=positive),
        seq_len=_seq_len(keys),
        packing=Fact(False, None, f"{VERSION}: one sample a row, padded"),
        grad_checkpointing=Fact(True, None, f"{VERSION}: model.gradient_checkpointing_enable() (finetune_hf.py:516)"),
        mixed_precision=mixed_precision(Keys(_nested(document), VERSION), False, "HF TrainingArguments"),
        weights_dtype=Fact("float32", None, f"{VERSION}: from_pretrained without torch_dtype, trainable cast to fp32"),
        optimizer=optimizer(keys, "adamw_torch", "HF TrainingArguments optim default", "training_args.optim"),
        lora_rank=rank, lora_targets=where, lora_dropout=dropout,
        load_in_4bit=Fact(False), load_in_8bit=Fact(False),
        attn=Fact("auto"),
        deepspeed=keys.get("training_args.deepspeed"),
        fsdp=None,
        keys=SPELLING, features=features,
    )


def _nested(document: Document) -> Document:
    """The ``training_args`` mapping as a document of its own (its keys where the file has them)."""
    from vramlint.documents import sub_document
    return sub_document(document, "$.training_args")
