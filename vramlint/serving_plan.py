"""A vLLM config's serving setup: the flags of a ``vllm serve --config`` file read as vLLM 0.19
parses and applies them, into the ``Serving`` that ``memory/serving/vllm.py`` budgets.

Where vLLM changes the model it loads, so does the setup: ``quantization`` quantizes a 16-bit
checkpoint while it loads (or is noted where it cannot), a modality limit of 0 or
``language_model_only`` builds no vision tower, ``mm_encoder_tp_mode: data`` keeps the tower whole
on each rank, and a draft model vramlint can read is loaded beside it. Flags the schema already
found wrong fall back to vLLM's defaults here, so one bad value gives one finding.
"""

from __future__ import annotations

from dataclasses import replace

from vramlint.errors import UsageError
from vramlint.hardware import Cluster
from vramlint.memory.parts.lora_slots import LoraSlots
from vramlint.memory.serving.vllm import VLLM_VERSION, Serving, v0_engine
from vramlint.models import read_model
from vramlint.models.quantization import ONLINE
from vramlint.models.shape import ModelShape
from vramlint.readers.deepspeed import Fact
from vramlint.readers.vllm import VllmConfig, human_int
from vramlint.stack import parse_version


def default_utilization(release: tuple[int, ...]) -> float:
    """vLLM's ``gpu_memory_utilization`` default: 0.9 up to 0.19, 0.92 from 0.20.0 (config/cache.py;
    research read of each release's wheel)."""
    return 0.92 if release >= (0, 20) else 0.9


def v0_batch(release: tuple[int, ...], context: int, model: ModelShape, notes: list[str],
             said: frozenset[str] = frozenset(), sm: int | None = None, dtype_bytes: int = 2,
             kv_cache_dtype: str = "auto") -> dict:
    """The V0 engine's batch defaults (``v0_engine``; engine/arg_utils.py ``use_long_context``,
    config.py SchedulerConfig): chunked prefill only for a context over 32K (not for multimodal
    or sliding-window models), then 512 batched tokens (2,048 from 0.6.5); without it the profile
    run takes a whole max(max_model_len, 2048) prompt; max_num_seqs 256. ``said``: the settings the
    config states (enable_chunked_prefill, max_num_batched_tokens, max_num_seqs), which stand."""
    why = v0_engine(release, sm, dtype_bytes, kv_cache_dtype)
    if why is None or {"enable_chunked_prefill", "max_num_batched_tokens"} & said:
        return {}
    sliding = any(layer.attention.window for layer in model.layers)
    chunked = context > 32768 and not sliding and model.vision is None
    tokens = (512 if release < (0, 6, 5) else 2048) if chunked else max(context, 2048)
    notes.append(f"vLLM {'.'.join(map(str, release))} runs the V0 engine ({why}): chunked prefill "
                 f"{'on' if chunked else 'off'} for a {context:,}-token context, the profile run over {tokens:,} "
                 "tokens")
    return {"chunked_prefill": chunked, "max_num_batched_tokens": tokens,
            **({} if "max_num_seqs" in said else {"max_num_seqs": 256})}


