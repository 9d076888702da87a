"""The GPUs a job runs on where a file states them: an Accelerate file's ``num_processes``, a
launch line's process count, a task spec's resources. What a file states is the job's, over the
settings' count; a count the command line gives wins, with VL007 saying so."""

from __future__ import annotations

from dataclasses import replace

from vramlint.documents import Location
from vramlint.hardware import Cluster, bounded, sized
from vramlint.jobs.result import Context, FileResult
from vramlint.rules.inputs import overridden


def own_size(ctx: Context, acc, result: FileResult) -> Context:
    """The GPUs an Accelerate file launches on, where ``--gpus`` named only their type."""
    cluster = sized(ctx.cluster, acc.num_processes.value, acc.num_machines.value)
    if cluster is None:
        return ctx
    result.cluster = cluster
    result.notes.append(f"GPUs: {cluster.describe()}, from num_processes at {acc.num_processes.location}")
    result.gpus_from = str(acc.num_processes.location)
    return replace(ctx, cluster=cluster)


def stated_cluster(ctx: Context, result: FileResult, per_node: int, nodes: int, where: Location,
                   what: str) -> Cluster:
    """The GPUs a file states (a launch's process count, a task's resources): they are the job's,
    over the settings' count; a count given on the command line wins, with VL007 saying so."""
    if ctx.cluster.counted and "gpus" in ctx.stated:
        if (ctx.cluster.per_node, ctx.cluster.nodes) != (per_node, nodes):
            result.findings.append(overridden(where, what, f"{per_node} per node x {nodes} node(s)", "--gpus",
                                              ctx.cluster.describe()))
        return ctx.cluster
    cluster = bounded(ctx.cluster.gpu, per_node, nodes, f"{result.path}:{where.line}: {what}")
    result.cluster, result.gpus_from = cluster, f"{result.path}:{where.line}"
    return cluster

