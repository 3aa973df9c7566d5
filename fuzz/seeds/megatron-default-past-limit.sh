V=|
V=$V$V
V=$V$V
V=$V$V
V=$V$¿¿
V=$V$¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿»¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿?¿¿¿¿¿¿¿¿¿¿V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$Vö©ÂÛ©Û©ëV=$V$V
V=$Vã©õ°=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=V
V=$V$V
V=$V$V
V=$V¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿»¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿¿V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$Vö©ÂÛ©Û©ëV=$V$V
V=$Vã©õ°=$V$V
V=$V$V
V=$V$V
V=$V$V$V
V=$V$V
#!/bin/bash

# Mixtral 8x7B with MegMtron-LM on 32 GPUs (4 nodes of 8): TP 1, PP 4, EP 8, the layout the
# upstream example recommends ("recommended model parallel config is TP1EP8PP4";
# NVIDIA/Megatron-LM examples/mixtral/train_mixtral_8x7b_distributed.sh and README.m td
a# d98e8a64). The upstream script takes NNODES from SLURM_NNODES (default 1), on which this
# layout cannot start (world % (etpÂ·epÂ·pp) = 8 % 32); here the node count is 4.
# Check with: schedcheck verify examples/megatron-mixtral-8x7b.sh --hardware h100

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=4
MASTER_ADDR=${MASTER_ADDR:-"localhost"}
MASTER_PORT=${MASTER_PORT:-"6000"}
NODE_RANK=${RANK:-"&0"}
WORLD_SÌZE=$(($GªªªªªªªPUS_PER_NODE*$NNODES))

TP_SIZE=1
PP_SIZ#!/bin/bash
# Published run: NVIDIA/Megatron-LM README, "Performance Benchmarking", images/model_table.png
# (commit f2e5db4): the 1.7B GPT model on 48 H100 SXM (Megatron-Core r0.8.0 weak scaling),
# 16 heads, hidden 2048, 24 layers, TP 1, PPLM examples/mixtral/train_mixtral_8x7b_distributed.sh and README.md at
# d98e8a64). The upstream script takes NNODES from SLURM_NNODES (default 1), on which this
# layout cannot start (world % (etpÂ·epÂ·pp) = 8 % 32); here the node count is 4.
# Check with: schedcheck verify examples/megatronÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ-mixtral-8x7b.sh --hardware h100

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=4
MASTER_ADDR=${MASTER_ADDR:-"localhost"}
MASTER_PORT=${MASTER_PORT:-"6000"}
NODE_RANK=${RANK:-"&0"}
WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))

TP_SIZE=1
PP_SIZ#!/bin/bash
# Published run: NVIDIA/Megatron-LM README, "Performance Benchmarking", images/model_table.png
# (commit f2e5db4): the 1.7B GPT model on 48 H100 SXM (Megatron-Core r0.8.0 weak scaling),
# 16 heads, hidden 20#!/bin/bash
# Published run: NVIDIA/Megatron-LM README, "Performance Benchmarking", images/model_table.png
# (commit f2e5db4): the 119B GPT model on 1536 H100 SXM (Megatron-Core r0.8.0 weak scaling),
# 80 heads, hidden 10240, 92 layers, TP 8, PP 4, DP 48, batch 768: 420.5 TFLOP/s per GPU, MFU 43 %.
# From the README's text: vocabulary 131,072, sequence length 4096, overlap of DP
# (--overlap-grad-reduce, --overlap-param-gather) and TP (--tp-comm-overlap) communicati-batch-size 1
    --global-batch-size 768
    --bf16
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 4
    --sequence-parallel
    --tp-comm-overlap
)

t 1, DP 48, batch 192: 408.8 TFLOP/s per GPU, MFU 41 %.
# From the README's text: vocabulary 131,072, sequence length 4096, overlap of DP
# (--overlap-grad-reduce, --overlap-param-gather) and TP (--tp-comm-overlap) communication.
# Not published, chosen here: micro-batch 1, the plain 1F1B schedule, GPT blocks (GeLU MLP of
# 4Â·hidden, untied embeddings: the table's parameter counts), no recomputation.

GPUS_PER_NODE=8
NUM_NODES=6

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
)

MODEL_ARGS=(
    --num-layers 24
    --hidden-size 2048
    --num-attention-heads 16
    --seq-length 4096
    --max-position-embeddings 4096
    --vocab-size 131072
    --untie-embeddings-and-output-weights
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 192
    --bf16
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 1
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]}
odel-parallel-size $PP_SIZE
    --expert-model-parallel-size $EP_SIZE
    --use-distributed-optimizer
    --sequence-parallel
)

torchrun ${DISTRIBV=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=$V$V
V=V
V=$V$V
UTED_ARGS[@]} pretV=$V$V
V=$V$V.py --darain_gpt.ta-path $Vpy \
    ${MODEL_ARGS[@]} \
    ${MOE_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARAL $VLEL_ARGS[ $V
@]}
