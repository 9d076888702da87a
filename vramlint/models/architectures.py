"""One builder per architecture family: config keys in, the modules of each layer out.

Each builder lists a layer's modules the way transformers builds them (``nn.Linear`` weights
and biases, norms, fused expert tensors), so the sum is exactly ``model.num_parameters()`` and
the largest single module is what DeepSpeed's ZeRO-3 estimator calls the largest layer. The
expected counts come from transformers itself (``dev/param_counts.py``) and are checked for every
config in the corpus and every family's default config in ``tests/test_model_shapes.py``.

Source for every layout: ``transformers/models/<type>/modeling_<type>.py`` (transformers 5.x).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from vramlint.models.config import HfConfig
from vramlint.models.shape import (CHUNKED, FULL, LINEAR, MLA, NONE, SLIDING, Attention, Block, Layer, Mlp,
                                   ModelShape, Ssm)


@dataclass(frozen=True)
class Module:
    """One module's own parameters and the group they belong to (see ``shape.Params``)."""

    name: str
    group: str
    params: int
    tensors: tuple[int, ...] = ()     # its parameter tensors when more than one (weight, bias, ...)

    @property
    def parts(self) -> tuple[int, ...]:
        return self.tensors or (self.params,)


def linear(name: str, group: str, n_in: int, n_out: int, bias: bool = False) -> Module:
    return Module(name, group, n_in * n_out + (n_out if bias else 0), (n_in * n_out, n_out) if bias else ())


def norm(name: str, size: int, bias: bool = False) -> Module:
    """RMSNorm holds a weight; LayerNorm a weight and a bias."""
    return Module(name, "small", size * (2 if bias else 1), (size, size) if bias else ())


def layer(attention: Attention, mlp: Mlp, modules: list[Module],
          attention_linears: tuple[tuple[str, int, int], ...] = (),
          other_linears: tuple[tuple[str, int, int], ...] = ()) -> Layer:
    return Layer(attention, mlp, tuple((m.group, m.params) for m in modules),
                 tuple((m.group, size) for m in modules for size in m.parts), attention_linears, other_linears)


# ---------------------------------------------------------------------------------------------
# Building blocks shared by the families


def attention_projections(h: int, nh: int, nkv: int, hd: int, *, qkv_bias: bool = False,
                          o_bias: bool = False, q_factor: int = 1, k_eq_v: bool = False) -> list[Module]:
    """q, k, v, o as separate linears; ``q_factor`` 2 for gated attention (qwen3_next)."""
    modules = [linear("q_proj", "attention", h, nh * hd * q_factor, qkv_bias),
               linear("k_proj", "attention", h, nkv * hd, qkv_bias)]
    if not k_eq_v:
        modules.append(linear("v_proj", "attention", h, nkv * hd, qkv_bias))
    modules.append(linear("o_proj", "attention", nh * hd, h, o_bias))
    return modules


def gated_mlp(h: int, width: int, name: str = "mlp", bias: bool = False) -> list[Module]:
    """SwiGLU/GeGLU: gate, up and down projections (3·h·width)."""
    return [linear(f"{name}.gate_proj", "mlp", h, width, bias), linear(f"{name}.up_proj", "mlp", h, width, bias),
            linear(f"{name}.down_proj", "mlp", width, h, bias)]


def plain_mlp(h: int, width: int, bias: bool, name: str = "mlp") -> list[Module]:
    """GELU MLP: up and down projections (2·h·width)."""
    return [linear(f"{name}.up", "mlp", h, width, bias), linear(f"{name}.down", "mlp", width, h, bias)]


def experts(h: int, width: int, count: int, bias: bool = False, gated: bool = True) -> Module:
    """Routed experts as transformers 5 stores them: one module with fused 3-D gate_up and down
    tensors (E·h·2w + E·w·h), so ZeRO-3 gathers all experts of a layer at once; plain (not gated)
    experts have an up projection of w in place of gate_up (E·h·w + E·w·h)."""
    up = 2 * width if gated else width
    gate_up, down = count * h * up, count * width * h
    tensors = (gate_up, count * up, down, count * h) if bias else (gate_up, down)
    return Module("experts", "experts", sum(tensors), tensors)


def gated_linear_unit(c: HfConfig) -> bool:
    """Whether the MLPs are gated: Megatron's TransformerConfig key, in the configs readers/megatron.py
    writes for its GPT (no Hugging Face config states it; they are gated): false makes the dense
    MLPs, the routed and the shared experts plain up / down projections (GELU)."""
    return c.flag("gated_linear_unit", default=True)


def window_of(c: HfConfig) -> int | None:
    value = c.get("sliding_window")
    return int(value) if value else None


def layer_types(c: HfConfig, default: Callable[[int], str]) -> list[str]:
    """``layer_types`` from the file when it has them, else the family's pattern."""
    count = c.int("num_hidden_layers")
    given = c.raw.get("layer_types")
    if isinstance(given, list) and len(given) == count:
        return [str(t) for t in given]
    return [default(i) for i in range(count)]


def kind_of(layer_type: str) -> str:
    return {"sliding_attention": SLIDING, "chunked_attention": CHUNKED,
            "linear_attention": LINEAR}.get(layer_type, FULL)


