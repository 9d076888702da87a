"""Text for people: findings in ``path:line:col CODE severity message`` form, then the breakdown.

Uses rich for tables and bars; plain text (no colour, no box drawing beyond ASCII) when output is
not a terminal or ``NO_COLOR`` is set, so pre-commit logs and CI logs stay readable.
"""

from __future__ import annotations

import os
from typing import TextIO

from vramlint.models.shape import ModelShape
from vramlint.units import GiB

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SOURCES = {"path": "from a local file", "catalog": "from the offline catalog", "cache": "from the Hugging Face cache",
           "hub": "downloaded from the Hugging Face Hub", "": "from the config given"}
SHAPES = {"hand-modelled": "modelled by hand", "transformers": "built by transformers on the meta device",
          "generic": "read as a generic decoder (approximate)"}
BAR = 24


def escape(text: str) -> str:
    """Findings quote config syntax like ``[tool.vramlint]``, which rich would take for markup."""
    from rich.markup import escape as rich_escape
    return rich_escape(text)


def _console(out: TextIO):
    from rich.console import Console
    plain = bool(os.environ.get("NO_COLOR")) or not getattr(out, "isatty", lambda: False)()
    if plain:
        return Console(file=out, no_color=True, force_terminal=False, highlight=False, width=120, soft_wrap=True)
    return Console(file=out, highlight=False)


def _bar(share: float) -> str:
    filled = round(share * BAR)
    return "█" * filled + "·" * (BAR - filled)


def _plan_line(plan) -> str:
    """What was estimated, in the runtime's own words, with where the micro-batch came from."""
    origin = plan.origins.get("micro_batch")
    accumulation = f" x {plan.grad_accum} accumulated" if plan.grad_accum > 1 else ""
    return (f"{plan.setup_name} {plan.precision}, micro-batch {plan.micro_batch}"
            f"{f' ({origin})' if origin else ''}{accumulation}, seq {plan.seq_len}, DP {plan.data_parallel}, "
            f"offload optimizer {plan.offload_optimizer} / params {plan.offload_param}, "
            f"checkpointing {'on' if plan.grad_checkpointing else 'off'}")


