"""verl's PPO trainer (``python3 -m verl.trainer.main_ppo``) → a :class:`Recipe` with its RL phases.

verl states a job as one Hydra config: its own ``ppo_trainer.yaml`` with the worker configs that
file's ``defaults`` list composes, then the user's config (``--config-path`` / ``--config-name``),
then ``key=value`` overrides on the launch line (``+key=`` adds, ``++key=`` forces; both read as
the key). vramlint lays them in that order over verl's composed defaults, read from the wheel
(``data/verl_ppo_trainer.json``, ``dev/verl_defaults.py``: verl 0.9.1's
``_generated_ppo_trainer.yaml``), and resolves the defaults' interpolations
(``${oc.select:actor_rollout_ref.actor.ppo_max_token_len_per_gpu,16384}``) against what the job
sets, so a value that follows another is located where that one is written.

What the job is, read from verl 0.9.1's code (the memory model's side is ``memory/rl.py``):
- GPUs: ``trainer.n_gpus_per_node`` x ``trainer.nnodes``, one pool that every role shares
  (trainer/ppo/v1/trainer_base.py:788-830); a reward model with ``enable_resource_pool`` has GPUs
  of its own.
- The actor: FSDP (``strategy: fsdp``) or FSDP2 (``fsdp2``) over every GPU (``fsdp_size`` -1) or
  hybrid-sharded over ``fsdp_size``; fp32 shards (``model_dtype`` fp32) under bf16 mixed precision,
  torch AdamW, gradient checkpointing on (``model.enable_gradient_checkpointing``), padding removed
  (``use_remove_padding``: a micro-batch's sequences packed into one row). A micro-batch is
  ``ppo_micro_batch_size_per_gpu`` sequences of prompt + response, or with ``use_dynamic_bsz``
  up to ``ppo_max_token_len_per_gpu`` tokens; Ulysses sequence parallelism splits each over
  ``ulysses_sequence_parallel_size`` GPUs. Each micro-batch reduce-scatters its gradients
  (``use_no_sync_for_gradient_accumulation`` false).
- The reference (``use_kl_loss`` or ``algorithm.use_kl_in_reward``) is built on the host
  (``forward_only``: CPUOffload); with LoRA it is the actor with its adapter disabled.
- The critic exists for ``algorithm.adv_estimator: gae`` (or ``critic.enable``): a value model
  trained with the actor's layout, its own offload switches.
- The rollout engine (``rollout.name``: vllm or sglang) sleeps outside the rollout unless
  ``free_cache_engine`` is off, and takes ``gpu_memory_utilization`` of each GPU awake.
"""

from __future__ import annotations

import re
from typing import Any

from vramlint.documents import Document
from vramlint.packaged import data_json
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import (TRAIN, Feature, FsdpFacts, Keys, Recipe, Refusal, longest, positive, targets,
                                     truthy)
from vramlint.readers.verl_megatron import DEFAULT_ENGINE, DEFAULTS as ENGINE_DEFAULTS, ENGINES, MEGATRON, engine_of
from vramlint.readers.verl_megatron import SPELLING as MEGATRON_SPELLING, read_layout

VERSION = "verl 0.9.1"
DEFAULTS_FILE = "verl_ppo_trainer.json"
# The programs whose config is verl's PPO trainer's (the DAPO recipe adds keys of its own to it).
PROGRAMS = ("verl.trainer.main_ppo", "recipe.dapo.main_dapo", "verl.recipe.dapo.main_dapo")
ACTOR, ROLLOUT, MODEL = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.model"
REF = "actor_rollout_ref.ref"
# algorithm.adv_estimator -> the stage in vramlint's words (readers/recipe.py STAGES)
STAGES = {"gae": "ppo", "grpo": "grpo", "rloo": "rloo"}
ESTIMATORS = {"gae": "PPO (GAE)", "grpo": "GRPO", "rloo": "RLOO", "reinforce_plus_plus": "REINFORCE++",
              "remax": "ReMax", "opo": "OPO", "gpg": "GPG", "grpo_passk": "GRPO pass@k"}
