"""Plain PyTorch (DDP, Accelerate without DeepSpeed or FSDP): ``states.py`` its model states,
``step.py`` its step replayed through the caching allocator (the step the other runtimes extend)."""

from vramlint.memory.runtimes.torch.states import frozen_shards, vision_tower
from vramlint.memory.runtimes.torch.states import torch_states as states
from vramlint.memory.runtimes.torch.step import simulate_training as replay

__all__ = ["frozen_shards", "replay", "states", "vision_tower"]
