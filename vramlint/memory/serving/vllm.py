"""vLLM's KV-cache budget, reproduced before launch (docs/reference.md section 6; vLLM 0.19
``gpu_worker.determine_available_memory``, ``kv_cache_utils``).

vLLM takes ``gpu_memory_utilization`` of the GPU's *total* memory for the whole instance and gives
the KV cache what is left after the weights, the activation peak of its profile run and the memory
outside PyTorch (NCCL, cuBLAS):

    KV budget = total x utilization − one GPU's weights − RoPE tables − activation peak
                − non-torch memory

The RoPE tables are the cos/sin caches vLLM's ``get_rope`` builds while the model loads (one per
distinct rotary embedding, positions x rotary_dim in the model's dtype, on every rank:
``models/rope.py``) — 32 MiB for Llama-3.1's 131072 positions, 0.56 GiB for Gemma 3, whose global
layers' linear scaling multiplies the positions by 8.

One GPU's weights are the model's over TP x PP, its routed experts' over TP x DP x PP, a vision
tower's and a draft model's (``_weights``). ``kv_cache_memory_bytes`` replaces the computation.
The KV cache holds ``budget // bytes-per-token`` tokens (bytes per token: every attention layer's
2 x kv_heads/TP x head_dim x kv bytes, KV heads replicated when TP exceeds them; MLA's latent,
never split; a draft model's layers too). vLLM refuses to start when one request of
``max_model_len`` tokens does not fit.

The activation peak is what vLLM's profile run (``gpu_model_runner.profile_run``) adds to the
allocated memory: one forward pass over ``max_num_batched_tokens`` tokens, then — on the last
pipeline stage — the sampler's warm-up over ``max_num_seqs`` dummy requests. The two phases do
not overlap, so the peak is the larger of them plus what the run allocates and keeps:

- sampler (``_dummy_sampler_run``): the logits in the model dtype (all-gathered whole on every TP
  rank), their fp32 copy, softmax probabilities and the exponential noise of ``random_sample``
  (3 x 4 B), the Triton top-k/top-p kernel's cached buffer (one fp32 vocabulary row per SM), and
  the forward's hidden states with the last token's rows and their ``rand_like``;
- forward: the widest MLP in flight — gate_up, SiLU(gate) and its product with up (4·I/TP),
  or fc1 and its activation (2·I/TP) — over the residual stream (h);
- kept: the fused-MoE workspace vLLM's ``WorkspaceManager`` allocates on the first MoE layer and
  holds (``TritonExperts.workspace_shapes``: M x k x (max(I/TP, h) + max(2·I/TP, h)) for M
  batched tokens; gpt-oss's monolithic MXFP4 kernels on Hopper and Blackwell take none, Marlin's
  on Ampere and Ada the same), a multimodal model's dummy images' embeddings (``_encoder_outputs``),
  and the 32 MiB cuBLAS workspace.

On the 18 published vLLM 0.19 H100 logs in shared/groundtruth every text model lands within
0.02 GiB of the logged peak; gemma-3-12b's is 0.14 GiB short.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramlint.stack import CURRENT, parse_version
from vramlint.hardware import architecture
from vramlint.memory.parts.mxfp4 import expert_bytes as mxfp4_expert_bytes, kernel_for
from vramlint.memory.parts.components import Component
from vramlint.memory.parts.fixed import WORKSPACES
from vramlint.memory.parts.lora_slots import SOURCE as LORA_SOURCE, LoraSlots, lora_slot_elements
from vramlint.memory.parts.weights import expert_bytes, weight_bytes
from vramlint.models.quantization import ONLINE
from vramlint.models.shape import ModelShape
from vramlint.units import GiB

VLLM_VERSION = CURRENT["vllm"]      # the release whose start-up budget this module reproduces
SOURCE = "vLLM 0.19 determine_available_memory / kv_cache_utils, docs/reference.md §6"
MEASURED = "vLLM 0.19 start-up logs on H100 (shared/groundtruth/vllm-startup-logs.jsonl)"
NON_TORCH_MEASURED = f"{MEASURED}; V0 and NCCL without NVLS: tests/data/vllm_logs/releases.jsonl"
# memory outside PyTorch that the budget counts (_non_torch): V1 at TP 1 (H100, vLLM 0.19 logs), V0 at TP 1
# (its snapshot since init_device: 0.03-0.09 GiB in 15 logs of 0.6.5-0.9, tests/data/vllm_logs), TP > 1 with
# NCCL's plain rings (two L40S, 0.7.1: 0.30 GiB) and with NVLink SHARP (H100, 0.19: 2.1 GiB)
NON_TORCH = {"v1": int(0.25 * GiB), "v0": int(0.05 * GiB), "rings": int(0.30 * GiB), "nvls": int(2.1 * GiB)}
# used on an idle GPU at vLLM's first snapshot (0.19 logs on H100, 'Free memory on device (x/79.19 GiB) on
# startup'): 78.68 free at TP 1 (the CUDA context), 77.64-77.76 at TP > 1 (+ NCCL's NVLS communicators); RTX
# 5090, vLLM 0.28 and 0.30: 30.86/31.36 — the same half GiB
STARTUP_USED = {"v1": int((79.19 - 78.68) * GiB), "nvls": int((79.19 - 77.64) * GiB)}
NON_TORCH_WORDS = {"v1": "cuBLAS and kernels loaded since the V1 worker's snapshot",
                   "v0": "what the V0 worker adds outside PyTorch since init_device",
                   "rings": "NCCL ring buffers (no NVLink SHARP on this GPU)",
                   "nvls": "NCCL with NVLink SHARP buffers, custom all-reduce"}
NVLS_SM = (90, 100)             # Hopper and Blackwell data-center parts: NCCL's NVLink SHARP buffers
FP32 = 4
SAMPLER_FP32_COPIES = 3         # Sampler.forward's logits.to(float32), softmax's probs, random_sample's q
STREAMING_MULTIPROCESSORS = 132  # H100 / H200: rows of apply_top_k_top_p_triton's cached buffer
VLLM_SAMPLER = "vLLM 0.19 Sampler / TopKTopPSampler / apply_top_k_top_p_triton (_dummy_sampler_run)"
ROPE_TABLES = "RoPE cos/sin tables"
LORA_SLOTS = "LoRA slots (enable_lora)"
KV_BYTES = {"auto": None, "float16": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1,
            "fp8_ds_mla": 1, "nvfp4": 0.5625}


@dataclass(frozen=True)
class Serving:
    """What a ``vllm serve`` process will be asked to do on one GPU of a TP x PP group (of DP of them)."""

    model: ModelShape
    gpu_bytes: int
    tp: int = 1
    pp: int = 1
    utilization: float = 0.9
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str = "auto"
    dtype_bytes: int = 2
    dtype: str = "auto"              # the dtype flag as given (vLLM refuses an explicit bfloat16 below 8.0)
    kv_cache_memory_bytes: int | None = None
    cpu_offload_bytes: int = 0
    auto_max_model_len: bool = False  # max_model_len -1 / "auto": the longest that fits, up to the model's
    dp: int = 1                      # data_parallel_size: engine replicas, each a TP x PP group
    expert_parallel: bool = False    # enable_expert_parallel: each rank holds whole experts
    gpu_name: str = ""               # vLLM keeps an A100's batch defaults small whatever its memory
    performance_mode: str | None = None   # "throughput" doubles the batch defaults
    chunked_prefill: bool = True     # off: a whole max_model_len prompt is one batch
    draft: ModelShape | None = None  # speculative decoding's draft model (speculative_config.model)
    draft_tp: int | None = None      # draft_tensor_parallel_size: the target's TP when unset
    lora: LoraSlots | None = None    # enable_lora: max_loras slots of max_lora_rank (memory/lora_slots.py)
    release: str = VLLM_VERSION      # the vLLM the file runs on (stack.py); the budget is 0.19's arithmetic

    @property
    def collective(self) -> bool:
        """The GPUs of a group talk through NCCL: TP, or DP of a MoE, whose layers gather across
        DP (PP talks point to point only)."""
        return self.tp > 1 or (self.dp > 1 and self.model.is_moe)

    @property
    def numbers(self) -> tuple[int, ...]:
        """The release as numbers (0.19 where it cannot be read)."""
        return parse_version(self.release) or parse_version(VLLM_VERSION)

    @property
    def sm(self) -> int | None:
        """The GPU's compute capability x 10, from its name (None for a bare size): what vLLM picks
        kernels by and checks quantizations and dtypes against."""
        return architecture(self.gpu_name)

    @property
    def expert_ranks(self) -> int:
        """Ranks the routed experts are spread over: vLLM's MoE layers flatten TP across DP
        (``FusedMoEParallelConfig.make``), so TP x DP — each expert split that many ways, or with
        expert parallelism whole experts, that many groups of them."""
        return self.tp * self.dp

    @property
    def expert_split(self) -> int:
        """What one routed expert's width is divided by: TP x DP, or nothing under expert
        parallelism, which spreads whole experts instead (``expert_spread``)."""
        return 1 if self.expert_parallel else self.expert_ranks

    @property
    def expert_spread(self) -> int:
        """How many ranks the routed experts are spread over, whole: TP x DP under expert parallelism."""
        return self.expert_ranks if self.expert_parallel else 1

    @property
    def moe_tokens(self) -> int:
        """Tokens one MoE layer computes: with DP the naive dispatch all-gathers every replica's
        (``naive_dp_ep.py``)."""
        return self.batched_tokens * self.dp

    @property
    def big_gpu(self) -> bool:
        return self.gpu_bytes >= 70 * GiB and "a100" not in self.gpu_name.lower()

    @property
    def _default_seqs(self) -> int:
        return (1024 if self.big_gpu else 256) * (2 if self.performance_mode == "throughput" else 1)

    @property
    def batched_tokens(self) -> int:
        """vLLM 0.19's default for the API server (``get_batch_defaults``, ``_set_default_max_num_seqs_and_
        batched_tokens_args``): 8192 on GPUs of 70 GiB and more but A100s, else 2048; doubled in
        throughput mode; at least max_model_len without chunked prefill; at most max_num_seqs x
        max_model_len."""
        if self.max_num_batched_tokens:
            return self.max_num_batched_tokens
        tokens = (8192 if self.big_gpu else 2048) * (2 if self.performance_mode == "throughput" else 1)
        if not self.chunked_prefill:
            tokens = max(self.context_len, tokens)
        return min((self.max_num_seqs or self._default_seqs) * self.context_len, tokens)

    @property
    def seqs(self) -> int:
        """max_num_seqs: 1024 on the big GPUs, else 256 (doubled in throughput mode), never more than
        the batched tokens."""
        return self.max_num_seqs or min(self._default_seqs, self.batched_tokens)

    @property
    def dummy_requests(self) -> int:
        """The requests the profile run spreads its tokens over (``_dummy_run``: min(tokens, max_num_seqs))."""
        return min(self.seqs, self.batched_tokens)

    @property
    def kv_bytes(self) -> float:
        return KV_BYTES.get(self.kv_cache_dtype) or self.dtype_bytes

    @property
    def context_len(self) -> int:
        return self.max_model_len or self.model.max_position_embeddings or 2048


@dataclass(frozen=True)
class ServingEstimate:
    components: tuple[Component, ...]
    requested: int
    kv_budget: int
    bytes_per_token: float
    kv_tokens: int
    needed: int                     # KV bytes one request of max_model_len needs
    max_len_that_fits: int
    max_model_len: int = 0          # what vLLM runs with: the file's or the model's, or under "auto" the fit
    release: str = VLLM_VERSION     # the vLLM release the file runs on (Serving.release)

    @property
    def loaded(self) -> int:
        """What vLLM's log reports as "Model loading took": the memory allocated while the model
        loads — the rank's weights (vision tower included) and the RoPE tables."""
        return sum(c.bytes for c in self.components if c.name in ("weights", ROPE_TABLES, LORA_SLOTS))

    @property
    def max_concurrency(self) -> float:
        return self.kv_tokens / max(self.needed_tokens, 1)

    @property
    def needed_tokens(self) -> int:
        return self.kv_tokens if not self.bytes_per_token else int(self.needed / self.bytes_per_token)


