"""The long tail of model types, exactly: transformers builds the model from its config on the meta
device (shapes, no storage, no weights, no GPU) and the module tree says what is in it.

Used for a ``model_type`` that is not modelled by hand (``architectures.FAMILIES``), when the
``transformers`` extra is installed; imported only then, since importing transformers and torch
takes seconds. The config is made as ``AutoConfig.from_pretrained`` makes it from config.json
(``CONFIG_MAPPING[model_type].from_dict``), the class is the type's causal-LM class (or its
image-text-to-text one), built with ``_from_config`` under ``torch.device("meta")``. From the tree:

- the decoder layers: the ``nn.ModuleList`` as long as the text config's ``num_hidden_layers``;
- each layer's parameters by group (attention, MLP, routed experts — transformers 5 keeps them as
  3-D parameters — router, norms), module by module and tensor by tensor, as ZeRO-3 gathers them;
- each layer's linears (``nn.Linear`` and GPT-2's ``Conv1D``, what PEFT's LoRA can adapt), under
  vramlint's short names where they are the usual projections;
- the attention geometry from the config and the built attention module (heads, key-value heads,
  head size, sliding window, layers without attention: linear attention and state-space mixers);
- embeddings, lm_head (none when tied: it *is* the embedding parameter), the final norm, and what
  lies outside the layers (a vision tower, learned positions) as parameters loaded with the model.

Held to transformers' own ``num_parameters()`` for every causal-LM model type by ``dev/meta_types.py``
(tests/data/meta_types.json); what a hand-modelled family knows beyond this (which tensors the
kernels save for backward) is the block of a Llama.
"""

from __future__ import annotations

import re
from typing import Any

from vramlint.models.config import EXPERT_COUNTS, TOP_K
from vramlint.models.shape import FULL, LINEAR, MLA, SLIDING, Attention, Block, Layer, Mlp, ModelShape

ATTENTION, MLP, EXPERTS, ROUTER, SMALL = "attention", "mlp", "experts", "router", "small"
# a linear's own name -> vramlint's short name, by the part of the layer it sits in
ATTENTION_NAMES = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "out_proj": "o", "dense": "o",
                   "c_proj": "o", "wo": "o", "query_key_value": "qkv", "qkv_proj": "qkv", "c_attn": "qkv",
                   "Wqkv": "qkv", "qkv": "qkv", "query": "q", "key": "k", "value": "v"}
MLP_NAMES = {"gate_proj": "gate", "w1": "gate", "up_proj": "up", "w3": "up", "c_fc": "up", "fc1": "up",
             "fc_in": "up", "dense_h_to_4h": "up", "down_proj": "down", "w2": "down", "c_proj": "down",
             "fc2": "down", "fc_out": "down", "dense_4h_to_h": "down", "gate_up_proj": "gate_up"}
NORM_CLASS = re.compile(r"Norm(alization)?(\dd)?(Gated)?$")
MIXER_CLASS = re.compile(r"Mamba|Mixer|SSM|Ssm(?=[A-Z]|$)|Delta|Linear\w*Attention|Lightning|Conv|Rwkv|RWKV|"
                         r"Recurrent|Retention|LSTM|Lstm")
ATTENTION_ATTR = re.compile(r"^(self_)?attn$|^(self_)?attention$|self_attn|^attn_|^mixer$", re.I)
MLP_ATTR = re.compile(r"mlp|feed_forward|ffn|moe|^fc\d|^c_fc|ff$|^ff_|block_sparse_moe", re.I)


class Unbuildable(Exception):
    """transformers cannot build this config here: the message says why."""


def meta_shape(raw: dict[str, Any]) -> tuple[ModelShape | None, str]:
    """The model's shape as transformers builds it, or (None, why not)."""
    try:
        import torch
        import transformers
    except ImportError:
        return None, "transformers is not installed (pip install 'vramlint[transformers]')"
    try:
        config = _config(raw, transformers)
        model_class, build_config = _model_class(config, transformers)
        with torch.device("meta"), _quiet(transformers):
            model = model_class._from_config(build_config)
        return _shape(model, torch), ""
    except Unbuildable as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a model's own constructor may fail in any way
        return None, f"transformers {transformers.__version__} could not build it ({type(exc).__name__}: " \
                     f"{str(exc).splitlines()[0][:160] if str(exc) else ''})"


