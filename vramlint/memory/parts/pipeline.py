"""Pipeline parallelism's shared pieces: a stage, a rank's stages and the micro-batches it keeps in
flight under each schedule. How the layers are split into stages is each runtime's own
(torchtitan's ``generate_llm_fqn_per_model_part``, Megatron's even split); the schedules are
PyTorch's (torch/distributed/pipelining/schedules.py) and Megatron's
(megatron/core/pipeline_parallel/schedules.py), which agree on these counts:

- 1F1B: rank r runs ``pp − r − 1`` warm-up forwards, then one more before its first backward:
  ``pp − r`` micro-batches in flight (all of them where there are fewer);
- GPipe / LoopedBFS: every forward first (micro-batches x stages);
- interleaved 1F1B (v stages a rank, micro-batches in groups of ``pp``): ``(v − 1)·group + 2·(pp −
  1 − r)`` warm-up stage-forwards and one more (Megatron's ``get_pp_rank_microbatches``; the
  ``1 + (pp − 1) / (pp·v)`` factor of its theoretical_memory_usage on rank 0).
"""

from __future__ import annotations

from dataclasses import dataclass

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


def in_flight(schedule: str, r: int, pp: int, v: int, n: int) -> int:
    """Stage-forwards rank r keeps at once (each a micro-batch through one of its stages), of ``n``
    micro-batches a step through ``v`` stages a rank."""
    if pp == 1:
        return 1
    if schedule in ALL_FIRST:
        return n * v
    if v == 1:
        return min(n, pp - r)
    rounds = max(1, n // pp)
    per_round = n // rounds
    return min((v - 1) * per_round + 2 * (pp - 1 - r) + 1, n * v)
