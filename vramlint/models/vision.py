"""The vision tower a multimodal checkpoint carries beside its language model.

vramlint's parameter count is the language model's (what training and ``--infer`` with a text
prompt exercise); vLLM builds and loads the vision tower and its projector too (``gemma3_mm.py``:
``SiglipVisionModel`` and ``Gemma3MultiModalProjector``), so its "Model loading took" holds them.
Counted here for the encoders whose layout is known exactly; any other ``vision_config`` is named
in the model's notes as not counted.

SigLIP (``siglip_vision_model``, transformers ``SiglipVisionModel``), hidden h, MLP width I,
L layers, patch p over c channels, image s:

    patch conv c·p²·h + h, positions (s/p)²·h,
    per layer 4(h² + h) (q, k, v, out) + (h·I + I) + (I·h + h) (fc1, fc2) + 4h (two LayerNorms),
    post LayerNorm 2h; the attention-pooling head only when ``vision_use_head`` (Gemma 3: off).

Gemma 3's projector: ``mm_input_projection_weight`` h x text hidden + ``mm_soft_emb_norm`` h.
Gemma-3-12b: 416,866,032 + 4,424,832, transformers' own count on the meta device (dev check).
"""

from __future__ import annotations

from typing import Any

SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
                   "image_size": 224, "patch_size": 16, "vision_use_head": True}


def _siglip(v: dict[str, Any]) -> int:
    v = {**SIGLIP_DEFAULTS, **{k: val for k, val in v.items() if val is not None}}
    h, i, p, c = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["num_channels"]
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    total = c * p * p * h + h + (v["image_size"] // p) ** 2 * h + v["num_hidden_layers"] * layer + 2 * h
    if v["vision_use_head"]:     # probe, MultiheadAttention (in 3h² + 3h, out h² + h), LayerNorm, MLP
        total += h + 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h)
    return total


def vision_params(raw: dict[str, Any], text_hidden: int) -> tuple[int, str | None]:
    """(parameters of the vision tower and its projector, a note when a tower is not counted)."""
    vision = raw.get("vision_config")
    if not isinstance(vision, dict):
        return 0, None
    kind = vision.get("model_type") or ("siglip_vision_model" if raw.get("model_type") == "gemma3" else None)
    if kind == "siglip_vision_model" and raw.get("model_type") == "gemma3":
        h = vision.get("hidden_size") or SIGLIP_DEFAULTS["hidden_size"]
        return _siglip(vision) + h * text_hidden + h, None
    return 0, (f"vision tower ({kind or 'unknown type'}) not counted, though vLLM and the "
               "ForConditionalGeneration class load it beside the language model")