def _quiet(transformers):
    from transformers.utils import logging
    logging.set_verbosity_error()
    import contextlib
    import warnings
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def _config(raw: dict[str, Any], transformers):
    """A config.json dict as ``AutoConfig.from_pretrained`` reads it, offline."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    data = dict(raw)
    model_type = data.get("model_type")
    if model_type == "mistral" and "layer_types" in data:       # AutoConfig's own rule
        data["model_type"] = model_type = "ministral"
    if model_type not in CONFIG_MAPPING:
        code = " (it needs the repository's own code: auto_map)" if "auto_map" in data else ""
        raise Unbuildable(f"transformers {transformers.__version__} does not know model_type {model_type!r}{code}")
    return CONFIG_MAPPING[model_type].from_dict(data)


def _model_class(config, transformers):
    """The type's causal-LM class (or image-text-to-text), and the config it is built from: a
    text-only class of a composite model takes the text sub-config."""
    from transformers.models.auto import modeling_auto as auto
    model_type = config.model_type
    for table in (auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES):
        if model_type in table:
            cls = getattr(transformers, table[model_type])
            wanted = getattr(cls, "config_class", None)
            if wanted is not None and not isinstance(config, wanted):
                for key in getattr(config, "sub_configs", {}) or {}:
                    sub = getattr(config, key, None)
                    if isinstance(sub, wanted):
                        return cls, sub
            return cls, config
    raise Unbuildable(f"model_type {model_type!r} has no causal-LM class in transformers {transformers.__version__}")


def _value(config, *names: str, default: Any = None) -> Any:
    """The first of ``names`` the config has (some configs refuse a global read of a per-layer value)."""
    for name in names:
        try:
            value = getattr(config, name, None)
        except Exception:  # noqa: BLE001 - e.g. AmbiguousGlobalPerLayerAttributeError
            value = None
        if value is not None:
            return value
    return default


def _decoder_layers(model, torch, count: int | None):
    lists = [(name, module) for name, module in model.named_modules()
             if isinstance(module, torch.nn.ModuleList) and len(module)]
    numel = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    matching = [(n, m) for n, m in lists if count and len(m) == count]
    pool = matching or lists
    if not pool:
        raise Unbuildable("no decoder layers found in the built model")
    vision = re.compile(r"vision|visual|image|vit|audio|encoder", re.I)
    return max(pool, key=lambda nm: (not vision.search(nm[0]), numel(nm[1])))


def _group(path: list[tuple[str, str]], parameter_dim: int) -> str:
    """A layer parameter's group from the modules on its path (attribute, class name)."""
    names = [attr for attr, _ in path]
    classes = [cls for _, cls in path]
    if any(a == "experts" or re.search(r"Experts?$", c) for a, c in path) and parameter_dim >= 2:
        return EXPERTS
    if any(re.search(r"router|^gate$|gating", a, re.I) or "Router" in c for a, c in path) and \
            any(re.search(r"moe|sparse|router", c, re.I) for c in classes) and parameter_dim >= 2:
        return ROUTER
    if parameter_dim <= 1 or any(NORM_CLASS.search(c) for c in classes[-1:]):
        return SMALL
    if any(ATTENTION_ATTR.search(a) or MIXER_CLASS.search(c) or re.search(r"Attention|Attn", c) for a, c in path):
        return ATTENTION
    if any(MLP_ATTR.search(a) or re.search(r"MLP|Mlp|FeedForward|MoE|Moe|FFN", c) for a, c in path) or \
            "shared_expert" in " ".join(names):
        return MLP
    return SMALL


