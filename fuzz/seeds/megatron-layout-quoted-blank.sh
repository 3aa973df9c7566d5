#!/bin/bash
# A quoted layout holding a blank and a newline: one word each, as bash passes them (issue 53).
LAYOUT="Et*6|t*5|t*5|L "
torchrun --nproc_per_node 8 pretrain_gpt.py --pipeline-model-parallel-size 4 \
  --pipeline-model-parallel-layout "$LAYOUT" --num-layers "16 7" \
  --pipeline-model-parallel-layout "Et*6|t*5
|t*5|L" X --micro-batch-size 1 --global-batch-size 16 \
  --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --vocab-size 1000
