#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sc::model {

bool ModelDesc::is_moe_layer(int64_t layer) const {
  if (!moe || layer < moe->dense_first) return false;
  const int64_t every = std::max<int64_t>(1, moe->every);
  return (layer - moe->dense_first + 1) % every == 0;
}

namespace {

int64_t attention_params(const ModelDesc& m) {
  if (m.mla) {
    const Mla& a = *m.mla;
    const int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    const int64_t q = a.q_lora_rank == 0 ? m.dim * m.heads * qk
                                         : m.dim * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * m.heads * qk;
    const int64_t kv_a = m.dim * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank;
    const int64_t kv_b = a.kv_lora_rank * m.heads * (a.qk_nope_head_dim + a.v_head_dim);
    const int64_t o = m.heads * a.v_head_dim * m.dim;
    return q + kv_a + kv_b + o;
  }
  // wq, wk, wv, wo (docs/facts/cost-formulas.md#parameter-counts, Llama row).
  return m.dim * m.heads * m.head_dim + 2 * m.dim * m.kv_heads * m.head_dim + m.heads * m.head_dim * m.dim;
}

/// d_qk + d_v of one head.
int64_t qk_plus_v(const ModelDesc& m) {
  if (m.mla) return m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim + m.mla->v_head_dim;
  return 2 * m.head_dim;
}

/// Active MLP hidden width of a block: F for a dense block; (top_k + shared)·F_expert for MoE.
int64_t active_ffn(const ModelDesc& m, int64_t layer) {
  if (!m.is_moe_layer(layer)) return m.ffn;
  return (m.moe->top_k + m.moe->shared) * m.moe->ffn;
}

}  // namespace

int64_t ModelDesc::layer_expert_params(int64_t layer) const {
  return is_moe_layer(layer) ? moe->experts * mlp_matrices() * dim * moe->ffn : 0;
}

int64_t ModelDesc::layer_params(int64_t layer) const {
  const int64_t norms = 2 * dim;
  if (!is_moe_layer(layer)) return attention_params(*this) + mlp_matrices() * dim * ffn + norms;
  return attention_params(*this) + layer_expert_params(layer) + moe->shared * mlp_matrices() * dim * moe->ffn + dim * moe->experts +
         norms;
}

int64_t ModelDesc::layer_active_params(int64_t layer) const {
  if (!is_moe_layer(layer)) return layer_params(layer);
  return attention_params(*this) + active_ffn(*this, layer) * mlp_matrices() * dim + dim * moe->experts + 2 * dim;
}

int64_t ModelDesc::total_params() const {
  int64_t n = embedding_params() + output_params();
  for (int64_t l = 0; l < layers; ++l) n += layer_params(l);
  return n;
}

int64_t ModelDesc::active_params() const {
  int64_t n = embedding_params() + output_params();
  for (int64_t l = 0; l < layers; ++l) n += layer_active_params(l);
  return n;
}

double ModelDesc::layer_linear_flops_per_token(int64_t layer) const {
  return 2.0 * static_cast<double>(layer_active_params(layer));
}

double ModelDesc::layer_attention_flops_per_token(int64_t seq) const {
  return 2.0 * static_cast<double>(heads) * static_cast<double>(qk_plus_v(*this)) * static_cast<double>(seq);
}

double ModelDesc::training_flops_per_token(int64_t seq) const {
  return 6.0 * static_cast<double>(active_params() - embedding_params()) +
         3.0 * static_cast<double>(layers) * layer_attention_flops_per_token(seq);
}

LinkTier link_tier(const HardwareDesc& hw, int64_t stride, int64_t size) {
  if (size <= 1) return LinkTier::kIntraNode;
  return stride * size <= hw.gpus_per_node ? LinkTier::kIntraNode : LinkTier::kInterNode;
}

double tier_bandwidth(const HardwareDesc& hw, const Efficiency& eff, LinkTier tier) {
  return tier == LinkTier::kIntraNode ? hw.intra_node_bw * eff.intra_node : hw.inter_node_bw * eff.inter_node;
}

