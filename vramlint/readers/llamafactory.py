"""LLaMA-Factory YAML → a :class:`Recipe` (docs/recipes.md, "LLaMA-Factory").

``llamafactory-cli train x.yaml`` parses the file into its own ``ModelArguments``,
``DataArguments``, ``FinetuningArguments`` and HF ``Seq2SeqTrainingArguments``. Read as 0.9.5
does: ``stage`` sft, ``finetuning_type`` lora (``lora_rank`` 8 on ``lora_target: all``, every
linear but lm_head), ``cutoff_len`` 2048 (a cap; packing, on by default for ``pt``, fills every row
to it), gradient checkpointing on unless ``disable_gradient_checkpointing``, the base loaded in the
checkpoint's dtype and every trainable parameter cast to fp32 (``cast_trainable_params_to_fp32``)
except under ``pure_bf16``. Whether the file trains is ``do_train``; the same keys also describe
inference (``infer_backend``), export (``export_dir``) and evaluation (``do_predict``, ``task``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from typing import Any

from vramlint.documents import Document
from vramlint.packaged import data_json
from vramlint.readers.deepspeed import Fact
from vramlint.readers.dialects import PROJECT_KEYS
from vramlint.readers.recipe import (TRAIN, Feature, Keys, Recipe, Refusal, dora_switch, optim_switches, positive,
                                     targets, truthy)
from vramlint.readers.trl import attention, hf_fsdp, optimizer

VERSION = "LLaMA-Factory 0.9.5"
STAGES = ("pt", "sft", "rm", "ppo", "dpo", "kto", "orpo", "simpo")
# Keys only LLaMA-Factory's argument dataclasses have (``lora_rank`` is also Firefly's and
# open-instruct's, so it marks none of them on its own).
OWN_KEYS = ("finetuning_type", "cutoff_len", "quantization_bit", "lora_target", "template", "pure_bf16",
            "disable_gradient_checkpointing", "infer_backend", "export_dir", "flash_attn")
SPELLING = {"micro_batch": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps",
            "seq_len": "cutoff_len", "grad_checkpointing": "disable_gradient_checkpointing", "mixed_precision": "bf16",
            "optimizer": "optim", "lora_rank": "lora_rank", "lora_targets": "lora_target", "attn": "flash_attn",
            "load_in_4bit": "quantization_bit", "model": "model_name_or_path"}


def looks_like_llamafactory(data: Any) -> bool:
    """``model_name_or_path`` with a key of LLaMA-Factory's own or one of its stages, and none of the
    keys another project's ``HfArgumentParser`` dialect marks itself with."""
    if not isinstance(data, dict) or not isinstance(data.get("model_name_or_path"), str):
        return False
    if any(k in data for k in PROJECT_KEYS):
        return False
    return any(k in data for k in OWN_KEYS) or str(data.get("stage", "")).lower() in STAGES


# Training arguments: a file that sets one states a training job, ``do_train`` or not.
TRAINING_ARGUMENTS = ("per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate",
                      "num_train_epochs", "max_steps")


def _task(keys: Keys) -> str:
    """``do_train`` trains. Without it, LLaMA-Factory 0.9.1-0.9.5 trains nothing (``do_train``
    defaults to False, only the Web UI sets it; sft/workflow.py:120 in 0.9.5 gates
    ``trainer.train`` on it): a file with training arguments is still read as the training job it
    states, and ``no_do_train`` says that LLaMA-Factory will not run it; export, evaluation and
    inference files hold none."""
    if _trains(keys):
        return TRAIN
    if keys.has("export_dir"):
        return "export"
    if keys.has("do_predict", "do_eval", "task") and not (keys.has("do_train") or keys.has(*TRAINING_ARGUMENTS)):
        return "evaluation"
    if keys.has(*TRAINING_ARGUMENTS) and not keys.has("infer_backend"):
        return TRAIN
    return "inference"


def _trains(keys: Keys) -> bool:
    return keys.has("do_train") and truthy(keys.raw("do_train"))


def no_do_train(keys: Keys) -> Fact | None:
    """Where a file states a training job that LLaMA-Factory would not run: training arguments
    without ``do_train: true`` (located at ``do_train: false``, else the first training argument)."""
    if _trains(keys):
        return None
    first = next((k for k in TRAINING_ARGUMENTS if keys.has(k)), None)
    if first is None:
        return None
    return keys.fact("do_train" if keys.has("do_train") else first, False)


