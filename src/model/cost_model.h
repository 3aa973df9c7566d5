// The model-and-hardware cost model: from a transformer's dimensions, the GPU and the parallel
// degrees, the per-layer compute times, the model-state, parameter and activation bytes, and the
// collective and point-to-point times by link tier. Formulas and figures: docs/facts/cost-formulas.md, docs/facts/hardware.md
// (the sources each function names are the ones cited there).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sc::model {

/// Multi-head latent attention (DeepSeek-V2/V3; docs/facts/config-keys.md#model-flavors). Dimensions in elements.
struct Mla {
  int64_t q_lora_rank = 0;      ///< 0: queries projected directly from the hidden state
  int64_t kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128;
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;
};

/// Mixture of experts in the feed-forward layers. Layers [0, dense_first) are dense; after
/// them every `every`-th layer (the last of each group of `every`) is an MoE layer
/// (torchtitan's interleave_moe_layer_step; docs/facts/config-keys.md#model-flavors).
struct Moe {
  int64_t experts = 8;          ///< routed experts
  int64_t top_k = 2;            ///< routed experts per token
  int64_t shared = 0;           ///< shared experts, always active
  int64_t ffn = 14336;          ///< hidden size of one expert
  int64_t dense_first = 0;
  int64_t every = 1;
};

/// A decoder-only transformer with SwiGLU MLPs, RMSNorm and no biases (Llama family; docs/facts/cost-formulas.md#parameter-counts,
/// "Llama" row). Dimensions in elements.
struct ModelDesc {
  std::string name;             ///< preset name ("llama3-8b") or "custom"
  int64_t dim = 0;              ///< hidden size h
  int64_t layers = 0;           ///< transformer blocks
  int64_t heads = 0;            ///< attention heads
  int64_t kv_heads = 0;         ///< key/value heads (GQA); = heads for MHA
  int64_t head_dim = 0;         ///< per head; dim / heads unless given
  int64_t vocab = 0;
  int64_t ffn = 0;              ///< dense MLP hidden size F
  /// The MLP (and each expert) is gated, three matrices (SwiGLU: w2(silu(w1 x) · w3 x), Llama,
  /// Megatron-LM `--swiglu`), or not, two (GPT's fc2(gelu(fc1 x)), Megatron-LM's default).
  bool gated_mlp = true;
  bool tied_embeddings = false; ///< input and output embeddings share one matrix
  std::optional<Mla> mla;
  std::optional<Moe> moe;
  std::string source;           ///< where the dimensions come from

  bool is_moe_layer(int64_t layer) const;
  /// Weight matrices of the MLP and of each expert: 3 when gated_mlp, else 2.
  int64_t mlp_matrices() const { return gated_mlp ? 3 : 2; }
  /// Parameters of block `layer`: attention, MLP (mlp_matrices()·h·F; every expert, shared
  /// experts and router for an MoE layer) and its two norms. docs/facts/cost-formulas.md#parameter-counts
  /// (Llama and GPT rows; GPT's biases are left out); MLA per the DeepSeek-V3
  /// projections (wq or wq_a/wq_b, wkv_a, kv_norm, wkv_b, wo).
  int64_t layer_params(int64_t layer) const;
  /// The same with only the top_k routed experts (plus shared ones) of an MoE layer.
  int64_t layer_active_params(int64_t layer) const;
  /// Routed-expert parameters of block `layer` (0 for a dense layer): sharded over EP.
  int64_t layer_expert_params(int64_t layer) const;
  int64_t embedding_params() const { return vocab * dim; }
  /// Output projection (0 when tied) plus the final norm.
  int64_t output_params() const { return (tied_embeddings ? 0 : vocab * dim) + dim; }
  int64_t total_params() const;
  int64_t active_params() const;
  /// Forward FLOPs of block `layer` per token at sequence length `seq`, split into the linear
  /// part (2 per active parameter) and the attention core (QK^T and AV: 2·heads·(d_qk + d_v)·seq,
  /// no causal discount, as torchtitan counts it; docs/facts/cost-formulas.md#flops).
  double layer_linear_flops_per_token(int64_t layer) const;
  double layer_attention_flops_per_token(int64_t seq) const;
  /// Training FLOPs per token as torchtitan's MFU counts them: 6·(N_active − embedding) +
  /// 6·layers·heads·(d_qk + d_v)·seq (docs/facts/cost-formulas.md#flops, get_dense_model_nparams_and_flops).
  double training_flops_per_token(int64_t seq) const;
};