double group_bandwidth(const HardwareDesc& hw, const Efficiency& eff, int64_t stride, int64_t size) {
  if (link_tier(hw, stride, size) == LinkTier::kIntraNode) return tier_bandwidth(hw, eff, LinkTier::kIntraNode);
  const int64_t per_node = std::max<int64_t>(1, std::min<int64_t>(size, hw.gpus_per_node / std::max<int64_t>(1, stride)));
  return std::min(tier_bandwidth(hw, eff, LinkTier::kInterNode) * static_cast<double>(per_node),
                  tier_bandwidth(hw, eff, LinkTier::kIntraNode));
}

double ring_time_s(double bytes, int64_t n, double bw, double latency_s, bool all_reduce) {
  if (n <= 1 || bytes <= 0) return 0;
  const double f = all_reduce ? 2.0 : 1.0;
  return latency_s + f * static_cast<double>(n - 1) / static_cast<double>(n) * bytes / bw;
}

double tp_exposed_s(double comm_s, double gemm_s, int64_t chunks) {
  if (comm_s <= 0) return 0;
  const double n = static_cast<double>(std::max<int64_t>(1, chunks));
  if (comm_s <= gemm_s) return comm_s / n;
  return comm_s - gemm_s * (n - 1) / n;
}

double hbm_efficiency(double op_bytes) {
  if (op_bytes >= 100e6) return 0.9;
  if (op_bytes >= 10e6) return 0.75;
  if (op_bytes >= 1e6) return 0.6;
  return 0.3;
}

double hbm_time_s(double hbm_bw, double op_bytes, double count) {
  if (hbm_bw <= 0 || op_bytes <= 0 || count <= 0) return 0;
  return count * op_bytes / (hbm_bw * hbm_efficiency(op_bytes));
}

double gemm_bytes(double m, double k, double n, double element_bytes) {
  return element_bytes * (m * k + k * n + m * n);
}

double gemm_size_efficiency(double flops) {
  if (flops >= 128e9) return 1.0;
  if (flops >= 16e9) return 0.9 / 0.95;
  if (flops >= 1e9) return 0.6 / 0.95;
  return 0.1 / 0.95;
}

