"""Training recipes → the job's facts, whichever framework wrote the recipe.

A recipe (HF ``TrainingArguments`` / TRL, axolotl, LLaMA-Factory, torchtune) states what the
DeepSpeed and Accelerate files leave to the training script: the model, the micro-batch, the
sequence length, LoRA or QLoRA, checkpointing, the optimizer, the precision, and which DeepSpeed or
FSDP setup runs it. Each framework's module reads its own keys into one :class:`Recipe`; a value
the recipe does not set is the framework's default, read from its source at a named version
(``Fact.default`` says which), so every fact says where it came from.

Readers never compute memory and never resolve models or files: ``recipe_plan`` does that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact

TRAIN = "train"
# What a recipe's ``stage`` may be, in vramlint's words (each framework maps its own onto these).
STAGES = ("pt", "sft", "rm", "dpo", "orpo", "kto", "simpo", "cpo", "ipo", "grpo", "rloo", "ppo", "kd", "qat")
# Stages whose forward holds chosen and rejected rows of each example together (TRL 1.16
# concatenated_forward / RewardTrainer, LLaMA-Factory 0.9.5 dpo/trainer.py:237-240, torchtune's DPO).
PAIRED_STAGES = ("rm", "dpo", "orpo", "simpo", "cpo", "ipo")
# Stages that keep a reference model unless PEFT gives it (the adapter disabled) or the reader
# says otherwise (precompute_ref_log_probs; GRPO's beta 0.0, its TRL 1.16 default).
REFERENCE_STAGES = ("dpo", "ipo", "kto", "grpo", "rloo")
# Online RL stages: the reference scores the completions as they are generated, not beside the policy's forward
GENERATING_STAGES = ("grpo", "rloo")
MODELLED_STAGES = ("pt", "sft", "kto", "grpo", "rloo") + PAIRED_STAGES   # priced as they run (memory/stages.py)
# (``kd`` too where the recipe states its teacher's architecture: rules.recipe says when it does not)


@dataclass(frozen=True)
class Feature:
    """Something a recipe turns on that the memory model does not price yet, and which way the
    estimate is off without it: "low" (the job needs more) or "high" (it needs less)."""

    fact: Fact
    what: str
    effect: str = "low"


@dataclass(frozen=True)
class FsdpFacts:
    """FSDP as a recipe turns it on (HF ``fsdp``/``fsdp_config``, axolotl, torchtune's
    distributed recipes): Accelerate's FSDP plugin facts, each located where the recipe says it."""

    strategy: Fact                 # FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD(_ZERO2)
    version: Fact                  # 1 (flat parameters) or 2 (fully_shard)
    offload: Fact                  # parameters, gradients and the step on the host
    checkpointing: Fact            # FSDP's own activation checkpointing
    upcast: bool = True            # Accelerate's FSDP setup keeps fp32 shards under mixed precision


@dataclass(frozen=True)
class Engines:
    """A job's generation engines on GPUs of their own (OpenRLHF's ``--vllm.num_engines`` without
    colocate_all): the ``vllm serve`` config each engine starts, its keys placed at the flags that
    state them, checked as that config is (jobs/vllm.py), at the engine release the framework pins
    where the repository pins none."""

    role: str                      # how the group is named in what is reported
    document: Document             # the engine's vLLM arguments, as a ``vllm serve --config`` file holds them
    release: str                   # the vLLM release the framework's extra pins
    origin: str                    # where that pin is read
    note: str                      # how many engines, over how many GPUs
    spelling: Mapping[str, str] = field(default_factory=dict)   # vLLM key -> the flag that sets it (rules/serving)


