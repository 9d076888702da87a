#!/bin/bash
# Megatron-LM: Mixtral 8x7B pretraining, bf16, 4,096-token sequences, PP 4 x EP 8
# (the arguments of Megatron-LM's examples/mixtral/train_mixtral_8x7b_distributed.sh).
GPUS_PER_NODE=8

MODEL_ARGS=(
    --disable-bias-linear
    --seq-length 4096
    --max-position-embeddings 32768
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --position-embedding-type rope
    --swiglu
    --normalization RMSNorm
    --untie-embeddings-and-output-weights
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --tokenizer-type Llama2Tokenizer
)
MOE_ARGS=(
    --num-experts 8
    --moe-router-topk 2
    --moe-router-load-balancing-type aux_loss
    --moe-aux-loss-coeff 1e-2
    --moe-grouped-gemm
    --moe-token-dispatcher-type alltoall
)
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 256
    --bf16
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 4
    --expert-model-parallel-size 8
    --use-distributed-optimizer
    --sequence-parallel
)

torchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py "${MODEL_ARGS[@]}" "${MOE_ARGS[@]}" "${TRAINING_ARGS[@]}" --mock-data