/// A GPU and its node. Bandwidths are per GPU and per direction, bytes per second.
struct HardwareDesc {
  std::string name;
  double peak_flops = 0;        ///< dense bf16, FLOP/s
  int64_t hbm_bytes = 0;
  double intra_node_bw = 0;     ///< NVLink / Infinity Fabric egress into the node's domain
  double inter_node_bw = 0;     ///< scale-out network per GPU
  int32_t gpus_per_node = 8;
  std::string source;
  /// Achieved fraction of peak the largest GEMMs (Efficiency::compute) of runs on this GPU reach,
  /// smaller GEMMs lower by model::gemm_size_efficiency; fitted to one
  /// published run per GPU where there is one (specs/reference/README.md), else docs/facts/hardware.md#published-mfu's
  /// suggested 0.40.
  double efficiency = 0.40;
  /// Dense fp32 FLOP/s without tensor cores (PyTorch's default: torch.backends.cuda.matmul.allow_tf32
  /// is False), for jobs that compute in fp32; 0 when the preset does not know it
  /// (docs/facts/hardware.md#gpus).
  double fp32_flops = 0;
  /// HBM bandwidth, bytes/s, the vendor's figure (docs/facts/hardware.md#gpus): what the
  /// memory-bound elementwise ops of a block stream at (layer_cost); 0 when unknown (no term).
  double hbm_bw = 0;
  /// Dense fp8 FLOP/s of the tensor cores (e4m3/e5m2 inputs, the vendor's figure without
  /// sparsity; docs/facts/hardware.md#gpus); 0 when the GPU has none (A100: fp8 tensor cores
  /// start at SM 8.9), and the fp8 GEMMs of a job run at peak_flops.
  double fp8_flops = 0;
  /// CUDA compute capability × 10 (80 A100, 90 H100/H200, 100 B200); 0 for other vendors. The
  /// published attention-kernel figures (attention_kernel_flops) are Hopper's.
  int32_t sm = 0;
};

/// The fused attention kernel that runs a block's attention core (docs/facts/cost-formulas.md#attention-kernels).
enum class AttentionKernel {
  kGemmRate,  ///< timed at the GEMMs' rate, its backward at twice the forward's FLOPs (no published kernel figures)
  kFlash2,    ///< FlashAttention-2: PyTorch SDPA's flash backend, which SDPA picks on H100 (pytorch/pytorch#142132)
  kCudnn,     ///< cuDNN fused attention: TransformerEngine's FusedAttention, preferred on Hopper
  /// Unfused attention that materialises the scores (Megatron-LM's own DotProductAttention,
  /// `--transformer-impl local` without `--use-flash-attn`, and every Megatron-LM before
  /// FlashAttention): QK^T and AV as batched GEMMs over the whole s×s matrix, the causal mask
  /// applied after (no FLOPs skipped), and the scores streamed through HBM by the softmax and
  /// dropout kernels (kMaterializedBytes); their softmax output and dropout mask are kept for the
  /// backward (5 bytes per score, Korthikanti et al. 2022's 5as/h).
  kMaterialized,
};

/// HBM bytes per attention score (one element of the heads × s × s matrix, 16-bit) that the
/// materialised attention's kernels move, forward and backward [derived op by op from
/// megatron/core/transformer/dot_product_attention.py: baddbmm writes the scores (2), the fused
/// scale-mask-softmax reads and writes them (4), dropout reads them and writes its output and
/// mask (5), the AV bmm reads the probabilities (2); backward: the AV bmm's gradients read the
/// probabilities and write their gradient (4), dropout's backward reads it and the mask and
/// writes (5), softmax's reads its output and the gradient and writes (6), the QK^T gradients
/// read the score gradient twice (4)]. docs/facts/cost-formulas.md#attention-kernels.
struct MaterializedBytes {
  double forward = 13, backward = 19;
};
inline constexpr MaterializedBytes kMaterializedBytes{};

