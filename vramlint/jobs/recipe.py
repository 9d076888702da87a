"""A training recipe (TRL / transformers arguments, LLaMA-Factory, axolotl, torchtune, GLM): one job
with the DeepSpeed file it names, or the Accelerate config it is launched with
(``--launch-config``, or the ``accelerate launch --config_file`` of the script that runs it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from vramlint.documents import Document, sub_document
from vramlint.errors import UnplannableError, UsageError
from vramlint.jobs.deepspeed import trainer_deepspeed
from vramlint.jobs.gpus import own_size, recipe_size
from vramlint.jobs.inputs import load, named_model
from vramlint.jobs.result import Context, FileResult
from vramlint.jobs.launched import launched_by
from vramlint.models.hfconfig import shape_from_dict
from vramlint.models.shape import ModelShape
from vramlint.plan import OPTIMIZERS, RUNTIMES, flag_text
from vramlint.readers.accelerate import AccelerateConfig, read_accelerate
from vramlint.readers.deepspeed import DeepSpeedConfig
from vramlint.readers.llamafactory import at_release, preprocess_only
from vramlint.readers.recipe import Recipe
from vramlint.readers.registry import RECIPES, detect
from vramlint.repository import find_referenced, root_of
from vramlint.rules.batch import check_batch
from vramlint.rules.consistency import fp32_by_auto
from vramlint.rules.inputs import not_estimated, optimizer_unused, overridden
from vramlint.rules.launch import check_refusals, missing_reference
from vramlint.rules.llamafactory import check_llamafactory
from vramlint.rules.recipe import (check_recipe, layout_refusals, check_trainer_mismatch, check_values, framework_refusals,
                                   not_plannable)
from vramlint.rules.schema import check_schema
from vramlint.shipped import shipped_copy
from vramlint.stack import stack_for
from vramlint.vendored import vendored_arguments


def check(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """A recipe file: the job the launch scripts of its repository start with it, where they do
    (``script.launched_by``), else its own job on the command line's GPUs."""
    launched = launched_by(document.path, result, ctx)
    if launched is not None:
        return launched
    read = RECIPES[result.kind].read
    recipe = read(document, ctx.trainer) if ctx.trainer is not None else read(document)
    result.resolving = recipe.model.value
    recipe_job(as_released(recipe, ctx), result, ctx)
    out = [result]
    for group in recipe.groups:
        out.append(_said_above(group.role, group.model.value, out, ctx, group.model.location)
                   or _group_job(group, recipe, result, ctx))
    for engines in recipe.engines:
        model = engines.document.data.get("model")
        unresolved = _said_above(engines.role, model, out, ctx, engines.document.locate("$.model"))
        if unresolved is not None:
            out.append(unresolved)
            continue
        from vramlint.jobs.vllm import engines_job       # the serving model: loaded where a job has engines
        out.append(engines_job(engines, result, ctx))
    return out


def _group_job(group: Recipe, first: Recipe, result: FileResult, ctx: Context) -> FileResult:
    """Another GPU group of the same job (``Recipe.groups``: OpenRLHF's critic, reference or reward
    model on GPUs of its own): a job of its own, on the GPUs its recipe states, reported beside the
    first. ``--model`` names the first group's model: a group of another model resolves its own, as
    any model a file names."""
    one = FileResult(result.path, kind=result.kind, via=", ".join(filter(None, (result.via, group.role))),
                     cluster=ctx.cluster, job=True)
    if group.model.value != first.model.value:
        ctx = replace(ctx, stated=ctx.stated - {"model"})
    recipe_job(group, one, ctx)
    one.resolving = group.model.value
    return one


def _said_above(role: str, model, earlier: list[FileResult], ctx: Context, where) -> FileResult | None:
    """A group of a model an earlier job of the launch could not resolve: not estimated, said once
    (a VL011 pointing at that job's VL005), not a second VL005 for the same line."""
    if not any(f.code == "VL005" for one in earlier if one.resolving == model for f in one.findings):
        return None
    first = earlier[0]
    one = FileResult(first.path, kind=first.kind, via=", ".join(filter(None, (first.via, role))),
                     cluster=ctx.cluster, job=True)
    one.model_at = where
    whose = f"{role}'" if role.endswith("s") else f"{role}'s"
    one.unplanned(f"the {whose} model is {model}, not resolved (its VL005 above)")
    return one


def as_released(recipe: Recipe, ctx: Context) -> Recipe:
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


