"""A training recipe and the DeepSpeed or FSDP setup it names → the Plan of the job they describe.

A recipe is the training script's side of the job: it fills what a DeepSpeed file leaves
``"auto"`` (as the HF Trainer does: ``HfTrainerDeepSpeedConfig``), and with no DeepSpeed file it is
the whole job — plain PyTorch (DDP over the GPUs) or FSDP as the recipe turns it on. Values come
from, in order: the command line (and per-file overrides), the recipe, the framework's default;
each keeps its origin, and a command-line value that contradicts the recipe is reported.

The one precision rule, whatever describes the job: DeepSpeed computes in the precision its file
says (``"auto"`` filled from the recipe's ``bf16``/``fp16``); otherwise the weights are loaded in
the recipe's dtype (``"auto"``: the checkpoint's) and the compute dtype is the autocast dtype when
mixed precision is on over fp32 weights, else the weights' own dtype (``Plan.__post_init__``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramlint.hardware import Cluster
from vramlint.models.peft import peft_default_targets
from vramlint.models.shape import ModelShape
from vramlint.memory.parts.loss import WORDS as LOSS_WORDS
from vramlint.errors import UnplannableError
from vramlint.plan import (OPTIMIZERS, Flags, Origin, Plan, Resident, Rollout, flag_text, fsdp_adapter_dtype,
                           fsdp_weights_dtype, plan_from_accelerate, plan_from_deepspeed, stage_settings,
                           workload_from_flags)
from vramlint.readers.accelerate import PRECISION, AccelerateConfig
from vramlint.readers.deepspeed import DeepSpeedConfig, Fact
from vramlint.readers.recipe import SWITCHES, Recipe
from vramlint.vocabulary import refused_by

# The recipe settings the command line states too, under the same names (``--micro-batch`` ...).
SETTINGS = ("micro_batch", "seq_len", "grad_accum", "mixed_precision", "grad_checkpointing", "optimizer", "lora_rank",
            "lora_targets", "lora_dropout", "load_in_4bit", "load_in_8bit", "attn", "weights_dtype", "adapter_dtype",
            "sync_each_batch")


@dataclass(frozen=True)
class Job:
    """What a recipe and its DeepSpeed file come to: the plan, the command-line values that
    overrode the recipe, and the Trainer's own precision flag (what it fills "auto" with and holds
    a DeepSpeed file's explicit values to)."""

    plan: Plan
    overrides: list
    trainer: dict                # the Trainer's own values: micro_batch, grad_accum, mixed_precision


@dataclass(frozen=True)
class Override:
    """A command-line value that replaced what the recipe says."""

    setting: str
    fact: Fact              # the recipe's
    value: object           # the command line's, which the estimate uses


def _cli_value(name: str, values: dict):
    """A command-line value in the recipe's terms (``--lora-targets q,v`` is a tuple of names)."""
    value = values.get(name)
    if name == "lora_targets" and isinstance(value, str):
        value = tuple(t.strip() for t in value.split(",") if t.strip())
    return value


def job_values(recipe: Recipe, values: dict, stated: frozenset[str]) -> tuple[dict, dict, list[Override]]:
    """Each setting's value and origin: a stated command-line value, else the recipe's (its line,
    or the framework's default)."""
    out, origins, overrides = {}, {}, []
    for name in SETTINGS:
        fact: Fact = getattr(recipe, name)
        if name in stated and values.get(name) is not None:
            value = _cli_value(name, values)
            out[name] = value
            origins[name] = Origin("flag", text=flag_text(name))
            if fact.from_file and value != fact.value and not (name == "grad_checkpointing" and fact.value):
                overrides.append(Override(name, fact, value))
            continue
        out[name] = fact.value
        origins[name] = (Origin("file", fact.location) if fact.from_file
                         else Origin("default", text=fact.default or f"{recipe.title} default"))
    return out, origins, overrides


DTYPE_OF = {"bf16": "bfloat16", "fp16": "float16", "no": "float32"}


