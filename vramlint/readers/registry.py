"""The formats vramlint reads, in the order content detection tries them.

A file is what its content says, never its name (open-instruct ships DeepSpeed JSON as ``*.conf``;
axolotl recipes sit beside DeepSpeed files as ``*.yml``). Recipes come first: they share top-level
names with DeepSpeed (``bf16``, ``optimizer``, ``gradient_accumulation_steps``) but write them as
plain values where DeepSpeed writes sections, and each recipe format has keys of its own. The
most specific recipe format is tried first (torchtune's ``_component_`` builders, LLaMA-Factory's
``finetuning_type`` / ``cutoff_len``, axolotl's ``base_model`` with its batch keys), then the flat
``TrainingArguments`` / TRL mapping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vramlint.readers import axolotl, deepspeed, glm_finetune, llamafactory, openrlhf, openrlhf_ppo, torchtune, trl


def _lazy(module: str, name: str) -> Callable:
    """A reader's function, imported when first called: detection stops at the first format that
    matches, so a DeepSpeed file never imports the readers of the formats tried after it."""
    def call(*args):
        from importlib import import_module
        return getattr(import_module(module), name)(*args)
    return call


@dataclass(frozen=True)
class Format:
    name: str                           # what ``--kind`` calls it
    family: str                         # "recipe", "launcher" (DeepSpeed, Accelerate), "serving" or "cloud"
    looks_like: Callable[[Any], bool]
    job: str                            # the module of ``vramlint.jobs`` that turns its documents into jobs
    read: Callable | None = None        # recipes: Document -> Recipe


FORMATS: tuple[Format, ...] = (
    Format("torchtune", "recipe", torchtune.looks_like_torchtune, "recipe", torchtune.read_torchtune),
    Format("llamafactory", "recipe", llamafactory.looks_like_llamafactory, "recipe", llamafactory.read_llamafactory),
    Format("axolotl", "recipe", axolotl.looks_like_axolotl, "recipe", axolotl.read_axolotl),
    Format("glm", "recipe", glm_finetune.looks_like_glm_finetune, "recipe", glm_finetune.read_glm_finetune),
    Format("openrlhf", "recipe", openrlhf.looks_like_openrlhf, "recipe", openrlhf_ppo.read_openrlhf_job),
    Format("verl", "recipe", _lazy("vramlint.readers.verl", "looks_like_verl"), "recipe",
           _lazy("vramlint.readers.verl", "read_verl")),
    Format("torchtitan", "recipe", _lazy("vramlint.readers.torchtitan", "looks_like_torchtitan"), "recipe",
           _lazy("vramlint.readers.torchtitan", "read_torchtitan")),
    Format("megatron-bridge", "recipe", _lazy("vramlint.readers.megatron_bridge", "looks_like_megatron_bridge"),
           "recipe", _lazy("vramlint.readers.megatron_bridge", "read_megatron_bridge")),
    Format("nemo", "recipe", _lazy("vramlint.readers.nemo", "looks_like_nemo"), "recipe",
           _lazy("vramlint.readers.nemo", "read_nemo")),
    Format("megatron", "recipe", _lazy("vramlint.readers.megatron", "looks_like_megatron"), "recipe",
           _lazy("vramlint.readers.megatron", "read_megatron")),
    Format("litgpt", "recipe", _lazy("vramlint.readers.litgpt", "looks_like_litgpt"), "recipe",
           _lazy("vramlint.readers.litgpt", "read_litgpt")),
    Format("swift", "recipe", _lazy("vramlint.readers.swift", "looks_like_swift"), "recipe",
           _lazy("vramlint.readers.swift", "read_swift")),
    Format("trl", "recipe", trl.looks_like_trl, "recipe", trl.read_trl),
    Format("deepspeed", "launcher", deepspeed.looks_like_deepspeed, "deepspeed"),
    Format("accelerate", "launcher", _lazy("vramlint.readers.accelerate", "looks_like_accelerate"), "accelerate"),
    Format("sglang", "serving", _lazy("vramlint.readers.sglang", "looks_like_sglang"), "sglang"),
    Format("vllm", "serving", _lazy("vramlint.readers.vllm", "looks_like_vllm"), "vllm"),
    Format("skypilot", "cloud", _lazy("vramlint.readers.cloud", "looks_like_skypilot"), "cloud"),
    Format("dstack", "cloud", _lazy("vramlint.readers.cloud", "looks_like_dstack"), "cloud"),
    Format("kubernetes", "cloud", _lazy("vramlint.readers.kubernetes", "looks_like_kubernetes"), "cloud"),
    Format("github-actions", "cloud", _lazy("vramlint.readers.github_actions", "looks_like_github_actions"), "cloud"),
)
BY_NAME = {fmt.name: fmt for fmt in FORMATS}
RECIPES = {fmt.name: fmt for fmt in FORMATS if fmt.family == "recipe"}
CLOUD = {fmt.name: fmt for fmt in FORMATS if fmt.family == "cloud"}       # task specs: GPUs and commands


def detect(data: Any) -> str | None:
    """The first format whose keys the content has, or None (the file is skipped with a note)."""
    return next((fmt.name for fmt in FORMATS if fmt.looks_like(data)), None)


# What a file of none of the formats is, by what it holds (first match): said when it is skipped.
# A model's config.json is recognised by its keys, not its name (``config.json`` is walked).
OTHER_FILES = (
    (lambda d: isinstance(d.get("model_type"), str) and ("architectures" in d or "hidden_size" in d
                                                         or "text_config" in d or "n_embd" in d),
     lambda d: f"a model's config.json (model_type {d['model_type']}), not a job: skipped"),
    (lambda d: "tokenizer_class" in d or "added_tokens_decoder" in d, lambda d: "a tokenizer config, not a job: skipped"),
    (lambda d: "peft_type" in d, lambda d: f"a PEFT adapter_config.json ({d['peft_type']}), not a job: skipped"),
)


def _bridge_override(data: dict) -> bool:
    """A Megatron-Bridge override file: ConfigContainer's sections without its ``_target_``."""
    from vramlint.readers.megatron_bridge import looks_like_megatron_bridge
    return isinstance(data.get("model"), dict) and not looks_like_megatron_bridge(data) and \
        any(isinstance(data.get(k), dict) for k in ("train", "optimizer", "ddp")) and \
        any(k in data["model"] for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "num_layers",
                                         "seq_length", "context_parallel_size"))