def _stage(keys: Keys) -> Fact:
    stage = keys.get("stage", default="sft", why=f"{VERSION} stage default")
    value = str(stage.value).lower()
    loss = keys.get("pref_loss")
    if value == "dpo" and str(loss.value) in ("orpo", "simpo"):
        return Fact(str(loss.value), loss.location)
    return Fact(value, stage.location, stage.default)


def _lora(keys: Keys, kind: Fact) -> tuple[Fact, Fact, Fact]:
    if kind.value != "lora":
        return Fact(0, kind.location, kind.default), Fact(("all-linear",)), Fact(0.0)
    rank = keys.get("lora_rank", default=8, convert=positive, why=f"{VERSION} lora_rank default")
    where = keys.get("lora_target", default=("all-linear",), convert=targets, why=f"{VERSION}: lora_target all")
    dropout = keys.get("lora_dropout", default=0.0, why=f"{VERSION} lora_dropout default")
    return rank, where, dropout


def _precision(keys: Keys) -> Fact:
    """Autocast: ``bf16``/``fp16``; ``pure_bf16`` trains in bf16 without it."""
    for key, value in (("bf16", "bf16"), ("fp16", "fp16")):
        if truthy(keys.raw(key)) and keys.has(key):
            return keys.fact(key, value)
    return Fact("no", None, f"{VERSION}: bf16 and fp16 off")


def _weights(keys: Keys, kind: Fact) -> Fact:
    """The checkpoint's dtype (``torch_dtype="auto"``, model/loader.py:155), except that a full or
    freeze fine-tune casts what it trains to fp32 (model/adapter.py:313-325) and ``pure_bf16``
    keeps bf16."""
    if truthy(keys.raw("pure_bf16")) and keys.has("pure_bf16"):
        return keys.fact("pure_bf16", "bfloat16")
    if kind.value in ("full", "freeze") and not truthy(keys.raw("use_badam")):
        return Fact("float32", kind.location, f"{VERSION}: trainable parameters cast to fp32")
    return Fact("auto", None, f"{VERSION}: the checkpoint's dtype")


# The spelling of bitsandbytes' quantization_method, by release (model_args.py and
# model_utils/quantization.py): 0.9.1-0.9.2 "bitsandbytes" (the default), 0.9.3 on "bnb" (the
# default). Any other value matches no branch of configure_quantization: the base loads unquantized.
BNB_SPELLING = (((0, 9, 3), "bnb"), ((0,), "bitsandbytes"))


def bnb_spelling(release: tuple[int, ...]) -> str:
    return next(word for since, word in BNB_SPELLING if release >= since)


def _quantized(keys: Keys, release: tuple[int, ...] = (0, 9, 5)) -> tuple[Fact, Fact]:
    bits = keys.get("quantization_bit")
    spelled = bnb_spelling(release)
    method = str(keys.raw("quantization_method") or spelled).lower()
    on = bits.value in (4, 8) and method == spelled
    return (Fact(on and bits.value == 4, bits.location, bits.default),
            Fact(on and bits.value == 8, bits.location, bits.default))


def numbers(version: str) -> tuple[int, ...]:
    """``0.9.2.dev0`` -> (0, 9, 2): the release's leading numbers."""
    out = []
    for part in version.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out) or RELEASE


RELEASE = (0, 9, 5)                     # what vramlint reads a file as when nothing says otherwise


def _prerelease(version: str) -> bool:
    """A snapshot between releases (``0.9.2.dev0``, ``0.9.3rc1``, ``0.9.3b1``): the release it
    names is not out yet, so its argument names are not any release's."""
    return re.search(r"\d\.?(dev|rc|a|b)\d*$", version) is not None


def preprocess_only(recipe: Recipe) -> Fact | None:
    """``tokenized_path`` where the release the recipe is read as tokenizes into it and exits
    instead of training when the folder is absent or empty: 0.9.1 only (data/loader.py:290-296,
    "Please restart the training with `tokenized_path: ...`", sys.exit(0)); 0.9.2 on saves it and
    trains on in the same run. Whether the folder exists is the caller's to say."""
    keys = Keys(recipe.document, VERSION)
    if numbers(recipe.release.rsplit(" ", 1)[-1]) >= (0, 9, 2) or not recipe.training \
            or not isinstance(keys.raw("tokenized_path"), str):
        return None
    return keys.get("tokenized_path")


@lru_cache(maxsize=1)
def _arguments() -> dict:
    """data/llamafactory_arguments.json (dev/llamafactory_arguments.py): each release's own
    argument fields, and the HF training arguments of the transformers releases they pin."""
    return data_json("llamafactory_arguments.json")


