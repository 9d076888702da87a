"""vLLM's KV-cache budget, reproduced before launch (REFERENCE.md section 6; vLLM 0.19
``gpu_worker.determine_available_memory``, ``kv_cache_utils``).

vLLM takes ``gpu_memory_utilization`` of the GPU's *total* memory for the whole instance and gives
the KV cache what is left after the weights, the activation peak of its profile run and the memory
outside PyTorch (NCCL, cuBLAS):

    KV budget = total x utilization − weights / (TP x PP) − RoPE tables − activation peak
                − non-torch memory

The RoPE tables are the cos/sin caches vLLM's ``get_rope`` builds while the model loads (one per
distinct rotary embedding, positions x rotary_dim in the model's dtype, on every rank:
``models/rope.py``) — 32 MiB for Llama-3.1's 131072 positions, 0.56 GiB for Gemma 3, whose global
layers' linear scaling multiplies the positions by 8.

``kv_cache_memory_bytes`` replaces the computation. The KV cache holds
``budget // bytes-per-token`` tokens (bytes per token: every attention layer's 2 x kv_heads/TP x
head_dim x kv bytes, KV heads replicated when TP exceeds them; MLA's latent, never split). vLLM
refuses to start when one request of ``max_model_len`` tokens does not fit.

The activation peak of the profile run is modelled as the widest MLP intermediate of
``max_num_batched_tokens`` tokens (gate and up, split by TP) plus the sampler's warm-up over
``max_num_seqs`` rows of fp32 vocabulary-wide tensors (about 12 bytes per logit): on the 18
published vLLM 0.19 H100 logs in shared/groundtruth this lands within a few hundred MB.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramlint.memory.components import Component
from vramlint.memory.weights import weight_bytes
from vramlint.models.shape import ModelShape
from vramlint.units import GiB

SOURCE = "vLLM 0.19 determine_available_memory / kv_cache_utils, REFERENCE.md §6"
MEASURED = "vLLM 0.19 start-up logs on H100 (shared/groundtruth/vllm-startup-logs.jsonl)"
NON_TORCH = {1: int(0.25 * GiB), 2: int(2.1 * GiB)}   # TP 1; TP > 1 adds custom all-reduce + NCCL buffers
# The two Llama-class logs that differ only in vocabulary (Llama-3.1-8B V=128256: 1.89 GiB;
# CodeLlama-7B V=32016: 0.77 GiB; same MLP scale) put 1.12 GiB on 96,240 vocabulary entries x 1024
# sequences: 12 B per logit, i.e. fp32 logits, their softmax and one more fp32 working copy.
SAMPLER_BYTES_PER_LOGIT = 12
ROPE_TABLES = "RoPE cos/sin tables"
KV_BYTES = {"auto": None, "float16": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1,
            "fp8_ds_mla": 1, "nvfp4": 0.5625}


@dataclass(frozen=True)
class Serving:
    """What a ``vllm serve`` process will be asked to do on one GPU of a TP x PP group."""

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
    kv_cache_memory_bytes: int | None = None
    cpu_offload_bytes: int = 0

    @property
    def big_gpu(self) -> bool:
        return self.gpu_bytes >= 70 * GiB

    @property
    def batched_tokens(self) -> int:
        """vLLM's default for the API server: 8192 on GPUs of 70 GiB and more, else 2048."""
        return self.max_num_batched_tokens or (8192 if self.big_gpu else 2048)

    @property
    def seqs(self) -> int:
        return self.max_num_seqs or (1024 if self.big_gpu else 256)

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

    @property
    def loaded(self) -> int:
        """What vLLM's log reports as "Model loading took": the memory allocated while the model
        loads — the rank's weights (vision tower included) and the RoPE tables."""
        return sum(c.bytes for c in self.components if c.name in ("weights", ROPE_TABLES))

    @property
    def max_concurrency(self) -> float:
        return self.kv_tokens / max(self.needed_tokens, 1)

    @property
    def needed_tokens(self) -> int:
        return self.kv_tokens if not self.bytes_per_token else int(self.needed / self.bytes_per_token)


