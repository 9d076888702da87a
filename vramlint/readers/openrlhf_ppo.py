"""OpenRLHF's PPO trainer under Ray, ``openrlhf.cli.train_ppo_ray`` → a :class:`Recipe` whose
update is the actor's DeepSpeed step and whose rollout facts are the RL phases around it
(``plan.Rollout``, memory/rl.py).

Read from the wheels (``openrlhf-0.11.2``, sha256 c969d70d…, the dotted flags; ``0.10.1``
8674d49b…, the last flat one; ``0.9.5`` for ``--prompt_max_len`` / ``--generate_max_len``):

- **Placement** (cli/train_ppo_ray.py:38-140 at 0.11.2). ``--train.colocate_all`` (flat
  ``--colocate_all_models``) puts the actor, the reference, the critic, the reward model and the
  vLLM engines in one placement group of ``actor.num_nodes x actor.num_gpus_per_node`` GPUs, each
  model a Ray actor of ``num_gpus=0.2``: one process per model and one vLLM worker on every GPU.
  It asserts ``actor GPUs == vllm.num_engines x vllm.tensor_parallel_size``. Without it each role
  has GPUs of its own (``--X.num_nodes`` x ``--X.num_gpus_per_node``), the reference beside the
  actor under ``--train.colocate_actor_ref``, the reward model beside the critic under
  ``--train.colocate_critic_reward``; the vLLM engines take ``num_engines x TP`` more. Each
  trained model's GPUs are a job: the actor's, and there the critic's (``Recipe.groups``).
- **Models**. The reference exists where ``--algo.kl.init_coef`` > 0 (default 0.01); a critic where
  ``--algo.advantage.estimator`` is ``gae`` (the default), of ``--critic.model_name_or_path``, else
  the first reward model (:605-612); a reward model unless ``--reward.remote_url``. The reference
  and the reward model are DeepSpeed eval engines (``get_ds_eval_config``: ZeRO-3 when training is,
  else stage 0, their ZeRO-3 shards on the host with ``--ref.offload`` / ``--reward.offload``).
- **Sleep**. ``--vllm.enable_sleep`` (only with colocate_all, :669-671) puts the engines to sleep
  outside generation (samples_generator.py:104-120); ``--ds.enable_sleep`` moves each trained
  model's optimizer states, fp32 master, gradients and reduce buckets to the host outside its
  ``fit`` (``offload_deepspeed_states``: never the 16-bit parameters, utils/deepspeed/
  deepspeed_utils.py:151-190) and trains the critic, then the actor, one after the other
  (ppo_trainer.py:270-290); without it they train at the same time.
- **Batches**. The update's micro-batch is ``--train.micro_batch_size`` rows of up to
  ``--data.max_len`` tokens (prompt + response), or under ``--train.dynamic_batch_enable`` one
  packed row of ``--train.max_tokens_per_gpu``; the experience forward's is
  ``--rollout.micro_batch_size`` rows, or ``--rollout.max_tokens_per_gpu`` (default: the train
  budget, :657-660).
"""

from __future__ import annotations

from dataclasses import replace

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact
from vramlint.readers.openrlhf import (_attention, _deepspeed, _lora, _precision, dotted, flat_spelling,
                                        program_flags, read_openrlhf, unrecognized)
from vramlint.readers.recipe import TRAIN, Engines, Feature, Keys, Recipe, Refusal, longest, positive, truthy

