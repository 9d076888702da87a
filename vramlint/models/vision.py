"""The vision tower a multimodal checkpoint carries beside its language model.

vramlint's parameter count is the language model's (what a text prompt exercises); the tower and
its projector are loaded beside it all the same: vLLM builds them (``gemma3_mm.py``:
``SiglipVisionModel`` and ``Gemma3MultiModalProjector``), so its "Model loading took" holds them,
and transformers' ``AutoModelForCausalLM`` builds gemma3 as ``Gemma3ForConditionalGeneration``,
so training and ``--infer`` load them too (``memory/states.py`` ``vision_tower``).
Counted here for the encoders whose layout is known exactly; any other ``vision_config`` is named
in the model's notes as not counted.

SigLIP (``siglip_vision_model``, transformers ``SiglipVisionModel``), hidden h, MLP width I,
L layers, patch p over c channels, image s (transformers' defaults where the config omits them,
``data/model_defaults.json``):

    patch conv c·p²·h + h, positions (s/p)²·h,
    per layer 4(h² + h) (q, k, v, out) + (h·I + I) + (I·h + h) (fc1, fc2) + 4h (two LayerNorms),
    post LayerNorm 2h; the attention-pooling head only when ``vision_use_head`` (Gemma 3: off).

Gemma 3's projector: ``mm_input_projection_weight`` h x text hidden + ``mm_soft_emb_norm`` h.
Gemma-3-12b: 416,866,032 + 4,424,832, transformers' own count on the meta device (dev check).
"""

from __future__ import annotations

from typing import Any

from vramlint.models.config import HfConfig

LOADED_BY = "transformers AutoModelForCausalLM builds gemma3 as Gemma3ForConditionalGeneration, tower included"


def _siglip(v: HfConfig) -> int:
    h, i, p, c = (v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"),
                  v.int("num_channels"))
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    total = c * p * p * h + h + (v.int("image_size") // p) ** 2 * h + v.int("num_hidden_layers") * layer + 2 * h
    if v.flag("vision_use_head"):     # probe, MultiheadAttention (in 3h² + 3h, out h² + h), LayerNorm, MLP
        total += h + 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h)
    return total


def vision_params(raw: dict[str, Any], text_hidden: int) -> tuple[int, str | None]:
    """(parameters of the vision tower and its projector, a note when a tower is not counted)."""
    vision = raw.get("vision_config")
    if not isinstance(vision, dict):
        return 0, None
    kind = vision.get("model_type")
    if raw.get("model_type") == "gemma3" and kind in (None, "siglip_vision_model"):   # Gemma3Config's default
        v = HfConfig(vision, "siglip_vision_model")
        return _siglip(v) + v.int("hidden_size") * text_hidden + v.int("hidden_size"), None
    return 0, (f"vision tower ({kind or 'unknown type'}) not counted: vLLM and the ForConditionalGeneration "
               "class load it beside the language model, so the weights here are short by its size")
