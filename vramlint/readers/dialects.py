"""Projects that read a flat ``TrainingArguments`` file with ``HfArgumentParser`` and a dataclass
of their own beside it: the same file format as a TRL recipe, with a few keys that switch LoRA,
QLoRA or a full fine-tune and cap the sequence their own way.

Each :class:`Dialect` names the keys only that project has (any one of them identifies it), the
keys its dataclasses add (so they are read, not reported as unknown), and what its training script
does with them, read from the project's own source at a named commit. ``adapt`` returns the
:class:`Recipe` fields the project sets differently from TRL; the HF reader (``readers.trl``) applies
them over its own reading of the file, so every fact keeps its origin.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import Feature, Keys, positive, targets, truthy

EVERY_PROJECTION = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Dialect:
    name: str
    title: str                              # as its users name it
    marks: tuple[str, ...]                  # keys only this project's dataclasses have
    own_keys: tuple[str, ...]               # every key its dataclasses add to TrainingArguments
    source: str                             # the file and commit its defaults are read from
    adapt: Callable[[Keys, "Dialect"], Mapping[str, Any]]
    hf_trainer: bool = True                 # run by the HF Trainer (which fills a DeepSpeed file's "auto")

    def default(self, what: str) -> str:
        return f"{self.title} {what} ({self.source})"


def _sixteen_bit(keys: Keys, dialect: Dialect) -> Fact:
    """``torch_dtype = torch.float16 if training_args.fp16 else torch.bfloat16``: the weights load
    in the autocast dtype, bf16 unless ``fp16`` is on."""
    fp16 = keys.get("fp16", default=False, convert=truthy)
    if fp16.value:
        return Fact("float16", fp16.location)
    return Fact("bfloat16", None, dialect.default("loads bfloat16 unless fp16"))


def _firefly(keys: Keys, dialect: Dialect) -> dict[str, Fact]:
    """``train_mode`` full | lora | qlora (qlora by default): LoRA of ``lora_rank`` on every linear
    but lm_head (``find_all_linear_names``); qlora loads the base in NF4 with double quantization;
    ``max_seq_length`` caps each sample; ``task_type`` pretrain | sft | dpo."""
    mode = keys.get("train_mode", default="qlora", why=dialect.default("train_mode default"))
    kind = str(mode.value).lower()
    out: dict[str, Fact] = {"weights_dtype": _sixteen_bit(keys, dialect),
                            "load_in_4bit": Fact(kind == "qlora", mode.location, mode.default),
                            "adapter_dtype": Fact("float32", None, "PEFT autocast_adapter_dtype default")}
    if kind in ("lora", "qlora"):
        out["lora_rank"] = keys.get("lora_rank", default=64, convert=positive, why=dialect.default("lora_rank default"))
        out["lora_targets"] = Fact(("all-linear",), mode.location, "find_all_linear_names: every linear but lm_head")
        out["lora_dropout"] = keys.get("lora_dropout", default=0.05, why=dialect.default("lora_dropout default"))
    else:
        out["lora_rank"] = Fact(0, mode.location, mode.default)
    out["seq_len"] = keys.get("max_seq_length", default=None, convert=positive, why=dialect.default("max_seq_length"))
    task = keys.get("task_type", default="sft", why=dialect.default("task_type default"))
    stage = {"pretrain": "pt", "sft": "sft", "dpo": "dpo"}.get(str(task.value).lower(), str(task.value).lower())
    out["stage"] = Fact(stage, task.location, task.default)
    if keys.has("use_unsloth") and truthy(keys.raw("use_unsloth")):      # train.py:225-227 FastLanguageModel
        out["features"] = (Feature(keys.fact("use_unsloth", True), "Unsloth's kernels (FastLanguageModel)", "high"),)
    return out


def _open_instruct(keys: Keys, dialect: Dialect) -> dict[str, Fact]:
    """``use_lora`` / ``use_qlora`` (4-bit NF4 base), ``lora_rank`` 64 on every projection of a
    llama-like model; bf16 weights unless the file names a dtype; gradient checkpointing off unless
    asked; its own Accelerate loop under ``--mixed_precision bf16``, not the Trainer."""
    four = keys.get("use_qlora", "load_in_4bit", default=False, convert=truthy, why=dialect.default("use_qlora default"))
    on = keys.get("use_peft", "use_lora", "use_qlora", default=False, convert=truthy,
                  why=dialect.default("use_lora default"))
    out: dict[str, Fact] = {"load_in_4bit": four}
    if on.value or four.value:
        out["lora_rank"] = keys.get("lora_r", "lora_rank", default=64, convert=positive,
                                    why="open-instruct lora_rank default")
        out["lora_targets"] = Fact(EVERY_PROJECTION, None, "open-instruct finetune.py target_modules")
        out["lora_dropout"] = keys.get("lora_dropout", default=0.1, why="open-instruct lora_dropout default")
    else:
        out["lora_rank"] = Fact(0, on.location, on.default)
    if not keys.has("dtype", "torch_dtype", "model_init_kwargs.dtype", "model_init_kwargs.torch_dtype"):
        out["weights_dtype"] = Fact("bfloat16", None, "open-instruct finetune.py loads bfloat16")
    out["mixed_precision"] = Fact("bf16", None, "open-instruct runs under accelerate launch --mixed_precision bf16")
    out["grad_checkpointing"] = keys.get("activation_checkpointing", "gradient_checkpointing", default=False,
                                         convert=truthy, why="open-instruct default")
    if not keys.has("use_flash_attn"):
        out["attn"] = Fact("flash_attention_2", None, "open-instruct use_flash_attn default")
    return out


def _fastchat(keys: Keys, dialect: Dialect) -> dict[str, Fact]:
    """FastChat's and Qwen's ``finetune.py`` family: ``model_max_length`` on TrainingArguments,
    ``LoraArguments`` (``lora_r``, ``lora_target_modules``, ``q_lora`` for a 4-bit NF4 base);
    LoRA with ``use_lora`` (Qwen) or whenever ``lora_r`` / ``q_lora`` is given (train_lora.py)."""
    four = keys.get("q_lora", default=False, convert=truthy, why=dialect.default("q_lora default"))
    on = keys.get("use_lora", "q_lora", default=keys.has("lora_r", "lora_target_modules"), convert=truthy,
                  why=dialect.default("LoRA when LoraArguments are given"))
    out: dict[str, Fact] = {"load_in_4bit": four,
                            "seq_len": keys.get("model_max_length", default=512, convert=positive,
                                                why=dialect.default("model_max_length default"))}
    if on.value or four.value:
        out["lora_rank"] = keys.get("lora_r", default=8, convert=positive, why=dialect.default("lora_r default"))
        out["lora_targets"] = keys.get("lora_target_modules", default=("q_proj", "v_proj"), convert=targets,
                                       why=dialect.default("lora_target_modules default"))
        out["lora_dropout"] = keys.get("lora_dropout", default=0.05, why=dialect.default("lora_dropout default"))
    else:
        out["lora_rank"] = Fact(0, on.location, on.default)
    return out


DIALECTS: tuple[Dialect, ...] = (
    Dialect("firefly", "Firefly", marks=("train_mode", "template_name", "train_file", "task_type"),
            own_keys=("max_seq_length", "train_file", "model_name_or_path", "template_name", "eval_file",
                      "max_prompt_length", "beta", "tokenize_num_workers", "task_type", "train_mode", "lora_rank",
                      "lora_alpha", "lora_dropout", "use_unsloth"),
            source="yangjianxin1/Firefly component/argument.py, train.py", adapt=_firefly),
    Dialect("open-instruct", "open-instruct",
            marks=("use_lora", "use_qlora", "use_flash_attn", "max_train_steps", "with_tracking", "checkpointing_steps",
                   "use_slow_tokenizer", "dataset_mix_dir", "dataset_mixer_list", "reduce_loss", "dpo_loss_type"),
            own_keys=("use_lora", "use_qlora", "use_flash_attn", "max_train_steps", "with_tracking",
                      "checkpointing_steps", "use_slow_tokenizer", "dataset_mix_dir", "dataset_mixer_list",
                      "reduce_loss", "dpo_loss_type", "lora_rank", "lora_alpha", "lora_dropout", "max_seq_length",
                      "tokenizer_name", "dataset_name", "dataset_mixer", "gradient_checkpointing", "timeout",
                      "clip_grad_norm", "wandb_entity", "push_to_hub", "hf_entity", "hf_repo_id", "try_launch_beaker_eval_jobs",
                      "exp_name", "chat_template_name", "add_bos", "keep_last_n_checkpoints", "fused_optimizer",
                      "load_balancing_loss", "load_balancing_weight", "use_liger_kernel", "dpo_beta",
                      "dataset_local_cache_dir", "dataset_transform_fn", "dataset_target_columns",
                      "dataset_skip_cache", "concatenated_forward", "packing", "model_revision"),
            source="allenai/open-instruct finetune.py FlatArguments", adapt=_open_instruct, hf_trainer=False),
    Dialect("fastchat", "FastChat / Qwen finetune.py", marks=("q_lora", "model_max_length", "lazy_preprocess"),
            own_keys=("model_max_length", "q_lora", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
                      "lora_weight_path", "lora_bias", "use_lora", "data_path", "eval_data_path", "lazy_preprocess",
                      "cache_dir", "trust_remote_code", "padding_side", "flash_attn"),
            source="lm-sys/FastChat fastchat/train/train_lora.py; QwenLM/Qwen finetune.py", adapt=_fastchat),
)


def dialect_of(keys: Keys) -> Dialect | None:
    """The project whose keys the file has (the first match), or None: TRL's own keys."""
    return next((d for d in DIALECTS if keys.has(*d.marks)), None)


# Keys several projects add beside TrainingArguments that switch LoRA / QLoRA / a full fine-tune:
# a file with one of them is a project dialect, never LLaMA-Factory or a plain TRL recipe.
PROJECT_KEYS = frozenset(k for d in DIALECTS for k in d.marks) | {"use_qlora", "train_mode"}
