"""axolotl configs → a :class:`Recipe` (docs/recipes.md, "axolotl").

Read as axolotl 0.19.0 validates and normalises them (``AxolotlInputConfig``,
``normalize_config``): ``micro_batch_size`` per GPU (default 1), ``sequence_len`` (512),
``bf16: auto`` (bf16 where the GPU has it, else fp16), weights loaded in bf16 when bf16 is on, else
fp16 with ``fp16``/``load_in_8bit``, else fp32; ``adapter: qlora`` quantizes only with
``load_in_4bit: true``; ``lora_target_linear`` adapts every linear but lm_head; FSDP without a
version is FSDP1, whose Accelerate setup upcasts the shards to fp32, while axolotl's own FSDP2
keeps them in the load dtype. The same file drives ``axolotl train``, ``preprocess`` and
``inference``: it is read as the training job.
"""

from __future__ import annotations

from typing import Any

from vramlint.documents import Document
from vramlint.models.peft import PEFT_DEFAULT_RANK
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import (OPTIMIZERS, TRAIN, Feature, FsdpFacts, Keys, Recipe, dora_switch, optim_switches,
                                     positive, targets, truthy)
from vramlint.readers.trl import FSDP_WORDS, attention

VERSION = "axolotl 0.19.0"
MARKERS = ("micro_batch_size", "sequence_len", "adapter", "datasets", "num_epochs", "sample_packing", "rl",
           "dataset_prepared_path", "lora_target_linear", "pretraining_dataset", "val_set_size")
NOT_AXOLOTL = ("merge_method", "slices", "models", "model_name_or_path", "per_device_train_batch_size")
SPELLING = {"micro_batch": "micro_batch_size", "grad_accum": "gradient_accumulation_steps", "seq_len": "sequence_len",
            "grad_checkpointing": "gradient_checkpointing", "mixed_precision": "bf16", "optimizer": "optimizer",
            "lora_rank": "lora_r", "lora_targets": "lora_target_modules", "attn": "attn_implementation",
            "load_in_4bit": "load_in_4bit", "model": "base_model", "sequence_split": "context_parallel_size"}
STAGES = {"dpo": "dpo", "ipo": "ipo", "kto": "kto", "orpo": "orpo", "simpo": "simpo", "grpo": "grpo", "gdpo": "dpo",
          "ebft": "grpo"}
# axolotl's own optimizer names (CustomSupportedOptimizers) that keep 8-bit states
OWN_OPTIMIZERS = {"ao_adamw_8bit": "adamw-8bit", "optimi_adamw": "adamw", "adopt_adamw": "adamw", "adamc": "adamw"}
LEGACY_ATTENTION = (("xformers_attention", "sdpa"), ("sage_attention", "sdpa"), ("flex_attention", "sdpa"),
                    ("flash_attention", "flash_attention_2"), ("sdp_attention", "sdpa"), ("eager_attention", "eager"))


def looks_like_axolotl(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("base_model"), str)
            and not any(k in data for k in NOT_AXOLOTL) and any(k in data for k in MARKERS))


def _stage(keys: Keys) -> Fact:
    rl = keys.get("rl")
    if rl.value:
        return Fact(STAGES.get(str(rl.value).lower(), str(rl.value).lower()), rl.location)
    for key in ("reward_model", "process_reward_model"):
        if truthy(keys.raw(key)) and keys.has(key):
            return keys.fact(key, "rm")
    if keys.has("pretraining_dataset"):
        return keys.fact("pretraining_dataset", "pt")
    return Fact("sft", None, f"{VERSION}: no rl, reward_model or pretraining_dataset")


def _reference(keys: Keys, stage: str) -> Fact:
    """GRPO's ``trl.beta`` (None: TRL's 0.0) 0 loads no reference (train.py:127-165); otherwise
    the stage's rule: a copy for a full fine-tune, the adapter disabled with LoRA."""
    if stage != "grpo":
        return Fact("auto", None, "the stage's rule")
    beta = keys.get("trl.beta", default=0.0, why=f"{VERSION}: trl.beta None, TRL's 0.0")
    if isinstance(beta.value, (int, float)) and not isinstance(beta.value, bool) and beta.value == 0:
        return Fact(False, beta.location, "GRPO beta 0.0: no reference model")
    return Fact("auto", beta.location)


def _colocated(keys: Keys, stage: str) -> Fact:
    """``trl.use_vllm`` runs vLLM in ``axolotl vllm-serve`` ("server", validation.py:2061-2067)
    unless ``trl.vllm_mode: colocate``, which shares each GPU at ``vllm.gpu_memory_utilization``
    (0.9, schemas/vllm.py:25)."""
    if stage != "grpo" or not truthy(keys.raw("trl.use_vllm")) or str(keys.raw("trl.vllm_mode")) != "colocate":
        return Fact(0.0)
    share = keys.get("vllm.gpu_memory_utilization", default=0.9, why=f"{VERSION} vllm.gpu_memory_utilization default")
    return Fact(share.value, share.location or keys.document.locate("$.trl.vllm_mode"), share.default)


