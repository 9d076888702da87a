"""HF ``TrainingArguments`` / TRL recipes → a :class:`Recipe` (docs/recipes.md, "TRL").

TRL's ``--config`` YAML (``TrlParser``), alignment-handbook's recipes and open-instruct's training
configs are one flat mapping of dataclass fields: ``ModelConfig`` (``model_name_or_path``,
``use_peft``, ``lora_r``, ``load_in_4bit``, ``dtype``), ``ScriptArguments`` (the dataset) and the
trainer's config (``SFTConfig``, ``DPOConfig``, ``GRPOConfig``... subclasses of
``TrainingArguments``: ``per_device_train_batch_size``, ``gradient_checkpointing``, ``bf16``,
``optim``, ``deepspeed``, ``fsdp``). Nothing in the file names the trainer, so the stage is read from
the fields only one trainer has (``num_generations``: GRPO). open-instruct spells a few facts its own
way (``use_lora``, ``lora_rank``, ``use_qlora``, ``max_seq_length``, ``use_flash_attn``) and runs
its own Accelerate loop, not the Trainer.

Defaults are transformers 5.24.0's ``TrainingArguments`` and TRL 1.16.0's configs: TRL turns
checkpointing and bf16 on and loads the weights in ``dtype: float32`` unless told otherwise.
Recipes written for older TRL say ``torch_dtype`` and ``max_seq_length``; those names are read as
their authors meant them (TRL 1.16 dropped them).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from vramlint.documents import Document
from vramlint.packaged import data_json
from vramlint.readers.deepspeed import Fact
from vramlint.readers.dialects import Dialect, dialect_of
from vramlint.readers.recipe import (OPTIMIZERS, TRAIN, FsdpFacts, Keys, Recipe, dora_switch, dtype_name, optim_switches,
                                     positive, targets, truthy)

VERSION = "transformers 5.24.0 / TRL 1.16.0"
MODEL_KEYS = ("model_name_or_path", "model_id", "model_name")
# TrainingArguments fields a TRL or HF recipe sets and no other recipe format has at the top level.
TRAINING_KEYS = {"per_device_train_batch_size", "learning_rate", "num_train_epochs", "output_dir",
                 "gradient_checkpointing", "activation_checkpointing", "max_steps", "lr_scheduler_type",
                 "warmup_ratio", "warmup_steps", "optim", "logging_steps", "save_strategy",
                 "per_device_eval_batch_size", "report_to", "gradient_accumulation_steps", "bf16"}
# Fields only one trainer's config has (TRL 1.16 config classes, and their older names), in the
# order they are tried: the stage a flat recipe is for.
STAGE_FIELDS = (
    ("grpo", ("num_generations", "max_completion_length", "use_vllm", "vllm_mode", "reward_funcs",
              "generation_batch_size", "steps_per_generation", "scale_rewards", "vllm_device")),
    ("kto", ("desirable_weight", "undesirable_weight")),
    ("rm", ("center_rewards_coefficient",)),
    ("simpo", ("simpo_gamma", "gamma_beta_ratio")),
    ("cpo", ("cpo_alpha",)),
    ("dpo", ("beta", "max_prompt_length", "precompute_ref_log_probs", "ref_model_init_kwargs", "rpo_alpha",
             "f_divergence_type", "dpo_beta", "dpo_loss_type", "ref_adapter_name", "sync_ref_model")),
    ("sft", ("packing", "dataset_text_field", "completion_only_loss", "assistant_only_loss", "max_seq_length")),
)
SPELLING = {"micro_batch": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps",
            "seq_len": "max_length", "grad_checkpointing": "gradient_checkpointing",
            "mixed_precision": "bf16", "weights_dtype": "dtype", "optimizer": "optim", "lora_rank": "lora_r",
            "lora_targets": "lora_target_modules", "attn": "attn_implementation", "load_in_4bit": "load_in_4bit"}
# max_length defaults of TRL 1.16's configs (SFTConfig 1024, DPO 1024, KTO 1024, Reward 1024; GRPO's
# completions 512 after a prompt that TRL 1.16 no longer caps: its old 512 cap is taken)
NON_TRAINING = {"evaluation": ("tasks", "eval_tasks", "benchmark"),
                "generation": ("num_samples", "temperature", "max_new_tokens", "max_tokens", "judge_model")}


# Fields that make a flat mapping a training job whatever else it holds: a batch per device, or a
# learning rate with a length of training (DeepSpeed JSON has neither at its top level).
TRAINING_ARGUMENTS = ("per_device_train_batch_size", "per_gpu_train_batch_size")


def looks_like_trl(data: Any) -> bool:
    """A flat mapping with a model and at least two TrainingArguments fields, or training arguments
    alone (a file whose model the launch command names is still a training job)."""
    if not isinstance(data, dict):
        return False
    if any(isinstance(data.get(k), str) for k in MODEL_KEYS) and len(TRAINING_KEYS & data.keys()) >= 2:
        return True
    return any(k in data for k in TRAINING_ARGUMENTS) or (
        "learning_rate" in data and any(k in data for k in ("num_train_epochs", "max_steps")))


# TRL's trainers as its command line names them (``trl dpo``: TRL 1.16 ``cli/commands``) -> the stage.
TRAINERS = {"sft": "sft", "dpo": "dpo", "grpo": "grpo", "kto": "kto", "reward": "rm", "rloo": "rloo",
            "distillation": "kd"}


def _stage(keys: Keys, trainer: Fact | None) -> Fact:
    """The trainer the launch names (``trl dpo``), else the one whose own fields the file has."""
    if trainer is not None and trainer.value in TRAINERS:
        return Fact(TRAINERS[trainer.value], trainer.location)
    for stage, fields in STAGE_FIELDS:
        for name in fields:
            if keys.has(name):
                return keys.fact(name, stage)
    return Fact("sft", None, f"{VERSION}: no field of another trainer's config")


def _task(keys: Keys) -> str:
    """A recipe is a training job unless it has no batch of its own and another job's keys."""
    if keys.has("per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate"):
        return TRAIN
    for task, fields in NON_TRAINING.items():
        if keys.has(*fields):
            return task
    return TRAIN


