"""One check, in the order of the design: file → document → job → plan → estimate → findings.

The format is detected from the content, not the file name (``readers.registry``); a shell or
sbatch script by its name or its ``#!`` line. ``vramlint.jobs`` turns the document into the jobs
it states (a recipe with the DeepSpeed file it names, a DeepSpeed file once per recipe that runs
it, a script's launches as the recipes and configs they are); here each job is estimated and
judged the same way, whatever file stated it.

Each file is checked on its own: a crash while checking one becomes an ``internal-error`` finding
for that file, and the run goes on with the others.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from vramlint import jobs
from vramlint.documents import Location, ParseError, read_text
from vramlint.errors import UsageError
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.jobs.inputs import load, versions
from vramlint.jobs.result import ESTIMATED, NOT_ESTIMATED, SKIPPED, Context, FileResult
from vramlint.memory import estimate
from vramlint.patterns import script
from vramlint.readers import SCRIPT_KIND
from vramlint.rules.fit import check_fit, check_host_ram
from vramlint.rules.inputs import count_assumed, generic_shape, not_estimated
from vramlint.rules.syntax import internal_error
from vramlint.stack import plan_for_stack, stack_for
from vramlint.suppress import Suppressions, suppressions

__all__ = ["ESTIMATED", "NOT_ESTIMATED", "SKIPPED", "Context", "FileResult", "check_file"]


def check_file(path: str, ctx: Context, text: str | None = None) -> list[FileResult]:
    """Check one file (``text``: its content, read from standard input): one result, or one per
    job it states or runs (a DeepSpeed file run by several recipes, a script's launches). Findings
    of rules the run does not report, or that an inline ``# vramlint: disable=CODE`` comment (a
    JSON file's ``"vramlint": {"disable": [...]}``) switches off, are dropped."""
    result = FileResult(path, cluster=ctx.cluster)
    as_script = (ctx.kind is None and script(path, text)) or ctx.kind == SCRIPT_KIND
    document = load(path, result, text, as_script)
    if document is None:
        results = [result]
    else:
        ctx = replace(ctx, kind=SCRIPT_KIND) if as_script else ctx
        results = _guarded(lambda: jobs.check_document(document, result, ctx), result)
    texts = {path: document.text} if document is not None else {}      # standard input's too, not a file's on disk
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
            result.findings.extend(versions(stack, ("transformers", "bitsandbytes"), result))
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