def _estimate_table(title: str, est, cluster):
    from rich.table import Table
    budget = cluster.gpu.memory_bytes
    table = Table(title=f"{title}: per-GPU memory on {cluster.describe()}, peak at {est.moment}",
                  title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("component")
    table.add_column("GiB", justify="right")
    table.add_column("", no_wrap=True)
    table.add_column("formula", overflow="fold")
    for comp in est.gpu:
        table.add_row(comp.name, f"{comp.bytes / GiB:.2f}", _bar(comp.bytes / max(est.per_gpu_peak, 1)),
                      comp.formula)
    share = est.per_gpu_peak / budget
    verdict = "[bold red]does not fit[/]" if share > 1 else "[green]fits[/]"
    table.add_row("[bold]peak[/]", f"[bold]{est.per_gpu_peak / GiB:.2f}[/]", _bar(min(share, 1.0)),
                  f"{share:.0%} of {budget / GiB:.2f} GiB — {verdict} (band {est.low / GiB:.1f}-{est.high / GiB:.1f}; "
                  f"allocated {est.allocated_peak / GiB:.2f})")
    for comp in est.components:
        if comp.where == "host":
            table.add_row(f"{comp.name}", f"{comp.bytes / GiB:.2f}", "", f"per node: {comp.formula}")
    return table


def _serving_table(path: str, serving, est):
    from rich.table import Table
    replicas = f" (of DP {serving.dp}, experts over {serving.expert_ranks} ranks)" if serving.dp > 1 else ""
    table = Table(title=escape(f"{path}: vLLM on one GPU of TP {serving.tp} x PP {serving.pp}{replicas}, "
                               f"{serving.utilization:.0%} of {serving.gpu_bytes / GiB:.2f} GiB = "
                               f"{est.requested / GiB:.2f} GiB"), title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("component")
    table.add_column("GiB", justify="right")
    table.add_column("formula", overflow="fold")
    for comp in est.components:
        table.add_row(comp.name, f"{comp.bytes / GiB:.2f}", escape(comp.formula))
    table.add_row("[bold]KV capacity[/]", "", f"{est.kv_tokens:,} tokens ({est.bytes_per_token:,.0f} B/token); "
                  f"max_model_len {est.max_model_len:,} needs {est.needed / GiB:.2f} GiB; "
                  f"concurrency {est.max_concurrency:.1f}x")
    return table


def report(results, cluster, out: TextIO) -> None:
    console = _console(out)
    for result in results:
        for finding in result.findings:
            style = STYLE.get(finding.severity, "")
            console.print(f"{escape(str(finding.location))}  {finding.code} [{style}]{finding.severity}[/]  "
                          f"{escape(finding.message)}")
            if finding.detail:
                console.print(f"    {escape(finding.detail)}")
            if finding.hint:
                console.print(f"    hint: {escape(finding.hint)}")
        for note in result.notes:
            console.print(escape(f"{result.path}: note: {note}"))
        if result.serving is not None:
            console.print(_serving_table(result.path, *result.serving))
        if result.estimate is not None:
            title = result.path + (f" (run by {result.via})" if result.via else "")
            console.print(_estimate_table(title, result.estimate, result.plan.cluster))
            console.print(escape(f"  plan: {_plan_line(result.plan)}"))
            for note in result.estimate.assumptions:
                console.print(escape(f"  assumed: {note}"))
    errors = sum(1 for r in results for f in r.findings if f.severity == "error")
    warnings = sum(1 for r in results for f in r.findings if f.severity == "warning")
    console.print(f"{len(results)} file(s) checked: {errors} error(s), {warnings} warning(s)")


def estimate_report(plan, est, out: TextIO) -> None:
    console = _console(out)
    title = f"{plan.model.name or plan.model.model_type} ({'inference' if plan.mode == 'infer' else 'training'})"
    console.print(_estimate_table(title, est, plan.cluster))
    for note in est.assumptions:
        console.print(escape(f"  assumed: {note}"))


def model_report(shape: ModelShape, out: TextIO) -> None:
    from rich.table import Table

    from vramlint.reporters.json_report import model_dict
    info = model_dict(shape)
    console = _console(out)
    table = Table(title=f"{shape.name or shape.model_type}", title_justify="left", show_header=False,
                  show_edge=False, pad_edge=False)
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_row("model_type", f"{info['model_type']}" + (f" (read as {info['read_as']})" if info["read_as"] else ""))
    table.add_row("resolved", f"{SOURCES.get(info['resolved_by'], info['resolved_by'])}; layers {SHAPES[info['shape_by']]}")
    table.add_row("parameters", f"{info['params']:,}")
    if info["active_params"] != info["params"]:
        table.add_row("active per token", f"{info['active_params']:,}")
    table.add_row("largest layer", f"{info['largest_layer_params']:,}")
    table.add_row("layers", ", ".join(
        f"{k['count']}x {k['attention']}{'(' + str(k['window']) + ')' if k['window'] else ''} + {k['mlp']}"
        for k in info["layers"]))
    table.add_row("hidden / vocab", f"{info['hidden_size']:,} / {info['vocab_size']:,}")
    table.add_row("dtype", info["dtype"])
    table.add_row("weights", f"{info['weight_bytes'] / GiB:.2f} GiB ({info['weight_bytes']:,} bytes)")
    if info["quantization"]:
        q = info["quantization"]
        table.add_row("quantization", f"{q['method']}: {q['detail']} on {', '.join(q['groups'])}")
    table.add_row("KV cache / token", f"{info['kv_bytes_per_token']:,} bytes at {info['dtype']}")
    if "kv_bytes_per_token_transformers" in info:
        table.add_row("", f"{info['kv_bytes_per_token_transformers']:,} bytes in transformers (decompressed MLA)")
    if info["max_position_embeddings"]:
        table.add_row("max positions", f"{info['max_position_embeddings']:,}")
    if info["vision_params"]:
        params, built = info["vision_params"], info["vision_params_vllm"]
        cut = f"; vLLM builds {built:,} of them, up to the feature layer" if built != params else ""
        table.add_row("vision tower",
                      f"{params:,} parameters (vLLM and transformers' multimodal class load it too{cut})")
    if info["vllm_rope_tables"]:
        table.add_row("vLLM RoPE tables", ", ".join(f"{t['positions']:,} x {t['rotary_dim']}"
                                                    for t in info["vllm_rope_tables"]))
    for note in info["notes"]:
        table.add_row("note", note)
    console.print(table)
