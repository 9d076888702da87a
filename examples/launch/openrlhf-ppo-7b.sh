#!/usr/bin/env bash
# PPO (GAE critic) on one node of 8 GPUs with OpenRLHF 0.11's hybrid engine: the actor, critic,
# reference and vLLM share every GPU; rewards come from a rule-based HTTP server.
set -x

python3 -m openrlhf.cli.train_ppo_ray \
   --actor.num_nodes 1 \
   --actor.num_gpus_per_node 8 \
   --ref.num_nodes 1 \
   --ref.num_gpus_per_node 8 \
   --vllm.num_engines 4 \
   --vllm.tensor_parallel_size 2 \
   --train.colocate_all \
   --vllm.gpu_memory_utilization 0.6 \
   --vllm.enable_sleep \
   --actor.model_name_or_path Qwen/Qwen2.5-7B-Instruct \
   --reward.remote_url http://localhost:5000/get_reward \
   --ckpt.output_dir ./checkpoint/qwen2.5-7b-ppo \
   --train.micro_batch_size 4 \
   --train.batch_size 128 \
   --rollout.micro_batch_size 8 \
   --rollout.batch_size 1024 \
   --data.max_len 4096 \
   --ds.zero_stage 3 \
   --ds.param_dtype bf16 \
   --actor.gradient_checkpointing_enable \
   --ds.packing_samples \
   --data.prompt_dataset OpenRLHF/prompt-collection-v0.1 \
   --data.input_key context_messages \
   --data.apply_chat_template