SPELLING = {"micro_batch": f"{ACTOR}.ppo_micro_batch_size_per_gpu", "seq_len": "data.max_response_length",
            "grad_checkpointing": f"{MODEL}.enable_gradient_checkpointing", "lora_rank": f"{MODEL}.lora_rank",
            "model": f"{MODEL}.path", "optimizer": f"{ACTOR}.optim.optimizer",
            "gpus_per_node": "trainer.n_gpus_per_node", "nodes": "trainer.nnodes"}
_INTERPOLATION = re.compile(r"^\$\{(?:oc\.select:)?\s*([^,}]+?)\s*(?:,\s*([^}]*?)\s*)?\}$")


# The keys the job's memory depends on: an override of another (data files, logging, checkpoints)
# set to what only the run knows is no concern of the estimate.
MATTERS = ("actor_rollout_ref.", "critic.", "algorithm.", "reward.reward_model.", "reward_model.", "trainer.n_gpus",
           "trainer.nnodes", "data.max_prompt_length", "data.max_response_length", "data.train_batch_size",
           "model_engine")


def matters(key: str) -> bool:
    """Whether an override's value changes the estimate (``MATTERS``)."""
    return key.lstrip("+~").startswith(MATTERS)


def looks_like_verl(data: Any) -> bool:
    """verl's trainer config: its ``actor_rollout_ref`` section, nested or as dotted overrides, or a
    Hydra ``defaults`` list that composes verl's own trainer config (``- ppo_trainer``)."""
    if not isinstance(data, dict):
        return False
    defaults = data.get("defaults")
    composes = isinstance(defaults, list) and any(
        str(entry if not isinstance(entry, dict) else next(iter(entry.values()), "")).startswith(
            ("ppo_trainer", "ppo_megatron_trainer")) for entry in defaults)
    return composes or any(str(key).lstrip("+") == "actor_rollout_ref"
                           or str(key).lstrip("+").startswith("actor_rollout_ref.") for key in data)


def hydra_value(value: Any) -> Any:
    """An override's value as Hydra's grammar types it: ``null``, booleans in any case, numbers;
    a quoted or other string stays a string (the shell has taken the quotes)."""
    if not isinstance(value, str):
        return value
    lowered = value.strip().lower()
    if lowered in ("null", "~"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    if re.fullmatch(r"[-+]?\d+", value.strip()):
        return int(value)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", value.strip()):
        return float(value)
    return value


def nested(document: Document) -> Document:
    """The job's config with every dotted override laid into its section (``a.b=1`` over a file's
    ``a: {b: 0}``), each still where it is written; Hydra's ``+`` / ``++`` prefixes dropped and a
    ``~key`` deletion read as the key unset."""
    data: dict = {}
    positions = dict(document.positions)
    elsewhere = dict(document.elsewhere)
    for key, value in (document.data or {}).items():
        if key in ("defaults", "hydra"):
            continue
        name = str(key).lstrip("+")
        parts = name.lstrip("~").split(".")
        node = data
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        if name.startswith("~"):
            node.pop(parts[-1], None)
            continue
        old = node.get(parts[-1])
        node[parts[-1]] = _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) \
            else (hydra_value(value) if "." in name or document.on_command_line else value)
        if name != key and f"$.{key}" in positions:
            positions[f"$.{name}"] = positions[f"$.{key}"]
            if f"$.{key}" in elsewhere:
                elsewhere[f"$.{name}"] = elsewhere[f"$.{key}"]
    return Document(document.path, document.text, data, positions, list(document.lenient), elsewhere,
                    on_command_line=document.on_command_line)


def _merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