def embeddings(c: HfConfig, h: int, tie_default: bool | None = None) -> tuple[int, int, int]:
    """(vocab, embedding params, lm_head params); the head is shared when embeddings are tied."""
    vocab = c.int("vocab_size")
    tied = c.flag("tie_word_embeddings", default=bool(tie_default))
    return vocab, vocab * h, 0 if tied else vocab * h


def heads(c: HfConfig) -> tuple[int, int, int, int]:
    """(hidden, heads, kv heads, head_dim): ``head_dim`` explicit or hidden / heads."""
    h = c.int("hidden_size")
    nh = c.int("num_attention_heads")
    nkv = c.opt_int("num_key_value_heads") or nh
    hd = c.opt_int("head_dim") or h // nh
    return h, nh, nkv, hd


def decoder(c: HfConfig, layers: list[Layer], h: int, *, final_norm: int | None = None,
            positions: int = 0, tie_default: bool | None = None, block: Block = Block(),
            embedding_dropout: bool = False) -> ModelShape:
    vocab, embed, head = embeddings(c, h, tie_default)
    return ModelShape(h, vocab, tuple(layers), embed + positions, head, h if final_norm is None else final_norm,
                      c.opt_int("max_position_embeddings", "n_positions"), block=block,
                      embedding_dropout=embedding_dropout)


def dropout_on(c: HfConfig, *keys: str) -> bool:
    return any((c.get(key) or 0) > 0 for key in keys)


# ---------------------------------------------------------------------------------------------
# Llama-like families: separate q/k/v/o, gated MLP, RMSNorm


def llama_like(c: HfConfig, *, qkv_bias: bool | None = None, o_bias: bool | None = None,
               qk_norm: str | None = None, norms: int = 2, types: Callable[[int], str] | None = None,
               moe: Callable[[int, int], tuple[Mlp, list[Module]] | None] | None = None,
               block: Block | None = None) -> ModelShape:
    """The decoder most families share. ``qk_norm``: "head" (hd weights, qwen3/gemma3) or "full"
    (projection-sized, olmo2). ``moe(i, h)`` returns the MoE block of layer i or None if dense."""
    h, nh, nkv, hd = heads(c)
    bias = c.flag("attention_bias")
    qkv_bias = bias if qkv_bias is None else qkv_bias
    o_bias = bias if o_bias is None else o_bias
    window = window_of(c)
    kinds = layer_types(c, types or (lambda i: "sliding_attention" if window else "full_attention"))
    layers = []
    for i, layer_type in enumerate(kinds):
        kind = kind_of(layer_type)
        modules = attention_projections(h, nh, nkv, hd, qkv_bias=qkv_bias, o_bias=o_bias)
        if qk_norm == "head":
            modules += [norm("q_norm", hd), norm("k_norm", hd)]
        elif qk_norm == "full":
            modules += [norm("q_norm", nh * hd), norm("k_norm", nkv * hd)]
        sparse = moe(i, h) if moe else None
        if sparse:
            mlp, mlp_modules = sparse
        elif gated_linear_unit(c):
            width = c.int("intermediate_size")
            mlp, mlp_modules = Mlp("gated", width), gated_mlp(h, width, bias=c.flag("mlp_bias"))
        else:
            width = c.int("intermediate_size")
            mlp, mlp_modules = Mlp("plain", width), plain_mlp(h, width, c.flag("mlp_bias"))
        modules += mlp_modules + [norm(f"norm{n}", h) for n in range(norms)]
        attn = Attention(kind, nh, nkv, hd, window if kind == SLIDING else None)
        layers.append(layer(attn, mlp, modules))
    return decoder(c, layers, h, block=block or Block(qk_norm=qk_norm is not None))


def routed(h: int, count: int, top_k: int, width: int, *, shared: int = 0, shared_gate: bool = False,
           router_bias: bool = False, expert_bias: bool = False,
           peft_converted: bool = False, gated: bool = True) -> tuple[Mlp, list[Module]]:
    """A mixture-of-experts block: router, fused experts, optional shared expert(s).
    ``peft_converted``: the family is in transformers' v4 -> v5 conversion list that PEFT reads
    (``_MODEL_TO_CONVERSION_PATTERN``, plus mixtral), so LoRA targets reach its experts.
    ``gated``: False for plain up / down experts (``gated_linear_unit``)."""
    modules = [linear("router", "router", h, count, router_bias), experts(h, width, count, expert_bias, gated)]
    if shared:
        modules += gated_mlp(h, shared, "shared_expert") if gated else plain_mlp(h, shared, False, "shared_expert")
    if shared_gate:
        modules.append(linear("shared_expert_gate", "router", h, 1))
    return Mlp("moe", width, count, top_k, shared, shared_gate=shared_gate, peft_converted=peft_converted,
               gated_experts=gated), modules


def sparse_step(c: HfConfig, *count_keys: str) -> Callable[[int], bool]:
    """Qwen MoE placement: layer i is MoE unless in ``mlp_only_layers``, every
    ``decoder_sparse_step``-th layer (``(i + 1) % step == 0``)."""
    only_dense = set(c.get("mlp_only_layers") or [])
    step = c.int("decoder_sparse_step", default=1)
    count = c.opt_int(*count_keys) or 0
    return lambda i: i not in only_dense and count > 0 and (i + 1) % step == 0


def llama(c: HfConfig) -> ModelShape:
    return llama_like(c)


def mistral(c: HfConfig) -> ModelShape:
    return llama_like(c, qkv_bias=False, o_bias=False)


