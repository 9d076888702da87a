"""OpenRLHF's training commands → a :class:`Recipe`: ``openrlhf.cli.train_sft``, ``train_dpo`` and
``train_rm`` under ``deepspeed --module`` (or ``torchrun -m``), their flags read as the job.

OpenRLHF has no config file: every setting is a flag, and the launch line is the recipe. Two
spellings are in use. From 0.10.2 the flags are dotted by section (``--train.micro_batch_size``,
``--ds.zero_stage``, ``--model.model_name_or_path``, ``--data.max_len``); up to 0.10.1 they were flat
(``--micro_train_batch_size``, ``--zero_stage``, ``--pretrain``, ``--max_len``), and before 0.9.5
precision was the flag ``--bf16`` (off by default) rather than ``--param_dtype bf16``, and before
0.8 attention was ``--flash_attn`` (eager without it). The flat spellings are read as their dotted
names (``ALIASES``), so one job written either way gives one answer.

What the trainers do with them, read from the wheels (``openrlhf-0.11.2``, sha256 c969d70d…;
``0.10.1`` and ``0.9.0`` for the older spellings; the defaults below are the same in all three):
- ``DeepspeedStrategy.get_ds_train_config`` (utils/deepspeed/deepspeed.py:431-458) builds the
  DeepSpeed config itself (``deepspeed_utils.get_train_ds_config``, :8-70): ZeRO ``--ds.zero_stage``
  (default 2), parameters never offloaded (``offload=False``), the optimizer offloaded with
  ``--ds.adam_offload``, bf16 or fp16 from ``--ds.param_dtype`` (default bf16), ``autotp_size``
  ``--ds.tensor_parallel_size``, micro-batch ``--train.micro_batch_size`` and ``train_batch_size``
  ``--train.batch_size`` x ring x TP. The optimizer is DeepSpeed's AdamW (FusedAdam, or
  DeepSpeedCPUAdam offloaded) from the ``optimizer`` section (:290-350).
- ``Actor`` (models/actor.py:75-160) loads the weights in ``param_dtype``, NF4 with double
  quantization under ``--ds.load_in_4bit``, LoRA of ``--ds.lora.rank`` on ``all-linear`` by
  default; gradient checkpointing only with ``--model.gradient_checkpointing_enable``.
- ``Actor.forward`` casts the logits to fp32 and takes log-probs with flash-attn's cross-entropy
  kernel (:266-289, models/utils.py:172-196): the ``openrlhf`` loss head (memory/parts/loss.py).
- ``train_dpo`` loads a separate reference ``Actor`` always, LoRA or not (cli/train_dpo.py:42-50),
  under ZeRO-3 when the policy is, else whole on each GPU (``get_ds_eval_config``: stage 3 or 0);
  ``--ref.offload`` puts its ZeRO-3 shards on the host. ``train_rm`` trains a scalar value head.
"""

from __future__ import annotations

import re
from typing import Any

from vramlint.documents import Document
from vramlint.packaged import data_json
from vramlint.repository import root_of
from vramlint.vendored import vendored_flags
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import TRAIN, Feature, Keys, Recipe, Refusal, positive, targets, truthy

