"""LitGPT configs (``config_hub/finetune/*/{lora,qlora,full}.yaml``, ``config_hub/pretrain/*.yaml``)
and ``litgpt finetune|pretrain`` lines → a :class:`Recipe` (docs/recipes.md, "LitGPT").

LitGPT's scripts are functions whose arguments jsonargparse fills from ``--config FILE`` and
``--train.micro_batch_size 2``-style flags; a key the file leaves out is the function's default
(litgpt 0.5.13 ``finetune/{lora,full,adapter,adapter_v2,lora_legacy}.py`` and ``pretrain.py``
``setup``, read from their signatures). Which script runs the file is the launch line's word
(``litgpt finetune lora``), else what the file holds: ``lora_*`` keys are LoRA, ``model_name``
pretraining, anything else full fine-tuning.

How the scripts run it, read from their code:

- ``precision`` ``bf16-true`` / ``16-true``: every parameter, gradient and optimizer state in
  16 bit (Fabric builds the model in it), nothing autocast; ``bf16-mixed`` / ``16-mixed``: fp32
  weights under autocast; unset: ``get_default_supported_precision(training=True)``, bf16-mixed
  where the GPU has bf16, else 16-mixed (utils.py:363-380).
- ``quantize: bnb.nf4`` (and its kin): Fabric's ``BitsandbytesPrecision`` makes every
  ``nn.Linear`` 4-bit, and the optimizer is bitsandbytes' ``PagedAdamW`` (utils.py:619-633);
  refused with mixed precision and on more than one GPU (lora.py:144-164).
- One GPU: plain PyTorch. More (``devices`` x ``num_nodes``): LoRA shards with FSDP2
  (``ModelParallelStrategy``, ``parallelize_fn``: every block checkpointed), full / adapter
  fine-tuning with FSDP1 FULL_SHARD and every ``Block`` checkpointed, pretraining with FSDP1
  HYBRID_SHARD, unchecked, ``torch.compile``d, fused AdamW.
- The loss: the fine-tuning scripts with adapters call ``model(input_ids, lm_head_chunk_size=128)``
  (a list of 128-position logits chunks) and ``chunked_cross_entropy``; full fine-tuning and
  pretraining the whole logits, cross-entropy in 128-row chunks (memory/parts/loss.py).
- ``train.max_seq_length`` caps each sample (unset: the longest in the data); pretraining reads
  whole blocks of ``train.max_seq_length`` or the model's ``block_size``.
"""

from __future__ import annotations

from typing import Any

from vramlint.documents import Document
from vramlint.models.litgpt import VERSION, config_named, config_of, hf_config
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import TRAIN, Feature, FsdpFacts, Keys, Recipe, Refusal, nested, positive, truthy

SCRIPTS = ("lora", "full", "adapter", "adapter_v2", "lora_legacy", "pretrain")
ADAPTERS = ("lora", "lora_legacy", "adapter", "adapter_v2")
LORA_KEYS = ("lora_r", "lora_alpha", "lora_dropout", "lora_query", "lora_key", "lora_value", "lora_projection",
             "lora_mlp", "lora_head")
# setup()'s TrainArgs defaults (micro-batch, global batch): the fine-tuning scripts' and pretrain.py's
TRAIN_DEFAULTS = {"pretrain": (4, 512)}
FINETUNE_DEFAULTS = (1, 16)
SPELLING = {"micro_batch": "train.micro_batch_size", "grad_accum": "train.global_batch_size",
            "seq_len": "train.max_seq_length", "mixed_precision": "precision", "weights_dtype": "precision",
            "optimizer": "optimizer", "lora_rank": "lora_r", "lora_targets": "lora_query",
            "lora_dropout": "lora_dropout", "load_in_4bit": "quantize", "model": "checkpoint_dir",
            "gpus_per_node": "devices", "nodes": "num_nodes"}
PRECISIONS = {"bf16-true": ("no", "bfloat16"), "bf16-mixed": ("bf16", "float32"), "16-true": ("no", "float16"),
              "16-mixed": ("fp16", "float32"), "32-true": ("no", "float32"), "32": ("no", "float32"),
              "bf16": ("bf16", "float32"), "16": ("fp16", "float32")}
