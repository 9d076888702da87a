"""torchtune recipe configs → a :class:`Recipe` (docs/recipes.md, "torchtune").

A torchtune config names its model by builder (``model._component_:
torchtune.models.llama3_1.qlora_llama3_1_8b``), which fixes the architecture, the size and LoRA or
QLoRA; ``data/torchtune_models.json`` holds each builder's architecture as torchtune 0.6.1 builds
it, and a component builder called with its own dimensions is read from them. The recipe script is
not a key: it is the ``tune run <recipe> --config <file>`` line of the header comment (the one
whose config is this file's), and ``_single_device`` recipes run on one GPU, ``_distributed`` ones
shard with FSDP2 over all of them.

Read as torchtune 0.6.1's recipes read them: every parameter, adapter, gradient and optimizer
state in ``dtype`` (bf16; no fp32 master copy, no autocast), ``batch_size`` per GPU,
``tokenizer.max_seq_len`` a cap (``null``: no cap at all), ``enable_activation_checkpointing``
off by default, NF4 weights (torchao, 0.516 B a value) for every attention and MLP linear of a
QLoRA builder.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from vramlint.documents import Document
from vramlint.packaged import data_json
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import TRAIN, FsdpFacts, Keys, Recipe, dora_switch, dtype_name, positive, truthy

VERSION = "torchtune 0.6.1"
SPELLING = {"micro_batch": "batch_size", "grad_accum": "gradient_accumulation_steps",
            "seq_len": "tokenizer.max_seq_len", "grad_checkpointing": "enable_activation_checkpointing",
            "mixed_precision": "dtype", "optimizer": "optimizer._component_", "lora_rank": "model.lora_rank",
            "lora_targets": "model.lora_attn_modules", "model": "model._component_"}
RUN_LINE = re.compile(r"tune run\s+(?:--\S+\s+\S+\s+)*(\S+)\s+--config\s+(\S+)")
# torchtune's module names -> transformers' (what the LoRA counter and the shapes use)
MODULES = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
MLP = ("gate_proj", "up_proj", "down_proj")
OPTIMIZERS = {"AdamW": "adamw", "Adam": "adamw", "PagedAdamW": "adamw", "PagedAdamW32bit": "adamw",
              "AdamW8bit": "adamw-8bit", "PagedAdamW8bit": "adamw-8bit", "Adam8bit": "adamw-8bit", "SGD": "sgd",
              "Adafactor": "adafactor"}


@lru_cache(maxsize=1)
def builders() -> dict[str, dict]:
    return data_json("torchtune_models.json")["builders"]


def looks_like_torchtune(data: Any) -> bool:
    """A builder of torchtune's own as some section's ``_component_``."""
    return isinstance(data, dict) and any(
        isinstance(v, dict) and str(v.get("_component_", "")).startswith("torchtune.") for v in data.values())


def _task(keys: Keys) -> str:
    if keys.has("optimizer", "gradient_accumulation_steps", "loss"):
        return TRAIN
    if keys.has("tasks"):
        return "evaluation"
    if keys.has("prompt", "max_new_tokens"):
        return "generation"
    return "quantization" if keys.has("quantizer") else "inference"


def _recipe_name(document: Document) -> str | None:
    """The ``tune run`` line of the header whose ``--config`` is this file (KD configs show their
    teacher's fine-tune first), else the first one."""
    runs = RUN_LINE.findall(document.text)
    stem = Path(document.path).stem
    mine = [recipe for recipe, config in runs if Path(config).stem == stem]
    return (mine or [recipe for recipe, _ in runs] or [None])[0]


def _stage(keys: Keys, recipe: str | None) -> Fact:
    loss = str(keys.raw("loss._component_") or "")
    for present, stage in ((("policy_model", "reward_and_value_model"), "ppo"), (("teacher_model", "kd_loss"), "kd")):
        if keys.has(*present):
            return keys.fact(present[0] if keys.has(present[0]) else present[1], stage)
    if loss.endswith(("DPOLoss", "RSOLoss", "SimPOLoss")) or keys.has("ref_checkpointer"):
        return keys.fact("loss", "dpo")
    if keys.has("quantizer") and keys.has("optimizer"):
        return keys.fact("quantizer", "qat")
    return Fact("sft", None, f"{VERSION}: recipe {recipe or 'unnamed'}")


def _model(keys: Keys, key: str | None = None) -> tuple[Fact, dict | None, dict]:
    """The builder's HF name, its architecture as a config.json dict, and its LoRA defaults
    (``key``: another builder's, the distillation teacher's)."""
    key = key or ("policy_model._component_" if keys.has("policy_model") and not keys.has("model")
                  else "model._component_")
    component = keys.get(key)
    name = str(component.value or "")
    entry = builders().get(name)
    if entry is None:
        family = name.rsplit(".", 1)[-1]
        entry = next((e for e in builders().values() if e["component"].rsplit(".", 1)[-1] == family), None)
        if entry is None:
            return component, None, {}
        arch = {**entry["arch"], **{k: v for k, v in (keys.raw(key.rsplit(".", 1)[0]) or {}).items()
                                    if k in entry["arch"]}}
        entry = {**entry, "arch": arch, "hf": name}
    return Fact(entry["hf"], component.location), config_of(entry), entry.get("lora_defaults") or {}


def config_of(entry: dict) -> dict:
    """A builder's architecture as the config.json of the same model."""
    a = entry["arch"]
    config = {"model_type": entry["model_type"], "vocab_size": a["vocab_size"], "num_hidden_layers": a["num_layers"],
              "num_attention_heads": a["num_heads"], "num_key_value_heads": a.get("num_kv_heads") or a["num_heads"],
              "hidden_size": a["embed_dim"], "intermediate_size": a["intermediate_dim"],
              "max_position_embeddings": a["max_seq_len"], "head_dim": a.get("head_dim"),
              "tie_word_embeddings": bool(a.get("tie_word_embeddings")), "torch_dtype": "bfloat16"}
    return {k: v for k, v in config.items() if v is not None}


def _lora(keys: Keys, defaults: dict, kind: str) -> tuple[Fact, Fact, Fact, Fact]:
    if kind not in ("lora", "qlora"):
        return Fact(0), Fact(("all-linear",)), Fact(0.0), Fact(False)
    rank = keys.get("model.lora_rank", default=defaults.get("lora_rank", 8), convert=positive,
                    why=f"{VERSION} builder default")
    attn = keys.get("model.lora_attn_modules", default=("q_proj", "v_proj"))
    names = [MODULES.get(str(n), str(n)) for n in (attn.value or [])]
    mlp = keys.get("model.apply_lora_to_mlp", default=defaults.get("apply_lora_to_mlp", False), convert=truthy)
    where = Fact(tuple(names + (list(MLP) if mlp.value else [])), attn.location or mlp.location, attn.default)
    dropout = keys.get("model.lora_dropout", default=defaults.get("lora_dropout", 0.0))
    quant = keys.get("model.quantize_base", default=kind == "qlora", convert=truthy,
                     why=f"{VERSION}: {kind}_ builder ({'NF4' if kind == 'qlora' else 'dtype'} base)")
    return rank, where, dropout, quant


def _optimizer(keys: Keys) -> Fact:
    fact = keys.get("optimizer._component_", default="torch.optim.AdamW")
    short = str(fact.value).rsplit(".", 1)[-1]
    return Fact(OPTIMIZERS.get(short, short), fact.location, fact.default)


def _fsdp(keys: Keys, recipe: str | None) -> FsdpFacts | None:
    """The ``_distributed`` recipes shard with FSDP2 (``training.shard_model``), no mixed precision."""
    named = recipe is not None and "distributed" in recipe
    if not named and not keys.has("fsdp_cpu_offload", "fsdp_reshard_after_forward", "custom_sharded_layers"):
        return None
    reshard = keys.get("fsdp_reshard_after_forward", default=True, convert=truthy, why=f"{VERSION} default")
    return FsdpFacts(strategy=Fact("FULL_SHARD" if reshard.value else "SHARD_GRAD_OP", reshard.location,
                                   reshard.default),
                     version=Fact(2, None, f"{VERSION}: fully_shard"),
                     offload=keys.get("fsdp_cpu_offload", default=False, convert=truthy),
                     checkpointing=Fact(False), upcast=False)


def _switches(keys: Keys) -> dict[str, Fact]:
    """What the recipe switches on (torchtune 0.6.1): the chunked loss (``CEWithChunkedOutputLoss``,
    and its successor ``LinearCrossEntropyLoss``), compiled with ``compile``; a paged or fused
    optimizer; ``optimizer_in_bwd``; ``enable_activation_offloading`` (only with checkpointing,
    which the recipe requires)."""
    out: dict[str, Fact] = dora_switch(keys, "model.use_dora")
    loss = str(keys.raw("loss._component_") or "")
    if loss.endswith(("CEWithChunkedOutputLoss", "LinearCrossEntropyLoss")):
        compiled = truthy(keys.raw("compile")) and keys.has("compile")
        out["loss"] = keys.fact("loss._component_", "chunked-compiled" if compiled else "chunked")
    optimizer = str(keys.raw("optimizer._component_") or "")
    if "Paged" in optimizer:
        out["paged_optimizer"] = keys.fact("optimizer._component_", True)
    elif truthy(keys.raw("optimizer.fused")) and keys.has("optimizer.fused"):
        out["optimizer_impl"] = keys.fact("optimizer.fused", "fused")
    for key, name in (("optimizer_in_bwd", "optimizer_in_bwd"), ("enable_activation_offloading", "activation_offload")):
        if truthy(keys.raw(key)) and keys.has(key):
            out[name] = keys.fact(key, True)
    return out


def read_torchtune(document: Document) -> Recipe:
    keys = Keys(document, f"{VERSION} default")
    recipe = _recipe_name(document)
    model, config, defaults = _model(keys)
    name = str(keys.raw("model._component_") or "").rsplit(".", 1)[-1]
    kind = "qlora" if name.startswith("qlora_") else "lora" if name.startswith("lora_") else "full"
    rank, where, dropout, quant = _lora(keys, defaults, kind)
    dtype = keys.get("dtype", default="bf16", why=f"{VERSION}: every shipped config says bf16")
    weights = dtype_name(dtype.value)       # training.get_dtype's words; another is VL102 (rules.recipe.check_values)
    seq = keys.get("tokenizer.max_seq_len", default=None, convert=positive, why=f"{VERSION}: max_seq_len null")
    if seq.value is None and keys.has("tokenizer.max_seq_len"):
        seq = keys.fact("tokenizer.max_seq_len", None)       # null, written: no cap
    single = recipe is None or "single_device" in recipe or "distributed" not in recipe
    return Recipe(
        document=document, framework="torchtune", title="torchtune", task=_task(keys),
        stage=_stage(keys, recipe), model=model, revision=Fact("main"),
        switches=_switches(keys),
        teacher_config=_model(keys, "teacher_model._component_")[1] if keys.has("teacher_model") else None,
        reference=(keys.fact("ref_checkpointer", True) if keys.has("ref_checkpointer")
                   else Fact("auto", None, "the stage's rule")),
        adapter_dtype=Fact("weights", None, "torchtune builds the model, adapters included, under "
                                            "set_default_dtype(dtype)"),
        sync_each_batch=Fact(True, None, f"{VERSION}: its distributed recipes call backward on each micro-batch "
                                         "without no_sync, so FSDP2 reduce-scatters every one"),
        micro_batch=keys.get("batch_size", default=1, convert=positive),
        grad_accum=keys.get("gradient_accumulation_steps", default=1, convert=positive),
        seq_len=seq,
        packing=keys.get("dataset.packed", default=False, convert=truthy),
        grad_checkpointing=keys.get("enable_activation_checkpointing", default=False, convert=truthy),
        mixed_precision=Fact("no", dtype.location, f"{VERSION}: no autocast, all in dtype"),
        weights_dtype=Fact(weights, dtype.location, dtype.default),
        optimizer=_optimizer(keys),
        lora_rank=rank, lora_targets=where, lora_dropout=dropout,
        load_in_4bit=quant, load_in_8bit=Fact(False),
        attn=Fact("sdpa", None, f"{VERSION}: F.scaled_dot_product_attention"),
        deepspeed=Fact(None), fsdp=None if single and not keys.has("fsdp_cpu_offload") else _fsdp(keys, recipe),
        hf_trainer=False, keys=SPELLING,
        model_config=config, single_device=single and not keys.has("fsdp_cpu_offload"),
    )
