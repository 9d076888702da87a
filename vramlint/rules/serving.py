"""vLLM start-up checks: what ``vllm serve`` would refuse, with vLLM's own wording."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from functools import partial

from vramlint.documents import Location
from vramlint.findings import ERROR, Finding
from vramlint.hardware import architecture
from vramlint.memory.parts.lora_slots import MOST_VOCAB
from typing import TYPE_CHECKING
from vramlint.rules.base import Rule
from vramlint.rules.fit import EXCEEDS
from vramlint.units import GiB

if TYPE_CHECKING:
    from vramlint.memory.serving.vllm import Serving, ServingEstimate


def _serving():
    """vLLM's serving model, imported when a vLLM file is checked: ``vramlint rule`` and runs of
    training files read this module for its rules alone."""
    from vramlint.memory.serving import vllm as serving
    return serving

EXCEEDS_MODEL = ("VL401", "max-model-len-exceeds-model", ERROR)
EXCEEDS_KV = ("VL402", "max-model-len-exceeds-kv-cache", ERROR)
TP_HEADS = ("VL403", "tp-does-not-divide-heads", ERROR)
LORA_VOCAB = ("VL404", "lora-vocab-too-large", ERROR)
OLD_GPU = ("VL405", "gpu-capability-too-low", ERROR)
BNB_TP = ("VL406", "prequantized-bnb-with-tp", ERROR)
WHOLE_GPU = ("VL407", "utilization-leaves-no-headroom", ERROR)
MOST_UTILIZATION = 0.98      # above it, what vLLM does not count (other processes, NCCL, fragmentation) has no room
# The lowest compute capability (x 10) of each vLLM 0.19 quantization method, from its config class's
# get_min_capability(), which VllmConfig._get_quantization_config holds the GPU to before loading. Keyed by
# how vramlint names the method (models/quantization.py). AWQ needs 7.5 whether vLLM runs it as awq or
# awq_marlin; GPTQ falls back to its 6.0 kernel, and compressed-tensors refuses per scheme, not per method.
MIN_CAPABILITY = {"mxfp4": ("mxfp4", 80), "fp8": ("fp8", 75), "fp8 (online, vLLM)": ("fp8", 75), "awq": ("awq", 75),
                  "fbgemm_fp8": ("fbgemm_fp8", 80), "experts_int8 (online, vLLM)": ("experts_int8", 80),
                  "modelopt fp8": ("modelopt", 89), "modelopt nvfp4": ("modelopt_fp4", 75)}
RULES = (
    Rule(*EXCEEDS_MODEL, summary="max_model_len is longer than the model's positions (max_position_embeddings, "
                                 "times its RoPE scaling factor): vLLM refuses it.",
         bad="model: meta-llama/Llama-2-7b-hf\nmax-model-len: 8192",
         good="model: meta-llama/Llama-2-7b-hf\nmax-model-len: 4096"),
    Rule(*EXCEEDS_KV, summary="One request of max_model_len tokens needs more KV cache than the memory left after "
                              "weights and activations: vLLM refuses to start.",
         bad="model: meta-llama/Llama-3.1-70B\ntensor-parallel-size: 2\nmax-model-len: 131072",
         good="model: meta-llama/Llama-3.1-70B\ntensor-parallel-size: 2\nmax-model-len: 32768"),
    Rule(*TP_HEADS, summary="tensor_parallel_size must divide the number of attention heads: vLLM refuses it.",
         bad="model: Qwen/Qwen2.5-7B   # 28 heads\ntensor-parallel-size: 8",
         good="model: Qwen/Qwen2.5-7B\ntensor-parallel-size: 4"),
    Rule(*LORA_VOCAB, summary="enable_lora on a model whose vocabulary is over 258,048 tokens (Gemma 3 and 4): vLLM's "
                              "LoRA logits processor refuses it at start-up.",
         bad="model: google/gemma-3-27b-it\nenable-lora: true",
         good="model: google/gemma-3-27b-it   # adapters merged into the weights instead"),
    Rule(*OLD_GPU, summary="The GPU's compute capability is below what the file asks of vLLM, which refuses before "
                           "loading: the checkpoint's quantization (or quantization flag) needs its method's minimum "
                           "(MXFP4 8.0, FP8 7.5, ModelOpt FP8 8.9), and dtype bfloat16 needs 8.0 (T4 and V100 have "
                           "neither).",
         bad="model: openai/gpt-oss-20b   # MXFP4 experts; checked with --gpus 1xT4",
         good="model: openai/gpt-oss-20b   # checked with --gpus 1xL4"),
    Rule(*BNB_TP, summary="A checkpoint saved in bitsandbytes 4 or 8 bit cannot be split over tensor parallel "
                          "ranks (its quant states belong to whole weights): vLLM's loader refuses it and suggests "
                          "pipeline parallelism; in-flight quantization of a 16-bit checkpoint has no such limit.",
         bad="model: ./llama-3.1-8b-bnb-4bit   # quantization_config: bitsandbytes\ntensor-parallel-size: 2",
         good="model: ./llama-3.1-8b-bnb-4bit\npipeline-parallel-size: 2"),
    Rule(*WHOLE_GPU, summary="gpu_memory_utilization of 0.98 or more hands vLLM the whole card: what its budget does "
                             "not count (the CUDA context's growth, NCCL buffers, fragmentation, any other process) "
                             "has no room left, and the server runs out of memory under load or at start-up. From "
                             "0.9 vLLM refuses outright a share above what is free once its CUDA context (and, at "
                             "TP > 1, NCCL) is up: about half a GiB on an idle GPU.",
         bad="gpu-memory-utilization: 1.0", good="gpu-memory-utilization: 0.92"),
)


def check_serving(serving: Serving, est: ServingEstimate, locate, path: str,
                  spelling: Mapping[str, str] | None = None) -> Iterator[Finding]:
    """``locate(key)`` gives the location of a (normalised) key in the file, or None. ``spelling``:
    how the budget's hints are said where vLLM's arguments come from another tool's flags (OpenRLHF's
    engines: ``{"tensor_parallel_size": "--vllm.tensor_parallel_size {}"}``); a key it leaves out is
    one that tool does not let its users set, and is not proposed."""
    here = lambda *keys: next((loc for loc in map(locate, keys) if loc), Location(path))  # noqa: E731
    say = partial(_say, spelling)
    yield from _refusals(serving, here)
    yield from _budget(serving, est, here, say)


def _say(spelling: Mapping[str, str] | None, key: str, value: object) -> str | None:
    """``key`` = ``value`` in the file's words: a vLLM config's ``tensor-parallel-size: 2``, or the
    flag of the tool that builds the engine; None where that tool has no way to set it."""
    if spelling is None:
        return f"{key.replace('_', '-')}: {value}"
    template = spelling.get(key)
    return template.format(value) if template else None


def _refusals(serving: Serving, here) -> Iterator[Finding]:
    """What vLLM refuses whatever the memory: the TP degree, LoRA's vocabulary, the GPU's
    capability, a bitsandbytes checkpoint under TP, a max_model_len past the model's positions."""
    m = serving.model
    heads = _serving().attention_heads(m)
    if heads and heads % serving.tp:
        yield Finding(*TP_HEADS, here("tensor_parallel_size"),
                      f"Total number of attention heads ({heads}) must be divisible by tensor parallel size "
                      f"({serving.tp}).", hint=f"tensor-parallel-size one of {_divisors(heads)}")
    if serving.lora is not None and m.vocab_size > MOST_VOCAB:
        yield Finding(*LORA_VOCAB, here("enable_lora"), "When using LoRA, vocab size must be <= 258048 "
                      f"({m.name or m.model_type} has {m.vocab_size:,})", hint="merge the adapter into the weights, "
                      "or serve without enable-lora")
    if refusal := _capability_refusal(serving):
        yield Finding(*OLD_GPU, here("quantization", "model"), *refusal)
    quant = m.quantization
    if serving.tp > 1 and quant and quant.method.startswith("bitsandbytes-"):     # a checkpoint's, not in-flight
        yield Finding(*BNB_TP, here("tensor_parallel_size"), "Prequant BitsAndBytes models with tensor parallelism "
                      "is not supported. Please try with pipeline parallelism.",
                      hint=f"pipeline-parallel-size: {serving.tp} in place of tensor-parallel-size: {serving.tp}, or "
                           "quantization: bitsandbytes on the 16-bit checkpoint (quantized as it loads)")
    if serving.dtype == "bfloat16" and (sm := serving.sm) is not None and sm < 80:
        yield Finding(*OLD_GPU, here("dtype"), "Bfloat16 is only supported on GPUs with compute capability of at least "
                      f"8.0. Your {serving.gpu_name} GPU has compute capability {sm // 10}.{sm % 10}. You can use float16 "
                      "instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
                      hint="dtype: half (or auto, which vLLM turns into float16 on this GPU)")
    derived = m.max_position_embeddings
    if serving.max_model_len and derived and serving.max_model_len > derived:
        yield Finding(*EXCEEDS_MODEL, here("max_model_len"),
                      f"User-specified max_model_len ({serving.max_model_len}) is greater than the derived "
                      f"max_model_len (max_position_embeddings={derived} in model's config.json).",
                      hint=f"max-model-len: {derived}")