def _walk(layer, torch, seen: set[int]):
    """(groups, sizes of its direct parameters) per module of a layer, in order, and its linears
    (short name, d_in, d_out, group). A parameter another layer holds already (zamba's shared
    blocks) is counted once, where it first appears: ``seen`` holds their ids."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:              # pragma: no cover - transformers always has it
        Conv1D = ()
    modules, linears = [], []
    for name, module in layer.named_modules():
        path, node = [], layer
        for part in name.split(".") if name else []:
            node = node[int(part)] if part.isdigit() else getattr(node, part)
            path.append((part, type(node).__name__))
        own = [p for _, p in module.named_parameters(recurse=False) if id(p) not in seen]
        seen.update(id(p) for p in own)
        groups = [_group(path, p.dim()) for p in own]
        if own:
            modules.append((groups, [p.numel() for p in own]))
        if isinstance(module, (torch.nn.Linear, Conv1D)) and own:
            d_in, d_out = ((module.in_features, module.out_features) if isinstance(module, torch.nn.Linear)
                           else tuple(module.weight.shape))
            leaf = name.rsplit(".", 1)[-1]
            group = groups[0]
            short = (ATTENTION_NAMES if group == ATTENTION else MLP_NAMES).get(leaf, leaf)
            linears.append((short, d_in, d_out, group))
    return modules, linears


def _attention(config, layer, index: int, linears) -> Attention:
    heads = _value(config, "num_attention_heads", "n_head", default=1)
    kv = _value(config, "num_key_value_heads", default=heads)
    head_dim = _value(config, "head_dim") or (_value(config, "hidden_size", default=0) // max(heads, 1))
    kinds = _value(config, "layer_types")
    kind = kinds[index] if isinstance(kinds, (list, tuple)) and index < len(kinds) else None
    has_attention = any(group == ATTENTION and name in ("q", "k", "v", "qkv") for name, *_, group in linears)
    if not has_attention or (kind and ("linear" in str(kind) or "mamba" in str(kind) or "conv" in str(kind))):
        return Attention(LINEAR, heads, kv, head_dim)
    if _value(config, "kv_lora_rank"):
        rope = _value(config, "qk_rope_head_dim", default=0)
        return Attention(MLA, heads, heads, _value(config, "qk_nope_head_dim", default=head_dim) + rope,
                         kv_latent_dim=_value(config, "kv_lora_rank") + rope,
                         v_head_dim=_value(config, "v_head_dim", default=head_dim),
                         q_latent_dim=_value(config, "q_lora_rank") or 0, rope_dim=rope)
    window = _value(config, "sliding_window")
    sliding = window and (("sliding" in str(kind)) if kind else _value(config, "use_sliding_window", default=True))
    return Attention(SLIDING if sliding else FULL, heads, kv, head_dim, int(window) if sliding else None)


def _mlp(config, linears, sizes: dict[str, int], hidden: int) -> Mlp:
    experts = next((v for k in EXPERT_COUNTS if isinstance(v := getattr(config, k, None), int) and v > 1), 0)
    names = {name for name, *_ in linears}
    width = next((d_out for name, _, d_out, _ in linears if name in ("gate", "up")), 0) or \
        next((d_out // 2 for name, _, d_out, _ in linears if name == "gate_up"), 0) or \
        _value(config, "intermediate_size", default=4 * hidden)
    if sizes.get(EXPERTS) and experts:
        top_k = _value(config, *TOP_K, default=2)
        per = _value(config, "moe_intermediate_size", "expert_intermediate_size") or \
            sizes[EXPERTS] // (experts * 3 * hidden)
        return Mlp("moe", int(per), experts, int(top_k))
    return Mlp("gated" if {"gate", "gate_up"} & names else "plain", int(width))


def _shape(model, torch) -> ModelShape:
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    hidden = _value(text, "hidden_size", "n_embd", "d_model")
    name, layers_list = _decoder_layers(model, torch, _value(text, "num_hidden_layers", "n_layer", "num_layers"))
    layers, shared = [], set()
    for index, layer in enumerate(layers_list):
        modules, linears = _walk(layer, torch, shared)
        flat_modules = tuple((groups[0] if len(set(groups)) == 1 else SMALL, sum(sizes)) for groups, sizes in modules)
        tensors = tuple((g, s) for groups, sizes in modules for g, s in zip(groups, sizes))
        sizes: dict[str, int] = {}
        for group, size in tensors:
            sizes[group] = sizes.get(group, 0) + size
        attention = _attention(text, layer, index, linears)
        layers.append(Layer(attention, _mlp(text, linears, sizes, hidden), flat_modules, tensors,
                            linear_table=tuple((short, d_in, d_out, 1) for short, d_in, d_out, _ in linears)))
    inside = {id(p) for p in layers_list.parameters()}
    embedding = model.get_input_embeddings()
    head = model.get_output_embeddings()
    embedded = {id(p): p.numel() for p in embedding.parameters()} if embedding is not None else {}
    headed = {id(p): p.numel() for p in head.parameters()} if head is not None else {}
    embed = sum(embedded.values())
    head_params = sum(n for key, n in headed.items() if key not in embedded)   # a tied head is the embedding
    seen = inside | set(embedded) | set(headed)
    rest = [(n, p) for n, p in model.named_parameters() if id(p) not in seen]
    final_norm = sum(p.numel() for n, p in rest if p.dim() == 1 and re.search(r"norm|ln_f", n, re.I)
                     and not re.search(r"vision|visual|image|audio", n, re.I))
    extra = sum(p.numel() for _, p in rest) - final_norm
    norm = "layer" if any(isinstance(m, torch.nn.LayerNorm) for m in layers_list[0].modules()) else "rms"
    names = {short for short, *_ in layers[0].linear_table} if layers else set()
    block = Block(norm=norm, fused_qkv="qkv" in names, fused_gate_up="gate_up" in names)
    notes = (f"built by transformers {__import__('transformers').__version__} on the meta device "
             f"({type(model).__name__}, {len(layers)} layers at {name})",)
    if extra:
        notes += (f"{extra:,} parameters outside the decoder layers (a vision tower, learned positions, ...) are "
                  "counted as weights",)
    return ModelShape(hidden, _value(text, "vocab_size"), tuple(layers), embed, head_params, final_norm,
                      _value(text, "max_position_embeddings", "n_positions"), architecture=type(model).__name__,
                      extra_params=extra, block=block, family=str(config.model_type), notes=notes)
