"""FSDP (1 and 2, as Accelerate, the HF Trainer and torchtune set it up): ``states.py`` its model
states, ``step.py`` its step replayed through the caching allocator."""

from vramlint.memory.runtimes.fsdp.states import frozen_shards, vision_tower
from vramlint.memory.runtimes.fsdp.states import fsdp_states as states
from vramlint.memory.runtimes.fsdp.step import simulate_fsdp as replay

__all__ = ["frozen_shards", "replay", "states", "vision_tower"]
