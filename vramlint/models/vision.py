"""The vision tower a multimodal checkpoint carries beside its language model.

vramlint's parameter count is the language model's (what a text prompt exercises); the tower and
its projector are loaded beside it all the same: vLLM builds them (``gemma3_mm.py``:
``SiglipVisionModel`` and ``Gemma3MultiModalProjector``), so its "Model loading took" holds them,
and transformers builds the multimodal class — ``AutoModelForCausalLM`` makes gemma3 a
``Gemma3ForConditionalGeneration``; qwen3_vl and qwen2_5_vl load through ``AutoModelForImageTextToText`` — so
training and ``--infer`` load them too (each ``memory/runtimes/*/states.py`` ``vision_tower``).
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

Qwen3-VL (``qwen3_vl_vision``, transformers ``Qwen3VLVisionModel``), hidden h, MLP width I, depth L,
patch p over t frames and c channels, P learned positions, spatial merge m (h' = h·m²), output o,
D deepstack layers:

    patch conv c·t·p²·h + h, positions P·h,
    per block 4h (two LayerNorms) + (3h² + 3h) (fused qkv) + (h² + h) (proj) + (h·I + I) + (I·h + h),
    merger 2h + (h'² + h') + (h'·o + o), each deepstack merger 2h' + (h'² + h') + (h'·o + o).

Qwen3-VL-8B: 576,388,336, transformers' own count on the meta device (tests/test_vllm.py).

Qwen2.5-VL (``qwen2_5_vl_vision``, transformers ``Qwen2_5_VisionTransformerPretrainedModel``): a
3-D patch embedding without bias c·t·p²·h, per block two RMSNorms 2h, fused qkv (3h² + 3h), proj
(h² + h) and a gated MLP with biases 2(h·I + I) + (I·h + h), merger RMSNorm h + (h'² + h') +
(h'·o + o). Qwen2.5-VL-7B: 676,550,144, transformers' count on the meta device (dev check).

Qwen2-VL (``qwen2_vl_vision``, transformers ``Qwen2VisionTransformerPretrainedModel``), embed
dim e, MLP width I = e·mlp_ratio, depth L, output ``hidden_size`` o: the same patch embedding,
per block two LayerNorms 4e, qkv (3e² + 3e), proj (e² + e), fc1 and fc2 with biases, merger
LayerNorm 2e + (e'² + e') + (e'·o + o). Qwen2-VL-7B: 675,759,104, transformers' count (dev check).

PaliGemma (``paligemma``): SigLIP as above, and one projector linear with bias h·P + P into
``projection_dim`` P (the checkpoint's). PaliGemma's default: 401,858,816, transformers' count.

Idefics3 and SmolVLM (``idefics3``, ``smolvlm``): a SigLIP-like tower as above (no class
embedding, no head) and a connector h·scale²·T without bias (vLLM keeps the connector whole
on every TP rank, counted split). Their defaults: 171,270,144, transformers' count.

LLaVA and LLaVA-NeXT (``llava``, ``llava_next``: the vision_config's own type decides, CLIP by
default, Pixtral for Pixtral-12B): CLIP (``CLIPVisionModel``) has a class embedding h, a patch
conv c·p²·h, positions ((s/p)² + 1)·h, pre- and post-LayerNorms 4h, per layer q, k, v, out with
biases 4(h² + h), fc1 and fc2 with biases and two LayerNorms 4h; ``LlavaMultiModalProjector``
h·f·T + T·T (f feature layers, biases 2T per ``multimodal_projector_bias``), LLaVA-NeXT's
``image_newline`` T. vLLM builds the tower only up to the deepest feature layer and without the
post-LayerNorm (``Tower.vllm_params``). LLaVA-1.5-7B: 324,487,168, transformers' count; vLLM's
311,888,896.

Llama 4 (``llama4_vision_model``, transformers ``Llama4VisionModel``), hidden h, MLP width I, L
layers, patch p over c channels, image s: an unfolding patch linear c·p²·h, a class embedding h,
positions ((s/p)² + 1)·h, two LayerNorms 4h, per layer q, k, v, o with biases 4(h² + h), fc1 and
fc2 with biases, two LayerNorms 4h; the pixel-shuffle adapter's fc1 I x projector_input_dim and
fc2 projector_output_dim², no biases; the projector vision_output_dim x text hidden.
Llama-4-Scout: 871,932,416, transformers' count on the meta device (dev check).

Pixtral (``pixtral``, Mistral 3's tower: transformers ``PixtralVisionModel`` and
``Mistral3MultiModalProjector``), hidden h, MLP width I, L layers, heads n of head_dim d, patch p
over c channels: patch conv c·p²·h, ln_pre h, per layer two RMSNorms 2h, q, k, v, o 4·h·n·d, a
gated MLP 3·h·I, no biases; the projector's RMSNorm h, patch merger 4h·h (spatial merge 2) and two
linears h·T + T·T into the text width T. Mistral-Small-3.1's (transformers' default mistral3):
438,958,080, transformers' count on the meta device (dev check).

Gemma 4 (``gemma4_vision``, transformers ``Gemma4VisionModel`` and ``embed_vision``), hidden h, MLP
width I, L layers, heads n and kv heads k of head_dim d, patch p, position table size P, text
hidden T: patch projection 3p²·h, two position tables 2·P·h, per layer q, k, v, o without bias
2·h·n·d + 2·h·k·d, q and k norms 2d, a gated MLP 3·h·I and four RMSNorms 4h; the projector
(output_proj_dims or h)·T. gemma-4-26B-A4B: 572,792,112, transformers' count (dev check).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vramlint.models.config import HfConfig, absent_sub_config
from vramlint.models.shape import Tower

Linears = tuple[tuple[str, int, int, int], ...]     # (module name as PEFT matches it, d_in, d_out, copies)


@dataclass(frozen=True)
class Outer:
    """What a tower's count needs beyond its vision_config: the checkpoint's own config (LLaVA's
    projector settings live there) and the language model's width."""

    config: HfConfig
    text_hidden: int