/// Achieved FLOP/s of one call of `kernel` on `hw` at `seq` query and key tokens, head dimension
/// 128, forward or backward, causal or not, counted as FlashAttention's benchmarks count FLOPs:
/// forward 4·seq²·heads·d, halved when causal; backward 2.5 × the forward's (five matmuls to the
/// forward's two). From the FlashAttention-3 paper's H100 SXM5 figures (Shah et al. 2024,
/// arXiv 2407.08608, Figures 5 and 6: bf16, head dimension 128, sequence 512 to 16K, the 16K
/// figure beyond), scaled by the preset's GEMM efficiency `gemm_efficiency` over the H100 SXM
/// preset's (the same GH100 die at its own clocks and power); the backward of a causal call by
/// the forward's causal-to-full ratio at that length (the paper plots the backward without a
/// mask). 0 when `kernel` is kGemmRate or the GPU is not Hopper (sm 90): no figures.
double attention_kernel_flops(const HardwareDesc& hw, double gemm_efficiency, AttentionKernel kernel, double seq,
                              bool causal, bool backward);

/// Achieved fractions of peak. Defaults: docs/facts/hardware.md#published-mfu "Suggested defaults" (dense bf16
/// 0.40; NVLink 0.6 and InfiniBand 0.9 of nominal, calculon's efficiency model).
struct Efficiency {
  double compute = 0.40;
  double intra_node = 0.8;
  double inter_node = 0.9;
  double latency_s = 10e-6;     ///< per collective or message
};

/// The presets' names, for --help and "did you mean".
std::vector<std::string> model_preset_names();
std::vector<std::string> hardware_preset_names();
/// A preset by name (case-insensitive; "llama3-8b", "h100"); nullopt when unknown.
std::optional<ModelDesc> model_preset(const std::string& name);
std::optional<HardwareDesc> hardware_preset(const std::string& name);
/// torchtitan's (model.name, model.flavor) to a preset name ("llama3", "8B" -> "llama3-8b");
/// empty when there is none.
std::string torchtitan_preset(const std::string& name, const std::string& flavor);

/// Activation recomputation of the transformer blocks.
enum class Recompute { kNone, kSelective, kFull };

/// Which activations a selective recompute keeps (docs/facts/activation-memory.md).
enum class SelectivePolicy {
  /// Megatron-LM `--recompute-granularity selective` (`--recompute-modules core_attn`): only
  /// the attention core is recomputed. With FlashAttention nothing of it is stored anyway, so
  /// the block keeps the Korthikanti et al. (2022) Table 2 activations.
  kCoreAttention,
  /// torchtitan `selective_ac_option = "op"`: the per-op policy saves the outputs of every
  /// other matmul (wq, wv, w1, w2 of a Llama block), the attention kernel's output and the
  /// tensor-parallel reduce-scatters; the rest of the block is recomputed in its backward.
  kOpPolicy,
  /// torchtitan `selective_ac_option = "<n>"`: every n-th block is fully checkpointed.
  kEveryNth,
};

/// How full recompute groups the blocks of a stage into checkpoints (Megatron-LM
/// `--recompute-method`; docs/facts/activation-memory.md#full-recompute).
enum class RecomputeMethod {
  /// Chunks of `recompute_layers` consecutive blocks, each chunk one checkpoint: its input is
  /// kept, its activations are recomputed together in the backward. torchtitan's full AC (one
  /// checkpoint per block) and DeepSpeed's checkpointing are this with 1 layer (or
  /// pipeline.activation_checkpoint_interval layers).
  kUniform,
  /// Only the first `recompute_layers` blocks of a stage are checkpointed, one checkpoint
  /// each; the other blocks keep all their activations.
  kBlock,
};

/// The parallel layout of one model replica on the mesh, innermost first: tp, then cp, then
/// dp_shard, dp_replicate, pp (torchtitan's dense mesh [pp, dp_replicate, dp_shard·cp, tp];
/// docs/facts/config-keys.md#torchtitan-validation-rules). EP borrows ranks from dp_shard·cp·tp, it does not multiply the world.
struct Layout {
  int32_t tp = 1, cp = 1, dp_shard = 1, dp_replicate = 1, pp = 1, ep = 1;
  /// Expert tensor parallelism: routed experts are split ep·etp ways; 0 = tp (Megatron's
  /// default for --expert-tensor-parallel-size).
  int32_t etp = 0;
  bool sequence_parallel = true;
  int32_t world() const { return tp * cp * dp_shard * dp_replicate * pp; }
  int32_t expert_tp() const { return etp > 0 ? etp : tp; }
};