class VerlKeys(Keys):
    """The job's values over verl's composed defaults: a key the job leaves unset is verl's
    default, and a default that interpolates another key follows what the job sets there."""

    def __init__(self, document: Document, engine: str = DEFAULT_ENGINE) -> None:
        super().__init__(document, f"{VERSION} default")
        self.engine = engine
        defaults = ENGINE_DEFAULTS.get(engine, DEFAULTS_FILE)
        self.verl = Keys(Document(defaults, "", data_json(defaults)["config"]), f"{VERSION} default")

    def _default(self, path: str) -> Any:
        return self.verl.raw(path)

    def value(self, path: str, convert=None, depth: int = 0) -> Fact:
        """The job's value at ``path`` (located), else verl's default, its interpolation followed."""
        written = self.raw(path)
        if written is not None:
            return Fact(convert(written) if convert else written, self.document.locate(f"$.{path}"))
        default = self._default(path)
        found = _INTERPOLATION.match(default) if isinstance(default, str) and depth < 8 else None
        if found is None:
            return Fact(convert(default) if convert and default is not None else default, None,
                        f"{VERSION} default ({path})")
        target, fallback = found.group(1), found.group(2)
        if target.startswith("."):
            target = path.rsplit(".", 1)[0] + target
        fact = self.value(target, convert, depth + 1)
        if fact.value is None and fallback is not None and fallback.strip() not in ("null", ""):
            value = hydra_value(fallback.strip())
            return Fact(convert(value) if convert else value, None, f"{VERSION} default ({path})")
        return fact

    def flag(self, path: str) -> Fact:
        return self.value(path, truthy)

    def count(self, path: str) -> Fact:
        return self.value(path, positive)


def read_verl(document: Document, trainer: Fact | None = None) -> Recipe:
    """One verl PPO-trainer job: the actor's update as the Recipe, its other phases as ``rollout``."""
    engine = engine_of(document.data or {})
    document = nested(document)
    keys = VerlKeys(document, engine)
    strategy = _strategy(keys)
    if strategy.value == "megatron":
        return read_megatron_workers(keys)
    estimator = keys.value("algorithm.adv_estimator")
    prompt, response = keys.count("data.max_prompt_length"), keys.count("data.max_response_length")
    seq = longest(prompt, response)
    sp = keys.count(f"{ACTOR}.ulysses_sequence_parallel_size")
    micro, seq_len, accumulation, notes = _micro_batch(keys, seq, sp)
    if keys.flag(f"{MODEL}.use_remove_padding").value and isinstance(seq.value, int):
        notes.append(f"use_remove_padding: a micro-batch holds its sequences' own tokens, estimated with each at its "
                     f"cap (max_prompt_length {prompt.value:,} + max_response_length {response.value:,}); shorter "
                     "sequences use less")
    return Recipe(
        **_job(keys, estimator, notes),
        micro_batch=micro, grad_accum=accumulation, seq_len=seq_len,
        grad_checkpointing=keys.flag(f"{MODEL}.enable_gradient_checkpointing"),
        mixed_precision=Fact("bf16", None, f"{VERSION}: FSDP MixedPrecision param_dtype bf16"),
        weights_dtype=_model_dtype(keys.value(f"{ACTOR}.fsdp_config.model_dtype")),
        lora_rank=keys.count(f"{MODEL}.lora_rank"), lora_targets=keys.value(f"{MODEL}.target_modules", targets),
        attn=Fact("flash_attention_2", None, f"{VERSION}: flash-attn varlen with use_remove_padding"),
        deepspeed=Fact(None), fsdp=_fsdp(keys, strategy),
        max_grad_norm=keys.value(f"{ACTOR}.grad_clip"),
        reference=Fact(False, None, f"{VERSION}: the reference policy's shards live on the host (CPUOffload, "
                                    "forward_only); memory/rl.py"),
        sync_each_batch=Fact(True, None, f"{VERSION}: use_no_sync_for_gradient_accumulation false"),
        sequence_split=sp, keys=SPELLING, features=_unpriced(keys, strategy),
        switches={"loss": _loss(keys)}, rollout=_rollout(keys, seq, sp, estimator),
    )


def _job(keys: VerlKeys, estimator: Fact, notes: list[str]) -> dict:
    """What a verl job states whichever engine trains its actor: the algorithm (its stage), the
    model, the optimizer, the GPUs, verl's start-up refusals."""
    return dict(
        document=keys.document, framework="verl", title=VERSION, task=TRAIN, release=VERSION,
        stage=Fact(STAGES.get(str(estimator.value), "ppo"), estimator.location, estimator.default),
        model=_model(keys), revision=Fact("main"),
        packing=Fact(False, None, f"{VERSION}: no packing to a fixed length (see use_remove_padding)"),
        optimizer=_optimizer(keys.value(f"{ACTOR}.optim.optimizer")),
        lora_dropout=Fact(0.0, None, f"{VERSION}: no LoRA dropout key"), load_in_4bit=Fact(False),
        load_in_8bit=Fact(False), hf_trainer=False, refusals=_refusals(keys),
        notes=(f"{ESTIMATORS.get(str(estimator.value), estimator.value)} (algorithm.adv_estimator {estimator.value})",
               *notes),
        gpus=(keys.count("trainer.n_gpus_per_node"), keys.count("trainer.nnodes")))


