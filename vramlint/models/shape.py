"""What is in a model: layers, their attention and MLP, and the numbers derived from them.

A :class:`ModelShape` is built once from a HuggingFace ``config.json`` (see ``hfconfig``) and is
all the memory model needs to know about the network. Parameter counts are kept per layer and per
group (attention, dense MLP, routed experts, router, small tensors) because the groups behave
differently: quantization methods skip some of them, MoE routing activates a fraction of the
experts, and ZeRO-3 gathers one module at a time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property

# Attention kinds. "linear" layers (Gated DeltaNet, Mamba-like) keep a fixed-size state, no KV; "none": a
# layer with no token mixer of its own (Megatron hybrid's MLP-only and MoE-only layers).
FULL, SLIDING, CHUNKED, MLA, LINEAR, NONE = "full", "sliding", "chunked", "mla", "linear", "none"


@dataclass(frozen=True)
class Attention:
    """One layer's attention: what it costs in weights and what it adds to the KV cache."""

    kind: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    window: int | None = None      # sliding window or attention chunk, in tokens
    kv_latent_dim: int = 0         # MLA: kv_lora_rank + qk_rope_head_dim elements per token
    v_head_dim: int = 0            # MLA: value head size (transformers caches decompressed K and V)
    q_latent_dim: int = 0          # MLA: q_lora_rank (0: the query projected from the hidden states directly)
    rope_dim: int = 0              # MLA: qk_rope_head_dim, the rope key shared by the heads
    shares_kv: bool = False        # K doubles as V (gemma4 attention_k_eq_v): one tensor cached

    def kv_elements_per_token(self, engine: str = "vllm") -> int:
        """Elements one token adds to this layer's cache.

        Standard: 2 (K and V) x kv_heads x head_dim (docs/reference.md section 5). MLA in vLLM caches
        the compressed latent once (kv_lora_rank + qk_rope_head_dim, vLLM ``get_head_size``);
        transformers caches the decompressed K (nope + rope per head) and V per head instead.
        """
        if self.kind == LINEAR:
            return 0
        if self.kind == MLA:
            if engine == "vllm":
                return self.kv_latent_dim
            return self.num_heads * (self.head_dim + self.v_head_dim)
        return (1 if self.shares_kv else 2) * self.num_kv_heads * self.head_dim


@dataclass(frozen=True)
class Params:
    """Parameter counts of one layer, by the group that decides how they are stored and used."""

    attention: int = 0     # attention projection weights (q, k, v, o or their MLA/fused forms)
    mlp: int = 0           # dense MLP weights, including shared experts
    experts: int = 0       # routed expert weights, all experts
    router: int = 0        # router / gate weights
    small: int = 0         # norms, biases, sinks, scales: kept in 16 bit by every quantizer

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.experts + self.router + self.small

    def __add__(self, other: Params) -> Params:
        return Params(self.attention + other.attention, self.mlp + other.mlp,
                      self.experts + other.experts, self.router + other.router, self.small + other.small)


@dataclass(frozen=True)
class Mlp:
    """The feed-forward block: dense (gated or plain) or mixture-of-experts."""

    kind: str                      # "gated", "plain", "moe" or "none" (a layer without one: Megatron hybrid's)
    intermediate: int              # dense width, or one expert's width for MoE
    experts: int = 0
    experts_per_token: int = 0
    shared_intermediate: int = 0   # total width of always-on shared experts
    shared_gate: bool = False      # a sigmoid gate on the shared expert (qwen2_moe: a Linear(h, 1))
    linear_router: bool = False    # the router is an nn.Linear (llama4), which "all-linear" adapts
    router_fp32: bool = False      # the router runs on an fp32 copy of its input (deepseek's MoE gate)
    peft_converted: bool = False   # experts transformers 5 fused from v4 nn.Linear ones (mixtral, qwen3_moe,
                                   # qwen3_next, deepseek): PEFT maps LoRA targets onto them (router too)
    gated_experts: bool = True     # the experts' MLPs gated (gate and up); False: plain up / down (Megatron's GELU)