def mixtral(c: HfConfig) -> ModelShape:
    def moe(i: int, h: int):
        return routed(h, c.int("num_local_experts"), c.int("num_experts_per_tok"), c.int("intermediate_size"),
                      peft_converted=True)
    return llama_like(c, qkv_bias=False, o_bias=False, moe=moe)


def qwen_window(c: HfConfig) -> Callable[[int], str]:
    """Qwen2/3 ship ``sliding_window`` but use it only with ``use_sliding_window``, and then only
    from layer ``max_window_layers`` on (transformers ``Qwen2Config``)."""
    use = c.flag("use_sliding_window") and window_of(c)
    first = c.opt_int("max_window_layers") or 0
    return lambda i: "sliding_attention" if use and i >= first else "full_attention"


def qwen2(c: HfConfig) -> ModelShape:
    return llama_like(c, qkv_bias=True, o_bias=False, types=qwen_window(c))


def qwen2_moe(c: HfConfig) -> ModelShape:
    is_moe = sparse_step(c, "num_experts")

    def moe(i: int, h: int):
        if not is_moe(i):
            return None
        return routed(h, c.int("num_experts"), c.int("num_experts_per_tok"), c.int("moe_intermediate_size"),
                      shared=c.int("shared_expert_intermediate_size"), shared_gate=True, gated=gated_linear_unit(c))
    qkv = c.flag("qkv_bias", default=True)
    return llama_like(c, qkv_bias=qkv, o_bias=False, types=qwen_window(c), moe=moe)


def qwen3(c: HfConfig) -> ModelShape:
    return llama_like(c, qk_norm="head", types=qwen_window(c))


def qwen3_moe(c: HfConfig) -> ModelShape:
    """transformers 5 writes ``num_experts`` as ``num_local_experts`` (its ``attribute_map``)."""
    experts = ("num_experts", "num_local_experts")
    is_moe = sparse_step(c, *experts)

    def moe(i: int, h: int):
        if not is_moe(i):
            return None
        return routed(h, c.int(*experts), c.int("num_experts_per_tok"), c.int("moe_intermediate_size"),
                      peft_converted=True, gated=gated_linear_unit(c))
    return llama_like(c, qk_norm="head", types=qwen_window(c), moe=moe)


def qwen3_next(c: HfConfig) -> ModelShape:
    """Hybrid: every ``full_attention_interval``-th layer is gated full attention (q_proj twice as
    wide, per-head q/k norms); the others are Gated DeltaNet linear attention with a fixed state."""
    h, nh, nkv, hd = heads(c)
    interval = c.int("full_attention_interval", default=4)
    kinds = layer_types(c, lambda i: "full_attention" if (i + 1) % interval == 0 else "linear_attention")
    is_moe = sparse_step(c, "num_experts")
    nk, dk = c.int("linear_num_key_heads"), c.int("linear_key_head_dim")
    nv, dv = c.int("linear_num_value_heads"), c.int("linear_value_head_dim")
    conv = c.int("linear_conv_kernel_dim")
    layers = []
    for i, layer_type in enumerate(kinds):
        if kind_of(layer_type) == LINEAR:
            conv_dim = 2 * nk * dk + nv * dv
            linears = (("in_proj_qkvz", h, 2 * nk * dk + 2 * nv * dv), ("in_proj_ba", h, 2 * nv),
                       ("out", nv * dv, h))
            modules = [linear("in_proj_qkvz", "attention", h, 2 * nk * dk + 2 * nv * dv),
                       linear("in_proj_ba", "attention", h, 2 * nv),
                       Module("conv1d", "attention", conv_dim * conv),
                       Module("dt_bias+A_log", "small", 2 * nv), norm("norm", dv),
                       linear("out_proj", "attention", nv * dv, h)]
            attn = Attention(LINEAR, nv, nk, dk)
        else:
            linears = (("q", h, 2 * nh * hd), ("k", h, nkv * hd), ("v", h, nkv * hd), ("o", nh * hd, h))
            modules = attention_projections(h, nh, nkv, hd, q_factor=2) + [norm("q_norm", hd), norm("k_norm", hd)]
            attn = Attention(FULL, nh, nkv, hd)
        if is_moe(i):
            mlp, mlp_modules = routed(h, c.int("num_experts"), c.int("num_experts_per_tok"),
                                      c.int("moe_intermediate_size"),
                                      shared=c.int("shared_expert_intermediate_size"), shared_gate=True,
                                      peft_converted=True)
        else:
            mlp, mlp_modules = Mlp("gated", c.int("intermediate_size")), gated_mlp(h, c.int("intermediate_size"))
        layers.append(layer(attn, mlp, modules + mlp_modules + [norm("input_norm", h), norm("post_norm", h)],
                            linears))
    return decoder(c, layers, h, block=Block(qk_norm=True, rope_cat=True))


def gemma(c: HfConfig) -> ModelShape:
    return llama_like(c, block=Block(norm="fp32"))


def gemma2(c: HfConfig) -> ModelShape:
    """Four norms per block; even layers slide (transformers: sliding if ``(i + 1) % 2``)."""
    softcap = bool(c.get("final_logit_softcapping"))
    return llama_like(c, norms=4, types=lambda i: "sliding_attention" if (i + 1) % 2 else "full_attention",
                      block=Block(norm="fp32", post_norms=2, logit_softcap=softcap,
                                  score_softcap=bool(c.get("attn_logit_softcapping"))))


