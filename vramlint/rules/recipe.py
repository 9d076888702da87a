"""Rules about a training recipe and the DeepSpeed file it names: the Trainer's own refusal when
the two disagree, and what the recipe turns on that the memory model does not price."""

from __future__ import annotations

from collections.abc import Iterator

from vramlint.findings import ERROR, INFO, WARNING, Finding
from vramlint.plan import OPTIMIZERS, Plan
from vramlint.readers.deepspeed import AUTO, DeepSpeedConfig, Fact
from vramlint.readers.recipe import MODELLED_STAGES, Recipe
from vramlint.rules.base import Rule

MISMATCH = ("VL310", "trainer-deepspeed-mismatch", ERROR)
NOT_MODELLED = ("VL210", "not-modelled", WARNING)
SAVING = ("VL211", "saving-not-counted", INFO)
UNBOUNDED = ("VL212", "sequence-length-unbounded", WARNING)
REFUSED = ("VL313", "framework-refuses-launch", ERROR)
RULES = (
    Rule(*REFUSED, summary="The training framework refuses to start this job before it loads anything (LLaMA-Factory's "
                           "argument checks, OpenRLHF's argument parser, quoted in the finding, at the release the "
                           "repository runs): the memory estimate is for a job that never starts.",
         bad="use_galore: true\ngalore_layerwise: true   # torchrun --nproc_per_node 8",
         good="use_galore: true\ngalore_layerwise: false"),
    Rule(*MISMATCH, summary="The recipe and the DeepSpeed file it names set the same value differently: the HF "
                            "Trainer refuses to start (HfTrainerDeepSpeedConfig's mismatch check, quoted in the "
                            "finding). Set the DeepSpeed value to \"auto\" and let the recipe fill it.",
         bad='{"train_micro_batch_size_per_gpu": 4}   # recipe: per_device_train_batch_size: 2',
         good='{"train_micro_batch_size_per_gpu": "auto"}'),
    Rule(*NOT_MODELLED, summary="The recipe turns on something the memory model does not price yet (PPO's four "
                                "models, a distillation teacher, an optimizer "
                                "it has no states for, ...): the estimate is for the job without it, and says so.",
         bad="stage: ppo      # LLaMA-Factory: policy, reference, reward and value models",
         good="stage: dpo     # priced: chosen + rejected rows, the reference (none with LoRA)"),
    Rule(*SAVING, summary="The recipe turns on something that saves memory (a chunked or fused loss, activation "
                          "offloading, optimizer_in_bwd, ...) that the estimate does not count yet: the job needs "
                          "less than estimated.",
         bad="loss:\n  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss",
         good="loss:\n  _component_: torch.nn.CrossEntropyLoss"),
    Rule(*UNBOUNDED, summary="The recipe caps no sequence length (torchtune's tokenizer.max_seq_len: null): each "
                             "batch pads to its longest sample, so one long sample can OOM a job that fit. The "
                             "estimate takes the settings' seq_len, or 2,048 tokens, and says so.",
         bad="tokenizer:\n  max_seq_len: null", good="tokenizer:\n  max_seq_len: 4096"),
)
# The Trainer's words (transformers 5.24.0 integrations/deepspeed.py:258-263, entries as in :132).
TRAINER_ERROR = ("ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments "
                 "values:\n{}\nThe easiest method is to set these DeepSpeed config values to 'auto'.")
STAGE_WORDS = {"rm": "reward modelling (chosen and rejected in one batch)",
               "dpo": "DPO (a reference model unless PEFT disables the adapter; chosen + rejected in one batch)",
               "orpo": "ORPO (chosen + rejected in one batch)", "simpo": "SimPO (chosen + rejected in one batch)",
               "cpo": "CPO (chosen + rejected in one batch)", "kto": "KTO (a reference model and KL rows)",
               "ipo": "IPO (a reference model; chosen + rejected)", "grpo": "GRPO (generations, a reference model "
               "when beta > 0, vLLM beside the trainer)", "rloo": "RLOO (generations)",
               "ppo": "PPO (policy, reference, reward and value models; generation)",
               "kd": "knowledge distillation (a teacher model beside the student)",
               "qat": "quantization-aware training (fake-quantized weights)"}


# Settings a recipe gives as whole numbers: (name, the least the framework takes, None allowed).
COUNTS = (("micro_batch", 1, False), ("grad_accum", 1, False), ("seq_len", 1, True), ("lora_rank", 0, False),
          ("tensor_parallel", 1, False), ("sequence_split", 1, False))


