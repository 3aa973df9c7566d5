#!/bin/bash

# A Megatron-LM job whose last pipeline stage holds the loss and no transformer layer, the split
# NVIDIA/Megatron-LM#1852 asks for, written with --pipeline-model-parallel-layout: stage 0 the
# embedding and 6 layers, stages 1 and 2 five each, stage 3 only the output layer and the loss
# ("Et*6|t*5|t*5|L"). Megatron accepts an empty stage (validate_layer_layout in
# megatron/core/transformer/pipeline_parallel_layer_layout.py at d98e8a64 checks the layer
# counts, not that each stage has one); schedcheck reads the layout with Megatron's rules
# (docs/facts/config-keys.md#megatron-layer-split) and checks the 1F1B step it gives.
# Check with: schedcheck verify examples/megatron-layout-empty-last-stage.sh --hardware h100

GPUS_PER_NODE=8
NNODES=1

torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \
    --num-layers 16 \
    --hidden-size 2048 \
    --num-attention-heads 16 \
    --seq-length 4096 \
    --vocab-size 32000 \
    --micro-batch-size 1 \
    --global-batch-size 64 \
    --bf16 \
    --pipeline-model-parallel-size 4 \
    --pipeline-model-parallel-layout "Et*6|t*5|t*5|L"
