#!/bin/bash
# torchtitan 0.3.0: Qwen3-32B from the config function torchtitan ships (qwen3_32b: FSDP, full
# activation checkpointing, local batch 2 x 4096), with its CUDA graphs and chunked loss
NGPU=${NGPU:-8}
PYTORCH_ALLOC_CONF="expandable_segments:True" torchrun --nproc_per_node=${NGPU} \
  -m torchtitan.train --module qwen3 --config qwen3_32b --training.local_batch_size 4