def _per_layer(s: Serving) -> list[tuple[float, int | None]]:
    """(bytes per token, window) for each attention layer this GPU holds."""
    out = []
    for layer in s.model.layers[: -(-s.model.num_layers // s.pp)]:
        att = layer.attention
        elements = att.kv_elements_per_token("vllm")
        if att.kind != "mla" and att.num_kv_heads:
            elements = elements * max(1, att.num_kv_heads // s.tp) // att.num_kv_heads
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


def _widest(s: Serving) -> int:
    """Elements per token of the widest MLP intermediate: a dense layer's gate+up (2·I/TP); a MoE
    layer's fused-experts caches, k x (gate+up 2·I/TP + act I/TP + output h)."""
    widest = 0
    for layer in s.model.layers:
        mlp = layer.mlp
        if mlp.kind == "moe":
            width = mlp.experts_per_token * (3 * mlp.intermediate // s.tp + s.model.hidden_size)
            width += 2 * mlp.shared_intermediate // s.tp
        else:
            width = 2 * mlp.intermediate // s.tp
        widest = max(widest, width)
    return widest


def _activation(s: Serving) -> Component:
    m = s.model
    widest = _widest(s)
    mlp = s.batched_tokens * widest * s.dtype_bytes
    sampler = SAMPLER_BYTES_PER_LOGIT * s.seqs * m.vocab_size
    return Component("activation peak (profile run)", mlp + sampler,
                     f"{s.batched_tokens} tokens x widest MLP intermediate {widest:,} x {s.dtype_bytes} B + "
                     f"{SAMPLER_BYTES_PER_LOGIT} B x {s.seqs} seqs x V {m.vocab_size:,}", MEASURED)


def _rope_tables(s: Serving) -> Component:
    tables = s.model.rope_tables
    formula = " + ".join(f"{positions:,} x {dim} x {s.dtype_bytes} B" for positions, dim in tables)
    return Component(ROPE_TABLES, sum(p * d for p, d in tables) * s.dtype_bytes,
                     formula or "no rotary embedding", "vLLM 0.19 get_rope cos_sin_cache (models/rope.py)")


def serving_estimate(s: Serving) -> ServingEstimate:
    requested = int(s.gpu_bytes * s.utilization)
    vision = s.model.vision_params * s.dtype_bytes // s.tp     # first stage's, TP-sharded (vLLM's SigLIP)
    weights = max(0, weight_bytes(s.model, s.dtype_bytes) // (s.tp * s.pp) + vision - s.cpu_offload_bytes)
    act = _activation(s)
    non_torch = NON_TORCH[1 if s.tp * s.pp == 1 else 2]
    tower = f" + vision tower {s.model.vision_params:,} / TP {s.tp}" if vision else ""
    parts = (Component("weights", weights, f"{s.model.params:,} params / (TP {s.tp} x PP {s.pp}){tower}", SOURCE),
             _rope_tables(s), act,
             Component("non-torch memory", non_torch, "NCCL, cuBLAS, custom all-reduce", MEASURED))
    budget = s.kv_cache_memory_bytes if s.kv_cache_memory_bytes else requested - sum(c.bytes for c in parts)
    per_token = sum(per for per, _ in _per_layer(s))
    tokens = max(0, int(budget // per_token)) if per_token else 0
    kv = Component("KV cache", max(budget, 0), f"{s.utilization} x {s.gpu_bytes / GiB:.2f} GiB − the above"
                   if not s.kv_cache_memory_bytes else "kv_cache_memory_bytes", SOURCE)
    return ServingEstimate(parts + (kv,), requested, budget, per_token, tokens, kv_needed(s, s.context_len),
                           _max_len(s, max(budget, 0)))


def overcommitted(s: Serving, est: ServingEstimate) -> int:
    """With ``kv_cache_memory_bytes`` vLLM takes the KV cache's size as given instead of fitting it
    under ``gpu_memory_utilization``: the bytes by which the weights, the profile run's
    activations, the memory outside PyTorch and that KV cache exceed the GPU (0 when they fit, and
    whenever the budget comes from the utilization)."""
    if not s.kv_cache_memory_bytes:
        return 0
    return max(0, sum(c.bytes for c in est.components) - s.gpu_bytes)


def starts(s: Serving) -> bool:
    """Whether vLLM would start: memory left for the KV cache, one request of max_model_len in it,
    and everything on the GPU."""
    est = serving_estimate(s)
    return est.kv_budget > 0 and est.needed <= est.kv_budget and not overcommitted(s, est)


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


def smallest_utilization(s: Serving, most: float = 0.95) -> float | None:
    """The lowest gpu_memory_utilization, in hundredths up to ``most``, at which vLLM would start
    (None if even ``most`` is not enough, or kv_cache_memory_bytes fixes the budget)."""
    if s.kv_cache_memory_bytes:
        return None
    return next((u / 100 for u in range(round(s.utilization * 100) + 1, round(most * 100) + 1)
                 if starts(replace(s, utilization=u / 100))), None)