namespace {

/// One GEMM of a block's pass: a (rows×k) by (k×n) product whose weights are `weights` elements
/// (k·n, or the local experts' k·n·experts, each read once).
struct Gemm {
  double rows = 0, k = 0, n = 0, weights = 0;
  bool fp8 = false;  ///< fp8 operands (CostInputs::fp8_linear)
  double flops() const { return 2 * rows * k * n; }
};

/// The linear GEMMs of block `layer` on one rank, for one pass (the forward, input-gradient
/// and weight-gradient GEMMs have the same operands).
std::vector<Gemm> layer_gemms(const CostInputs& in, int64_t layer) {
  const ModelDesc& m = in.model;
  const Layout& lay = in.layout;
  const double tokens = static_cast<double>(in.microbatch_sequences * in.seq_len) / lay.cp;
  const double h = static_cast<double>(m.dim);
  const double t = lay.tp;
  std::vector<Gemm> g;
  auto dense = [&](double k, double n) { g.push_back({tokens, k, n, k * n, in.fp8_linear}); };
  if (m.mla) {
    // MLA's chain of low-rank projections, counted as one h-wide input to its parameters.
    const double p = static_cast<double>(attention_params(m)) / t;
    dense(h, p / h);
  } else {
    const double q = static_cast<double>(m.heads * m.head_dim) / t;
    // Fewer key/value heads than TP ranks: each rank holds one whole group (layer_cost).
    const double kv = std::max(static_cast<double>(m.kv_heads * m.head_dim) / t,
                               m.kv_heads < lay.tp ? static_cast<double>(m.head_dim) : 0.0);
    dense(h, q + 2 * kv);
    dense(q, h);
  }
  const double up = static_cast<double>(m.mlp_matrices() - 1);
  if (!m.is_moe_layer(layer)) {
    const double f = static_cast<double>(m.ffn) / t;
    dense(h, up * f);
    dense(f, h);
    return g;
  }
  // MoE: the local routed experts see tokens·top_k (token, expert) pairs in all, and each of
  // their weight matrices is read once; the shared experts run as a dense MLP.
  const Moe& moe = *m.moe;
  const double etp = lay.expert_tp();
  const double local = static_cast<double>(moe.experts) / static_cast<double>(lay.ep);
  const double fe = static_cast<double>(moe.ffn) / etp;
  const double pairs = tokens * static_cast<double>(moe.top_k);
  const bool fp8_experts = in.fp8_linear && in.fp8_experts;
  g.push_back({pairs, h, up * fe, local * h * up * fe, fp8_experts});
  g.push_back({pairs, fe, h, local * fe * h, fp8_experts});
  if (moe.shared > 0) {
    const double f = static_cast<double>(moe.shared * moe.ffn) / t;
    dense(h, up * f);
    dense(f, h);
  }
  return g;
}

/// layer_gemm_memory_s of the GEMMs `gemms`.
double gemm_memory_s(const CostInputs& in, const std::vector<Gemm>& gemms) {
  const double e = in.activation_element_bytes;
  double s = 0;
  for (const Gemm& g : gemms) {
    const double operand = g.fp8 ? 1.0 : e;
    s += hbm_time_s(in.hardware.hbm_bw, operand * (g.rows * g.k + g.weights) + e * g.rows * g.n);
  }
  return s;
}

/// How much faster an fp8 GEMM runs than a bf16 one on `hw`: fp8_flops / peak_flops, 1 when the
/// GPU has no fp8 rate.
double fp8_speedup(const HardwareDesc& hw) {
  return hw.fp8_flops > 0 && hw.peak_flops > 0 ? hw.fp8_flops / hw.peak_flops : 1.0;
}

/// layer_gemm_time_factor of the GEMMs `gemms`; fp8 GEMMs `speedup` times faster.
double gemm_time_factor(const std::vector<Gemm>& gemms, double speedup) {
  double flops = 0, weighted = 0;
  for (const Gemm& g : gemms) {
    flops += g.flops();
    weighted += g.flops() / gemm_size_efficiency(g.flops()) / (g.fp8 ? speedup : 1.0);
  }
  return flops > 0 ? weighted / flops : 1.0;
}

/// HBM time of the fp8 casts of `gemms` (fp8_cast_bytes), per pass.
struct CastTimes {
  double forward_s = 0, input_grad_s = 0, weight_grad_s = 0;
};
CastTimes fp8_cast_times(const CostInputs& in, const std::vector<Gemm>& gemms) {
  CastTimes t;
  for (const Gemm& g : gemms) {
    if (!g.fp8) continue;
    const Fp8CastBytes b = fp8_cast_bytes(g.k, g.n, in.fused_elementwise, in.fp8_weights_gathered);
    // One kernel per cast; each is timed at the efficiency of the bytes it streams.
    auto time = [&](double per_token, double per_weight) {
      return hbm_time_s(in.hardware.hbm_bw, g.rows * per_token) + hbm_time_s(in.hardware.hbm_bw, g.weights * per_weight);
    };
    t.forward_s += time(b.forward_per_token, b.forward_per_weight);
    t.input_grad_s += time(b.input_grad_per_token, b.input_grad_per_weight);
    t.weight_grad_s += time(b.weight_grad_per_token, 0);
  }
  return t;
}

}  // namespace

double layer_gemm_memory_s(const CostInputs& in, int64_t layer) { return gemm_memory_s(in, layer_gemms(in, layer)); }

double layer_gemm_time_factor(const CostInputs& in, int64_t layer) {
  return gemm_time_factor(layer_gemms(in, layer), fp8_speedup(in.hardware));
}

