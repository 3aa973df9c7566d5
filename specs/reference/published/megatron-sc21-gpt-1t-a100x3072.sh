#!/bin/bash
# Published run: NVIDIA/Megatron-LM README and images/cases_april2021.png (commit b83477a3e8), the
# weak-scaling table of Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
# Clusters Using Megatron-LM" (SC21, arXiv 2104.04473, Table 1), on A100 80GB (Selene): the
# 1T GPT model, hidden 25600, 128 layers, 3072 GPUs, batch 3072: 163 TFLOP/s per GPU, counted with
# the paper's formula, which includes the recomputed forward (96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))).
# The layout is the repository's examples/sc21/run_table_1.sh and CONFIG.sh at the same commit:
# TP 8, PP 64, micro-batch 1, 160 heads, sequence 2048, fp16, activation checkpointing of
# every layer (its --activations-checkpoint-method uniform, written here in today's flag names).
# The README states the vocabulary: 51,200. GPT blocks with tied embeddings (2021's default), and
# Megatron-LM's own attention, which materialised the scores (no FlashAttention in 2021).

GPUS_PER_NODE=8
NUM_NODES=384

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
)

MODEL_ARGS=(
    --num-layers 128
    --hidden-size 25600
    --num-attention-heads 160
    --seq-length 2048
    --max-position-embeddings 2048
    --vocab-size 51200
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 3072
    --fp16
    --loss-scale 8192
    --recompute-granularity full
    --recompute-method uniform
    --recompute-num-layers 1
)

MODEL_PARALLEL_ARGS=(
    --transformer-impl local
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 64
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]}