VERSION, FLAT, OLD = "OpenRLHF 0.11.2", "OpenRLHF 0.10.1", "OpenRLHF 0.9.5"
# Flat flags (0.10.1 and before) -> their dotted names from 0.10.2 (the same argparse defaults).
ALIASES = {
    "pretrain": "actor.model_name_or_path", "reward_pretrain": "reward.model_name_or_path",
    "critic_pretrain": "critic.model_name_or_path", "remote_rm_url": "reward.remote_url",
    "micro_train_batch_size": "train.micro_batch_size", "train_batch_size": "train.batch_size",
    "micro_rollout_batch_size": "rollout.micro_batch_size", "rollout_batch_size": "rollout.batch_size",
    "n_samples_per_prompt": "rollout.n_samples_per_prompt", "max_new_tokens": "rollout.max_new_tokens",
    "temperature": "rollout.temperature", "max_len": "data.max_len",
    "zero_stage": "ds.zero_stage", "param_dtype": "ds.param_dtype", "attn_implementation": "ds.attn_implementation",
    "gradient_checkpointing": "actor.gradient_checkpointing_enable", "adam_offload": "ds.adam_offload",
    "packing_samples": "ds.packing_samples", "load_in_4bit": "ds.load_in_4bit", "lora_rank": "ds.lora.rank",
    "lora_alpha": "ds.lora.alpha", "target_modules": "ds.lora.target_modules", "lora_dropout": "ds.lora.dropout",
    "ring_attn_size": "ds.ring_attn_size", "ds_tensor_parallel_size": "ds.tensor_parallel_size",
    "use_liger_kernel": "ds.use_liger_kernel", "deepspeed_enable_sleep": "ds.enable_sleep",
    "use_dynamic_batch": "train.dynamic_batch_enable", "train_max_tokens_per_gpu": "train.max_tokens_per_gpu",
    "rollout_max_tokens_per_gpu": "rollout.max_tokens_per_gpu",
    "colocate_all_models": "train.colocate_all", "colocate_actor_ref": "train.colocate_actor_ref",
    "colocate_critic_reward": "train.colocate_critic_reward", "async_train": "train.async_enable",
    "vllm_num_engines": "vllm.num_engines", "vllm_tensor_parallel_size": "vllm.tensor_parallel_size",
    "vllm_gpu_memory_utilization": "vllm.gpu_memory_utilization", "vllm_enable_sleep": "vllm.enable_sleep",
    "enforce_eager": "vllm.enforce_eager", "advantage_estimator": "algo.advantage.estimator",
    "init_kl_coef": "algo.kl.init_coef", "use_kl_loss": "algo.kl.use_loss", "max_norm": "actor.max_norm",
    **{f"{role}_{what}": f"{role}.{what}" for role in ("actor", "critic", "ref", "reward")
       for what in ("num_nodes", "num_gpus_per_node")},
}
# Flags of the releases before 0.9.10 only: the sequence cap was prompt + generation
OLD_FLAGS = ("prompt_max_len", "generate_max_len")
# A flat flag with no one dotted name: both frozen models' ZeRO-3 shards on the host (0.10.1 and before)
FLAT_ONLY = {"ref_reward_offload"}
# The vLLM settings train_ppo_ray lets its users set, as a hint says them (the rest it fixes)
FLAT_ENGINE_FLAGS = {"gpu_memory_utilization": "--vllm_gpu_memory_utilization {}",
                     "tensor_parallel_size": "--vllm_tensor_parallel_size {}", "max_model_len": "--max_len {}"}
ENGINE_FLAGS = {VERSION: {"gpu_memory_utilization": "--vllm.gpu_memory_utilization {}",
                          "tensor_parallel_size": "--vllm.tensor_parallel_size {}",
                          "max_model_len": "--data.max_len {}"},
                FLAT: FLAT_ENGINE_FLAGS, OLD: FLAT_ENGINE_FLAGS}
# The vLLM each release's ``openrlhf[vllm]`` extra pins (the wheels' METADATA): its engines' release
VLLM_PINS = {VERSION: "0.29.0", FLAT: "0.19.0", OLD: "0.17.0"}
# Defaults that changed between the releases a spelling covers (cli/train_ppo_ray.py of each wheel)
DEFAULTS = {VERSION: {"train.micro_batch_size": 1, "rollout.micro_batch_size": 1},
            FLAT: {"train.micro_batch_size": 1, "rollout.micro_batch_size": 1},
            OLD: {"train.micro_batch_size": 4, "rollout.micro_batch_size": 8}}
# algo.advantage.estimator -> the stage in vramlint's words, and the algorithm's name
STAGES = {"gae": "ppo", "group_norm": "grpo", "dr_grpo": "grpo", "rloo": "rloo"}
ESTIMATORS = {"gae": "PPO (GAE)", "group_norm": "GRPO", "dr_grpo": "Dr. GRPO", "rloo": "RLOO",
              "reinforce": "REINFORCE++", "reinforce_baseline": "REINFORCE++-baseline"}
ROLES = ("actor", "ref", "critic", "reward")
WORDS = {"ref": "the reference", "critic": "the critic", "reward": "the reward model"}
SPELLING = {"micro_batch": "--train.micro_batch_size", "seq_len": "--data.max_len",
            "grad_checkpointing": "--actor.gradient_checkpointing_enable", "lora_rank": "--ds.lora.rank",
            "load_in_4bit": "--ds.load_in_4bit", "model": "--actor.model_name_or_path",
            "gpus_per_node": "--actor.num_gpus_per_node", "nodes": "--actor.num_nodes"}
