#!/bin/bash
# Eight processes on a node where only four GPUs are visible.
export CUDA_VISIBLE_DEVICES=0,1,2,3
torchrun --nproc_per_node 8 train.py \
    --model_name_or_path meta-llama/Llama-3.2-1B \
    --per_device_train_batch_size 8 \
    --max_length 2048 \
    --bf16 True