def _budget(serving: Serving, est: ServingEstimate, here, say) -> Iterator[Finding]:
    """Where the weights, the profile run and one request of max_model_len do not fit the budget."""
    if (free := _serving().free_at_startup(serving)) is not None and free < est.requested:
        yield Finding(*WHOLE_GPU, here("gpu_memory_utilization"), _short_at_startup(serving, est, free),
                      hint=f"{say('gpu_memory_utilization', _hundredths(free / serving.gpu_bytes))} at most")
    elif serving.utilization >= MOST_UTILIZATION:
        yield Finding(*WHOLE_GPU, here("gpu_memory_utilization"), f"gpu_memory_utilization {serving.utilization} gives "
                      "vLLM the whole GPU: what its budget does not count has no room left",
                      hint="gpu-memory-utilization: 0.92 (or at most 0.95), and max-num-seqs or max-model-len lower "
                           "if the KV cache then runs short")
    if est.kv_budget <= 0:
        yield Finding(*EXCEEDS, here("gpu_memory_utilization", "tensor_parallel_size", "model"),
                      f"{_no_blocks(serving)} (weights and activations need "
                      f"{(est.requested - est.kv_budget) / GiB:.2f} GiB of the {est.requested / GiB:.2f} GiB that "
                      f"gpu_memory_utilization {serving.utilization} allows per GPU)",
                      hint=_what_fits(serving, say))
    elif over := _serving().overcommitted(serving, est):
        yield Finding(*EXCEEDS, here("kv_cache_memory_bytes", "tensor_parallel_size", "model"),
                      f"Weights, activations and the {est.kv_budget / GiB:.2f} GiB KV cache that kv_cache_memory_bytes "
                      f"sets need {(serving.gpu_bytes + over) / GiB:.2f} GiB, more than the "
                      f"{serving.gpu_bytes / GiB:.2f} GiB of the GPU",
                      hint=_what_fits(serving, say))
    if serving.auto_max_model_len and est.kv_budget > 0 and est.max_model_len == 0:
        yield Finding(*EXCEEDS_KV, here("max_model_len", "gpu_memory_utilization"),
                      "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. "
                      "Try increasing `gpu_memory_utilization`.", hint=_what_fits(serving, say))
    if est.kv_budget > 0 and est.needed > est.kv_budget:
        yield Finding(*EXCEEDS_KV, here("max_model_len", "gpu_memory_utilization"), _too_long(serving, est),
                      hint=_what_fits(serving, say, say("max_model_len", est.max_len_that_fits)
                                      if est.max_len_that_fits else None))


