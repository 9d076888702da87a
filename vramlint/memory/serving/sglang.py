"""SGLang's start-up memory budget: how much KV cache ``python -m sglang.launch_server`` sizes on
one GPU of its tensor-parallel group, and whether it starts (issue 31).

SGLang does not profile a forward pass as vLLM does. It measures the free memory before loading
the weights (``pre``: the GPU less the CUDA context and NCCL), loads them, and hands the KV pool
what is left of ``pre x mem_fraction_static`` (``_profile_available_bytes``, sglang 0.5.23
mem_cache/kv_cache_configurator.py:2990-3060; ``profile_max_num_token``, 0.4.3.post4
model_executor/model_runner.py:608-633)::

    rest = (pre − weights) − pre x (1 − mem_fraction_static)
    max_total_num_tokens = rest // cell_size        (then min(--max-total-tokens), page-aligned)

``cell_size`` is the bytes one token takes in every layer's cache on this rank: K and V of
``max(1, kv_heads // tp)`` heads of ``head_dim`` (MHA / GQA), or MLA's latent ``kv_lora_rank +
qk_rope_head_dim`` once. The rest of the GPU, ``pre x (1 − mem_fraction_static)``, is what
prefill activations and CUDA graphs run in: when SGLang chooses the fraction itself, it keeps a
reserve sized for them (``auto_fraction``, by release).

Not modelled (said in the notes): hybrid models' separate sliding-window and Mamba pools, DP
attention, speculative decoding's draft pools, disaggregated prefill / decode, multimodal
adjustments of the fraction, and the memory CUDA-graph capture actually takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vramlint.memory.parts.components import Component
from vramlint.memory.parts.weights import weight_bytes
from vramlint.models.shape import LINEAR, MLA, ModelShape
from vramlint.stack import CURRENT, parse_version

SGLANG_VERSION = CURRENT["sglang"]   # the newest release read (0.5.23 wheel, sha256 00b3cd5b...); older eras below
MiB, GiB = 1 << 20, 1 << 30
SOURCE = ("sglang 0.5.23 kv_cache_configurator.py _profile_available_bytes / pool_configurator.py; "
          "0.4.3.post4 model_runner.py profile_max_num_token")
# What a rank has used before SGLang's "Load weight begin. avail mem=" (the CUDA context, cuBLAS, and
# NCCL's communicators when TP > 1): measured, by how the ranks talk.
CONTEXT = {"single": int((79.19 - 78.68) * GiB), "rings": int((22.05 - 21.63) * GiB),
           "nvls": int((79.19 - 77.64) * GiB)}
CONTEXT_SOURCE = {"single": "vLLM 0.19 start-up logs on one H100 (the same CUDA context and cuBLAS; "
                            "shared/groundtruth/vllm-startup-logs.jsonl)",
                  "rings": "sglang 0.4.3.post4 on 4x L4: 'Load weight begin. avail mem=21.63 GB' of the 22.05 GiB "
                           "torch reports (didier-durand/llms-in-clouds docs/sglang.md at 3e1df42)",
                  "nvls": "vLLM 0.19 start-up logs on H100 TP > 1: NCCL's NVLink SHARP buffers "
                          "(shared/groundtruth/vllm-startup-logs.jsonl)"}
NVLS_SM = (90, 100)
KV_BYTES = {"auto": None, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8": 1,
            "fp4_e2m1": 0.5}


@dataclass(frozen=True)
class SglangServing:
    """What one ``sglang.launch_server`` rank is asked to hold (the server arguments that size it)."""

    model: ModelShape
    gpu_bytes: int
    sm: int | None = None
    tp: int = 1
    pp: int = 1
    dp: int = 1
    mem_fraction_static: float | None = None      # None: SGLang chooses (``auto_fraction``)
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    context_length: int | None = None
    kv_cache_dtype: str = "auto"
    dtype_bytes: int = 2
    page_size: int = 1
    disable_cuda_graph: bool = False
    release: str = SGLANG_VERSION

    @property
    def numbers(self) -> tuple[int, ...]:
        return parse_version(self.release) or parse_version(SGLANG_VERSION)

    @property
    def context_len(self) -> int:
        return self.context_length or self.model.max_position_embeddings or 2048

    @property
    def kv_bytes(self) -> float:
        return KV_BYTES.get(self.kv_cache_dtype.lower()) or self.dtype_bytes


@dataclass(frozen=True)
class SglangEstimate:
    components: tuple[Component, ...]
    mem_fraction_static: float
    fraction_words: str             # where the fraction came from
    pre_load: int                   # free bytes before the weights load ("Load weight begin. avail mem")
    rest: int                       # the KV pool's budget (negative: SGLang refuses to start)
    cell_size: float                # bytes a token takes in this rank's cache
    max_total_num_tokens: int
    refusal: str                    # SGLang's own error, where it refuses to start
    release: str = SGLANG_VERSION
    engine: str = "sglang"          # how reports name the engine (vLLM's estimate has none: "vllm")


def _gpu_mib(s: SglangServing) -> float:
    return s.gpu_bytes / MiB


def _tiers(s: SglangServing) -> tuple[int, int]:
    """``chunked_prefill_size`` and the decode CUDA graphs' ``max_bs`` SGLang picks by GPU memory
    (0.5.23 arg_groups/memory_hook.py:87-170; 0.4.3.post4 server_args.py:217-232)."""
    mem = _gpu_mib(s)
    if s.numbers < (0, 5):
        return (2048, 8 if s.tp < 4 else 80) if mem < 25_000 else (8192, 160)
    if mem < 20 * 1024:
        return 2048, 8
    if mem < 35 * 1024:
        return 4096, 48 if s.tp < 4 else 160
    if mem < 60 * 1024:
        return 4096, 32 if s.tp < 4 else 160
    if mem < 160 * 1024:
        return 8192, 256 if s.tp < 4 else 512
    return 16384, 512


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """The token counts SGLang 0.5.23 captures prefill CUDA graphs for (cuda_graph_hook.py:480-497)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [size for size in sizes if size <= max_bs]