@dataclass(frozen=True)
class Recipe:
    """One training recipe's facts. ``keys`` spells each setting as this framework does, so a hint
    can say ``micro_batch_size: 2`` to an axolotl user and ``per_device_train_batch_size: 2`` to
    a TRL user."""

    document: Document
    framework: str                 # registry name: trl, axolotl, llamafactory, torchtune
    title: str                     # as its users name it: "axolotl", "TRL SFTConfig", ...
    task: str                      # "train", or what else the file is for ("inference", "export", ...)
    stage: Fact                    # one of STAGES
    model: Fact                    # a Hub id or a path, as the recipe writes it
    revision: Fact
    micro_batch: Fact
    grad_accum: Fact
    seq_len: Fact
    packing: Fact
    grad_checkpointing: Fact
    mixed_precision: Fact          # autocast / DeepSpeed precision: "bf16", "fp16", "no", or "auto"
    weights_dtype: Fact            # the dtype the weights are loaded in: float32, bfloat16, float16, "auto"
    optimizer: Fact                # vramlint's optimizer name (adamw, adamw-8bit, sgd, adafactor)
    lora_rank: Fact                # 0: every weight trains
    lora_targets: Fact             # tuple of module names, or ("all-linear",)
    lora_dropout: Fact
    load_in_4bit: Fact
    load_in_8bit: Fact
    attn: Fact                     # auto, sdpa, flash_attention_2, eager
    deepspeed: Fact                # a DeepSpeed file's path, an inline DeepSpeed dict, or None
    fsdp: FsdpFacts | None         # FSDP, when the recipe turns it on
    max_grad_norm: Fact = field(default_factory=lambda: Fact(1.0, None, "HF TrainingArguments default"))
    # LoRA adapters' dtype: "float32" (PEFT's autocast_adapter_dtype, the default) or "weights"
    # (the base's load dtype: torchtune, PEFT with autocast_adapter_dtype off, LLaMA-Factory's pure_bf16)
    adapter_dtype: Fact = field(default_factory=lambda: Fact("float32", None, "PEFT 0.21.2 autocast_adapter_dtype "
                                                                               "default (fp32 adapters)"))
    # The reference model: "auto" (the stage's rule: REFERENCE_STAGES, none with PEFT), True (a
    # separate one is named), False (precomputed log-probs, GRPO's beta 0)
    reference: Fact = field(default_factory=lambda: Fact("auto", None, "the stage's rule"))
    colocated_share: Fact = field(default_factory=lambda: Fact(0.0))   # a colocated vLLM's share of each GPU
    generation_rows: Fact = field(default_factory=lambda: Fact(0))     # completions generated at once without vLLM
    # FSDP under gradient accumulation: reduce-scatter each micro-batch, or no_sync's unsharded gradients
    sync_each_batch: Fact = field(default_factory=lambda: Fact(False, None, "HF Trainer: no_sync between micro-batches "
                                                                            "(accelerator_config.sync_each_batch off)"))
    tensor_parallel: Fact = field(default_factory=lambda: Fact(1))   # TP degree the recipe sets
    sequence_split: Fact = field(default_factory=lambda: Fact(1))    # context / sequence parallel degree
    hf_trainer: bool = True        # run by the HF Trainer, which fills and checks a DeepSpeed file's values
    keys: Mapping[str, str] = field(default_factory=dict)
    features: tuple[Feature, ...] = ()   # what the recipe turns on that the memory model omits
    # Plan settings the recipe turns on that no config file states (SWITCHES: the loss head, the
    # optimizer's implementation, paged states, optimizer_in_bwd, activation offloading)
    switches: Mapping[str, Fact] = field(default_factory=dict)
    model_config: dict | None = None   # the architecture, where the recipe states it (torchtune's builders)
    teacher_config: dict | None = None  # a distillation teacher's architecture (torchtune's teacher_model)
    single_device: bool = False        # the recipe runs on one GPU whatever the machine has
    notes: tuple[str, ...] = ()
    # The framework's start-up refusals the settings meet (Refusal, below): each
    # names the launch it refuses (plan.LAUNCH_LIMITS), so hints never propose it
    refusals: tuple = ()
    release: str = ""                  # the framework release it is read as, where that decides: "LLaMA-Factory 0.9.2"
    vocabulary: str = ""               # how hints spell its settings (vocabulary.WORDS source), where not ``framework``
    # online RL: the phases around the update (a Fact of facts: readers/verl.py ``_rollout``), made
    # ``plan.Rollout`` by recipe_plan
    rollout: Fact | None = None
    gpus: tuple[Fact, Fact] | None = None    # GPUs per node and nodes, where the recipe states them (verl's trainer)
    value_head: bool = False           # the model trains as a value model (an RL critic: ModelShape.as_value_model)
    # The job's other GPU groups that train, each a recipe and a job of its own on its own GPUs
    # (OpenRLHF's critic in a separate placement); ``role`` names the group in what is reported
    groups: tuple[Recipe, ...] = ()
    role: str = ""
    engines: tuple[Engines, ...] = ()  # the generation engines on GPUs of their own, each group a vLLM check
    layout: Fact | None = None         # a pretraining framework's mesh (readers/torchtitan.py ``Layout``)
    model_code: str = ""               # the framework runs its own model code, not transformers' (models/code.py)
    model_hint: str = ""               # the way on where a framework's model is not priced (layouts' ``unmodelled``)

    @property
    def training(self) -> bool:
        return self.task == TRAIN

    def key(self, setting: str) -> str:
        """How this framework spells a setting (``micro_batch`` -> ``micro_batch_size``)."""
        return self.keys.get(setting, setting)


