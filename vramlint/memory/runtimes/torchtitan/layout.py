"""Which layers a pipeline rank holds and how many micro-batches of activations it keeps.

The split is torchtitan 0.2.2's ``generate_llm_fqn_per_model_part``
(torchtitan/distributed/pipeline_parallel.py:236-345): the embedding and the final norm + output
weigh one layer each, the effective layers are divided evenly over the stages, the first stages
taking one more where they do not divide. A looped schedule gives rank r the stages r, r + pp, ...;
a V-shaped one r and 2·pp − 1 − r.

In-flight micro-batches are the schedules' (memory/parts/pipeline.py).
"""

from __future__ import annotations

from vramlint.memory.parts.pipeline import Rank, Stage, in_flight
from vramlint.plan import Plan

LOOPED = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble")
V_SHAPED = ("ZBVZeroBubble", "DualPipeV")


def split(num_layers: int, stages: int) -> list[Stage]:
    """``generate_llm_fqn_per_model_part(stages, num_layers, input_weight=1, output_weight=1)``."""
    if stages == 1:
        return [Stage(0, tuple(range(num_layers)), True, True)]
    effective = num_layers + 2
    per, extra = divmod(effective, stages)
    out, current = [], 0
    for index in range(stages):
        take = per + (1 if index < extra else 0) - (index == 0) - (index == stages - 1)
        layers = tuple(range(current, min(num_layers, current + take)))
        current += len(layers)
        out.append(Stage(index, layers, index == 0, index == stages - 1))
    return out


def ranks(plan: Plan) -> list[Rank]:
    """Every pipeline rank with its stages and in-flight stage-forwards."""
    par = plan.parallelism
    pp, v, n = par.pipeline, par.stages_per_rank, par.microbatches
    stages = split(plan.model.num_layers, pp * v)
    out = []
    for r in range(pp):
        if par.schedule in V_SHAPED and v == 2:     # without a pipeline (pp 1) no schedule runs
            mine = (stages[r], stages[2 * pp - 1 - r])
        else:
            mine = tuple(stages[r + k * pp] for k in range(v))
        out.append(Rank(r, mine, in_flight(par.schedule, r, pp, v, n)))
    return out
