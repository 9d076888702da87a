"""Machine-readable output: a stable JSON document on stdout.

``vramlint check --format json``::

    {"version": "...", "files": [{"path", "kind", "via", "model", "gpus": {...}, "precision",
     "findings": [{code, name, severity, path, line, column, message, hint}], "notes": [...],
     "reads": [the other files the job was read from: the recipe a script runs, its launch and DeepSpeed configs],
     "gpus": {..., "from": "path:line" of what states them where a file does, else null (--gpus)},
     "estimate": {"per_gpu_peak_bytes", "host_ram_bytes", "components": [{name, bytes, formula,
     source, where}], "assumptions": [...]}, "plan": {...}}]}

Each file carries the model, GPUs and precision it was checked with (``via``: the recipe a
DeepSpeed file was checked as part of, one entry per such recipe).
"""

from __future__ import annotations

import json
from typing import TextIO

from vramlint import __version__
from vramlint.memory.parts.weights import DTYPE_BYTES, weight_bytes
from vramlint.models.shape import ModelShape
from vramlint.reporters import summary


def _plan(plan) -> dict:
    return {"model": plan.model.name or plan.model.model_type, "precision": plan.precision,
            "zero_stage": plan.zero_stage, "offload_optimizer": plan.offload_optimizer,
            "offload_param": plan.offload_param, "micro_batch": plan.micro_batch, "seq_len": plan.seq_len,
            "grad_checkpointing": plan.grad_checkpointing, "data_parallel": plan.data_parallel,
            "tensor_parallel": plan.tensor_parallel, "grad_accum": plan.grad_accum,
            "origins": {k: str(v) for k, v in plan.origins.items()}}


def estimate_dict(est) -> dict:
    """The documented estimate object, shared by ``estimate`` and ``check``."""
    return {"per_gpu_peak_bytes": est.per_gpu_peak, "per_gpu_low_bytes": est.low,
            "per_gpu_high_bytes": est.high, "allocated_peak_bytes": est.allocated_peak,
            "peak_moment": est.moment, "host_ram_bytes": est.host_ram,
            "components": [c.as_dict() for c in est.components], "assumptions": list(est.assumptions)}


def serving_summary(est) -> dict:
    """A vLLM file's headline numbers at the top of its entry, as vLLM's own start-up log names
    them ("Model loading took", "GPU KV cache size", "Maximum concurrency"), per GPU; an SGLang
    file's as SGLang's log does ("max_total_num_tokens", "mem_fraction_static")."""
    if getattr(est, "engine", "vllm") == "sglang":
        return {"sglang_version": est.release, "mem_fraction_static": est.mem_fraction_static,
                "max_total_num_tokens": est.max_total_num_tokens, "starts": not est.refusal}
    return {"vllm_version": est.release, "weights_bytes_per_gpu": est.loaded, "kv_cache_bytes": est.kv_budget,
            "kv_cache_tokens": est.kv_tokens, "max_concurrency": round(est.max_concurrency, 2)}


def serving_dict(serving, est) -> dict:
    """vLLM's (or SGLang's) budget as vramlint reproduces it, per GPU of the TP x PP group."""
    if getattr(est, "engine", "vllm") == "sglang":
        return {"engine": "sglang", "model": serving.model.name, "tensor_parallel": serving.tp,
                "pipeline_parallel": serving.pp, "data_parallel": serving.dp,
                "mem_fraction_static": est.mem_fraction_static, "mem_fraction_static_from": est.fraction_words,
                "free_before_load_bytes": est.pre_load, "kv_budget_bytes": est.rest,
                "kv_bytes_per_token": est.cell_size, "max_total_num_tokens": est.max_total_num_tokens,
                "context_length": serving.context_len, "refusal": est.refusal or None,
                "components": [c.as_dict() for c in est.components]}
    return {"model": serving.model.name, "tensor_parallel": serving.tp, "pipeline_parallel": serving.pp,
            "data_parallel": serving.dp, "expert_parallel": serving.expert_parallel, "expert_ranks": serving.expert_ranks,
            "gpu_memory_utilization": serving.utilization, "requested_bytes": est.requested,
            "kv_cache_bytes": est.kv_budget, "kv_bytes_per_token": est.bytes_per_token, "kv_cache_tokens": est.kv_tokens,
            "max_model_len": est.max_model_len, "kv_bytes_for_max_model_len": est.needed,
            "max_model_len_that_fits": est.max_len_that_fits, "max_concurrency": round(est.max_concurrency, 2),
            "components": [c.as_dict() for c in est.components]}