def gemma3_text(c: HfConfig) -> ModelShape:
    """Per-head q/k norms, four norms per block, ``sliding_window_pattern`` - 1 of every
    ``sliding_window_pattern`` layers slide (transformers ``Gemma3TextConfig``)."""
    pattern = c.int("sliding_window_pattern", "_sliding_window_pattern", default=6)
    return llama_like(c, qk_norm="head", norms=4,
                      types=lambda i: "sliding_attention" if (i + 1) % pattern else "full_attention",
                      block=Block(norm="fp32", post_norms=2, qk_norm=True,
                                  logit_softcap=bool(c.get("final_logit_softcapping"))))


def olmo2(c: HfConfig) -> ModelShape:
    """q/k norms over the whole projection; post-attention and post-feedforward norms only;
    ``Olmo2RMSNorm`` multiplies by its weight in fp32 and casts the product."""
    return llama_like(c, qk_norm="full", block=Block(norm="fp32", pre_norms=0, post_norms=2, raw_inputs=2,
                                                     qk_norm=True))


def phi3(c: HfConfig) -> ModelShape:
    """Fused qkv_proj and gate_up_proj; RoPE ends in torch.cat (``partial_rotary_factor``); every
    layer slides when ``sliding_window`` is set."""
    h, nh, nkv, hd = heads(c)
    width = c.int("intermediate_size")
    window = window_of(c)
    layers = []
    for _ in range(c.int("num_hidden_layers")):
        modules = [linear("qkv_proj", "attention", h, (nh + 2 * nkv) * hd),
                   linear("o_proj", "attention", nh * hd, h),
                   linear("gate_up_proj", "mlp", h, 2 * width), linear("down_proj", "mlp", width, h),
                   norm("input_norm", h), norm("post_norm", h)]
        attn = Attention(SLIDING if window else FULL, nh, nkv, hd, window)
        layers.append(layer(attn, Mlp("gated", width), modules))
    drops = 2 if dropout_on(c, "resid_pdrop") else 0
    return decoder(c, layers, h, block=Block(fused_qkv=True, fused_gate_up=True, rope_cat=True, dropout_masks=drops),
                   embedding_dropout=dropout_on(c, "embd_pdrop"))


def starcoder2(c: HfConfig) -> ModelShape:
    """Biased q/k/v/o, plain GELU MLP with biases, LayerNorms with bias."""
    h, nh, nkv, hd = heads(c)
    bias = c.flag("use_bias", default=True)
    width = c.int("intermediate_size")
    window = window_of(c)
    layers = []
    for _ in range(c.int("num_hidden_layers")):
        modules = attention_projections(h, nh, nkv, hd, qkv_bias=bias, o_bias=bias) + plain_mlp(h, width, bias)
        modules += [norm("input_norm", h, bias=True), norm("post_norm", h, bias=True)]
        attn = Attention(SLIDING if window else FULL, nh, nkv, hd, window)
        layers.append(layer(attn, Mlp("plain", width), modules))
    drops = 2 if dropout_on(c, "residual_dropout") else 0
    return decoder(c, layers, h, final_norm=2 * h, block=Block(norm="layer", dropout_masks=drops),
                   embedding_dropout=dropout_on(c, "embedding_dropout"))


def gpt_oss(c: HfConfig) -> ModelShape:
    """Biased attention with per-head sinks; 128-token sliding window on alternate layers; experts
    with biases, router with bias (transformers ``modeling_gpt_oss.py``)."""
    h, nh, nkv, hd = heads(c)
    window = window_of(c)
    count = c.int("num_local_experts", "num_experts")
    top_k = c.int("num_experts_per_tok", "experts_per_token")
    width = c.int("intermediate_size")
    kinds = layer_types(c, lambda i: "sliding_attention" if (i + 1) % 2 else "full_attention")
    layers = []
    for layer_type in kinds:
        kind = kind_of(layer_type)
        modules = attention_projections(h, nh, nkv, hd, qkv_bias=True, o_bias=True)
        modules.append(Module("sinks", "small", nh))
        mlp, mlp_modules = routed(h, count, top_k, width, router_bias=True, expert_bias=True)
        modules += mlp_modules + [norm("input_norm", h), norm("post_norm", h)]
        layers.append(layer(Attention(kind, nh, nkv, hd, window if kind == SLIDING else None), mlp, modules))
    return decoder(c, layers, h, block=Block(norm="fp32", rope_cat=True, attention_sinks=True, act="clamped_glu",
                                             default_attn="eager"))


