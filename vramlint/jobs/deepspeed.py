"""A DeepSpeed JSON: the job of each recipe of the repository that runs it (a hook that sees only
the DeepSpeed file still checks the jobs that run it), else the job the flags and settings state
with it; and the DeepSpeed file a recipe or an Accelerate config names, read as they run it."""

from __future__ import annotations

from vramlint.documents import Document
from vramlint.errors import UnplannableError
from vramlint.hardware import Cluster
from vramlint.jobs.inputs import needs_model
from vramlint.jobs.result import Context, FileResult
from vramlint.jobs.launched import launched_by
from vramlint.models.shape import ModelShape
from vramlint.plan import Flags, plan_from_deepspeed
from vramlint.readers.deepspeed import DeepSpeedConfig, read_deepspeed
from vramlint.repository import real, recipes_using
from vramlint.rules.batch import check_batch
from vramlint.rules.consistency import check_autotp, check_consistency, fp32_by_auto
from vramlint.rules.inputs import deepspeed_overridden, optimizer_unused
from vramlint.rules.schema import check_schema
from vramlint.rules.syntax import hjson_syntax


def check(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """A DeepSpeed file: once per recipe of the repository that runs it (unless --model says which
    model to check it with), else with the model and workload the flags and settings give."""
    launched = launched_by(document.path, result, ctx, own=[*hjson_syntax(document), *check_schema(document,
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
        from vramlint.jobs.recipe import as_released, recipe_job
        out = []
        for recipe in pending:
            one = FileResult(document.path, kind="deepspeed", via=recipe.document.path, cluster=ctx.cluster, job=True)
            recipe_job(as_released(recipe, ctx), one, ctx, deepspeed_document=document)
            out.append(one)
        return out
    result.findings.extend(hjson_syntax(document))
    result.findings.extend(check_schema(document, "deepspeed"))
    model = needs_model(ctx, result, document, "a DeepSpeed config that no recipe of this repository runs")
    if model is not None:
        plan_deepspeed(result, read_deepspeed(document), model, ctx.cluster, ctx.flags, document.path)
    return [result]


def plan_deepspeed(result: FileResult, ds, model: ModelShape, cluster: Cluster, flags: Flags, path: str) -> None:
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


def trainer_deepspeed(document: Document, own_findings: bool, result: FileResult,
                      model: ModelShape) -> DeepSpeedConfig:
    """A DeepSpeed file a recipe runs: its findings (unless it is the file being checked, which
    has them already) but none for the "auto" values the Trainer fills."""
    ds = read_deepspeed(document)
    if own_findings:
        result.findings.extend(hjson_syntax(document))
        result.findings.extend(check_schema(document, "deepspeed"))
    result.findings.extend(check_consistency(ds, trainer=True))
    result.findings.extend(check_autotp(ds, model))
    return ds
