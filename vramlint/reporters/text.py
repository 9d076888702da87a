"""Text for people: findings in ``path:line:col CODE severity message`` form, then the breakdown.

Uses rich for tables and bars; plain text (no colour, no box drawing beyond ASCII) when output is
not a terminal or ``NO_COLOR`` is set, so pre-commit logs and CI logs stay readable.
"""

from __future__ import annotations

import os
from typing import TextIO

from vramlint.models.shape import ModelShape
from vramlint.reporters import summary
from vramlint.reporters.printable import shown
from vramlint.units import GiB

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SOURCES = {"path": "from a local file", "catalog": "from the offline catalog", "cache": "from the Hugging Face cache",
           "hub": "downloaded from the Hugging Face Hub", "": "from the config given"}
SHAPES = {"hand-modelled": "modelled by hand", "transformers": "built by transformers on the meta device",
          "generic": "read as a generic decoder (approximate)"}
BAR = 24


def escape(text: str) -> str:
    """Findings quote config syntax like ``[tool.vramlint]``, which rich would take for markup;
    a control character from a config value (an ANSI escape) must not reach the terminal."""
    from rich.markup import escape as rich_escape
    return rich_escape(shown(text))


UNICODE = {"full": "█", "empty": "·", "dash": "—"}
ASCII = {"full": "#", "empty": ".", "dash": "-"}


def _glyphs(out: TextIO) -> dict[str, str]:
    """Block and box characters where the stream can encode them, ASCII where it cannot (a
    Windows pipe in cp1252)."""
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        "█·—┃━│╇".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return ASCII
    return UNICODE


def _console(out: TextIO):
    """Colour and width as terminals and CI expect: colour on a terminal unless ``NO_COLOR``,
    forced by ``FORCE_COLOR``; the width of ``COLUMNS`` where set, else the terminal's, else 120.
    A closed pipe is raised as ``BrokenPipeError``, which ``cli.main`` ends quietly with exit 0
    (rich's own handler exits 1)."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    env = os.environ
    tty = getattr(out, "isatty", lambda: False)()
    color = bool(env.get("FORCE_COLOR")) or (tty and not env.get("NO_COLOR"))
    width = int(env["COLUMNS"]) if env.get("COLUMNS", "").isdigit() and int(env["COLUMNS"]) > 20 else None
    ascii_only = _glyphs(out) is ASCII
    return PipeConsole(file=out, highlight=False, no_color=not color, force_terminal=color or None,
                       width=width or (None if tty else 120), soft_wrap=not tty and width is None,
                       safe_box=ascii_only, legacy_windows=False, emoji=False)


def _bar(share: float, glyphs: dict[str, str] = UNICODE) -> str:
    filled = round(share * BAR)
    return glyphs["full"] * filled + glyphs["empty"] * (BAR - filled)


def _plan_line(plan) -> str:
    """What was estimated, in the runtime's own words, with where the micro-batch came from."""
    origin = plan.origins.get("micro_batch")
    accumulation = f" x {plan.grad_accum} accumulated" if plan.grad_accum > 1 else ""
    if plan.frozen:
        return f"{plan.setup_name} {plan.precision} eval engine, DP {plan.data_parallel}, {_forward(plan)}"
    return (f"{plan.setup_name} {plan.precision}, micro-batch {plan.micro_batch}"
            f"{f' ({origin})' if origin else ''}{accumulation}, seq {plan.seq_len}, DP {plan.data_parallel}, "
            f"offload optimizer {plan.offload_optimizer} / params {plan.offload_param}, "
            f"checkpointing {'on' if plan.grad_checkpointing else 'off'}")


def _forward(plan) -> str:
    """A group that trains nothing: the forward it runs (memory/rl.frozen)."""
    return f"no-grad forward over {plan.rollout.logprob_tokens:,} tokens"