@dataclass(frozen=True)
class Ssm:
    """A Mamba-2 mixer's widths (Megatron-LM core_v0.19.0 megatron/core/ssm/mamba_mixer.py): ``inner``
    = heads x head_dim (d_inner, expand x hidden by default), B and C of ``state`` elements for each
    of ``groups``, a depthwise causal convolution of ``conv`` taps over x, B and C."""

    inner: int
    heads: int
    groups: int
    state: int
    conv: int = 4

    @property
    def projection(self) -> int:
        """in_proj's output a token: z and x (inner each), B and C (groups x state each), dt (one a head)."""
        return 2 * self.inner + 2 * self.groups * self.state + self.heads

    @property
    def conv_channels(self) -> int:
        """The channels the convolution runs over: x, B and C."""
        return self.inner + 2 * self.groups * self.state


@dataclass(frozen=True)
class Layer:
    """One decoder block: its attention, its MLP, and each module's own parameters by group."""

    attention: Attention
    mlp: Mlp
    modules: tuple[tuple[str, int], ...]    # (Params group, parameters) of each module, in order
    tensors: tuple[tuple[str, int], ...] = ()   # (Params group, elements) of each parameter tensor, in order
    attention_linears: tuple[tuple[str, int, int], ...] = ()   # (name, d_in, d_out) where the attention's
                                   # linears are not q, k, v, o of its head counts (MLA, Gated DeltaNet, gated q,
                                   # gemma4's layers without k/v)
    other_linears: tuple[tuple[str, int, int], ...] = ()   # linears outside attention and MLP (gemma4's
                                   # per-layer input gate and projection)
    linear_table: tuple[tuple[str, int, int, int], ...] = ()   # (short name, d_in, d_out, copies) of every
                                   # linear, where the module tree says them (``models/meta.py``)
    ssm: Ssm | None = None         # a Mamba-2 mixer in the attention's place (Megatron's hybrid stack)

    @property
    def parameter_tensors(self) -> tuple[tuple[str, int], ...]:
        """What the allocator sees: one block per parameter (a fused expert module holds two)."""
        return self.tensors or self.modules

    @cached_property
    def params(self) -> Params:
        sums = dict.fromkeys(("attention", "mlp", "experts", "router", "small"), 0)
        for group, size in self.modules:
            sums[group] += size
        return Params(**sums)

    @property
    def largest_module(self) -> int:
        """Largest single module's own parameters (what DeepSpeed calls a layer)."""
        return max(size for _, size in self.modules)

    def linears(self, hidden: int, block: Block) -> dict[str, tuple[int, int, int]]:
        """The linears an adapter (PEFT LoRA) can target, by short name: (d_in, d_out, copies) —
        an adapter pair r·(d_in + d_out) per copy. A fused projection (qkv, phi3's gate_up) is one
        linear and gets one adapter pair. Routed experts (``router``, ``experts_gate_up``,
        ``experts_down``, one copy per expert) only where PEFT converts the targets onto
        transformers 5's fused experts (``peft_converted``): its ParamWrapper gives the fused gate_up
        twice the rank (w1 and w3 were two targets), so 2·E copies; elsewhere "all-linear" reaches
        no 3-D expert parameter. Shared experts are plain linears (``shared_gate``, ...); which
        names an adapter reaches is ``memory.parts.adapters.lora_targets``'s business.
        ``attention_linears`` replaces q, k, v, o where the builder lists other ones (MLA,
        Gated DeltaNet, gated q). Checked against get_peft_model for every family's default config
        (tests/data/lora_counts.json)."""
        if self.linear_table:
            table: dict[str, tuple[int, int, int]] = {}
            for name, d_in, d_out, copies in self.linear_table:
                known = table.get(name)
                table[name] = (d_in, d_out, copies + (known[2] if known else 0))
            return table
        att, mlp = self.attention, self.mlp
        q, kv = att.num_heads * att.head_dim, att.num_kv_heads * att.head_dim
        if self.attention_linears:
            out = {name: (d_in, d_out, 1) for name, d_in, d_out in self.attention_linears}
        elif block.fused_qkv:
            out = {"qkv": (hidden, q + 2 * kv, 1), "o": (q, hidden, 1)}
        else:
            out = {"q": (hidden, q, 1), "k": (hidden, kv, 1), "v": (hidden, kv, 1), "o": (q, hidden, 1)}
        out |= {name: (d_in, d_out, 1) for name, d_in, d_out in self.other_linears}
        i = mlp.intermediate
        if mlp.kind == "moe":
            if mlp.peft_converted or mlp.linear_router:
                out["router"] = (hidden, mlp.experts, 1)
            if mlp.peft_converted:
                out |= {"experts_gate_up": (hidden, 2 * i, 2 * mlp.experts), "experts_down": (i, hidden, mlp.experts)}
            if mlp.shared_intermediate:
                shared = mlp.shared_intermediate
                out |= {"shared_gate": (hidden, shared, 1), "shared_up": (hidden, shared, 1),
                        "shared_down": (shared, hidden, 1)}
            if mlp.shared_gate:
                out["shared_expert_gate"] = (hidden, 1, 1)
            return out
        if block.fused_gate_up and mlp.kind == "gated":
            out["gate_up"] = (hidden, 2 * i, 1)
        else:
            if mlp.kind != "plain":
                out["gate"] = (hidden, i, 1)
            out["up"] = (hidden, i, 1)
        out["down"] = (i, hidden, 1)
        return out

    @property
    def active_params(self) -> int:
        """Parameters one token passes through: routed experts count k of E."""
        if not self.mlp.experts:
            return self.params.total
        routed = self.params.experts * self.mlp.experts_per_token // self.mlp.experts
        return self.params.total - self.params.experts + routed


