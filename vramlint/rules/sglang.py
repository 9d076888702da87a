"""SGLang start-up checks: what ``sglang.launch_server`` refuses or warns about, in its own words."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from vramlint.findings import ERROR, WARNING, Finding
from vramlint.rules.base import Rule

if TYPE_CHECKING:
    from vramlint.memory.serving.sglang import SglangEstimate, SglangServing  # noqa: F401
    from vramlint.readers.sglang import SglangConfig  # noqa: F401

NO_POOL = ("VL408", "sglang-no-kv-cache-memory", ERROR)
SHORT_POOL = ("VL409", "sglang-kv-pool-below-context", WARNING)
TP_HEADS = ("VL410", "sglang-tp-does-not-divide-heads", ERROR)
RULES = (
    Rule(*NO_POOL, summary="The weights leave nothing of mem_fraction_static x the free memory for SGLang's KV "
                           "pool: it refuses to start ('Not enough memory. Please try to increase "
                           "--mem-fraction-static.'; from 0.5.14 'Loaded weights leave no GPU memory for the KV "
                           "cache', with the smallest fraction that would).",
         bad="model-path: meta-llama/Llama-3.1-70B-Instruct\ntp-size: 2\nmem-fraction-static: 0.5",
         good="model-path: meta-llama/Llama-3.1-70B-Instruct\ntp-size: 2"),
    Rule(*SHORT_POOL, summary="SGLang's KV pool holds fewer tokens than the context length: it starts, warns, and "
                              "refuses or truncates the long requests at serving time.",
         bad="model-path: meta-llama/Llama-3.1-8B-Instruct\ncontext-length: 131072\nmem-fraction-static: 0.3",
         good="model-path: meta-llama/Llama-3.1-8B-Instruct\ncontext-length: 131072"),
    Rule(*TP_HEADS, summary="--tp-size must divide the attention heads, and the KV heads (or be a multiple of them "
                            "where there are fewer): SGLang's attention layers assert it while the model is built "
                            "(0.5.23 models/llama.py:183-193, the same in its other decoders), and the server "
                            "exits with an AssertionError.",
         bad="model-path: Qwen/Qwen2.5-7B-Instruct   # 28 heads, 4 KV heads\ntp-size: 8",
         good="model-path: Qwen/Qwen2.5-7B-Instruct\ntp-size: 4"),
)


def _heads_refused(serving: SglangServing) -> str:
    """What SGLang's attention asserts of TP (models/llama.py:183-193): TP divides the heads; TP
    divides the KV heads, or they divide TP where there are fewer. MLA models shard heads alike."""
    tp = serving.tp
    for layer in serving.model.layers:
        att = layer.attention
        if not att.num_heads or att.kind == "linear":
            continue
        if att.num_heads % tp:
            return f"total_num_heads {att.num_heads} % tp_size {tp} != 0"
        kv = att.num_kv_heads
        if att.kind != "mla" and kv and ((kv >= tp and kv % tp) or (kv < tp and tp % kv)):
            return f"total_num_kv_heads {kv} and tp_size {tp}: neither divides the other"
    return ""


def unpriced(cfg: SglangConfig) -> Iterator[Finding]:
    """What the server turns on that its budget here leaves out (VL210, the same rule as a recipe's)."""
    from vramlint.readers.sglang import UNPRICED
    from vramlint.rules.recipe import NOT_MODELLED
    for name, fact in cfg.not_modelled:
        yield Finding(*NOT_MODELLED, fact.location, f"{UNPRICED[name]} is on: not counted, so the budget is "
                      "SGLang's without it", hint=f"check the server without {cfg.keys[name]}, or read its "
                      "start-up log's max_total_num_tokens")


def check_sglang(serving: SglangServing, est: SglangEstimate, locate) -> Iterator[Finding]:
    """``locate(name)``: where the config (or the launch line) states a server argument."""
    from vramlint.memory.serving.sglang import pool_warning
    split = _heads_refused(serving)
    if split:
        fits = [tp for tp in range(1, 17) if not _heads_refused(replace(serving, tp=tp))]
        yield Finding(*TP_HEADS, locate("tp_size"), f"SGLang {est.release} fails while building the model: "
                      f"AssertionError ({split})", hint=f"--tp-size {', '.join(map(str, fits))}")
        return
    if est.refusal:
        yield Finding(*NO_POOL, locate("mem_fraction_static"), f"SGLang {est.release} refuses to start: {est.refusal}",
                      hint="a higher --mem-fraction-static, a larger --tp-size, or a quantized checkpoint")
        return
    warning = pool_warning(serving, est)
    if warning:
        yield Finding(*SHORT_POOL, locate("context_length"), warning,
                      hint=f"--context-length {est.max_total_num_tokens - 1} or less, or a higher "
                           "--mem-fraction-static")