FLAT_SPELLING = {"micro_batch": "--micro_train_batch_size", "seq_len": "--max_len",
                 "grad_checkpointing": "--gradient_checkpointing", "lora_rank": "--lora_rank",
                 "load_in_4bit": "--load_in_4bit", "model": "--pretrain",
                 "gpus_per_node": "--actor_num_gpus_per_node", "nodes": "--actor_num_nodes"}


# The sections of train_ppo_ray's flags that change no GPU memory (checkpoints, logging, evaluation,
# data files); data.max_len does
QUIET = ("ckpt.", "logger.", "eval.", "data.")


def matters(key: str) -> bool:
    """Whether a flag changes the job's memory: a flat one this reader reads (``ALIASES``, the old
    length flags), a dotted one outside checkpoints, logging, evaluation and data files."""
    if "." not in key:
        return key in ALIASES or key in OLD_FLAGS or key in FLAT_ONLY
    return key == "data.max_len" or not key.startswith(QUIET)


def read_openrlhf_job(document: Document, trainer: Fact | None = None) -> Recipe:
    """Any OpenRLHF training command: the PPO trainer's here, the others' in readers/openrlhf.py."""
    if trainer is not None and trainer.value == "ppo":
        return read_ppo(document, trainer)
    return read_openrlhf(document, trainer)


def _release(written: dict) -> str:
    """The release whose flags and defaults the command is read with: the dotted flags are
    0.11.2's; flat ones 0.10.1's, or 0.9.5's where the cap is ``--prompt_max_len`` +
    ``--generate_max_len``."""
    if any(key in OLD_FLAGS for key in written):
        return OLD
    return FLAT if flat_spelling(written, ALIASES) or FLAT_ONLY.intersection(written) else VERSION


def read_ppo(document: Document, trainer: Fact) -> Recipe:
    """One ``train_ppo_ray`` command as its trainer runs it: the actor's update, with the rollout,
    the experience forward and the other models as the RL phases' facts."""
    written = dict(document.data or {})
    release = _release(written)
    program, known = program_flags(trainer, release != VERSION, document.path)
    document = dotted(document, known, ALIASES)
    keys = Keys(document, f"{release} default")
    defaults = DEFAULTS[release]
    estimator = keys.get("algo.advantage.estimator", default="gae", why=f"{release} default")
    stage = Fact(STAGES.get(str(estimator.value), "ppo"), estimator.location, estimator.default)
    precision, weights = _precision(keys, release)
    micro = keys.get("train.micro_batch_size", default=defaults["train.micro_batch_size"], convert=positive,
                     why=f"{release} --train.micro_batch_size default")
    dynamic = keys.get("train.dynamic_batch_enable", default=False, convert=truthy)
    seq = _sequence(keys, release)
    budget = keys.get("train.max_tokens_per_gpu", default=16192, convert=positive, why=f"{release} default")
    if dynamic.value:
        micro = Fact(1, dynamic.location, "one packed row (--train.dynamic_batch_enable)")
    config, positions = _deepspeed(keys, precision, micro, document.positions["$"], dynamic)
    document.data["deepspeed"] = config
    document.positions.update(positions)
    document.positions.setdefault("$.deepspeed", document.positions["$"])
    rank, lora_targets, dropout = _lora(keys, release)
    ring = keys.get("ds.ring_attn_size", default=1, convert=positive)
    actor = Recipe(
        document=document, framework="openrlhf", title=release, task=TRAIN, stage=stage,
        model=keys.get("actor.model_name_or_path"), revision=Fact("main"), micro_batch=micro,
        grad_accum=Fact(None, None, "DeepSpeed derives it: train_batch_size / (micro-batch x data-parallel GPUs)"),
        seq_len=_update_tokens(seq, budget) if dynamic.value else seq,
        packing=Fact(True, dynamic.location) if dynamic.value or (isinstance(ring.value, int) and ring.value > 1)
        else keys.get("ds.packing_samples", default=False, convert=truthy),
        grad_checkpointing=keys.get("actor.gradient_checkpointing_enable", default=False, convert=truthy,
                                    why=f"{release}: off unless --actor.gradient_checkpointing_enable"),
        mixed_precision=precision, weights_dtype=weights,
        optimizer=Fact("adamw", None, f"{release}: DeepSpeed's AdamW (--actor.optim adam)"),
        lora_rank=rank, lora_targets=lora_targets, lora_dropout=dropout,
        load_in_4bit=keys.get("ds.load_in_4bit", default=False, convert=truthy), load_in_8bit=Fact(False),
        attn=_attention(keys, release), deepspeed=Fact(config, document.locate("$.deepspeed")), fsdp=None,
        max_grad_norm=keys.get("actor.max_norm", default=1.0, why=f"{release} --actor.max_norm default"),
        reference=Fact(False, None, f"{release}: the reference is a Ray actor of its own (memory/rl.py)"),
        sequence_split=ring, tensor_parallel=Fact(1), hf_trainer=False,
        keys=SPELLING if release == VERSION else FLAT_SPELLING, features=_unpriced(keys),
        switches=_switches(keys), release=release,
        vocabulary="openrlhf-ppo" if release == VERSION else "openrlhf-ppo-flat",
        notes=(f"{ESTIMATORS.get(str(estimator.value), estimator.value)} (--algo.advantage.estimator "
               f"{estimator.value})", *_placement_notes(keys, _models(keys, estimator))),
        refusals=unrecognized(written, program, known) + _refusals(keys, release),
        rollout=_rollout(keys, seq, budget, estimator, defaults, release),
        gpus=_role_facts(keys, "actor", release),
    )
    return replace(actor, groups=_critic_group(actor, keys, estimator, release)
                   + _frozen_groups(actor, keys, estimator, release),
                   engines=_engines(keys, seq, actor.model, release))