def _seq_len(keys: Keys, stage: str) -> Fact:
    if stage == "grpo":
        prompt = keys.get("max_prompt_length", default=512, why="TRL 0.x GRPO prompt cap (1.16 keeps none)")
        completion = keys.get("max_completion_length", default=512, why=f"{VERSION} max_completion_length default")
        for part in (prompt, completion):
            if isinstance(part.value, bool) or not isinstance(part.value, int):
                return part            # not a count: rules.recipe.check_values says so
        where = completion if completion.from_file else prompt
        return Fact(prompt.value + completion.value, where.location, "" if where.from_file else
                    "TRL GRPO: prompt cap 512 + max_completion_length 512")
    return keys.get("max_length", "max_seq_length", "model_max_length", "max_seq_len", default=1024, convert=positive,
                    why=f"{VERSION} max_length default")


def _reference(keys: Keys, stage: str) -> Fact:
    """Whether a reference model is loaded beside the policy (before PEFT's free one): TRL 1.16
    skips it for precomputed log-probs (dpo_config.py:227) and for GRPO's default beta 0.0."""
    pre = keys.get("precompute_ref_log_probs", default=False, convert=truthy)
    if pre.value:
        return Fact(False, pre.location)
    if stage == "grpo":
        beta = keys.get("beta", default=0.0, why=f"{VERSION} GRPOConfig beta default")
        if not isinstance(beta.value, bool) and isinstance(beta.value, (int, float)) and beta.value == 0:
            return Fact(False, beta.location, "GRPO beta 0.0: no reference model (TRL 1.16 default)")
        return Fact("auto", beta.location, beta.default)
    return Fact("auto", None, "the stage's rule")


def _colocated(keys: Keys, stage: str) -> Fact:
    """GRPO with ``use_vllm`` in ``vllm_mode: colocate`` (TRL 1.16's default mode): vLLM takes
    ``vllm_gpu_memory_utilization`` (0.3) of every GPU for the run, unless sleep mode frees it."""
    use = keys.get("use_vllm", default=False, convert=truthy)
    mode = keys.get("vllm_mode", default="colocate", why=f"{VERSION} vllm_mode default")
    if stage != "grpo" or not use.value or str(mode.value) != "colocate":
        return Fact(0.0, use.location, use.default)
    if keys.has("vllm_device") and not keys.has("vllm_mode"):      # TRL before vllm_mode: a GPU of its own
        return keys.fact("vllm_device", 0.0)
    if truthy(keys.raw("vllm_enable_sleep_mode")):
        return keys.fact("vllm_enable_sleep_mode", 0.0)
    share = keys.get("vllm_gpu_memory_utilization", default=0.3, why=f"{VERSION} vllm_gpu_memory_utilization default")
    return Fact(share.value, share.location or use.location, share.default)


