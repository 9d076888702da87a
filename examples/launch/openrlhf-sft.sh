#!/bin/bash
# OpenRLHF SFT of Llama-3-8B on one node of 8 GPUs (OpenRLHF 0.11 flags)
read -r -d '' training_commands <<EOT
openrlhf.cli.train_sft \
   --model.model_name_or_path meta-llama/Meta-Llama-3-8B \
   --data.dataset Open-Orca/OpenOrca \
   --data.max_len 4096 \
   --train.batch_size 256 \
   --train.micro_batch_size 4 \
   --ds.zero_stage 3 \
   --ds.param_dtype bf16 \
   --ds.packing_samples \
   --model.gradient_checkpointing_enable
EOT

deepspeed --num_gpus 8 --module $training_commands
