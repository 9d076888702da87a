"""An Accelerate config: the job ``accelerate launch --config_file`` starts (its process count
stands for ``--gpus`` where the command line names only the type), and the DeepSpeed file it
names read as Accelerate runs it."""

from __future__ import annotations

from dataclasses import replace

from vramlint.documents import Document
from vramlint.errors import UnplannableError
from vramlint.jobs.deepspeed import plan_deepspeed
from vramlint.jobs.gpus import own_size
from vramlint.jobs.inputs import load, needs_model
from vramlint.jobs.result import Context, FileResult
from vramlint.jobs.launched import launched_by
from vramlint.models.shape import ModelShape
from vramlint.plan import RUNTIMES, Origin, plan_from_accelerate
from vramlint.readers.accelerate import PRECISION, read_accelerate
from vramlint.readers.deepspeed import read_deepspeed
from vramlint.repository import find_referenced
from vramlint.rules.inputs import not_estimated
from vramlint.rules.launch import check_launch, check_refusals, missing_reference, no_zero_section
from vramlint.rules.schema import check_schema

# Accelerate's distributed types that run on no GPU (accelerate 1.x DistributedType); ``use_cpu``
# reaches only the simple launcher of distributed_type NO (accelerate 1.16.0 commands/launch.py:
# 1420-1440 picks the DeepSpeed, FSDP and multi-GPU launchers on the --cpu flag alone).
OFF_GPU = ("MULTI_CPU", "XLA", "TPU", "MULTI_XPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_HPU")


def check(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """An Accelerate config: the job it launches, with the DeepSpeed file it names."""
    launched = launched_by(document.path, result, ctx, own=check_schema(document, "accelerate"))
    if launched is not None:
        return launched
    result.findings.extend(check_schema(document, "accelerate"))
    acc = read_accelerate(document)
    result.findings.extend(check_refusals(acc, document.path))
    if acc.distributed_type.value in OFF_GPU or acc.distributed_type.value == "NO" and acc.use_cpu:
        result.job = False
        result.skip(f"distributed_type {acc.distributed_type.value}{' with use_cpu' if acc.use_cpu else ''}: the job "
                    "runs on no GPU, so there is no GPU memory to check: skipped")
        return [result]
    ctx = own_size(ctx, acc, result)
    result.findings.extend(check_launch(acc, ctx.cluster, document.path))
    referenced = acc.deepspeed_config_file.value
    model = needs_model(ctx, result, document, "an Accelerate config")
    if model is None:
        return [result]
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
    return [result]


def _check_referenced(path: str, referenced: str, acc, result: FileResult, model: ModelShape, ctx: Context) -> None:
    """Accelerate's ``deepspeed_config_file``, relative to the YAML's folder or the working
    directory as accelerate resolves it at launch; its ``"auto"`` precision is Accelerate's."""
    target = find_referenced(referenced, path)
    if target is None:
        result.findings.append(missing_reference(acc.deepspeed_config_file.location, referenced))
        return
    document = load(str(target), result)
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
    plan_deepspeed(result, ds, model, ctx.cluster, replace(flags, precision=precision), str(target))
