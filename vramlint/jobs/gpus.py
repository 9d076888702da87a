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
    over the settings' count; a count given on the command line wins, with VL007 saying so. A flat
    ``--gpus`` count that is the file's total (``--gpus 256x80GB`` for 8 per node x 32 nodes) is the
    same GPUs: the file's node split is kept, without a warning."""
    same = ctx.cluster.nodes == 1 and ctx.cluster.per_node == per_node * nodes
    if ctx.cluster.counted and "gpus" in ctx.stated and not same:
        if (ctx.cluster.per_node, ctx.cluster.nodes) != (per_node, nodes):
            result.findings.append(overridden(where, what, f"{per_node} per node x {nodes} node(s)", "--gpus",
                                              ctx.cluster.describe()))
        return ctx.cluster
    cluster = bounded(ctx.cluster.gpu, per_node, nodes, f"{result.path}:{where.line}: {what}")
    result.cluster, result.gpus_from = cluster, f"{result.path}:{where.line}"
    return cluster



def recipe_size(ctx: Context, recipe, result: FileResult) -> Context | None:
    """The GPUs a recipe states itself (verl's ``trainer.n_gpus_per_node`` x ``trainer.nnodes``,
    OpenRLHF PPO's actor GPUs; the framework's defaults where unset): the job's, over the settings'
    count; None where they are no count (VL002: the check stops there)."""
    from vramlint.rules.recipe import bad_count
    per_node, nodes = recipe.gpus
    wrong = [bad_count(recipe, fact) for fact in (per_node, nodes)
             if isinstance(fact.value, bool) or not isinstance(fact.value, int) or fact.value < 1]
    if wrong:
        result.findings.extend(wrong)
        return None
    where = per_node.location or nodes.location or recipe.document.locate("$")
    what = (f"{recipe.key('gpus_per_node')} {per_node.value} x {recipe.key('nodes')} {nodes.value}"
            + ("" if per_node.location or nodes.location else f" ({recipe.title} defaults)"))
    cluster = stated_cluster(ctx, result, per_node.value, nodes.value, where, what)
    result.notes.append(f"GPUs: {cluster.describe()}, from {what}")
    return replace(ctx, cluster=cluster)
