#!/bin/bash
# Megatron-LM: Llama 3 8B pretraining, bf16, 8192-token sequences, one node of 8 GPUs
# (the shape of Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh, in bf16).
GPUS_PER_NODE=8

MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --kv-channels 128
    --seq-length 8192
    --max-position-embeddings 8192
    --position-embedding-type rope
    --swiglu
    --normalization RMSNorm
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --tokenizer-type NullTokenizer
    --vocab-size 128256
)
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 128
    --bf16
    --use-distributed-optimizer
    --tensor-model-parallel-size 1
)

torchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" --mock-data
