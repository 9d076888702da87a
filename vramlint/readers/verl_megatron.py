"""verl's Megatron workers (``model_engine=megatron``, or the deprecated ``--config-name
ppo_megatron_trainer``) → the Megatron :class:`Layout` the actor trains under, and which engine a
job runs at all.

Read from verl 0.9.1 (workers/engine/megatron/transformer_impl.py, workers/engine/base.py,
utils/megatron_utils.py, trainer/config/_generated_ppo_megatron_trainer.yaml):

- The engine: ``ppo_trainer.yaml`` composes ``${model_engine}_actor`` (``dp``: FSDP / FSDP2 by
  ``actor.strategy``; ``megatron``; ``torchtitan`` and ``veomni`` engines besides), and
  ``ppo_megatron_trainer.yaml`` is ``ppo_trainer`` with ``override model_engine: megatron``.
- The actor is a Megatron-core GPT model that Megatron-Bridge builds from the Hugging Face config
  (``AutoBridge.from_hf_pretrained(...).to_megatron_provider``) with the sizes of
  ``actor.megatron``: ``tensor_model_parallel_size``, ``pipeline_model_parallel_size``,
  ``virtual_pipeline_model_parallel_size``, ``context_parallel_size``, ``expert_model_parallel_size``,
  ``expert_tensor_parallel_size``, ``sequence_parallel`` (true), and whatever
  ``override_transformer_config`` adds (the recompute settings live there: verl's
  ``model.enable_gradient_checkpointing`` is not read by this engine). Flash attention, the
  alltoall token dispatcher, no load-balancing loss (``moe_router_load_balancing_type`` none).
- bf16 parameters (``megatron.dtype``) in Megatron's DDP with fp32 gradient reduction
  (``_resolve_override_ddp_config``: ``grad_reduce_in_fp32`` unless the precision-aware optimizer
  keeps sub-fp32 main gradients) and the distributed optimizer (``use_distributed_optimizer`` true).
- A mini-batch of ``ppo_mini_batch_size`` x ``rollout.n`` sequences goes through Megatron's pipeline
  schedule as micro-batches of ``ppo_micro_batch_size_per_gpu`` on each data-parallel rank
  (``forward_backward_batch``); the data-parallel size is the world over TP x PP x CP.
"""

from __future__ import annotations

from vramlint.readers.deepspeed import Fact
from vramlint.readers.megatron import Layout, as_words
from vramlint.readers.recipe import Keys, positive

VERSION = "verl 0.9.1"
ACTOR = "actor_rollout_ref.actor"
MEGATRON = f"{ACTOR}.megatron"
OVERRIDES = f"{MEGATRON}.override_transformer_config"
# model_engine -> the actor's strategy that engine's actor config states (trainer/config/actor/*_actor.yaml)
ENGINES = {"dp": "fsdp", "megatron": "megatron", "torchtitan": "torchtitan", "veomni": "veomni"}
# The composed defaults readers/verl.py lays a job over, by engine (dev/verl_defaults.py)
DEFAULTS = {"megatron": "verl_ppo_megatron_trainer.json"}
DEFAULT_ENGINE = "dp"
# How hints and findings spell a setting the Megatron engine states in its own section
SPELLING = {"grad_checkpointing": f"{OVERRIDES}.recompute_granularity",
            "tensor_parallel": f"{MEGATRON}.tensor_model_parallel_size",
            "sequence_split": f"{MEGATRON}.context_parallel_size", "mixed_precision": f"{MEGATRON}.dtype",
            "weights_dtype": f"{MEGATRON}.dtype", "optimizer": f"{ACTOR}.optim.optimizer"}


def engine_of(data: dict) -> str:
    """The engine a job composes: ``model_engine`` where written (a launch override, or a Hydra
    ``defaults`` entry ``override model_engine: X``), the Megatron one where the actor's strategy
    says megatron (the launch reader writes it for ``--config-name ppo_megatron_trainer``), or a
    ``defaults`` list that composes ``ppo_megatron_trainer``; verl's ``dp`` otherwise."""
    stated = data.get("model_engine")
    if isinstance(stated, str) and stated:
        return stated
    for entry in data.get("defaults") or ():
        if isinstance(entry, dict) and "override model_engine" in entry:
            return str(entry["override model_engine"])
        if str(entry).startswith("ppo_megatron_trainer"):
            return "megatron"
    section = (data.get("actor_rollout_ref") or {}) if isinstance(data.get("actor_rollout_ref"), dict) else {}
    actor = section.get("actor") if isinstance(section.get("actor"), dict) else {}
    strategy = data.get(f"{ACTOR}.strategy", actor.get("strategy"))
    return "megatron" if strategy == "megatron" else DEFAULT_ENGINE