def _settle(job: dict, origins: dict, model: ModelShape, cluster: Cluster, notes: list[str]) -> None:
    """What a recipe leaves to the machine or the model: ``bf16: auto`` (bf16 where the GPU has it,
    compute capability 8.0 and up, else fp16), weights loaded in the precision's dtype or in the
    checkpoint's own (``auto``), PEFT's default targets for the model type."""
    if job["mixed_precision"] == "auto":
        sm = cluster.gpu.sm
        job["mixed_precision"] = "bf16" if sm is None or sm >= 80 else "fp16"
        notes.append(f"bf16 auto: {job['mixed_precision']} on {cluster.gpu.name}"
                     + (" (assumed to have bf16)" if sm is None else ""))
    if job["weights_dtype"] == "precision":
        job["weights_dtype"] = DTYPE_OF[job["mixed_precision"]]
    elif job["weights_dtype"] in (None, "auto"):
        job["weights_dtype"] = model.dtype
        notes.append(f"weights loaded in {model.dtype}, the checkpoint's dtype")
    if job["adapter_dtype"] == "weights":
        job["adapter_dtype"] = job["weights_dtype"]
        if job["lora_rank"]:
            notes.append(f"LoRA adapters in {job['adapter_dtype']}, the base's load dtype")
    if tuple(job["lora_targets"]) == ("peft-default",):
        job["lora_targets"] = peft_default_targets(model)
        notes.append(f"LoRA targets: PEFT's default for {model.model_type or model.family}, "
                     f"{', '.join(job['lora_targets'])}")


UNBOUNDED_SEQ_LEN = 2048     # tokens assumed where a recipe sets no cap and no --seq-len / seq_len says one


def _switches(recipe: Recipe, values: dict, stated: frozenset[str], origins: dict, notes: list[str]) -> dict:
    """The memory switches (``readers.recipe.SWITCHES``): a stated flag's, else what the recipe turns on."""
    out = {}
    for name in SWITCHES:
        if name in stated and values.get(name) not in (None, False):
            out[name] = values[name]
            origins[name] = Origin("flag", text=flag_text(name))
        elif name in recipe.switches:
            fact = recipe.switches[name]
            out[name] = fact.value
            origins[name] = (Origin("file", fact.location) if fact.from_file
                             else Origin("default", text=fact.default or f"{recipe.title} default"))
    if out.get("loss") not in (None, "full"):
        notes.append(f"loss computed as {LOSS_WORDS[out['loss']]} ({origins['loss']})")
    return out


def _flags(job: dict, origins: dict, values: dict) -> Flags:
    priced = job["optimizer"] if job["optimizer"] in OPTIMIZERS else "adamw"       # the rest: VL210
    workload = workload_from_flags({**values, "optimizer": priced, "attn": job["attn"],
                                    "lora_rank": job["lora_rank"] or None, "lora_dropout": job["lora_dropout"],
                                    "load_in_4bit": job["load_in_4bit"], "load_in_8bit": job["load_in_8bit"],
                                    "adapter_dtype": job["adapter_dtype"], "sync_each_batch": job["sync_each_batch"],
                                    "lora_targets": ",".join(job["lora_targets"])})
    names = {"micro_batch": "micro_batch", "seq_len": "seq_len", "grad_accum": "grad_accum",
             "mixed_precision": "precision", "grad_checkpointing": "grad_checkpointing"}
    return Flags(micro_batch=job["micro_batch"], seq_len=job["seq_len"], grad_accum=job["grad_accum"],
                 precision=PRECISION.get(job["mixed_precision"]), grad_checkpointing=bool(job["grad_checkpointing"]),
                 workload=workload, origins={flag: origins[name] for name, flag in names.items()})


# What a framework that builds its own DeepSpeed config (OpenRLHF) also spells its own way, and
# the RL layout's settings (memory/fit_rl.py).
OWN_SETTINGS = ("stage", "offload_optimizer", "offload_param")
RL_SETTINGS = ("rollout_share", "optimizer_offloaded", "params_offloaded", "token_budget", "logprob_micro",
               "logprob_tokens", "ref_offload", "reward_offload", "response_length")