namespace {

/// Sequence lengths of the FlashAttention-3 paper's figures and the H100 SXM5 TFLOP/s read off
/// them (bf16, head dimension 128; arXiv 2407.08608 Figure 5: forward, causal and not; Figure 6:
/// backward, not causal).
constexpr double kAttnSeq[] = {512, 1024, 2048, 4096, 8192, 16384};
struct AttnFigures {
  double fwd_causal[6], fwd_full[6], bwd_full[6];
};
constexpr AttnFigures kFlash2H100 = {{191, 260, 298, 319, 333, 335}, {309, 350, 362, 368, 370, 370},
                                     {214, 260, 291, 310, 318, 322}};
constexpr AttnFigures kCudnnH100 = {{315, 410, 484, 518, 529, 539}, {497, 574, 617, 609, 600, 595},
                                    {305, 408, 465, 499, 518, 516}};

/// `table` at `seq` tokens: linear in log2(seq) between the figures, the end figures beyond them.
double at_length(const double (&table)[6], double seq) {
  if (seq <= kAttnSeq[0]) return table[0];
  for (int i = 1; i < 6; ++i)
    if (seq <= kAttnSeq[i]) {
      const double t = std::log2(seq / kAttnSeq[i - 1]);  // the figures are a doubling apart
      return table[i - 1] + t * (table[i] - table[i - 1]);
    }
  return table[5];
}

}  // namespace

double attention_kernel_flops(const HardwareDesc& hw, double gemm_efficiency, AttentionKernel kernel, double seq,
                              bool causal, bool backward) {
  if (kernel == AttentionKernel::kGemmRate || hw.sm != 90 || seq <= 0) return 0;
  const AttnFigures& f = kernel == AttentionKernel::kFlash2 ? kFlash2H100 : kCudnnH100;
  double tflops = 0;
  if (!backward) {
    tflops = at_length(causal ? f.fwd_causal : f.fwd_full, seq);
  } else {
    tflops = at_length(f.bwd_full, seq);
    if (causal) tflops *= at_length(f.fwd_causal, seq) / at_length(f.fwd_full, seq);
  }
  // The figures are the H100 SXM's; another Hopper preset runs them at its GEMMs' share of it.
  static const double h100_efficiency = hardware_preset("h100")->efficiency;
  return tflops * 1e12 * gemm_efficiency / h100_efficiency;
}

Fp8CastBytes fp8_cast_bytes(double k, double n, bool fused, bool weights_gathered) {
  const double cast = fused ? 3.0 : 5.0;  // (amax read,) read bf16, write fp8
  Fp8CastBytes b;
  b.forward_per_token = cast * k;
  b.forward_per_weight = weights_gathered ? 0.0 : 5.0;  // a whole-tensor amax, then the cast
  b.input_grad_per_token = cast * n + 2.0 * n;         // the output gradient, and its transpose
  b.input_grad_per_weight = 2.0;                       // the fp8 weight transposed
  b.weight_grad_per_token = 2.0 * k;                   // the fp8 input transposed
  return b;
}

