"""One check, in the order of the design: file → document → format → reader → plan → estimate → findings.

The format is detected from the content, not the file name (``readers.registry``). A training
recipe is checked with the DeepSpeed file it names, and a DeepSpeed file that recipes of the
repository name is checked once per such recipe (``recipes_using``), so a hook that sees only the
DeepSpeed file still checks the jobs that run it. An Accelerate config that names a
``deepspeed_config_file`` is checked with that file.

Each file is checked on its own: a crash while checking one becomes an ``internal-error`` finding
for that file, and the run goes on with the others.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from vramlint.documents import Document, Location, ParseError, parse, read_text, sub_document
from vramlint.errors import ModelNotFound, UnplannableError, UsageError
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.hardware import Cluster, sized
from vramlint.memory import Estimate, estimate
from vramlint.models import read_model
from vramlint.models.hfconfig import shape_from_dict
from vramlint.models.shape import ModelShape
from vramlint.plan import (OPTIMIZERS, RUNTIMES, Flags, Origin, Plan, flag_text, plan_from_accelerate,
                           plan_from_deepspeed, workload_from_flags)
from vramlint.readers.accelerate import PRECISION, read_accelerate
from vramlint.readers import SCRIPT_KIND
from vramlint.readers.deepspeed import Fact, read_deepspeed
from vramlint.readers.llamafactory import at_release, preprocess_only
from vramlint.readers.recipe import Recipe
from vramlint.readers.registry import CLOUD, RECIPES, detect, skipped_because
from vramlint.readers.vllm import normalised_document, read_vllm
from vramlint.patterns import script
from vramlint.repository import find_referenced, real, recipes_using, root_of, shown
from vramlint.rules.batch import check_batch
from vramlint.rules.consistency import check_autotp, check_consistency, fp32_by_auto
from vramlint.rules.fit import NEAR_THRESHOLD, check_fit, check_host_ram
from vramlint.rules.launch import check_launch, check_refusals, missing_reference, no_zero_section
from vramlint.rules.inputs import (count_assumed, deepspeed_overridden, generic_shape, model_not_resolved, not_estimated,
                                   overridden, optimizer_unused, substituted_model, version_not_modelled)
from vramlint.rules.llamafactory import check_llamafactory
from vramlint.rules.recipe import check_recipe, check_trainer_mismatch, check_values, not_plannable
from vramlint.rules.schema import check_schema
from vramlint.rules.syntax import hjson_syntax, internal_error, parse_error
from vramlint.shipped import shipped_copy
from vramlint.stack import Stack, plan_for_stack, stack_for, unmodelled
from vramlint.vendored import vendored_arguments
from vramlint.suppress import Suppressions, suppressions


@dataclass(frozen=True)
class Context:
    """What checking a file needs beside the file: the GPUs, the model (``--model`` or the
    settings'), the merged settings and command-line values, and which of those the command line
    (or a per-file override) states — those win over what a file says, with a finding."""

    cluster: Cluster
    values: dict = field(default_factory=dict)
    stated: frozenset[str] = frozenset()
    model: ModelShape | None = None
    near: float = NEAR_THRESHOLD
    host_ram: int | None = None
    kind: str | None = None
    run_paths: frozenset[str] = frozenset()     # every file of this run, resolved
    rules: frozenset[str] | None = None         # the rule codes reported (``selection.enabled``); None: all
    warn: frozenset[str] = frozenset()          # codes reported as warnings whatever their severity (``--warn``)

    @property
    def flags(self) -> Flags:
        values = self.values
        precision = PRECISION.get(values.get("mixed_precision"))
        names = {"micro_batch": "micro_batch", "grad_accum": "grad_accum", "mixed_precision": "precision",
                 "zero_stage": "zero_stage"}
        return Flags(micro_batch=values.get("micro_batch"), seq_len=values.get("seq_len"),
                     grad_accum=values.get("grad_accum"), precision=precision, zero_stage=values.get("zero_stage"),
                     grad_checkpointing=bool(values.get("grad_checkpointing")),
                     workload=workload_from_flags(values),
                     stated=frozenset(field for value, field in names.items() if value in self.stated))


@dataclass
class FileResult:
    path: str
    kind: str | None = None                           # the format detected (or forced)
    via: str | None = None                            # the recipe this file was checked as part of
    findings: list[Finding] = field(default_factory=list)
    plan: Plan | None = None
    estimate: Estimate | None = None
    notes: list[str] = field(default_factory=list)    # why no memory estimate was made, and what was skipped
    serving: tuple | None = None                      # (Serving, ServingEstimate) of a vLLM config
    cluster: Cluster | None = None
    model_at: Location | None = None                  # the line that names the model, where a file names it
    job: bool = False                                 # the file states a job (not only settings, not another kind)
    why_not: str = ""                                 # why a job has no estimate, where no finding says it
    reads: list[str] = field(default_factory=list)    # the other files the job is read from (recipe, configs)
    gpus_from: str | None = None                      # path:line of what states the GPUs, where a file does

    @property
    def model(self) -> ModelShape | None:
        if self.plan is not None:
            return self.plan.model
        return self.serving[0].model if self.serving else None

    @property
    def status(self) -> str:
        """``estimated``, ``not estimated`` (a job with no estimate: its findings say why) or
        ``skipped`` (no job of its own: its notes say what the file is)."""
        if self.plan is not None or self.serving is not None:
            return ESTIMATED
        unreadable = self.kind is None and any(f.severity == ERROR for f in self.findings)
        return NOT_ESTIMATED if self.job or unreadable else SKIPPED

    def skip(self, why: str) -> None:
        """The file states no job of its own: said once, as the first note."""
        self.notes.insert(0, why)

    def unplanned(self, why: str) -> None:
        """The job cannot be estimated: why, kept for the finding ``_unexplained`` gives where the
        file's own findings do not say it (an invalid ZeRO stage has its VL102 already)."""
        self.why_not = why
        self.notes.append(why)


ESTIMATED, NOT_ESTIMATED, SKIPPED = "estimated", "not estimated", "skipped"


def check_file(path: str, ctx: Context, text: str | None = None) -> list[FileResult]:
    """Check one file (``text``: its content, read from standard input): one result, or one per
    recipe that runs it (a DeepSpeed file). Findings of rules the run does not report, or that an
    inline ``# vramlint: disable=CODE`` comment (a JSON file's ``"vramlint": {"disable": [...]}``)
    switches off, are dropped."""
    result = FileResult(path, cluster=ctx.cluster)
    if (ctx.kind is None and is_script(path, text)) or ctx.kind == SCRIPT_KIND:
        text = _script_text(path, result) if text is None else text
        results = _guarded(lambda: _check_script(text, result, ctx), result) if text is not None else [result]
    else:
        document = _load(path, result) if text is None else _parse(text, path, result)
        results = _guarded(lambda: _check(document, result, ctx), result) if document is not None else [result]
        text = document.text if document is not None else None
    texts = {path: text} if text is not None else {}      # standard input's too, not a file's on disk
    for one in results:
        _finish(one, ctx, texts)
    return results


def _guarded(check, result: FileResult) -> list[FileResult]:
    """``check()``'s results; a crash while checking one file becomes an internal-error finding for
    it (``VRAMLINT_DEBUG`` shows the traceback instead), so it cannot hide the other files'."""
    try:
        return check()
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - one file's crash must not hide the others' findings
        if os.environ.get("VRAMLINT_DEBUG"):
            raise
        result.findings.append(internal_error(result.path, exc))
        return [result]


def _versions(stack: Stack, packages: tuple[str, ...], result: FileResult) -> list[Finding]:
    return [version_not_modelled(Location(result.path), why) for package in packages
            if (why := unmodelled(stack, package)) is not None]


def _finish(result: FileResult, ctx: Context, texts: dict[str, str]) -> None:
    """The estimate and the fit findings of a planned result, then the suppressions."""
    try:
        if result.model is not None and result.model.shape_by == "generic":
            result.findings.append(generic_shape(result.model_at or Location(result.path),
                                                 result.model.name or result.model.model_type))
        if result.plan is not None and not result.plan.cluster.counted:
            result.findings.append(count_assumed(result.model_at or Location(result.path), result.plan.cluster.gpu.name))
        if result.plan is not None:
            stack = stack_for(ctx.values, result.path)
            result.findings.extend(_versions(stack, ("transformers", "bitsandbytes"), result))
            result.plan = plan_for_stack(result.plan, stack)
            result.estimate = estimate(result.plan)
            result.findings.extend(check_fit(result.plan, result.estimate, result.path, ctx.near))
            result.findings.extend(check_host_ram(result.plan, result.estimate, result.path, ctx.host_ram))
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("VRAMLINT_DEBUG"):
            raise
        result.findings.append(internal_error(result.path, exc))
    result.findings.extend(_unexplained(result))
    result.findings = [replace(f, severity=WARNING) if f.code in ctx.warn and f.severity == ERROR else f
                       for f in _unsuppressed(result.findings, ctx.rules, texts)]


def _unexplained(result: FileResult) -> list[Finding]:
    """A job with no estimate and no error that says why gets one (VL011): a job the check cannot
    judge never passes silently. Its notes hold the reason."""
    if result.status != NOT_ESTIMATED or any(f.severity == ERROR for f in result.findings):
        return []
    return [not_estimated(result.model_at or Location(result.path), result.why_not or "no estimate could be made",
                          "change what the message names; --warn VL011 reports this as a warning")]


def _unsuppressed(findings: list[Finding], rules: frozenset[str] | None,
                  texts: dict[str, str]) -> list[Finding]:
    """Findings of the rules the run reports that no inline directive of their own file switches
    off (``texts``: the checked file's text as read; another file a finding points at, from disk)."""
    known: dict[str, Suppressions] = {}

    def disabled(finding: Finding) -> bool:
        where = finding.location.path
        if where not in known:
            try:
                known[where] = suppressions(texts[where] if where in texts else read_text(Path(where)))
            except (OSError, ParseError):
                known[where] = Suppressions()
        return known[where].covers(finding)
    return [f for f in findings if (rules is None or f.code in rules) and not disabled(f)]


def _load(path: str, result: FileResult) -> Document | None:
    try:
        text = read_text(Path(path))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ParseError as exc:
        result.findings.append(parse_error(path, exc))
        return None
    return _parse(text, path, result)


def _parse(text: str, path: str, result: FileResult) -> Document | None:
    try:
        return parse(text, path)
    except ParseError as exc:
        result.findings.append(parse_error(path, exc))
        return None


def _check(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    kind = result.kind = ctx.kind or detect(document.data)
    result.job = kind is not None
    if kind in CLOUD:
        return _check_cloud(document, result, ctx)
    if ctx.cluster is None and kind is not None:
        raise UsageError(NO_GPUS)
    if kind in RECIPES:
        launched = _launched_by(document.path, result, ctx)
        if launched is not None:
            return launched
        _check_recipe(_at_release(RECIPES[kind].read(document), ctx), result, ctx)
    elif kind == "deepspeed":
        return _check_deepspeed(document, result, ctx)
    elif kind == "accelerate":
        return _check_accelerate(document, result, ctx) or [result]
    elif kind == "vllm":
        _check_vllm(document, result, ctx)
    else:
        result.skip(skipped_because(document.data))
    return [result]


def _launched_by(path: str, result: FileResult, ctx: Context, own: list | tuple = ()) -> list[FileResult] | None:
    """A recipe that launch scripts of its repository run is the job they start, with their GPUs
    and launch config, not the recipe under plain DDP on ``--gpus``: checked there when a script
    is in this run, else through the scripts here. None where the command line says how to run it
    (a GPU count or ``--launch-config``), or where no script runs it."""
    if ctx.cluster is None or (ctx.cluster.counted and "gpus" in ctx.stated) or ctx.values.get("launch_config") \
            or "model" in ctx.stated or not Path(path).is_file():
        return None
    from vramlint.repository import scripts_launching
    scripts = scripts_launching(path)
    if not scripts:
        return None
    named = ", ".join(shown(launcher) for launcher in scripts)
    if any(str(real(launcher)) in ctx.run_paths for launcher in scripts):
        result.job = False
        result.skip(f"not a job of its own: {named} launch(es) it, checked there")
        result.findings.extend(own)            # the file's own syntax and schema findings stay its own
        return [result]
    out = []
    for launcher in scripts[:4]:
        name = shown(launcher)
        for one in _check_script(read_text(launcher), FileResult(name, cluster=ctx.cluster), ctx):
            if any(real(read) == real(path) for read in one.reads):
                one.via, one.path = f"{name}, {one.via}", path
                out.append(one)
    return out or None


def _needs_model(ctx: Context, result: FileResult, document: Document, what: str) -> ModelShape | None:
    """The model a launcher file is checked with: ``--model`` or the settings'; without one the
    job is not estimated, and says so (VL011)."""
    if ctx.model is None:
        result.findings.append(not_estimated(document.locate("$"), f"{what} names no model, and no --model or "
                                             "[tool.vramlint] model says which to check it with",
                                             "give --model, or model in [tool.vramlint] (per file: an overrides "
                                             "entry with files and model)"))
    return ctx.model


def _check_deepspeed(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """A DeepSpeed file: once per recipe of the repository that runs it (unless --model says which
    model to check it with), else with the model and workload the flags and settings give."""
    launched = _launched_by(document.path, result, ctx, own=[*hjson_syntax(document), *check_schema(document,
                                                                                                     "deepspeed")])
    if launched is not None:
        return launched
    users = [] if "model" in ctx.stated else recipes_using(document.path)
    pending = [u for u in users if str(real(u.document.path)) not in ctx.run_paths]
    if users and not pending:
        result.job = False
        result.skip(f"not a job of its own: it runs the recipes of this run that name it "
                    f"({', '.join(u.document.path for u in users)}), checked there")
        result.findings.extend(hjson_syntax(document))
        result.findings.extend(check_schema(document, "deepspeed"))
        return [result]
    if pending:
        out = []
        for recipe in pending:
            one = FileResult(document.path, kind="deepspeed", via=recipe.document.path, cluster=ctx.cluster, job=True)
            _check_recipe(_at_release(recipe, ctx), one, ctx, deepspeed_document=document)
            out.append(one)
        return out
    result.findings.extend(hjson_syntax(document))
    result.findings.extend(check_schema(document, "deepspeed"))
    model = _needs_model(ctx, result, document, "a DeepSpeed config that no recipe of this repository runs")
    if model is not None:
        _plan_deepspeed(result, read_deepspeed(document), model, ctx.cluster, ctx.flags, document.path)
    return [result]


def _own_size(ctx: Context, acc, result: FileResult) -> Context:
    """The GPUs an Accelerate file launches on, where ``--gpus`` named only their type."""
    cluster = sized(ctx.cluster, acc.num_processes.value, acc.num_machines.value)
    if cluster is None:
        return ctx
    result.cluster = cluster
    result.notes.append(f"GPUs: {cluster.describe()}, from num_processes at {acc.num_processes.location}")
    result.gpus_from = str(acc.num_processes.location)
    return replace(ctx, cluster=cluster)


# Accelerate's distributed types that run on no GPU (accelerate 1.x DistributedType); ``use_cpu``
# reaches only the simple launcher of distributed_type NO (accelerate 1.16.0 commands/launch.py:
# 1420-1440 picks the DeepSpeed, FSDP and multi-GPU launchers on the --cpu flag alone).
OFF_GPU = ("MULTI_CPU", "XLA", "TPU", "MULTI_XPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_HPU")


def _check_accelerate(document: Document, result: FileResult, ctx: Context) -> list[FileResult] | None:
    launched = _launched_by(document.path, result, ctx, own=check_schema(document, "accelerate"))
    if launched is not None:
        return launched
    result.findings.extend(check_schema(document, "accelerate"))
    acc = read_accelerate(document)
    result.findings.extend(check_refusals(acc, document.path))
    if acc.distributed_type.value in OFF_GPU or acc.distributed_type.value == "NO" and acc.use_cpu:
        result.job = False
        result.skip(f"distributed_type {acc.distributed_type.value}{' with use_cpu' if acc.use_cpu else ''}: the job "
                    "runs on no GPU, so there is no GPU memory to check: skipped")
        return
    ctx = _own_size(ctx, acc, result)
    result.findings.extend(check_launch(acc, ctx.cluster, document.path))
    referenced = acc.deepspeed_config_file.value
    model = _needs_model(ctx, result, document, "an Accelerate config")
    if model is None:
        return
    if acc.distributed_type.value not in RUNTIMES:
        result.findings.append(not_estimated(acc.distributed_type.location or document.locate("$"),
                                             f"distributed_type {acc.distributed_type.value}: no GPU memory model",
                                             "vramlint models NO, MULTI_GPU, DEEPSPEED and FSDP; --warn VL011 "
                                             "reports this as a warning"))
    elif acc.distributed_type.value == "DEEPSPEED" and referenced:
        _check_referenced(document.path, str(referenced), acc, result, model, ctx)
    else:
        try:
            result.plan = plan_from_accelerate(acc, model, ctx.cluster, ctx.flags)
        except UnplannableError as exc:
            result.unplanned(str(exc))


def _check_referenced(path: str, referenced: str, acc, result: FileResult, model: ModelShape, ctx: Context) -> None:
    """Accelerate's ``deepspeed_config_file``, relative to the YAML's folder or the working
    directory as accelerate resolves it at launch; its ``"auto"`` precision is Accelerate's."""
    target = find_referenced(referenced, path)
    if target is None:
        result.findings.append(missing_reference(acc.deepspeed_config_file.location, referenced))
        return
    document = _load(str(target), result)
    if document is None:
        return
    flags = ctx.flags
    precision = flags.precision or PRECISION.get(acc.mixed_precision.value)
    if not flags.precision and precision and acc.mixed_precision.from_file:
        flags = replace(flags, origins={**flags.origins, "precision": Origin("file", acc.mixed_precision.location)})
    result.findings.extend(check_schema(document, "deepspeed"))
    ds = read_deepspeed(document)
    if "zero_optimization" not in (document.data or {}):
        result.findings.append(no_zero_section(str(target)))
    _plan_deepspeed(result, ds, model, ctx.cluster, replace(flags, precision=precision), str(target))


def _plan_deepspeed(result: FileResult, ds, model: ModelShape, cluster: Cluster, flags: Flags, path: str) -> None:
    """A DeepSpeed file's consistency and batch-arithmetic checks and its plan — a file of its own
    or the one an Accelerate config names (``path``: where the batch findings point)."""
    result.findings.extend(check_consistency(ds))
    result.findings.extend(check_autotp(ds, model))
    try:
        result.plan = plan_from_deepspeed(ds, model, cluster, flags)
    except UnplannableError as exc:
        result.unplanned(str(exc))
        return
    result.findings.extend(deepspeed_overridden(ds, result.plan, flags))
    result.findings.extend(optimizer_unused(ds, result.plan, flags.workload.get("optimizer"), "--optimizer"))
    result.findings.extend(fp32_by_auto(ds, result.plan))
    result.findings.extend(check_batch(ds, ds.batch_world(cluster.world_size, result.plan.tensor_parallel), path))


def _at_release(recipe: Recipe, ctx: Context) -> Recipe:
    """A LLaMA-Factory recipe as the release its repository runs reads it (``stack``: a vendored
    copy, the pins, else 0.9.5; a vendored copy's own argument dataclasses where it holds them)."""
    if recipe.framework != "llamafactory":
        return recipe
    stack = stack_for(ctx.values, recipe.document.path)
    path = Path(recipe.document.path)
    fields = vendored_arguments(root_of(path)) if path.is_file() else None
    recipe = at_release(recipe, stack.version("llamafactory"), stack.origin("llamafactory"), fields)
    tokenized = preprocess_only(recipe)
    if tokenized is not None and find_referenced(str(tokenized.value), recipe.document.path, True) is None:
        return replace(recipe, task=f"preprocessing ({recipe.release} tokenizes into tokenized_path "
                                    f"{tokenized.value} and exits)")
    return recipe


def _check_recipe(recipe: Recipe, result: FileResult, ctx: Context, deepspeed_document: Document | None = None) -> None:
    """A training recipe, with the DeepSpeed file it names: one job."""
    if not recipe.training:
        result.job = False
        result.skip(f"{recipe.title} {recipe.task} config, not a training job: skipped")
        return
    wrong = list(check_values(recipe))
    if wrong:
        result.findings.extend(wrong)
        return
    model = _recipe_model(recipe, result, ctx)
    if model is None:
        return
    result.model_at = recipe.model.location
    ds, acc = None, None
    stand_in = ctx.values.get("launch_config")
    if recipe.deepspeed.value:
        document = deepspeed_document or _recipe_deepspeed(recipe, result, stand_in)
        if document is None and not stand_in:
            return
        if document is not None:
            ds = _trainer_deepspeed(document, deepspeed_document is None, result, model)
    if ds is None and recipe.fsdp is None and stand_in:
        ds, acc = _launch_config(str(stand_in), recipe, result, model)
        if ds is None and acc is None:
            return
    if acc is not None:
        ctx = _own_size(ctx, acc, result)
    try:
        from vramlint.recipe_plan import plan_from_recipe        # imported by the files that are recipes
        job = plan_from_recipe(recipe, model, ctx.cluster, ctx.values, ctx.stated, ds, acc)
    except UnplannableError as exc:
        result.findings.append(not_plannable(recipe, str(exc)))
        return
    plan = job.plan
    result.findings.extend(overridden(o.fact.location, recipe.key(o.setting), o.fact.value, flag_text(o.setting),
                                      o.value) for o in job.overrides)
    result.findings.extend(check_recipe(recipe, plan))
    if recipe.framework == "llamafactory":
        result.findings.extend(check_llamafactory(recipe, plan))
    if ds is not None:
        result.findings.extend(check_trainer_mismatch(recipe, ds, plan.cluster.world_size, job.trainer))
        asked = recipe.optimizer.value if recipe.optimizer.value in OPTIMIZERS else None
        result.findings.extend(optimizer_unused(ds, plan, asked, recipe.key("optimizer")))
        result.findings.extend(fp32_by_auto(ds, plan))
        result.findings.extend(check_batch(ds, ds.batch_world(ctx.cluster.world_size, plan.tensor_parallel),
                                           ds.document.path))
    result.plan = plan


def _trainer_deepspeed(document: Document, own_findings: bool, result: FileResult, model: ModelShape):
    """A DeepSpeed file a recipe runs: its findings (unless it is the file being checked, which
    has them already) but none for the "auto" values the Trainer fills."""
    ds = read_deepspeed(document)
    if own_findings:
        result.findings.extend(hjson_syntax(document))
        result.findings.extend(check_schema(document, "deepspeed"))
    result.findings.extend(check_consistency(ds, trainer=True))
    result.findings.extend(check_autotp(ds, model))
    return ds


def _launch_config(path: str, recipe: Recipe, result: FileResult, model: ModelShape):
    """``launch_config``: the Accelerate config (or DeepSpeed JSON) the recipe is launched with
    (``accelerate launch --config_file``), for a recipe that names neither DeepSpeed nor FSDP."""
    target = Path(path)
    if not target.is_file():
        raise UsageError(f"launch_config {path!r}: no such file")
    document = _load(str(target), result)
    if document is None:
        return None, None
    kind = detect(document.data)
    if kind == "deepspeed":
        return _trainer_deepspeed(document, True, result, model), None
    if kind != "accelerate":
        raise UsageError(f"launch_config {path!r} is neither an Accelerate config nor a DeepSpeed JSON")
    result.findings.extend(check_schema(document, "accelerate"))
    acc = read_accelerate(document)
    result.findings.extend(check_refusals(acc, document.path))
    referenced = acc.deepspeed_config_file.value
    if acc.distributed_type.value == "DEEPSPEED" and referenced:
        found = find_referenced(str(referenced), document.path)
        if found is None:
            result.findings.append(missing_reference(acc.deepspeed_config_file.location, str(referenced)))
            return None, None
        inner = _load(str(found), result)
        return (None if inner is None else _trainer_deepspeed(inner, True, result, model)), None
    if acc.distributed_type.value not in RUNTIMES:
        result.unplanned(f"the launch_config's distributed_type {acc.distributed_type.value} has no GPU memory model "
                         "(vramlint models NO, MULTI_GPU, DEEPSPEED and FSDP)")
        return None, None
    result.notes.append(f"launched with {document.path} (launch_config)")
    return None, acc


def _named_model(fact: Fact, where: Location, result: FileResult, ctx: Context,
                 revision: str | None = None) -> ModelShape | None:
    """The model a file names (a recipe's, a vLLM config's): ``--model`` instead where the command
    line names another (VL006 says so), else the file's own, resolved; where it cannot be, a VL005
    finding and no estimate — never a default model standing in for it."""
    if "model" in ctx.stated and ctx.model is not None:
        if str(fact.value) != str(ctx.values.get("model")):
            result.findings.append(substituted_model(fact, ctx.values.get("model"), "--model"))
        return ctx.model
    try:
        return read_model(str(fact.value), revision, bool(ctx.values.get("download")))
    except UsageError as exc:
        hint = ("give --model with the model it was trained from (per file: an overrides entry with files and "
                "model)" if isinstance(exc, ModelNotFound) and exc.local else "")
        result.findings.append(model_not_resolved(fact.location or where, str(fact.value), str(exc), hint))
        return None


def _recipe_model(recipe: Recipe, result: FileResult, ctx: Context) -> ModelShape | None:
    """The recipe's own model (a torchtune builder's config, or a name to resolve), unless the
    command line names another."""
    if recipe.model_config is not None and "model" not in ctx.stated:
        return shape_from_dict(dict(recipe.model_config), name=str(recipe.model.value))
    if recipe.model.value:
        revision = recipe.revision.value if isinstance(recipe.revision.value, str) else None
        return _named_model(recipe.model, recipe.document.locate("$"), result, ctx, revision)
    if "model" in ctx.stated and ctx.model is not None:
        return ctx.model
    if ctx.model is not None:
        result.notes.append(f"the recipe names no model: checked with {ctx.model.name} from the settings")
        return ctx.model
    result.findings.append(not_estimated(recipe.document.locate("$"), f"the {recipe.title} recipe names no model",
                                         "give --model, or model in [tool.vramlint] (per file: an overrides entry "
                                         "with files and model)"))
    return None


def _recipe_deepspeed(recipe: Recipe, result: FileResult, stand_in: object = None) -> Document | None:
    """The DeepSpeed config a recipe names: inline, or a file relative to the working directory
    (where the Trainer opens it) or to the recipe's folder and those above it (the repository
    root, where the launch command runs); else the framework's own copy of a file it ships
    (``shipped``), else ``--launch-config`` standing in for it, else VL304."""
    value = recipe.deepspeed.value
    if isinstance(value, dict):
        return sub_document(recipe.document, "$." + recipe.deepspeed.location.json_path.split(".", 1)[1])
    target = find_referenced(str(value), recipe.document.path)
    if target is not None:
        result.reads.append(str(target))
        return _load(str(target), result)
    copy = shipped_copy(str(value))
    if copy is not None:
        result.notes.append(f"deepspeed {value!r} is not in this repository: read as the framework's own copy "
                            f"({copy[0]})")
        return copy[1]
    if stand_in:
        result.notes.append(f"deepspeed {value!r} is not in this repository: --launch-config {stand_in} stands in "
                            "for it")
        return None
    result.findings.append(missing_reference(recipe.deepspeed.location, str(value), key="deepspeed"))
    return None


def _check_vllm(document: Document, result: FileResult, ctx: Context) -> None:
    """A ``vllm serve --config`` file: its own ``model`` when vramlint can read it, else --model
    (a finding says so). The serving model is imported here, by the files that need it."""
    from vramlint.memory.serving import serving_estimate
    from vramlint.rules.serving import check_serving
    from vramlint.serving_plan import serving_from_vllm
    result.findings.extend(check_schema(normalised_document(document), "vllm"))
    cfg = read_vllm(document)
    result.model_at = cfg.model.location
    if cfg.model.value:
        model = _named_model(cfg.model, document.locate("$"), result, ctx)
    else:
        model = _needs_model(ctx, result, document, "this vLLM config")
    if model is None:
        return
    stack = stack_for(ctx.values, document.path)
    result.findings.extend(_versions(stack, ("vllm",), result))
    serving = serving_from_vllm(cfg, model, ctx.cluster, result.notes, stack.version("vllm"))
    result.serving = (serving, serving_estimate(serving))
    fitted = result.serving[1].max_model_len
    if serving.auto_max_model_len and 0 < fitted < serving.context_len:
        result.notes.append(f"max_model_len auto: vLLM fits {fitted:,} of the model's {serving.context_len:,} tokens "
                            "in the KV cache and runs with that")
    result.findings.extend(check_serving(serving, result.serving[1], cfg.location_of, document.path))


# -- launch scripts ----------------------------------------------------------------------------

_SHEBANG = ("#!/bin/bash", "#!/usr/bin/env bash", "#!/bin/sh", "#!/usr/bin/bash", "#!/usr/bin/env sh")


def is_script(path: str, text: str | None = None) -> bool:
    """A shell or sbatch script, by its name or its ``#!`` line."""
    if script(path):
        return True
    return text is not None and text.lstrip().startswith(_SHEBANG)


def _script_text(path: str, result: FileResult) -> str | None:
    """A script's text, or None with its VL001 / VL004 finding where it cannot be read as text."""
    try:
        return read_text(Path(path))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ParseError as exc:
        result.findings.append(parse_error(path, exc))
        return None


def _check_script(text: str, result: FileResult, ctx: Context) -> list[FileResult]:
    """A shell or sbatch script: its ``#SBATCH`` request and the jobs its commands start."""
    from vramlint.readers.launch import sbatch_options, slurm_variables
    from vramlint.readers.shell import read_script, sbatch_lines
    from vramlint.rules.scripts import sbatch_variable
    if ctx.cluster is None:
        raise UsageError(NO_GPUS)
    result.kind = SCRIPT_KIND
    lines = sbatch_lines(text)
    options = sbatch_options(lines)
    script = read_script(text, result.path, known=slurm_variables(options))
    out = _check_commands(script.commands, text, result, ctx, options)
    out[0].findings.extend(sbatch_variable(result.path, option, line) for option, line in lines if "$" in option)
    return out


NO_GPUS = "--gpus not given and no gpus in [tool.vramlint] of pyproject.toml"


def _check_commands(commands: list, text: str, result: FileResult, ctx: Context, options: dict) -> list[FileResult]:
    """One result per job the commands start; the script's own result, skipped, where none."""
    from vramlint.readers.launch import SERVING, launches, submitted
    out = []
    for launch in launches(commands):
        one = FileResult(result.path, kind=SCRIPT_KIND, via=f"{launch.launcher}, line {launch.line}",
                         cluster=ctx.cluster, job=True, notes=list(result.notes), gpus_from=result.gpus_from)
        checked = _check_serving_launch(launch, text, one, ctx, options) if launch.kind == SERVING else \
            _check_training_launch(launch, text, one, ctx, options)
        if checked:
            out.append(one)
    if out:
        out[0].findings[:0] = result.findings       # what the file itself says (a task's GPUs) goes with its first job
        return out
    handed = [found for name in dict.fromkeys(submitted(commands))
              if (found := find_referenced(name, result.path)) is not None and real(found) != real(result.path)]
    elsewhere = [target for target in handed if str(real(target)) not in ctx.run_paths]
    if elsewhere:                       # this run does not check them: they are checked here, as this file's
        return _handed_to(elsewhere, result, ctx)
    result.job = False
    result.skip(f"hands its job to {', '.join(shown(t) for t in handed)}, checked in this run: skipped" if handed
                else "starts no training or serving job (torchrun, accelerate launch, deepspeed, python, "
                "llamafactory-cli, tune, axolotl, vllm serve): skipped")
    return [result]


def _handed_to(scripts: list, result: FileResult, ctx: Context) -> list[FileResult]:
    """A script that hands its job to others (``sbatch job.slurm``, ``srun ./train.sh``) that this
    run does not check: their jobs are checked here, so the file that starts them does not pass
    unexamined (each once: the scripts already on the way are not followed again)."""
    ctx = replace(ctx, run_paths=ctx.run_paths | {str(real(result.path))} | {str(real(s)) for s in scripts})
    out = []
    for target in scripts:
        name = shown(target)
        for one in _check_script(read_text(target), FileResult(name, cluster=ctx.cluster), ctx):
            one.via = f"handed by {result.path}" + (f", {one.via}" if one.via else "")
            out.append(one)
    return out


def _check_cloud(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """A SkyPilot or dstack task, or a Kubernetes manifest's workloads: each one's GPUs (type,
    count, nodes) stand for ``--gpus`` where the command line states no count, and its commands
    are read as a script with the platform's variables (``readers/cloud.py``, ``kubernetes.py``)."""
    from vramlint.readers.cloud import read_tasks
    tasks = read_tasks(result.kind, document)
    out = []
    for task in tasks:
        one = result if len(tasks) == 1 else FileResult(result.path, kind=result.kind, cluster=ctx.cluster, job=True)
        out += _check_task(task, document, one, ctx)
    if not out:
        result.job = False
        result.skip("a manifest with no workload that runs a job: skipped")
        return [result]
    return out


def _check_task(task, document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    from vramlint.readers.shell import read_script
    if task.unread:
        result.findings.append(not_estimated(Location(result.path, "$", task.line, 1), f"{task.platform}: "
                                             f"{task.unread}", "check the recipe or config it runs; --warn VL011 "
                                             "reports this as a warning"))
        result.unplanned(task.unread)
        return [result]
    gpu = _task_gpu(task, result, ctx)
    per_node = task.per_node.text if task.per_node is not None else None
    nodes = task.nodes.text if task.nodes is not None else "1"
    if per_node and per_node.isdigit() and nodes and str(nodes).isdigit():
        at = task.per_node
        base = ctx.cluster if ctx.cluster is not None else Cluster(gpu, 1, 1, counted=False)
        cluster = _stated_cluster(replace(ctx, cluster=replace(base, gpu=gpu)), result, int(per_node), int(nodes),
                                  Location(result.path, "$", at.line, at.column), f"{task.platform}'s resources")
        if cluster is not ctx.cluster:
            result.notes.append(f"GPUs: {cluster.describe()}, from {task.platform}'s resources at line {at.line}"
                                + (f" (it also accepts {', '.join(task.alternatives)})" if task.alternatives else ""))
    else:                               # no count (dstack's 1..8): the command line's, or the launches' own
        cluster = replace(ctx.cluster, gpu=gpu, counted=ctx.cluster.counted) if ctx.cluster else \
            Cluster(gpu, 1, 1, counted=False)
    task_ctx = replace(ctx, cluster=cluster, kind=None)
    result.cluster = cluster
    commands = [c for script in task.scripts
                for c in read_script(script.text, result.path, known=task.variables, line0=script.line0).commands]
    return _check_commands(commands, document.text, result, task_ctx, {})


def _task_gpu(task, result: FileResult, ctx: Context):
    """The GPU type a task runs on: the one it asks for, unless the command line names another
    (VL007 says so); a type vramlint does not know leaves it to ``--gpus``."""
    from vramlint.hardware import gpu_from_text
    flagged = ctx.cluster.gpu if ctx.cluster is not None else None
    stated = None
    if task.gpu is not None and task.gpu.text:
        try:
            stated = gpu_from_text(task.gpu.text)
        except UsageError:
            result.notes.append(f"{task.platform} asks for {task.gpu.text!r} (line {task.gpu.line}), a GPU vramlint "
                                "does not know: checked on --gpus")
    if stated is None or flagged is None:
        if (stated or flagged) is None:
            raise UsageError(f"{result.path}: {task.platform} names no GPU type vramlint knows; give --gpus")
        return stated or flagged
    if "gpus" in ctx.stated:
        if flagged.name != stated.name:
            result.findings.append(overridden(Location(result.path, "$", task.gpu.line, task.gpu.column),
                                              f"{task.platform}'s GPU", stated.name, "--gpus", flagged.name))
        return flagged
    return stated                       # the settings' type stands in only where a file names none


def _stated_cluster(ctx: Context, result: FileResult, per_node: int, nodes: int, where: Location, what: str):
    """The GPUs a file states (a launch's process count, a task's resources): they are the job's,
    over the settings' count; a count given on the command line wins, with VL007 saying so."""
    from vramlint.hardware import bounded
    if ctx.cluster.counted and "gpus" in ctx.stated:
        if (ctx.cluster.per_node, ctx.cluster.nodes) != (per_node, nodes):
            result.findings.append(overridden(where, what, f"{per_node} per node x {nodes} node(s)", "--gpus",
                                              ctx.cluster.describe()))
        return ctx.cluster
    cluster = bounded(ctx.cluster.gpu, per_node, nodes, f"{result.path}:{where.line}: {what}")
    result.cluster, result.gpus_from = cluster, f"{result.path}:{where.line}"
    return cluster


def _launch_cluster(launch, one: FileResult, ctx: Context, options: dict, config_counts: bool = False):
    """The GPUs a launch runs on: the count it states (``--gpus`` naming the type), the command
    line's where it states one, else none (VL011: the count is the run's to know)."""
    from vramlint.readers.launch import stated_gpus
    from vramlint.readers.shell import Word
    from vramlint.rules.scripts import gpus_contradict, value_unknown
    path = one.path
    stated = stated_gpus(launch, options)
    one.findings.extend(gpus_contradict(path, word, message) for word, message in stated.conflicts)
    if stated.per_node is None:
        if config_counts and stated.unknown is None:
            return ctx.cluster               # the Accelerate config file it names says (its num_processes)
        word = stated.unknown or Word(None, launch.line, 1, unknown="not stated")
        if ctx.cluster.counted:
            one.findings.append(value_unknown(path, "the GPU count per node", word,
                                              f"checked on {ctx.cluster.describe()} (--gpus)"))
            return ctx.cluster
        one.findings.append(value_unknown(path, "the GPU count per node", word, "no estimate without a count"))
        one.findings.append(not_estimated(Location(path, "$", word.line, word.column),
                                          f"the launch at line {launch.line} runs on a GPU count only the run knows",
                                          f"give the count, e.g. --gpus 8x{ctx.cluster.gpu.name} (GPUs per node; "
                                          f"NODESx8x{ctx.cluster.gpu.name} for several nodes), or gpus for this "
                                          "file in [[tool.vramlint.overrides]]"))
        one.unplanned("the GPU count is not stated")
        return None
    at = stated.per_node_at or Word(None, launch.line, 1)
    if stated.nodes_at is not None and stated.nodes_at.text is None:
        one.findings.append(value_unknown(path, "the node count", stated.nodes_at, "checked on 1 node"))
    one.notes.append(f"GPUs: {stated.per_node} per node x {stated.nodes} node(s), from {stated.by} at line {at.line}")
    if one.gpus_from is not None and ctx.cluster.counted:      # a task spec's resources say: the launch runs on them
        if stated.per_node > ctx.cluster.per_node:
            one.findings.append(gpus_contradict(path, at, f"{stated.by} {stated.per_node} but the task gives "
                                                          f"{ctx.cluster.per_node} GPU(s) per node ({one.gpus_from}): "
                                                          "processes past them fail at torch.cuda.set_device"))
        return ctx.cluster
    return _stated_cluster(ctx, one, stated.per_node, stated.nodes, Location(path, "$", at.line, at.column), stated.by)


def _check_training_launch(launch, text: str, one: FileResult, ctx: Context, options: dict) -> bool:
    """A training launch: the program's arguments (over the recipe file it parses first, where it
    names one) read as the same keys in a recipe; the Accelerate config it launches with stands in
    as ``--launch-config`` does. False where the command is no training job (a download script)."""
    from vramlint.readers.launch import accelerate_settings, arguments_data
    from vramlint.rules.scripts import value_unknown
    path = one.path
    if launch.unread:
        return _unread_launch(launch, one)
    data, positions, unknown = arguments_data(launch)
    recipe = launch.recipe
    if recipe is not None and recipe.text is None:
        one.findings.append(value_unknown(path, "the recipe file", recipe, "no estimate without it"))
        return _unread_launch(replace(launch, unread="the recipe file it runs is known only when it runs"), one)
    if recipe is not None:
        target = find_referenced(recipe.text, path)
        if target is None:
            one.findings.append(missing_reference(Location(path, "$", recipe.line, recipe.column), recipe.text,
                                                  key="the recipe file"))
            return True
        base = _load(str(target), one)
        if base is None or not isinstance(base.data, dict):
            return True
        document = Document(shown(target), base.text, {**base.data, **data}, {**base.positions, **positions},
                            list(base.lenient), {key: path for key in positions})
        one.reads.append(shown(target))
    else:
        document = Document(path, text, data, positions, on_command_line=True)
    kind = detect(document.data)
    if kind not in RECIPES:
        if not launch.distributed:
            return False                  # python setup.py, a download script: not a job
        program = launch.program.text if launch.program is not None else launch.launcher
        return _unread_launch(replace(launch, unread=f"{program} gets arguments that are no recipe vramlint reads"),
                              one)
    values = dict(ctx.values)
    config = launch.options.get("config_file")
    if launch.launcher == "accelerate" and config is not None and config.text:
        found = find_referenced(config.text, path)
        if found is None:
            one.findings.append(missing_reference(Location(path, "$", config.line, config.column), config.text,
                                                  key="--config_file"))
            return True
        values["launch_config"] = shown(found)
        one.reads.append(shown(found))
    for key, value, word in accelerate_settings(launch):        # accelerate's own flags, as the Trainer gets them
        if key not in document.data and not (key == "deepspeed" and "fsdp" in document.data):
            document.data[key] = value
            document.positions[f"$.{key}"] = (word.line, word.column)
            document.elsewhere[f"$.{key}"] = path
    for key, word in unknown:
        one.findings.append(value_unknown(path, f"--{key}", word, "the estimate takes the default or the flag that "
                                                                  "states it"))
    cluster = _launch_cluster(launch, one, ctx, options, config_counts="launch_config" in values)
    if cluster is None:
        return True
    _check(document, one, replace(ctx, cluster=cluster, values=values, kind=kind))
    return True


def _unread_launch(launch, one: FileResult) -> bool:
    """A launch that starts a job vramlint cannot read: not estimated (VL011), never skipped."""
    one.findings.append(not_estimated(Location(one.path, "$", launch.line, 1),
                                      f"{launch.launcher} at line {launch.line} starts a job vramlint does not read: "
                                      f"{launch.unread}", "check the recipe or config file it runs, or vramlint "
                                      "estimate with the same arguments; --warn VL011 reports this as a warning"))
    one.unplanned(launch.unread)
    return True


def _check_serving_launch(launch, text: str, one: FileResult, ctx: Context, options: dict) -> bool:
    """``vllm serve``: its arguments read as the same keys in a ``vllm serve --config`` file."""
    from vramlint.readers.launch import arguments_data, stated_gpus
    from vramlint.rules.scripts import gpus_contradict, value_unknown
    data, positions, unknown = arguments_data(launch)
    for key, word in unknown:
        one.findings.append(value_unknown(one.path, f"--{key}", word, "the estimate takes vLLM's default"))
    document = Document(one.path, text, _as_vllm_parses(data), positions)
    stated = stated_gpus(launch, options)
    one.findings.extend(gpus_contradict(one.path, word, message) for word, message in stated.conflicts)
    cluster = ctx.cluster
    if stated.per_node is not None and not (one.gpus_from is not None and ctx.cluster.counted):
        at = stated.per_node_at
        cluster = _stated_cluster(ctx, one, stated.per_node, stated.nodes, Location(one.path, "$", at.line, at.column),
                                  stated.by)
    _check(document, one, replace(ctx, cluster=cluster, kind="vllm"))
    return True


def _as_vllm_parses(data: dict) -> dict:
    """Command-line values as vLLM's argument parser types them: a string option stays a string
    (``--api-key 123``), whatever it looks like (the types are the schema's, from vLLM's own)."""
    from vramlint.schemas import load_schema
    properties = load_schema("vllm").get("properties", {})
    out = {}
    for key, value in data.items():
        spec = properties.get(key.replace("-", "_"), {})
        if spec.get("type") == "string" and not isinstance(value, str):
            value = str(value) if not isinstance(value, bool) else value
        out[key] = value
    return out