# TRL's trainers whose model runs with its fused LM head from TRL 1.15.0 on (sft_trainer.py:1144, 1611
# in 1.16.0; no ``fused_lm_head`` in 1.14.2 or earlier): dpo, kto, grpo, rloo call it the same way
FUSED_HEAD_STAGES = ("sft", "dpo", "kto", "grpo", "rloo")


def _switches(keys: Keys, stage: Fact, own_loop: bool) -> dict[str, Fact]:
    """The loss head and the optimizer's flavour: TRL's reward trainer has a scalar head, a Trainer
    recipe with ``use_liger_kernel`` Liger's fused cross-entropy (TRL 1.16 refuses it in its own
    trainers); otherwise the full logits, as every TRL before 1.15 computes them (``_loss_note``)."""
    if own_loop:            # a project's own training loop (open-instruct): no Trainer optim names
        return {}
    out = optim_switches(keys.get("optim", default="adamw_torch_fused", why=f"{VERSION} optim default (torch >= 2.8)"))
    out |= dora_switch(keys, "use_dora")
    liger = keys.get("use_liger_kernel", default=False, convert=truthy)
    if stage.value == "rm":
        out["loss"] = Fact("none", stage.location, "RewardTrainer: a scalar head")
    elif liger.value and not (stage.from_file and stage.value in FUSED_HEAD_STAGES):
        out["loss"] = Fact("liger", liger.location)
    return out


def _vllm_setting(keys: Keys) -> str | None:
    """A vllm_* setting in a recipe without use_vllm: the script turns vLLM on itself."""
    return next((str(k) for k in keys.data if str(k).startswith("vllm_")), None)


def _generation_note(keys: Keys, stage: Fact) -> tuple[str, ...]:
    said = _vllm_setting(keys)
    if stage.value != "grpo" or keys.has("use_vllm") or said is None:
        return ()
    return (f"use_vllm is not set, but {said} is: vLLM is assumed to generate (in server mode, on GPUs of its "
            "own), so model.generate's KV cache is not counted",)


def _loss_note(stage: Fact) -> tuple[str, ...]:
    """A TRL trainer from 1.15 on never builds the full logits (its fused LM head): the estimate
    keeps them, as earlier releases do, and says so."""
    if stage.from_file and stage.value in FUSED_HEAD_STAGES:
        return ("TRL 1.15 and later compute the loss with a fused LM head, without the full logits: estimated with "
                "them, as earlier TRL does (--loss trl for 1.15+)",)
    return ()


def _generation_rows(keys: Keys, stage: str) -> Fact:
    """GRPO without vLLM generates with ``model.generate`` between optimizer steps:
    per_device_train_batch_size x steps_per_generation rows at once (steps_per_generation defaults
    to gradient_accumulation_steps; grpo_config.py:1086-1141)."""
    if stage != "grpo" or truthy(keys.raw("use_vllm")) or _vllm_setting(keys):
        return Fact(0)              # vLLM generates
    batch = keys.get("per_device_train_batch_size", default=8, convert=positive)
    steps = keys.get("steps_per_generation", "gradient_accumulation_steps", default=1, convert=positive)
    if not all(isinstance(f.value, int) and not isinstance(f.value, bool) for f in (batch, steps)):
        return Fact(0)
    where = steps if steps.from_file else batch
    return Fact(batch.value * steps.value, where.location, "per_device_train_batch_size x steps_per_generation")


def _lora(keys: Keys) -> tuple[Fact, Fact, Fact]:
    on = keys.get("use_peft", default=False, convert=truthy)
    if not on.value:
        return Fact(0, on.location, on.default), Fact(("all-linear",)), Fact(0.0)
    rank = keys.get("lora_r", default=16, convert=positive, why="TRL ModelConfig lora_r default")
    where = keys.get("lora_target_modules", default=("peft-default",), convert=targets,
                     why="TRL ModelConfig: PEFT's targets for the model type")
    dropout = keys.get("lora_dropout", default=0.05, why="TRL ModelConfig default")
    return rank, where, dropout