LayerCost layer_cost(const CostInputs& in, int64_t layer) {
  const ModelDesc& m = in.model;
  const Layout& lay = in.layout;
  LayerCost c;
  const double tokens = static_cast<double>(in.microbatch_sequences * in.seq_len) / lay.cp;  // per rank
  const double rate = in.hardware.peak_flops * in.eff.compute;
  // Fewer key/value heads than TP ranks: each rank holds one whole group (Megatron-LM replicates
  // it; megatron/core/transformer/attention.py @d98e8a64), not kv/tp of one: its wk and wv
  // projections hold 2·h·d_head parameters where the even split gives 2·h·d_head·kv/tp.
  const double kv_replica_params =
      !m.mla && m.kv_heads > 0 && m.kv_heads < lay.tp
          ? 2.0 * static_cast<double>(m.dim * m.head_dim) * (1.0 - static_cast<double>(m.kv_heads) / lay.tp)
          : 0.0;
  const double lin = tokens * (m.layer_linear_flops_per_token(layer) / lay.tp + 2 * kv_replica_params);
  const double attn = tokens * m.layer_attention_flops_per_token(in.seq_len) / lay.tp;
  const double h = static_cast<double>(m.dim);
  const double lat = in.eff.latency_s;
  // TP: 2 all-gathers + 2 reduce-scatters (SP) or 2 all-reduces per direction, of the whole
  // microbatch's activation in bf16 (Narayanan et al. 2021; docs/facts/cost-formulas.md#communication-volume-and-time).
  if (lay.tp > 1) {
    const double bytes = tokens * h * 2;
    const double bw = group_bandwidth(in.hardware, in.eff, 1, lay.tp);
    c.tp_comm_s = lay.sequence_parallel ? 4 * ring_time_s(bytes, lay.tp, bw, lat, false)
                                        : 2 * ring_time_s(bytes, lay.tp, bw, lat, true);
  }
  // CP: all-gather of this rank's keys and values over the CP group (ring attention's volume),
  // at the width the attention kernel is called with (CostInputs::cp_kv_heads_repeated); with
  // PyTorch's ring backward, the fp32 key/value gradients passed round the ring as well.
  if (lay.cp > 1) {
    const double kv_heads = in.cp_kv_heads_repeated && !m.mla ? static_cast<double>(m.heads)
                                                              : static_cast<double>(m.kv_heads);
    const double kv_width = m.mla ? static_cast<double>(m.mla->kv_lora_rank + m.mla->qk_rope_head_dim)
                                  : 2.0 * kv_heads * static_cast<double>(m.head_dim) / lay.tp;
    const double bytes = tokens * lay.cp * kv_width * 2;
    const double bw = group_bandwidth(in.hardware, in.eff, lay.tp, lay.cp);
    c.cp_comm_s = ring_time_s(bytes, lay.cp, bw, lat, false);
    if (in.cp_grad_ring_fp32) c.cp_grad_comm_s = ring_time_s(2 * bytes, lay.cp, bw, lat, false);
  }
  // EP: dispatch and combine all-to-alls of the routed tokens (docs/facts/cost-formulas.md#communication-volume-and-time, AllToAll row):
  // (ep-1)/ep of tokens·top_k·h·2 bytes leave each rank, twice per direction.
  if (lay.ep > 1 && m.is_moe_layer(layer)) {
    const double bytes = tokens * static_cast<double>(m.moe->top_k) * h * 2;
    const double bw = group_bandwidth(in.hardware, in.eff, 1, lay.ep);
    c.ep_comm_s = 2 * (lat + static_cast<double>(lay.ep - 1) / lay.ep * bytes / bw);
  }
  // TP overlap: the forward's and the input-gradient pass's collectives each pipeline with
  // that pass's linear GEMMs (the same FLOPs both ways), in tp chunks.
  const std::vector<Gemm> gemms = layer_gemms(in, layer);
  // fp8 GEMMs are shorter, so they hide less: the overlap sees their time at the fp8 rate.
  const double fp8_share = gemm_time_factor(gemms, fp8_speedup(in.hardware)) / gemm_time_factor(gemms, 1.0);
  // With fp8 linear layers under sequence parallelism the forward's two all-gathers move the
  // fp8 cast of the activations (torchao's Float8ColwiseParallel and PrepareFloat8ModuleInput,
  // which torchtitan applies with float8: torchtitan/parallelisms/parallelize_llama.py @9dec370),
  // half the bytes; the reduce-scatters and the backward's collectives stay bf16.
  const double tp_forward_s = in.fp8_linear && lay.sequence_parallel && lay.tp > 1 ? 0.75 * c.tp_comm_s : c.tp_comm_s;
  c.tp_exposed_s = in.tp_comm_overlap ? tp_exposed_s(tp_forward_s, lin / rate * fp8_share, lay.tp) : tp_forward_s;
  c.tp_exposed_backward_s = in.tp_comm_overlap && in.tp_comm_overlap_backward
                                ? tp_exposed_s(c.tp_comm_s, lin / rate * fp8_share, lay.tp)
                                : c.tp_comm_s;
  const double comm = c.tp_exposed_s + c.cp_comm_s + c.ep_comm_s;
  const double comm_backward = c.tp_exposed_backward_s + c.cp_comm_s + c.cp_grad_comm_s + c.ep_comm_s;
  const double attn_run = in.causal_attention ? attn / 2 : attn;
  // The attention core at its kernel's rate (attention_kernel_flops), or at the GEMMs' rate.
  double attn_f_s = attn_run / rate, attn_b_s = 2 * attn_run / rate;
  {
    const double len = static_cast<double>(in.seq_len) / lay.cp;  // tokens of one call
    const double eff = in.eff.compute;
    auto r = [&](bool causal, bool backward) {
      return attention_kernel_flops(in.hardware, eff, in.attention_kernel, len, causal, backward);
    };
    if (r(false, false) > 0 && attn_run > 0) {  // the kernel has figures for this GPU
      // Under CP one of the cp calls per pass is causal (the diagonal), the others unmasked.
      const double causal_share = in.causal_attention ? 1.0 / lay.cp : 0.0;
      attn_f_s = attn_run * (causal_share / r(true, false) + (1 - causal_share) / r(false, false));
      attn_b_s = 2.5 * attn_run * (causal_share / r(true, true) + (1 - causal_share) / r(false, true));
    }
  }
  double score_elements = 0;  // materialised attention: heads × s_q × s_kv scores on this rank
  if (in.attention_kernel == AttentionKernel::kMaterialized && attn > 0) {
    // The whole s×s matrix, masked after: the counted FLOPs run, at the batched GEMMs' rate,
    // and the scores stream through HBM (kMaterializedBytes).
    score_elements = tokens * static_cast<double>(m.heads) / lay.tp * static_cast<double>(in.seq_len);
    const double e = in.activation_element_bytes / 2.0;  // the byte counts are for 16-bit scores
    const double one = 2 * e * score_elements;           // one pass over the scores
    attn_f_s = attn / rate + hbm_time_s(in.hardware.hbm_bw, one, kMaterializedBytes.forward / 2);
    attn_b_s = 2 * attn / rate + hbm_time_s(in.hardware.hbm_bw, one, kMaterializedBytes.backward / 2);
  }
  c.attention_s = attn_f_s;
  // Memory-bound elementwise ops at the HBM bandwidth, in the activation width; split over the
  // TP ranks (the h-wide ones by sequence parallelism, the others by the column split; without
  // SP the h-wide ones are replicated, which this leaves out). Their backward reads the saved
  // inputs and the output gradient and writes the input gradient: about twice the forward
  // (docs/facts/cost-formulas.md#elementwise-ops).
  // Each is timed at the HBM efficiency of a kernel that reads one h-wide activation and
  // writes one (hbm_efficiency; docs/facts/cost-formulas.md#memory-time-of-a-kernel).
  const double elementwise_bytes = tokens * elementwise_elements_per_token(m, layer, in.fused_elementwise) *
                                   in.activation_element_bytes / lay.tp;
  const double one_op = 2 * tokens * h * in.activation_element_bytes / lay.tp;
  c.elementwise_s = hbm_time_s(in.hardware.hbm_bw, one_op, elementwise_bytes / one_op);
  // The linear GEMMs: each one's FLOPs at the efficiency of its size, plus the time its operands
  // take through HBM (calculon's no_overlap mode), the same traffic in each of the three passes.
  c.gemm_memory_s = gemm_memory_s(in, gemms);
  const double lin_s = lin / rate * gemm_time_factor(gemms, fp8_speedup(in.hardware));
  const CastTimes casts = fp8_cast_times(in, gemms);
  c.fp8_cast_s = casts.forward_s + casts.input_grad_s + casts.weight_grad_s;
  c.forward_s = lin_s + attn_f_s + c.gemm_memory_s + comm + c.elementwise_s + casts.forward_s;
  c.input_grad_s = lin_s + attn_b_s + c.gemm_memory_s + comm_backward + 2 * c.elementwise_s + casts.input_grad_s;
  c.weight_grad_s = lin_s + c.gemm_memory_s + casts.weight_grad_s;
  const int64_t dense = m.layer_params(layer) - m.layer_expert_params(layer);
  c.expert_params = m.layer_expert_params(layer) / (static_cast<int64_t>(lay.ep) * lay.expert_tp());
  c.params = dense / lay.tp + static_cast<int64_t>(kv_replica_params) + c.expert_params;
  // Activations per layer: s·b·h·(18 + 4·F/h)/t with SP (Megatron compute_activation_memory,
  // Korthikanti et al. 2022 Table 2; FlashAttention stores no softmax). Without SP the 10·s·b·h
  // of norm and dropout inputs stays whole on every TP rank.
  const double f_over_h = static_cast<double>(active_ffn(m, layer)) / h;
  const double per_token = lay.sequence_parallel || lay.tp == 1 ? h * (18 + 4 * f_over_h) / lay.tp
                                                                : h * (10 + (8 + 4 * f_over_h) / lay.tp);
  // Table 2 counts 16-bit activations; fp32 compute stores every one of them at 4 bytes.
  const double width = in.activation_element_bytes / 2.0;
  // Materialised attention keeps its softmax output and dropout mask: 5 bytes per score
  // (Korthikanti et al. 2022, Table 2's 5as/h term, which FlashAttention removes).
  c.activation_bytes = static_cast<int64_t>(tokens * per_token * width + 5 * width * score_elements);
  const int64_t input = static_cast<int64_t>(tokens * h * 2 * width / (lay.sequence_parallel ? lay.tp : 1));
  c.input_bytes = input;
  switch (in.recompute) {
    case Recompute::kNone:
      c.retained_bytes = c.activation_bytes;
      break;
    case Recompute::kFull:
      c.retained_bytes = input;
      c.recompute_s = c.forward_s;
      break;
    case Recompute::kSelective:
      switch (in.selective) {
        case SelectivePolicy::kEveryNth: {
          const double n = std::max(1, in.selective_every);
          c.retained_bytes = static_cast<int64_t>((1 - 1 / n) * c.activation_bytes + input / n);
          c.recompute_s = c.forward_s / n;
          break;
        }
        case SelectivePolicy::kOpPolicy: {
          c.retained_bytes = std::min(c.activation_bytes, static_cast<int64_t>(tokens * width *
                                                                             op_policy_saved_bytes_per_token(m, layer, lay)));
          // Recomputed: the other matmuls (wk, wo, w3 of a dense block; for an MoE block the
          // routed experts' w3 and the shared experts' likewise) and the elementwise ops.
          const double kv = static_cast<double>(m.kv_heads * m.head_dim);
          const double q = static_cast<double>(m.heads * m.head_dim);
          const double recomputed_per_token = 2.0 * (h * kv + q * h + h * static_cast<double>(active_ffn(m, layer)));
          const double recomputed = tokens * recomputed_per_token / lay.tp;
          // Their operands' HBM time in proportion to their FLOPs.
          c.recompute_s = lin > 0 ? (lin_s + c.gemm_memory_s + casts.forward_s) * recomputed / lin + c.elementwise_s
                                  : c.elementwise_s;
          break;
        }
        case SelectivePolicy::kCoreAttention:
          c.retained_bytes = c.activation_bytes;  // see layer_cost's comment
          break;
      }
      break;
  }
  return c;
}

