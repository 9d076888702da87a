"""The model code a framework runs where it is not transformers' (``Recipe.model_code``): what
that code changes in the model as vramlint sees it — the tensors its blocks keep, its own head."""

from __future__ import annotations

from vramlint.models import litgpt
from vramlint.models.shape import ModelShape

CODES = {"litgpt": litgpt.own_code}


def as_run(shape: ModelShape, code: str, converted: bool = True) -> ModelShape:
    """The shape as ``code`` runs it; ``converted``: loaded from a Hugging Face checkpoint."""
    return CODES[code](shape, converted) if code else shape
