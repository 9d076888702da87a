#!/bin/bash
# Full SFT of Llama-3.1-8B under ZeRO-3 on one node of 8 GPUs (HF Trainer script arguments).
GPUS_PER_NODE=8
MODEL=meta-llama/Llama-3.1-8B

torchrun --nproc_per_node $GPUS_PER_NODE train.py \
    --model_name_or_path $MODEL \
    --per_device_train_batch_size 4 \
    --gradient_accumulation_steps 4 \
    --max_length 4096 \
    --bf16 True \
    --gradient_checkpointing True \
    --deepspeed examples/launch/ds_zero3.json