def read_megatron_workers(keys: VerlKeys) -> Recipe:
    """A job on verl's Megatron engine (readers/verl_megatron.py): the actor's update as a Megatron
    layout over the Hugging Face model, its other phases as ``rollout``."""
    estimator = keys.value("algorithm.adv_estimator")
    seq = longest(keys.count("data.max_prompt_length"), keys.count("data.max_response_length"))
    cp = keys.count(f"{MEGATRON}.context_parallel_size")
    micro, seq_len, total, notes = _megatron_micro_batch(keys, seq)
    layout = read_layout(keys, micro, total)
    granularity = layout.granularity
    if keys.flag(f"{MODEL}.enable_gradient_checkpointing").value and granularity.value is None:
        notes.append(f"{MODEL}.enable_gradient_checkpointing is not read by verl's Megatron engine: it recomputes "
                     f"what {MEGATRON}.override_transformer_config.recompute_granularity says (none here)")
    dtype = keys.value(f"{MEGATRON}.dtype")
    lora = keys.value(f"{MODEL}.lora.rank") if keys.count(f"{MODEL}.lora.rank").value else keys.count(
        f"{MODEL}.lora_rank")
    return Recipe(
        **_job(keys, estimator, [f"{VERSION} Megatron engine (model_engine megatron)", *notes]),
        micro_batch=micro, grad_accum=Fact(1, None, "the mini-batch's micro-batches (layouts/megatron.py)"),
        seq_len=seq_len,
        grad_checkpointing=Fact(granularity.value is not None, granularity.location, granularity.default),
        mixed_precision=Fact("bf16", dtype.location, dtype.default),
        weights_dtype=_model_dtype(dtype),
        lora_rank=lora, lora_targets=Fact(("all-linear",)),
        attn=Fact("flash_attention_2", None, f"{VERSION}: Megatron attention_backend flash"),
        deepspeed=Fact(None), fsdp=None, tensor_parallel=layout.tensor, sequence_split=cp,
        max_grad_norm=keys.value(f"{ACTOR}.optim.clip_grad"),
        reference=Fact(False, None, f"{VERSION}: the reference is a forward-only Megatron model, priced with the RL "
                                    "phases (memory/runtimes/megatron/rl.py)"),
        keys={**SPELLING, **MEGATRON_SPELLING}, features=_megatron_unpriced(keys), layout=Fact(layout),
        rollout=_rollout(keys, seq, cp, estimator, "megatron"),
    )