LOADED_BY = ("transformers builds the multimodal class, tower included (AutoModelForCausalLM: gemma3 and gemma4 "
             "as their ForConditionalGeneration; the Qwen VLs, mistral3, llava, paligemma, idefics3 and smolvlm "
             "through AutoModelForImageTextToText)")
TEXT_ONLY = ("AutoModelForCausalLM builds {model_type} text-only ({architecture}: no vision tower), so its tower "
             "({params:,} parameters) is not loaded; the ForConditionalGeneration class would load it")


def _siglip(v: HfConfig) -> int:
    h, i, p, c = (v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"),
                  v.int("num_channels"))
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    total = c * p * p * h + h + (v.int("image_size") // p) ** 2 * h + v.int("num_hidden_layers") * layer + 2 * h
    if v.flag("vision_use_head"):     # probe, MultiheadAttention (in 3h² + 3h, out h² + h), LayerNorm, MLP
        total += h + 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h)
    return total


def _siglip_linears(v: HfConfig, outer: Outer) -> Linears:
    """SigLIP's nn.Linear modules (Gemma 3's projector is a bare parameter, no linear)."""
    h, i, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("num_hidden_layers")
    out = [(f"self_attn.{name}", h, h, n) for name in ("q_proj", "k_proj", "v_proj", "out_proj")]
    out += [("mlp.fc1", h, i, n), ("mlp.fc2", i, h, n)]
    if v.flag("vision_use_head"):       # MultiheadAttention's out_proj is an nn.Linear subclass
        out += [("head.attention.out_proj", h, h, 1), ("head.mlp.fc1", h, i, 1), ("head.mlp.fc2", i, h, 1)]
    return tuple(out)


def _qwen3_vl(v: HfConfig, outer: Outer) -> int:
    h, i, p, c = v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"), v.int("in_channels")
    merged, out = h * v.int("spatial_merge_size") ** 2, v.int("out_hidden_size")
    block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h)

    def merger(norm: int) -> int:
        return norm + merged * merged + merged + merged * out + out

    deepstack = len(v.get("deepstack_visual_indexes") or ())
    return (c * v.int("temporal_patch_size") * p * p * h + h + v.int("num_position_embeddings") * h
            + v.int("depth") * block + merger(2 * h) + deepstack * merger(2 * merged))


