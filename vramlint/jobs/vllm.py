"""A ``vllm serve --config`` file, or a ``vllm serve`` line read as one: the model it serves and
vLLM's own start-up budget at the release the repository pins. Imported by the files that
serve, so a training file never loads the serving model."""

from __future__ import annotations

from vramlint.documents import Document
from vramlint.jobs.inputs import served_model, versions
from vramlint.jobs.result import Context, FileResult
from vramlint.memory.serving.vllm import serving_estimate
from vramlint.readers.recipe import Engines
from vramlint.readers.vllm import normalised_document, read_vllm
from vramlint.rules.schema import check_schema
from vramlint.rules.serving import check_serving
from vramlint.serving_plan import serving_from_vllm
from vramlint.stack import Pinned, Stack, stack_for


def check(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """A ``vllm serve --config`` file: its own ``model`` when vramlint can read it, else --model
    (a finding says so)."""
    return _serve(document, result, ctx, stack_for(ctx.values, document.path))


def engines_job(engines: Engines, result: FileResult, ctx: Context) -> FileResult:
    """A job's generation engines on GPUs of their own (``Recipe.engines``), a job of its own
    reported beside the trainer's: their ``vllm serve`` config at the release the repository pins,
    else the one the framework's extra pins."""
    one = FileResult(result.path, kind="vllm", via=", ".join(filter(None, (result.via, engines.role))),
                     cluster=ctx.cluster, job=True)
    one.notes.append(engines.note)
    stack = stack_for(ctx.values, engines.document.path)
    if "vllm" not in stack.versions:
        stack = Stack({**stack.versions, "vllm": Pinned(engines.release, engines.origin)})
    _serve(engines.document, one, ctx, stack, engines.spelling)
    return one


def _serve(document: Document, result: FileResult, ctx: Context, stack: Stack,
           spelling: dict | None = None) -> list[FileResult]:
    result.findings.extend(check_schema(normalised_document(document), "vllm"))
    cfg = read_vllm(document)
    model = served_model(cfg.model, document, result, ctx, "this vLLM config")
    if model is None:
        return [result]
    result.findings.extend(versions(stack, ("vllm",), result))
    serving = serving_from_vllm(cfg, model, ctx.cluster, result.notes, stack.version("vllm"))
    result.serving = (serving, serving_estimate(serving))
    fitted = result.serving[1].max_model_len
    if serving.auto_max_model_len and 0 < fitted < serving.context_len:
        result.notes.append(f"max_model_len auto: vLLM fits {fitted:,} of the model's {serving.context_len:,} tokens "
                            "in the KV cache and runs with that")
    result.findings.extend(check_serving(serving, result.serving[1], cfg.location_of, document.path, spelling))
    return [result]
