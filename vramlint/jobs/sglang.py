"""An SGLang server's ``--config`` file, or a ``sglang.launch_server`` / ``sglang serve`` line read
as one: the model it serves and SGLang's own start-up budget at the release the repository pins
(``memory/serving/sglang.py``). Imported by the files that serve with SGLang only."""

from __future__ import annotations

from vramlint.documents import Document
from vramlint.jobs.inputs import served_model, versions
from vramlint.jobs.result import Context, FileResult
from vramlint.memory.serving.sglang import SglangServing, sglang_estimate
from vramlint.readers.sglang import count, fraction, read_sglang
from vramlint.rules.sglang import check_sglang, unpriced
from vramlint.stack import stack_for


def check(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    cfg = read_sglang(document)
    model = served_model(cfg.model, document, result, ctx, "this SGLang config")
    if model is None:
        return [result]
    stack = stack_for(ctx.values, document.path)
    result.findings.extend(versions(stack, ("sglang",), result))
    gpu = ctx.cluster.gpu
    serving = SglangServing(
        model, gpu.memory_bytes, gpu.sm, tp=count(cfg.tp, 1), pp=count(cfg.pp, 1), dp=count(cfg.dp, 1),
        mem_fraction_static=fraction(cfg.mem_fraction_static), chunked_prefill_size=count(cfg.chunked_prefill_size),
        cuda_graph_max_bs=count(cfg.cuda_graph_max_bs), max_running_requests=count(cfg.max_running_requests),
        max_total_tokens=count(cfg.max_total_tokens), context_length=count(cfg.context_length),
        kv_cache_dtype=str(cfg.kv_cache_dtype.value or "auto"),
        dtype_bytes=4 if str(cfg.dtype.value).lower() in ("float", "float32") else 2, page_size=count(cfg.page_size, 1),
        disable_cuda_graph=cfg.disable_cuda_graph.value is True, release=stack.version("sglang"))
    est = sglang_estimate(serving)
    result.serving = (serving, est)
    result.notes.append(f"mem_fraction_static {est.mem_fraction_static}: {est.fraction_words}")
    result.findings.extend(unpriced(cfg))
    result.findings.extend(check_sglang(serving, est, cfg.location_of))
    return [result]