def _qwen3_vl_linears(v: HfConfig, outer: Outer) -> Linears:
    h, i, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("depth")
    merged, out, mergers = h * v.int("spatial_merge_size") ** 2, v.int("out_hidden_size"), 1 + len(
        v.get("deepstack_visual_indexes") or ())
    return (("attn.qkv", h, 3 * h, n), ("attn.proj", h, h, n), ("mlp.linear_fc1", h, i, n),
            ("mlp.linear_fc2", i, h, n), ("merger.linear_fc1", merged, merged, mergers),
            ("merger.linear_fc2", merged, out, mergers))


def _qwen2_5_vl(v: HfConfig, outer: Outer) -> int:
    h, i, p, c = v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"), v.int("in_channels")
    merged, out = h * v.int("spatial_merge_size") ** 2, v.int("out_hidden_size")
    block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * (h * i + i) + (i * h + h)
    merger = h + merged * merged + merged + merged * out + out
    return c * v.int("temporal_patch_size") * p * p * h + v.int("depth") * block + merger


def _qwen2_5_vl_linears(v: HfConfig, outer: Outer) -> Linears:
    h, i, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("depth")
    merged = h * v.int("spatial_merge_size") ** 2
    return (("attn.qkv", h, 3 * h, n), ("attn.proj", h, h, n), ("mlp.gate_proj", h, i, n), ("mlp.up_proj", h, i, n),
            ("mlp.down_proj", i, h, n), ("merger.mlp.0", merged, merged, 1),
            ("merger.mlp.2", merged, v.int("out_hidden_size"), 1))


def _qwen2_vl(v: HfConfig, outer: Outer) -> int:
    e, p, c = v.int("embed_dim"), v.int("patch_size"), v.int("in_channels")
    i, merged, out = e * v.int("mlp_ratio"), e * v.int("spatial_merge_size") ** 2, v.int("hidden_size")
    block = 4 * e + (3 * e * e + 3 * e) + (e * e + e) + (e * i + i) + (i * e + e)
    merger = 2 * e + merged * merged + merged + merged * out + out
    return c * v.int("temporal_patch_size") * p * p * e + v.int("depth") * block + merger


def _qwen2_vl_linears(v: HfConfig, outer: Outer) -> Linears:
    e, n = v.int("embed_dim"), v.int("depth")
    i, merged = e * v.int("mlp_ratio"), e * v.int("spatial_merge_size") ** 2
    return (("attn.qkv", e, 3 * e, n), ("attn.proj", e, e, n), ("mlp.fc1", e, i, n), ("mlp.fc2", i, e, n),
            ("merger.mlp.0", merged, merged, 1), ("merger.mlp.2", merged, v.int("hidden_size"), 1))


def _hidden_width(v: HfConfig, outer: Outer) -> int:
    """Qwen2-VL's vision ``hidden_size`` is its merger's output: one embedding per image token."""
    return v.int("hidden_size")


def _out_width(v: HfConfig, outer: Outer) -> int:
    """The merger hands the language model one ``out_hidden_size`` embedding per image token."""
    return v.int("out_hidden_size")


def _qwen3_vl_width(v: HfConfig, outer: Outer) -> int:
    """What one image token hands the language model: the merger's output and, stacked beside it,
    one per deepstack layer (``Qwen3VLModel.get_image_features``)."""
    return v.int("out_hidden_size") * (1 + len(v.get("deepstack_visual_indexes") or ()))


def _gemma4(v: HfConfig, outer: Outer) -> int:
    h, i, p = v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size")
    heads, kv = v.int("num_attention_heads"), v.int("num_key_value_heads")
    d = v.int("head_dim") if v.get("head_dim") else h // heads
    layer = 2 * h * heads * d + 2 * h * kv * d + 2 * d + 3 * h * i + 4 * h
    projector = (v.get("output_proj_dims") or h) * outer.text_hidden
    return 3 * p * p * h + 2 * v.int("position_embedding_size") * h + v.int("num_hidden_layers") * layer + projector