@dataclass(frozen=True)
class Block:
    """How a decoder block computes, as far as the tensors it saves for backward go.

    Read by ``memory/parts/activations.py``; set by each family builder from the modeling code.
    """

    norm: str = "rms"              # "rms": HF RMSNorm (fp32 inside, weight * y); "fp32": the weight applied in
                                   # fp32 and the product cast (gemma's (1 + w), olmo2's w);
                                   # "layer": nn.LayerNorm
    pre_norms: int = 2             # norms whose output feeds linears (attention input, MLP input)
    post_norms: int = 0            # norms on a sublayer's output before the residual add (gemma2/3, olmo2)
    raw_inputs: int = 0            # sublayers that read the residual stream un-normed (olmo2)
    fused_qkv: bool = False        # one q/k/v projection whose output the v view keeps alive
    fused_gate_up: bool = False    # one gate_up projection whose output the chunk views keep alive (phi3)
    rope: bool = True              # rotary embedding rebuilds q and k as new tensors
    rope_cat: bool = False         # RoPE ends in torch.cat (partial rotary: gpt_neox, phi3, qwen3_next,
                                   # gpt_oss): q comes out head-major, so SDPA's output does too and
                                   # transpose(1, 2).contiguous() before o_proj copies it
    parallel_residual: bool = False  # attention and MLP both read the layer input (gpt_neox, falcon):
                                   # LayerNorms keep that one tensor once
    attention_output_held: bool = False  # the block's code names the attention output and holds it to
                                   # the end of the block (gpt2, gpt_bigcode ``attn_output``; parallel residuals)
    learned_positions: bool = False  # position embeddings added to the token embeddings (gpt2, gpt_bigcode)
    qk_norm: bool = False          # RMSNorm on q and k before RoPE (qwen3, gemma3, olmo2)
    act: str = "native"            # "native" (silu/gelu kernels save their input); "gelu_new": python
                                   # tanh-GELU (gpt2) that saves four I-sized tensors; "clamped_glu":
                                   # gpt-oss's clamped gate * sigmoid(alpha * gate) * (up + 1), five
    dropout_masks: int = 0         # dropout layers per block active in training (1-byte masks)
    logit_softcap: bool = False    # gemma2 final logit soft-capping keeps a tanh output
    score_softcap: bool = False    # gemma2 attention scores soft-capped under eager attention: tanh keeps its
                                   # output, 2 B a score (traced: transformers' and LitGPT's)
    attention_sinks: bool = False  # gpt-oss: eager softmax over the scores and a sink column, in 16 bit
    default_attn: str = "sdpa"     # transformers' kernel when none is asked for (gpt-oss: _supports_sdpa False)


@dataclass(frozen=True)
class Quantization:
    """How the checkpoint stores its weights, reduced to what decides bytes per parameter."""

    method: str                    # bitsandbytes-4bit, gptq, awq, fp8, mxfp4, compressed-tensors, ...
    bits: float                    # stored bits per quantized weight, scales included
    groups: frozenset[str]         # Params groups it quantizes ("attention", "mlp", "experts")
    detail: str = ""               # the formula, for the breakdown


