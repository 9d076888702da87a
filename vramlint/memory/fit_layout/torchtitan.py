"""What would fit a torchtitan job (``Plan.parallelism``): changes to its layout in its own keys,
each found by running the memory model on the changed plan — full activation checkpointing, the
largest ``training.local_batch_size`` that fits, tensor parallelism within a node, CPU offload,
and failing those, more nodes (``data_parallel_shard_degree`` -1 takes the new ranks)."""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory.search import Change, _bisect, _largest_from, fits, peak
from vramlint.plan import Plan

# The job's own spelling (Plan.vocabulary "layout"): a 0.2.2 TOML file's keys, or a 0.3.0 launch
# line's flags over its config function (tyro: the activation-checkpoint subcommand goes last).
WORDS = {
    "torchtitan": {"full": 'activation_checkpoint.mode = "full"',
                   "op": 'activation_checkpoint.mode = "selective" + selective_ac_option = "op"',
                   "local_batch": "training.local_batch_size = {}", "tp": "parallelism.tensor_parallel_degree = {}",
                   "offload": "training.enable_cpu_offload = true", "no_offload": "training.enable_cpu_offload = false",
                   "shard": "data_parallel_shard_degree -1"},
    "torchtitan-cli": {"full": "activation-checkpoint:full (last on the line)",
                       "op": "activation-checkpoint:selective (last on the line)",
                       "local_batch": "--training.local_batch_size {}", "tp": "--parallelism.tensor_parallel_degree {}",
                       "offload": "--training.enable_cpu_offload", "no_offload": "--training.no-enable_cpu_offload",
                       "shard": "--parallelism.data_parallel_shard_degree -1"},
}


def _words(plan: Plan) -> dict[str, str]:
    return WORDS.get(plan.vocabulary.get("layout", "torchtitan"), WORDS["torchtitan"])


def _with(plan: Plan, **changes) -> Plan:
    """The plan with its layout changed, FSDP's shard group resolved again as -1 resolves it."""
    par = replace(plan.parallelism, **{k: v for k, v in changes.items() if hasattr(plan.parallelism, k)})
    rest = {k: v for k, v in changes.items() if not hasattr(plan.parallelism, k)}
    cluster = rest.get("cluster", plan.cluster)
    tp = rest.get("tensor_parallel", plan.tensor_parallel)
    shard = max(1, cluster.world_size // (par.replicate * tp * par.pipeline))
    par = replace(par, shard=shard)
    return plan.with_changes(parallelism=par, shard_degree=shard, **rest)


def _full(plan: Plan, budget: int) -> list[Change]:
    if plan.parallelism.checkpointing == "full":
        return []
    changed = _with(plan, checkpointing="full", grad_checkpointing=True)
    return [Change(_words(plan)["full"], peak(changed))] if fits(changed, budget) else []


def _local_batch(plan: Plan, budget: int) -> list[Change]:
    """The largest local batch below the job's that fits (a pipeline's micro-batch rows are not
    changed here: its micro-batch count would change with them)."""
    if plan.parallelism.pipeline > 1 or plan.micro_batch <= 1:
        return []
    best = _largest_from(lambda mb: fits(plan.with_changes(micro_batch=mb), budget), plan.micro_batch - 1)
    if not best:
        return []
    return [Change(_words(plan)["local_batch"].format(best), peak(plan.with_changes(micro_batch=best)))]


def _tp_degrees(plan: Plan) -> list[int]:
    """TP degrees within a node that divide the node and the heads, as torchtitan needs."""
    heads = plan.model.layers[0].attention
    per = plan.cluster.per_node
    return [tp for tp in range(1, per + 1) if not (per % tp or heads.num_heads % tp or heads.num_kv_heads % tp)]


def _tensor_parallel(plan: Plan, budget: int) -> list[Change]:
    """The least TP degree above the job's, within a node, that divides the heads and fits."""
    for tp in _tp_degrees(plan):
        if tp <= plan.tensor_parallel:
            continue
        changed = _with(plan, tensor_parallel=tp)
        if fits(changed, budget):
            return [Change(_words(plan)["tp"].format(tp), peak(changed))]
    return []


def _offload(plan: Plan, budget: int) -> list[Change]:
    if plan.offload_param != "none":
        return []
    changed = plan.with_changes(offload_param="cpu")
    return [Change(_words(plan)["offload"], peak(changed))] if fits(changed, budget) else []


def _more_nodes(plan: Plan, budget: int, most: int = 64) -> list[Change]:
    """The fewest whole nodes on which the job fits with full checkpointing as it stands otherwise."""
    base = _with(plan, checkpointing="full", grad_checkpointing=True)
    on = lambda nodes: _with(base, cluster=replace(plan.cluster, nodes=nodes))  # noqa: E731
    if not fits(on(most), budget):
        return []
    nodes = _bisect(lambda n: fits(on(n), budget), most, plan.cluster.nodes)
    bigger = on(nodes)
    words = _words(plan)
    full = "" if plan.parallelism.checkpointing == "full" else f" with {words['full']}"
    return [Change(f"{nodes} nodes x {plan.cluster.per_node} GPUs ({bigger.cluster.world_size} GPUs, "
                   f"{words['shard']}: FSDP over {bigger.parallelism.shard}){full}", peak(bigger))]


def changes(plan: Plan, budget: int) -> list[Change]:
    """Single changes that fit, cheapest first, and the fewest nodes that fit without offload (the
    way a pretraining job grows)."""
    out = _full(plan, budget) + _local_batch(plan, budget) + _tensor_parallel(plan, budget) + _offload(plan, budget)
    return out + _more_nodes(plan, budget)


def candidates(plan: Plan) -> list[Plan]:
    """The layouts ``vramlint plan`` weighs for a torchtitan job, its pipeline and context split
    as written: each TP degree within a node, per-op or full checkpointing, with and without CPU
    offload."""
    return [_with(plan, tensor_parallel=tp, checkpointing=mode, grad_checkpointing=True, offload_param=offload)
            for tp in _tp_degrees(plan) for mode in ("op", "full") for offload in ("none", "cpu")]


def edits(plan: Plan, to: Plan) -> list[str]:
    """The edits that turn the job into ``to``, in its own keys or flags."""
    words, edits = _words(plan), []
    if to.tensor_parallel != plan.tensor_parallel:
        edits.append(words["tp"].format(to.tensor_parallel))
    if to.parallelism.checkpointing != plan.parallelism.checkpointing:
        edits.append(words[to.parallelism.checkpointing])
    if to.offload_param != plan.offload_param:
        edits.append(words["offload" if to.offload_param != "none" else "no_offload"])
    if to.micro_batch != plan.micro_batch:
        edits.append(words["local_batch"].format(to.micro_batch))
    return edits