def _precision(keys: Keys) -> Fact:
    """``bf16`` (default "auto") and ``fp16``: fp16 wins over an automatic bf16; "auto" stays for
    the plan to settle on the GPU (bf16 where it has it, else fp16)."""
    bf16 = keys.get("bf16", "bfloat16", default="auto", why=f"{VERSION}: bf16 auto")
    fp16 = keys.get("fp16", default=False, convert=truthy)
    if fp16.value and (bf16.value == "auto" or not truthy(bf16.value)):
        return Fact("fp16", fp16.location)
    if bf16.value == "auto":
        return Fact("auto", bf16.location, bf16.default)
    return Fact("bf16" if truthy(bf16.value) else "no", bf16.location, bf16.default)


def _weights(keys: Keys, precision: Fact, eight: Fact) -> Fact:
    """``resolve_dtype``: bf16 when bf16 is on, else fp16 with fp16 / float16 / load_in_8bit, else fp32."""
    if precision.value in ("bf16", "auto"):
        return Fact("precision", precision.location, f"{VERSION}: loaded in the bf16 dtype when bf16 is on")
    if precision.value == "fp16" or eight.value or truthy(keys.raw("float16")) and keys.has("float16"):
        return Fact("float16", precision.location or eight.location, f"{VERSION}: fp16 / load_in_8bit load float16")
    return Fact("float32", precision.location, f"{VERSION}: neither bf16 nor fp16: float32")


def _lora(keys: Keys, adapter: Fact) -> tuple[Fact, Fact, Fact]:
    if adapter.value not in ("lora", "qlora"):
        return Fact(0, adapter.location, adapter.default or f"{VERSION}: no adapter, full fine-tune"), \
            Fact(("all-linear",)), Fact(0.0)
    rank = keys.get("lora_r", default=PEFT_DEFAULT_RANK, convert=positive,
                    why="peft 0.21.2 LoraConfig r default (axolotl sets none)")
    linear = keys.get("lora_target_linear", default=False, convert=truthy)
    named = keys.get("lora_target_modules", default=(), convert=targets)
    if linear.value:
        where = Fact(("all-linear",), linear.location)
    elif named.value:
        where = named
    else:
        where = Fact(("peft-default",), None, "PEFT's targets for the model type")
    dropout = keys.get("lora_dropout", default=0.0, why=f"{VERSION} lora_dropout default")
    return rank, where, dropout


def _optimizer(keys: Keys) -> Fact:
    fact = keys.get("optimizer", default="adamw_torch_fused", why=f"{VERSION} optimizer default")
    name = str(fact.value).lower()
    return Fact(OWN_OPTIMIZERS.get(name) or OPTIMIZERS.get(name, str(fact.value)), fact.location, fact.default)


def _attn(keys: Keys) -> Fact:
    if keys.has("attn_implementation"):
        return attention(keys, "attn_implementation")
    for key, kernel in LEGACY_ATTENTION:
        if truthy(keys.raw(key)) and keys.has(key):
            return keys.fact(key, kernel)
    return Fact("auto", None, f"{VERSION}: transformers' default kernel")


def _fsdp(keys: Keys) -> FsdpFacts | None:
    """``fsdp`` (a list of words) and ``fsdp_config`` (``fsdp_`` prefixes stripped); no version
    anywhere is FSDP1 (validation.py:1216-1233)."""
    config = keys.raw("fsdp_config")
    words = keys.get("fsdp")
    if not isinstance(config, dict) and not words.value:
        return None
    said = [str(w).lower() for w in (words.value.split() if isinstance(words.value, str) else words.value or [])]

    def setting(name: str, default: Any, convert=truthy) -> Fact:
        return keys.get(f"fsdp_config.{name}", f"fsdp_config.fsdp_{name}", default=default, convert=convert,
                        why=f"{VERSION} fsdp_config default")
    version = keys.get("fsdp_version", "fsdp_config.fsdp_version", "fsdp_config.version", default=1,
                       convert=positive, why=f"{VERSION}: no fsdp_version is FSDP1")
    word = next((FSDP_WORDS[w] for w in said if w in FSDP_WORDS), None)
    if version.value == 2:
        reshard = setting("reshard_after_forward", True)
        strategy = Fact("FULL_SHARD" if reshard.value else "SHARD_GRAD_OP", reshard.location, reshard.default)
    else:
        strategy = Fact(word or "FULL_SHARD", words.location if word else None, f"{VERSION}: FULL_SHARD")
    offload = setting("offload_params", "offload" in said)
    return FsdpFacts(strategy=strategy, version=version, offload=offload,
                     checkpointing=setting("activation_checkpointing", False), upcast=version.value != 2)