# LitGPT's LoRA switches -> the linears they adapt (litgpt/lora.py: query/key/value are parts of the fused qkv)
LORA_TARGETS = {"lora_query": "q_proj", "lora_key": "k_proj", "lora_value": "v_proj", "lora_projection": "o_proj"}
LORA_MLP = ("gate_proj", "up_proj", "down_proj")
OPTIMIZERS = {"AdamW": "adamw", "Adam": "adamw", "SGD": "sgd", "AdamW8bit": "adamw-8bit", "PagedAdamW": "adamw",
              "Adafactor": "adafactor"}
QUANTIZED = ("bnb.nf4", "bnb.nf4-dq", "bnb.fp4", "bnb.fp4-dq")
# Each script's ``setup()`` parameters: the only top-level keys jsonargparse lets its config hold
_COMMON = ("out_dir", "precision", "devices", "num_nodes", "data", "train", "eval", "log", "optimizer", "logger_name",
           "seed")
_FINETUNE = ("checkpoint_dir", "access_token") + _COMMON
ACCEPTED = {"lora": _FINETUNE + ("quantize",) + LORA_KEYS, "lora_legacy": _FINETUNE + ("quantize",) + LORA_KEYS,
            "full": _FINETUNE + ("resume",), "adapter": _FINETUNE + ("quantize",),
            "adapter_v2": _FINETUNE + ("quantize", "resume"),
            "pretrain": _COMMON + ("model_name", "model_config", "initial_checkpoint_dir", "resume", "tokenizer_dir")}


def looks_like_litgpt(data: Any) -> bool:
    """A fine-tuning config (``checkpoint_dir`` with a ``train`` section) or a pretraining one
    (``model_name`` or ``model_config`` with ``train``), as ``litgpt ... --config`` reads them."""
    if not isinstance(data, dict) or not isinstance(data.get("train"), dict):
        return False
    return "checkpoint_dir" in data or ("model_name" in data and ("out_dir" in data or "precision" in data)) \
        or isinstance(data.get("model_config"), dict)


def _script(keys: Keys, trainer: Fact | None) -> Fact:
    """Which script runs the file: the launch's word, else the file's keys."""
    if trainer is not None and trainer.value in SCRIPTS:
        return trainer
    if keys.has("model_name", "model_config") and not keys.has("checkpoint_dir"):
        return Fact("pretrain", None, f"{VERSION}: model_name, as litgpt pretrain reads it")
    if keys.has(*LORA_KEYS):
        return Fact("lora", None, f"{VERSION}: lora_* keys, as litgpt finetune lora reads them")
    return Fact("full", None, f"{VERSION}: no adapter keys, as litgpt finetune full reads it")


def _model(keys: Keys, script: str) -> tuple[Fact, dict | None]:
    """The model: pretraining's ``model_config`` (LitGPT's Config fields) or ``model_name``, a
    fine-tune's ``checkpoint_dir`` (``checkpoints/<org>/<name>``, or the repository id itself),
    as LitGPT's own config of that name (``config_named``); an unknown name stays a name to resolve."""
    if script == "pretrain":
        raw = keys.raw("model_config")
        name = keys.get("model_name")
        if isinstance(raw, dict) and raw:           # it replaces model_name's config whole (pretrain.py:127)
            fields = config_of(raw)
            if fields.get("intermediate_size"):
                return keys.fact("model_config", f"litgpt {raw.get('name') or name.value or 'model_config'}"), \
                    hf_config(fields, tie=_tied(keys))
    else:
        name = keys.get("checkpoint_dir")
    text = str(name.value or "")
    parts = [p for p in text.replace("\\", "/").split("/") if p and p != "."]
    if parts and parts[0] == "checkpoints":
        parts = parts[1:]
    repo = "/".join(parts[-2:]) if parts else ""
    found = config_named(repo) if repo else None
    if found is None:
        return Fact(repo or None, name.location, name.default), None
    return Fact(found[1].get("hf") or found[0], name.location, name.default), \
        hf_config(found[1], tie=script == "pretrain" and _tied(keys))


def _tied(keys: Keys) -> bool:
    return truthy(keys.raw("train.tie_embeddings")) and keys.has("train.tie_embeddings")


def _precision(keys: Keys) -> tuple[Fact, Fact]:
    fact = keys.get("precision", default=None)
    if fact.value is None:
        why = f"{VERSION}: get_default_supported_precision(training=True): bf16-mixed, 16-mixed without bf16"
        return Fact("auto", None, why), Fact("float32", None, why)
    mixed, weights = PRECISIONS.get(str(fact.value), (str(fact.value), "float32"))
    return Fact(mixed, fact.location), Fact(weights, fact.location)