def llama4_text(c: HfConfig) -> ModelShape:
    """MoE on ``moe_layers`` (default every ``interleave_moe_layer_step``-th), one shared expert
    of ``intermediate_size``; dense layers use ``intermediate_size_mlp``. RoPE layers use chunked
    local attention (``attention_chunk_size``); every ``no_rope_layer_interval``-th is global."""
    h, nh, nkv, hd = heads(c)
    count = c.int("num_hidden_layers")
    step = c.int("interleave_moe_layer_step", default=1)
    moe_layers = c.raw.get("moe_layers")
    moe_layers = set(moe_layers if isinstance(moe_layers, list) else range(step - 1, count, step))
    no_rope = c.raw.get("no_rope_layers")
    interval = c.int("no_rope_layer_interval", default=4)
    if not (isinstance(no_rope, list) and len(no_rope) == count):
        no_rope = [int((i + 1) % interval != 0) for i in range(count)]
    chunk = c.opt_int("attention_chunk_size")
    kinds = layer_types(c, lambda i: "chunked_attention" if no_rope[i] and chunk else "full_attention")
    width = c.int("intermediate_size")
    layers = []
    for i, layer_type in enumerate(kinds):
        kind = kind_of(layer_type)
        modules = attention_projections(h, nh, nkv, hd, qkv_bias=c.flag("attention_bias"),
                                        o_bias=c.flag("attention_bias"))
        if i in moe_layers:
            mlp, mlp_modules = routed(h, c.int("num_local_experts"), c.int("num_experts_per_tok"), width,
                                      shared=width)
            mlp = replace(mlp, linear_router=True)      # Llama4Router subclasses nn.Linear
        else:
            dense = c.int("intermediate_size_mlp")
            mlp, mlp_modules = Mlp("gated", dense), gated_mlp(h, dense)
        modules += mlp_modules + [norm("input_norm", h), norm("post_norm", h)]
        layers.append(layer(Attention(kind, nh, nkv, hd, chunk if kind == CHUNKED else None), mlp, modules))
    return decoder(c, layers, h)


def deepseek(c: HfConfig) -> ModelShape:
    """DeepSeek-V2/V3 (and Kimi-K2): multi-head latent attention, MoE with shared experts after
    ``first_k_dense_replace`` dense layers, every ``moe_layer_freq``-th layer. transformers leaves
    out the multi-token-prediction layer (``num_nextn_predict_layers``), and so does vramlint."""
    h = c.int("hidden_size")
    nh = c.int("num_attention_heads")
    q_lora = c.opt_int("q_lora_rank")
    kv_lora = c.int("kv_lora_rank")
    nope, rope, v_dim = c.int("qk_nope_head_dim"), c.int("qk_rope_head_dim"), c.int("v_head_dim")
    bias = c.flag("attention_bias")
    count = c.opt_int("n_routed_experts") or 0
    first_dense = c.int("first_k_dense_replace", default=0)
    freq = c.int("moe_layer_freq", default=1)
    layers = []
    for i in range(c.int("num_hidden_layers")):
        if q_lora:
            linears = (("q_a", h, q_lora), ("q_b", q_lora, nh * (nope + rope)))
            modules = [linear("q_a_proj", "attention", h, q_lora, bias), norm("q_a_layernorm", q_lora),
                       linear("q_b_proj", "attention", q_lora, nh * (nope + rope))]
        else:
            linears = (("q", h, nh * (nope + rope)),)
            modules = [linear("q_proj", "attention", h, nh * (nope + rope))]
        linears += (("kv_a_proj_with_mqa", h, kv_lora + rope), ("kv_b", kv_lora, nh * (nope + v_dim)),
                    ("o", nh * v_dim, h))
        modules += [linear("kv_a_proj_with_mqa", "attention", h, kv_lora + rope, bias),
                    norm("kv_a_layernorm", kv_lora),
                    linear("kv_b_proj", "attention", kv_lora, nh * (nope + v_dim)),
                    linear("o_proj", "attention", nh * v_dim, h, bias)]
        if count and i >= first_dense and i % freq == 0:
            moe_width = c.int("moe_intermediate_size")
            top_k = c.opt_int("num_experts_per_tok") or count   # unset (V2 class default): all
            mlp, mlp_modules = routed(h, count, top_k, moe_width,
                                      shared=moe_width * (c.opt_int("n_shared_experts") or 0), peft_converted=True,
                                      gated=gated_linear_unit(c))
            mlp = replace(mlp, router_fp32=True)
        elif gated_linear_unit(c):
            width = c.int("intermediate_size")
            mlp, mlp_modules = Mlp("gated", width), gated_mlp(h, width)
        else:                                   # Megatron's MLA without --swiglu: a plain GELU MLP
            width = c.int("intermediate_size")
            mlp, mlp_modules = Mlp("plain", width), plain_mlp(h, width, False)
        modules += mlp_modules + [norm("input_norm", h), norm("post_norm", h)]
        attn = Attention(MLA, nh, nh, nope + rope, kv_latent_dim=kv_lora + rope, v_head_dim=v_dim,
                         q_latent_dim=q_lora or 0, rope_dim=rope)
        layers.append(layer(attn, mlp, modules, linears))
    return decoder(c, layers, h)


# ---------------------------------------------------------------------------------------------
# GPT-style families: fused qkv, plain GELU MLP, LayerNorm with bias


