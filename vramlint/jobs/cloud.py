"""A SkyPilot or dstack task, a Kubernetes manifest or a GitHub Actions workflow: the GPUs each
workload asks for, and the jobs its commands start, read as a launch script with the platform's
variables."""

from __future__ import annotations

from dataclasses import replace

from vramlint.documents import Document, Location, ParseError, read_text
from vramlint.errors import UsageError
from vramlint.hardware import Cluster, Gpu, gpu_from_text
from vramlint.jobs.gpus import stated_cluster
from vramlint.jobs.result import Context, FileResult
from vramlint.jobs.script import check_commands, sourced_by
from vramlint.readers.cloud import CloudTask, read_tasks
from vramlint.readers.launch import launches, submitted
from vramlint.patterns import launches as launches_any
from vramlint.readers.shell import read_script
from vramlint.repository import find_referenced
from vramlint.rules.inputs import not_estimated, overridden


def check(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """A SkyPilot or dstack task, or a Kubernetes manifest's workloads: each one's GPUs (type,
    count, nodes) stand for ``--gpus`` where the command line states no count, and its commands
    are read as a script with the platform's variables (``readers/cloud.py``, ``kubernetes.py``)."""
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


def _check_task(task: CloudTask, document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """One task's jobs, on the GPUs it asks for; a workload vramlint does not read is VL011."""
    if task.unread:
        result.findings.append(not_estimated(Location(result.path, "$", task.line, 1), f"{task.platform}: "
                                             f"{task.unread}", "check the recipe or config it runs; --warn VL011 "
                                             "reports this as a warning"))
        result.unplanned(task.unread)
        return [result]
    commands = [c for script in task.scripts
                for c in read_script(script.text, result.path, known=task.variables, line0=script.line0,
                                     sourced=sourced_by(result.path)).commands]
    gpu = _task_gpu(task, result, ctx)
    if gpu is None:
        if launches(commands) or any(_launching(name, result.path) for name in submitted(commands)):
            raise UsageError(f"{result.path}: {task.platform} names no GPU type vramlint knows; give --gpus")
        result.job = False              # a CI job that tests and lints: no GPU, and no job to check
        result.skip(f"{task.platform}: its commands start no training or serving job: skipped")
        return [result]
    per_node = task.per_node.text if task.per_node is not None else None
    nodes = task.nodes.text if task.nodes is not None else "1"
    if per_node and per_node.isdigit() and nodes and str(nodes).isdigit():
        at = task.per_node
        base = ctx.cluster if ctx.cluster is not None else Cluster(gpu, 1, 1, counted=False)
        cluster = stated_cluster(replace(ctx, cluster=replace(base, gpu=gpu)), result, int(per_node), int(nodes),
                                  Location(result.path, "$", at.line, at.column), f"{task.platform}'s resources")
        if cluster is not ctx.cluster:
            result.notes.append(f"GPUs: {cluster.describe()}, from {task.platform}'s resources at line {at.line}"
                                + (f" (it also accepts {', '.join(task.alternatives)})" if task.alternatives else ""))
    else:                               # no count (dstack's 1..8): the command line's, or the launches' own
        cluster = replace(ctx.cluster, gpu=gpu, counted=ctx.cluster.counted) if ctx.cluster else \
            Cluster(gpu, 1, 1, counted=False)
    task_ctx = replace(ctx, cluster=cluster, kind=None)
    result.cluster = cluster
    return check_commands(commands, document.text, result, task_ctx, {})


def _launching(name: str, path: str) -> bool:
    """Whether a script a task hands its work to (``bash scripts/train.sh``) names a launcher."""
    found = find_referenced(name, path)
    try:
        return found is not None and launches_any(read_text(found))
    except (OSError, ParseError):
        return False


def _task_gpu(task: CloudTask, result: FileResult, ctx: Context) -> Gpu | None:
    """The GPU type a task runs on: the one it asks for, unless the command line names another
    (VL007 says so); a type vramlint does not know leaves it to ``--gpus``; None where neither
    names one."""
    flagged = ctx.cluster.gpu if ctx.cluster is not None else None
    stated = None
    if task.gpu is not None and task.gpu.text:
        try:
            stated = gpu_from_text(task.gpu.text)
        except UsageError:
            result.notes.append(f"{task.platform} asks for {task.gpu.text!r} (line {task.gpu.line}), a GPU vramlint "
                                "does not know: checked on --gpus")
    if stated is None or flagged is None:
        return stated or flagged
    if "gpus" in ctx.stated:
        if flagged.name != stated.name:
            result.findings.append(overridden(Location(result.path, "$", task.gpu.line, task.gpu.column),
                                              f"{task.platform}'s GPU", stated.name, "--gpus", flagged.name))
        return flagged
    return stated                       # the settings' type stands in only where a file names none
