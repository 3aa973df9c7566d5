#!/bin/bash
# Published run: NVIDIA/Megatron-LM README, "Performance Benchmarking", images/model_table.png
# (commit f2e5db4): the 314B GPT model on 3072 H100 SXM (Megatron-Core r0.8.0 weak scaling),
# 128 heads, hidden 16384, 96 layers, TP 8, PP 8, DP 48, batch 1536: 474.4 TFLOP/s per GPU, MFU 48 %.
# From the README's text: vocabulary 131,072, sequence length 4096, overlap of DP
# (--overlap-grad-reduce, --overlap-param-gather) and TP (--tp-comm-overlap) communication.
# Not published, chosen here: micro-batch 1, the plain 1F1B schedule, GPT blocks (GeLU MLP of
# 4·hidden, untied embeddings: the table's parameter counts), no recomputation.

GPUS_PER_NODE=8
NUM_NODES=384

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
)

MODEL_ARGS=(
    --num-layers 96
    --hidden-size 16384
    --num-attention-heads 128
    --seq-length 4096
    --max-position-embeddings 4096
    --vocab-size 131072
    --untie-embeddings-and-output-weights
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 1536
    --bf16
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 8
    --sequence-parallel
    --tp-comm-overlap
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]}