/// Which link a group of `size` ranks whose members are `stride` ranks apart uses: inside a
/// node when the group's span stride·size fits in gpus_per_node (stride·(size−1) < gpus_per_node
/// and aligned), else the network.
enum class LinkTier { kIntraNode, kInterNode };
LinkTier link_tier(const HardwareDesc& hw, int64_t stride, int64_t size);
/// Achieved bandwidth of a tier, bytes/s: nominal × efficiency.
double tier_bandwidth(const HardwareDesc& hw, const Efficiency& eff, LinkTier tier);
/// Achieved per-rank bandwidth of a collective over a group of `size` ranks `stride` apart,
/// bytes/s. Inside a node: the NVLink figure. Across nodes the array enters each node through
/// all its NICs together ("≈ bytes / W_node_egress", scaling-book gpus.md; docs/facts/cost-formulas.md#communication-volume-and-time): the
/// group's k = min(size, gpus_per_node / stride) members per node share k NICs, so k × the
/// per-GPU network figure, at most the NVLink figure.
double group_bandwidth(const HardwareDesc& hw, const Efficiency& eff, int64_t stride, int64_t size);

/// Ring collective time over n ranks of `bytes` per rank (all-gather output, reduce-scatter
/// input, all-reduce buffer): latency + f·(n−1)/n·bytes/bw, f = 1 for all-gather and
/// reduce-scatter, 2 for all-reduce (docs/facts/cost-formulas.md#communication-volume-and-time; scaling-book gpus.md). 0 when n <= 1.
double ring_time_s(double bytes, int64_t n, double bw, double latency_s, bool all_reduce);

/// Per-layer costs of one microbatch on one rank (after TP/CP/EP division). Seconds and bytes.
struct LayerCost {
  double forward_s = 0;         ///< compute + TP/CP/EP communication of the forward
  double input_grad_s = 0;      ///< backward for inputs (I): linear part + 2× attention core
  double weight_grad_s = 0;     ///< backward for weights (W): the linear part
  double recompute_s = 0;       ///< forward work redone before I with recompute
  double tp_comm_s = 0;         ///< TP all-gather/reduce-scatter (or all-reduce) time in forward
  double tp_exposed_s = 0;      ///< of tp_comm_s, what the forward waits for (all of it without overlap)
  double tp_exposed_backward_s = 0;  ///< of tp_comm_s, what the input-gradient pass waits for
  double cp_comm_s = 0;         ///< CP key/value all-gather time in forward
  /// CP: what the input-gradient pass moves besides its own key/value all-gather: the key and
  /// value gradients passed round the ring (CostInputs::cp_grad_ring_fp32); 0 otherwise.
  double cp_grad_comm_s = 0;
  double ep_comm_s = 0;         ///< EP all-to-all time in forward (dispatch + combine)
  double elementwise_s = 0;     ///< memory-bound elementwise ops of the forward (in forward_s; twice in input_grad_s)
  double gemm_memory_s = 0;     ///< HBM time of the linear GEMMs' operands, per pass (layer_gemm_memory_s; in each of the three)
  double fp8_cast_s = 0;        ///< with fp8_linear: HBM time of the casts, all three passes (in each pass's time)
  double attention_s = 0;       ///< the attention core's forward time (in forward_s; its backward is in input_grad_s)
  int64_t params = 0;           ///< parameters held per rank (dense / tp, experts / (ep·tp))
  int64_t activation_bytes = 0; ///< saved for backward without recompute
  int64_t retained_bytes = 0;   ///< saved for backward with the chosen recompute (full: per block)
  int64_t input_bytes = 0;      ///< the block's input (what a checkpoint of it keeps)
  int64_t expert_params = 0;    ///< of `params`, routed-expert parameters (sharded over expert DP)
};