# What would let each refused launch start (plan.LAUNCH_LIMITS), said with the key that causes it.
REMEDIES = {"always": "remove or correct {key}", "distributed": "launch it on one GPU, or turn {key} off",
            "distributed-without-zero3": "a ZeRO-3 DeepSpeed config, or one GPU",
            "deepspeed": "launch it without deepspeed, or turn {key} off",
            "zero3": "ZeRO-2 or below, or turn {key} off"}


@dataclass(frozen=True)
class Refusal:
    """A start-up check of the framework the recipe's settings meet (LLaMA-Factory's
    ``get_train_args``, OpenRLHF's argument parser): the launch it refuses (``plan.LAUNCH_LIMITS``),
    the key that causes it, and its message, verbatim."""

    limit: str
    key: str
    message: str
    also: str = ""                      # more the hint says (ALLOW_EXTRA_ARGS)

    @property
    def hint(self) -> str:
        return REMEDIES[self.limit].format(key=self.key) + self.also



def nested(document: Document) -> Document:
    """A launch line's ``--section.key value`` arguments over the file's sections (torchtitan's
    tyro, LitGPT's jsonargparse): they reach the reader as dotted keys beside the file's tables
    (placed where the line writes them)."""
    data = document.data if isinstance(document.data, dict) else {}
    out: dict = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()
                 if "." not in key}
    for key, value in data.items():
        if "." in key:
            section, _, name = key.rpartition(".")
            node = out
            for part in section.split("."):
                node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
            node[name] = value
    return Document(document.path, document.text, out, document.positions, document.lenient, document.elsewhere,
                    document.on_command_line, document.unknown)


MISSING = object()


class Keys:
    """A recipe document's values with where they sit: ``get("a.b", "a_b")`` is the first of the
    dotted paths the file sets, else a default that says whose default it is."""

    def __init__(self, document: Document, origin: str) -> None:
        self.document = document
        self.data = document.data if isinstance(document.data, dict) else {}
        self.origin = origin          # "axolotl 0.19.0 default": what a default is called

    def _lookup(self, path: str) -> Any:
        return walk(self.data, path)

    def raw(self, path: str) -> Any:
        """The value at a dotted path as written, None where the file has none."""
        value = self._lookup(path)
        return None if value is MISSING else value

    def has(self, *paths: str) -> bool:
        return any(self._lookup(p) is not MISSING for p in paths)

    def get(self, *paths: str, default: Any = None, convert: Callable[[Any], Any] | None = None,
            why: str = "") -> Fact:
        """The first path the file sets (a ``null`` counts as unset, as the frameworks' parsers
        take it), converted; else ``default``, named as the framework's."""
        for path in paths:
            value = self._lookup(path)
            if value is MISSING or value is None:
                continue
            json_path = f"$.{path}"
            return Fact(convert(value) if convert else value, self.document.locate(json_path))
        return Fact(default, None, why or self.origin)

    def fact(self, path: str, value: Any) -> Fact:
        """A value derived from what the file says at ``path`` (located there)."""
        return Fact(value, self.document.locate(f"$.{path}"))