LossTraffic loss_traffic(LossKernel kernel) {
  switch (kernel) {
    case LossKernel::kEager:
      // Forward: .float() reads 2 and writes 4; log_softmax reads its input three times (max, sum
      // of exponentials, output) and writes once, 16. Backward: nll_loss's gradient written, 4;
      // log_softmax's backward reads the gradient twice and its output once and writes, 16; the
      // downcast reads 4 and writes 2, 6.
      return {22, 26};
    case LossKernel::kCompiled:
      return {4, 4};
    case LossKernel::kMegatron:
      // Forward: .float() 2 + 4; max 4; in-place subtract 8; exp 8; sum 4; in-place divide 8.
      // Backward: the in-place multiply by the output gradient 8; the downcast 4 + 2.
      return {38, 14};
    case LossKernel::kMegatronFused:
      // Forward: max over the bf16 logits 2; subtract, exp and sum in one kernel 2 + 4; the
      // divide 8. Backward as unfused.
      return {16, 14};
  }
  return {};
}

double elementwise_elements_per_token(const ModelDesc& m, int64_t layer, bool fused) {
  const double h = static_cast<double>(m.dim);
  const double kv = static_cast<double>(m.mla ? m.mla->kv_lora_rank + m.mla->qk_rope_head_dim : m.kv_heads * m.head_dim);
  const double f = static_cast<double>(active_ffn(m, layer));
  // A gated MLP's product reads two F-wide inputs; GeLU reads one (fused: read F, write F;
  // eager: the activation alone, 2·F).
  const double mlp = m.gated_mlp ? (fused ? 3 : 5) : 2;
  return fused ? 12 * h + 2 * kv + mlp * f : 34 * h + 12 * kv + mlp * f;
}