/// What the costs of a job depend on.
struct CostInputs {
  ModelDesc model;
  HardwareDesc hardware;
  Efficiency eff;
  Layout layout;
  int64_t seq_len = 0;            ///< tokens per sequence
  int64_t microbatch_sequences = 1;  ///< sequences per microbatch per data-parallel rank
  Recompute recompute = Recompute::kNone;
  SelectivePolicy selective = SelectivePolicy::kCoreAttention;
  int32_t selective_every = 0;    ///< kEveryNth: every n-th block fully recomputed
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;
  int32_t recompute_layers = 1;   ///< blocks per checkpoint (kUniform) or checkpointed blocks (kBlock)
  int32_t activation_element_bytes = 2;  ///< 2 for bf16/fp16 compute, 4 for fp32 (scales the activations)
  /// TP communication decomposed and pipelined with the GEMMs it feeds or drains (Megatron-LM
  /// `--tp-comm-overlap`, TransformerEngine userbuffers; torchtitan
  /// `enable_async_tensor_parallel`, symmetric-memory micro-pipelining): see tp_exposed_s.
  bool tp_comm_overlap = false;
  /// With tp_comm_overlap, the input-gradient pass's collectives are pipelined too (Megatron-LM:
  /// TransformerEngine overlaps the dgrad reduce-scatter and the wgrad all-gather). torchtitan's
  /// async TP hides only the forward's (and a recompute's): the end-to-end gains published for it
  /// are what hiding the forward's collectives alone gives (docs/facts/cost-formulas.md#tensor-parallel-overlap).
  bool tp_comm_overlap_backward = true;
  /// The attention core runs with a causal mask (decoder-only language models): FlashAttention
  /// skips the key blocks above the diagonal, so it executes about half of the QK^T and AV
  /// FLOPs that the MFU convention counts (docs/facts/cost-formulas.md#flops).
  bool causal_attention = true;
  /// The attention core's kernel (attention_kernel_flops): its forward at the kernel's rate,
  /// its backward at 2.5× the forward's FLOPs at the kernel's backward rate. Under context
  /// parallelism each rank runs cp calls of seq/cp tokens per pass, one causal and the rest
  /// unmasked (the head-tail split of PyTorch's ring attention). kGemmRate, or a GPU without
  /// figures, keeps the GEMMs' rate and twice the forward FLOPs backward.
  AttentionKernel attention_kernel = AttentionKernel::kGemmRate;
  /// The block's elementwise ops run fused, one kernel per chain (torch.compile, Megatron-LM's
  /// fused kernels), instead of one kernel per op (PyTorch eager): see elementwise_elements_per_token.
  bool fused_elementwise = false;
  /// Context parallelism exchanges the keys and values at the query heads' width: the model
  /// repeats each key/value head n_heads/n_kv_heads times before calling SDPA, and PyTorch's
  /// ring attention gathers SDPA's inputs (torchtitan/models/llama/model.py @9dec370,
  /// Attention.forward: `keys = repeat_kv(xk, self.n_rep)` before F.scaled_dot_product_attention).
  /// False: the grouped-query width, 2·kv_heads·head_dim (Megatron-LM's CP through TransformerEngine).
  bool cp_kv_heads_repeated = false;
  /// Context parallelism's backward passes the key and value gradients round the CP ring in
  /// fp32, one send of the local chunk's accumulated gradients per step (PyTorch's
  /// `_templated_ring_attention_backward`: grad_key and grad_value accumulated in float32,
  /// `_cp_options.convert_to_f32` true by default, rotated by an all-to-all rotater whatever the
  /// forward's rotate method; torch/distributed/tensor/experimental/_attention.py, PyTorch 2.6):
  /// (cp − 1) · tokens · width · 4 bytes per rank, with the width of cp_kv_heads_repeated.
  bool cp_grad_ring_fp32 = false;
  /// The blocks' linear layers compute in fp8 (torchtitan's float8 converter, torchao's
  /// Float8Linear with dynamic tensorwise scaling; Megatron-LM `--fp8-format`,
  /// TransformerEngine): each linear's three GEMMs take fp8 operands at the fp8 rate
  /// (HardwareDesc::fp8_flops) and write bf16, and the casts that feed them stream through HBM
  /// (fp8_cast_bytes). The attention core, the output projection and the routed experts
  /// (unless fp8_experts) stay in bf16 (docs/facts/cost-formulas.md#fp8-linear-layers).
  bool fp8_linear = false;
  /// With fp8_linear, the weights reach the forward already in fp8 (FSDP2's float8 all-gather,
  /// torchtitan `enable_fsdp_float8_all_gather`; Megatron-LM `--fp8-param-gather`): no
  /// per-microbatch weight cast in the forward.
  bool fp8_weights_gathered = false;
  /// With fp8_linear, the routed experts' GEMMs are in fp8 too (TransformerEngine's grouped
  /// GEMM; torchtitan converts only nn.Linear, not its grouped experts).
  bool fp8_experts = false;
};