def _critic_group(actor: Recipe, keys: Keys, estimator: Fact, release: str) -> tuple[Recipe, ...]:
    """The critic on GPUs of its own (no colocate_all: cli/train_ppo_ray.py:108-127), a job of its
    own: ``CriticModelActor`` trains the value model under the actor's DeepSpeed config
    (``strategy.get_ds_train_config()``), micro-batch and ``--actor.gradient_checkpointing_enable``
    (trainer/ray/ppo_critic.py:186-256), its loss over one value a token (no vocabulary logits);
    under ``--train.colocate_critic_reward`` the reward model's eval engine, a process of its own,
    rests beside it."""
    models = _models(keys, estimator)
    if not models["critic"] or truthy(keys.raw("train.colocate_all")):
        return ()
    beside = models["reward"] and truthy(keys.raw("train.colocate_critic_reward"))
    model = _critic_model(keys)
    return (_group(actor, keys, "critic", "critic", model, release,
                   {"reward": Fact(beside, keys.get("train.colocate_critic_reward").location),
                    "processes": Fact(1 + beside), "logprob_tokens": Fact(0)},
                   switches={"loss": Fact("none", model.location, "CriticModel: a value head over the last hidden "
                                          "states, one value a token")},
                   max_grad_norm=keys.get("critic.max_norm", default=1.0, why=f"{release} --critic.max_norm default"),
                   notes=("the critic's GPUs: its DeepSpeed update under the actor's ZeRO config and micro-batch"
                          + (", the reward model beside it (colocate_critic_reward)" if beside else ""),)),)


# How each group's model flag is spelled, dotted and flat (the reference loads the actor's model)
MODEL_FLAGS = {"critic": ("--critic.model_name_or_path", "--critic_pretrain"),
               "ref": ("--actor.model_name_or_path", "--pretrain"),
               "reward": ("--reward.model_name_or_path", "--reward_pretrain")}


def _group(actor: Recipe, keys: Keys, role: str, name: str, model: Fact, release: str, facts: dict,
           **fields) -> Recipe:
    """Another GPU group of the job (``Recipe.groups``), a recipe of its own on the role's
    ``num_gpus_per_node`` x ``num_nodes``, spelled by its own flags: the actor's rollout facts with
    nothing else on its GPUs (no engine, no other model, one process) but what ``facts`` says."""
    flat = actor.release != VERSION
    spelling = {**actor.keys, "model": MODEL_FLAGS[role][flat],
                "gpus_per_node": f"--{role}_num_gpus_per_node" if flat else f"--{role}.num_gpus_per_node",
                "nodes": f"--{role}_num_nodes" if flat else f"--{role}.num_nodes"}
    alone = {**actor.rollout.value, "colocated": Fact(False), "critic": Fact(False), "reference": Fact(False),
             "reward": Fact(False), "processes": Fact(1), "engine_process": Fact(False), **facts}
    return replace(actor, model=model, role=name, keys=spelling, groups=(), engines=(), refusals=(), features=(),
                   value_head=role != "ref", rollout=Fact(alone, actor.rollout.location),
                   gpus=_role_facts(keys, role, release), **fields)