double op_policy_saved_bytes_per_token(const ModelDesc& m, int64_t layer, const Layout& lay) {
  const double h = static_cast<double>(m.dim);
  const double q = static_cast<double>(m.heads * (m.mla ? m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim : m.head_dim));
  const double v = static_cast<double>(m.mla ? m.mla->kv_lora_rank + m.mla->qk_rope_head_dim : m.kv_heads * m.head_dim);
  const double attn_out = static_cast<double>(m.heads * (m.mla ? m.mla->v_head_dim : m.head_dim));
  const double f = static_cast<double>(active_ffn(m, layer));
  const double t = lay.tp;
  const double hidden_div = lay.sequence_parallel || lay.tp == 1 ? t : 1;
  // Block input and w2's output (a reduce-scatter under TP with SP); wq, wv, the attention
  // kernel's output and log-sum-exp, w1: column-parallel, split over tp.
  return 2 * h / hidden_div + 2 * h / hidden_div + (2 * q + 2 * v + 2 * attn_out + 4.0 * m.heads + 2 * f) / t;
}

StageActivations stage_activations(const CostInputs& in, const std::vector<LayerCost>& blocks) {
  StageActivations s;
  if (in.recompute != Recompute::kFull) {
    // Every n-th block checkpointed: layer_cost spreads the saving over the blocks, but the
    // block recomputed at a time holds all its activations.
    const bool every_nth = in.recompute == Recompute::kSelective && in.selective == SelectivePolicy::kEveryNth;
    for (const LayerCost& c : blocks) {
      s.retained_bytes += c.retained_bytes;
      s.transient_bytes = std::max(s.transient_bytes, every_nth ? c.activation_bytes : c.activation_bytes - c.retained_bytes);
      s.recompute_s += c.recompute_s;
    }
    return s;
  }
  const size_t n = static_cast<size_t>(std::max(1, in.recompute_layers));
  if (in.recompute_method == RecomputeMethod::kBlock) {
    for (size_t k = 0; k < blocks.size(); ++k) {
      const LayerCost& c = blocks[k];
      if (k < n) {
        s.retained_bytes += c.input_bytes;
        s.transient_bytes = std::max(s.transient_bytes, c.activation_bytes);
        s.recompute_s += c.forward_s;
      } else {
        s.retained_bytes += c.activation_bytes;
      }
    }
    return s;
  }
  for (size_t k = 0; k < blocks.size(); k += n) {
    int64_t chunk = 0;
    s.retained_bytes += blocks[k].input_bytes;
    for (size_t j = k; j < std::min(blocks.size(), k + n); ++j) {
      chunk += blocks[j].activation_bytes;
      s.recompute_s += blocks[j].forward_s;
    }
    s.transient_bytes = std::max(s.transient_bytes, chunk);
  }
  return s;
}

double state_bytes_per_param(StateSharding sharding, int32_t d, bool fp32_grads) {
  const double g = fp32_grads ? 4 : 2, k = 12;  // K = 12: fp32 master, Adam m and v (ZeRO §3)
  const double n = std::max(1, d);
  switch (sharding) {
    case StateSharding::kReplicated: return 2 + g + k;
    case StateSharding::kOptimizer: return 2 + g + k / n;
    case StateSharding::kGradients: return 2 + (g + k) / n;
    case StateSharding::kFull: return 16 / n;  // (2 + 2 + K)/N (ZeRO); torchtitan 4 + 4 + 8 (docs/facts/cost-formulas.md#bytes-per-parameter)
  }
  return 0;
}

double fsdp_crossover_tokens(double param_bytes, double reduce_bytes, double flops, double bw) {
  return (param_bytes + reduce_bytes) / 4.0 * flops / bw;
}

}  // namespace sc::model