/// HBM bytes the fp8 casts around one linear layer move, per token (`k` input and `n` output
/// features on this rank) and per weight element, as torchao's tensorwise Float8Linear runs them
/// (torchao/float8/float8_linear.py @eab345c: forward casts the input and the weight, backward
/// casts the output gradient; the weight-gradient and input-gradient GEMMs take transposed fp8
/// copies, since torch._scaled_mm wants its second operand column-major): a dynamic cast reads
/// the bf16 tensor for its absolute maximum (2 bytes, fused into the producing kernel when
/// compiled) and reads it again to write fp8 (3 bytes); a transpose of an fp8 tensor reads and
/// writes 1 byte each (docs/facts/cost-formulas.md#fp8-linear-layers). Forward: (3 or 5)·k per
/// token, plus 5 per weight element unless the weights arrive in fp8; input-gradient pass:
/// (3 or 5)·n + 2·n per token and 2 per weight element; weight-gradient pass: 2·k per token.
struct Fp8CastBytes {
  double forward_per_token = 0, input_grad_per_token = 0, weight_grad_per_token = 0;
  double forward_per_weight = 0, input_grad_per_weight = 0;
};
Fp8CastBytes fp8_cast_bytes(double k, double n, bool fused, bool weights_gathered);

/// Fraction of nominal HBM bandwidth a kernel that streams `op_bytes` reaches: calculon's
/// memory-efficiency table (`mem1.MB_efficiency` of systems/h100_80g_nvl8.json and
/// systems/a100_80g.json, calculon-ai/calculon @caa4b11): 0.9 from 100 MB, 0.75 from 10 MB,
/// 0.6 from 1 MB, 0.3 below (docs/facts/cost-formulas.md#memory-time-of-a-kernel). MB = 10^6 bytes.
double hbm_efficiency(double op_bytes);

/// Seconds `count` kernels of `op_bytes` each take to stream through HBM of `hbm_bw` bytes/s at
/// hbm_efficiency(op_bytes); 0 when hbm_bw <= 0 (the preset does not know its bandwidth).
double hbm_time_s(double hbm_bw, double op_bytes, double count = 1);

/// HBM traffic of one GEMM of an (m×k) by (k×n) product in `element_bytes`-wide elements: its two
/// operands read and its output written once, element_bytes·(m·k + k·n + m·n) (calculon's
/// `Linear` layer, `inputs_size + weight_space + output_size`, the same figure for the forward, the
/// input-gradient and the weight-gradient GEMM; docs/facts/cost-formulas.md#memory-time-of-a-kernel). Bytes.
double gemm_bytes(double m, double k, double n, double element_bytes);

/// Relative efficiency of a GEMM of `flops` FLOPs against a large one: calculon's matrix-engine
/// table (`matrix.float16.gflops_efficiency` of systems/h100_80g_nvl8.json and
/// systems/a100_80g.json @caa4b11: 0.95 from 128 GFLOP, 0.9 from 16, 0.6 from 1, 0.1 below)
/// divided by its top entry, so 1 from 128 GFLOP, 0.947 from 16 GFLOP, 0.632 from 1 GFLOP, 0.105
/// below; the fitted per-GPU efficiency (HardwareDesc::efficiency) is that of the largest GEMMs
/// (docs/facts/cost-formulas.md#memory-time-of-a-kernel). GFLOP = 10^9 FLOPs.
double gemm_size_efficiency(double flops);

/// The factor by which block `layer`'s linear FLOP time exceeds what the fitted efficiency at
/// the bf16 rate alone gives: the FLOP-weighted mean of 1 / gemm_size_efficiency over its GEMMs,
/// each fp8 GEMM's term divided by fp8_flops / peak_flops (with fp8_linear on a GPU that has
/// an fp8 rate; the same achieved fraction of each peak, docs/facts/cost-formulas.md#fp8-linear-layers).
double layer_gemm_time_factor(const CostInputs& in, int64_t layer);

