"""Megatron-LM (TP + SP + PP + CP with its DDP buffers and distributed optimizer, as core_v0.19.0
builds them, over its own GPT model): ``layout.py`` which layers and micro-batches a pipeline rank
holds, ``activations.py`` what a layer keeps under each recompute policy, ``states.py`` the model
states, ``step.py`` the step's moments and the peak rank."""

from vramlint.memory.runtimes.megatron.states import frozen_shards, vision_tower
from vramlint.memory.runtimes.megatron.states import megatron_states as states
from vramlint.memory.runtimes.megatron.step import moments, replay, reserve

__all__ = ["frozen_shards", "moments", "replay", "reserve", "states", "vision_tower"]
