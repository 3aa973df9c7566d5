#!/bin/bash
# Published run: NVIDIA/Megatron-LM README and images/cases_april2021.png (commit b83477a3e8), the
# weak-scaling table of Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
# Clusters Using Megatron-LM" (SC21, arXiv 2104.04473, Table 1), on A100 80GB (Selene): the
# 76B GPT model, hidden 10240, 60 layers, 1024 GPUs, batch 1792: 140 TFLOP/s per GPU, counted with
# the paper's formula, which includes the recomputed forward (96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))).
# The layout is the repository's examples/sc21/run_table_1.sh and CONFIG.sh at the same commit:
# TP 8, PP 4, micro-batch 2, 80 heads, sequence 2048, fp16, activation checkpointing of
# every layer (its --activations-checkpoint-method uniform, written here in today's flag names), 5 layers per virtual stage.
# The README states the vocabulary: 51,200. GPT blocks with tied embeddings (2021's default), and
# Megatron-LM's own attention, which materialised the scores (no FlashAttention in 2021).

GPUS_PER_NODE=8
NUM_NODES=128

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
)

MODEL_ARGS=(
    --num-layers 60
    --hidden-size 10240
    --num-attention-heads 80
    --seq-length 2048
    --max-position-embeddings 2048
    --vocab-size 51200
)

TRAINING_ARGS=(
    --micro-batch-size 2
    --global-batch-size 1792
    --fp16
    --loss-scale 8192
    --recompute-granularity full
    --recompute-method uniform
    --recompute-num-layers 1
)

MODEL_PARALLEL_ARGS=(
    --transformer-impl local
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 4
    --num-layers-per-virtual-pipeline-stage 5
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]}