def _sequence(keys: Keys, release: str) -> Fact:
    """The longest sequence, prompt + response: ``--data.max_len`` (default 2048), or before
    0.9.10 ``--prompt_max_len`` + ``--generate_max_len`` (1024 + 1024)."""
    if release != OLD:
        return keys.get("data.max_len", default=2048, convert=positive, why=f"{release} --data.max_len default")
    return longest(keys.get("prompt_max_len", default=1024, convert=positive, why=f"{release} default"),
                   keys.get("generate_max_len", default=1024, convert=positive, why=f"{release} default"))


def _update_tokens(seq: Fact, budget: Fact) -> Fact:
    """Under ``--train.dynamic_batch_enable`` one packed row of up to the token budget; a sequence
    longer than the budget makes a micro-batch of its own."""
    if isinstance(budget.value, int) and isinstance(seq.value, int):
        return Fact(max(budget.value, seq.value), budget.location, budget.default)
    return budget


def _role_facts(keys: Keys, role: str, release: str) -> tuple[Fact, Fact]:
    """A role's GPUs per node and nodes (``--actor.num_gpus_per_node`` x ``--actor.num_nodes``, 8 x 1
    unset), on which its ZeRO shards (the actor's: under colocate_all every model and engine)."""
    return (keys.get(f"{role}.num_gpus_per_node", default=8, convert=positive, why=f"{release} default"),
            keys.get(f"{role}.num_nodes", default=1, convert=positive, why=f"{release} default"))


def _role_gpus(keys: Keys, role: str) -> int:
    per_node, nodes = (fact.value for fact in _role_facts(keys, role, ""))
    return per_node * nodes if _ints(per_node, nodes) else 0


def _ints(*values) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


def _models(keys: Keys, estimator: Fact) -> dict[str, bool]:
    """Which models the job builds (cli/train_ppo_ray.py:96-140, 605-612)."""
    kl = keys.get("algo.kl.init_coef", default=0.01).value
    return {"ref": not isinstance(kl, (int, float)) or kl > 0,
            "critic": estimator.value == "gae",
            "reward": not keys.raw("reward.remote_url") and not keys.raw("train.agent_func_path")}


def _critic_model(keys: Keys) -> Fact:
    """The critic's weights: ``--critic.model_name_or_path``, else the first reward model, else
    (with a remote reward) the actor's (cli/train_ppo_ray.py:605-612)."""
    for path in ("critic.model_name_or_path", "reward.model_name_or_path"):
        fact = keys.get(path)
        if fact.value:
            return Fact(str(fact.value).split(",")[0], fact.location, fact.default)
    return keys.get("actor.model_name_or_path")


