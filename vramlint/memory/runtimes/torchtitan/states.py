"""torchtitan's model states on one rank (torchtitan 0.2.2 models/llama3/infra/parallelize.py
apply_fsdp, components/optimizer.py): FSDP2 ``fully_shard`` over dp_shard x cp of the TP share of
the rank's pipeline stages, parameters in ``training.dtype`` (fp32) and AdamW's m and v beside
them (fused: no step temporaries), gradient shards in the reduce dtype (fp32) from backward to the
step (``optimizers.zero_grad()`` frees them when the next step starts). What is unsharded: the
[norm, output] unit from its forward to its backward (``reshard_after_forward`` only under
"always"), a block and the next one's all-gather in flight; under pipeline parallelism (not
resharded after forward by default) every block of the rank's stages, and, since the schedule
turns gradient sync off until the last micro-batch, their unsharded gradients accumulated in the
reduce dtype (FSDP2 ``FSDPParam.to_accumulated_grad_if_needed``)."""

from __future__ import annotations

from vramlint.memory.parts.components import HOST, Component
from vramlint.memory.parts.states import States
from vramlint.memory.parts.pipeline import Rank
from vramlint.memory.runtimes.torchtitan.layout import ranks
from vramlint.plan import Plan

SOURCE = ("torchtitan 0.2.2 parallelize.py apply_fsdp / apply_tp, FSDP2 MixedPrecisionPolicy(bf16, fp32), "
          "fused AdamW; torch FSDP2 _fsdp_param.py")


# 0.3.0 with tied embeddings (llama3 1B / 3B, qwen3 0.6B / 1.7B / 4B): one FSDP unit holds the embedding,
# the final norm and the output, and stays unsharded through the whole forward (the output never runs in
# the model's forward, so the unit's post-forward waits for the root); spmd_types re-ties two FSDPParams
# over one shard, and each all-gathers its own bf16 copy.
TIED_SOURCE = ("torchtitan 0.3.0 distributed/fsdp.py:180-192 (tied [tok_embeddings, norm, lm_head] unit), "
               "protocols/module.py:296-330 and decoder.py:215-221 (the tie broken and remade); two unsharded "
               "copies observed on a one-rank gloo FSDP2 run")


def rank_params(plan: Plan, rank: Rank) -> tuple[int, int]:
    """(The rank's parameters of its TP share, its largest block's)."""
    m = plan.model
    params, largest = 0, 0
    for stage in rank.stages:
        for i in stage.layers:
            size = m.layers[i].params.total
            params, largest = params + size, max(largest, size)
        params += m.embedding_params if stage.embedding else 0
        params += m.head_params + m.final_norm_params if stage.head else 0
    return params, largest


def units(plan: Plan, rank: Rank) -> list[int]:
    """The rank's FSDP units in forward order, each its parameters of the TP share: the embedding
    (a unit of its own), each block, the [norm, output] pair (parallelize.py apply_fsdp)."""
    m, out = plan.model, []
    for stage in rank.stages:
        out += [m.embedding_params] if stage.embedding else []
        out += [m.layers[i].params.total for i in stage.layers]
        out += [m.head_params + m.final_norm_params] if stage.head else []
    return [size for size in out if size]


def holds_head(rank: Rank) -> bool:
    return any(stage.head for stage in rank.stages)


def titan_states(plan: Plan, rank: Rank | None = None) -> States:
    """The states of ``rank`` (the first pipeline rank where none is named)."""
    rank = rank or ranks(plan)[0]
    p, largest = rank_params(plan, rank)
    n, w = plan.data_parallel, 4 if plan.weights_dtype == "float32" else 2
    c = 4 if plan.precision == "fp32" else 2
    shard = -(-p // n)
    over = f"{p:,} / {n}"
    offload = plan.offload_param != "none"
    resting = [Component("parameter shards", 0 if offload else w * shard, f"{w} B x {over}" if not offload
                         else "on the host (enable_cpu_offload)", SOURCE),
               Component("optimizer states", 0 if offload else 2 * w * shard, f"AdamW m, v: 2 x {w} B x {over}"
                         if not offload else "on the host (enable_cpu_offload)", SOURCE)]
    gradients = [Component("gradient shards (fp32)", 0 if offload else 4 * shard, f"4 B x {over}", SOURCE)]
    host = [Component("offloaded shards + states (host)", (3 * w + 4) * shard * plan.cluster.per_node,
                      f"({3 * w} + 4) B x {over} x GPUs per node (FSDP2 CPUOffloadPolicy: parameters, AdamW "
                      "states, gradients)", SOURCE, HOST)] if offload else []
    gathered, backward = [], []
    m = plan.model
    tail = m.head_params + m.final_norm_params if holds_head(rank) else 0
    if not plan.parallelism.reshard_after_forward:
        gathered.append(Component("unsharded stage parameters", c * p, f"{c} B x {p:,} (not resharded after "
                                  "forward under pipeline parallelism)", SOURCE))
        backward.append(Component("accumulated unsharded gradients", 4 * p, f"4 B x {p:,} (gradient sync off "
                                  "until the last micro-batch: FSDP2 accumulates them in fp32)", SOURCE))
    else:
        if plan.parallelism.tied_unit and tail:
            tied = 2 * m.embedding_params + m.final_norm_params
            gathered.append(Component("embedding + norm + output unit (unsharded, tied: two copies)", c * tied,
                                      f"{c} B x (2 x {m.embedding_params:,} + {m.final_norm_params:,})", TIED_SOURCE))
        elif tail:
            gathered.append(Component("norm + output unit (unsharded)", c * tail, f"{c} B x {tail:,} (not "
                                      "resharded after forward)", SOURCE))
        backward.append(Component("blocks in flight", 3 * c * largest, f"3 x {c} B x {largest:,} (a block's "
                                  "parameters, the next all-gather, the last reduce-scatter input)", SOURCE))
    return States(resting, gradients, [], host, backward=backward, gathered=gathered)


def vision_tower(plan: Plan) -> Component:
    return Component("vision tower", 0, "torchtitan's llama3 has none", SOURCE)


def frozen_shards(plan: Plan) -> int:
    return plan.data_parallel
