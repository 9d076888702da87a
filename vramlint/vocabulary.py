"""How each kind of file spells the settings a hint may tell a user to change.

A hint is only useful in the user's own words: ``zero_optimization.stage 3`` in a DeepSpeed file,
``deepspeed_config.zero_stage 3`` in an Accelerate file, ``micro_batch_size: 2`` in an axolotl
recipe, ``per_device_train_batch_size: 2`` in a TRL or LLaMA-Factory one, ``batch_size: 2`` in
torchtune's. ``WORDS`` is the one table; a plan carries the vocabulary of each setting's file
(``Plan.vocabulary``: setting -> source), so a job written across a recipe and its DeepSpeed file
gets each change spelled where that value lives.
"""

from __future__ import annotations

# (source, setting) -> template; "{}" is the value. Settings: micro_batch, grad_checkpointing, stage
# (ZeRO stage), offload_optimizer, offload_param, fsdp_strategy, fsdp_offload, to_fsdp, to_deepspeed.
WORDS: dict[tuple[str, str], str] = {
    ("deepspeed", "micro_batch"): "train_micro_batch_size_per_gpu <= {}",
    ("deepspeed", "micro_batch_exact"): "train_micro_batch_size_per_gpu {}",
    ("deepspeed", "grad_accum"): "gradient_accumulation_steps {}",
    ("deepspeed", "stage"): "zero_optimization.stage {}",
    ("deepspeed", "offload_optimizer"): "offload_optimizer.device cpu",
    ("deepspeed", "offload_param"): "offload_param.device cpu",
    ("accelerate", "stage"): "deepspeed_config.zero_stage {}",
    ("accelerate", "offload_optimizer"): "offload_optimizer_device cpu",
    ("accelerate", "offload_param"): "offload_param_device cpu",
    ("accelerate", "fsdp_strategy"): "fsdp_sharding_strategy {}",
    ("accelerate", "fsdp_offload"): "fsdp_offload_params true",
    ("accelerate", "to_fsdp"): "distributed_type FSDP (FULL_SHARD)",
    ("accelerate", "to_deepspeed"): "distributed_type DEEPSPEED with zero_stage {}",
    ("flags", "micro_batch"): "micro-batch (per_device_train_batch_size) <= {}",
    ("flags", "grad_checkpointing"): "gradient checkpointing on",
    ("flags", "no_grad_checkpointing"): "gradient checkpointing off",
    ("trl", "no_grad_checkpointing"): "gradient_checkpointing: false",
    ("axolotl", "no_grad_checkpointing"): "gradient_checkpointing: false",
    ("llamafactory", "no_grad_checkpointing"): "disable_gradient_checkpointing: true",
    ("torchtune", "no_grad_checkpointing"): "enable_activation_checkpointing: False",
    ("trl", "micro_batch"): "per_device_train_batch_size: {}",
    ("trl", "grad_checkpointing"): "gradient_checkpointing: true",
    ("trl", "to_deepspeed"): "deepspeed: a ZeRO-{} config file",
    ("trl", "to_fsdp"): "fsdp: full_shard auto_wrap",
    ("trl", "fsdp_strategy"): "fsdp: {lower} auto_wrap",
    ("trl", "fsdp_offload"): "fsdp: full_shard offload auto_wrap",
    # a training script's own arguments on a launch line (readers/launch.py): HfArgumentParser's spelling
    ("cli", "micro_batch"): "--per_device_train_batch_size {}",
    ("cli", "grad_checkpointing"): "--gradient_checkpointing True",
    ("cli", "no_grad_checkpointing"): "--gradient_checkpointing False",
    ("cli", "to_deepspeed"): "--deepspeed a ZeRO-{} config file",
    ("cli", "to_fsdp"): '--fsdp "full_shard auto_wrap"',
    ("cli", "fsdp_strategy"): '--fsdp "{lower} auto_wrap"',
    ("cli", "fsdp_offload"): '--fsdp "full_shard offload auto_wrap"',
    ("axolotl", "micro_batch"): "micro_batch_size: {}",
    ("axolotl", "grad_checkpointing"): "gradient_checkpointing: true",
    ("axolotl", "to_deepspeed"): "deepspeed: deepspeed_configs/zero{}.json",
    ("axolotl", "to_fsdp"): "fsdp_version: 2 with an fsdp_config",
    ("axolotl", "fsdp_strategy"): "fsdp_config.reshard_after_forward: {reshard}",
    ("axolotl", "fsdp_offload"): "fsdp_config.offload_params: true",
    ("llamafactory", "micro_batch"): "per_device_train_batch_size: {}",
    ("llamafactory", "grad_checkpointing"): "disable_gradient_checkpointing: false",
    ("llamafactory", "to_deepspeed"): "deepspeed: examples/deepspeed/ds_z{}_config.json",
    ("llamafactory", "to_fsdp"): "accelerate launch --config_file examples/accelerate/fsdp_config.yaml",
    ("torchtune", "micro_batch"): "batch_size: {}",
    ("litgpt", "micro_batch"): "train.micro_batch_size: {}",
    ("litgpt", "to_fsdp"): "devices: N (LitGPT shards with FSDP and checkpoints every block)",
    ("torchtune", "grad_checkpointing"): "enable_activation_checkpointing: True",
    ("torchtune", "to_fsdp"): "the _distributed recipe (tune run --nproc_per_node N ..._distributed)",
    ("torchtune", "fsdp_offload"): "fsdp_cpu_offload: True",
    ("torchtune", "fsdp_strategy"): "fsdp_reshard_after_forward: {reshard}",
    # OpenRLHF's trainers (readers/openrlhf.py): flags dotted from 0.10.2, flat before
    ("openrlhf", "micro_batch"): "--train.micro_batch_size {}",
    ("openrlhf", "grad_checkpointing"): "--model.gradient_checkpointing_enable",
    ("openrlhf", "no_grad_checkpointing"): "no --model.gradient_checkpointing_enable",
    ("openrlhf", "stage"): "--ds.zero_stage {}",
    ("openrlhf", "offload_optimizer"): "--ds.adam_offload",
    ("openrlhf-flat", "micro_batch"): "--micro_train_batch_size {}",
    ("openrlhf-flat", "grad_checkpointing"): "--gradient_checkpointing",
    ("openrlhf-flat", "no_grad_checkpointing"): "no --gradient_checkpointing",
    ("openrlhf-flat", "stage"): "--zero_stage {}",
    ("openrlhf-flat", "offload_optimizer"): "--adam_offload",
    # OpenRLHF's PPO trainer under Ray (readers/openrlhf_ppo.py): its own flags, dotted and flat
    ("openrlhf-ppo", "micro_batch"): "--train.micro_batch_size {}",
    ("openrlhf-ppo", "grad_checkpointing"): "--actor.gradient_checkpointing_enable",
    ("openrlhf-ppo", "no_grad_checkpointing"): "no --actor.gradient_checkpointing_enable",
    ("openrlhf-ppo", "stage"): "--ds.zero_stage {}",
    ("openrlhf-ppo", "offload_optimizer"): "--ds.adam_offload",
    ("openrlhf-ppo", "rollout_share"): "--vllm.gpu_memory_utilization {}",
    ("openrlhf-ppo", "optimizer_offloaded"): "--ds.enable_sleep",
    ("openrlhf-ppo", "token_budget"): "--train.max_tokens_per_gpu {}",
    ("openrlhf-ppo", "logprob_micro"): "--rollout.micro_batch_size {}",
    ("openrlhf-ppo", "logprob_tokens"): "--rollout.max_tokens_per_gpu {}",
    ("openrlhf-ppo", "ref_offload"): "--ref.offload",
    ("openrlhf-ppo", "reward_offload"): "--reward.offload",
    ("openrlhf-ppo-flat", "micro_batch"): "--micro_train_batch_size {}",
    ("openrlhf-ppo-flat", "grad_checkpointing"): "--gradient_checkpointing",
    ("openrlhf-ppo-flat", "no_grad_checkpointing"): "no --gradient_checkpointing",
    ("openrlhf-ppo-flat", "stage"): "--zero_stage {}",
    ("openrlhf-ppo-flat", "offload_optimizer"): "--adam_offload",
    ("openrlhf-ppo-flat", "rollout_share"): "--vllm_gpu_memory_utilization {}",
    ("openrlhf-ppo-flat", "optimizer_offloaded"): "--deepspeed_enable_sleep",
    ("openrlhf-ppo-flat", "token_budget"): "--train_max_tokens_per_gpu {}",
    ("openrlhf-ppo-flat", "logprob_micro"): "--micro_rollout_batch_size {}",
    ("openrlhf-ppo-flat", "logprob_tokens"): "--rollout_max_tokens_per_gpu {}",
    ("openrlhf-ppo-flat", "ref_offload"): "--ref_reward_offload",
    ("openrlhf-ppo-flat", "reward_offload"): "--ref_reward_offload",
    # verl's trainer config (readers/verl.py), as the Hydra override that sets it
    ("verl", "micro_batch"): "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={}",
    ("verl", "grad_checkpointing"): "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    ("verl", "no_grad_checkpointing"): "actor_rollout_ref.model.enable_gradient_checkpointing=False",
    ("verl", "fsdp_strategy"): "actor_rollout_ref.actor.fsdp_config.reshard_after_forward={reshard}",
    ("verl", "rollout_share"): "actor_rollout_ref.rollout.gpu_memory_utilization={}",
    ("verl", "params_offloaded"): "actor_rollout_ref.actor.fsdp_config.param_offload=True",
    ("verl", "optimizer_offloaded"): "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
    ("verl", "token_budget"): "actor_rollout_ref.actor.ppo_max_token_len_per_gpu={}",
    ("verl", "logprob_micro"): "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={}",
    ("verl", "logprob_tokens"): "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu={}",
    ("verl", "ref_logprob_micro"): "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={}",
    ("verl", "ref_logprob_tokens"): "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu={}",
    ("verl", "response_length"): "data.max_response_length={}",
    # verl's Megatron workers (readers/verl_megatron.py): the actor's megatron section
    ("verl-megatron", "params_offloaded"): "actor_rollout_ref.actor.megatron.param_offload=True",
    ("verl-megatron", "optimizer_offloaded"): "actor_rollout_ref.actor.megatron.optimizer_offload=True",
}
FALLBACK = {"micro_batch": "flags", "micro_batch_exact": "deepspeed", "grad_accum": "deepspeed",
            "grad_checkpointing": "flags", "no_grad_checkpointing": "flags", "stage": "deepspeed",
            "offload_optimizer": "deepspeed", "offload_param": "deepspeed", "fsdp_strategy": "accelerate",
            "fsdp_offload": "accelerate", "to_fsdp": "accelerate", "to_deepspeed": "accelerate"}