def mixed_precision(keys: Keys, default_bf16: bool, why: str) -> Fact:
    """``bf16`` / ``fp16`` as the Trainer reads them: autocast in that dtype, or none."""
    bf16, fp16 = keys.get("bf16", convert=truthy), keys.get("fp16", convert=truthy)
    if bf16.value:
        return Fact("bf16", bf16.location)
    if fp16.value:
        return Fact("fp16", fp16.location)
    if default_bf16 and not bf16.from_file:
        return Fact("bf16", None, why)
    stated = bf16 if bf16.from_file else fp16
    return Fact("no", stated.location, stated.default or f"{why}: bf16 and fp16 off")


def optimizer(keys: Keys, default: str, why: str, *names: str) -> Fact:
    """The optimizer a recipe names, as the state vramlint prices (``OPTIMIZERS``); one it does not
    price stays as written (``rules.recipe`` says how it is estimated)."""
    fact = keys.get(*(names or ("optim",)), default=default, why=why)
    name = OPTIMIZERS.get(str(fact.value).lower(), str(fact.value))
    return Fact(name, fact.location, fact.default)


def attention(keys: Keys, *names: str) -> Fact:
    fact = keys.get(*(names or ("attn_implementation",)), default="auto")
    value = str(fact.value).lower()
    if fact.value is True or "flash" in value or value in ("fa2", "fa3"):
        value = "flash_attention_2"
    elif value in ("disabled", "eager"):
        value = "eager"
    elif value != "sdpa":
        value = "auto"
    return Fact(value, fact.location, fact.default)


FSDP_WORDS = {"full_shard": "FULL_SHARD", "shard_grad_op": "SHARD_GRAD_OP", "no_shard": "NO_SHARD",
              "hybrid_shard": "HYBRID_SHARD", "hybrid_shard_zero2": "HYBRID_SHARD_ZERO2"}


def hf_fsdp(keys: Keys, default_version: int = 2, why: str = f"{VERSION}: FSDP2") -> FsdpFacts | None:
    """``fsdp`` (words or a list) and ``fsdp_config`` as ``TrainingArguments._process_fsdp_args``
    reads them (transformers 5.24.0 training_args.py:2775-2938): ``fsdp_`` prefixes stripped,
    ``version`` 2 by default, FSDP2's ``reshard_after_forward`` (True: FULL_SHARD), ``offload`` /
    ``cpu_offload``, FSDP's own ``activation_checkpointing``."""
    words = keys.get("fsdp")
    config = keys.raw("fsdp_config")
    if not words.value and not isinstance(config, dict):
        return None
    said = words.value.split() if isinstance(words.value, str) else list(words.value or [])
    said = [str(w).lower() for w in said]
    prefix = "fsdp_config."

    def setting(name: str, default: Any, convert=None) -> Fact:
        return keys.get(prefix + name, prefix + "fsdp_" + name, default=default, convert=convert, why=why)
    version = setting("version", default_version, positive)
    strategy_word = next((FSDP_WORDS[w] for w in said if w in FSDP_WORDS), None)
    if version.value == 2:
        reshard = setting("reshard_after_forward", strategy_word != "SHARD_GRAD_OP", truthy)
        strategy = Fact("FULL_SHARD" if reshard.value else "SHARD_GRAD_OP",
                        reshard.location or (words.location if strategy_word else None), reshard.default)
    else:
        strategy = Fact(strategy_word or "FULL_SHARD", words.location if strategy_word else None, why)
    offload = setting("cpu_offload", "offload" in said, truthy)
    if not offload.from_file and "offload" in said:
        offload = Fact(True, words.location)
    return FsdpFacts(strategy=strategy, version=version, offload=offload,
                     checkpointing=setting("activation_checkpointing", False, truthy))