VERSION = "OpenRLHF 0.11.2"
FLAT = "OpenRLHF 0.10.1"           # the last release with flat flags
# Flat flags (0.10.1 and before) -> their dotted names from 0.10.2 (the same argparse defaults).
ALIASES = {
    "pretrain": "model.model_name_or_path", "ref_pretrain": "ref.model_name_or_path",
    "micro_train_batch_size": "train.micro_batch_size", "train_batch_size": "train.batch_size",
    "max_len": "data.max_len", "zero_stage": "ds.zero_stage", "param_dtype": "ds.param_dtype",
    "attn_implementation": "ds.attn_implementation", "gradient_checkpointing": "model.gradient_checkpointing_enable",
    "adam_offload": "ds.adam_offload", "packing_samples": "ds.packing_samples", "load_in_4bit": "ds.load_in_4bit",
    "lora_rank": "ds.lora.rank", "lora_alpha": "ds.lora.alpha", "target_modules": "ds.lora.target_modules",
    "lora_dropout": "ds.lora.dropout", "ring_attn_size": "ds.ring_attn_size",
    "ds_tensor_parallel_size": "ds.tensor_parallel_size", "use_liger_kernel": "ds.use_liger_kernel",
    "grad_accum_dtype": "ds.grad_accum_dtype", "zpg": "ds.zpg", "overlap_comm": "ds.overlap_comm",
    "ref_offload": "ref.offload", "pretrain_mode": "model.pretrain_mode_enable", "aux_loss_coef": "model.aux_loss_coef",
    "beta": "model.beta", "learning_rate": "adam.lr", "chosen_key": "data.chosen_key",
    "rejected_key": "data.rejected_key",
}
# Flags only OpenRLHF's trainers have: a command line with one of them is OpenRLHF's.
MARKS = ("micro_train_batch_size", "train.micro_batch_size", "ds.zero_stage", "model.model_name_or_path")
TRAINERS = {"train_sft": "sft", "train_dpo": "dpo", "train_rm": "rm", "train_ppo_ray": "ppo"}
# Per trainer: the defaults that differ (cli/train_*.py at 0.11.2; the same at 0.10.1 and 0.9.0).
MICRO_BATCH = {"sft": 8, "pt": 8, "dpo": 8, "rm": 1}
MAX_LEN = {"sft": 2048, "pt": 2048, "dpo": 512, "rm": 512}
SPELLING = {"micro_batch": "--train.micro_batch_size", "seq_len": "--data.max_len",
            "grad_checkpointing": "--model.gradient_checkpointing_enable", "lora_rank": "--ds.lora.rank",
            "load_in_4bit": "--ds.load_in_4bit", "model": "--model.model_name_or_path"}
FLAT_SPELLING = {"micro_batch": "--micro_train_batch_size", "seq_len": "--max_len",
                 "grad_checkpointing": "--gradient_checkpointing", "lora_rank": "--lora_rank",
                 "load_in_4bit": "--load_in_4bit", "model": "--pretrain"}


def looks_like_openrlhf(data: Any) -> bool:
    """A command line of OpenRLHF's trainers (it has no config file): one of the flags only they have."""
    return isinstance(data, dict) and any(mark in data for mark in MARKS)


def trainer_of(program: str) -> str | None:
    """The stage an OpenRLHF program trains: ``openrlhf.cli.train_dpo`` / ``openrlhf/cli/train_dpo.py``
    -> dpo; None for its other programs (PPO under Ray, serving, LoRA merging)."""
    found = re.search(r"(?:^|[./])(train_\w+?)(?:\.py)?$", program)
    return TRAINERS.get(found.group(1)) if found else None


def flat_spelling(written: dict, aliases: dict[str, str] = ALIASES) -> bool:
    """Whether the command uses the flags of 0.10.1 and before (one of ``aliases``, or --bf16 / --flash_attn)."""
    return any(aliases.get(str(key), str(key)) != key or key in ("bf16", "flash_attn") for key in written)


def full_name(key: str, known: list[str]) -> str:
    """The flag argparse takes ``key`` for: itself, or the one flag it is a prefix of (``allow_abbrev``)."""
    if not known or key in known:
        return key
    matches = [flag for flag in known if flag.startswith(key)]
    return matches[0] if len(matches) == 1 else key


def dotted(document: Document, known: list[str], aliases: dict[str, str] = ALIASES) -> Document:
    """The command line with every flag under its full dotted name (abbreviations expanded against
    ``known``, the program's flags; a flat flag by ``aliases``), nested by section as OpenRLHF's
    ``hierarchize`` nests them, each still where it is written."""
    data: dict = {}
    positions = {"$": document.positions.get("$", (1, 1))}
    elsewhere = {}
    for key, value in (document.data or {}).items():
        name = full_name(str(key), known)
        name = aliases.get(name, name)
        node = data
        parts = name.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[parts[-1]] = value
        if f"$.{key}" in document.positions:
            positions[f"$.{name}"] = document.positions[f"$.{key}"]
        if f"$.{key}" in document.elsewhere:
            elsewhere[f"$.{name}"] = document.elsewhere[f"$.{key}"]
    unknown = frozenset(aliases.get(key, key) for key in document.unknown)
    return Document(document.path, document.text, data, positions, list(document.lenient), elsewhere,
                    on_command_line=True, unknown=unknown)