def chunked_prefill(s: SglangServing) -> int:
    return s.chunked_prefill_size or _tiers(s)[0]


def auto_fraction(s: SglangServing) -> tuple[float, str]:
    """``mem_fraction_static`` where the launch does not set it, in three eras (read from the wheels
    of 0.4.3.post4, 0.4.8, 0.5.2, 0.5.3 and 0.5.23):
    - up to 0.4.7, by TP size alone (0.4.3.post4 server_args.py:204-214);
    - 0.4.8 to 0.5.2, the GPU less a reserve by its memory tier: 2.8 + TP x PP / 10 GiB under 35
      GiB, 9.5 + TP x PP / 2 under 90, 12 + TP x PP / 2 under 160, else 32 (0.5.2 server_args.py);
    - from 0.5.3, a reserve for prefill activations and CUDA graphs, in MiB (0.5.23 memory_hook.py:
      276-320, ``reserve_for_graph_mb``): 512 + 1.5 x max(chunked_prefill_size, 2048) + TP x PP / 8
      x 1024 + 2 x the decode graphs' max_bs + 8 per prefill graph size (1.5 GiB under MLA), at
      least 10 GiB on a GPU over 60 GiB. Releases between 0.5.3 and 0.5.22 are read as 0.5.23."""
    if s.numbers < (0, 4, 8):
        fraction = 0.79 if s.tp >= 16 else 0.81 if s.tp >= 8 else 0.85 if s.tp >= 4 else 0.87 if s.tp >= 2 else 0.88
        return fraction, f"SGLang {s.release}'s default for TP {s.tp}"
    mem = _gpu_mib(s)
    if s.numbers < (0, 5, 3):
        size = s.tp * s.pp
        gib = (2.8 + size / 10 if mem < 35 * 1024 else 9.5 + size / 2 if mem < 90 * 1024
               else 12 + size / 2 if mem < 160 * 1024 else 32)
        return round((mem - gib * 1024) / mem, 3), (f"SGLang {s.release} chooses it: ({mem:,.0f} − {gib * 1024:,.0f} "
                                                   f"MiB reserved for its GPU tier) / {mem:,.0f} MiB")
    chunk, decode_bs = chunked_prefill(s), _tiers(s)[1]
    if s.cuda_graph_max_bs:
        decode_bs = s.cuda_graph_max_bs
    elif s.max_running_requests and decode_bs > s.max_running_requests:
        decode_bs = s.max_running_requests
    mla = any(layer.attention.kind == MLA for layer in s.model.layers)
    graphs = 0.0 if s.disable_cuda_graph else decode_bs * 2 + (1.5 * 1024 if mla else
                                                               8 * len(prefill_graph_sizes(min(chunk, 8192) if mla
                                                                                           else chunk)))
    reserved = 512 + max(chunk, 2048) * 1.5 + s.tp * s.pp / 8 * 1024 + graphs
    if mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    fraction = round((mem - reserved) / mem, 3)
    return fraction, (f"SGLang {s.release} chooses it: ({mem:,.0f} − {reserved:,.0f} MiB reserved for prefill "
                      f"activations and CUDA graphs) / {mem:,.0f} MiB")