def _no_blocks(serving: Serving) -> str:
    """vLLM's refusal of a budget with nothing left for the KV cache, in its release's words (each
    wheel's kv_cache_utils.py / worker.py: 0.6.4 to 0.11 alike, 0.19 adds a docs link, 0.33 a note on
    the CPU backend, kv_cache_planning.py)."""
    release = serving.numbers
    words = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine"
    if release < (0, 19):
        return f"{words}."
    cpu = (" (this flag also controls CPU memory reservation on the CPU backend, despite its name)"
           if release >= (0, 33) else "")
    return f"{words}{cpu}. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def _short_at_startup(serving: Serving, est: ServingEstimate, free: int) -> str:
    """0.9's start-up refusal (gpu_worker.py ``init_device``; from 0.19 ``request_memory`` in
    v1/worker/utils.py, which names the device), with the free memory an idle GPU shows then."""
    device = " cuda:0" if serving.numbers >= (0, 19) else ""
    return (f"Free memory on device{device} ({free / GiB:.2f}/{serving.gpu_bytes / GiB:.2f} GiB) on startup is less "
            f"than desired GPU memory utilization ({serving.utilization}, {est.requested / GiB:.2f} GiB). Decrease GPU "
            "memory utilization or reduce GPU memory used by other processes. (The free memory is an idle GPU's once "
            "the CUDA context and NCCL are up: any other process takes more.)")