def _grad_bytes(keys: Keys) -> Fact:
    """The DDP gradient buffer's element (transformer_impl.py ``_resolve_override_ddp_config``): fp32
    unless ``override_ddp_config.grad_reduce_in_fp32`` says otherwise or the precision-aware
    optimizer keeps sub-fp32 main gradients."""
    stated = keys.value(f"{MEGATRON}.override_ddp_config.grad_reduce_in_fp32")
    if stated.value is not None:
        return Fact(4 if stated.value else 2, stated.location)
    aware = keys.flag(f"{ACTOR}.optim.use_precision_aware_optimizer")
    main = keys.value(f"{ACTOR}.optim.main_grads_dtype")
    low = aware.value and str(main.value).lower() not in ("fp32", "float32")
    return Fact(2 if low else 4, main.location if low else None,
                f"{VERSION}: grad_reduce_in_fp32 (transformer_impl.py _resolve_override_ddp_config)")


def read_layout(keys: Keys, micro: Fact, total: Fact) -> Layout:
    """The actor's Megatron layout (``actor.megatron``) in Megatron's terms; the global batch
    (``total``) is the mini-batch in micro-batch rows, which sets the micro-batches a pipeline
    flush holds."""
    count, value = keys.count, keys.value
    return Layout(
        launched=False,                   # verl's worker builds Megatron-core itself: no validate_args
        tensor=count(f"{MEGATRON}.tensor_model_parallel_size"),
        pipeline=count(f"{MEGATRON}.pipeline_model_parallel_size"),
        context=count(f"{MEGATRON}.context_parallel_size"),
        expert=count(f"{MEGATRON}.expert_model_parallel_size"),
        virtual_layers=value(f"{OVERRIDES}.num_layers_per_virtual_pipeline_stage"),
        virtual_stages=value(f"{MEGATRON}.virtual_pipeline_model_parallel_size"),
        first_layers=value(f"{OVERRIDES}.num_layers_in_first_pipeline_stage"),
        last_layers=value(f"{OVERRIDES}.num_layers_in_last_pipeline_stage"),
        embedding_slot=keys.flag(f"{OVERRIDES}.account_for_embedding_in_pipeline_split"),
        loss_slot=keys.flag(f"{OVERRIDES}.account_for_loss_in_pipeline_split"),
        sequence_parallel=keys.flag(f"{MEGATRON}.sequence_parallel"),
        distributed_optimizer=keys.flag(f"{MEGATRON}.use_distributed_optimizer"),
        granularity=value(f"{OVERRIDES}.recompute_granularity"),
        method=value(f"{OVERRIDES}.recompute_method"),
        recompute_layers=value(f"{OVERRIDES}.recompute_num_layers", positive),
        modules=value(f"{OVERRIDES}.recompute_modules", as_words),
        micro_batch=micro,
        global_batch=total,
        grad_bytes=_grad_bytes(keys),
        dropout=Fact(False, None, f"{VERSION}: Megatron-Bridge's providers carry the Hugging Face config's dropouts "
                                  "(none in the causal LMs it converts)"),
        num_experts=Fact(None, None, "the model's own (its Hugging Face config)"),
        instances=Fact(1),
        scores=Fact(0, None, f"{VERSION}: attention_backend flash (transformer_impl.py)"),
        expert_tensor=value(f"{MEGATRON}.expert_tensor_parallel_size"),
        dispatcher=Fact(value(f"{OVERRIDES}.moe_token_dispatcher_type").value or "alltoall", None,
                        f"{VERSION}: moe_token_dispatcher_type alltoall (transformer_impl.py)"),
        capacity=value(f"{OVERRIDES}.moe_expert_capacity_factor"),
        aux_loss=Fact(False, None, f"{VERSION}: moe_router_load_balancing_type none (transformer_impl.py)"),
        **_host_optimizer(keys),
    )


def _host_optimizer(keys: Keys) -> dict[str, Fact]:
    """Megatron-core's optimizer CPU offload, which verl passes through
    ``optim.override_optimizer_config`` (utils/megatron/optimizer.py ``init_megatron_optim_config``):
    ``optimizer_cpu_offload`` with ``optimizer_offload_fraction`` (megatron-core's default 0.0) of the
    states on the host; the precision-aware optimizer moves their fp32 main copies there too."""
    over = f"{ACTOR}.optim.override_optimizer_config"
    on = keys.flag(f"{over}.optimizer_cpu_offload")
    fraction = keys.value(f"{over}.optimizer_offload_fraction")
    share = fraction.value if on.value and isinstance(fraction.value, (int, float)) \
        and not isinstance(fraction.value, bool) and 0 <= fraction.value <= 1 else 0.0
    aware = keys.flag(f"{over}.use_precision_aware_optimizer")
    aware = aware if aware.value else keys.flag(f"{ACTOR}.optim.use_precision_aware_optimizer")
    return {"host_fraction": Fact(float(share), fraction.location or on.location,
                                  "megatron-core 0.15.0: optimizer_offload_fraction 0.0"),
            "host_main": Fact(bool(aware.value), aware.location, aware.default)}


__all__ = ["DEFAULTS", "ENGINES", "SPELLING", "engine_of", "read_layout"]