def gpt2(c: HfConfig) -> ModelShape:
    """Conv1D c_attn (h -> 3h) and c_proj with biases, learned positions, tied lm_head."""
    h, nh = c.int("n_embd", "hidden_size"), c.int("n_head", "num_attention_heads")
    width = c.opt_int("n_inner") or 4 * h
    layers = []
    for _ in range(c.int("n_layer", "num_hidden_layers")):
        modules = [norm("ln_1", h, True), linear("c_attn", "attention", h, 3 * h, True),
                   linear("c_proj", "attention", h, h, True), norm("ln_2", h, True)] + plain_mlp(h, width, True)
        layers.append(layer(Attention(FULL, nh, nh, h // nh), Mlp("plain", width), modules))
    positions = c.int("n_positions", "max_position_embeddings") * h
    act = "gelu_new" if c.get("activation_function", default="gelu_new") == "gelu_new" else "native"
    block = Block(norm="layer", fused_qkv=True, rope=False, learned_positions=True, act=act,
                  attention_output_held=True, dropout_masks=2 if dropout_on(c, "resid_pdrop") else 0)
    return decoder(c, layers, h, final_norm=2 * h, positions=positions, tie_default=True, block=block,
                   embedding_dropout=dropout_on(c, "embd_pdrop"))


def gpt_bigcode(c: HfConfig) -> ModelShape:
    """StarCoder: GPT-2 layout with multi-query attention (one K/V head) when ``multi_query``."""
    h, nh = c.int("n_embd", "hidden_size"), c.int("n_head", "num_attention_heads")
    hd = h // nh
    nkv = 1 if c.flag("multi_query", default=True) else nh
    width = c.opt_int("n_inner") or 4 * h
    layers = []
    for _ in range(c.int("n_layer", "num_hidden_layers")):
        modules = [norm("ln_1", h, True), linear("c_attn", "attention", h, h + 2 * nkv * hd, True),
                   linear("c_proj", "attention", h, h, True), norm("ln_2", h, True)] + plain_mlp(h, width, True)
        layers.append(layer(Attention(FULL, nh, nkv, hd), Mlp("plain", width), modules))
    positions = c.int("n_positions", "max_position_embeddings") * h
    block = Block(norm="layer", fused_qkv=True, rope=False, learned_positions=True, attention_output_held=True,
                  dropout_masks=2 if dropout_on(c, "resid_pdrop") else 0)
    return decoder(c, layers, h, final_norm=2 * h, positions=positions, tie_default=True, block=block,
                   embedding_dropout=dropout_on(c, "embd_pdrop"))


def gpt_neox(c: HfConfig) -> ModelShape:
    """Pythia: fused query_key_value, partial rotary (RoPE ends in torch.cat), plain MLP, two
    LayerNorms that read the same input (``use_parallel_residual``), untied embed_out."""
    h, nh = c.int("hidden_size"), c.int("num_attention_heads")
    bias = c.flag("attention_bias", default=True)
    width = c.int("intermediate_size")
    layers = []
    for _ in range(c.int("num_hidden_layers")):
        modules = [norm("input_norm", h, True), norm("post_norm", h, True),
                   linear("query_key_value", "attention", h, 3 * h, bias),
                   linear("dense", "attention", h, h, bias)] + plain_mlp(h, width, True)
        layers.append(layer(Attention(FULL, nh, nh, h // nh), Mlp("plain", width), modules))
    drops = 2 if dropout_on(c, "hidden_dropout") else 0
    parallel = c.flag("use_parallel_residual", default=True)
    block = Block(norm="layer", fused_qkv=True, rope_cat=True, dropout_masks=drops, parallel_residual=parallel,
                  attention_output_held=parallel)
    return decoder(c, layers, h, final_norm=2 * h, block=block)


def falcon(c: HfConfig) -> ModelShape:
    """Falcon: fused query_key_value. ``new_decoder_architecture`` (40B/180B) has grouped KV heads
    (``num_kv_heads``) and two LayerNorms (ln_attn, ln_mlp); 7B is multi-query (one KV head) with
    one input LayerNorm for its parallel attention/MLP. ``bias`` switches every linear's bias."""
    h, nh = c.int("hidden_size", "n_embd"), c.int("num_attention_heads", "n_head")
    hd = h // nh
    bias = c.flag("bias")
    new = c.flag("new_decoder_architecture")
    if new:
        nkv = c.int("num_kv_heads", "n_head_kv", default=nh)
    else:
        nkv = 1 if c.flag("multi_query", default=True) else nh
    width = c.opt_int("ffn_hidden_size") or 4 * h
    if new:
        norms = 1 if c.get("num_ln_in_parallel_attn") == 1 else 2
    else:
        norms = 1 if c.flag("parallel_attn", default=True) else 2
    parallel = new or c.flag("parallel_attn", default=True)
    layers = []
    for _ in range(c.int("num_hidden_layers", "n_layer")):
        modules = [linear("query_key_value", "attention", h, (nh + 2 * nkv) * hd, bias),
                   linear("dense", "attention", h, h, bias)] + plain_mlp(h, width, bias)
        modules += [norm(f"ln{n}", h, True) for n in range(norms)]
        layers.append(layer(Attention(FULL, nh, nkv, hd), Mlp("plain", width), modules))
    return decoder(c, layers, h, final_norm=2 * h, tie_default=True,
                   block=Block(norm="layer", pre_norms=norms, fused_qkv=True, parallel_residual=parallel,
                               attention_output_held=parallel))


def gemma4_text(c: HfConfig) -> ModelShape:
    """Gemma 4: 5 sliding layers to 1 global (last layer always global); global layers use
    ``global_head_dim`` and, with ``attention_k_eq_v``, ``num_global_key_value_heads`` and no
    v_proj (K doubles as V). The last ``num_kv_shared_layers`` reuse earlier caches and hold no
    k/v weights. Optional per-layer input embeddings (``hidden_size_per_layer_input``: a gate and
    a projection per layer, a model-level projection) and a MoE block beside the dense MLP
    (``enable_moe_block``; its router's ``proj`` is an nn.Linear). Source: transformers
    ``modeling_gemma4.py``."""
    h, nh, nkv, hd = heads(c)
    count = c.int("num_hidden_layers")
    kinds = layer_types(c, lambda i: "sliding_attention" if (i + 1) % 6 else "full_attention")
    kinds[-1] = "full_attention"
    global_hd = c.int("global_head_dim", default=512)
    k_eq_v = c.flag("attention_k_eq_v")
    global_kv = c.opt_int("num_global_key_value_heads") if k_eq_v else None
    shared_from = count - c.int("num_kv_shared_layers", default=0)
    per_layer = c.int("hidden_size_per_layer_input", default=0)
    window = window_of(c)
    layers = []
    for i, layer_type in enumerate(kinds):
        kind = kind_of(layer_type)
        head_dim = hd if kind == SLIDING else global_hd
        kv_heads = (global_kv or nkv) if kind == FULL else nkv
        reuse = i >= shared_from
        shares = k_eq_v and kind == FULL
        kv = () if reuse else (("k", h, kv_heads * head_dim),) + (() if shares else (("v", h, kv_heads * head_dim),))
        linears = (("q", h, nh * head_dim), *kv, ("o", nh * head_dim, h))
        modules = [linear("q_proj", "attention", h, nh * head_dim, c.flag("attention_bias")),
                   linear("o_proj", "attention", nh * head_dim, h, c.flag("attention_bias")),
                   norm("q_norm", head_dim)]
        if not reuse:
            modules += [linear("k_proj", "attention", h, kv_heads * head_dim, c.flag("attention_bias")),
                        norm("k_norm", head_dim)]
            if not shares:
                modules.append(linear("v_proj", "attention", h, kv_heads * head_dim, c.flag("attention_bias")))
        width = c.int("intermediate_size") * (2 if c.flag("use_double_wide_mlp") and reuse else 1)
        modules += gated_mlp(h, width) + [norm(f"norm{n}", h) for n in range(4)]
        mlp = Mlp("gated", width)
        others = (("per_layer_input_gate", h, per_layer), ("per_layer_projection", per_layer, h)) if per_layer else ()
        if per_layer:
            modules += [linear("per_layer_input_gate", "mlp", h, per_layer),
                        linear("per_layer_projection", "mlp", per_layer, h), norm("post_per_layer_norm", h)]
        if c.flag("enable_moe_block"):
            experts_count = c.int("num_experts")
            moe_width = c.int("moe_intermediate_size", "expert_intermediate_size")
            modules += [linear("router.proj", "router", h, experts_count),
                        Module("router.scales", "small", h + experts_count),
                        experts(h, moe_width, experts_count)] + [norm(f"moe_norm{n}", h) for n in range(3)]
            mlp = Mlp("moe", moe_width, experts_count, c.int("top_k_experts"), shared_intermediate=width,
                      linear_router=True)
        attn = Attention(kind, nh, 0 if reuse else kv_heads, head_dim, window if kind == SLIDING else None,
                         shares_kv=shares)
        layers.append(layer(attn, mlp, modules, linears, others))
    dec = decoder(c, layers, h)
    if not per_layer:
        return dec
    table = c.int("vocab_size_per_layer_input") * count * per_layer
    projection = h * count * per_layer
    return replace(dec, extra_params=table + projection + per_layer, extra_largest=max(table, projection),
                   model_linears=(("per_layer_model_projection", h, count * per_layer),))


def mtp_depth(layers: tuple[Layer, ...], h: int, norm_bias: bool) -> tuple[Layer, ...]:
    """One Megatron multi-token-prediction depth (megatron/core/transformer/multi_token_prediction.py
    MultiTokenPredictionLayer, core_v0.19.0 :897-1050): its enorm and hnorm (the shifted tokens'
    embedding and the hidden states), eh_proj (a column-parallel 2h -> h, no bias) and its final
    norm, on the first of its decoder layers (GPT: the decoder's last layer's kind; a hybrid
    pattern's MTP symbols)."""
    extra = [norm("enorm", h, norm_bias), norm("hnorm", h, norm_bias), linear("eh_proj", "attention", 2 * h, h),
             norm("final_layernorm", h, norm_bias)]
    first = layers[0]
    mods = first.modules + tuple((m.group, m.params) for m in extra)
    tensors = first.parameter_tensors + tuple((m.group, size) for m in extra for size in m.parts)
    return (replace(first, modules=mods, tensors=tensors), *layers[1:])


# ---------------------------------------------------------------------------------------------
# Megatron-core's hybrid stack: the layers readers/megatron.py reads from --hybrid-layer-pattern


HYBRID_SYMBOLS = "M*-E"           # Mamba, self-attention, MLP, MoE (hybrid_layer_allocation.py Symbols)
NO_MLP, NO_MIXER = Mlp("none", 0), Attention(NONE, 0, 0, 0)


def megatron_hybrid(c: HfConfig) -> ModelShape:
    """Megatron-core's hybrid stack (Megatron-LM core_v0.19.0 megatron/core/models/hybrid/
    hybrid_layer_specs.py ``hybrid_stack_spec``): one layer a symbol of ``hybrid_layer_pattern``, each
    one sub-block whose norm is fused into its first linear (TELayerNormColumnParallelLinear: a
    LayerNorm's weight and bias, RMSNorm's weight alone):

    - ``M`` a Mamba-2 mixer (ssm/mamba_mixer.py): in_proj h -> z, x, B, C, dt and out_proj d_inner -> h
      without biases, the depthwise conv1d over x, B and C with its bias, dt_bias, A_log and D (a
      value a head) and the gated RMSNorm's d_inner weight: all split over TP (the norm fused into
      in_proj replicated);
    - ``*`` self-attention: the fused qkv and the output projection (biases with --add-bias-linear);
    - ``-`` an MLP (fc1 gated under --swiglu), ``E`` an MoE layer (TENorm, router, experts).

    Not Hugging Face's ``nemotron_h`` (its norms and fused layouts differ; it is built by transformers)."""
    h, ln_bias = c.int("hidden_size"), c.flag("norm_bias")
    inner = c.int("mamba_num_heads") * c.int("mamba_head_dim")
    ssm = Ssm(inner, c.int("mamba_num_heads"), c.int("mamba_num_groups"), c.int("mamba_state_dim"),
              c.int("mamba_conv", default=4))
    layers = _hybrid_layers(c, str(c.get("hybrid_layer_pattern")), h, ssm)
    depths = c.int("mtp_depths", default=0)
    mtp = mtp_depth(_hybrid_layers(c, str(c.get("mtp_pattern")), h, ssm), h, ln_bias) if depths else ()
    positions = c.int("learned_positions", default=0) * h
    shape = decoder(c, layers, h, final_norm=h * (2 if ln_bias else 1), positions=positions)
    return replace(shape, mtp=mtp, mtp_depths=depths)


def _hybrid_layers(c: HfConfig, pattern: str, h: int, ssm: Ssm) -> list[Layer]:
    """A hybrid pattern's layers, one a symbol (``megatron_hybrid``)."""
    nh, nkv, hd = heads(c)[1:]
    ln_bias, bias = c.flag("norm_bias"), c.flag("attention_bias")
    layers = []
    for symbol in pattern:
        modules = [norm("norm", h, ln_bias)]
        if symbol == "M":
            modules += [linear("in_proj", "attention", h, ssm.projection),
                        Module("conv1d", "attention", ssm.conv_channels * (ssm.conv + 1),
                               (ssm.conv_channels * ssm.conv, ssm.conv_channels)),
                        Module("dt_bias+A_log+D", "attention", 3 * ssm.heads, (ssm.heads,) * 3),
                        Module("mixer_norm", "attention", ssm.inner), linear("out_proj", "attention", ssm.inner, h)]
            layers.append(replace(layer(Attention(LINEAR, ssm.heads, ssm.groups, c.int("mamba_head_dim")), NO_MLP,
                                        modules), ssm=ssm))
        elif symbol == "*":
            modules += [linear("linear_qkv", "attention", h, (nh + 2 * nkv) * hd, bias),
                        linear("linear_proj", "attention", nh * hd, h, bias)]
            layers.append(layer(Attention(FULL, nh, nkv, hd), NO_MLP, modules))
        elif symbol == "E":
            mlp, experts_ = routed(h, c.int("num_experts"), c.int("num_experts_per_tok"),
                                   c.int("moe_intermediate_size"), shared=c.int("shared_expert_intermediate_size",
                                                                                  default=0),
                                   gated=gated_linear_unit(c))
            layers.append(layer(NO_MIXER, mlp, modules + experts_))
        else:
            width = c.int("intermediate_size")
            gated = gated_linear_unit(c)
            modules += gated_mlp(h, width, bias=bias) if gated else plain_mlp(h, width, bias)
            layers.append(layer(NO_MIXER, Mlp("gated" if gated else "plain", width), modules))
    return layers


# The registry: model_type -> (builder, transformers defaults to fill from).
FAMILIES: dict[str, tuple[Callable[[HfConfig], ModelShape], str]] = {
    "llama": (llama, "llama"),
    "mistral": (mistral, "mistral"),
    "mixtral": (mixtral, "mixtral"),
    "qwen2": (qwen2, "qwen2"),
    "qwen2_moe": (qwen2_moe, "qwen2_moe"),
    "qwen3": (qwen3, "qwen3"),
    "qwen3_moe": (qwen3_moe, "qwen3_moe"),
    "qwen3_next": (qwen3_next, "qwen3_next"),
    "qwen3_vl_text": (qwen3, "qwen3_vl_text"),
    "qwen2_5_vl_text": (qwen2, "qwen2_5_vl_text"),
    "qwen2_vl_text": (qwen2, "qwen2_vl_text"),
    "qwen3_vl_moe_text": (qwen3_moe, "qwen3_vl_moe_text"),
    "gemma": (gemma, "gemma"),
    "gemma2": (gemma2, "gemma2"),
    "gemma3_text": (gemma3_text, "gemma3_text"),
    "phi3": (phi3, "phi3"),
    "gpt2": (gpt2, "gpt2"),
    "gpt_bigcode": (gpt_bigcode, "gpt_bigcode"),
    "gpt_neox": (gpt_neox, "gpt_neox"),
    "falcon": (falcon, "falcon"),
    "deepseek_v2": (deepseek, "deepseek_v2"),
    "deepseek_v3": (deepseek, "deepseek_v3"),
    "olmo2": (olmo2, "olmo2"),
    "starcoder2": (starcoder2, "starcoder2"),
    "gpt_oss": (gpt_oss, "gpt_oss"),
    "llama4_text": (llama4_text, "llama4_text"),
    "gemma4_text": (gemma4_text, "gemma4_text"),
    "megatron_hybrid": (megatron_hybrid, "megatron_hybrid"),     # readers/megatron.py's alone: no transformers type
}