def known_arguments(release: tuple[int, ...]) -> frozenset[str] | None:
    """The argument names of ``release`` (the nearest read one at or below it), None below 0.9.1."""
    table = _arguments()["releases"]
    read = [v for v in table if numbers(v) <= release]
    return frozenset(table[max(read, key=numbers)]) if read else None


def unknown_keys(keys: Keys, fields: frozenset[str] | None) -> list[str]:
    """The top-level keys no argument dataclass of the release (``fields``) nor of a pinned
    transformers has: ``parse_dict`` refuses them. None where the release's fields are unknown."""
    if fields is None:
        return []
    names = set(fields) | set(_arguments()["hf_training_arguments"])
    return sorted(str(k) for k in keys.data if str(k) not in names)


def refusals(keys: Keys, release: tuple[int, ...], fields: frozenset[str] | None) -> tuple[Refusal, ...]:
    """The launches LLaMA-Factory ``release`` refuses for these settings (hparams/parser.py of the
    0.9.1-0.9.5 wheels; lines for 0.9.5); ``fields``: the argument names it takes."""
    def on(*names: str) -> bool:
        return all(keys.has(n) and truthy(keys.raw(n)) for n in names)
    out = []
    if on("use_galore", "galore_layerwise"):                                                  # parser.py:389
        out.append(Refusal("distributed", "galore_layerwise", "Distributed training does not support layer-wise GaLore."))
    if release >= (0, 9, 2) and on("use_apollo", "apollo_layerwise"):                         # parser.py:392
        out.append(Refusal("distributed", "apollo_layerwise", "Distributed training does not support layer-wise APOLLO."))
    if on("use_badam"):                                                                       # parser.py:396-398
        if str(keys.raw("badam_mode") or "layer") == "ratio":
            out.append(Refusal("distributed", "badam_mode", "Radio-based BAdam does not yet support distributed "
                               "training, use layer-wise BAdam."))
        else:
            out.append(Refusal("distributed-without-zero3", "use_badam",
                               "Layer-wise BAdam only supports DeepSpeed ZeRO-3 training."))
    if on("use_galore") or on("use_apollo"):
        out.append(Refusal("deepspeed", "use_galore" if on("use_galore") else "use_apollo",
                           "GaLore and APOLLO are incompatible with DeepSpeed yet." if release >= (0, 9, 2)
                           else "GaLore is incompatible with DeepSpeed yet."))
    if on("pure_bf16"):                                                                       # parser.py:385
        out.append(Refusal("zero3", "pure_bf16", "`pure_bf16` is incompatible with DeepSpeed ZeRO-3."))
    unknown = unknown_keys(keys, fields)
    if unknown:                                 # hparams/parser.py _parse_args -> HfArgumentParser.parse_dict
        out.append(Refusal("always", unknown[0], f"Some keys are not used by the HfArgumentParser: {unknown}",
                           "; ALLOW_EXTRA_ARGS=1 lets them pass" if release >= (0, 9, 2) else ""))
    return tuple(out)


def at_release(recipe: Recipe, version: str, origin: str, fields: frozenset[str] | None = None) -> Recipe:
    """The recipe as the LLaMA-Factory ``version`` the repository runs reads it (``origin``: where
    that was read; ``fields``: the argument names of a copy the repository holds, else those of
    the release, unknown for a snapshot between releases): the quantization method's spelling
    (0.9.3 changed it; a value spelled for other releases quantizes nothing), the keys its parser
    takes, and its refusals."""
    keys = Keys(recipe.document, f"{VERSION} default")
    release = numbers(version)
    if fields is None and not _prerelease(version):
        fields = known_arguments(release)
    four, eight = _quantized(keys, release)
    notes = recipe.notes
    method = keys.raw("quantization_method")
    if keys.has("quantization_bit") and method is not None and str(method).lower() in ("bnb", "bitsandbytes") \
            and str(method).lower() != bnb_spelling(release):
        notes += (f"quantization_method {method} is not {bnb_spelling(release)!r}, the spelling of LLaMA-Factory "
                  f"{version} ({origin}): configure_quantization matches no branch, so the base loads unquantized",)
    return replace(recipe, load_in_4bit=four, load_in_8bit=eight, notes=notes, release=f"LLaMA-Factory {version}",
                   refusals=refusals(keys, release, fields))