def _plugins(keys: Keys) -> str:
    raw = keys.raw("plugins")
    return " ".join(str(p) for p in raw) if isinstance(raw, list) else ""


def _switches(keys: Keys) -> dict[str, Fact]:
    """The loss head its plugins give (Cut Cross-Entropy: ``cut_cross_entropy`` defaults on with
    the plugin, integrations/cut_cross_entropy/args.py:33; Liger's fused cross-entropy with
    ``liger_fused_linear_cross_entropy``) and the optimizer's flavour (``adamw_torch_fused`` default)."""
    out = optim_switches(keys.get("optimizer", default="adamw_torch_fused", why=f"{VERSION} optimizer default"))
    out |= dora_switch(keys, "peft_use_dora")
    plugins = _plugins(keys)
    if "cut_cross_entropy" in plugins and (not keys.has("cut_cross_entropy") or truthy(keys.raw("cut_cross_entropy"))):
        out["loss"] = keys.fact("plugins", "cce")
    elif "liger" in plugins and truthy(keys.raw("liger_fused_linear_cross_entropy")):
        out["loss"] = keys.fact("liger_fused_linear_cross_entropy", "liger")
    return out


def _features(keys: Keys) -> tuple[Feature, ...]:
    found = []
    for key, what, effect in (
            ("chunked_cross_entropy", "chunked cross-entropy builds the logits a chunk at a time", "high"),
            ("activation_offloading", "activation offloading keeps the saved activations on the host", "high"),
            ("layer_offloading", "layer offloading keeps parameters on the host", "high")):
        if truthy(keys.raw(key)) and keys.has(key):
            found.append(Feature(keys.fact(key, None), what, effect))
    if str(keys.raw("gradient_checkpointing")).startswith("offload"):
        found.append(Feature(keys.fact("gradient_checkpointing", None), "checkpoints offloaded to the host", "high"))
    return tuple(found)


def read_axolotl(document: Document) -> Recipe:
    keys = Keys(document, f"{VERSION} default")
    stage = _stage(keys)
    adapter = keys.get("adapter")
    eight = keys.get("load_in_8bit", default=False, convert=truthy)
    four = keys.get("load_in_4bit", default=False, convert=truthy)
    quantized = Fact(bool(four.value) and adapter.value == "qlora", four.location, four.default)
    precision = _precision(keys)
    rank, where, dropout = _lora(keys, adapter)
    features = _features(keys)
    eight = Fact(bool(eight.value) and adapter.value == "lora", eight.location, eight.default)
    return Recipe(
        document=document, framework="axolotl", title="axolotl", task=TRAIN, stage=stage,
        reference=_reference(keys, stage.value), colocated_share=_colocated(keys, stage.value),
        switches=_switches(keys),
        adapter_dtype=(keys.fact("peft_autocast_adapter_dtype", "weights")
                       if keys.has("peft_autocast_adapter_dtype") and not truthy(keys.raw("peft_autocast_adapter_dtype"))
                       else Fact("float32", None, f"{VERSION}: PEFT's autocast_adapter_dtype (adapter.py:367-369)")),
        model=keys.get("base_model"),
        revision=keys.get("revision_of_model", "model_revision", default="main"),
        micro_batch=keys.get("micro_batch_size", default=1, convert=positive),
        grad_accum=keys.get("gradient_accumulation_steps", default=1, convert=positive),
        seq_len=keys.get("sequence_len", default=512, convert=positive),
        packing=keys.get("sample_packing", default=False, convert=truthy),
        grad_checkpointing=keys.get("gradient_checkpointing", default=False, convert=truthy),
        mixed_precision=precision,
        weights_dtype=_weights(keys, precision, eight),
        optimizer=_optimizer(keys),
        lora_rank=rank, lora_targets=where, lora_dropout=dropout,
        load_in_4bit=quantized, load_in_8bit=eight,
        attn=_attn(keys),
        deepspeed=keys.get("deepspeed"),
        fsdp=_fsdp(keys),
        max_grad_norm=keys.get("max_grad_norm", default=1.0, why="HF TrainingArguments default"),
        tensor_parallel=keys.get("tensor_parallel_size", default=1, convert=positive),
        sequence_split=keys.get("context_parallel_size", "sequence_parallel_degree", default=1, convert=positive),
        keys=SPELLING, features=features,
    )