@dataclass(frozen=True)
class Tower:
    """A multimodal checkpoint's vision tower and projector (``models/vision.py``), as far as memory
    goes: its parameters, the width of one image token's embedding as the language model receives
    it, the modalities vLLM builds it for, whether vLLM splits it over tensor-parallel ranks, and
    the linears PEFT's LoRA can adapt."""

    params: int
    token_width: int
    modalities: frozenset[str]
    tp_sharded: bool = True
    linears: tuple[tuple[str, int, int, int], ...] = ()   # (module name's tail, d_in, d_out, copies): what a
                                   # LoRA target list can reach (``memory.parts.adapters.tower_adapters``)
    wrapped: frozenset[str] = frozenset()   # names of modules that wrap an nn.Linear: PEFT refuses them
    hf_tp_split: frozenset[str] = frozenset()   # the linears transformers' tp_plan splits (the rest replicated)
    text_class: str = ""           # the text-only class AutoModelForCausalLM builds instead, if any (llama4's)
    encoder_dp: bool = False       # vLLM can replicate it per rank (``mm_encoder_tp_mode: data``)
    vllm_cut: int | None = None    # what vLLM builds of it, where that is less (LLaVA's CLIP, cut at the feature layer)

    @property
    def vllm_params(self) -> int:
        """The parameters vLLM builds: the whole tower, or the part it cuts it to."""
        return self.params if self.vllm_cut is None else self.vllm_cut