# Settings a recipe names from a closed set (as the readers normalise them): the dtype the weights
# are loaded in, and the autocast precision.
CHOICES = (("weights_dtype", ("float32", "bfloat16", "float16", "auto", "precision")),
           ("mixed_precision", ("bf16", "fp16", "no", "auto")))


def check_values(recipe: Recipe) -> Iterator[Finding]:
    """A count the recipe writes that is no whole number in range, or a dtype no framework knows:
    the framework fails on it (its dataclass, its range check, ``torch_dtype``'s lookup), so there
    is no job to estimate. Schema rule VL102's finding."""
    from vramlint.rules.schema import WRONG_TYPE

    def key(name: str, fact: Fact) -> str:        # the key as the file writes it, where it does
        return fact.location.json_path.removeprefix("$.") if fact.location else recipe.key(name)

    for name, allowed in CHOICES:
        fact = getattr(recipe, name)
        if fact.from_file and fact.value not in allowed:
            yield Finding(*WRONG_TYPE, fact.location, f"{key(name, fact)}: {fact.value!r} is not one of "
                                                      f"{', '.join(allowed[:-1])}", hint="no memory estimate until it is")
    dropout = recipe.lora_dropout
    if dropout.from_file and (isinstance(dropout.value, bool) or not isinstance(dropout.value, (int, float))
                              or not 0 <= dropout.value < 1):
        yield Finding(*WRONG_TYPE, dropout.location, f"{key('lora_dropout', dropout)}: {dropout.value!r} is not a "
                                                     "probability in [0, 1)", hint="no memory estimate until it is")
    for name, least, nullable in COUNTS:
        fact = getattr(recipe, name)
        value = fact.value
        if not fact.from_file or (value is None and nullable):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            yield Finding(*WRONG_TYPE, fact.location, f"{key(name, fact)}: {value!r} is not a whole number of "
                                                      f"{least} or more", hint="no memory estimate until it is")


def check_recipe(recipe: Recipe, plan: Plan) -> Iterator[Finding]:
    stage = recipe.stage
    if stage.value not in MODELLED_STAGES and not (stage.value == "kd" and plan.teacher_params) \
            and plan.rollout is None:
        what = STAGE_WORDS.get(str(stage.value), str(stage.value))
        yield Finding(*NOT_MODELLED, stage.location or recipe.document.locate("$"),
                      f"{what} is estimated as supervised fine-tuning of one model: what the stage adds is not "
                      "counted yet, so the peak is a lower bound", hint="treat a near-fit as not fitting")
    if recipe.optimizer.value not in OPTIMIZERS:
        yield Finding(*NOT_MODELLED, recipe.optimizer.location or recipe.document.locate("$"),
                      f"optimizer {recipe.optimizer.value!r} is not priced: estimated as AdamW (m and v, 8 B per "
                      "trainable parameter), which may be more or less than it keeps",
                      hint="treat a near-fit as uncertain")
    for feature in recipe.features:
        where = feature.fact.location or recipe.document.locate("$")
        if feature.effect == "low":
            yield Finding(*NOT_MODELLED, where, f"{feature.what}: not counted, so the job needs more than estimated",
                          hint="treat a near-fit as not fitting")
        else:
            yield Finding(*SAVING, where, f"{feature.what}: not counted, so the job needs less than estimated")
    if recipe.seq_len.value is None:
        yield Finding(*UNBOUNDED, recipe.seq_len.location or recipe.document.locate("$"),
                      f"no sequence-length cap: each batch pads to its longest sample; estimated at {plan.seq_len:,} "
                      "tokens", hint=f"set {recipe.key('seq_len')} to the longest sequence you train on")


def bad_count(recipe: Recipe, fact: Fact) -> Finding:
    """A GPU or node count the recipe states that is no whole number of 1 or more (VL102)."""
    from vramlint.rules.schema import WRONG_TYPE
    where = fact.location or recipe.document.locate("$")
    return Finding(*WRONG_TYPE, where, f"{where.json_path.removeprefix('$.')}: {fact.value!r} is not a whole number "
                                       "of 1 or more", hint="no memory estimate until it is")


def not_plannable(recipe: Recipe, why: str) -> Finding:
    """A job the recipe describes that the memory model refuses (an 8-bit base under FSDP): no
    estimate, so the job does not pass (VL011, an error unless the run says ``--warn VL011``)."""
    from vramlint.rules.inputs import not_estimated
    if recipe.load_in_8bit.value:
        return not_estimated(recipe.load_in_8bit.location or recipe.document.locate("$"), why,
                             "load_in_4bit (QLoRA: the 4-bit base is the one FSDP and ZeRO-3 shard) for an estimate, "
                             "or the 8-bit base under ZeRO-2 or one GPU per replica")
    return not_estimated(recipe.document.locate("$"), why, "no memory estimate for this file until what the message "
                         "names changes")