def cell_size(s: SglangServing) -> float:
    """Bytes one token takes in this rank's KV cache, over the layers of its pipeline stage."""
    total = 0.0
    for layer in s.model.layers[: -(-s.model.num_layers // s.pp)]:
        att = layer.attention
        if att.kind == LINEAR:
            continue
        if att.kind == MLA:
            total += att.kv_latent_dim * s.kv_bytes
        else:
            heads = max(1, att.num_kv_heads // s.tp)
            total += (1 if att.shares_kv else 2) * heads * att.head_dim * s.kv_bytes
    return total


def _context(s: SglangServing) -> str:
    if s.tp * s.pp == 1:
        return "single"
    return "nvls" if s.sm in NVLS_SM else "rings"


def _weights(s: SglangServing) -> tuple[int, str]:
    """One rank's weights: everything split over TP x PP (routed experts too: SGLang's MoE is
    tensor-parallel unless expert parallelism is asked for), with its formula (a quantized
    checkpoint's bytes per group are ``weights.weight_bytes``'s)."""
    m = s.model
    each = f"{m.quantization.method} checkpoint: " if m.quantization else f"{s.dtype_bytes} B x "
    return (weight_bytes(m, None if m.quantization else s.dtype_bytes) // (s.tp * s.pp),
            f"{each}{m.params:,} params / (TP {s.tp} x PP {s.pp})")


def kv_pool(pre: int, loaded: int, fraction: float, cell: float, max_total_tokens: int | None = None,
            page_size: int = 1) -> tuple[int, int]:
    """SGLang's KV budget and token count from the free memory before (``pre``) and what loading
    took (``loaded``): ``rest = (pre − loaded) − pre x (1 − fraction)``, ``rest // cell``, capped
    by ``--max-total-tokens`` and aligned down to the page size."""
    rest = pre - loaded - int(pre * (1 - fraction))
    tokens = int(rest // cell) if rest > 0 and cell else 0
    if max_total_tokens:
        tokens = min(tokens, max_total_tokens)
    return rest, tokens - tokens % max(1, page_size)


def sglang_estimate(s: SglangServing) -> SglangEstimate:
    fraction, words = ((s.mem_fraction_static, "--mem-fraction-static") if s.mem_fraction_static is not None
                       else auto_fraction(s))
    kind = _context(s)
    pre = s.gpu_bytes - CONTEXT[kind]
    weights, formula = _weights(s)
    slack = int(pre * (1 - fraction))
    cell = cell_size(s)
    rest, tokens = kv_pool(pre, weights, fraction, cell, s.max_total_tokens, s.page_size)
    refusal = _refusal(s, fraction, pre, pre - weights) if rest <= 0 else ""
    if not refusal and tokens <= 0:
        refusal = ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
                   + (f" Current value: mem_fraction_static={fraction}" if s.numbers >= (0, 5, 14) else ""))
    components = (
        Component("CUDA context + NCCL", CONTEXT[kind], "measured before the weights load", CONTEXT_SOURCE[kind]),
        Component("weights", weights, formula, SOURCE),
        Component("KV cache pool", max(0, int(tokens * cell)),
                  f"{tokens:,} tokens x {cell:,.0f} B (max_total_num_tokens x cell_size)", SOURCE),
        Component("prefill activations + CUDA graphs", slack,
                  f"{1 - fraction:.3f} x {pre / GiB:.2f} GiB free before loading (1 − mem_fraction_static)", SOURCE),
    )
    return SglangEstimate(components, fraction, words, pre, rest, cell, tokens, refusal, s.release)


def _refusal(s: SglangServing, fraction: float, pre: int, available: int) -> str:
    """SGLang's error when the weights leave nothing for the KV pool, in the release's words (the
    ValueError from 0.5.14 on, read from the wheels of 0.5.13 and 0.5.14)."""
    if s.numbers < (0, 5, 14):
        return "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    minimum = 1 - available / pre
    suggested = math.ceil(minimum * 1000) / 1000
    return (f"ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static="
            f"{fraction}. Raise --mem-fraction-static above {suggested:.3f} (minimum viable = 1 - available/pre = "
            f"{minimum:.4f}). If using speculative decoding, draft weights are now counted.")


def pool_warning(s: SglangServing, est: SglangEstimate) -> str:
    """What SGLang says when one full-length request cannot fit: 0.5.23 warns in these words at
    start-up (tp_worker.py:556-565); before it (0.4.3.post4 to 0.5.22 read), it starts silently with
    requests capped at ``max_req_len = min(context_len − 1, max_total_num_tokens − 1)``
    (tp_worker.py ``max_req_len``), which this says in vramlint's words."""
    tokens = est.max_total_num_tokens
    if est.refusal or tokens >= s.context_len:
        return ""
    if s.numbers >= (0, 5, 23):
        return (f"SGLang {s.release} warns at start-up: KV pool holds {tokens} tokens, fewer than --context-length "
                f"{s.context_len}. One full-length request cannot fit, so long requests will be refused or "
                "truncated at serving time. Lower --context-length, raise --mem-fraction-static, or free memory "
                "taken before the pool is sized.")
    return (f"SGLang {s.release} starts with a KV pool of {tokens:,} tokens, fewer than the context length "
            f"{s.context_len:,}, and caps each request at {tokens - 1:,} tokens (max_req_len): longer ones are "
            "refused at serving time")