def estimate_report(plan, est, out: TextIO) -> None:
    doc = {"version": __version__, "model": plan.model.name or plan.model.model_type, "mode": plan.mode,
           "gpus": {"name": plan.cluster.gpu.name, "memory_bytes": plan.cluster.gpu.memory_bytes,
                    "count": plan.cluster.world_size}, **estimate_dict(est),
           "fits": est.per_gpu_peak <= plan.cluster.gpu.memory_bytes}
    json.dump(doc, out, indent=2)
    out.write("\n")


def checked_with(result) -> dict:
    """What a file was checked as: its format, the recipe it ran under, the model, the GPUs and
    the precision — each file its own, whatever the other files of the run were."""
    plan, model, gpus = result.plan, result.model, result.cluster
    return {"kind": result.kind, "via": result.via,
            "model": (model.name or model.model_type) if model else None,
            "gpus": {**gpus_dict(plan.cluster if plan else gpus), "from": result.gpus_from} if (plan or gpus) else None,
            "precision": plan.precision if plan else None}


def gpus_dict(cluster) -> dict:
    return {"name": cluster.gpu.name, "memory_bytes": cluster.gpu.memory_bytes, "per_node": cluster.per_node,
            "nodes": cluster.nodes, "source": cluster.gpu.source}


def report(results, out: TextIO, verbosity: str = "normal") -> None:
    files = []
    for result in results:
        entry = {"path": result.path, **checked_with(result), "status": result.status,
                 "findings": [f.as_dict() for f in result.findings], "notes": result.notes,
                 "reads": list(dict.fromkeys(result.reads))}
        if result.estimate is not None:
            entry["estimate"] = estimate_dict(result.estimate)
            entry["plan"] = _plan(result.plan)
        if result.serving is not None:
            entry.update(serving_summary(result.serving[1]))
            entry["serving"] = serving_dict(*result.serving)
        files.append(entry)
    doc = {"version": __version__, "summary": summary.counts(results), "files": files}
    json.dump(doc, out, indent=2)
    out.write("\n")


def model_dict(shape: ModelShape) -> dict:
    dtype_bytes = DTYPE_BYTES[shape.dtype]
    out = {
        "name": shape.name, "model_type": shape.model_type, "read_as": shape.read_as,
        "resolved_by": shape.resolved_by, "shape_by": shape.shape_by,
        "architecture": shape.architecture, "params": shape.params, "active_params": shape.active_params,
        "largest_layer_params": shape.largest_layer_params, "hidden_size": shape.hidden_size,
        "vocab_size": shape.vocab_size, "num_layers": shape.num_layers, "dtype": shape.dtype,
        "max_position_embeddings": shape.max_position_embeddings,
        "kv_bytes_per_token": shape.kv_bytes_per_token(dtype_bytes),
        "layers": shape.layer_kinds(),
        "weight_bytes": weight_bytes(shape),
        "vision_params": shape.vision_params,        # loaded beside the language model (vLLM, transformers)
        "vision_params_vllm": shape.vision.vllm_params if shape.vision else 0,   # fewer where vLLM cuts it short
        "vllm_rope_tables": [{"positions": p, "rotary_dim": d} for p, d in shape.rope_tables],
        "quantization": None if shape.quantization is None else {
            "method": shape.quantization.method, "bits": shape.quantization.bits,
            "groups": shape.quantized_groups, "detail": shape.quantization.detail},
        "notes": list(shape.notes),
    }
    if any(layer.attention.kind == "mla" for layer in shape.layers):
        # vLLM caches MLA's compressed latent; transformers the decompressed K and V.
        out["kv_bytes_per_token_transformers"] = shape.kv_bytes_per_token(dtype_bytes, "transformers")
    return out


def model_report(shape: ModelShape, out: TextIO) -> None:
    json.dump(model_dict(shape), out, indent=2)
    out.write("\n")