def _entry(ds_key: str, ds_value: object, hf_key: str, hf_value: object) -> str:
    return f"- ds {ds_key}={ds_value} vs hf {hf_key}={hf_value}"


def framework_refusals(recipe: Recipe, plan: Plan | None) -> Iterator[Finding]:
    """The start-up refusals the recipe's framework has for this launch (``Recipe.refusals`` at the
    release it is read as, each tested against the plan: ``plan.LAUNCH_LIMITS``), in its words;
    without a plan (a layout refused before one is made), those it has for every launch."""
    from vramlint.plan import LAUNCH_LIMITS
    for refusal in recipe.refusals:
        if refusal.limit == "always" if plan is None else LAUNCH_LIMITS[refusal.limit](plan):
            yield Finding(*REFUSED, recipe.document.locate(f"$.{refusal.key}"),
                          f"{recipe.release or recipe.title} refuses to start: {refusal.message}", hint=refusal.hint)


def layout_refusals(recipe: Recipe, model, world: int) -> Iterator[Finding]:
    """The layouts a pretraining framework refuses before its first step (torchtitan's
    ``ParallelDims`` and pipeline checks, Megatron's ``validate_args``: ``layouts.<framework>.refusals``),
    in its words."""
    from vramlint.layouts import layout
    from vramlint.rules.schema import WRONG_TYPE
    for refusal in layout(recipe).refusals(recipe.layout.value, recipe, model, world):
        where = refusal.fact.location or recipe.document.locate("$")
        if refusal.wrong_type:
            yield Finding(*WRONG_TYPE, where, refusal.message, hint=refusal.hint)
        else:
            yield Finding(*REFUSED, where, f"{recipe.release or recipe.title} refuses to start: {refusal.message}",
                          hint=refusal.hint)


def check_trainer_mismatch(recipe: Recipe, ds: DeepSpeedConfig, world: int, trainer: dict) -> Iterator[Finding]:
    """``HfTrainerDeepSpeedConfig.trainer_config_process``: each DeepSpeed value the file states
    (not "auto") must equal the Trainer's; one finding, at the first differing DeepSpeed line,
    quoting the whole error the Trainer raises. ``trainer``: the Trainer's values as the recipe
    settles them (micro_batch, grad_accum, mixed_precision "bf16" / "fp16" / "no")."""
    if not recipe.hf_trainer:
        return
    mb, ga = trainer["micro_batch"], trainer["grad_accum"]
    data = ds.document.data if isinstance(ds.document.data, dict) else {}
    checks: list[tuple[str, Fact, object, str]] = [
        ("train_micro_batch_size_per_gpu", ds.micro_batch, mb, recipe.key("micro_batch")),
        ("gradient_accumulation_steps", ds.grad_accum, ga, recipe.key("grad_accum")),
        ("train_batch_size", ds.train_batch, world * mb * ga, "train_batch_size (calculated)"),
        ("gradient_clipping", _value(ds, data, "gradient_clipping"), recipe.max_grad_norm.value, "max_grad_norm"),
    ]
    for name, hf_name in (("fp16", "fp16|fp16_full_eval"), ("bf16", "bf16|bf16_full_eval")):
        if name in ds.sections:
            checks.append((f"{name}.enabled", ds.sections[name], trainer["mixed_precision"] == name, hf_name))
    wrong = [(key, fact, value, hf) for key, fact, value, hf in checks
             if fact.from_file and fact.value not in (AUTO, None) and not _same(fact.value, value)]
    if not wrong:
        return
    entries = "\n".join(_entry(key, _shown(fact.value), hf, _shown(value)) for key, fact, value, hf in wrong)
    first = wrong[0]
    yield Finding(*MISMATCH, first[1].location, "the HF Trainer refuses to start: "
                  + TRAINER_ERROR.format(entries).replace("\n", " "),
                  hint=f"set {', '.join(key for key, *_ in wrong)} to \"auto\" in {ds.document.path}")


def _value(ds: DeepSpeedConfig, data: dict, key: str) -> Fact:
    return Fact(data.get(key), ds.document.locate(f"$.{key}") if ds.document.has(f"$.{key}") else None)


def _same(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return a == b


def _shown(value: object) -> str:
    """As Python formats the Trainer's values: True/False, 1.0."""
    return str(value)