def read_trl(document: Document, trainer: Fact | None = None) -> Recipe:
    """The file as TRL reads it, then what a project dialect (``readers.dialects``) spells its own
    way applied over it; the keys no dataclass knows named in a note. ``trainer``: the trainer a
    launch names (``trl dpo --config recipe.yaml``), which the file's fields do not state."""
    keys = Keys(document, f"{VERSION} default")
    dialect = dialect_of(keys)
    stage = _stage(keys, trainer)
    rank, lora_targets, dropout = _lora(keys)
    four = keys.get("load_in_4bit", default=False, convert=truthy)
    if four.value and not rank.value:
        rank = Fact(16, four.location)      # QLoRA trains adapters: PEFT's r with TRL's default
    recipe = Recipe(
        document=document, framework="trl", title=dialect.title if dialect else "TRL", task=_task(keys), stage=stage,
        model=keys.get(*MODEL_KEYS),
        revision=keys.get("model_revision", "revision", default="main"),
        micro_batch=keys.get("per_device_train_batch_size", default=8, convert=positive),
        grad_accum=keys.get("gradient_accumulation_steps", default=1, convert=positive),
        seq_len=_seq_len(keys, stage.value),
        packing=keys.get("packing", default=False, convert=truthy),
        grad_checkpointing=keys.get("activation_checkpointing", "gradient_checkpointing", default=True,
                                    convert=truthy, why=f"{VERSION}: TRL's configs turn it on"),
        mixed_precision=mixed_precision(keys, True, f"{VERSION}: TRL turns bf16 on"),
        weights_dtype=keys.get("dtype", "torch_dtype", "model_init_kwargs.dtype", "model_init_kwargs.torch_dtype",
                               default="float32", convert=dtype_name, why=f"{VERSION}: ModelConfig dtype default"),
        optimizer=optimizer(keys, "adamw_torch_fused", f"{VERSION} optim default"),
        lora_rank=rank, lora_targets=lora_targets, lora_dropout=dropout,
        load_in_4bit=four,
        load_in_8bit=keys.get("load_in_8bit", default=False, convert=truthy),
        sync_each_batch=keys.get("accelerator_config.sync_each_batch", default=False, convert=truthy,
                                 why="HF Trainer: no_sync between micro-batches (transformers 5.24 trainer.py:1904-1915)"),
        attn=attention(keys, "attn_implementation", "use_flash_attn", "use_flash_attention_2"),
        deepspeed=keys.get("deepspeed"),
        fsdp=hf_fsdp(keys),
        max_grad_norm=keys.get("max_grad_norm", default=1.0, why="TrainingArguments max_grad_norm default"),
        hf_trainer=dialect.hf_trainer if dialect else True,
        reference=_reference(keys, stage.value), colocated_share=_colocated(keys, stage.value),
        generation_rows=_generation_rows(keys, stage.value),
        switches=_switches(keys, stage, dialect is not None and not dialect.hf_trainer),
        notes=(() if dialect else _loss_note(stage)) + _generation_note(keys, stage) + _unknown_note(keys, dialect),
        keys=SPELLING,
    )
    return replace(recipe, **dialect.adapt(keys, dialect)) if dialect else recipe


@lru_cache(maxsize=1)
def _known() -> frozenset[str]:
    """Every argument name of transformers' ``TrainingArguments`` (and the Seq2Seq ones) and of
    TRL's configs, ``ModelConfig`` and ``ScriptArguments`` (``data/hf_arguments.json``, built by
    dev/hf_argument_fields.py from transformers 5.24.0 and TRL 1.16.0), and the older names that
    recipes still write and this reader reads."""
    doc = data_json("hf_arguments.json")
    names = set(doc["TrainingArguments"]) | set(doc["Seq2SeqTrainingArguments"])
    for fields in doc["trl_fields"].values():
        names |= set(fields)
    return frozenset(names | set(MODEL_KEYS) | {"torch_dtype", "max_seq_length", "model_max_length", "max_seq_len",
                                                "use_flash_attention_2", "evaluation_strategy", "vllm_device",
                                                "dataset_text_field", "revision", "deepspeed", "fsdp", "fsdp_config"})


def _unknown_note(keys: Keys, dialect: Dialect | None) -> tuple[str, ...]:
    """The top-level keys no dataclass of transformers, TRL or the project's dialect has: not read."""
    own = set(dialect.own_keys) if dialect else set()
    unknown = sorted(str(k) for k in keys.data if str(k) not in _known() and str(k) not in own)
    if not unknown:
        return ()
    whose = f"{VERSION}{' or ' + dialect.title if dialect else ''}"
    return (f"keys no argument dataclass of {whose} has, not read: {', '.join(unknown)}",)
