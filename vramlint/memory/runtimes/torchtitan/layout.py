"""Which layers a pipeline rank holds and how many micro-batches of activations it keeps.

The split is torchtitan 0.2.2's ``generate_llm_fqn_per_model_part``
(torchtitan/distributed/pipeline_parallel.py:236-345): the embedding and the final norm + output
weigh one layer each, the effective layers are divided evenly over the stages, the first stages
taking one more where they do not divide. A looped schedule gives rank r the stages r, r + pp, ...;
a V-shaped one r and 2·pp − 1 − r.

In-flight micro-batches are PyTorch's schedules' (torch/distributed/pipelining/schedules.py):
1F1B's rank r runs pp − r forwards before its first backward; GPipe and LoopedBFS run every
forward first; Interleaved1F1B's rank r runs ``(stages − 1) x micro-batches per round + 2 x (pp −
1 − r)`` warm-up forwards and one more (Megatron's ``1 + (pp − 1) / (pp·v)`` factor over 1F1B).
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.plan import Plan

LOOPED = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble")
V_SHAPED = ("ZBVZeroBubble", "DualPipeV")
ALL_FIRST = ("GPipe", "LoopedBFS")


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its decoder layers (indices), whether it holds the embedding or the head."""

    index: int
    layers: tuple[int, ...]
    embedding: bool
    head: bool


@dataclass(frozen=True)
class Rank:
    """What one pipeline rank holds: its stages and the stage-forwards whose activations it keeps
    at its peak (each a micro-batch through one of its stages)."""

    index: int
    stages: tuple[Stage, ...]
    in_flight: int                 # stage-forwards alive at the first backward

    @property
    def layers(self) -> int:
        return sum(len(s.layers) for s in self.stages)


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
        if par.schedule in V_SHAPED:
            mine = (stages[r], stages[2 * pp - 1 - r])
        else:
            mine = tuple(stages[r + k * pp] for k in range(v))
        out.append(Rank(r, mine, _in_flight(par.schedule, r, pp, v, n)))
    return out


def _in_flight(schedule: str, r: int, pp: int, v: int, n: int) -> int:
    """Stage-forwards rank r keeps at once (each a micro-batch through one of its stages)."""
    if pp == 1:
        return 1
    if schedule in ALL_FIRST:
        return n * v
    if v == 1:
        return min(n, pp - r)
    rounds = max(1, n // pp)
    per_round = n // rounds
    return min((v - 1) * per_round + 2 * (pp - 1 - r) + 1, n * v)
