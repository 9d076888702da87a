#!/bin/bash
# SGLang serving Llama-3.1-70B-Instruct over two H100s, its memory fraction left to SGLang
python -m sglang.launch_server \
  --model-path meta-llama/Llama-3.1-70B-Instruct \
  --tp 2 \
  --context-length 32768 \
  --host 0.0.0.0 --port 30000