def _rollout(keys: Keys, seq: Fact, budget: Fact, estimator: Fact, defaults: dict, release: str) -> Fact:
    """The phases around the update, as facts (recipe_plan makes them ``plan.Rollout``)."""
    models = _models(keys, estimator)
    together = keys.get("train.colocate_all", default=False, convert=truthy)
    sleep = keys.get("ds.enable_sleep", default=False, convert=truthy)
    if sleep.value and truthy(keys.raw("ds.adam_offload")):     # deepspeed_utils.py:155-157: nothing to move
        sleep = Fact(False, sleep.location, "offload_deepspeed_states returns at once under --ds.adam_offload")
    engine_sleep = keys.get("vllm.enable_sleep", default=False, convert=truthy)
    # under --train.async_enable the engines get GPUs of their own even with colocate_all (:75, ``_engines``)
    engine_here = Fact(bool(together.value) and not truthy(keys.raw("train.async_enable")), together.location,
                       together.default)
    if not together.value:                  # cli/train_ppo_ray.py:669-671: sleep only with colocate_all
        engine_sleep = Fact(False, engine_sleep.location, "--vllm.enable_sleep is set to False without colocate_all")
    engines = keys.get("vllm.num_engines", default=None, convert=positive,
                       why=f"no --vllm.num_engines: {release} generates with vLLM engines only, no model.generate")
    if "vllm.num_engines" in keys.document.unknown:     # written, its count only the run knows: vLLM generates
        engines = Fact(1, None, "--vllm.num_engines is set to a value only the run knows")
    dynamic = keys.get("train.dynamic_batch_enable", default=False, convert=truthy)
    if dynamic.value:
        tokens = keys.get("rollout.max_tokens_per_gpu", default=budget.value, convert=positive,
                          why=f"{release}: --train.max_tokens_per_gpu")
        if tokens.default:
            tokens = Fact(tokens.value, budget.location, budget.default)
        if isinstance(tokens.value, int) and isinstance(seq.value, int):
            tokens = Fact(max(tokens.value, seq.value), tokens.location, tokens.default)
    else:
        rows = keys.get("rollout.micro_batch_size", default=defaults["rollout.micro_batch_size"], convert=positive,
                        why=f"{release} --rollout.micro_batch_size default")
        tokens = Fact(rows.value * seq.value if _ints(rows.value, seq.value) else None, rows.location, rows.default)
    stage = keys.get("ds.zero_stage", default=2, convert=positive).value
    colocated = {"ref": together.value or keys.get("train.colocate_actor_ref", default=False, convert=truthy).value,
                 "critic": together.value, "reward": together.value}
    facts = {
        "framework": Fact("openrlhf"),
        "engine": Fact("vllm" if _ints(engines.value) else "none", engines.location, engines.default),
        "share": keys.get("vllm.gpu_memory_utilization", default=0.95, convert=_number, why=f"{release} default"),
        "tensor_parallel": keys.get("vllm.tensor_parallel_size", default=1, convert=positive),
        "colocated": engine_here, "frees_between": engine_sleep,
        "params_offloaded": Fact(False, None, f"{release}: offload_deepspeed_states keeps the 16-bit parameters"),
        "optimizer_offloaded": sleep,
        "critic": Fact(models["critic"] and colocated["critic"], estimator.location, estimator.default),
        "critic_model": _critic_model(keys),
        "critic_params_offloaded": Fact(False), "critic_optimizer_offloaded": sleep,
        "reference": Fact(models["ref"] and colocated["ref"]), "reference_offloaded": _offloaded(keys, "ref", stage),
        "reward": Fact(models["reward"] and colocated["reward"]),
        "reward_model": keys.get("reward.model_name_or_path"), "reward_offloaded": _offloaded(keys, "reward", stage),
        "processes": Fact(1 + sum(1 for role in ("ref", "critic", "reward") if models[role] and colocated[role])),
        "engine_process": Fact(bool(engine_here.value), together.location, "a vLLM worker on each GPU of the group"),
        "logit_bytes": Fact(6, None, "models/actor.py:267: the logits cast to fp32 beside their bf16 copy"),
        "one_switch": Fact(True, None, "--ds.enable_sleep offloads every trained model's states"),
        "logprob_tokens": tokens, "logprob_setting": Fact("logprob_tokens" if dynamic.value else "logprob_micro"),
        "logprob_row": Fact(0 if dynamic.value or not isinstance(seq.value, int) else seq.value),
        "dynamic": dynamic, "temperature": Fact(1.0, None, "divided in place (models/actor.py:270-271)"),
    }
    return Fact(facts, together.location or keys.document.locate("$"))


def _offloaded(keys: Keys, role: str, stage: object) -> Fact:
    """A frozen model's ZeRO-3 shards on the host: ``--ref.offload`` / ``--reward.offload``, or the
    flat ``--ref_reward_offload`` for both; below ZeRO-3 its eval engine keeps the whole model
    (DeepSpeed offloads parameters only at stage 3)."""
    fact = keys.get(f"{role}.offload", "ref_reward_offload", default=False, convert=truthy)
    return Fact(stage == 3 and bool(fact.value), fact.location, fact.default)


def _number(value):
    try:
        return float(value) if isinstance(value, str) else value
    except ValueError:
        return value


def _placement_notes(keys: Keys, models: dict[str, bool]) -> list[str]:
    """Where each role runs, in OpenRLHF's words."""
    if truthy(keys.raw("train.colocate_all")):
        names = ["the actor"] + [WORDS[role] for role in ("ref", "critic", "reward") if models[role]]
        return [f"hybrid engine (colocate_all): {', '.join(names)} and the vLLM engines share each of the actor's "
                "GPUs, a process each"]
    sizes = {role: _role_gpus(keys, role) for role in ROLES}
    engines, tp = keys.get("vllm.num_engines", convert=positive).value, \
        keys.get("vllm.tensor_parallel_size", default=1, convert=positive).value
    parts = [f"actor {sizes['actor']} GPUs" + (" with the reference" if truthy(keys.raw("train.colocate_actor_ref"))
                                               else "")]
    parts.append(f"critic {sizes['critic']} GPUs" + (" with the reward model"
                                                     if truthy(keys.raw("train.colocate_critic_reward")) else ""))
    if _ints(engines, tp):
        parts.append(f"vLLM {engines} x TP {tp} = {engines * tp} GPUs")
    return ["separate placements: " + ", ".join(parts) + "; the actor's GPUs here"
            + (", the critic's its own estimate" if models["critic"] else "")]