def serving_from_vllm(cfg: VllmConfig, model: ModelShape, cluster: Cluster, notes: list[str],
                      release: str = VLLM_VERSION) -> Serving:
    """One GPU's share of what the file asks vLLM to serve; ``notes`` gains what is not counted.
    ``release``: the vLLM the file runs on (stack.py), whose defaults apply."""
    numbers = parse_version(release) or parse_version(VLLM_VERSION)
    utilization = default_utilization(numbers)
    if cfg.gpu_memory_utilization.from_file:       # the reader's own default is 0.19's: the release's wins
        utilization = _number(cfg.gpu_memory_utilization, utilization, 1.0)
    else:
        notes.append(f"gpu_memory_utilization {utilization}: vLLM {release}'s default")
    if numbers >= (0, 20):
        notes.append(f"vLLM {release} takes its CUDA-graph estimate out of the KV cache (on by default from 0.20, "
                     "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; none under 0.27's model runner V2): not counted, "
                     "0.5-1.8 GiB per GPU in vLLM 0.19's logs, so the cache may be that much smaller")
    context = _count(cfg.max_model_len, None) or model.max_position_embeddings or 2048
    stated = frozenset(name for name, fact in (("enable_chunked_prefill", cfg.chunked_prefill),
                                               ("max_num_batched_tokens", cfg.max_num_batched_tokens),
                                               ("max_num_seqs", cfg.max_num_seqs)) if fact.from_file)
    dtype_bytes = 4 if str(cfg.dtype.value) in ("float", "float32") else 2
    v0 = v0_batch(numbers, context, model, notes, stated, cluster.gpu.sm, dtype_bytes,
                  str(cfg.kv_cache_dtype.value or "auto"))
    model = _quantized_online(model, cfg.quantization.value, notes)
    if model.vision and cfg.tower_off(model.vision.modalities):
        model = replace(model, vision=None)              # vLLM builds no vision tower, profiles no images
    model = _encoder_mode(model, cfg.mm_encoder_tp_mode.value, notes)
    serving = Serving(
        model, cluster.gpu.memory_bytes, tp=_count(cfg.tensor_parallel), pp=_count(cfg.pipeline_parallel),
        utilization=utilization, max_model_len=_count(cfg.max_model_len, None),
        max_num_seqs=_count(cfg.max_num_seqs, None), max_num_batched_tokens=_count(cfg.max_num_batched_tokens, None),
        kv_cache_dtype=str(cfg.kv_cache_dtype.value or "auto"), dtype_bytes=dtype_bytes,
        dtype=str(cfg.dtype.value or "auto").lower(),
        kv_cache_memory_bytes=_count(cfg.kv_cache_memory_bytes, None),
        cpu_offload_bytes=int(_number(cfg.cpu_offload_gb, 0, 2.0**40) * 2**30),   # bounded only to stay finite
        auto_max_model_len=str(cfg.max_model_len.value).strip().lower() in ("auto", "-1"),
        dp=_count(cfg.data_parallel), expert_parallel=cfg.expert_parallel.value is True, gpu_name=cluster.gpu.name,
        performance_mode=cfg.performance_mode.value, chunked_prefill=cfg.chunked_prefill.value is not False,
        draft=_draft(cfg.draft_model, notes), draft_tp=cfg.draft_tp,
        lora=LoraSlots(_count(cfg.max_loras), _count(cfg.max_lora_rank, 16), cfg.fully_sharded_loras.value is True)
        if cfg.enable_lora.value is True else None, release=release)
    return replace(serving, **v0) if v0 else serving


def _quantized_online(model: ModelShape, method, notes: list[str]) -> ModelShape:
    """The model as ``--quantization`` makes vLLM load it: a checkpoint quantized already keeps its
    own scheme (vLLM checks the two agree); an unquantized one is quantized while it loads by the
    methods that can (``ONLINE``), while any other method needs a checkpoint made with it."""
    if not method or not isinstance(method, str) or model.quantization is not None:
        return model
    if method in ONLINE:
        return replace(model, quantization=ONLINE[method])
    notes.append(f"quantization {method!r} needs a checkpoint quantized with it, and {model.name} is not: "
                 "its weights are counted as stored")
    return model


def _encoder_mode(model: ModelShape, mode, notes: list[str]) -> ModelShape:
    """``mm_encoder_tp_mode: data``: every rank holds the whole tower and encodes its own share of
    the images, for the models vLLM 0.19 marks ``supports_encoder_tp_data``; the others fall back
    to splitting it ("weights"), as vLLM warns."""
    if model.vision is None or mode != "data":
        return model
    if model.vision.encoder_dp:
        return replace(model, vision=replace(model.vision, tp_sharded=False))
    notes.append(f"mm_encoder_tp_mode data: vLLM says 'This model does not support `--mm-encoder-tp-mode "
                 f"data`. Falling back to `--mm-encoder-tp-mode weights`.' ({model.model_type})")
    return model


def _draft(name: str | None, notes: list[str]) -> ModelShape | None:
    """Speculative decoding's draft model, when vramlint can read it (a catalog name or a config);
    otherwise a note that its weights and KV cache are left out."""
    if not name:
        return None
    try:
        return read_model(name)
    except UsageError:
        notes.append(f"speculative decoding loads {name!r} beside the model: its weights and KV cache are "
                     "not counted, so the KV budget here is larger than vLLM's by them")
        return None


def _count(fact: Fact, default: int | None = 1) -> int | None:
    """A vLLM size flag as vLLM parses it (``8k``, ``"2"``), or ``default`` where it is not a
    positive integer — the schema's finding has already said so, or the flag means "auto" (-1)."""
    value = None if isinstance(fact.value, bool) else human_int(fact.value)
    return value if value is not None and value >= 1 else default


def _number(fact: Fact, default: float, most: float) -> float:
    """A number flag in (0, ``most``] (gpu_memory_utilization: vLLM refuses more than 1), else
    ``default`` — the schema's finding says what is wrong with it."""
    try:
        value = float(fact.value) if not isinstance(fact.value, bool) else default
    except (TypeError, ValueError):
        return default
    return value if 0 < value <= most else default