def say(vocabulary: dict[str, str] | None, default_source: str, setting: str, value: object = None) -> str:
    """``setting`` = ``value`` in the words of the file that holds it: the plan's vocabulary for
    that setting, else the plan's own source, else the generic spelling. Templates may write the
    value as it is, lower-cased (TRL's ``fsdp: full_shard``), or as FSDP2's ``reshard_after_forward``
    boolean (FULL_SHARD reshards, SHARD_GRAD_OP does not)."""
    for source in ((vocabulary or {}).get(setting), default_source, FALLBACK.get(setting, "flags")):
        template = WORDS.get((source, setting)) if source else None
        if template:
            return template.format(value, lower=str(value).lower(),
                                   reshard="true" if value == "FULL_SHARD" else "false")
    return f"{setting} {value}"


def speaks(vocabulary: dict[str, str] | None, default_source: str, setting: str) -> bool:
    """Whether the file's words can say ``setting`` at all (OpenRLHF has no flag that offloads the
    trained model's parameters between phases): a hint it cannot say is not made."""
    return any(WORDS.get((source, setting)) for source in ((vocabulary or {}).get(setting), default_source) if source)


# What a framework can run a job under; the rest run everything (plain PyTorch, DeepSpeed, FSDP).
RUNTIMES_OF = {"torchtune": ("torch", "fsdp"),       # torchtune 0.6.1 recipes: single device or FSDP2
               "litgpt": ("torch", "fsdp"),          # litgpt 0.5.13: one device, or FSDP over devices x num_nodes
               "openrlhf": ("deepspeed",),             # OpenRLHF 0.11.2: its DeepspeedStrategy, always
               "verl": ("fsdp", "megatron")}           # verl 0.9.1's FSDP and Megatron workers


