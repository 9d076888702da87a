"""torchtitan (FSDP2 + TP + PP + CP as torchtitan 0.2.2 builds them, over its own model code):
``layout.py`` which layers and micro-batches a pipeline rank holds, ``activations.py`` what a block
keeps under each activation-checkpointing policy (traced on the CPU: dev/torchtitan_block.py),
``states.py`` the model states, ``step.py`` the step's moments and the peak rank."""

from vramlint.memory.runtimes.torchtitan.states import frozen_shards, vision_tower
from vramlint.memory.runtimes.torchtitan.states import titan_states as states
from vramlint.memory.runtimes.torchtitan.step import EXPANDABLE_SEGMENTS, moments, replay, reserve

__all__ = ["EXPANDABLE_SEGMENTS", "frozen_shards", "moments", "replay", "reserve", "states", "vision_tower"]