def checked_as(result) -> str:
    """The model, GPUs and setup a file was checked with, in one phrase."""
    model = result.model
    name = (model.name or model.model_type) if model else "?"
    if result.plan is not None:
        plan = result.plan
        origin = plan.origins.get("micro_batch")
        assumed = " (assumed)" if origin is not None and origin.kind == "default" else ""
        if plan.frozen:
            return f"{name} on {plan.cluster.describe()}, {plan.setup_name} {plan.precision} eval engine, " \
                   f"{_forward(plan)}"
        return (f"{name} on {plan.cluster.describe()}, {plan.setup_name} {plan.precision}, "
                f"micro-batch {plan.micro_batch}{assumed} x {plan.seq_len:,} tokens")
    if result.serving is not None:
        serving, est = result.serving
        engine = "SGLang" if getattr(est, "engine", "vllm") == "sglang" else "vLLM"
        return f"{name} under {engine}, TP {serving.tp} x PP {serving.pp}"
    return name


def verdict(result, glyphs: dict[str, str] = UNICODE) -> str:
    """A file's result in one line: what it was checked as and whether it fits."""
    via = f" (run by {result.via})" if result.via else ""
    if result.estimate is not None:
        budget = result.plan.cluster.gpu.memory_bytes
        peak = result.estimate.per_gpu_peak
        word = ("does not fit" if peak > budget else "fits only if PyTorch frees its cache in time"
                if result.estimate.uncapped_peak > budget else "fits")
        return (f"{result.path}{via}: {word} {glyphs['dash']} {peak / GiB:.1f} of {budget / GiB:.1f} GiB "
                f"({peak / budget:.0%}) per GPU, {checked_as(result)}")
    if result.serving is not None and getattr(result.serving[1], "engine", "vllm") == "sglang":
        serving, est = result.serving
        said = (f"refuses to start (mem_fraction_static {est.mem_fraction_static})" if est.refusal else
                f"KV pool {max(est.rest, 0) / GiB:.2f} GiB, max_total_num_tokens {est.max_total_num_tokens:,} "
                f"(mem_fraction_static {est.mem_fraction_static})")
        return f"{result.path}{via}: SGLang {said}, {checked_as(result)}"
    if result.serving is not None:
        serving, est = result.serving
        return (f"{result.path}{via}: vLLM KV cache {est.kv_budget / GiB:.2f} GiB, {est.kv_tokens:,} tokens, "
                f"max_model_len {est.max_model_len:,}, {checked_as(result)}")
    note = result.notes[0] if result.notes else ("not estimated (see its findings)" if result.findings
                                                 else "no estimate")
    return f"{result.path}{via}: {note}"