def _nemo_composition(data: dict) -> bool:
    """A Hydra config composed over NeMo's ``megatron_gpt_config`` (its ``defaults`` list names it)."""
    defaults = data.get("defaults")
    return isinstance(defaults, list) and any("megatron_gpt_config" in str(item) for item in defaults)


# Files that state a training job in a format vramlint does not read yet (first match): a job, not
# estimated (VL011), never skipped as nothing. A Megatron-Bridge override holds part of a job whose
# rest is a Python recipe; a Hydra composition over NeMo's config holds part of a job whose rest is
# the files its defaults list names.
UNREAD_FILES = (
    (_nemo_composition, "a Hydra config composed over NeMo's megatron_gpt_config (its defaults list): the job is "
                        "the config Hydra composes from the files it names; that composed config (the run's "
                        "hparams.yaml, or the files merged into one) is read"),
    (_bridge_override, "a Megatron-Bridge override file (ConfigContainer's sections without its _target_): the rest "
                       "of the job is the Python recipe it is merged over; the run's full config (run_config.yaml, "
                       "ConfigContainer.to_yaml) is read"),
)


def unread_because(data: Any) -> str:
    """Why a file that states a job is not estimated, or "" where it states none vramlint knows of."""
    return next((said for test, said in UNREAD_FILES if isinstance(data, dict) and test(data)), "")


def skipped_because(data: Any) -> str:
    """Why a file of none of the formats is skipped, in one phrase."""
    from vramlint.documents import YamlDocuments
    if isinstance(data, YamlDocuments):
        return (f"{len(data)} YAML documents (Kubernetes manifests or the like), none a config vramlint reads: "
                "skipped")
    if isinstance(data, dict):
        for test, said in OTHER_FILES:
            if test(data):
                return said(data)
    return "not a training recipe, DeepSpeed, Accelerate or vLLM config (none of their keys): skipped"
