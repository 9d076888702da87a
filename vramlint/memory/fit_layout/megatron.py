"""What would fit a Megatron-LM job: changes to its arguments in Megatron's own flags, each found by
running the memory model on the changed plan — the distributed optimizer, sequence parallelism,
full recomputation, the largest micro-batch that fits, tensor parallelism within a node, more
pipeline stages, and failing those, more nodes (data-parallel ranks shard the optimizer further)."""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory.search import Change, _bisect, _largest_from, fits, peak
from vramlint.plan import Plan

FULL = "uniform:1"
VERL = "actor_rollout_ref.actor.megatron"
# Each change in the words of the file that states the job (``Plan.vocabulary["layout"]``): Megatron-LM's
# flags, Megatron-Bridge's ConfigContainer keys (readers/megatron_bridge.py), or NeMo's (readers/nemo.py)
WORDS = {
    "megatron": {"distributed_optimizer": "--use-distributed-optimizer", "sequence_parallel": "--sequence-parallel",
                 FULL: "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
                 "selective:core_attn": "--recompute-granularity selective", "none": "no --recompute-granularity",
                 "micro_batch": "--micro-batch-size {}", "tensor": "--tensor-model-parallel-size {}",
                 "tensor_sp": "--tensor-model-parallel-size {} --sequence-parallel",
                 "pipeline": "--pipeline-model-parallel-size {}"},
    "megatron-bridge": {"distributed_optimizer": "ddp.use_distributed_optimizer: true",
                        "sequence_parallel": "model.sequence_parallel: true",
                        FULL: "model.recompute_granularity: full, recompute_method: uniform, recompute_num_layers: 1",
                        "selective:core_attn": "model.recompute_granularity: selective",
                        "none": "model.recompute_granularity: null", "micro_batch": "train.micro_batch_size: {}",
                        "tensor": "model.tensor_model_parallel_size: {}",
                        "tensor_sp": "model.tensor_model_parallel_size: {}, model.sequence_parallel: true",
                        "pipeline": "model.pipeline_model_parallel_size: {}"},
    "nemo": {"distributed_optimizer": "model.optim.name: mcore_distributed_optim",
             "sequence_parallel": "model.sequence_parallel: true",
             FULL: "model.activations_checkpoint_granularity: full, activations_checkpoint_method: uniform, "
                   "activations_checkpoint_num_layers: 1",
             "selective:core_attn": "model.activations_checkpoint_granularity: selective",
             "none": "model.activations_checkpoint_granularity: null", "micro_batch": "model.micro_batch_size: {}",
             "tensor": "model.tensor_model_parallel_size: {}",
             "tensor_sp": "model.tensor_model_parallel_size: {}, model.sequence_parallel: true",
             "pipeline": "model.pipeline_model_parallel_size: {}"},
    # verl's Megatron workers (readers/verl_megatron.py): Hydra overrides of the actor's section
    "verl": {"distributed_optimizer": f"{VERL}.use_distributed_optimizer=True",
             "sequence_parallel": f"{VERL}.sequence_parallel=True",
             FULL: f"+{VERL}.override_transformer_config.recompute_granularity=full "
                   f"+{VERL}.override_transformer_config.recompute_method=uniform "
                   f"+{VERL}.override_transformer_config.recompute_num_layers=1",
             "selective:core_attn": f"+{VERL}.override_transformer_config.recompute_granularity=selective",
             "none": f"{VERL}.override_transformer_config.recompute_granularity=null",
             "micro_batch": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={}",
             "tensor": f"{VERL}.tensor_model_parallel_size={{}}",
             "tensor_sp": f"{VERL}.tensor_model_parallel_size={{}} {VERL}.sequence_parallel=True",
             "pipeline": f"{VERL}.pipeline_model_parallel_size={{}}"},
}


def _say(plan: Plan, change: str, value: object = None) -> str:
    words = WORDS.get(plan.vocabulary.get("layout", "megatron"), WORDS["megatron"])
    return words.get(change, change).format(value)


