"""Megatron-Bridge jobs → the Megatron-LM :class:`Recipe` of the same arguments (docs/recipes.md,
"Megatron-Bridge").

Megatron-Bridge trains with Megatron-core itself (its DDP gradient buffer, distributed optimizer,
pipeline schedules and Transformer Engine layers), so its job is Megatron's job spelled in another
place: a ``ConfigContainer`` (the YAML ``ConfigContainer.to_yaml`` writes, ``run_config.yaml`` at
every checkpoint: ``_target_: megatron.bridge.training.config.ConfigContainer`` over sections
``model``, ``train``, ``optimizer``, ``ddp``, ``dataset``, ``tokenizer``, ``mixed_precision``,
``peft``). This reader lays each section's key onto the Megatron-LM argument it is (``ARGUMENTS``),
each still located where the YAML writes it, and reads that mapping with readers/megatron.py.

Read at Megatron-Bridge v0.6.0 (51885cf, with the Megatron-LM it pins, cd4afff); BR = src/megatron/
bridge/. What differs from a ``pretrain_gpt.py`` line:

- the tokens a sample holds are the dataset's (``dataset.seq_length``, the dump's ``sequence_length``),
  which Bridge asserts equal to ``model.seq_length`` for its GPT datasets (BR training/config.py:1485-1504);
- SwiGLU is ``gated_linear_unit: true`` with ``activation_func`` silu; tied embeddings and biased
  linears are GPTModelProvider's defaults (BR models/gpt_provider.py:139, MCore :205-207);
- an explicit ``model.vocab_size`` is used unpadded unless ``tokenizer.use_tokenizer_vocab_size``
  (BR training/setup.py:676-714), then padded to ``make_vocab_size_divisible_by`` x TP;
- ``ddp.use_distributed_optimizer`` or ``optimizer.use_distributed_optimizer`` turns it on for both
  (BR config.py:1940-1976); the gradient buffer is fp32 where ``ddp.grad_reduce_in_fp32`` (MCore's
  default False; ``bf16_mixed`` sets it True: BR training/mixed_precision.py:184-197);
- precision is the model's ``bf16`` / ``fp16``, or the ``mixed_precision`` recipe named or dumped;
  none is pure fp32 (there is no fp32 recipe);
- ``peft`` (LoRA, DoRA) is said (VL211), not priced.

An override file (the same sections without ``_target_``, merged over a Python recipe by
``apply_overrides``) states part of a job: it is not read as one (readers/registry.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact
from vramlint.readers.megatron import WAY_ON, Arguments, laid_out, read_megatron, spelled
from vramlint.readers.recipe import Feature, Keys, Recipe, truthy

VERSION = "Megatron-Bridge v0.6.0"
CONTAINER = "megatron.bridge.training.config.ConfigContainer"

# Megatron-LM argument → the Bridge keys that state it, first set wins (MCore's TransformerConfig and
# ModelParallelConfig names under ``model``; batches under ``train``)
ARGUMENTS: dict[str, tuple[str, ...]] = {
    **{name: (f"model.{name}",) for name in (
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
        "expert_model_parallel_size", "sequence_parallel", "num_layers", "hidden_size", "ffn_hidden_size",
        "num_attention_heads", "num_query_groups", "kv_channels", "position_embedding_type",
        "make_vocab_size_divisible_by", "hidden_dropout", "attention_dropout", "recompute_granularity",
        "recompute_method", "recompute_num_layers", "recompute_modules", "transformer_impl", "add_qkv_bias",
        "cpu_offloading_num_layers", "attention_backend", "expert_tensor_parallel_size", "moe_ffn_hidden_size",
        "moe_router_topk", "moe_shared_expert_intermediate_size", "moe_shared_expert_gate", "moe_layer_freq",
        "moe_token_dispatcher_type", "moe_expert_capacity_factor", "moe_aux_loss_coeff", "moe_latent_size",
        "qk_layernorm", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
        "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
        "mtp_num_layers", "cross_entropy_loss_fusion", "cross_entropy_fusion_impl", "defer_embedding_wgrad_compute",
        "wgrad_deferral_limit", "hybrid_layer_pattern", "hybrid_override_pattern", "mamba_num_heads",
        "mamba_head_dim", "mamba_state_dim", "mamba_num_groups", "normalization")},
    "num_virtual_stages_per_pipeline_rank": ("model.virtual_pipeline_model_parallel_size",),
    "pipeline_model_parallel_layout": ("model.pipeline_model_parallel_layout",),
    "decoder_first_pipeline_num_layers": ("model.num_layers_in_first_pipeline_stage",),
    "decoder_last_pipeline_num_layers": ("model.num_layers_in_last_pipeline_stage",),
    "num_experts": ("model.num_moe_experts",),
    "micro_batch_size": ("train.micro_batch_size",),
    "global_batch_size": ("train.global_batch_size",),
    "seq_length": ("dataset.seq_length", "dataset.sequence_length", "model.seq_length"),
    "max_position_embeddings": ("model.seq_length",),
    "vocab_size": ("model.vocab_size", "tokenizer.vocab_size"),
    "optimizer": ("optimizer.optimizer",),
    "use_precision_aware_optimizer": ("optimizer.use_precision_aware_optimizer",),
    "optimizer_cpu_offload": ("optimizer.optimizer_cpu_offload",),
    "optimizer_offload_fraction": ("optimizer.optimizer_offload_fraction",),
    "num_distributed_optimizer_instances": ("ddp.num_distributed_optimizer_instances",),
}
# The Megatron-LM flags Bridge states in keys of its own, beside ARGUMENTS' (derived flags: ``_derived``)
FLAG_KEYS = {"use_distributed_optimizer": "ddp.use_distributed_optimizer", "swiglu": "model.gated_linear_unit",
             "bf16": "mixed_precision", "fp16": "mixed_precision"}


def in_keys(text: str) -> str:
    """A hint written in Megatron-LM's flags with each ``--flag`` the ConfigContainer key that states it
    (``add --sequence-parallel`` -> ``add model.sequence_parallel``)."""
    return spelled(text, {**{name: paths[0] for name, paths in ARGUMENTS.items()}, **FLAG_KEYS})


# How hints and findings spell a setting (the keys the file writes)
SPELLING = {"micro_batch": "train.micro_batch_size", "seq_len": "dataset.seq_length",
            "grad_accum": "train.global_batch_size", "grad_checkpointing": "model.recompute_granularity",
            "tensor_parallel": "model.tensor_model_parallel_size", "sequence_split": "model.context_parallel_size",
            "optimizer": "optimizer.optimizer", "model": "model.num_layers", "mixed_precision": "mixed_precision",
            "weights_dtype": "mixed_precision"}
# The mixed-precision recipes' compute dtype and gradient-buffer choice (BR training/mixed_precision.py:
# 167-429; ``_`` and ``-`` spellings alike): every bf16 recipe reduces in fp32, the fp16 ones do not
PRECISION_RECIPES = ("bf16", "fp16")


def looks_like_megatron_bridge(data: Any) -> bool:
    """A ConfigContainer dump: its ``_target_``, or its sections ``model`` (a Megatron model
    provider) with ``train`` and ``ddp`` or ``optimizer`` each naming its own ``_target_``."""
    if not isinstance(data, dict):
        return False
    if str(data.get("_target_", "")).endswith("ConfigContainer"):
        return True
    model = data.get("model")
    return isinstance(model, dict) and str(model.get("_target_", "")).startswith("megatron.") and \
        isinstance(data.get("train"), dict)


def _target(value: Any) -> Any:
    """A dumped callable, dtype or enum (``{_target_: torch.nn.functional.silu, _call_: false}``,
    ``{_target_: ...AttnBackend, _args_: [5], _name_: auto}``) as the name it stands for."""
    if isinstance(value, dict) and "_target_" in value:
        return value.get("_name_") or str(value["_target_"]).rsplit(".", 1)[-1]
    return value


def _mixed(keys: Keys) -> dict[str, tuple[Any, str]]:
    """What ``mixed_precision`` sets over the model's and DDP's fields, each with the key that says
    it: ``runtime_config_update`` copies every same-named field of the recipe into model, optimizer
    and ddp (BR training/mixed_precision.py:138-157), so a dumped MixedPrecisionConfig wins over
    ``model.bf16`` / ``model.fp8`` / ``ddp.grad_reduce_in_fp32``; a recipe name (``bf16_mixed``,
    ``bf16_with_fp8_delayed_scaling_mixed``, ``bf16_with_nvfp4_mixed``; ``-`` or ``_``) sets its
    dtype, fp8 or fp4, and the gradient reduction in fp32 for bf16, not fp16 (:184-213)."""
    recipe = keys.raw("mixed_precision")
    if isinstance(recipe, dict) and any(k in recipe for k in ("bf16", "fp16", "fp8", "grad_reduce_in_fp32")):
        return {name: (recipe[name], f"mixed_precision.{name}") for name in ("bf16", "fp16", "fp8", "fp4",
                                                                              "grad_reduce_in_fp32") if name in recipe}
    name = str(_target(recipe) or "").replace("-", "_")
    if not name:
        return {}
    dtype = next((flag for flag in PRECISION_RECIPES if name.startswith(flag)), None)
    out = {flag: (dtype == flag, "mixed_precision") for flag in PRECISION_RECIPES} if dtype else {}
    if dtype:
        out["grad_reduce_in_fp32"] = (dtype == "bf16", "mixed_precision")
    for flag in ("fp8", "fp4"):
        if flag in name:
            out[flag] = (name, "mixed_precision")
    return out


def _setting(keys: Keys, mixed: dict, name: str, path: str) -> tuple[Any, str]:
    """A precision field: the mixed-precision recipe's where it sets it, else the section's."""
    return mixed[name] if name in mixed else (keys.raw(path), path)


def _derived(keys: Keys) -> dict[str, tuple[Any, str]]:
    """The Megatron flags Bridge states in other words: value and the key that says it."""
    out: dict[str, tuple[Any, str]] = {}
    mixed = _mixed(keys)
    precision = None
    for flag in PRECISION_RECIPES:
        value, path = _setting(keys, mixed, flag, f"model.{flag}")
        if truthy(value) and precision is None:
            precision, out[flag] = flag, (True, path)
    for flag in ("fp8", "fp4"):
        value, path = _setting(keys, mixed, flag, f"model.{flag}")
        if value:
            out[flag] = (value, path)
    model = keys.raw("model") if isinstance(keys.raw("model"), dict) else {}
    if truthy(model.get("gated_linear_unit")):
        out["swiglu"] = (True, "model.gated_linear_unit")
    if model.get("num_query_groups") not in (None, model.get("num_attention_heads")):
        out["group_query_attention"] = (True, "model.num_query_groups")
    if not truthy(model.get("share_embeddings_and_output_weights", True)):
        out["untie_embeddings_and_output_weights"] = (True, "model.share_embeddings_and_output_weights")
    if not truthy(model.get("add_bias_linear", True)):
        out["disable_bias_linear"] = (True, "model.add_bias_linear")
    for path in ("ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer"):
        if truthy(keys.raw(path)):
            out["use_distributed_optimizer"] = (True, path)
            break
    reduce, path = _setting(keys, mixed, "grad_reduce_in_fp32", "ddp.grad_reduce_in_fp32")
    if precision:           # MCore's DDP default: the parameters' dtype (distributed_data_parallel_config.py:15)
        out["accumulate_allreduce_grads_in_fp32" if truthy(reduce) else "grad_reduce_in_bf16"] = (True, path)
    sized_by_tokenizer = truthy(keys.raw("tokenizer.use_tokenizer_vocab_size"))
    if keys.raw("model.vocab_size") is not None and not sized_by_tokenizer:
        out["no_pad_vocab_size"] = (True, "model.vocab_size")    # used as stated (setup.py:706-714)
    return out


def arguments(document: Document) -> Arguments:
    """The ConfigContainer as the Megatron-LM argument mapping it is, each located at its key."""
    keys = Keys(document, f"{VERSION} default")
    return laid_out(document, keys, ARGUMENTS, _derived(keys), _target)


def _features(keys: Keys, recipe: Recipe, args: Arguments) -> tuple[Feature, ...]:
    """What Bridge turns on that the Megatron runtime does not price, beside readers/megatron.py's (said
    in its keys)."""
    out = [replace(feature, what=in_keys(feature.what)) for feature in recipe.features]
    peft = keys.raw("peft")
    if isinstance(peft, dict):
        kind = str(peft.get("_target_", "LoRA")).rsplit(".", 1)[-1]
        out.append(Feature(Fact(kind, args.locate("$.peft")),
                           f"{kind} (peft): priced as full training; the frozen base keeps no gradients or "
                           "optimizer states", "high"))
    if args.data.get("fp4"):
        out.append(Feature(Fact(args.data["fp4"], args.locate("$.fp4")), "fp4 (Transformer Engine NVFP4): estimated "
                           "as bf16 training; its quantized weight copies and scales"))
    activation = _target(keys.raw("model.activation_func"))
    if activation and "swiglu" in args.data and activation != "silu":
        out.append(Feature(keys.get("model.activation_func"),
                           f"gated {activation} MLP: priced as SwiGLU (the same tensors)", "low"))
    return tuple(out)


def _fine_tuning(keys: Keys, args: Arguments) -> tuple[Fact, Fact] | None:
    """Stage and packing of a fine-tuning job (a pretrained checkpoint, an SFT / Hugging Face
    dataset, or PEFT): samples as long as each is, unless packed to ``packed_sequence_size``."""
    dataset = str(keys.raw("dataset._target_") or "")
    if not (keys.raw("checkpoint.pretrained_checkpoint") or isinstance(keys.raw("peft"), dict)
            or "SFT" in dataset or "hf_dataset" in dataset):
        return None
    packed = keys.raw("dataset.packed_sequence_specs.packed_sequence_size")
    return (Fact("sft", args.locate("$.dataset"), f"{VERSION}: a fine-tuning dataset"),
            Fact(bool(packed and packed > 0), args.locate("$.dataset"),
                 f"{VERSION}: fine-tuning samples are as long as each is (dataset.seq_length a cap)"))


# Model kinds whose layers the Megatron runtime does not price (a provider's key that says it): no
# estimate (VL011), never a dense GPT's in their place. (A Mamba provider's hybrid_override_pattern is
# priced: readers/megatron.py's ``_hybrid`` reads it and the mamba_* widths as the flags they are.)
UNPRICED = (("model.heterogeneous_layers_config_path", "heterogeneous layers (a shape per layer)"),)


def _unpriced(recipe: Recipe, keys: Keys, args: Arguments) -> Recipe:
    if recipe.model_config is None:         # already not estimated, for the reason the Megatron reader gives
        return recipe
    for path, what in UNPRICED:
        value = keys.raw(path)              # a flag, or a pattern string (an empty one says none)
        if value and str(value).lower() not in ("false", "0"):
            return replace(recipe, model_config=None, model_hint=WAY_ON["unpriced"], model=Fact(
                f"Megatron-Bridge model ({what}: its layers are not priced yet)", args.locate(f"$.{path}")))
    return recipe


def _fp32(recipe: Recipe) -> dict:
    """No precision stated is fp32 training, said in Bridge's keys (there is no fp32 recipe)."""
    if recipe.mixed_precision.from_file:
        return {}
    why = f"{VERSION}: fp32 training (no mixed_precision recipe, no model.bf16 / fp16)"
    return {"mixed_precision": Fact("no", None, why), "weights_dtype": Fact("float32", None, why)}


def read_megatron_bridge(document: Document) -> Recipe:
    args = arguments(document)
    keys = Keys(document, f"{VERSION} default")
    recipe = _unpriced(read_megatron(args), keys, args)
    tuned = _fine_tuning(keys, args)
    stage, packing = tuned if tuned else (recipe.stage, recipe.packing)
    return replace(recipe, document=document, title="Megatron-Bridge", keys=SPELLING, vocabulary="megatron-bridge",
                   release=f"{VERSION} (Megatron-core's runtime: {recipe.release})", stage=stage, packing=packing,
                   features=_features(keys, recipe, args), model_hint=in_keys(recipe.model_hint), **_fp32(recipe))


__all__ = ["ARGUMENTS", "in_keys", "looks_like_megatron_bridge", "read_megatron_bridge"]