def _lora(keys: Keys, script: str) -> tuple[Fact, Fact, Fact]:
    if script not in ("lora", "lora_legacy"):
        return Fact(0), Fact(("all-linear",)), Fact(0.0)
    rank = keys.get("lora_r", default=8, convert=positive)
    names, where = [], None
    for key, target in LORA_TARGETS.items():
        fact = keys.get(key, default=key in ("lora_query", "lora_value"), convert=truthy)
        if fact.value:
            names.append(target)
            where = where or fact.location
    mlp = keys.get("lora_mlp", default=False, convert=truthy)
    if mlp.value:
        names += list(LORA_MLP)
    first = next((k for k in LORA_KEYS[3:] if keys.has(k)), None)
    located = keys.document.locate(f"$.{first}") if first else None
    dropout = keys.get("lora_dropout", default=0.05)
    return rank, Fact(tuple(names), located, "" if located else f"{VERSION}: lora_query and lora_value"), dropout


def _optimizer(keys: Keys) -> Fact:
    fact = keys.get("optimizer.class_path", "optimizer", default="AdamW")
    short = str(fact.value).rsplit(".", 1)[-1] if isinstance(fact.value, str) else "AdamW"
    return Fact(OPTIMIZERS.get(short, short), fact.location, fact.default)


def _gpus(keys: Keys, script: str) -> tuple[Fact, Fact] | None:
    """``devices`` x ``num_nodes``: the processes Fabric starts (``"auto"`` / -1: every visible GPU)."""
    devices = keys.get("devices", default="auto" if script == "pretrain" else 1, convert=positive)
    nodes = keys.get("num_nodes", default=1, convert=positive)
    if devices.value in ("auto", -1, "-1"):
        return None
    return devices, nodes


def _fsdp(script: str, devices: int) -> FsdpFacts | None:
    """What ``devices x num_nodes > 1`` turns on (module docstring)."""
    if devices <= 1:
        return None
    said = f"{VERSION} {script}.py setup"
    pretrain = script == "pretrain"
    return FsdpFacts(Fact("HYBRID_SHARD" if pretrain else "FULL_SHARD", None, said),
                     Fact(2 if script == "lora" else 1, None, said), Fact(False),
                     Fact(not pretrain, None, said + ("" if pretrain else ": every Block checkpointed")), upcast=False)


def _switches(keys: Keys, script: str, quantized: bool) -> dict[str, Fact]:
    """What the script's code runs (module docstring): its loss, SDPA over repeated KV heads, the
    loop that holds its loss; with ``quantize``, PagedAdamW and the replaced embedding held
    (lora.py:200-214: any bitsandbytes mode), the 4-bit kind."""
    here = Fact(True, None, f"{VERSION} {script}.py")
    loss = "litgpt-chunked" if script in ADAPTERS else "litgpt-pretrain" if script == "pretrain" else "litgpt"
    out = {"loss": Fact(loss, None, here.default),
           "sdpa_repeat_kv": here,
           "graph_held": Fact(True, None, f"{here.default}: the loop's loss lives to the next iteration's")}
    if str(keys.raw("quantize") or "").startswith("bnb.") and "quantize" in ACCEPTED[script]:
        where = keys.document.locate("$.quantize")
        out |= {"paged_optimizer": Fact(True, where), "embedding_copy": Fact(True, where)}
        if quantized:
            out["bnb_4bit"] = Fact(str(keys.raw("quantize"))[4:], where)
    if script == "pretrain":
        out["optimizer_impl"] = Fact("fused", None, f"{VERSION} pretrain.py: fused=True on CUDA")
    return out


def _refusals(keys: Keys, quantized: bool, mixed: Fact, script: str) -> tuple[Refusal, ...]:
    """LitGPT's start-up checks the settings meet: jsonargparse's, a key the script's ``setup()``
    has no parameter for (its message, as litgpt 0.5.13 prints it), and lora.py:144-164's."""
    command = script if script == "pretrain" else f"finetune_{script}"
    out = [Refusal("always", key, f"Validation failed: Subcommand '{command}' does not accept nested key '{key}'")
           for key in keys.data if key not in ACCEPTED[script]]
    if quantized and "quantize" in ACCEPTED[script]:
        out.append(Refusal("distributed", "quantize", "Quantization is currently not supported for multi-GPU "
                                                      "training. Please set devices=1 and num_nodes=1 when using "
                                                      "the --quantize flag."))
        if mixed.value != "no":
            out.append(Refusal("always", "precision", "Quantization and mixed precision is not supported."))
    return tuple(out)