def _vocabulary(recipe: Recipe, plan: Plan) -> dict[str, str]:
    """Each setting a hint may change, spelled by the file that holds it: the recipe's own, or
    the DeepSpeed file's where that file sets it."""
    settings = ("micro_batch", "grad_checkpointing", "no_grad_checkpointing", "to_deepspeed", "to_fsdp",
                "fsdp_strategy", "fsdp_offload")
    # a launch line's arguments are spelled as a command line: all of them where the job is the
    # line's alone, a key the line sets over the recipe file it runs (``Document.elsewhere``)
    document = recipe.document
    if recipe.vocabulary:                 # a framework whose launch line is the recipe: every setting in its words
        return {setting: recipe.vocabulary for setting in settings + OWN_SETTINGS + RL_SETTINGS + ("layout",)}
    line = recipe.framework in ("trl", "llamafactory")
    vocab = {setting: "cli" if line and document.on_command_line else recipe.framework for setting in settings}
    for setting in settings:
        origin = plan.origins.get(setting)
        if line and origin is not None and origin.location is not None \
                and origin.location.json_path in document.elsewhere:
            vocab[setting] = "cli"
    from vramlint.layouts import own_model
    if recipe.layout is not None and not own_model(recipe):     # another framework's job on a layout (verl's)
        vocab |= {"layout": recipe.framework, "params_offloaded": f"{recipe.framework}-{plan.runtime}",
                  "optimizer_offloaded": f"{recipe.framework}-{plan.runtime}"}
    spelled = getattr(recipe.layout.value, "vocabulary", "") if recipe.layout is not None else ""
    if spelled:                           # a layout that says how its job spells it (torchtitan's file or line)
        vocab["layout"] = spelled
    origin = plan.origins.get("micro_batch")
    if plan.runtime == "deepspeed" and origin is not None and origin.location is not None \
            and origin.location.path != recipe.document.path:
        vocab["micro_batch"] = "deepspeed"
    return vocab


def _seq_len(job: dict, origins: dict, values: dict, notes: list[str]) -> None:
    """A recipe without a length cap (torchtune's ``max_seq_len: null``) pads each batch to its
    longest sample: the length is the data's, so the settings' or a stated assumption stands in."""
    if job["seq_len"]:
        return
    job["seq_len"] = values.get("seq_len") or UNBOUNDED_SEQ_LEN
    origins["seq_len"] = (Origin("default", text="[tool.vramlint] seq_len") if values.get("seq_len")
                          else Origin("default", text=f"assumed {UNBOUNDED_SEQ_LEN}"))
    notes.append(f"no sequence cap in the recipe: each batch pads to its longest sample; estimated at "
                 f"{job['seq_len']:,} tokens ({origins['seq_len'].text})")