def _stage(keys: Keys, trainer: Fact | None) -> Fact:
    """The trainer the program is (its module's name), continued pre-training with
    ``--model.pretrain_mode_enable``; without a program name, DPO's own flags, else SFT."""
    if trainer is not None:
        stage = trainer
    elif keys.has("model.beta", "ref.model_name_or_path", "ref.offload"):
        stage = keys.get("model.beta", "ref.model_name_or_path", "ref.offload")
        stage = Fact("dpo", stage.location)
    else:
        stage = Fact("sft", None, "the program is not named OpenRLHF's: read as train_sft")
    if stage.value == "sft" and truthy(keys.raw("model.pretrain_mode_enable")):
        return keys.fact("model.pretrain_mode_enable", "pt")
    return stage


def _precision(keys: Keys, release: str) -> tuple[Fact, Fact]:
    """``--ds.param_dtype bf16|fp16`` (default bf16): the DeepSpeed precision and the weights' load
    dtype; before 0.9.5 the flag ``--bf16``, without which DeepSpeed trained in fp32 on the
    checkpoint's dtype (``torch_dtype="auto"``)."""
    if keys.has("bf16") and not keys.has("ds.param_dtype"):
        on = keys.get("bf16", convert=truthy)
        if on.value:
            return Fact("bf16", on.location), Fact("bfloat16", on.location)
        return Fact("no", on.location), Fact("auto", on.location)
    dtype = keys.get("ds.param_dtype", default="bf16", why=f"{release} --ds.param_dtype default")
    word = str(dtype.value).lower()
    return (Fact(word if word in ("bf16", "fp16") else dtype.value, dtype.location, dtype.default),
            Fact({"bf16": "bfloat16", "fp16": "float16"}.get(word, dtype.value), dtype.location, dtype.default))


def _attention(keys: Keys, release: str) -> Fact:
    """``--ds.attn_implementation`` (default flash_attention_2); the old flag ``--flash_attn``."""
    if keys.has("flash_attn"):
        on = keys.get("flash_attn", convert=truthy)
        return Fact("flash_attention_2" if on.value else "eager", on.location)
    fact = keys.get("ds.attn_implementation", default="flash_attention_2", why=f"{release} default")
    value = str(fact.value).lower()
    value = "flash_attention_2" if "flash" in value else value if value in ("eager", "sdpa") else "auto"
    return Fact(value, fact.location, fact.default)


def _deepspeed(keys: Keys, precision: Fact, micro: Fact, command: tuple[int, int],
               dynamic: Fact | None = None) -> tuple[dict, dict]:
    """The DeepSpeed config ``get_train_ds_config`` builds (deepspeed_utils.py:8-70, at its
    ``offload=False``), with each value placed at the flag that sets it. Its ``"auto"`` buffer
    sizes are left out: no HF Trainer fills them, and DeepSpeed drops an ``"auto"`` value for its
    default (0.19.8 runtime/config_utils.py:56), as it does a key that is absent. The micro-batch
    is always set (``get_ds_train_config``: the flag's value or its default), so DeepSpeed derives
    only the accumulation; it and train_batch_size are stated by the command even at their defaults
    (``command``: where it is written), as DeepSpeed's batch arithmetic needs. Under
    ``--train.dynamic_batch_enable`` (``dynamic``) the micro-batch is 1 and the accumulation 1, with
    no train_batch_size (deepspeed.py:451-456): the trainer accumulates token-budget batches itself."""
    stage = keys.get("ds.zero_stage", default=2, convert=positive)
    adam = keys.get("ds.adam_offload", default=False, convert=truthy)
    tp = keys.get("ds.tensor_parallel_size", default=1, convert=positive)
    ring = keys.get("ds.ring_attn_size", default=1, convert=positive)
    batch = keys.get("train.batch_size", default=128, convert=positive)
    norm = keys.get("max_norm", default=1.0)
    config = {
        "zero_optimization": {"stage": stage.value, "offload_param": {"device": "none"},
                              "offload_optimizer": {"device": "cpu" if adam.value else "none", "pin_memory": True}},
        "bf16": {"enabled": precision.value == "bf16"}, "fp16": {"enabled": precision.value == "fp16"},
        "gradient_clipping": norm.value, "tensor_parallel": {"autotp_size": tp.value},
        "optimizer": {"type": "AdamW"}, "train_micro_batch_size_per_gpu": micro.value,
    }
    if dynamic is not None and dynamic.value:
        config["gradient_accumulation_steps"] = 1
        batch = dynamic
    elif all(isinstance(f.value, int) for f in (batch, ring, tp)):
        config["train_batch_size"] = batch.value * ring.value * tp.value
    placed = {"zero_optimization.stage": stage, "zero_optimization.offload_optimizer.device": adam,
              "bf16.enabled": precision, "fp16.enabled": precision, "gradient_clipping": norm,
              "tensor_parallel.autotp_size": tp, "train_micro_batch_size_per_gpu": micro,
              "gradient_accumulation_steps" if dynamic is not None and dynamic.value else "train_batch_size": batch}
    positions = {f"$.deepspeed.{path}": (fact.location.line, fact.location.column)
                 for path, fact in placed.items() if fact.location is not None}
    for path in ("train_micro_batch_size_per_gpu", "train_batch_size", "gradient_accumulation_steps"):
        if path in config:
            positions.setdefault(f"$.deepspeed.{path}", command)
    return config, positions