def read_litgpt(document: Document, trainer: Fact | None = None) -> Recipe:
    document = nested(document)
    keys = Keys(document, f"{VERSION} default")
    script = _script(keys, trainer)
    name = str(script.value)
    model, config = _model(keys, name)
    micro_default, global_default = TRAIN_DEFAULTS.get(name, FINETUNE_DEFAULTS)
    micro = keys.get("train.micro_batch_size", default=micro_default, convert=positive)
    gpus = _gpus(keys, name)
    devices = gpus[0].value * gpus[1].value if gpus and all(isinstance(f.value, int) for f in gpus) else 1
    global_batch = keys.get("train.global_batch_size", default=global_default, convert=positive)
    accum = (max(1, global_batch.value // devices // micro.value)
             if all(isinstance(v, int) for v in (global_batch.value, micro.value)) and micro.value else 1)
    quantize = keys.get("quantize", default=None)
    quantized = str(quantize.value) in QUANTIZED
    mixed, weights = _precision(keys)
    rank, where, dropout = _lora(keys, name)
    seq = keys.get("train.max_seq_length", default=None, convert=positive,
                   why=f"{VERSION}: max_seq_length null, each sample as long as it is")
    if name == "pretrain" and seq.value is None and config is not None:
        seq = Fact(config.get("max_position_embeddings"), None, f"{VERSION} pretrain.py: the model's block_size")
    return Recipe(
        document=document, framework="litgpt", title="LitGPT", task=TRAIN,
        stage=Fact("pt" if name == "pretrain" else "sft", script.location, script.default or f"litgpt {name}"),
        model=model, revision=Fact("main"), model_config=config,
        micro_batch=micro, grad_accum=Fact(accum, global_batch.location, global_batch.default),
        seq_len=seq, packing=Fact(name == "pretrain", None, f"{VERSION}: pretraining reads whole blocks"),
        grad_checkpointing=Fact(False, None, f"{VERSION}: no checkpointing on one GPU"),
        mixed_precision=mixed, weights_dtype=weights, optimizer=_optimizer(keys),
        lora_rank=rank, lora_targets=where, lora_dropout=dropout,
        load_in_4bit=Fact(quantized, quantize.location, quantize.default),
        load_in_8bit=Fact(str(quantize.value) == "bnb.int8-training", quantize.location, quantize.default),
        attn=_attention(config),
        adapter_dtype=Fact("weights", None, f"{VERSION}: Fabric builds the adapters in the model's dtype"),
        deepspeed=Fact(None), fsdp=_fsdp(name, devices), hf_trainer=False, keys=SPELLING,
        switches=_switches(keys, name, quantized), gpus=gpus, release=VERSION, model_code="litgpt",
        sync_each_batch=Fact(False, None, f"{VERSION}: fabric.no_backward_sync while accumulating"),
        refusals=_refusals(keys, quantized, mixed, name),
        features=_features(keys, script, rank), notes=() if gpus else (
            f"devices auto ({VERSION} {name}.py): every GPU the run sees, the count --gpus gives",),
    )


def _attention(config: dict | None) -> Fact:
    """LitGPT's ``CausalSelfAttention``: SDPA, except where the scores are soft-capped (Gemma-2):
    its own matmul, tanh and fp32 softmax, every score kept (litgpt/model.py:582-591)."""
    if config and config.get("attn_logit_softcapping"):
        return Fact("eager", None, f"{VERSION}: soft-capped scores are LitGPT's own matmul-softmax attention, "
                                   "not SDPA (model.py:582-591)")
    return Fact("sdpa", None, f"{VERSION}: F.scaled_dot_product_attention")


def _features(keys: Keys, script: Fact, rank: Fact) -> tuple[Feature, ...]:
    """What the job trains that is not priced: LLaMA-Adapter's prompts and gates (estimated as full
    fine-tuning: high), LoRA on lm_head (its adapter and the input it keeps: low)."""
    out = []
    if str(script.value).startswith("adapter"):
        out.append(Feature(script, f"LitGPT's {script.value} method (it trains only the adapter's prompts and gates: "
                                   "priced as full fine-tuning)", "high"))
    head = keys.get("lora_head", default=False, convert=truthy)
    if rank.value and head.value:
        out.append(Feature(head, "LoRA on lm_head (its adapter, and the lm_head input its lora_A keeps)"))
    return tuple(out)