def _with(plan: Plan, **changes) -> Plan:
    """The plan with its layout changed, its data-parallel size and optimizer shard resolved again."""
    par = replace(plan.parallelism, **{k: v for k, v in changes.items() if hasattr(plan.parallelism, k)})
    rest = {k: v for k, v in changes.items() if not hasattr(plan.parallelism, k)}
    cluster = rest.get("cluster", plan.cluster)
    tp = rest.get("tensor_parallel", plan.tensor_parallel)
    dp = max(1, cluster.world_size // (tp * par.pipeline * par.context))
    before = max(1, plan.cluster.world_size // (plan.tensor_parallel * plan.parallelism.pipeline * par.context))
    batch = plan.micro_batch * before * plan.parallelism.microbatches      # the global batch stays
    micro = rest.get("micro_batch", plan.micro_batch)
    experts = cluster.world_size // par.expert_grid(tp)
    par = replace(par, shard=dp * par.context if par.distributed_optimizer else 1,
                  bucket_copy=par.bucket_copy and not par.distributed_optimizer,   # torch DDP only without it
                  expert_shard=max(1, experts) if par.distributed_optimizer else 1,
                  sequence_parallel=par.sequence_parallel and tp > 1,
                  microbatches=max(1, batch // (micro * dp)))
    return plan.with_changes(parallelism=par, shard_degree=par.shard, grad_accum=par.microbatches,
                             grad_checkpointing=par.checkpointing != "none", **rest)


def _grid_holds(plan: Plan, tp: int, pp: int) -> bool:
    """The expert grid ETP x EP x PP divides the GPUs (ETP following TP where the job leaves it so)."""
    return not plan.cluster.world_size % plan.parallelism.expert_grid(tp, pp)


def _tp_degrees(plan: Plan) -> list[int]:
    """TP degrees within a node that divide the node and the heads (query groups a multiple or divisor),
    and leave an expert grid that divides the GPUs."""
    from vramlint.layouts.megatron import tp_refused
    per = plan.cluster.per_node
    return [tp for tp in range(1, per + 1) if not per % tp and tp_refused(plan.model, tp) is None
            and _grid_holds(plan, tp, plan.parallelism.pipeline)]


def _one(plan: Plan, budget: int, words: str, **changes) -> list[Change]:
    changed = _with(plan, **changes)
    return [Change(words, peak(changed))] if fits(changed, budget) else []


def _micro_batch(plan: Plan, budget: int) -> list[Change]:
    if plan.micro_batch <= 1:
        return []
    best = _largest_from(lambda mb: fits(_with(plan, micro_batch=mb), budget), plan.micro_batch - 1)
    return [Change(_say(plan, "micro_batch", best), peak(_with(plan, micro_batch=best)))] if best else []


def _tensor_parallel(plan: Plan, budget: int) -> list[Change]:
    for tp in _tp_degrees(plan):
        if tp > plan.tensor_parallel:
            changed = _with(plan, tensor_parallel=tp, sequence_parallel=True)
            if fits(changed, budget):
                return [Change(_say(plan, "tensor_sp", tp), peak(changed))]
    return []


def _pipeline(plan: Plan, budget: int) -> list[Change]:
    """The least pipeline size above the job's that divides the layers (the stages its layout or hybrid
    pattern states: their count over pp chunks a rank, A:823) and the GPUs, and fits."""
    par, layers = plan.parallelism, plan.model.num_layers
    stated = par.stage_layers
    for pp in range(par.pipeline + 1, min(layers, plan.cluster.world_size // plan.tensor_parallel) + 1):
        if (len(stated) if stated else layers + sum(par.slots)) % pp or \
                plan.cluster.world_size % (pp * plan.tensor_parallel * par.context) or \
                not _grid_holds(plan, plan.tensor_parallel, pp):
            continue
        v = len(stated) // pp if stated else 1
        changed = _with(plan, pipeline=pp, stages_per_rank=v, schedule="Interleaved1F1B" if v > 1 else "1F1B",
                        first_layers=0, last_layers=0)
        if fits(changed, budget):
            return [Change(_say(plan, "pipeline", pp), peak(changed))]
    return []


def _more_nodes(plan: Plan, budget: int, most: int = 64) -> list[Change]:
    """The fewest whole nodes on which the job fits with the distributed optimizer and full recompute,
    among those whose GPUs the model-parallel grid (TP x PP x CP, and the experts' ETP x EP x PP)
    divides (Megatron refuses the others: A:428, parallel_state.py:883); none where the GPUs it has
    already hold it so (the changes beside say how, one at a time or together)."""
    base = _with(plan, distributed_optimizer=True, checkpointing=FULL)
    on = lambda nodes: _with(base, cluster=replace(plan.cluster, nodes=nodes))  # noqa: E731
    par, per = plan.parallelism, plan.cluster.per_node
    grid = plan.tensor_parallel * par.pipeline * par.context
    valid = [n for n in range(plan.cluster.nodes, most + 1)
             if not (n * per) % grid and not (n * per) % par.expert_grid(plan.tensor_parallel)]
    if not valid or not fits(on(valid[-1]), budget):
        return []
    added = ([] if par.distributed_optimizer else [_say(plan, "distributed_optimizer")]) + \
        ([] if par.checkpointing == FULL else [_say(plan, FULL)])
    if valid[0] == plan.cluster.nodes and fits(on(valid[0]), budget):
        return [Change(" and ".join(added), peak(on(valid[0])))] if len(added) > 1 else []
    first = _bisect(lambda i: fits(on(valid[i]), budget), len(valid) - 1, -1)
    bigger = on(valid[first])
    return [Change(f"{valid[first]} nodes x {per} GPUs ({bigger.cluster.world_size} GPUs: the distributed "
                   f"optimizer over {bigger.parallelism.shard})" + (f" with {' and '.join(added)}" if added else ""),
                   peak(bigger))]


def changes(plan: Plan, budget: int) -> list[Change]:
    """Single changes that fit, cheapest first, then the fewest nodes."""
    par = plan.parallelism
    out = [] if par.distributed_optimizer else _one(plan, budget, _say(plan, "distributed_optimizer"),
                                                    distributed_optimizer=True)
    if plan.tensor_parallel > 1 and not par.sequence_parallel:
        out += _one(plan, budget, _say(plan, "sequence_parallel"), sequence_parallel=True)
    if par.checkpointing != FULL:
        out += _one(plan, budget, _say(plan, FULL), checkpointing=FULL)
    out += _micro_batch(plan, budget) + _tensor_parallel(plan, budget) + _pipeline(plan, budget)
    return out + _more_nodes(plan, budget)


def candidates(plan: Plan) -> list[Plan]:
    """The layouts ``vramlint plan`` weighs: each TP degree within a node (with sequence parallel),
    no, selective or full recomputation, the distributed optimizer on; the pipeline as written."""
    return [_with(plan, tensor_parallel=tp, sequence_parallel=True, checkpointing=mode, distributed_optimizer=True)
            for tp in _tp_degrees(plan) for mode in ("selective:core_attn", FULL)]


def edits(plan: Plan, to: Plan) -> list[str]:
    """The flags that turn the job's arguments into ``to``."""
    out = []
    if to.tensor_parallel != plan.tensor_parallel:
        out.append(_say(plan, "tensor", to.tensor_parallel))
    if to.parallelism.sequence_parallel and not plan.parallelism.sequence_parallel:
        out.append(_say(plan, "sequence_parallel"))
    if to.parallelism.distributed_optimizer and not plan.parallelism.distributed_optimizer:
        out.append(_say(plan, "distributed_optimizer"))
    if to.parallelism.checkpointing != plan.parallelism.checkpointing:
        out.append(_say(plan, to.parallelism.checkpointing))
    if to.micro_batch != plan.micro_batch:
        out.append(_say(plan, "micro_batch", to.micro_batch))
    return out
