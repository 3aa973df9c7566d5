#!/bin/bash
# Published run: NVIDIA/Megatron-LM README, "Performance Benchmarking", images/model_table.png
# (commit f2e5db4): the 462B GPT model on 6144 H100 SXM (Megatron-Core r0.8.0 weak scaling),
# 144 heads, hidden 18432, 112 layers, TP 8, PP 16, DP 48, batch 3072: 459.9 TFLOP/s per GPU, MFU 47 %.
# From the README's text: vocabulary 131,072, sequence length 4096, overlap of DP
# (--overlap-grad-reduce, --overlap-param-gather) and TP (--tp-comm-overlap) communication.
# Not published, chosen here: micro-batch 1, the plain 1F1B schedule, GPT blocks (GeLU MLP of
# 4·hidden, untied embeddings: the table's parameter counts), no recomputation.

GPUS_PER_NODE=8
NUM_NODES=768

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
)

MODEL_ARGS=(
    --num-layers 112
    --hidden-size 18432
    --num-attention-heads 144
    --seq-length 4096
    --max-position-embeddings 4096
    --vocab-size 131072
    --untie-embeddings-and-output-weights
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 3072
    --bf16
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 16
    --sequence-parallel
    --tp-comm-overlap
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]}