@dataclass(frozen=True)
class ModelShape:
    """The model as vramlint sees it: an architecture builder (``architectures``) lays out the
    layers, ``resolve.read_model`` adds the checkpoint's type, dtype, quantization and names."""

    hidden_size: int
    vocab_size: int
    layers: tuple[Layer, ...]
    embedding_params: int          # token embeddings (+ learned positions)
    head_params: int               # lm_head; 0 when tied to the embeddings
    final_norm_params: int
    max_position_embeddings: int | None
    model_type: str = ""           # set by hfconfig, with everything below the builders do not know
    dtype: str = "bfloat16"        # checkpoint dtype: float32, bfloat16, float16
    quantization: Quantization | None = None
    architecture: str | None = None
    read_as: str | None = None     # family used when model_type is remote-code or missing
    name: str | None = None
    notes: tuple[str, ...] = field(default=())
    extra_params: int = 0          # model-level tensors besides embeddings/head (gemma4 PLE)
    extra_largest: int = 0
    block: Block = field(default_factory=Block)
    embedding_dropout: bool = False
    tensor_parallel: int = 1       # > 1: the parameters one of that many tensor-parallel ranks holds
    rope_tables: tuple[tuple[int, int], ...] = ()   # (positions, rotary_dim) of each cos/sin table vLLM builds
    vision: Tower | None = None    # a multimodal checkpoint's vision tower + projector (not in params)
    model_linears: tuple[tuple[str, int, int], ...] = ()   # model-level linears besides lm_head (gemma4's
                                   # per_layer_model_projection), which "all-linear" adapts too
    family: str = ""               # the builder family it was read as (``models/tp_plans.py`` looks it up)
    resolved_by: str = ""          # where the config came from: path, catalog, cache, hub
    shape_by: str = "hand-modelled"   # how the layers were read: hand-modelled, transformers, generic
    mtp: tuple[Layer, ...] = ()    # one multi-token-prediction depth's layers (Megatron: its norms and eh_proj on the
    mtp_depths: int = 0            # first), built ``mtp_depths`` times after the decoder (architectures.mtp_depth)

    def tp_local(self, tp: int, split: frozenset[str]) -> ModelShape:
        """The parameters one tensor-parallel rank of the whole model holds: the groups in
        ``split`` divided ``tp`` ways (what the runtime's TP splits: ``models/tp_plans.py``), the
        rest whole on every rank, norms, biases and other small tensors among them. The widths
        stay (the activations' own division is ``activations.sublayer_tensors``'), so only the
        states and the parameter tensors the allocator sees change."""
        if tp <= 1 or self.tensor_parallel == tp:
            return self

        def cut(group: str, size: int) -> int:
            return -(-size // tp) if group in split else size

        def split_items(items: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
            return tuple((group, cut(group, size)) for group, size in items)

        def split_layers(layers: tuple[Layer, ...]) -> tuple[Layer, ...]:
            return tuple(replace(layer, modules=split_items(layer.modules), tensors=split_items(layer.tensors))
                         for layer in layers)

        return replace(self, layers=split_layers(self.layers), mtp=split_layers(self.mtp),
                       embedding_params=cut("embedding", self.embedding_params),
                       head_params=cut("head", self.head_params), extra_params=cut("extra", self.extra_params),
                       extra_largest=cut("extra", self.extra_largest), tensor_parallel=tp)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def as_value_model(self) -> ModelShape:
        """The model as a value model (an RL critic or reward model): its vocabulary head replaced by
        one output per hidden unit (verl's AutoModelForTokenClassification num_labels 1, OpenRLHF's
        value_head Linear(hidden, 1)); the head's size is what a gathered or sharded head counts,
        and no loss over the vocabulary is made (``Plan.loss`` none)."""
        return replace(self, head_params=self.hidden_size, name=f"{self.name or 'the model'} as a value model")

    @property
    def value_model_params(self) -> int:
        """A value model's parameters (``as_value_model``)."""
        return self.as_value_model().params

    @property
    def outside_layers(self) -> int:
        """Embeddings, lm_head, final norm and other model-level tensors."""
        return self.embedding_params + self.head_params + self.final_norm_params + self.extra_params

    @property
    def params(self) -> int:
        """Exactly ``model.num_parameters()`` of the transformers causal LM."""
        return self.outside_layers + sum(layer.params.total for layer in self.layers)

    @property
    def active_params(self) -> int:
        return self.outside_layers + sum(layer.active_params for layer in self.layers)

    @property
    def parameter_tensors(self) -> tuple[tuple[str, int], ...]:
        """(Params group, elements) of each parameter tensor, in the order the model creates them:
        what the allocator sees when the model is built and what DeepSpeed groups and partitions."""
        layers = [item for layer in self.layers for item in layer.parameter_tensors]
        model_level = [("extra", self.extra_params), ("small", self.final_norm_params), ("head", self.head_params)]
        return tuple((group, size) for group, size in [("embedding", self.embedding_params), *layers, *model_level]
                     if size)

    @property
    def tensor_sizes(self) -> tuple[int, ...]:
        return tuple(size for _, size in self.parameter_tensors)

    @property
    def layer_params(self) -> Params:
        total = Params()
        for layer in self.layers:
            total = total + layer.params
        return total

    @property
    def largest_layer_params(self) -> int:
        """The largest single module's own parameters, as DeepSpeed's ZeRO-3 estimator takes it
        (``max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())``):
        usually the embedding or lm_head, or a fused expert block in large MoE models."""
        token_embedding = -(-self.vocab_size * self.hidden_size // self.tensor_parallel)   # positions apart
        return max([token_embedding, self.head_params, self.extra_largest,
                    *(l.largest_module for l in self.layers)])

    @property
    def vision_params(self) -> int:
        return self.vision.params if self.vision else 0

    @property
    def quantized_groups(self) -> list[str]:
        """The parameter groups this model has that its quantization stores in few bits."""
        if self.quantization is None:
            return []
        return [g for g in sorted(self.quantization.groups) if getattr(self.layer_params, g)]

    @cached_property
    def peft_converted(self) -> bool:
        """PEFT converts this model's LoRA targets onto transformers 5's fused experts. (Cached, like
        the other per-layer answers below: the step replays ask them once per layer op.)"""
        return any(layer.mlp.peft_converted for layer in self.layers)

    @cached_property
    def is_moe(self) -> bool:
        return any(layer.mlp.experts for layer in self.layers)

    @cached_property
    def linear_names(self) -> frozenset[str]:
        """Every decoder linear's short name, as ``Layer.linear_table`` gives it."""
        return frozenset(name for layer in self.layers for name, *_ in layer.linear_table)

    def kv_bytes_per_token(self, dtype_bytes: float, engine: str = "vllm") -> float:
        """Bytes one token adds to the KV cache, summed over every attention layer."""
        return sum(l.attention.kv_elements_per_token(engine) for l in self.layers) * dtype_bytes

    def layer_kinds(self) -> list[dict]:
        """Layers grouped by attention kind (and window), with counts, for reports."""
        kinds = Counter((l.attention.kind, l.attention.window, l.mlp.kind) for l in self.layers)
        return [{"attention": kind, "window": window, "mlp": mlp, "count": count}
                for (kind, window, mlp), count in kinds.items()]
