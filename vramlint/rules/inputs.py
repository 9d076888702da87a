"""Rules about what the check was given: a model it could not resolve, a job it could not
estimate, a substitute it used, a command-line value that overrode the file. None of these may pass
silently: a green run must be about the job the files describe. A job with no estimate is an error
by default, as mypy treats an import it cannot find; ``--warn CODE`` (``warn`` in the settings)
reports it as a warning for those who accept the gap, ``--ignore CODE`` drops it, and the summary
still counts the job as not estimated."""

from __future__ import annotations

from vramlint.documents import Location
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.readers.deepspeed import Fact
from vramlint.rules.base import Rule

UNRESOLVED = ("VL005", "model-not-resolved", ERROR)
SUBSTITUTED = ("VL006", "model-substituted", WARNING)
OVERRIDDEN = ("VL007", "flag-overrides-file", WARNING)
GENERIC = ("VL008", "generic-model-shape", WARNING)
VERSION = ("VL009", "version-not-modelled", WARNING)
UNUSED = ("VL010", "optimizer-unused", WARNING)
NOT_ESTIMATED = ("VL011", "job-not-estimated", ERROR)
NOT_READ = ("VL012", "launch-not-read", ERROR)
COUNT_ASSUMED = ("VL013", "gpu-count-assumed", WARNING)
RULES = (
    Rule(*UNRESOLVED, summary="The file names a model vramlint cannot read here (not a local config, not in the "
                              "offline catalog or the Hugging Face cache): no memory estimate is made for it, and the job "
                              "does not pass. The finding gives the command that fetches the model's config.json, "
                              "or, for a local path, the flag that names the base model; --warn VL005 reports it as "
                              "a warning instead.",
         bad="base_model: my-org/llama-3.1-8b-sft-v3   # never downloaded here",
         good="base_model: my-org/llama-3.1-8b-sft-v3   # after: hf download my-org/llama-3.1-8b-sft-v3 config.json"),
    Rule(*SUBSTITUTED, summary="The file names one model and the check used another, the one --model names: the "
                               "verdict is about the substitute. (A file's model that cannot be read is VL005, and "
                               "no settings' default stands in for it.)",
         bad="model: /checkpoints/my-run   # vLLM config, checked with --model meta-llama/Llama-3.1-8B",
         good="model: meta-llama/Llama-3.1-8B"),
    Rule(*OVERRIDDEN, summary="A command-line value (or a per-file override in the settings) contradicts what the "
                              "file says; the estimate uses the command line's value, as the README promises.",
         bad="micro_batch_size: 2    # vramlint check recipe.yml --micro-batch 8",
         good="micro_batch_size: 8    # or drop --micro-batch"),
    Rule(*GENERIC, summary="The model's type is not modelled by hand and transformers is not installed to build it: "
                           "its layers are read as a generic Llama-like decoder over the config's sizes, so what "
                           "the type adds is not counted. Install the transformers extra for the exact shape.",
         bad="base_model: ibm-granite/granite-3.1-8b-instruct   # pip install vramlint",
         good="base_model: ibm-granite/granite-3.1-8b-instruct   # pip install 'vramlint[transformers]'"),
    Rule(*VERSION, summary="The job runs on a release vramlint does not model (a flag, the settings, the "
                           "repository's pins or what is installed say which): it is estimated as the nearest "
                           "release it models, or the current one for a version it cannot read, and says so.",
         bad="vllm==0.5.4        # requirements.txt", good="vllm==0.11.0       # requirements.txt"),
    Rule(*UNUSED, summary="The recipe's optim (or --optimizer) names one optimizer, but the DeepSpeed file has an "
                          "optimizer section, and that is what DeepSpeed builds: the HF Trainer hands it a "
                          "DummyOptim. The estimate counts the file's optimizer, not the one asked for.",
         bad='{"optimizer": {"type": "AdamW"}}   # recipe: optim: paged_adamw_8bit',
         good='{"zero_optimization": {"stage": 2}}   # no optimizer section: the recipe\'s optim is built'),
    Rule(*NOT_ESTIMATED, summary="The file states a job (a training recipe, a DeepSpeed or Accelerate config, a vLLM "
                                 "config) that vramlint could not estimate: it names no model, a file it needs is "
                                 "missing, or it sets something the memory model cannot price. The job does not "
                                 "pass unexamined: the finding names what is missing and what would give an "
                                 "estimate; --warn VL011 reports it as a warning instead.",
         bad='{"zero_optimization": {"stage": 3}}   # no recipe runs it, no --model',
         good='[tool.vramlint]\nmodel = "meta-llama/Llama-3.1-8B"   # the model the DeepSpeed file trains'),
    Rule(*NOT_READ, summary="A folder was walked and no job could be estimated from the files vramlint reads, but "
                            "it holds Python configs (mmengine / xtuner style), which vramlint does not read yet: "
                            "the jobs they state were not checked, so the run does not pass (--warn VL012 lets it).",
         bad="configs/sft_config.py   # model = dict(type='llama'), batch_size=8",
         good="configs/sft.yaml  # the same arguments in a recipe vramlint reads"),
    Rule(*COUNT_ASSUMED, summary="--gpus (or gpus in the settings) names the GPU type but no count, and the file states "
                                 "none (an Accelerate file's num_processes would): the job is checked on one GPU, which "
                                 "may not be how it runs.",
         bad='[tool.vramlint]\ngpus = "H100"   # a recipe run under torchrun --nproc_per_node 8',
         good='[tool.vramlint]\ngpus = "8xH100"'),
)