def _lora(keys: Keys, release: str) -> tuple[Fact, Fact, Fact]:
    rank = keys.get("ds.lora.rank", default=0, convert=positive, why=f"{release} --ds.lora.rank default")
    where = keys.get("ds.lora.target_modules", default=("all-linear",), convert=targets,
                     why=f"{release} --ds.lora.target_modules default")
    dropout = keys.get("ds.lora.dropout", default=0.0, why=f"{release} default")
    return rank, where, dropout


# The releases whose flags a spelling is held to (data/openrlhf_flags.json, dev/openrlhf_flags.py):
# the dotted flags any of 0.10.2-0.11.2's; the flat ones any of 0.6.1 (--flash_attn), 0.9.0 (--bf16), 0.9.5
# (--prompt_max_len), 0.9.10 and 0.10.1.
FLAG_RELEASES = {False: ("0.10.2", "0.10.4", "0.11.0", "0.11.2"), True: ("0.6.1", "0.9.0", "0.9.5", "0.9.10", "0.10.1")}
PROGRAMS = {"sft": "train_sft", "pt": "train_sft", "dpo": "train_dpo", "rm": "train_rm", "ppo": "train_ppo_ray"}


def program_flags(trainer: Fact | None, flat: bool, path: str = "") -> tuple[str | None, list[str]]:
    """The program a launch names (``train_sft`` ...) and the flags its argparse defines: the
    repository's own copy's where it holds one (a fork), else those of the releases of the
    spelling; none where no program is named."""
    program = PROGRAMS.get(str(trainer.value)) if trainer is not None else None
    if program is None:
        return None, []
    own = vendored_flags(root_of(path), program) if path else None
    if own is not None:
        return program, own
    releases = data_json("openrlhf_flags.json")["releases"]
    return program, sorted({flag for release in FLAG_RELEASES[flat] for flag in releases[release]["programs"][program]})


def unrecognized(written: dict, program: str | None, known: list[str]) -> tuple[Refusal, ...]:
    """argparse's refusal of the flags the program does not define (an exact name, or an unambiguous
    prefix of one: ``allow_abbrev``), in its words."""
    unknown = [key for key in written if full_name(key, known) not in known] if program else []
    if not unknown:
        return ()
    import difflib
    words = " ".join(f"--{key}" + ("" if written[key] is True else f" {written[key]}") for key in unknown)
    close = difflib.get_close_matches(unknown[0], known, n=1)
    return (Refusal("always", ALIASES.get(unknown[0], unknown[0]),
                    f"{program}.py: error: unrecognized arguments: {words}",
                    f" (did you mean --{close[0]}?)" if close else ""),)