def _switches(keys: Keys, stage: Fact) -> dict[str, Fact]:
    """``optim`` (the HF Trainer's, fused by default) and ``enable_liger_kernel``, whose fused
    cross-entropy 0.9.5 keeps only for stages that need no logits (pt, sft:
    model/model_utils/liger_kernel.py:94-95)."""
    out = optim_switches(keys.get("optim", default="adamw_torch_fused", why="HF TrainingArguments optim default"))
    out |= dora_switch(keys, "use_dora")
    if truthy(keys.raw("enable_liger_kernel")) and keys.has("enable_liger_kernel") and stage.value in ("pt", "sft"):
        out["loss"] = keys.fact("enable_liger_kernel", "liger")
    return out


def _features(keys: Keys, kind: Fact) -> tuple[Feature, ...]:
    found = []
    if kind.value == "freeze":
        found.append(Feature(kind, "freeze tuning trains only the last layers: priced as a full fine-tune", "high"))
    if kind.value == "oft":
        found.append(Feature(kind, "OFT adapters are priced as a full fine-tune", "high"))
    for key, what, effect in (("use_galore", "GaLore keeps projected optimizer states", "high"),
                              ("use_apollo", "APOLLO keeps low-rank optimizer states", "high"),
                              ("use_badam", "BAdam updates one block of layers at a time", "high"),
                              ("use_unsloth", "Unsloth's kernels", "high"),
                              ("use_unsloth_gc", "checkpoints offloaded to the host", "high")):
        if truthy(keys.raw(key)) and keys.has(key):
            found.append(Feature(keys.fact(key, None), what, effect))
    method = keys.raw("quantization_method")
    if keys.has("quantization_bit") and method not in (None, "bnb", "bitsandbytes"):
        found.append(Feature(keys.fact("quantization_method", None), f"quantization_method {method} is priced as "
                             "a 16-bit base (0.9.5 quantizes on the fly only with bnb, hqq and eetq)", "high"))
    return tuple(found)


def read_llamafactory(document: Document) -> Recipe:
    keys = Keys(document, f"{VERSION} default")
    kind = keys.get("finetuning_type", default="lora", why=f"{VERSION} finetuning_type default")
    stage = _stage(keys)
    rank, where, dropout = _lora(keys, kind)
    four, eight = _quantized(keys)
    features = _features(keys, kind)
    return Recipe(
        document=document, framework="llamafactory", title="LLaMA-Factory", task=_task(keys), stage=stage,
        reference=(keys.fact("ref_model", True) if keys.raw("ref_model") else Fact("auto", None, "the stage's rule")),
        switches=_switches(keys, stage),
        adapter_dtype=(keys.fact("pure_bf16", "weights") if truthy(keys.raw("pure_bf16"))
                       else Fact("float32", None, f"{VERSION}: cast_trainable_params_to_fp32 (model/adapter.py:313-325)")),
        model=keys.get("model_name_or_path"),
        revision=keys.get("model_revision", default="main"),
        micro_batch=keys.get("per_device_train_batch_size", default=8, convert=positive,
                             why="HF TrainingArguments default (LLaMA-Factory keeps it)"),
        grad_accum=keys.get("gradient_accumulation_steps", default=1, convert=positive),
        seq_len=keys.get("cutoff_len", default=2048, convert=positive, why=f"{VERSION} cutoff_len default"),
        packing=keys.get("packing", "neat_packing", default=stage.value == "pt", convert=truthy,
                         why=f"{VERSION}: packing on for pt only"),
        grad_checkpointing=_checkpointing(keys),
        mixed_precision=_precision(keys),
        weights_dtype=_weights(keys, kind),
        optimizer=optimizer(keys, "adamw_torch_fused", "HF TrainingArguments optim default (torch >= 2.8)"),
        lora_rank=rank, lora_targets=where, lora_dropout=dropout,
        load_in_4bit=four, load_in_8bit=eight,
        attn=attention(keys, "flash_attn"),
        deepspeed=keys.get("deepspeed"),
        fsdp=hf_fsdp(keys),
        max_grad_norm=keys.get("max_grad_norm", default=1.0, why="HF TrainingArguments default"),
        keys=SPELLING, features=features, refusals=refusals(keys, RELEASE, known_arguments(RELEASE)),
        release=VERSION,
    )


def _checkpointing(keys: Keys) -> Fact:
    off = keys.get("disable_gradient_checkpointing", default=False, convert=truthy)
    return Fact(not off.value, off.location, f"{VERSION}: gradient checkpointing on by default")