def model_not_resolved(where: Location, name: str | None, why: str, hint: str = "") -> Finding:
    said = why.removeprefix(f"model {name!r}: ").removeprefix(f"model {name!r} is ") if name else why
    return Finding(*UNRESOLVED, where, f"model {name!r} not resolved: {said}" if name else why,
                   hint=hint or "no memory estimate for this file; give --model, or make its config.json readable here")


def not_estimated(where: Location, why: str, hint: str) -> Finding:
    """A job with no estimate, for a reason no other rule names."""
    return Finding(*NOT_ESTIMATED, where, f"not estimated: {why}", hint=hint)


def launches_not_read(where: Location, unread: list[str]) -> Finding:
    """A walk that found no job, beside files that may state them (Python configs)."""
    shown = ", ".join(unread[:5]) + (f" and {len(unread) - 5} more" if len(unread) > 5 else "")
    return Finding(*NOT_READ, where, f"no job estimated from the files vramlint reads; {len(unread)} Python config(s) "
                   f"were not read: {shown}",
                   hint="check the recipe or config files they launch, or vramlint estimate with the same "
                        "arguments; --warn VL012 reports this as a warning")


def count_assumed(where: Location, gpu: str) -> Finding:
    """A job checked on one GPU because nothing stated how many it runs on."""
    return Finding(*COUNT_ASSUMED, where, f"--gpus names {gpu} but no count, and the file states none: checked on "
                   "1 GPU", hint=f"give the count (--gpus 8x{gpu}), or gpus for this file in "
                   "[[tool.vramlint.overrides]]")


def substituted_model(fact: Fact, used: object, by: str) -> Finding:
    """The file names ``fact.value``; the estimate is for ``used``, given instead (``by``)."""
    return Finding(*SUBSTITUTED, fact.location, f"the file names {fact.value!r}; the estimate is for {used} ({by})",
                   hint=f"drop {by} to check the file's own model")


def overridden(where: Location, key: str, written: object, flag: str, used: object) -> Finding:
    return Finding(*OVERRIDDEN, where, f"{flag} {used} overrides {key}: {written} here: the estimate uses {used}",
                   hint=f"set {key}: {used} in the file, or drop {flag}")


def version_not_modelled(where: Location, why: str) -> Finding:
    return Finding(*VERSION, where, why, hint="the estimate may be off by what that release does differently")


def generic_shape(where: Location, model: str) -> Finding:
    return Finding(*GENERIC, where, f"{model}: its model type is read as a generic decoder (Llama-like layers over "
                                    "its config's sizes): the estimate is approximate",
                   hint="pip install 'vramlint[transformers]' to build its exact layers on the meta device")


# Plan field -> the DeepSpeed facts that state it, the key as written, and the flag.
DEEPSPEED_STATED = (("micro_batch", ("micro_batch", "train_batch"), "--micro-batch"),
                    ("grad_accum", ("grad_accum",), "--grad-accum"),
                    ("zero_stage", ("zero_stage",), "--zero-stage"),
                    ("precision", ("precision",), "--mixed-precision"))


def optimizer_unused(ds, plan, asked: str | None, by: str) -> list[Finding]:
    """``asked`` (the recipe's optim or --optimizer, as vramlint prices it) lost to the DeepSpeed
    file's optimizer section (plan._ds_optimizer): said where the section names its type."""
    origin = plan.origins.get("optimizer")
    if asked in (None, plan.optimizer) or origin is None or origin.kind != "file" or origin.location is None \
            or origin.location.path != ds.document.path:
        return []
    return [Finding(*UNUSED, origin.location, f"{by} {asked} is not used: this optimizer section is what DeepSpeed "
                    f"builds (the HF Trainer passes a DummyOptim), so the estimate counts its {plan.optimizer} states",
                    hint=f"drop the optimizer section to train with {asked}, or drop {by}")]


def deepspeed_overridden(ds, plan, flags) -> list[Finding]:
    """A command-line value that replaced what a DeepSpeed file states (the flag wins, said here)."""
    out = []
    for field, facts, flag in DEEPSPEED_STATED:
        if not flags.wins(field):
            continue
        for name in facts:
            fact = getattr(ds, name)
            if fact.from_file and fact.value not in (None, "auto") and fact.value != getattr(plan, field):
                key = fact.location.json_path.removeprefix("$.")
                out.append(overridden(fact.location, key, fact.value, flag, getattr(plan, field)))
                break
    return out