def read_openrlhf(document: Document, trainer: Fact | None = None) -> Recipe:
    """One OpenRLHF training command as its trainer runs it; ``trainer``: the stage its program
    names (``openrlhf.cli.train_dpo``), which the flags do not state."""
    written = dict(document.data or {})
    flat = flat_spelling(written)
    program, known = program_flags(trainer, flat, document.path)
    document = dotted(document, known)
    release = FLAT if flat else VERSION
    keys = Keys(document, f"{release} default")
    stage = _stage(keys, trainer)
    precision, weights = _precision(keys, release)
    micro = keys.get("train.micro_batch_size", default=MICRO_BATCH.get(str(stage.value), 8), convert=positive,
                     why=f"{release} --train.micro_batch_size default")
    config, positions = _deepspeed(keys, precision, micro, document.positions["$"])
    document.data["deepspeed"] = config
    document.positions.update(positions)
    document.positions.setdefault("$.deepspeed", document.positions["$"])
    rank, lora_targets, dropout = _lora(keys, release)
    features = ()
    offload = keys.get("ref.offload", default=False, convert=truthy)
    if stage.value == "dpo" and offload.value and keys.raw("ds.zero_stage") == 3:
        features = (Feature(offload, "the reference model's ZeRO-3 shards on the host (--ref.offload)", "high"),)
    return Recipe(
        document=document, framework="openrlhf", title=release, task=TRAIN, stage=stage,
        model=keys.get("model.model_name_or_path"),
        revision=Fact("main"),
        micro_batch=micro,
        grad_accum=Fact(None, None, "DeepSpeed derives it: train_batch_size / (micro-batch x data-parallel GPUs)"),
        seq_len=keys.get("data.max_len", default=MAX_LEN.get(str(stage.value), 2048), convert=positive,
                         why=f"{release} --data.max_len default"),
        packing=keys.get("ds.packing_samples", default=False, convert=truthy),
        grad_checkpointing=keys.get("model.gradient_checkpointing_enable", default=False, convert=truthy,
                                    why=f"{release}: off unless --model.gradient_checkpointing_enable"),
        mixed_precision=precision, weights_dtype=weights,
        optimizer=Fact("adamw", None, f"{release}: DeepSpeed's AdamW (--optim adam)"),
        lora_rank=rank, lora_targets=lora_targets, lora_dropout=dropout,
        load_in_4bit=keys.get("ds.load_in_4bit", default=False, convert=truthy),
        load_in_8bit=Fact(False),
        attn=_attention(keys, release),
        deepspeed=Fact(config, document.locate("$.deepspeed")),
        fsdp=None,
        max_grad_norm=keys.get("max_norm", default=1.0, why=f"{release} --max_norm default"),
        reference=Fact(True, stage.location, "train_dpo.py loads a separate reference Actor") if stage.value == "dpo"
        else Fact("auto", None, "the stage's rule"),
        **_adapters(keys),
        sequence_split=keys.get("ds.ring_attn_size", default=1, convert=positive),
        tensor_parallel=Fact(1),
        hf_trainer=False, keys=FLAT_SPELLING if flat else SPELLING, features=features,
        switches=_switches(keys, stage),
        release=release, vocabulary="openrlhf-flat" if flat else "openrlhf",
        refusals=unrecognized(written, program, known),
    )


def _adapters(keys: Keys) -> dict[str, Fact]:
    """PEFT's fp32 adapters (autocast_adapter_dtype), cast to bf16 with the base under
    ``--ds.load_in_4bit`` (actor.py:189-193)."""
    four = keys.get("ds.load_in_4bit", default=False, convert=truthy)
    return {"adapter_dtype": Fact("weights", four.location)} if four.value else {}


def _switches(keys: Keys, stage: Fact) -> dict[str, Fact]:
    """The loss head: a reward model's scalar head; Liger's fused loss with ``--ds.use_liger_kernel``
    (``AutoLigerKernelForCausalLM``); else OpenRLHF's fp32 logits and flash-attn cross-entropy."""
    if stage.value == "rm":
        return {"loss": Fact("none", stage.location, "train_rm.py: a scalar value head")}
    liger = keys.get("ds.use_liger_kernel", default=False, convert=truthy)
    if liger.value:
        return {"loss": Fact("liger", liger.location)}
    return {"loss": Fact("openrlhf", None, "Actor.forward: fp32 logits, flash-attn cross-entropy")}