def _per_layer(s: Serving) -> list[tuple[float, int | None]]:
    """(bytes per token, window) for each attention layer this GPU holds: the target's stage, and a
    draft model's layers, which vLLM gives KV cache from the same pool."""
    stage = [(layer, s.tp) for layer in s.model.layers[: -(-s.model.num_layers // s.pp)]]
    draft = [(layer, s.draft_tp or s.tp) for layer in s.draft.layers] if s.draft else []
    out = []
    for layer, tp in stage + draft:
        att = layer.attention
        elements = att.kv_elements_per_token("vllm")
        if att.kind != "mla" and att.num_kv_heads:
            elements = elements * max(1, att.num_kv_heads // tp) // att.num_kv_heads
        out.append((elements * s.kv_bytes, att.window))
    return out


def kv_needed(s: Serving, length: int) -> int:
    return int(sum(per * min(length, window or length) for per, window in _per_layer(s)))


def _max_len(s: Serving, budget: int) -> int:
    """The longest max_model_len whose one request fits ``budget`` (what vLLM suggests)."""
    lo, hi = 0, max(s.context_len, 1)
    if kv_needed(s, hi) <= budget:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if kv_needed(s, mid) <= budget else (lo, mid)
    return lo


def _forward_width(s: Serving) -> int:
    """Elements per token alive at the forward pass's widest point: the residual stream and the
    widest dense MLP's intermediates (a MoE layer's shared experts; its routed experts run in the
    workspace ``_moe_workspace`` counts)."""
    widest = 0
    for layer in s.model.layers:
        mlp = layer.mlp
        width = mlp.shared_intermediate if mlp.kind == "moe" else mlp.intermediate
        widest = max(widest, (2 if mlp.kind == "plain" else 4) * width // s.tp)
    return s.model.hidden_size + widest


def _moe_workspace(s: Serving) -> int:
    """Bytes of the fused-MoE workspace (TritonExperts), 256-byte aligned, of the widest MoE layer
    — for MXFP4 experts none, or Marlin's over the sizes it pads them to (``memory/mxfp4.py``)."""
    quant = s.model.quantization
    kernel = kernel_for(s.sm) if quant and "experts" in quant.groups and quant.method == "mxfp4" \
        else None
    if kernel and not kernel.workspace:
        return 0
    out = 0
    for layer in s.model.layers:
        mlp = layer.mlp
        if mlp.kind == "moe":
            h, i = s.model.hidden_size, mlp.intermediate // s.expert_split
            if kernel:
                h, i = kernel.pad(h, i)
            rows = s.moe_tokens * mlp.experts_per_token
            out = max(out, sum(-(-rows * max(width, h) * s.dtype_bytes // 256) * 256 for width in (i, 2 * i)))
    return out


def _sampler(s: Serving) -> int:
    """Bytes the sampler's warm-up holds at its peak (see the module docstring)."""
    m, reqs = s.model, s.dummy_requests
    per_logit = s.dtype_bytes + FP32 * (SAMPLER_FP32_COPIES - (s.dtype_bytes == FP32))
    triton = min(STREAMING_MULTIPROCESSORS, reqs) * m.vocab_size * FP32
    hidden = (s.batched_tokens + 2 * reqs) * m.hidden_size * s.dtype_bytes
    return reqs * m.vocab_size * per_logit + triton + hidden


def _encoder_outputs(s: Serving) -> int:
    """A multimodal model's profile first runs its vision tower on as many dummy images as the
    encoder budget (``max_num_batched_tokens``) holds and keeps their embeddings — one row per
    image token, as wide as the language model receives it (Gemma 3: its hidden size; Qwen3-VL:
    the merger's output and one deepstack feature per deepstack layer) — in the encoder cache until
    the sampler is done (``profile_run``, ``encoder_budget.py``). A model whose single image
    exceeds the budget raises it to that image's tokens: not modelled."""
    return s.batched_tokens * s.model.vision.token_width * s.dtype_bytes if s.model.vision else 0


def _activation(s: Serving) -> Component:
    forward = s.batched_tokens * _forward_width(s) * s.dtype_bytes
    sampler = _sampler(s)
    phase = (f"sampler {s.dummy_requests} seqs x V {s.model.vocab_size:,} ({sampler / GiB:.2f} GiB)"
             if sampler >= forward else
             f"forward {s.batched_tokens} tokens x residual + widest MLP {_forward_width(s):,} x {s.dtype_bytes} B "
             f"({forward / GiB:.2f} GiB)")
    kept = [(name, size) for name, size in (("fused-MoE workspace", _moe_workspace(s)),
                                            ("dummy images' embeddings", _encoder_outputs(s))) if size]
    words = "".join(f" + {name} {size / GiB:.2f} GiB" for name, size in kept)
    return Component("activation peak (profile run)",
                     max(forward, sampler) + sum(size for _, size in kept) + WORKSPACES["infer"][0],
                     f"{phase}{words} + cuBLAS workspace",
                     f"{VLLM_SAMPLER}; TritonExperts.workspace_shapes; {MEASURED}")


def _rope_tables(s: Serving) -> Component:
    """``get_rope`` caches one table per distinct rotary embedding: a draft model's adds its own."""
    draft = s.draft.rope_tables if s.draft else ()
    tables = s.model.rope_tables + tuple(t for t in draft if t not in s.model.rope_tables)
    formula = " + ".join(f"{positions:,} x {dim} x {s.dtype_bytes} B" for positions, dim in tables)
    return Component(ROPE_TABLES, sum(p * d for p, d in tables) * s.dtype_bytes,
                     formula or "no rotary embedding", "vLLM 0.19 get_rope cos_sin_cache (models/rope.py)")


def _weights(s: Serving) -> tuple[int, str]:
    """One GPU's weights: everything split over TP x PP but the routed experts, spread over
    TP x DP x PP (``Serving.expert_ranks``), and a vision tower on the first stage, split over TP
    where vLLM builds it from parallel linears (``Tower.tp_sharded``)."""
    m = s.model
    experts = expert_bytes(m, s.dtype_bytes)
    split = s.tp if m.vision and m.vision.tp_sharded else 1
    vision = (m.vision.vllm_params if m.vision else 0) * s.dtype_bytes // split
    local_experts, layout = experts // s.expert_ranks, ""
    if m.quantization and m.quantization.method == "mxfp4" and "experts" in m.quantized_groups:
        local_experts, layout = mxfp4_expert_bytes(m, s.sm, s.expert_split, s.expert_spread,
                                                   s.dtype_bytes)
        layout = f", {layout}"
    size = (weight_bytes(m, s.dtype_bytes) - experts) // (s.tp * s.pp) + local_experts // s.pp + vision
    each = "" if m.quantized_groups else f"{s.dtype_bytes} B x "      # quantized: bytes per group, named below
    if s.expert_ranks == s.tp:
        formula = f"{each}{m.params:,} params / (TP {s.tp} x PP {s.pp})"
    else:
        routed = m.layer_params.experts
        formula = (f"{each}{m.params - routed:,} params / (TP {s.tp} x PP {s.pp}) + {each}{routed:,} routed-expert "
                   f"params / (TP x DP {s.expert_ranks} x PP {s.pp})")
    tower = (f" + {each}{m.vision.vllm_params:,} vision tower params" + (f" / (TP {s.tp})" if split > 1 else "")
             if vision else "")
    stored = f", {m.quantization.method} on {', '.join(m.quantized_groups)}{layout}" if m.quantized_groups else ""
    draft = ""
    if s.draft:
        size += weight_bytes(s.draft, s.dtype_bytes) // (s.draft_tp or s.tp)
        draft = f" + draft {s.draft.name or s.draft.model_type} {s.draft.params:,} / TP {s.draft_tp or s.tp}"
    return max(0, size - s.cpu_offload_bytes), formula + tower + stored + draft


def _lora_slots(s: Serving) -> tuple[Component, ...]:
    """``enable_lora``'s buffers, allocated while the model loads (memory/lora_slots.py)."""
    if s.lora is None:
        return ()
    elements = lora_slot_elements(s.model, s.lora, s.tp, s.pp, s.expert_split, s.expert_spread)
    return (Component(LORA_SLOTS, elements * s.dtype_bytes, f"{s.lora.max_loras} x rank {s.lora.rank} buffers on "
                      f"every linear, embedding and lm_head ({elements:,} elements x {s.dtype_bytes} B)",
                      LORA_SOURCE),)


def v0_engine(release: tuple[int, ...], sm: int | None = None, dtype_bytes: int = 2,
              kv_cache_dtype: str = "auto") -> str | None:
    """Why the release runs the V0 engine, or None where it runs V1: V0 is all 0.6 and 0.7 have;
    0.8 and 0.9 fall back to it for a GPU below compute capability 8.0 (T4, V100, RTX 20xx), an
    fp32 model, or an fp8 KV cache off Hopper (FlashAttention 3 alone reads fp8: 0.8.5 / 0.9.2
    engine/arg_utils.py ``_is_v1_supported_oracle``); 0.10 dropped it."""
    if release < (0, 8):
        return "its only engine"
    if release < (0, 10) and sm is not None and sm < 80:
        return f"V1 needs compute capability 8.0, this GPU has {sm / 10:.1f}"
    if release < (0, 10) and dtype_bytes == 4:
        return "V1 runs only fp16 and bf16"
    if release < (0, 10) and kv_cache_dtype.startswith("fp8") and sm != 90:
        return "V1's FlashAttention reads an fp8 KV cache only on Hopper"
    return None


def _nvls(s: Serving) -> bool:
    """Whether a TP group's collectives take NCCL's NVLink SHARP buffers, the bulk of the 2.1 GiB
    measured outside PyTorch at TP > 1 on H100 (vLLM 0.19 logs): NCCL enables NVLS on NVSwitch
    systems of compute capability 9.0 and 10.0 (``NCCL_NVLS_ENABLE``). Other GPUs keep plain NCCL
    rings — 0.30 GiB measured on two L40S (vLLM 0.7.1, vllm#15815), TP 1's term. A bare size
    (no name) is taken as such a system, the larger, safer sum."""
    return s.sm is None or s.sm in NVLS_SM


def _non_torch_kind(s: Serving) -> str:
    """Which memory outside PyTorch the budget counts: NCCL's buffers where the GPUs of a group
    talk, else V0's or V1's own."""
    if s.collective:
        return "nvls" if _nvls(s) else "rings"
    return "v0" if v0_engine(s.numbers, s.sm, s.dtype_bytes, s.kv_cache_dtype) else "v1"


def serving_estimate(s: Serving) -> ServingEstimate:
    requested = int(s.gpu_bytes * s.utilization)
    weights, formula = _weights(s)
    act = _activation(s)
    kind = _non_torch_kind(s)
    parts = (Component("weights", weights, formula, SOURCE),
             _rope_tables(s), *_lora_slots(s), act,
             Component("non-torch memory", NON_TORCH[kind], f"measured: {NON_TORCH_WORDS[kind]}", NON_TORCH_MEASURED))
    budget = s.kv_cache_memory_bytes if s.kv_cache_memory_bytes else requested - sum(c.bytes for c in parts)
    per_token = sum(per for per, _ in _per_layer(s))
    tokens = max(0, int(budget // per_token)) if per_token else 0
    kv = Component("KV cache", max(budget, 0), f"{s.utilization} x {s.gpu_bytes / GiB:.2f} GiB − the above"
                   if not s.kv_cache_memory_bytes else "kv_cache_memory_bytes", SOURCE)
    fits = _max_len(s, max(budget, 0))
    length = min(s.context_len, fits) if s.auto_max_model_len else s.context_len     # _auto_fit_max_model_len
    return ServingEstimate(parts + (kv,), requested, budget, per_token, tokens, kv_needed(s, length), fits, length,
                           s.release)


def overcommitted(s: Serving, est: ServingEstimate) -> int:
    """With ``kv_cache_memory_bytes`` vLLM takes the KV cache's size as given instead of fitting it
    under ``gpu_memory_utilization``: the bytes by which the weights, the profile run's
    activations, the memory outside PyTorch and that KV cache exceed the GPU (0 when they fit, and
    whenever the budget comes from the utilization)."""
    if not s.kv_cache_memory_bytes:
        return 0
    return max(0, sum(c.bytes for c in est.components) - s.gpu_bytes)


def free_at_startup(s: Serving) -> int | None:
    """The free memory vLLM's worker sees when it takes its first snapshot, on an idle GPU, where
    the release checks it against the requested share (0.9 on: ``Free memory on device ... is less
    than desired GPU memory utilization``); None before 0.9. Measured: the CUDA context alone at TP
    1, the context and NCCL's communicators at TP > 1 (``STARTUP_USED``)."""
    if s.numbers < (0, 9):
        return None
    return s.gpu_bytes - STARTUP_USED["nvls" if s.collective and _nvls(s) else "v1"]


def starts(s: Serving) -> bool:
    """Whether vLLM would start: the requested share free at start-up, memory left for the KV
    cache, one request of max_model_len in it, and everything on the GPU."""
    est = serving_estimate(s)
    free = free_at_startup(s)
    return ((free is None or free >= est.requested) and est.kv_budget > 0 and est.needed <= est.kv_budget
            and not overcommitted(s, est))


MOST_TP = 16      # two nodes of 8: beyond that a model is served with pipeline parallelism too


def attention_heads(model: ModelShape) -> int:
    """The query heads vLLM's tensor parallelism splits (0 for a model without layers)."""
    return model.layers[0].attention.num_heads if model.layers else 0


def smallest_tp(s: Serving) -> int | None:
    """The smallest tensor_parallel_size above the file's that divides the attention heads (vLLM
    refuses any other) and at which vLLM would start, up to ``MOST_TP``; None if none does."""
    heads = attention_heads(s.model)
    return next((tp for tp in range(s.tp + 1, MOST_TP + 1)
                 if heads and heads % tp == 0 and starts(replace(s, tp=tp))), None)


def kv_bytes_that_start(s: Serving) -> int | None:
    """Where the file sets ``kv_cache_memory_bytes``: the KV one request of max_model_len needs,
    rounded up to whole MiB, if vLLM would start with it; else None."""
    needed = -(-kv_needed(s, s.context_len) // 2**20) * 2**20
    return needed if s.kv_cache_memory_bytes and starts(replace(s, kv_cache_memory_bytes=needed)) else None


def fits_fp8_kv(s: Serving) -> bool:
    """Whether an fp8 KV cache (half of a 16-bit one's bytes) would let vLLM start."""
    return s.kv_bytes > 1 and starts(replace(s, kv_cache_dtype="fp8"))


def quantized_online(s: Serving, method: str) -> Serving:
    """The setup with ``quantization: <method>`` quantizing the 16-bit checkpoint while it loads."""
    return replace(s, model=replace(s.model, quantization=ONLINE[method]))


def fits_online(s: Serving, method: str) -> bool:
    """Whether ``quantization: <method>`` (``ONLINE``: fp8, bitsandbytes) would let vLLM start."""
    return s.model.quantization is None and starts(quantized_online(s, method))


def fits_text_only(s: Serving) -> bool:
    """Whether ``language-model-only: true`` — no vision tower built, no images profiled: a
    multimodal checkpoint served for text — would let vLLM start."""
    return s.model.vision is not None and starts(replace(s, model=replace(s.model, vision=None)))


def smallest_utilization(s: Serving, most: float = 0.95) -> float | None:
    """The lowest gpu_memory_utilization, in hundredths up to ``most``, at which vLLM would start
    (None if even ``most`` is not enough, or kv_cache_memory_bytes fixes the budget)."""
    if s.kv_cache_memory_bytes:
        return None
    return next((u / 100 for u in range(round(s.utilization * 100) + 1, round(most * 100) + 1)
                 if starts(replace(s, utilization=u / 100))), None)


def largest_that_starts(s: Serving, key: str) -> int | None:
    """The largest power of two below the setup's ``max_num_seqs`` or ``max_num_batched_tokens``
    (``key``) at which vLLM would start: fewer dummy requests shrink the sampler's warm-up, fewer
    batched tokens the forward's (module docstring). vLLM wants max_num_batched_tokens >=
    max_num_seqs, so the tokens stop there. None if no such value starts."""
    current, floor = (s.seqs, 1) if key == "max_num_seqs" else (s.batched_tokens, s.seqs)
    candidates = [1 << b for b in range(current.bit_length(), -1, -1) if floor <= 1 << b < current]
    return next((v for v in candidates if starts(replace(s, **{key: v}))), None)