def walk(node: Any, path: str) -> Any:
    """The value at a dotted path of nested mappings, ``MISSING`` where there is none."""
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def longest(prompt: Fact, response: Fact) -> Fact:
    """An RL job's longest sequence, prompt + response, located at the response's length (the one
    users turn); unknown where either is no count."""
    if all(isinstance(f.value, int) and not isinstance(f.value, bool) for f in (prompt, response)):
        where = response if response.location is not None else prompt
        return Fact(prompt.value + response.value, where.location, where.default)
    return Fact(None, response.location, response.default)


def truthy(value: Any) -> bool:
    """YAML and the frameworks' argument parsers: true/false, "true"/"false", 1/0."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def positive(value: Any) -> Any:
    """A whole number as a recipe writes it (``"4"`` from a templated file too), else as written."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def targets(value: Any) -> tuple[str, ...]:
    """LoRA target modules: a list, a comma-separated string, or "all-linear" / "all"."""
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, (list, tuple)):
        names = [str(v).strip() for v in value if str(v).strip()]
    else:
        names = []
    if not names or any(n in ("all-linear", "all", "all_linear") for n in names):
        return ("all-linear",)
    return tuple(names)


# The Plan settings a recipe may switch (Recipe.switches), with the command-line flag that says each.
SWITCHES = ("loss", "optimizer_impl", "paged_optimizer", "optimizer_in_bwd", "activation_offload", "dora",
            "sdpa_repeat_kv", "graph_held", "bnb_4bit", "embedding_copy")


def dora_switch(keys: Keys, *names: str) -> dict[str, Fact]:
    """PEFT's ``use_dora`` as the recipe spells it, where it is on."""
    for name in names:
        if keys.has(name) and truthy(keys.raw(name)):
            return {"dora": keys.fact(name, True)}
    return {}
# HF Trainer ``optim`` values -> how the priced optimizer runs (transformers 5.24 OptimizerNames; the
# fused AdamW kernel makes no step temporary; bitsandbytes' paged states live in unified memory).
OPTIM_SWITCHES = {"adamw_torch_fused": {"optimizer_impl": "fused"}, "paged_adamw_8bit": {"paged_optimizer": True},
                  "paged_adam_8bit": {"paged_optimizer": True}, "paged_adamw_32bit": {"paged_optimizer": True},
                  "paged_adam_32bit": {"paged_optimizer": True}, "paged_adamw": {"paged_optimizer": True}}


def optim_switches(fact: Fact) -> dict[str, Fact]:
    """The switches an ``optim`` value implies, located where the recipe names it (or defaulted)."""
    return {name: Fact(value, fact.location, fact.default)
            for name, value in OPTIM_SWITCHES.get(str(fact.value).lower(), {}).items()}


DTYPES = {"float32": "float32", "fp32": "float32", "float": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16", "half": "float16", "auto": "auto"}


def dtype_name(value: Any) -> str:
    """``torch_dtype: bfloat16`` / ``torch.bfloat16`` / ``bf16`` -> bfloat16; unknown stays as written."""
    text = str(value).strip().replace("torch.", "").lower()
    return DTYPES.get(text, text)


# HF Trainer ``optim`` values (transformers ``OptimizerNames``; axolotl and LLaMA-Factory pass theirs
# through to it) -> the optimizer state vramlint prices. Values not listed keep AdamW's 8 B per
# trainable parameter and say so.
OPTIMIZERS = {
    "adamw_torch": "adamw", "adamw_torch_fused": "adamw", "adamw_hf": "adamw", "adamw_apex_fused": "adamw",
    "adamw_torch_xla": "adamw", "adamw_torch_npu_fused": "adamw", "adam": "adamw", "adamw": "adamw",
    "adamw_8bit": "adamw-8bit", "adamw_bnb_8bit": "adamw-8bit", "paged_adamw_8bit": "adamw-8bit",
    "adam_8bit": "adamw-8bit", "paged_adam_8bit": "adamw-8bit",
    "paged_adamw_32bit": "adamw", "paged_adamw": "adamw", "paged_adam_32bit": "adamw",
    "sgd": "sgd", "adafactor": "adafactor",
}