def _split(recipe: Recipe, job: dict, values: dict, notes: list[str]) -> dict:
    """The recipe's own parallelism: context / sequence parallel ranks each keep seq / n tokens'
    activations and logits (ring attention, Ulysses); a tensor-parallel degree goes to the plan."""
    split = recipe.sequence_split.value if isinstance(recipe.sequence_split.value, int) else 1
    if split > 1:
        notes.append(f"sequences split {split} ways ({recipe.key('sequence_split')} {split}): each GPU keeps the "
                     f"activations and logits of {job['seq_len'] // split:,} of the {job['seq_len']:,} tokens")
        job["seq_len"] = max(1, job["seq_len"] // split)
    tp = recipe.tensor_parallel.value if isinstance(recipe.tensor_parallel.value, int) else 1
    return {**values, "tp": tp} if tp > 1 and "tp" not in values else values


def _stage(recipe: Recipe, job: dict, notes: list[str], model: ModelShape, origins: dict,
           others: dict | None = None) -> dict:
    """What the recipe's stage adds to one model's SFT step (memory/stages.py): chosen and rejected
    rows in one forward, a frozen reference copy unless PEFT gives it by disabling the adapter,
    and a colocated vLLM engine's share of the GPU."""
    stage = recipe.stage.value
    out = stage_settings(stage, job["micro_batch"], job["seq_len"], bool(job["lora_rank"]), recipe.reference.value,
                         notes, recipe.reference.default or str(recipe.reference.location))
    if stage == "kd" and recipe.teacher_config is not None:
        from vramlint.models.hfconfig import shape_from_dict
        teacher = shape_from_dict(dict(recipe.teacher_config))
        out["teacher_params"] = teacher.params
        notes.append(f"stage kd: a frozen {teacher.params / 1e9:.1f}B teacher beside the student, its logits "
                     "alive through the KD loss")
    rows = recipe.generation_rows.value
    if isinstance(rows, int) and rows > 0:
        out["generation_rows"] = rows
        notes.append(f"stage {stage}: model.generate makes {rows} completions of up to {job['seq_len']:,} tokens "
                     "at once between steps (no vLLM)")
    share = recipe.colocated_share.value
    if isinstance(share, (int, float)) and not isinstance(share, bool) and 0 < share < 1:
        out["colocated_share"] = float(share)
        notes.append(f"vLLM colocated in the training process: {share:.0%} of each GPU for the whole run")
    if recipe.rollout is not None:
        out["rollout"] = rollout_phases(recipe, model, notes, others)
        for setting, name in (("rollout_share", "share"), ("logprob_micro", "logprob_tokens")):
            fact = recipe.rollout.value[name]
            if fact.location is not None:
                origins[setting] = Origin("file", fact.location)
    return out


ROLLOUT_ENGINES = ("vllm", "sglang")
# How each framework builds a value model (a critic, a reward model) from a causal LM's weights
VALUE_HEADS = {"verl": "verl's load_valuehead_model: AutoModelForTokenClassification, num_labels 1",
               "openrlhf": "OpenRLHF's get_llm_for_sequence_regression: the base model and a value_head "
                           "Linear(hidden, 1)"}


def rollout_phases(recipe: Recipe, model: ModelShape, notes: list[str], others: dict | None = None) -> Rollout:
    """The RL phases around the update (memory/rl.py) from the reader's facts: the engine and its
    share, what moves to the host between phases, the critic and the frozen models beside the actor
    (value models of the shapes their files name, the actor's where they name none), the log-prob
    micro-batch."""
    facts = {name: fact.value for name, fact in recipe.rollout.value.items()}
    framework, others = facts.get("framework", "verl"), others or {}
    here = facts.get("colocated", True) is not False
    engine, share = facts["engine"], facts["share"]
    if engine == "???":                         # verl refuses the job (its VL313 says so): priced as vLLM
        engine = "vllm"
    if engine not in ROLLOUT_ENGINES and not recipe.role:   # a group that is not the policy's generates nothing
        stated = recipe.rollout.value["engine"]
        raise UnplannableError(f"rollout engine {engine!r} ({stated.location or stated.default or 'default'}) "
                               f"is not modelled: vramlint prices {' and '.join(ROLLOUT_ENGINES)} rollouts")
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise UnplannableError(f"rollout gpu_memory_utilization {share!r} is not a share of the GPU in (0, 1]")
    critic = 0
    if facts["critic"]:
        shape = others.get("critic") or model
        critic = shape.value_model_params
        notes.append(f"critic: a value model of {'the actor' if 'critic' not in others else shape.name}'s shape "
                     f"with a one-output score head for lm_head ({critic / 1e9:.2f}B parameters; "
                     f"{VALUE_HEADS[framework]}), trained beside the actor")
    temperature = facts["temperature"]
    rollout = Rollout(engine=engine, share=float(share),
                      tensor_parallel=_count(facts["tensor_parallel"]) or 1,
                      frees_between=bool(facts["frees_between"]), params_offloaded=bool(facts["params_offloaded"]),
                      optimizer_offloaded=bool(facts["optimizer_offloaded"]), critic_params=critic,
                      critic_params_offloaded=bool(facts["critic_params_offloaded"]),
                      critic_optimizer_offloaded=bool(facts["critic_optimizer_offloaded"]),
                      logprob_tokens=_count(facts["logprob_tokens"]), logprob_row=facts["logprob_row"],
                      dynamic=bool(facts["dynamic"]),
                      logprob_setting=facts["logprob_setting"],
                      scaled_logits=isinstance(temperature, (int, float)) and float(temperature) != 1.0,
                      framework=framework, engine_here=here, residents=_residents(facts, model, others),
                      processes=facts.get("processes", 1), engine_process=bool(facts.get("engine_process")),
                      logit_bytes=facts.get("logit_bytes", 2), one_switch=bool(facts.get("one_switch")),
                      trains=facts.get("trains", True) is not False, offloaded=bool(facts.get("offloaded")),
                      offload_setting=facts.get("offload_setting", ""), prompt_tokens=_count(facts.get("prompt")),
                      response_tokens=_count(facts.get("response")), seq_split=_count(facts.get("seq_split")) or 1)
    if rollout.trains:
        notes.append(_rollout_note(recipe, rollout))
    return rollout


def _count(value) -> int:
    """A whole count a reader states, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _residents(facts: dict, model: ModelShape, others: dict) -> tuple[Resident, ...]:
    """The frozen models the reader says share the actor's GPUs (OpenRLHF's reference, the actor's
    weights, and reward model, a value model of the shape its flag names)."""
    out = []
    if facts.get("reference"):
        out.append(Resident("reference", model.params, bool(facts.get("reference_offloaded")),
                            bool(facts.get("reference_follows"))))
    if facts.get("reward"):
        out.append(Resident("reward model", (others.get("reward") or model).value_model_params,
                            bool(facts.get("reward_offloaded"))))
    return tuple(out)


def _rollout_note(recipe: Recipe, r: Rollout) -> str:
    """The layout in one line."""
    if not r.engine_here:
        role = recipe.role or "actor"
        return (f"{recipe.release}: the rollout engines on GPUs of their own; on the {role}'s, "
                + ", ".join([f"the {role}"] + [m.name for m in r.residents]))
    words = f"{recipe.release} hybrid engine: {r.engine} rollout with {r.share:.0%} of each GPU"
    words += " (asleep outside the rollout)" if r.frees_between else " (awake through the update)"
    words += ", the actor's shards on the host between phases" if r.params_offloaded else ""
    words += ", its optimizer states on the host outside the update" if r.optimizer_offloaded else ""
    if r.framework == "verl" and recipe.layout is None:
        return words + "; the reference's shards on the host"
    if r.framework == "verl":
        return words + "".join(f"; the {m.name} " + ("on the host" if m.offloaded else "resting beside it")
                               for m in r.residents)
    return words + "".join(f"; the {m.name} beside it" for m in r.residents) + \
        f"; {r.processes + r.engine_process} processes a GPU"


def plan_from_recipe(recipe: Recipe, model: ModelShape, cluster: Cluster, values: dict, stated: frozenset[str],
                     ds: DeepSpeedConfig | None = None, acc: AccelerateConfig | None = None,
                     others: dict[str, ModelShape] | None = None) -> Job:
    """The job a recipe describes, with the DeepSpeed file it names (already read) if any, or the
    Accelerate config it is launched with (``launch_config``)."""
    job, origins, overrides = job_values(recipe, values, stated)
    if recipe.document.on_command_line:      # a job stated by a launch line: what it leaves unstated is said there
        origins["launch"] = Origin("file", recipe.document.locate("$"))
    where = recipe.stage.location
    named = f" (named by the launch at {where})" if where is not None and where.path != recipe.document.path else ""
    notes = [f"{recipe.title} recipe, stage {recipe.stage.value}{named}", *recipe.notes]
    if recipe.single_device:                                   # the recipe states its one GPU
        if cluster.world_size > 1:
            notes.append("a single-device recipe: it runs on one GPU")
        cluster = replace(cluster, per_node=1, nodes=1, counted=True)
    _settle(job, origins, model, cluster, notes)
    _seq_len(job, origins, values, notes)
    values = _split(recipe, job, values, notes)
    if recipe.packing.value:
        notes.append(f"packing on: every sequence is {job['seq_len']:,} tokens long")
    else:
        notes.append(f"sequence length {job['seq_len']:,} is a cap; the longest batch pads to it")
    flags = _flags(job, origins, {**values, **_switches(recipe, values, stated, origins, notes)})
    if ds is not None:
        plan = plan_from_deepspeed(ds, model, cluster, flags)
    elif acc is not None:
        plan = _plan_from_launcher(acc, job, flags, model, cluster)
    else:
        plan = _plan_without_deepspeed(recipe, job, flags, model, cluster, origins, notes)
    plan = plan.with_changes(**_stage(recipe, job, notes, model, origins, others))
    plan = plan.with_changes(source=recipe.framework, model_code=recipe.model_code or "transformers",
                             assumptions=tuple(notes) + plan.assumptions,
                             origins={**origins, **plan.origins},
                             refuses=frozenset(refusal.limit for refusal in recipe.refusals)
                             | frozenset(refused_by(recipe.framework)))
    trainer = {name: job[name] for name in ("micro_batch", "grad_accum", "mixed_precision")}
    if plan.micro_batch is None:            # verl's refusal (VL313) names the key where it is unset
        raise UnplannableError(f"no micro-batch to price: {recipe.key('micro_batch')} is unset, or known only when "
                               "the job runs")
    return Job(plan.with_changes(vocabulary=_vocabulary(recipe, plan)), overrides, trainer)


def _plan_from_launcher(acc: AccelerateConfig, job: dict, flags: Flags, model: ModelShape, cluster: Cluster) -> Plan:
    """The recipe under ``accelerate launch --config_file``: the runtime, ZeRO stage, FSDP
    strategy and parallelism are the Accelerate file's; the precision is the Trainer's (it sets
    ``ACCELERATE_MIXED_PRECISION`` from bf16 / fp16, over the file's ``mixed_precision``) and the
    weights are loaded as the recipe says."""
    trainer = {"bf16": "bf16", "fp16": "fp16"}.get(job["mixed_precision"], "no")
    acc = replace(acc, mixed_precision=Fact(trainer, None, "the recipe's bf16 / fp16"))
    workload = {**flags.workload, "weights_dtype": job["weights_dtype"]}
    return plan_from_accelerate(acc, model, cluster, replace(flags, workload=workload))


def _plan_without_deepspeed(recipe: Recipe, job: dict, flags: Flags, model: ModelShape, cluster: Cluster,
                            origins: dict, notes: list[str]) -> Plan:
    """Plain PyTorch (DDP when there are several GPUs) or FSDP, as the recipe turns it on. FSDP
    under Accelerate keeps fp32 shards when mixed precision is on (``upcast``); torchtune's and
    axolotl's FSDP2 keep the load dtype."""
    if recipe.layout is not None:               # a pretraining framework's own runtime and mesh
        from vramlint.layouts import layout
        return layout(recipe).plan(recipe, job, flags, model, cluster, origins, notes)
    weights = job["weights_dtype"]
    precision = flags.precision or "fp32"
    fsdp = recipe.fsdp
    workload = {k: v for k, v in flags.workload.items() if k != "weights_dtype"}
    common = dict(model=model, cluster=cluster, precision=precision, micro_batch=job["micro_batch"],
                  seq_len=job["seq_len"], grad_accum=job["grad_accum"], origins=dict(origins),
                  grad_checkpointing=bool(job["grad_checkpointing"]), **workload)
    if fsdp is None:
        if recipe.rollout is not None:          # an RL framework's trainer that is not FSDP (verl's Megatron workers)
            raise UnplannableError(f"{recipe.title}: the actor's strategy is not modelled yet (vramlint prices its "
                                   "FSDP and FSDP2 workers)")
        return Plan(runtime="torch", weights_dtype=weights, **common)
    weights = fsdp_weights_dtype(precision, weights, bool(job["lora_rank"] or job["load_in_4bit"]), fsdp.upcast)
    if weights != job["weights_dtype"]:
        notes.append("FSDP under mixed precision: Accelerate upcasts the trained shards to fp32")
    checkpointing = bool(job["grad_checkpointing"]) or bool(fsdp.checkpointing.value)
    common["adapter_dtype"] = fsdp_adapter_dtype(precision, common["adapter_dtype"], fsdp.upcast)
    return Plan(runtime="fsdp", fsdp_strategy=fsdp.strategy.value, fsdp_version=fsdp.version.value,
                offload_param="cpu" if fsdp.offload.value else "none", weights_dtype=weights,
                **{**common, "grad_checkpointing": checkpointing})