/// Memory time of the linear GEMMs of block `layer` for one of its three passes (forward,
/// input gradient, weight gradient, which move the same operands; an fp8 GEMM's operands in 1
/// byte, its output in the activation width): the sum over its weight
/// matrices of hbm_time_s(gemm_bytes(...)), per rank (the TP split of each matrix, the routed
/// tokens of an MoE block's local experts). It is added to the GEMMs' FLOP time, which is
/// calculon's `no_overlap` processing mode (calculon/system.py `get_processing_time`
/// @caa4b11): a GEMM with low arithmetic intensity takes longer per FLOP. Seconds; 0 when the
/// preset has no HBM bandwidth.
double layer_gemm_memory_s(const CostInputs& in, int64_t layer);

/// Elements the elementwise ops of block `layer`'s forward read and write per token (RMSNorms,
/// RoPE, the SwiGLU product, residual adds, the attention layout copies), with h = dim, kv =
/// key/value width, f = the active MLP width: fused (each chain one kernel: it reads its inputs
/// and writes its outputs once) 12·h + 2·kv + 3·f; eager (PyTorch's kernel per op, torchtitan's
/// Llama code) 34·h + 12·kv + 5·f (docs/facts/cost-formulas.md#elementwise-ops, derived op by op).
/// A GeLU MLP (gated_mlp false) reads and writes 2·f either way, in place of 3·f and 5·f.
double elementwise_elements_per_token(const ModelDesc& m, int64_t layer, bool fused);

/// The cross-entropy loss's kernels over the logits, which stream the vocabulary-wide logits of
/// every token through HBM (docs/facts/cost-formulas.md#the-loss).
enum class LossKernel {
  /// PyTorch eager `F.cross_entropy(logits.float(), labels)` (torchtitan without a compiled
  /// loss, and the model code DeepSpeed runs): the upcast, log_softmax and nll_loss, and their
  /// backwards.
  kEager,
  /// The same compiled by torch.compile: one pass reads the bf16 logits for the row maxima and
  /// sums, the backward reads them again and writes the bf16 gradient.
  kCompiled,
  /// Megatron-LM's vocab-parallel cross entropy (megatron/core/tensor_parallel/cross_entropy.py):
  /// the upcast, max, in-place subtract, exp, sum and divide; a multiply and the downcast back.
  kMegatron,
  /// The same with `--cross-entropy-loss-fusion`: the subtract, exp and sum fused.
  kMegatronFused,
};
/// Bytes the loss reads and writes per logit (per token and vocabulary entry), forward and
/// backward [derived op by op, docs/facts/cost-formulas.md#the-loss]: eager 22 and 26, compiled
/// 4 and 4, Megatron-LM 38 and 14, Megatron-LM fused 16 and 14.
struct LossTraffic {
  double forward_bytes = 0;
  double backward_bytes = 0;
};
LossTraffic loss_traffic(LossKernel kernel);

/// Time of TP communication `comm_s` left exposed when it is split into `chunks` pieces
/// pipelined with GEMMs of `gemm_s` (chunk k's transfer runs under chunk k-1's GEMM; Wang et al.,
/// "Overlap Communication with Dependent Computation via Decomposition in Large Deep Learning
/// Models", ASPLOS 2023, the scheme of TransformerEngine's userbuffers and of PyTorch's async
/// TP; docs/facts/cost-formulas.md#tensor-parallel-overlap). A two-stage pipeline of n chunks
/// takes (c + g)/n + (n-1)·max(c, g)/n, so beyond the GEMMs: c/n when c <= g, else
/// c - g·(n-1)/n. Seconds; 0 when comm_s <= 0; chunks < 1 counts as 1 (nothing hidden).
double tp_exposed_s(double comm_s, double gemm_s, int64_t chunks);