def runtimes(source: str) -> tuple[str, ...]:
    return RUNTIMES_OF.get(source, ("torch", "deepspeed", "fsdp"))


# What a framework never launches whatever its settings (``plan.LAUNCH_LIMITS``), so hints never
# propose it: OpenRLHF 0.11.2 builds its training DeepSpeed config with ``offload=False``
# (deepspeed.py:437-439); no flag offloads the trained model's parameters.
REFUSED_BY = {"openrlhf": ("param-offload",),
              # verl 0.9.1 builds the actor without FSDP's CPUOffload (transformer_impl.py:423-435; its
              # param_offload moves shards between phases, Rollout.params_offloaded)
              "verl": ("param-offload",),
              # litgpt 0.5.13: no flag checkpoints on one GPU (only its FSDP strategies wrap every Block), none
              # offloads (full.py cpu_offload=False), no DeepSpeed path in its scripts
              "litgpt": ("param-offload", "deepspeed", "unsharded-checkpointing")}


def refused_by(source: str) -> tuple[str, ...]:
    return REFUSED_BY.get(source, ())


# The fused or chunked loss each framework can switch on, as the plan's ``loss`` and the recipe
# line that says it (a hint tries it before "nothing fits"): LLaMA-Factory 0.9.5's Liger kernels
# (pt and sft only, model/model_utils/liger_kernel.py:94-95), axolotl's Cut Cross-Entropy plugin,
# torchtune's chunked cross-entropy. TRL 1.16's trainers refuse use_liger_kernel (they fuse the
# LM head themselves from 1.15), so none is proposed there.
LOSSES_OF = {
    "llamafactory": ("liger", "enable_liger_kernel: true"),
    "axolotl": ("cce", "plugins: [axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin] + "
                       "cut_cross_entropy: true"),
    "torchtune": ("chunked", "loss: _component_: torchtune.modules.loss.CEWithChunkedOutputLoss"),
}


def fused_loss(source: str) -> tuple[str, str] | None:
    """The loss a framework fuses or chunks (``Plan.loss`` value, the line that turns it on)."""
    return LOSSES_OF.get(source)