def _estimate_table(title: str, est, cluster, glyphs: dict[str, str] = UNICODE):
    from rich.table import Table
    budget = cluster.gpu.memory_bytes
    table = Table(title=f"{title}: per-GPU memory on {cluster.describe()}, peak at {est.moment}",
                  title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("component")
    table.add_column("GiB", justify="right")
    table.add_column("", no_wrap=True)
    table.add_column("formula", overflow="fold")
    for comp in est.gpu:
        table.add_row(comp.name, f"{comp.bytes / GiB:.2f}", _bar(comp.bytes / max(est.per_gpu_peak, 1), glyphs),
                      escape(comp.formula))
    share = est.per_gpu_peak / budget
    verdict_word = "[bold red]does not fit[/]" if share > 1 else "[green]fits[/]"
    table.add_row("[bold]peak[/]", f"[bold]{est.per_gpu_peak / GiB:.2f}[/]", _bar(min(share, 1.0), glyphs),
                  f"{share:.0%} of {budget / GiB:.2f} GiB {glyphs['dash']} {verdict_word} (band "
                  f"{est.low / GiB:.1f}-{est.high / GiB:.1f}; allocated {est.allocated_peak / GiB:.2f})")
    for comp in est.components:
        if comp.where == "host":
            table.add_row(f"{comp.name}", f"{comp.bytes / GiB:.2f}", "", f"per node: {escape(comp.formula)}")
    return table


def _serving_table(path: str, serving, est):
    from rich.table import Table
    if getattr(est, "engine", "vllm") == "sglang":
        title = (f"{path}: SGLang {est.release} on one GPU of TP {serving.tp} x PP {serving.pp}, mem_fraction_static "
                 f"{est.mem_fraction_static} of {est.pre_load / GiB:.2f} GiB free before loading")
        table = Table(title=escape(title), title_justify="left", show_edge=False, pad_edge=False)
        table.add_column("component")
        table.add_column("GiB", justify="right")
        table.add_column("formula", overflow="fold")
        for comp in est.components:
            table.add_row(comp.name, f"{comp.bytes / GiB:.2f}", escape(comp.formula))
        return table
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


def finding_lines(finding, quote=shown, severity=lambda s: s) -> list[str]:
    """A finding as the lines the text output prints: ``path:line:col  CODE severity  message``,
    then its detail and hint. ``quote`` makes the file's text safe for the stream (rich markup
    escaped, control characters shown), ``severity`` colours the word where there is colour."""
    lines = [f"{quote(str(finding.location))}  {finding.code} {severity(finding.severity)}  {quote(finding.message)}"]
    lines += [f"    {quote(finding.detail)}"] if finding.detail else []
    return lines + ([f"    hint: {quote(finding.hint)}"] if finding.hint else [])


def _findings(console, result) -> None:
    for finding in result.findings:
        for line in finding_lines(finding, escape, lambda s: f"[{STYLE.get(s, '')}]{s}[/]"):
            console.print(line)


def _details(console, result, glyphs: dict[str, str]) -> None:
    """``--verbose``: the notes, the breakdown with its formulas, the plan and what was assumed."""
    for note in result.notes:
        console.print(escape(f"{result.path}: note: {note}"))
    if result.serving is not None:
        console.print(_serving_table(result.path, *result.serving))
    if result.estimate is not None:
        title = result.path + (f" (run by {result.via})" if result.via else "")
        console.print(_estimate_table(escape(title), result.estimate, result.plan.cluster, glyphs))
        console.print(escape(f"  plan: {_plan_line(result.plan)}"))
        for note in result.estimate.assumptions:
            console.print(escape(f"  assumed: {note}"))


def _plain(out: TextIO, verbosity: str) -> bool:
    """Lines with no colour, no width and no table to lay out (a pipe, as a pre-commit hook or CI
    reads it, without ``COLUMNS`` or ``FORCE_COLOR``): written directly, without importing rich,
    the same text rich would write there."""
    env = os.environ
    tty = getattr(out, "isatty", lambda: False)()
    return verbosity != "verbose" and not tty and not env.get("FORCE_COLOR") and not env.get("COLUMNS")


def _plain_report(results, out: TextIO, verbosity: str) -> None:
    glyphs = _glyphs(out)
    lines = []
    for result in results:
        for finding in result.findings:
            lines += finding_lines(finding)
        if verbosity != "quiet":
            lines.append(shown(verdict(result, glyphs)))
    if verbosity != "quiet":
        lines.append(shown(summary.line(results)))
    out.write("".join(line + "\n" for line in lines))


def report(results, out: TextIO, verbosity: str = "normal") -> None:
    """Findings in ``path:line:col CODE severity message`` form; then each file's verdict in one
    line (``--verbose``: its breakdown; ``--quiet``: findings alone), and the count."""
    if _plain(out, verbosity):
        return _plain_report(results, out, verbosity)
    console, glyphs = _console(out), _glyphs(out)
    for result in results:
        _findings(console, result)
        if verbosity == "verbose":
            _details(console, result, glyphs)
        elif verbosity != "quiet":
            console.print(escape(verdict(result, glyphs)))
    if verbosity == "quiet":
        return
    console.print(escape(summary.line(results)))


def estimate_report(plan, est, out: TextIO) -> None:
    console = _console(out)
    title = f"{plan.model.name or plan.model.model_type} ({'inference' if plan.mode == 'infer' else 'training'})"
    console.print(_estimate_table(escape(title), est, plan.cluster, _glyphs(out)))
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