def _unpriced(keys: Keys) -> tuple[Feature, ...]:
    """What the job runs that the phases do not price, and which way that leaves them."""
    out = []
    together = truthy(keys.raw("train.colocate_all"))
    estimator = keys.get("algo.advantage.estimator", default="gae")
    if estimator.value == "gae" and together and not truthy(keys.raw("ds.enable_sleep")):
        out.append(Feature(keys.get("train.colocate_all"), "the critic trains at the same time as the actor on the "
                           "same GPUs (no --ds.enable_sleep): its activations and gradients"))
    if truthy(keys.raw("train.async_enable")):
        out.append(Feature(keys.get("train.async_enable"), "asynchronous training (--train.async_enable): "
                           "generation overlaps the update"))
    return tuple(out)


def _engines(keys: Keys, seq: Fact, model: Fact, release: str) -> tuple[Engines, ...]:
    """The vLLM engines on GPUs of their own (no colocate_all, or asynchronous training): each an
    ``LLM`` built as ``create_vllm_engines`` builds it (trainer/ray/vllm_engine.py:262-279 at
    0.11.2): the actor's model in bfloat16 over ``--vllm.tensor_parallel_size`` GPUs, ``max_model_len``
    the job's ``--data.max_len``, ``--vllm.gpu_memory_utilization`` (OpenRLHF's default 0.95),
    ``--vllm.enforce_eager`` and ``--vllm.enable_prefix_caching``; checked as that ``vllm serve``
    config at the release the framework's vllm extra pins."""
    if truthy(keys.raw("train.colocate_all")) and not truthy(keys.raw("train.async_enable")):
        return ()
    engines = keys.get("vllm.num_engines", convert=positive)
    if not _ints(engines.value) and "vllm.num_engines" not in keys.document.unknown:
        return ()
    tp = keys.get("vllm.tensor_parallel_size", default=1, convert=positive)
    args = {"model": model, "tensor_parallel_size": tp, "max_model_len": seq, "dtype": Fact("bfloat16"),
            "gpu_memory_utilization": keys.get("vllm.gpu_memory_utilization", default=0.95, convert=_number),
            "enforce_eager": keys.get("vllm.enforce_eager", default=False, convert=truthy),
            "enable_prefix_caching": keys.get("vllm.enable_prefix_caching", default=False, convert=truthy)}
    top = keys.document.positions["$"]
    data = {key: fact.value for key, fact in args.items() if fact.value is not None}
    positions = {"$": top, **{f"$.{key}": (fact.location.line, fact.location.column) for key, fact in args.items()
                              if fact.location is not None and key in data}}
    count = f"{engines.value} engine(s)" if _ints(engines.value) else "--vllm.num_engines (a value the run knows)"
    unstated = ", ".join(f"{key} {fact.value} ({fact.default or 'create_vllm_engines'})" for key, fact in args.items()
                         if key in data and fact.location is None)
    return (Engines("vLLM engines", Document(keys.document.path, keys.document.text, data, positions,
                                             elsewhere=dict(keys.document.elsewhere)),
                    VLLM_PINS[release], f"{release}'s vllm extra (pip install openrlhf[vllm])",
                    f"the vLLM engines' GPUs: {count} x --vllm.tensor_parallel_size {tp.value}, each an LLM as "
                    f"create_vllm_engines builds it" + (f"; their defaults: {unstated}" if unstated else ""),
                    ENGINE_FLAGS[release]),)


