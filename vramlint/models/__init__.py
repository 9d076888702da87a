"""Model shapes: HF config.json -> ModelShape (layers, parameter counts, KV geometry)."""

from vramlint.models.resolve import read_model
from vramlint.models.shape import ModelShape

__all__ = ["ModelShape", "read_model"]