def _gemma4_linears(v: HfConfig, outer: Outer) -> Linears:
    """Gemma 4's encoder wraps each projection's nn.Linear in a ``Gemma4ClippableLinear``
    (``q_proj.linear``); the patch embedder's and the projector's are plain."""
    h, i, p, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"), v.int("num_hidden_layers")
    heads, kv = v.int("num_attention_heads"), v.int("num_key_value_heads")
    d = v.int("head_dim") if v.get("head_dim") else h // heads
    return (("self_attn.q_proj.linear", h, heads * d, n), ("self_attn.k_proj.linear", h, kv * d, n),
            ("self_attn.v_proj.linear", h, kv * d, n), ("self_attn.o_proj.linear", heads * d, h, n),
            ("mlp.gate_proj.linear", h, i, n), ("mlp.up_proj.linear", h, i, n), ("mlp.down_proj.linear", i, h, n),
            ("patch_embedder.input_proj", 3 * p * p, h, 1),
            ("embedding_projection", v.get("output_proj_dims") or h, outer.text_hidden, 1))


def _llama4(v: HfConfig, outer: Outer) -> int:
    """Llama 4's tower (``Llama4VisionModel``) and projector (``Llama4MultiModalProjector``)."""
    h, i, p, c = v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"), v.int("num_channels")
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    adapter = i * v.int("projector_input_dim") + v.int("projector_output_dim") ** 2
    return (c * p * p * h + h + ((v.int("image_size") // p) ** 2 + 1) * h + 4 * h + v.int("num_hidden_layers") * layer
            + adapter + v.int("vision_output_dim") * outer.text_hidden)


def _llama4_linears(v: HfConfig, outer: Outer) -> Linears:
    h, i, p, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"), v.int("num_hidden_layers")
    out = v.int("projector_output_dim")
    return (("patch_embedding.linear", v.int("num_channels") * p * p, h, 1),
            *((f"self_attn.{name}", h, h, n) for name in ("q_proj", "k_proj", "v_proj", "o_proj")),
            ("mlp.fc1", h, i, n), ("mlp.fc2", i, h, n),
            ("vision_adapter.mlp.fc1", i, v.int("projector_input_dim"), 1), ("vision_adapter.mlp.fc2", out, out, 1),
            ("multi_modal_projector.linear_1", v.int("vision_output_dim"), outer.text_hidden, 1))


def _pixtral_width(v: HfConfig) -> int:
    """Heads x head_dim (PixtralVisionConfig derives head_dim = hidden / heads when it is absent)."""
    heads = v.int("num_attention_heads")
    return heads * (v.int("head_dim") if v.get("head_dim") else v.int("hidden_size") // heads)


def _pixtral_tower(v: HfConfig, layers: int | None = None) -> int:
    """``PixtralVisionModel``: patch conv, ln_pre, ``layers`` of its blocks (all by default)."""
    h, i, p, c = v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"), v.int("num_channels")
    layer = 2 * h + 4 * h * _pixtral_width(v) + 3 * h * i
    return c * p * p * h + h + (v.int("num_hidden_layers") if layers is None else layers) * layer


def _pixtral(v: HfConfig, outer: Outer) -> int:
    """Pixtral (Mistral 3's tower) and ``Mistral3MultiModalProjector``, biases off (the
    checkpoints' ``multimodal_projector_bias``: false) and one feature layer."""
    h, t = v.int("hidden_size"), outer.text_hidden
    return _pixtral_tower(v) + h + h * 4 * h + h * t + t * t          # spatial merge 2: h·4 -> h


def _clip_tower(v: HfConfig, layers: int | None = None, post_norm: bool = True) -> int:
    """``CLIPVisionModel``: class embedding, patch conv, positions, pre-LayerNorm, ``layers`` of
    its blocks (all by default: q, k, v, out and fc1, fc2 with biases, two LayerNorms), post-LayerNorm."""
    h, i, p, c = v.int("hidden_size"), v.int("intermediate_size"), v.int("patch_size"), v.int("num_channels")
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    n = v.int("num_hidden_layers") if layers is None else layers
    embeddings = h + c * p * p * h + ((v.int("image_size") // p) ** 2 + 1) * h
    return embeddings + 2 * h + n * layer + (2 * h if post_norm else 0)


def _feature_layers(outer: Outer) -> list[int]:
    """LLaVA's ``vision_feature_layer``: one index, or several whose features are concatenated."""
    layers = outer.config.get("vision_feature_layer")
    return [int(x) for x in layers] if isinstance(layers, list) else [int(layers)]


def _llava_head(v: HfConfig, outer: Outer) -> int:
    """``LlavaMultiModalProjector`` (linear_1 over every feature layer's width, linear_2, biases
    per ``multimodal_projector_bias``) and LLaVA-NeXT's ``image_newline``."""
    t, width = outer.text_hidden, v.int("hidden_size") * len(_feature_layers(outer))
    bias = 2 * t if outer.config.flag("multimodal_projector_bias") else 0
    newline = t if outer.config.get("model_type") == "llava_next" else 0
    return width * t + t * t + bias + newline


def _vllm_layers(v: HfConfig, outer: Outer) -> int:
    """vLLM builds a LLaVA tower only up to its deepest feature layer (``_get_num_hidden_layers``)."""
    n = v.int("num_hidden_layers")
    deepest = max(n + index + 1 if index < 0 else index for index in _feature_layers(outer))
    return min(n, max(0, deepest))         # an index past either end builds no more than the tower has


def _llava_clip(v: HfConfig, outer: Outer) -> int:
    return _clip_tower(v) + _llava_head(v, outer)


def _llava_clip_vllm(v: HfConfig, outer: Outer) -> int:
    """vLLM's: layers up to the feature layer, no post-LayerNorm (``require_post_norm=False``)."""
    return _clip_tower(v, _vllm_layers(v, outer), post_norm=False) + _llava_head(v, outer)


def _llava_pixtral(v: HfConfig, outer: Outer) -> int:
    return _pixtral_tower(v) + _llava_head(v, outer)


def _llava_pixtral_vllm(v: HfConfig, outer: Outer) -> int:
    return _pixtral_tower(v, _vllm_layers(v, outer)) + _llava_head(v, outer)


def _llava_projector_linears(v: HfConfig, outer: Outer) -> Linears:
    t = outer.text_hidden
    return (("multi_modal_projector.linear_1", v.int("hidden_size") * len(_feature_layers(outer)), t, 1),
            ("multi_modal_projector.linear_2", t, t, 1))


def _llava_linears(v: HfConfig, outer: Outer) -> Linears:
    """CLIP's linears carry SigLIP's names (q/k/v/out_proj, fc1, fc2), then LLaVA's projector."""
    return _siglip_linears(v, outer) + _llava_projector_linears(v, outer)


def _llava_pixtral_linears(v: HfConfig, outer: Outer) -> Linears:
    return _pixtral_block_linears(v) + _llava_projector_linears(v, outer)


def _pixtral_block_linears(v: HfConfig) -> Linears:
    """Pixtral's blocks: q, k, v, o and the gated MLP."""
    h, i, n = v.int("hidden_size"), v.int("intermediate_size"), v.int("num_hidden_layers")
    width = _pixtral_width(v)
    return (("attention.q_proj", h, width, n), ("attention.k_proj", h, width, n), ("attention.v_proj", h, width, n),
            ("attention.o_proj", width, h, n), ("feed_forward.gate_proj", h, i, n), ("feed_forward.up_proj", h, i, n),
            ("feed_forward.down_proj", i, h, n))


def _pixtral_linears(v: HfConfig, outer: Outer) -> Linears:
    """Mistral 3's: Pixtral's blocks, the patch merger and the projector's two linears."""
    h, t = v.int("hidden_size"), outer.text_hidden
    return _pixtral_block_linears(v) + (("patch_merger.merging_layer", 4 * h, h, 1),
                                        ("multi_modal_projector.linear_1", h, t, 1),
                                        ("multi_modal_projector.linear_2", t, t, 1))


def _paligemma(v: HfConfig, outer: Outer) -> int:
    """SigLIP and PaliGemma's projector, one linear with bias into ``projection_dim``."""
    projection = outer.config.int("projection_dim")
    return _siglip(v) + v.int("hidden_size") * projection + projection


def _paligemma_linears(v: HfConfig, outer: Outer) -> Linears:
    return (*_siglip_linears(v, outer),
            ("multi_modal_projector.linear", v.int("hidden_size"), outer.config.int("projection_dim"), 1))


def _projection_width(v: HfConfig, outer: Outer) -> int:
    return outer.config.int("projection_dim")


def _idefics3(v: HfConfig, outer: Outer) -> int:
    """Idefics3's / SmolVLM's SigLIP-like tower (no class embedding, no head) and its connector,
    one linear without bias from the pixel-shuffled width h·scale² into the text width."""
    return _siglip(v) + v.int("hidden_size") * outer.config.int("scale_factor") ** 2 * outer.text_hidden


def _idefics3_linears(v: HfConfig, outer: Outer) -> Linears:
    width = v.int("hidden_size") * outer.config.int("scale_factor") ** 2
    return (*_siglip_linears(v, outer), ("connector.modality_projection.proj", width, outer.text_hidden, 1))


def _gemma3(v: HfConfig, outer: Outer) -> int:
    """SigLIP and Gemma 3's projector (``mm_input_projection_weight`` h x text hidden, ``mm_soft_emb_norm`` h)."""
    return _siglip(v) + v.int("hidden_size") * outer.text_hidden + v.int("hidden_size")


def _text_width(v: HfConfig, outer: Outer) -> int:
    """The projector hands the language model one text-width embedding per image token."""
    return outer.text_hidden


@dataclass(frozen=True)
class Kind:
    """How to read one type of ``vision_config`` (its defaults are transformers', under that type)."""

    params: Callable[[HfConfig, int], int]
    token_width: Callable[[HfConfig, int], int]
    linears: Callable[[HfConfig, int], Linears]
    modalities: frozenset[str]          # what vLLM's ``_mark_tower_model`` builds the tower for
    tp_sharded: bool                    # vLLM builds it from parallel linears (Gemma 4's: transformers' module)
    wrapped: frozenset[str] = frozenset()   # module names that wrap an nn.Linear (PEFT cannot adapt them)
    hf_tp_split: frozenset[str] = frozenset()   # linears split by transformers' ``base_model_tp_plan`` (none: whole)
    text_class: str = ""                # the text-only class AutoModelForCausalLM builds instead (llama4's)
    encoder_dp: bool = False            # vLLM's ``supports_encoder_tp_data`` (mm_encoder_tp_mode: data)
    vllm_params: Callable[[HfConfig, Outer], int] | None = None   # where vLLM builds fewer (LLaVA's CLIP)


IMAGE, IMAGE_VIDEO = frozenset({"image"}), frozenset({"image", "video"})
GEMMA4_WRAPPED = frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})
GEMMA4_TP = frozenset(f"{part}.{name}.linear"       # gemma4_vision's base_model_tp_plan; the others have none
                      for part, names in (("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")),
                                          ("mlp", ("gate_proj", "up_proj", "down_proj")))
                      for name in names)
# (the checkpoint's model_type, its vision_config's model_type) -> Kind
TOWERS = {
    ("gemma3", "siglip_vision_model"): Kind(_gemma3, _text_width, _siglip_linears, IMAGE, True),
    ("qwen3_vl", "qwen3_vl_vision"): Kind(_qwen3_vl, _qwen3_vl_width, _qwen3_vl_linears, IMAGE_VIDEO, True,
                                          encoder_dp=True),
    ("qwen3_vl_moe", "qwen3_vl_moe_vision"): Kind(_qwen3_vl, _qwen3_vl_width, _qwen3_vl_linears, IMAGE_VIDEO, True,
                                                  encoder_dp=True),
    ("gemma4", "gemma4_vision"): Kind(_gemma4, _text_width, _gemma4_linears, IMAGE_VIDEO, False, GEMMA4_WRAPPED,
                                           GEMMA4_TP),
    ("qwen2_5_vl", "qwen2_5_vl_vision"): Kind(_qwen2_5_vl, _out_width, _qwen2_5_vl_linears, IMAGE_VIDEO, True,
                                              encoder_dp=True),
    ("qwen2_vl", "qwen2_vl_vision"): Kind(_qwen2_vl, _hidden_width, _qwen2_vl_linears, IMAGE_VIDEO, True,
                                          encoder_dp=True),
    ("llava", "clip_vision_model"): Kind(_llava_clip, _text_width, _llava_linears, IMAGE, True,
                                         vllm_params=_llava_clip_vllm),
    ("llava_next", "clip_vision_model"): Kind(_llava_clip, _text_width, _llava_linears, IMAGE, True,
                                              vllm_params=_llava_clip_vllm),
    ("llava", "pixtral"): Kind(_llava_pixtral, _text_width, _llava_pixtral_linears, IMAGE, True,
                               vllm_params=_llava_pixtral_vllm),
    ("paligemma", "siglip_vision_model"): Kind(_paligemma, _projection_width, _paligemma_linears, IMAGE, True),
    ("idefics3", "idefics3_vision"): Kind(_idefics3, _text_width, _idefics3_linears, IMAGE, True),
    ("smolvlm", "smolvlm_vision"): Kind(_idefics3, _text_width, _idefics3_linears, IMAGE, True),
    ("mistral3", "pixtral"): Kind(_pixtral, _text_width, _pixtral_linears, IMAGE, True),
    ("llama4", "llama4_vision_model"): Kind(_llama4, _text_width, _llama4_linears, IMAGE, True,
                                            text_class="Llama4ForCausalLM", encoder_dp=True),
}
# Wrappers that build their vision sub-config by the dict's own model_type (``SubConfigSpec`` with
# AutoConfig), and the type they default to; the others build one fixed class, whatever the dict
# names (Qwen3-VL-30B-A3B's says qwen3_vl_moe).
AUTO_KIND = {"llava": "clip_vision_model", "llava_next": "clip_vision_model", "mistral3": "pixtral",
             "paligemma": "siglip_vision_model"}
FIXED_KIND = {model_type: kind for model_type, kind in TOWERS if model_type not in AUTO_KIND}


def vision_tower(raw: dict[str, Any], text_hidden: int) -> tuple[Tower | None, str | None]:
    """(the vision tower and its projector, a note when a tower — or an audio tower — is not counted)."""
    model_type = raw.get("model_type")
    vision = raw.get("vision_config")
    if vision is None and (model_type in FIXED_KIND or model_type in AUTO_KIND):   # transformers builds the default
        vision = absent_sub_config(model_type, "vision_config")
    if not isinstance(vision, dict):
        return None, None
    kind = FIXED_KIND.get(model_type) or vision.get("model_type") or AUTO_KIND.get(model_type)
    known = TOWERS.get((model_type, kind))
    if known is None:
        return None, (f"vision tower ({kind or 'unknown type'}) not counted: vLLM and the ForConditionalGeneration "
                      "class load it beside the language model, so the weights here are short by its size")
    v, outer = HfConfig(vision, kind), Outer(HfConfig(raw, str(model_type)), text_hidden)
    audio = raw.get("audio_config")
    untold = (f"audio tower ({audio.get('model_type') or 'unknown type'}) not counted: the weights here are short "
              "by its size") if isinstance(audio, dict) else None
    tower = Tower(known.params(v, outer), known.token_width(v, outer), known.modalities, known.tp_sharded,
                  known.linears(v, outer), known.wrapped, known.hf_tp_split, known.text_class, known.encoder_dp,
                  known.vllm_params(v, outer) if known.vllm_params else None)
    if min(tower.params, tower.vllm_params) < 0:                              # a negative size somewhere
        raise ValueError(f"vision_config sizes give the tower {tower.params:,} parameters")
    return tower, untold