def _frozen_groups(actor: Recipe, keys: Keys, estimator: Fact, release: str) -> tuple[Recipe, ...]:
    """The models that train nothing, on GPUs of their own (no colocate_all: cli/train_ppo_ray.py:
    93-140): the reference unless ``--train.colocate_actor_ref``, the reward model unless beside the
    critic (``--train.colocate_critic_reward``); each a job of its own on its ``num_gpus_per_node`` x
    ``num_nodes``: its eval engine and the no-grad forward ``make_experience`` runs on it over
    ``--rollout.micro_batch_size`` rows (memory/rl.frozen). The reference makes the log-probs (6 B
    a logit, as the actor's log-prob forward); the reward model is a value model (one number a
    token). A reward model that is a remote URL or an agent function has no GPUs."""
    models = _models(keys, estimator)
    if truthy(keys.raw("train.colocate_all")):
        return ()
    out = []
    if models["ref"] and not truthy(keys.raw("train.colocate_actor_ref")):
        out.append(_frozen(actor, keys, "ref", actor.model, release))
    reward = keys.get("reward.model_name_or_path")
    beside_critic = models["critic"] and truthy(keys.raw("train.colocate_critic_reward"))
    if models["reward"] and reward.value and not beside_critic:
        out.append(_frozen(actor, keys, "reward", Fact(str(reward.value).split(",")[0], reward.location,
                                                          reward.default), release))
    return tuple(out)


def _frozen(actor: Recipe, keys: Keys, role: str, model: Fact, release: str) -> Recipe:
    """One frozen model's group (``ReferenceModelActor`` / ``RewardModelActor``, trainer/ray/
    launcher.py:105-200 at 0.11.2), a recipe that trains nothing (``trains`` off)."""
    ref = role == "ref"
    name = "reference" if ref else "reward model"
    logits = actor.rollout.value["logit_bytes"] if ref else \
        Fact(0, None, "a value head: one number a token (models/model.py get_llm_for_sequence_regression)")
    return _group(actor, keys, role, name, model, release,
                  {"trains": Fact(False), "logit_bytes": logits, "offload_setting": Fact(f"{role}_offload"),
                   "offloaded": actor.rollout.value["reference_offloaded" if ref else "reward_offloaded"]},
                  switches={"loss": Fact("none", None, "no loss: a forward that trains nothing")},
                  notes=(f"the {name}'s GPUs: its 16-bit eval engine and the experience forward over "
                         "--rollout.micro_batch_size rows, no training",))


def _switches(keys: Keys) -> dict[str, Fact]:
    """The actor's loss head: Liger's with ``--ds.use_liger_kernel``, else fp32 logits and
    flash-attn's cross-entropy (models/actor.py:266-289)."""
    liger = keys.get("ds.use_liger_kernel", default=False, convert=truthy)
    if liger.value:
        return {"loss": Fact("liger", liger.location)}
    return {"loss": Fact("openrlhf", None, "Actor.forward: fp32 logits, flash-attn cross-entropy")}


def _refusals(keys: Keys, release: str) -> tuple[Refusal, ...]:
    """train_ppo_ray's start-up assertions the flags meet, in its words (cli/train_ppo_ray.py at 0.11.2)."""
    out = []
    engines = keys.get("vllm.num_engines", convert=positive).value
    tp = keys.get("vllm.tensor_parallel_size", default=1, convert=positive).value
    actor = _role_gpus(keys, "actor")
    together = truthy(keys.raw("train.colocate_all"))
    if together and not truthy(keys.raw("train.async_enable")) and _ints(engines, tp, actor) and actor != engines * tp:
        out.append(Refusal("always", "vllm.num_engines", f"AssertionError: actor_num_nodes * actor_num_gpus_per_node "
                           f"must be equal to vllm_num_engines * vllm_tensor_parallel_size, got {actor} and "
                           f"{engines * tp}"))
    kl = keys.get("algo.kl.init_coef", default=0.01).value
    if (together or truthy(keys.raw("train.colocate_actor_ref"))) and (not isinstance(kl, (int, float)) or kl > 0) \
            and _role_gpus(keys, "actor") != _role_gpus(keys, "ref"):
        out.append(Refusal("always", "ref.num_gpus_per_node", "AssertionError: num_nodes and num_gpus_per_node must "
                           "be the same when colocate actor and ref model."))
    packing = truthy(keys.raw("ds.packing_samples")) or truthy(keys.raw("train.dynamic_batch_enable"))
    if packing and not _ints(engines) and "vllm.num_engines" not in keys.document.unknown:
        out.append(Refusal("always", "ds.packing_samples", "AssertionError: Only support `--packing_samples` with "
                           "vLLM."))
    estimator = keys.get("algo.advantage.estimator", default="gae").value
    n = keys.get("rollout.n_samples_per_prompt", default=1, convert=positive).value
    if estimator in ("rloo", "reinforce_baseline", "group_norm", "dr_grpo") and _ints(n) and n <= 1:
        out.append(Refusal("always", "rollout.n_samples_per_prompt", f"AssertionError: {estimator} requires "
                           "n_samples_per_prompt > 1"))
    return tuple(out)