def _megatron_micro_batch(keys: VerlKeys, seq: Fact) -> tuple[Fact, Fact, Fact, list[str]]:
    """The update's micro-batch on the Megatron engine: ``ppo_micro_batch_size_per_gpu`` sequences of
    prompt + response, or with ``use_dynamic_bsz`` one packed row of ``ppo_max_token_len_per_gpu``
    tokens; and the mini-batch (``ppo_mini_batch_size`` x ``rollout.n`` sequences) in those
    micro-batches' rows, the pipeline's global batch over the data-parallel ranks."""
    mini, n = keys.count(f"{ACTOR}.ppo_mini_batch_size"), keys.count(f"{ROLLOUT}.n")
    sequences = Fact(mini.value * n.value if _ints(mini, n) else None, mini.location, mini.default)
    if not keys.flag(f"{ACTOR}.use_dynamic_bsz").value:
        return keys.count(f"{ACTOR}.ppo_micro_batch_size_per_gpu"), seq, sequences, []
    budget = keys.count(f"{ACTOR}.ppo_max_token_len_per_gpu")
    tokens = max(budget.value, seq.value) if _ints(budget, seq) else budget.value
    rows = sequences
    if _ints(sequences, seq) and isinstance(tokens, int):     # the sequences packed into rows of the budget
        rows = Fact(max(1, -(-sequences.value * seq.value // tokens)), mini.location, mini.default)
    return (Fact(1, keys.flag(f"{ACTOR}.use_dynamic_bsz").location, "one packed row"),
            Fact(tokens, budget.location, budget.default), rows,
            [f"use_dynamic_bsz: each update micro-batch packs up to {tokens:,} tokens per GPU "
             "(ppo_max_token_len_per_gpu)" if isinstance(tokens, int) else "use_dynamic_bsz"])


def _megatron_unpriced(keys: VerlKeys) -> tuple[Feature, ...]:
    """What a Megatron-engine job turns on that vramlint does not price, and which way that leaves it."""
    out = list(_unpriced(keys, Fact("megatron")))
    coeff, asked = keys.value(f"{ACTOR}.entropy_coeff"), keys.flag(f"{ACTOR}.calculate_entropy")
    if asked.value or (isinstance(coeff.value, (int, float)) and coeff.value):
        out.append(Feature(asked if asked.value else coeff, "the entropy over the vocabulary shard (a clone of the "
                           "logits and vocab_parallel_entropy's fp32 work)", "high"))
    return tuple(out)


def _strategy(keys: VerlKeys) -> Fact:
    """The actor's strategy: the one ``actor.strategy`` states within the ``dp`` engine (fsdp,
    fsdp2), else the engine's own (``model_engine``: megatron, torchtitan, veomni)."""
    if keys.engine == DEFAULT_ENGINE or keys.engine == "megatron":
        return keys.value(f"{ACTOR}.strategy")
    where = keys.document.locate("$.model_engine") if "model_engine" in (keys.document.data or {}) else None
    return Fact(ENGINES.get(keys.engine, keys.engine), where, f"{VERSION}: model_engine {keys.engine}")


def _model(keys: VerlKeys) -> Fact:
    """The actor's model: what the job names; verl's placeholder default (a path on its authors'
    machines) is no model to resolve."""
    fact = keys.value(f"{MODEL}.path")
    return fact if fact.location is not None else Fact(None, None, f"{VERSION}: {MODEL}.path not set")


def _micro_batch(keys: VerlKeys, seq: Fact, sp: Fact) -> tuple[Fact, Fact, Fact, list[str]]:
    """The update's micro-batch as rows x tokens per GPU: ``ppo_micro_batch_size_per_gpu``
    sequences of prompt + response, or with ``use_dynamic_bsz`` one packed row of up to
    ``ppo_max_token_len_per_gpu`` tokens (a longer sequence alone, ``rearrange_micro_batches``);
    the accumulation is the GPU's share of the mini-batch over the micro-batch."""
    dynamic = keys.flag(f"{ACTOR}.use_dynamic_bsz")
    mini, n = keys.count(f"{ACTOR}.ppo_mini_batch_size"), keys.count(f"{ROLLOUT}.n")
    world = _world(keys)
    split = sp.value if isinstance(sp.value, int) and sp.value > 0 else 1
    per_gpu = (mini.value * n.value * split // world) if world and _ints(mini, n) else None
    if dynamic.value:
        budget = keys.count(f"{ACTOR}.ppo_max_token_len_per_gpu")
        tokens = budget.value if isinstance(budget.value, int) else None
        if tokens and isinstance(seq.value, int):
            tokens = max(tokens, -(-seq.value // split) if split > 1 else seq.value)
        rows = -(-per_gpu * seq.value // (tokens * split)) if tokens and per_gpu and isinstance(seq.value, int) else 1
        note = (f"use_dynamic_bsz: each update micro-batch packs up to {tokens:,} tokens per GPU "
                f"(ppo_max_token_len_per_gpu)") if tokens else "use_dynamic_bsz"
        return (Fact(1, dynamic.location, "one packed row"), Fact(tokens, budget.location, budget.default),
                Fact(max(1, rows), mini.location, mini.default), [note])
    micro = keys.count(f"{ACTOR}.ppo_micro_batch_size_per_gpu")
    legacy = keys.count(f"{ACTOR}.ppo_micro_batch_size")
    if micro.value is None and isinstance(legacy.value, int) and world:
        micro = Fact(max(1, legacy.value * split // world), legacy.location)
    steps = max(1, per_gpu // micro.value) if per_gpu and isinstance(micro.value, int) and micro.value > 0 else 1
    return micro, seq, Fact(steps, mini.location, mini.default), []


def _ints(*facts: Fact) -> bool:
    return all(isinstance(f.value, int) and not isinstance(f.value, bool) and f.value > 0 for f in facts)


def _world(keys: VerlKeys) -> int:
    per_node, nodes = keys.count("trainer.n_gpus_per_node"), keys.count("trainer.nnodes")
    return per_node.value * nodes.value if _ints(per_node, nodes) else 0


def _model_dtype(fact: Fact) -> Fact:
    word = {"fp32": "float32", "float32": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16",
            "fp16": "float16", "float16": "float16"}.get(str(fact.value).lower(), "float32")
    return Fact(word, fact.location, fact.default)


def _optimizer(fact: Fact) -> Fact:
    word = str(fact.value).lower()
    return Fact("adamw" if word in ("adamw", "adam") else word, fact.location, fact.default)


def _fsdp(keys: VerlKeys, strategy: Fact) -> FsdpFacts | None:
    """The actor's FSDP: version by ``strategy``; FULL_SHARD where it reshards after forward, else
    SHARD_GRAD_OP; ``fsdp_size`` below the world hybrid-shards (verl's create_device_mesh)."""
    if strategy.value not in ("fsdp", "fsdp2"):
        return None
    reshard = keys.flag(f"{ACTOR}.fsdp_config.reshard_after_forward")
    size = keys.count(f"{ACTOR}.fsdp_config.fsdp_size")
    world = _world(keys)
    hybrid = isinstance(size.value, int) and 0 < size.value < world
    name = "HYBRID_SHARD" if hybrid else ("FULL_SHARD" if reshard.value else "SHARD_GRAD_OP")
    where = size if hybrid else reshard
    return FsdpFacts(strategy=Fact(name, where.location, where.default),
                     version=Fact(2 if strategy.value == "fsdp2" else 1, strategy.location, strategy.default),
                     offload=Fact(False, None, f"{VERSION}: CPUOffload off for the actor (param_offload moves "
                                               "shards between phases instead)"),
                     checkpointing=Fact(False))


def _loss(keys: VerlKeys) -> Fact:
    """The loss head: the entropy in the update where ``entropy_coeff`` is not 0 or
    ``calculate_entropy`` asks for it."""
    coeff = keys.value(f"{ACTOR}.entropy_coeff")
    asked = keys.flag(f"{ACTOR}.calculate_entropy")
    if asked.value or (isinstance(coeff.value, (int, float)) and coeff.value):
        where = asked if asked.value else coeff
        return Fact("verl-entropy", where.location, where.default)
    return Fact("verl", None, f"{VERSION}: flash-attn cross-entropy in place")


def _logprob_tokens(keys: VerlKeys, section: str, seq: Fact, split: int) -> Fact:
    """Tokens per GPU in one of ``section``'s log-prob micro-batches: ``log_prob_micro_batch_size_per_gpu``
    sequences of prompt + response (the deprecated global ``log_prob_micro_batch_size`` over the
    data-parallel GPUs), or with ``use_dynamic_bsz`` its ``log_prob_max_token_len_per_gpu``."""
    if keys.flag(f"{ACTOR}.use_dynamic_bsz").value:
        return keys.count(f"{section}.log_prob_max_token_len_per_gpu")
    rows = keys.count(f"{section}.log_prob_micro_batch_size_per_gpu")
    legacy = keys.count(f"{section}.log_prob_micro_batch_size")
    world = _world(keys)
    if rows.value is None and isinstance(legacy.value, int) and world:
        rows = Fact(max(1, legacy.value * split // world), legacy.location)
    if _ints(rows) and isinstance(seq.value, int):
        return Fact(rows.value * -(-seq.value // split), rows.location, rows.default)
    return Fact(None, rows.location, rows.default)


# The log-prob forward's section -> the setting a hint changes (vocabulary.WORDS), by batching
LOGPROB_SETTINGS = {(ROLLOUT, False): "logprob_micro", (ROLLOUT, True): "logprob_tokens",
                    (REF, False): "ref_logprob_micro", (REF, True): "ref_logprob_tokens"}


def needs_reference(keys: VerlKeys) -> bool:
    """verl's ``need_reference_policy`` (trainer/ppo/utils.py:75-79)."""
    return bool(keys.flag("algorithm.use_kl_in_reward").value or keys.flag(f"{ACTOR}.use_kl_loss").value)


def _rollout(keys: VerlKeys, seq: Fact, sp: Fact, estimator: Fact, engine: str = "fsdp") -> Fact:
    """The phases around the update, as facts (recipe_plan makes them ``plan.Rollout``). The
    log-prob forward is the larger of the actor's old-log-prob micro-batch (the rollout section's)
    and, where there is a reference, the reference's own. Each engine's offload switches are its
    own section's (``actor.fsdp_config``, ``actor.megatron``); the Megatron engine's reference rests
    on the GPU as a forward-only model unless ``ref.megatron.param_offload``."""
    split = sp.value if isinstance(sp.value, int) and sp.value > 0 else 1
    dynamic = keys.flag(f"{ACTOR}.use_dynamic_bsz")
    sections = [ROLLOUT] + ([REF] if needs_reference(keys) else [])
    sized = [(_logprob_tokens(keys, section, seq, split), section) for section in sections]
    tokens, section = max(sized, key=lambda pair: pair[0].value if isinstance(pair[0].value, int) else -1)
    facts = {
        "engine": keys.value(f"{ROLLOUT}.name"), "share": keys.value(f"{ROLLOUT}.gpu_memory_utilization"),
        "tensor_parallel": keys.count(f"{ROLLOUT}.tensor_model_parallel_size"),
        "frees_between": keys.flag(f"{ROLLOUT}.free_cache_engine"),
        "params_offloaded": keys.flag(f"{ACTOR}.{SECTIONS[engine]}.param_offload"),
        "optimizer_offloaded": keys.flag(f"{ACTOR}.{SECTIONS[engine]}.optimizer_offload"),
        "critic": _needs_critic(keys, estimator), "critic_model": keys.value("critic.model.path"),
        "critic_params_offloaded": _critic_switch(keys, "param_offload", engine),
        "critic_optimizer_offloaded": _critic_switch(keys, "optimizer_offload", engine),
        "logprob_tokens": tokens, "logprob_setting": Fact(LOGPROB_SETTINGS[section, bool(dynamic.value)]),
        "logprob_row": Fact(0 if dynamic.value or not isinstance(seq.value, int) else -(-seq.value // split)),
        "dynamic": dynamic, "temperature": keys.value(f"{ROLLOUT}.temperature"),
        "prompt": keys.count("data.max_prompt_length"), "response": keys.count("data.max_response_length"),
        "seq_split": Fact(split),
    }
    if engine == "megatron" and needs_reference(keys):
        offloaded = keys.flag(f"{REF}.megatron.param_offload")     # interpolates the actor's unless the job sets it
        facts |= {"reference": Fact(True), "reference_offloaded": offloaded,
                  "reference_follows": Fact(not offloaded.from_file)}
    return Fact(facts, keys.document.locate(f"$.{ROLLOUT}"))


# Each engine's section of the actor's (and critic's) config that holds its offload switches
SECTIONS = {"fsdp": "fsdp_config", "megatron": "megatron"}


def _critic_switch(keys: VerlKeys, name: str, engine: str = "fsdp") -> Fact:
    """A critic offload switch: the legacy workers' ``critic.model.fsdp_config``, else the engine's
    ``critic.fsdp`` (``critic.megatron`` on the Megatron engine)."""
    if engine == "megatron":
        return keys.flag(f"critic.megatron.{name}")
    legacy = f"critic.model.fsdp_config.{name}"
    return keys.flag(legacy) if keys.has(legacy) else keys.flag(f"critic.fsdp.{name}")


def _needs_critic(keys: VerlKeys, estimator: Fact) -> Fact:
    """verl's ``need_critic`` (trainer/ppo/utils.py:96-107): ``critic.enable`` where set, else GAE."""
    enable = keys.value("critic.enable")
    if enable.value is not None:
        return Fact(truthy(enable.value), enable.location)
    return Fact(estimator.value == "gae", estimator.location, estimator.default)


def _unpriced(keys: VerlKeys, strategy: Fact) -> tuple[Feature, ...]:
    """What the job turns on that the phases do not price yet, and which way that leaves them."""
    out = []
    reward = next((keys.value(path) for path in ("reward.reward_model.enable", "reward_model.enable")
                   if keys.flag(path).value), None)
    if reward is not None:
        out.append(Feature(reward, "a reward model served beside the actor (reward.reward_model)"))
    if keys.flag(f"{MODEL}.enable_activation_offload").value:
        out.append(Feature(keys.value(f"{MODEL}.enable_activation_offload"),
                           "activation offloading to the host (model.enable_activation_offload)", "high"))
    if keys.flag(f"{MODEL}.use_fused_kernels").value:
        out.append(Feature(keys.value(f"{MODEL}.use_fused_kernels"),
                           "verl's fused linear log-prob kernels (model.use_fused_kernels)", "high"))
    return tuple(out)


def _refusals(keys: VerlKeys) -> tuple[Refusal, ...]:
    """verl's start-up checks the settings meet, in its words (utils/config.py:100-190,
    workers/config/actor.py:220-260)."""
    out = []
    for path in (f"{ROLLOUT}.name", f"{MODEL}.path"):
        if keys.value(path).value == "???":            # Hydra's mandatory value, left unset
            out.append(Refusal("always", path, f"omegaconf.errors.MissingMandatoryValue: Missing mandatory value: "
                                               f"{path}"))
    if not keys.flag(f"{ACTOR}.use_dynamic_bsz").value:
        for section, param in ((ACTOR, "ppo_micro_batch_size"), (ROLLOUT, "log_prob_micro_batch_size")):
            if all(keys.value(f"{section}.{name}").value is None and f"{section}.{name}" not in keys.document.unknown
                   for name in (param, f"{param}_per_gpu")):
                out.append(Refusal("always", f"{section}.{param}_per_gpu",
                                   f"[{section}] Please set at least one of '{section}.{param}' or "
                                   f"'{section}.{param}_per_gpu'."))
    out += _token_budgets(keys)
    world = _world(keys)
    batch, n = keys.count("data.train_batch_size"), keys.count(f"{ROLLOUT}.n")
    if world and _ints(batch, n) and not keys.flag(f"{ACTOR}.use_dynamic_bsz").value \
            and (batch.value * n.value) % world:
        out.append(Refusal("always", "data.train_batch_size",
                           f"real_train_batch_size ({batch.value * n.value}) must be divisible by minimal possible "
                           f"batch size ({world})"))
    mini = keys.count(f"{ACTOR}.ppo_mini_batch_size")
    if _ints(batch, mini) and batch.value < mini.value:
        out.append(Refusal("always", f"{ACTOR}.ppo_mini_batch_size",
                           f"train_batch_size ({batch.value}) must be >= actor.ppo_mini_batch_size ({mini.value})"))
    return tuple(out)


def _token_budgets(keys: VerlKeys) -> list[Refusal]:
    """Under ``use_dynamic_bsz`` a token budget below one sequence at its caps: verl's
    ``rearrange_micro_batches`` asserts ``max_token_len >= max_seq_len`` (utils/seqlen_balancing.py:384,
    max_token_len = the budget x the Ulysses size, workers/engine/utils.py:111) when a sequence
    reaches them."""
    if not keys.flag(f"{ACTOR}.use_dynamic_bsz").value:
        return []
    cap = longest(keys.count("data.max_prompt_length"), keys.count("data.max_response_length")).value
    sp = keys.count(f"{ACTOR}.ulysses_sequence_parallel_size").value
    sections = [(ACTOR, "ppo_max_token_len_per_gpu"), (ROLLOUT, "log_prob_max_token_len_per_gpu")]
    sections += [(REF, "log_prob_max_token_len_per_gpu")] if needs_reference(keys) else []
    out = []
    for section, name in sections:
        budget = keys.count(f"{section}.{name}").value
        if _ints(Fact(budget), Fact(sp), Fact(cap)) and budget * sp < cap:
            out.append(Refusal("always", f"{section}.{name}", f"AssertionError: max_token_len must be greater than "
                               f"the sequence length. Got max_token_len={budget * sp} and max_seq_len={cap} (once "
                               "a sequence reaches max_prompt_length + max_response_length)"))
    return out
