#!/bin/bash
# A Megatron-LM launch in the style of its example scripts: PP 4 with virtual stages, TP 2.
GPUS_PER_NODE=8
NUM_NODES=${NNODES:-2}
TP=2
PP=4
ARGS=(
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32
    --group-query-attention --num-query-groups 8 --seq-length 4096 --vocab-size 128256
    --micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer
    --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP --sequence-parallel
    --num-layers-per-virtual-pipeline-stage 4 --recompute-granularity selective
)
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES pretrain_gpt.py "${ARGS[@]}"