def recipe_job(recipe: Recipe, result: FileResult, ctx: Context,
               deepspeed_document: Document | None = None) -> None:
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
    if recipe.value_head:
        model = model.as_value_model()
    result.model_at = recipe.model.location
    ds, acc = None, None
    stand_in = ctx.values.get("launch_config")
    if recipe.deepspeed.value:
        document = deepspeed_document or _recipe_deepspeed(recipe, result, stand_in)
        if document is None and not stand_in:
            return
        if document is not None:
            ds = trainer_deepspeed(document, deepspeed_document is None, result, model)
    if ds is None and recipe.fsdp is None and stand_in:
        ds, acc = _launch_config(str(stand_in), recipe, result, model)
        if ds is None and acc is None:
            return
    if acc is not None:
        ctx = own_size(ctx, acc, result)
    if recipe.gpus is not None:
        ctx = recipe_size(ctx, recipe, result)
        if ctx is None:
            return
    if recipe.layout is not None:
        refused = list(layout_refusals(recipe, model, ctx.cluster.world_size))
        if refused:                     # the framework stops before its first step: nothing to estimate
            result.findings.extend(framework_refusals(recipe, None))
            result.findings.extend(refused)
            result.unplanned(f"{recipe.title} refuses the layout")
            return
    others = _other_models(recipe, result, ctx)
    if others is None:
        return
    try:
        from vramlint.recipe_plan import plan_from_recipe        # imported by the files that are recipes
        job = plan_from_recipe(recipe, model, ctx.cluster, ctx.values, ctx.stated, ds, acc, others)
    except UnplannableError as exc:
        result.findings.append(not_plannable(recipe, str(exc)))
        return
    plan = job.plan
    result.findings.extend(overridden(o.fact.location, recipe.key(o.setting), o.fact.value, flag_text(o.setting),
                                      o.value) for o in job.overrides)
    result.findings.extend(check_recipe(recipe, plan))
    result.findings.extend(framework_refusals(recipe, plan))
    if recipe.framework == "llamafactory":
        result.findings.extend(check_llamafactory(recipe))
    if ds is not None and not recipe.role:     # a group's config is the first job's, its findings said there
        result.findings.extend(check_trainer_mismatch(recipe, ds, plan.cluster.world_size, job.trainer))
        asked = recipe.optimizer.value if recipe.optimizer.value in OPTIMIZERS else None
        result.findings.extend(optimizer_unused(ds, plan, asked, recipe.key("optimizer")))
        result.findings.extend(fp32_by_auto(ds, plan))
        result.findings.extend(check_batch(ds, ds.batch_world(ctx.cluster.world_size, plan.tensor_parallel),
                                           ds.document.path))
    result.plan = plan


# An RL job's other trained or frozen models a file may name (the rollout facts' ``<role>_model``)
OTHER_MODELS = ("critic", "reward")


def _other_models(recipe: Recipe, result: FileResult, ctx: Context) -> dict[str, ModelShape] | None:
    """An RL job's critic and reward model, where its file names models other than the actor's,
    each resolved as any model a file names (``--model`` names the actor, not them); a role it
    names none for is left out (the actor's shape), and None where one cannot be resolved (VL005:
    no estimate)."""
    facts = recipe.rollout.value if recipe.rollout is not None else {}
    shapes: dict[str, ModelShape] = {}
    for role in OTHER_MODELS:
        named = facts.get(f"{role}_model")
        if not facts.get(role) or not facts[role].value or named is None or named.location is None \
                or named.value in (None, recipe.model.value):
            continue
        same = next((shapes[other] for other in shapes if facts[f"{other}_model"].value == named.value), None)
        shape = same or named_model(named, recipe.document.locate("$"), result,
                                    replace(ctx, stated=ctx.stated - {"model"}))
        if shape is None:
            return None
        shapes[role] = shape
    return shapes


def _launch_config(path: str, recipe: Recipe, result: FileResult,
                   model: ModelShape) -> tuple[DeepSpeedConfig | None, AccelerateConfig | None]:
    """``launch_config``: the Accelerate config (or DeepSpeed JSON) the recipe is launched with
    (``accelerate launch --config_file``), for a recipe that names neither DeepSpeed nor FSDP."""
    target = Path(path)
    copy = None if target.is_file() else shipped_copy(path)
    if not target.is_file() and copy is None:
        raise UsageError(f"launch_config {path!r}: no such file")
    document = copy[1] if copy is not None else load(str(target), result)
    if document is None:
        return None, None
    kind = detect(document.data)
    if kind == "deepspeed":
        return trainer_deepspeed(document, True, result, model), None
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
        inner = load(str(found), result)
        return (None if inner is None else trainer_deepspeed(inner, True, result, model)), None
    if acc.distributed_type.value not in RUNTIMES:
        result.unplanned(f"the launch_config's distributed_type {acc.distributed_type.value} has no GPU memory model "
                         "(vramlint models NO, MULTI_GPU, DEEPSPEED and FSDP)")
        return None, None
    result.notes.append(f"launched with {document.path} (launch_config)")
    return None, acc


def _recipe_model(recipe: Recipe, result: FileResult, ctx: Context) -> ModelShape | None:
    """The recipe's own model (a torchtune builder's config, or a name to resolve), unless the
    command line names another."""
    shape = _recipe_shape(recipe, result, ctx)
    if shape is None or not recipe.model_code:
        return shape
    from vramlint.models.code import as_run          # the framework's own model code runs the shapes
    return as_run(shape, recipe.model_code, converted=recipe.model_config is None or "model" in ctx.stated)


def _recipe_shape(recipe: Recipe, result: FileResult, ctx: Context) -> ModelShape | None:
    if recipe.model_config is not None and "model" not in ctx.stated:
        return shape_from_dict(dict(recipe.model_config), name=str(recipe.model.value))
    from vramlint.layouts import layout, own_model
    if recipe.layout is not None and own_model(recipe) and "model" not in ctx.stated:   # its own model code
        why, hint = layout(recipe).unmodelled(recipe)
        result.findings.append(not_estimated(recipe.model.location or recipe.document.locate("$"), why, hint))
        return None
    if recipe.model.value:
        revision = recipe.revision.value if isinstance(recipe.revision.value, str) else None
        return named_model(recipe.model, recipe.document.locate("$"), result, ctx, revision)
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
        return load(str(target), result)
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
