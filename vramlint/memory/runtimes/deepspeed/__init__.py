"""DeepSpeed ZeRO 0-3 (``deepspeed.initialize``, 0.19 source): ``states.py`` its model states,
``step.py`` its step replayed through the caching allocator."""

from vramlint.memory.runtimes.deepspeed.states import deepspeed_states as states
from vramlint.memory.runtimes.deepspeed.states import frozen_shards, vision_tower
from vramlint.memory.runtimes.deepspeed.step import simulate_deepspeed as replay

__all__ = ["frozen_shards", "replay", "states", "vision_tower"]
