"""Which layers a Megatron pipeline rank holds and how many micro-batches of activations it keeps.

The split is Megatron's (core_v0.19.0 transformer_block.py:115-172, ``get_num_layers_to_build``):
the layers evenly over pp x v model chunks, or with ``--decoder-first/last-pipeline-num-layers``
those on the first and last stage and the rest evenly between; the embedding on the first chunk,
the final norm, output layer and loss on the last (each taking a layer's place there under
``--account-for-embedding/loss-in-pipeline-split``); or each stage's layers as
``--pipeline-model-parallel-layout`` states them (pipeline_parallel_layer_layout.py).
Rank r holds chunks r, r + pp, ... (interleaved).
In-flight micro-batches are the schedules' (memory/parts/pipeline.py: Megatron's
``get_pp_rank_microbatches`` with ``microbatch_group_size_per_vp_stage`` = pp).
"""

from __future__ import annotations

from vramlint.memory.parts.pipeline import Rank, Stage, in_flight
from vramlint.plan import Plan


def counts(num_layers: int, stages: int, first: int = 0, last: int = 0,
           slots: tuple[bool, bool] = (False, False)) -> list[int]:
    """Layers of each stage, first to last. ``slots``: the embedding and the loss each take a layer's
    place on the first and the last stage (transformer_block.py:143-195)."""
    if any(slots):
        per = (num_layers + sum(slots)) // stages
        out = [per] * stages
        out[0] -= slots[0]
        out[-1] -= slots[1]
        return out
    if stages == 1:
        return [num_layers]
    ends = [first] if first else []
    tail = [last] if last else []
    rest = stages - len(ends) - len(tail)
    middle = num_layers - sum(ends) - sum(tail)
    per, extra = divmod(middle, rest) if rest else (0, 0)
    return ends + [per + (1 if i < extra else 0) for i in range(rest)] + tail


def split(num_layers: int, stages: int, first: int = 0, last: int = 0,
          slots: tuple[bool, bool] = (False, False), stated: tuple[int, ...] = ()) -> list[Stage]:
    """The stages in order with their layers: as ``stated`` (--pipeline-model-parallel-layout's
    decoder layers a stage), else ``counts``'."""
    out, current = [], 0
    for index, size in enumerate(stated or counts(num_layers, stages, first, last, slots)):
        out.append(Stage(index, tuple(range(current, current + size)), index == 0, index == stages - 1))
        current += size
    return out


def ranks(plan: Plan) -> list[Rank]:
    """Every pipeline rank with its model chunks and in-flight chunk-forwards."""
    par = plan.parallelism
    pp, v, n = par.pipeline, par.stages_per_rank, par.microbatches
    stages = split(plan.model.num_layers, pp * v, par.first_layers, par.last_layers, par.slots, par.stage_layers)
    return [Rank(r, tuple(stages[r + k * pp] for k in range(v)), in_flight(par.schedule, r, pp, v, n))
            for r in range(pp)]