/// The costs of block `layer`. With fewer key/value heads than TP ranks (kv_heads < tp, tp a
/// multiple), each rank holds one whole key/value group, as Megatron-LM replicates it: its
/// parameters and linear FLOPs count 2·h·d_head for wk and wv instead of 2·h·d_head·kv/tp.
/// Compute: FLOPs / (peak·eff.compute), the attention core at half
/// its counted FLOPs when causal. TP communication is added whole, or only its exposed part
/// with tp_comm_overlap (tp_exposed_s against the block's linear GEMMs; in the input-gradient
/// pass only with tp_comm_overlap_backward). Activations (16-bit,
/// FlashAttention, so no stored softmax): s·b·h·(18 + 4·F/h)/t with sequence parallelism, per
/// Megatron's compute_activation_memory (Korthikanti et al. 2022, Table 2; docs/facts/cost-formulas.md#activation-memory),
/// with the token count divided by cp; without SP the 10·s·b·h of LayerNorm and dropout inputs
/// is not divided by t. Full recompute retains the block input 2·s·b·h/(t·cp); selective every
/// n-th block retains that on one block in n; the per-op policy (torchtitan "op") retains what
/// op_policy_saved_bytes_per_token lists; Megatron's core-attention selective recompute keeps
/// the Table 2 figure (FlashAttention stores no softmax). TP with SP: 2 all-gathers and
/// 2 reduce-scatters of s·b·h·2 bytes per layer in forward, the same in backward (Narayanan et
/// al. 2021; docs/facts/cost-formulas.md#communication-volume-and-time); CP: an all-gather of the keys and values; EP: dispatch and
/// combine all-to-alls of tokens·top_k·h·2 bytes.
LayerCost layer_cost(const CostInputs& in, int64_t layer);

/// Bytes per token one Llama block keeps under torchtitan's per-op checkpoint policy
/// (`_save_list` and the every-other-matmul rule of `_apply_ac_to_transformer_block` in
/// torchtitan/models/llama3/infra/parallelize.py @238fa99; docs/facts/activation-memory.md#torchtitan-selective):
/// the block input 2h, the outputs of wq (2·heads·d_head), wv (2·kv_heads·d_head), the
/// attention kernel (2·heads·d_head plus its fp32 log-sum-exp, 4·heads), w1 (2·F) and w2 (2h),
/// divided by tp (the hidden-size terms only with sequence parallelism). 8B at tp 1: 63,616.
double op_policy_saved_bytes_per_token(const ModelDesc& m, int64_t layer, const Layout& layout);

/// What the blocks of one pipeline stage keep for one microbatch, given their layer_cost
/// (computed without recompute or with a selective policy) and the recompute of `in`.
/// Full recompute checkpoints as Megatron-LM's TransformerBlock._checkpointed_forward does
/// (megatron/core/transformer/transformer_block.py @d98e8a64; docs/facts/activation-memory.md#full-recompute):
/// kUniform keeps the input of each chunk of recompute_layers blocks and recomputes one chunk at
/// a time; kBlock checkpoints the first recompute_layers blocks one by one and keeps every
/// activation of the rest. Bytes per microbatch, seconds per microbatch.
struct StageActivations {
  int64_t retained_bytes = 0;   ///< held from the microbatch's forward to its backward
  int64_t transient_bytes = 0;  ///< the largest checkpoint recomputed (or run) at one time
  double recompute_s = 0;       ///< forward work redone in the backward
  /// What the stage holds at its fullest: retained + transient (≤ the sum of the blocks'
  /// activation_bytes).
  int64_t peak_bytes() const { return retained_bytes + transient_bytes; }
};
StageActivations stage_activations(const CostInputs& in, const std::vector<LayerCost>& blocks);

/// Bytes per parameter of the resident model states per rank (master weights, gradients and
/// Adam moments), for a sharding degree d (docs/facts/cost-formulas.md#bytes-per-parameter, #per-rank-memory-with-sharding).
enum class StateSharding { kReplicated, kOptimizer, kGradients, kFull };
double state_bytes_per_param(StateSharding sharding, int32_t d, bool fp32_grads);

/// A data-parallel group's FSDP crossover: the tokens per GPU per microbatch above which the
/// backward's compute hides its all-gather and reduce-scatter: ((b_AG + b_RS)/4)·C/W with C the
/// achieved FLOP/s and W the achieved bandwidth (docs/facts/cost-formulas.md#fsdp-crossover, "Precision factor").
double fsdp_crossover_tokens(double param_bytes, double reduce_bytes, double flops, double bw);

}  // namespace sc::model