def _too_long(serving: Serving, est: ServingEstimate) -> str:
    """vLLM's refusal of a max_model_len the KV cache cannot hold, in the words of the release the
    file runs on (each wheel's kv_cache_utils.py / worker.py; docs/vllm-releases.md): V0 (0.6,
    0.7) counts tokens; V1 GiB — 0.8 drops its estimate (a bug), 0.9-0.18 print two decimals,
    0.19 on round(x, 2) and a docs link; "models's" until 0.33."""
    release = serving.numbers
    try_more = "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    if release < (0, 8):
        return (f"The model's max seq len ({serving.context_len}) is larger than the maximum number of tokens that "
                f"can be stored in KV cache ({est.kv_tokens}). {try_more}")
    model = "model's" if release >= (0, 33) else "models's"
    estimated = (f"Based on the available memory, the estimated maximum model length is {est.max_len_that_fits}. "
                 if est.max_len_that_fits > 0 else "")
    if release < (0, 19):
        needed, available = f"{est.needed / GiB:.2f}", f"{est.kv_budget / GiB:.2f}"
        estimated = " " if release < (0, 9) else f"{estimated} " if estimated else " "
        tail = try_more
    else:
        needed, available = str(round(est.needed / GiB, 2)), str(round(est.kv_budget / GiB, 2))
        tail = f"{try_more} See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    return (f"To serve at least one request with the {model} max seq len ({serving.context_len}), ({needed} GiB KV "
            f"cache is needed, which is larger than the available KV cache memory ({available} GiB).{' ' if release >= (0, 19) else ''}"
            f"{estimated}{tail}")


def _capability_refusal(serving: Serving) -> tuple[str, str] | None:
    """vLLM's own words where the GPU is older than the quantization method allows, and a hint."""
    quant, sm = serving.model.quantization, serving.sm
    if quant is None or sm is None or quant.method not in MIN_CAPABILITY:
        return None
    method, least = MIN_CAPABILITY[quant.method]
    if sm >= least:
        return None
    newer = ", ".join(name for name in ("T4", "A100", "L4", "H100") if architecture(name) >= least)   # examples
    return (f"The quantization method {method} is not supported for the current GPU. Minimum capability: {least}. "
            f"Current capability: {sm}.",
            f"a GPU of compute capability {least / 10:.1f} or newer ({newer}), or a checkpoint not in {method}")


def _what_fits(serving: Serving, say, first: str | None = None) -> str:
    """The changes that would let vLLM start, each computed with the same budget, in the file's
    own keys: ``first`` (else a checkpoint in fewer bits), then a kv-cache-memory-bytes that holds one request (where the file sets
    one), the lowest gpu-memory-utilization, the largest max-num-seqs and max-num-batched-tokens
    (the profile run's sampler and forward), an fp8 KV cache, weights quantized while loading (fp8,
    else bitsandbytes' 4 bits, where the GPU allows them), a
    multimodal checkpoint served for text alone and the smallest tensor-parallel-size that would do."""
    quant = serving.model.quantization
    checkpoint = "a quantized checkpoint" if quant is None else f"a checkpoint in fewer bits than {quant.method}"
    options = [first or (checkpoint if say("model", "") else None)]   # where its users choose the checkpoint
    kv_bytes = _serving().kv_bytes_that_start(serving)
    if kv_bytes:                            # vLLM reads "M" as MiB (human_readable_int)
        options.append(say("kv_cache_memory_bytes", f"{kv_bytes // 2**20}M"))
    utilization = _serving().smallest_utilization(serving)
    if utilization is not None:
        options.append(say("gpu_memory_utilization", f"{utilization:.2f}"))
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        value = _serving().largest_that_starts(serving, key)
        if value is not None:
            options.append(say(key, value))
    if _serving().fits_fp8_kv(serving):
        options.append(say("kv_cache_dtype", "fp8"))
    online = [method for method in ("fp8", "bitsandbytes")      # fp8 first: faster, and nearer 16-bit quality
              if _serving().fits_online(serving, method) and not _capability_refusal(_serving().quantized_online(serving, method))]
    if online:
        options.append(say("quantization", online[0]))
    text_only = say("language_model_only", "true")
    if text_only and _serving().fits_text_only(serving):
        options.append(f"{text_only} (text only)")
    tp = _serving().smallest_tp(serving)
    wider = say("tensor_parallel_size", tp) if tp else None
    options.append(f"{wider} ({tp * serving.pp} GPUs)" if wider else None if tp else "more GPUs (pipeline parallel)")
    options = [option for option in options if option]
    return ", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]


def _hundredths(share: float) -> str:
    """A share of the GPU rounded down to what vLLM's flag takes: 0.87."""
    return f"{math.floor(100 * share) / 100:.2f}"


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0 and d <= _serving().MOST_TP)
