#include "config/lower_job.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/preset_names.h"
#include "support/units.h"

namespace sc::config {
namespace {

using model::LinkTier;

int dtype_bytes(const std::string& dtype) { return dtype == "fp32" ? 4 : dtype == "fp8" ? 1 : 2; }

const char* tier_name(LinkTier t) { return t == LinkTier::kIntraNode ? "NVLink (inside a node)" : "the network (across nodes)"; }

/// Costs summed over the blocks of one stage.
struct StageSum {
  double f = 0, i = 0, w = 0, r = 0;
  int64_t params = 0, expert_params = 0, activation = 0, retained = 0, weight_grad = 0;
};

}  // namespace

namespace {

/// Puts the job's action lists (a CSV's or a synthesised schedule's) in place of the named
/// schedule. The named schedule still places the stages, as torchtitan builds them from it:
/// loop (stage s on rank s mod pp), or V for zb-v and dualpipev (rank r holds stages r and
/// 2·pp - 1 - r). Errors at the schedule's key: a row count other than pp, a stage or microbatch
/// outside the job's, a stage run on a rank that does not build it.
bool use_schedule_actions(const TrainingJob& job, PipelineSpec* p, Diagnostics& diags) {
  const SourceLoc at = job.loc(job.schedule_csv.empty() ? "schedule" : "schedule_csv");
  const std::string what = job.schedule_csv.empty() ? std::string("the schedule") : job.schedule_csv;
  const bool v = job.schedule == "zb-v" || job.schedule == "dualpipev";
  const int32_t pp = p->ranks;
  if (static_cast<int32_t>(job.schedule_actions.size()) != pp) {
    diags.error(at, fmt::format("{} has {} rows (one per pipeline rank), but pipeline_parallel_degree is {}", what,
                                job.schedule_actions.size(), pp));
    return false;
  }
  std::vector<int32_t> stage_to_rank(p->stages);
  for (int32_t s = 0; s < p->stages; ++s) stage_to_rank[s] = !v ? s % pp : s < pp ? s : 2 * pp - 1 - s;
  for (int32_t r = 0; r < pp; ++r)
    for (const Step& st : job.schedule_actions[r])
      for (const Action* a : {&st.first, st.second ? &*st.second : nullptr}) {
        if (!a) continue;
        const SourceLoc cell = st.loc.valid() ? st.loc : at;  // the CSV cell when there is one
        if (a->stage >= p->stages) {
          diags.error(cell, fmt::format("{}: rank {} runs {}, but the job has {} stages ({} per rank)", what, r,
                                      format_step(st), p->stages, job.stages_per_rank));
          return false;
        }
        if (a->microbatch >= p->microbatches) {
          diags.error(cell, fmt::format("{}: rank {} runs {}, but the job has {} microbatches per step", what, r,
                                      format_step(st), p->microbatches));
          return false;
        }
        if (a->stage >= 0 && stage_to_rank[a->stage] != r) {
          diags.error(cell, fmt::format("{}: rank {} runs {}, but torchtitan builds stage {} on rank {} ({} placement "
                                      "of pipeline_parallel_schedule)", what, r, format_step(st), a->stage,
                                      stage_to_rank[a->stage], v ? "the V" : "the loop"));
          return false;
        }
      }
  p->named.reset();
  p->actions = job.schedule_actions;
  p->stage_to_rank = std::move(stage_to_rank);
  p->placement = v ? "v" : "loop";
  p->placement_declared = true;
  p->pipeline_starts = {0};
  for (auto& row : p->actions)
    for (Step& st : row)
      if (!st.loc.valid()) st.loc = at;
  return true;
}

}  // namespace

const std::vector<TorchtitanSchedule>& torchtitan_schedules() {
  static const std::vector<TorchtitanSchedule> table = {
      {"GPipe", "gpipe", false, false},
      {"1F1B", "1f1b", false, false},
      {"Interleaved1F1B", "interleaved-1f1b", true, false},
      {"LoopedBFS", "looped-bfs", true, false},
      {"InterleavedZeroBubble", "interleaved-zb", true, false},
      {"ZBVZeroBubble", "zb-v", true, true},
      {"DualPipeV", "dualpipev", true, true},
  };
  return table;
}

std::string torchtitan_microbatch_rule(const std::string& ours, int32_t m, int32_t pp, int32_t stages) {
  if (ours == "1f1b" && m < stages)
    return fmt::format("Number of microbatches ({}) must be greater than or equal to the number of stages ({}) for "
                       "1F1B", m, stages);
  if (ours == "interleaved-1f1b" || ours == "interleaved-zb") {
    const int32_t rounds = std::max(1, m / pp);
    if (m % rounds != 0)
      return fmt::format("Number of microbatches ({}) must be divisible by the number of rounds ({})", m, rounds);
  }
  if (ours == "dualpipev" && m < 2 * pp)
    return fmt::format("DualPipeV needs at least 2 * pp = {} microbatches, got {}", 2 * pp, m);
  return "";
}

std::vector<int64_t> torchtitan_stage_layers(int64_t layers, int32_t stages, int64_t input_weight,
                                             int64_t output_weight, std::string* why) {
  if (stages < 1 || layers < 0 || input_weight < 0 || output_weight < 0) {
    *why = "the layer split needs at least one stage and no negative weight";
    return {};
  }
  if (stages == 1) return {layers};
  const int64_t effective = layers + input_weight + output_weight;
  if (stages > effective) {
    *why = fmt::format("Number of stages ({}) cannot be greater than effective layers ({}: {} layers + input weight "
                       "{} + output weight {})", stages, effective, layers, input_weight, output_weight);
    return {};
  }
  const int64_t share = effective / stages, extra = effective % stages;
  if (input_weight > share || output_weight > share) {
    *why = fmt::format("{} ({}) exceeds minimum layers per stage ({}: {} effective layers over {} stages)",
                       input_weight > share ? "input_weight" : "output_weight",
                       input_weight > share ? input_weight : output_weight, share, effective, stages);
    return {};
  }
  std::vector<int64_t> out(stages);
  for (int32_t s = 0; s < stages; ++s) {
    out[s] = share + (s < extra ? 1 : 0);
    if (s == 0) out[s] -= input_weight;
    if (s == stages - 1) out[s] -= output_weight;
  }
  return out;
}

bool lower_job(const TrainingJob& job, const JobContext& ctx, LoweredJob* out, Diagnostics& diags) {
  LoweredJob& lj = *out;
  JobCosts& jc = lj.costs;
  const model::Layout& lay = job.layout;
  // Model and hardware.
  if (job.model_desc) {
    jc.model = *job.model_desc;
  } else {
    const std::string name = !job.model.empty() ? job.model : ctx.model;
    auto m = model::model_preset(name);
    if (!m) {
      diags.error(job.loc("model"), name.empty()
                                        ? fmt::format("the config names no model: pass --model with one of {}",
                                                      fmt::join(model::model_preset_names(), ", "))
                                        : fmt::format("unknown model preset '{}'{}; the presets are {}", name,
                                                      model_preset_hint(name),
                                                      fmt::join(model::model_preset_names(), ", ")));
      return false;
    }
    jc.model = *m;
  }
  {
    std::string name = !job.hardware.empty() ? job.hardware : ctx.hardware;
    if (name.empty()) {
      name = "h100";
      jc.notes.push_back("no GPU named in the config or with --hardware: H100 SXM assumed");
    }
    auto h = model::hardware_preset(name);
    if (!h) {
      diags.error(job.loc("hardware"), fmt::format("unknown hardware preset '{}'{}; the presets are {}", name,
                                                   hardware_preset_hint(name),
                                                   fmt::join(model::hardware_preset_names(), ", ")));
      return false;
    }
    jc.hardware = *h;
  }
  if (job.seq_len <= 0) {
    diags.error(job.file, "the config states no sequence length: pass --seq-len N");
    return false;
  }
  const model::ModelDesc& m = jc.model;
  const model::HardwareDesc& hw = jc.hardware;
  // Parameter and byte counts are 64-bit integers: a model far beyond any trained one (10^15
  // parameters, or a block's h·F or h² past 2^50) would overflow them into negative sizes and
  // times. Counted here in floating point, before any integer count.
  {
    const double h = static_cast<double>(m.dim), f = static_cast<double>(std::max(m.ffn, m.moe ? m.moe->ffn : 0));
    const double experts = m.moe ? static_cast<double>(std::max<int64_t>(m.moe->experts, 1)) : 1.0;
    const double block = 4 * h * h + static_cast<double>(m.mlp_matrices()) * h * f * experts;
    const double total = static_cast<double>(m.layers) * block + 2 * h * static_cast<double>(m.vocab);
    if (total > 1e15 || h * std::max(f, h) > std::ldexp(1.0, 50) || static_cast<double>(job.seq_len) * h > std::ldexp(1.0, 50)) {
      diags.error(job.loc("model"), fmt::format("the model is too large to count: about {:.3g} parameters (hidden size {}, "
                                                "FFN {}, {} layers, vocabulary {}) at sequence length {}; schedcheck "
                                                "counts up to 10^15 parameters",
                                                total, m.dim, m.ffn, m.layers, m.vocab, job.seq_len));
      return false;
    }
  }
  jc.eff.compute = ctx.efficiency > 0 ? ctx.efficiency : hw.efficiency;
  const bool kv_replicated = job.kv_groups_replicate && m.kv_heads > 0 && m.kv_heads < lay.tp && lay.tp % m.kv_heads == 0;
  if (m.heads % lay.tp != 0 || (!m.mla && m.kv_heads % lay.tp != 0 && !kv_replicated)) {
    diags.error(job.loc("tp"), fmt::format("tensor parallel degree {} does not divide the {} attention heads and {} "
                                           "key/value heads of {}", lay.tp, m.heads, m.kv_heads, m.name));
    return false;
  }
  if (kv_replicated)
    jc.notes.push_back(fmt::format("{} key/value heads on {} TP ranks: each rank holds one whole key/value group, shared "
                                   "by {} ranks, as Megatron-LM replicates it; its parameters and FLOPs count on every "
                                   "rank", m.kv_heads, lay.tp, lay.tp / m.kv_heads));
  if (lay.ep > 1 && (!m.moe || m.moe->experts % lay.ep != 0)) {
    diags.error(job.loc("ep"), m.moe ? fmt::format("expert parallel degree {} does not divide the {} experts of {}",
                                                   lay.ep, m.moe->experts, m.name)
                                     : fmt::format("expert parallel degree {} on {}, which has no experts", lay.ep,
                                                   m.name));
    return false;
  }
  model::CostInputs in;
  in.model = m;
  in.hardware = hw;
  // fp32 compute (no bf16/fp16 section in DeepSpeed, no --bf16/--fp16 in Megatron-LM,
  // mixed_precision_param = "float32" in torchtitan): the GEMMs run at the fp32 rate and every
  // activation is stored in 4 bytes.
  if (job.param_dtype == "fp32") {
    in.activation_element_bytes = 4;
    if (hw.fp32_flops > 0) {
      in.hardware.peak_flops = hw.fp32_flops;
      jc.notes.push_back(fmt::format("computes in fp32 (no half-precision setting): {} at {:.1f} TFLOP/s dense "
                                     "fp32, activations in 4 bytes", hw.name, hw.fp32_flops / 1e12));
    } else {
      jc.notes.push_back(fmt::format("computes in fp32 (no half-precision setting), but the {} preset has no fp32 "
                                     "rate: timed at its bf16 rate; activations in 4 bytes", hw.name));
    }
  }
  in.eff = jc.eff;
  in.layout = lay;
  in.seq_len = job.seq_len;
  in.microbatch_sequences = job.microbatch_sequences;
  in.recompute = job.recompute;
  in.selective = job.selective_policy;
  in.selective_every = job.selective_every;
  in.recompute_method = job.recompute_method;
  in.recompute_layers = job.recompute_layers;
  in.tp_comm_overlap = job.tp_comm_overlap && lay.tp > 1;
  in.tp_comm_overlap_backward = job.tp_comm_overlap_backward;
  in.fused_elementwise = job.fused_elementwise;
  // torchtitan's context parallelism is PyTorch's ring attention around SDPA, whose key/value
  // inputs the model has already repeated to the query heads; its backward passes the fp32
  // key/value gradients round the ring (CostInputs::cp_kv_heads_repeated, cp_grad_ring_fp32).
  in.cp_kv_heads_repeated = in.cp_grad_ring_fp32 = job.framework == "torchtitan";
  // The attention core's kernel (docs/facts/cost-formulas.md#attention-kernels): torchtitan and
  // DeepSpeed's models call PyTorch SDPA, whose flash backend (FlashAttention-2) it picks on H100
  // (pytorch/pytorch#142132, PyTorch of December 2024); Megatron-LM's TransformerEngine prefers
  // cuDNN's fused attention on Hopper (transformer_engine/pytorch/attention.py,
  // get_attention_backend: "give FusedAttention preference on Hopper+").
  in.attention_kernel = job.framework == "megatron" ? model::AttentionKernel::kCudnn : model::AttentionKernel::kFlash2;
  if (job.attention_kernel) in.attention_kernel = *job.attention_kernel;
  if (in.attention_kernel == model::AttentionKernel::kMaterialized)
    jc.notes.push_back("attention materialises its scores (Megatron-LM's local DotProductAttention without "
                       "--use-flash-attn): the whole s×s matrix at the GEMMs' rate, its softmax and dropout through "
                       "HBM, 5 bytes per score kept for the backward");
  else if (hw.sm == 90)
    jc.notes.push_back(fmt::format("attention core at {}'s measured rate on Hopper (FlashAttention-3 paper figures, "
                                   "scaled to {}'s GEMM efficiency), not the GEMMs'",
                                   in.attention_kernel == model::AttentionKernel::kCudnn
                                       ? "cuDNN fused attention (TransformerEngine)"
                                       : "FlashAttention-2 (PyTorch SDPA)",
                                   hw.name));
  // fp8 linear layers: the GEMMs at the fp8 rate with their casts (docs/facts/cost-formulas.md#fp8-linear-layers).
  // A GPU without fp8 tensor cores keeps the bf16 rate: torchtitan at its December 2024 commit
  // warns and leaves the model in bf16 (torchtitan/float8.py @9dec370 `_is_sm89_or_later`).
  const bool fsdp_job = job.sharding == Sharding::kFsdp;
  // TransformerEngine refuses fp8 where the GPU has no fp8 tensor cores, and mxfp8 before
  // Blackwell (transformer_engine/pytorch/fp8.py, check_fp8_support and check_mxfp8_support).
  if (job.fp8_linear && job.framework == "megatron" && hw.fp8_flops <= 0) {
    diags.error(job.loc("fp8"), fmt::format("--fp8-format needs fp8 tensor cores (compute capability 8.9 or later), "
                                            "which {} does not have: TransformerEngine refuses it at startup",
                                            hw.name));
    return false;
  }
  if (job.fp8_linear && job.framework == "megatron" && job.fp8_recipe == "mxfp8" && hw.sm > 0 && hw.sm < 100) {
    diags.error(job.loc("fp8"), fmt::format("--fp8-recipe mxfp8 needs a Blackwell GPU (compute capability 10.0): "
                                            "TransformerEngine refuses it on {}", hw.name));
    return false;
  }
  if (job.fp8_linear && hw.fp8_flops <= 0) {
    jc.notes.push_back(fmt::format("fp8 linear layers ({}) on {}, which has no fp8 tensor cores (they start at SM 8.9): "
                                   "timed in bf16, as torchtitan leaves the model when it cannot convert it",
                                   job.where.count("fp8") ? fmt::format("line {}", job.loc("fp8").line) : std::string("the config"),
                                   hw.name));
  } else if (job.fp8_linear) {
    in.fp8_linear = true;
    in.fp8_experts = job.fp8_experts;
    // torchtitan all-gathers in fp8 only when dp_shard > 1 (parallel_dims.dp_shard_enabled,
    // torchtitan/float8.py @9dec370); Megatron-LM's --fp8-param-gather with FSDP likewise.
    in.fp8_weights_gathered = job.fp8_weights_gathered && fsdp_job && lay.dp_shard > 1;
    jc.notes.push_back(fmt::format(
        "fp8 linear layers: the blocks' GEMMs at {}'s fp8 rate ({:.0f} TFLOP/s dense) with the casts that feed them "
        "{} ({}); the attention core{} and the output projection stay in {}{}{}",
        hw.name, hw.fp8_flops / 1e12, in.fused_elementwise ? "fused into one pass each" : "as separate kernels",
        in.fp8_weights_gathered ? "the weights all-gathered in fp8" : "the weights cast every microbatch",
        m.moe && !job.fp8_experts ? ", the routed experts" : "", job.param_dtype,
        job.fp8_recipe == "tensorwise" || job.fp8_recipe == "delayed"
            ? ""
            : fmt::format("; the {} recipe is timed as tensorwise scaling", job.fp8_recipe),
        in.fp8_weights_gathered && lay.pp > 1
            ? "; under a pipeline the all-gather's bytes are counted in the param dtype (not modelled in fp8)"
        : job.fp8_weights_gathered && !fsdp_job
            ? "; --fp8-param-gather's fp8 all-gather of the distributed optimizer is not modelled"
            : ""));
  }
  jc.total_params = m.total_params();
  jc.active_params = m.active_params();
  // Products of values each within range can still leave int64 (2^31 sequences of 2^31 tokens):
  // a step is at most 2^40 tokens (Llama 3 405B trained at 16M), checked in floating point first.
  constexpr double kMaxTokensPerStep = 1099511627776.0;  // 2^40
  for (const auto& [sequences, what] : {std::pair{job.global_batch_sequences, "per step"},
                                        std::pair{job.microbatch_sequences, "per microbatch"}})
    if (static_cast<double>(sequences) * static_cast<double>(job.seq_len) > kMaxTokensPerStep) {
      diags.error(job.loc(job.where.count("global_batch") ? "global_batch" : "microbatch_sequences"),
                  fmt::format("{} sequences × {} tokens is {:.3g} tokens {}, more than schedcheck models (2^40)",
                              sequences, job.seq_len, static_cast<double>(sequences) * static_cast<double>(job.seq_len),
                              what));
      return false;
    }
  jc.tokens_per_step = job.global_batch_sequences * job.seq_len;
  jc.flops_per_token = m.training_flops_per_token(job.seq_len);
  jc.flops_per_step = jc.flops_per_token * static_cast<double>(jc.tokens_per_step);
  const double tokens = static_cast<double>(job.microbatch_sequences * job.seq_len) / lay.cp;
  jc.tokens_per_gpu_microbatch = static_cast<int64_t>(tokens);
  jc.tp_ranks_per_modelled_rank = lay.tp;

  // Stage split (torchtitan: embedding and output count as one layer each; docs/facts/config-keys.md#torchtitan-validation-rules).
  const int32_t stages = lay.pp * job.stages_per_rank;
  // torchtitan's auto split weighs the embedding and the output as one layer each; the others
  // split evenly.
  const int64_t weight = job.framework == "torchtitan" ? 1 : 0;
  std::vector<int64_t> given = job.stage_layers;  // the framework's own split, when it has one
  if (given.empty()) {
    std::string why;
    std::vector<int64_t> split = torchtitan_stage_layers(m.layers, stages, weight, weight, &why);
    if (split.empty()) {
      diags.error(job.loc("pp"), fmt::format("{} pipeline stages cannot split {}'s {} layers: {}", stages, m.name,
                                             m.layers, why));
      return false;
    }
    given = std::move(split);
  } else {
    int64_t total = 0;
    for (int64_t b : given) total += b;
    if (static_cast<int32_t>(given.size()) != stages || total != m.layers) {
      diags.error(job.loc("stage_layers"), fmt::format("the layer split gives {} layers over {} stages, but {} has {} "
                                                       "layers over {} stages",
                                                       total, given.size(), m.name, m.layers, stages));
      return false;
    }
  }
  // Output projection: 2·V·h FLOPs per token forward, the same for I and for W; its inputs and
  // fp32 logits stay for the backward (Megatron compute_activation_memory).
  const double rate = in.hardware.peak_flops * jc.eff.compute;
  // At the efficiency of its size, plus its operands' HBM time (model::layer_gemm_memory_s's
  // rule, the logits vocab-parallel).
  const double vocab = static_cast<double>(m.vocab) / lay.tp;
  const double head_flops = tokens * 2.0 * static_cast<double>(m.dim) * vocab;
  const double head_s = head_flops / (rate * model::gemm_size_efficiency(head_flops)) +
                        model::hbm_time_s(hw.hbm_bw, model::gemm_bytes(tokens, static_cast<double>(m.dim), vocab,
                                                                       in.activation_element_bytes));
  // The loss streams the logits (vocab-parallel under TP) through HBM, forward and backward
  // (docs/facts/cost-formulas.md#the-loss), in kernels over the fp32 logits.
  const model::LossTraffic loss = model::loss_traffic(job.loss_kernel);
  const double logits = tokens * vocab;
  const double loss_f_s = model::hbm_time_s(hw.hbm_bw, 4 * logits, loss.forward_bytes / 4);
  const double loss_b_s = model::hbm_time_s(hw.hbm_bw, 4 * logits, loss.backward_bytes / 4);
  const int64_t logits_bytes = static_cast<int64_t>(4 * tokens * static_cast<double>(m.dim + m.vocab) / lay.tp);
  std::vector<StageSum> sum(stages);
  jc.stage_layers.assign(stages, 0);
  int64_t layer = 0;
  for (int32_t s = 0; s < stages; ++s) {
    const int64_t units = given[s];  // empty stages included: the framework builds them so
    jc.stage_layers[s] = units;
    std::vector<model::LayerCost> blocks;
    for (int64_t k = 0; k < units; ++k, ++layer) {
      const model::LayerCost c = model::layer_cost(in, layer);
      blocks.push_back(c);
      sum[s].f += c.forward_s;
      sum[s].i += c.input_grad_s;
      sum[s].w += c.weight_grad_s;
      sum[s].params += c.params;
      sum[s].expert_params += c.expert_params;
      const int64_t f = m.is_moe_layer(layer) ? (m.moe->top_k + m.moe->shared) * m.moe->ffn : m.ffn;
      sum[s].weight_grad += static_cast<int64_t>(2 * tokens * static_cast<double>(3 * m.dim + f) / lay.tp);
      if (layer == 0) {
        jc.tp_comm_per_layer_s = c.tp_comm_s;
        jc.tp_exposed_per_layer_s = c.tp_exposed_s;
        jc.cp_comm_per_layer_s = c.cp_comm_s;
        jc.cp_grad_comm_per_layer_s = c.cp_grad_comm_s;
      }
      jc.ep_comm_per_layer_s = std::max(jc.ep_comm_per_layer_s, c.ep_comm_s);
    }
    // Checkpointed blocks keep their inputs; one checkpoint's activations are live at a time
    // (stage_activations), so what the stage holds at its fullest is retained + that transient.
    const model::StageActivations acts = model::stage_activations(in, blocks);
    sum[s].retained += acts.retained_bytes;
    sum[s].activation += acts.retained_bytes < acts.peak_bytes() ? acts.peak_bytes() : acts.retained_bytes;
    sum[s].r += acts.recompute_s;
    jc.transient_bytes = std::max(jc.transient_bytes, acts.transient_bytes);
    if (s == 0) sum[s].params += m.embedding_params() / lay.tp;
    if (s == stages - 1) {
      sum[s].f += head_s + loss_f_s;
      sum[s].i += head_s + loss_b_s;
      sum[s].w += head_s;
      sum[s].params += m.output_params() / lay.tp;
      sum[s].activation += logits_bytes;
      sum[s].retained += logits_bytes;
    }
  }
  if (layer != m.layers) {
    diags.error(job.loc("pp"), fmt::format("internal: the stage split placed {} of {} blocks", layer, m.layers));
    return false;
  }
  jc.tp_tier = model::link_tier(hw, 1, lay.tp);
  if (lay.tp > 1 && !in.tp_comm_overlap)
    jc.notes.push_back(fmt::format("each modelled rank stands for its {} tensor-parallel ranks; their per-layer "
                                   "all-gathers and reduce-scatters ({:.3f} ms per layer and direction over {}) are "
                                   "added to F and I, not overlapped", lay.tp, jc.tp_comm_per_layer_s * 1e3,
                                   tier_name(jc.tp_tier)));
  if (lay.tp > 1 && in.tp_comm_overlap)
    jc.notes.push_back(fmt::format("each modelled rank stands for its {} tensor-parallel ranks; their per-layer "
                                   "all-gathers and reduce-scatters ({:.3f} ms per layer and direction over {}) are "
                                   "pipelined with the GEMMs in {} chunks ({}), leaving {:.3f} ms exposed in F{}",
                                   lay.tp, jc.tp_comm_per_layer_s * 1e3, tier_name(jc.tp_tier), lay.tp,
                                   job.framework == "megatron" ? "--tp-comm-overlap" : "async TP",
                                   jc.tp_exposed_per_layer_s * 1e3,
                                   in.tp_comm_overlap_backward ? " and I" : "; I's are added whole (async TP's "
                                   "published gains are the forward's)"));
  if (lay.cp > 1)
    jc.notes.push_back(fmt::format("context parallelism: each rank computes 1/{} of the tokens; the key/value "
                                   "all-gather over {} ({:.3f} ms per layer{}) is added to the forward and the "
                                   "input-gradient pass{}", lay.cp,
                                   tier_name(model::link_tier(hw, lay.tp, lay.cp)), jc.cp_comm_per_layer_s * 1e3,
                                   in.cp_kv_heads_repeated ? ", the keys and values repeated to the query heads" : "",
                                   in.cp_grad_ring_fp32 ? fmt::format(", and I passes the fp32 key/value gradients "
                                                                      "round the ring ({:.3f} ms per layer)",
                                                                      jc.cp_grad_comm_per_layer_s * 1e3)
                                                        : std::string()));
  if (lay.ep > 1)
    jc.notes.push_back(fmt::format("expert parallelism {}: dispatch and combine all-to-alls ({:.3f} ms per MoE layer "
                                   "and direction) are added to F and I, with tokens spread evenly over experts",
                                   lay.ep, jc.ep_comm_per_layer_s * 1e3));

  // Data-parallel sharding of the model states (docs/facts/cost-formulas.md#bytes-per-parameter, #per-rank-memory-with-sharding).
  const bool fsdp = job.sharding == Sharding::kFsdp;
  const int32_t shard = fsdp ? lay.dp_shard * lay.cp : 1;
  const int32_t replicate = fsdp ? lay.dp_replicate : lay.dp_replicate * lay.dp_shard * lay.cp;
  const int32_t d = fsdp ? shard : replicate;
  const bool fp32_grads = job.reduce_dtype == "fp32";
  const int pbytes = dtype_bytes(job.param_dtype);
  // States of one parameter sharded over `over` ranks.
  auto state_per_param = [&](int32_t over) {
    switch (job.sharding) {
      case Sharding::kDdp: return model::state_bytes_per_param(model::StateSharding::kReplicated, over, fp32_grads);
      case Sharding::kZero1: return model::state_bytes_per_param(model::StateSharding::kOptimizer, over, fp32_grads);
      case Sharding::kZero2: return model::state_bytes_per_param(model::StateSharding::kGradients, over, fp32_grads);
      case Sharding::kFsdp:
        return job.fp32_master ? model::state_bytes_per_param(model::StateSharding::kFull, over, fp32_grads)
                               : 8.0 / std::max(1, over);
    }
    return 0.0;
  };
  const double per_param = state_per_param(d);
  // Routed experts are sharded over the expert data-parallel group, not the dense one: the
  // ranks of a pipeline stage hold each expert slice ep·etp ways, and the d·tp ranks that
  // share a dense shard's position hold d·tp/(ep·etp) copies of it (Megatron-LM
  // expert_dp = world / (etp·ep·pp), parallel_state.py; torchtitan efsdp = dp_shard·cp·tp/ep;
  // docs/facts/activation-memory.md#expert-data-parallel-states).
  const int32_t expert_dp = std::max<int32_t>(
      1, static_cast<int32_t>(static_cast<int64_t>(d) * lay.tp / (static_cast<int64_t>(lay.ep) * lay.expert_tp())));
  const double expert_per_param = state_per_param(expert_dp);
  jc.expert_dp = expert_dp;
  auto states = [&](const StageSum& st) {
    return per_param * static_cast<double>(st.params - st.expert_params) +
           expert_per_param * static_cast<double>(st.expert_params);
  };
  // The FSDP group and the data-parallel all-reduce: members tp apart (tp innermost).
  jc.dp_tier = model::link_tier(hw, lay.tp, fsdp ? shard : replicate);
  jc.dp_bandwidth = model::group_bandwidth(hw, jc.eff, lay.tp, fsdp ? shard : replicate);
  if (fsdp && replicate > 1 && model::link_tier(hw, static_cast<int64_t>(lay.tp) * shard, replicate) == LinkTier::kInterNode) {
    jc.dp_tier = LinkTier::kInterNode;  // HSDP: one bandwidth for both groups, the slower
    jc.dp_bandwidth = std::min(jc.dp_bandwidth, model::group_bandwidth(hw, jc.eff, static_cast<int64_t>(lay.tp) * shard, replicate));
  }
  jc.pp_tier = model::link_tier(hw, static_cast<int64_t>(lay.tp) * lay.cp * lay.dp_shard * lay.dp_replicate, lay.pp);
  jc.pp_bandwidth = model::tier_bandwidth(hw, jc.eff, jc.pp_tier);  // one pair: one NIC
  if (fsdp)
    jc.fsdp_crossover_tokens = model::fsdp_crossover_tokens(pbytes, dtype_bytes(job.reduce_dtype), rate, jc.dp_bandwidth);

  // Size of the program to verify: the ops of every rank built (FSDP: iterations × microbatches
  // × units × about 12; a pipeline: about 6 per stage and microbatch plus the collectives). At
  // about 470 bytes per op (the FSDP figure measured for the size cap of fsdp specs) the cap
  // keeps a config's check under 2 GiB and a few seconds. FSDP without a pipeline builds one
  // rank for all of them (the symmetry quotient, docs/facts/symmetry.md); a composed pipeline
  // builds every data-parallel replica of each pipeline rank.
  {
    const double modelled = lay.pp == 1 && fsdp ? 1.0 : static_cast<double>(shard) * replicate * lay.pp;
    // A composed pipeline in compute-only form, per modelled rank: F and B (F, I and W where the
    // schedule splits the backward; a gather and a free more under reshard_after_forward) per
    // stage and microbatch; per stage a gather, a free and a reduce-scatter with FSDP (plus the
    // replicas' all-reduce with HSDP), or one all-reduce; the optimizer step. Exact on the
    // published runs' layouts (docs/fidelity.md), where the estimate used to be up to 3x high.
    const double spr = job.stages_per_rank, mbs = std::max(1, job.microbatches);
    const bool split = job.schedule.find("zb") != std::string::npos || job.schedule.find("dualpipe") != std::string::npos;
    const double per_pair = (split ? 3.0 : 2.0) + (fsdp && job.reshard_after_forward && lay.pp > 1 ? 2.0 : 0.0);
    const double per_stage = fsdp ? 3.0 + (replicate > 1 ? 1.0 : 0.0) : 1.0;
    const double per_rank = lay.pp == 1 && fsdp ? 2.0 * mbs * (m.layers + 2) * 12 : per_pair * spr * mbs + per_stage * spr + 1;
    jc.estimated_ops = modelled * per_rank;
    if (modelled * per_rank > kMaxJobOps) {
      diags.error(job.loc(job.where.count("world") ? "world" : "dp_shard"),
                  fmt::format("this job lowers to about {:.3g} ops ({:.0f} modelled ranks × {:.0f} ops each), more "
                              "than the {:.0e} schedcheck verifies for a config at once (about 470 bytes each); check "
                              "the same layout on fewer data-parallel ranks, or compare layouts with schedcheck plan",
                              modelled * per_rank, modelled, per_rank, kMaxJobOps));
      return false;
    }
  }
  const std::string stem = std::filesystem::path(job.path).stem().string();
  if (lay.pp == 1 && fsdp) {
    // FSDP / ZeRO-3 without a pipeline: one unit per block, as torchtitan's apply_fsdp wraps them.
    lj.is_fsdp = true;
    FsdpSpec& f = lj.fsdp;
    f.name = stem;
    f.ranks = shard * replicate;
    f.shard_size = shard;
    f.replicate_size = replicate;
    f.implementation = job.framework == "deepspeed" ? FsdpImplementation::kZero3 : FsdpImplementation::kFsdp2;
    f.param_dtype = DType{job.param_dtype, pbytes};
    f.reduce_dtype = DType{job.reduce_dtype, dtype_bytes(job.reduce_dtype)};
    f.bandwidth_bytes_per_s = jc.dp_bandwidth;
    f.latency_s = jc.eff.latency_s;
    f.microbatches = std::max(1, job.microbatches);
    f.limit_bytes = hw.hbm_bytes;
    // ZeRO's K = 12 (fp32 master weights and Adam moments) on top of the sharded bf16 parameters
    // and gradients the FSDP model already holds; bf16 training keeps 4 (bf16 moments).
    f.optimizer_state_bytes_per_param = job.fp32_master ? 12 : 4;
    f.reshard_after_forward = job.reshard_after_forward ? -1 : 0;
    f.prefetch_bucket_size = job.prefetch_bucket_params;
    f.max_live_parameters = job.max_live_params;
    f.overlap_comm = job.overlap_comm;
    f.locs.file = job.file;
    f.locs.fsdp = job.loc("dp_shard");
    f.locs.limit = job.loc("hardware");
    f.locs.units = job.loc("model");
    FsdpUnit emb;
    emb.name = "tok_embeddings";
    emb.params_bytes = m.embedding_params() / lay.tp * pbytes;
    emb.loc = job.loc("model");
    f.units.push_back(emb);
    for (int64_t l = 0; l < m.layers; ++l) {
      const model::LayerCost c = model::layer_cost(in, l);
      FsdpUnit u;
      u.name = fmt::format("layers.{}", l);
      u.params_bytes = c.params * pbytes;
      if (in.fp8_weights_gathered) {
        // The linear weights travel and stay unsharded in fp8; the norms (and torchtitan's
        // routed experts, which its float8 converter leaves in bf16) in the param dtype.
        const int64_t kept = 2 * m.dim + (in.fp8_experts ? 0 : c.expert_params);
        u.gathered_bytes = (c.params - kept) + kept * pbytes;
      }
      u.forward_s = c.forward_s;
      u.backward_s = c.input_grad_s + c.weight_grad_s + c.recompute_s;
      u.activation_bytes = c.retained_bytes;
      u.transient_bytes = c.activation_bytes - c.retained_bytes;  // recomputed (one unit at a time)
      if (job.recompute == model::Recompute::kFull && job.recompute_method == model::RecomputeMethod::kBlock &&
          l >= job.recompute_layers) {
        // Megatron's block method checkpoints only the first recompute_layers blocks.
        u.activation_bytes = c.activation_bytes;
        u.transient_bytes = 0;
        u.backward_s -= c.recompute_s;
      } else if (job.recompute == model::Recompute::kFull &&
                 job.recompute_method == model::RecomputeMethod::kUniform && job.recompute_layers > 1) {
        // Uniform chunks of N blocks: the chunk's first block keeps its input, and the whole
        // chunk is recomputed together (counted on each of its units, which run one at a time).
        const int64_t n = job.recompute_layers;
        u.activation_bytes = l % n == 0 ? c.input_bytes : 0;
        u.transient_bytes = c.activation_bytes * std::min<int64_t>(n, m.layers - l / n * n);
      }
      u.loc = job.loc("model");
      f.units.push_back(u);
    }
    FsdpUnit outu;
    outu.name = "norm+output";
    outu.params_bytes = m.output_params() / lay.tp * pbytes;
    outu.forward_s = head_s + loss_f_s;
    outu.backward_s = 2 * head_s + loss_b_s;
    outu.activation_bytes = logits_bytes;
    // torchtitan's loss upcasts the bf16 logits (2 bytes per vocabulary entry and token) to fp32
    // (4) before cross_entropy, whose log-softmax output (4, kept) is in logits_bytes: 6·V per
    // token live around the loss (torchtitan/components/loss.py::cross_entropy_loss @238fa995;
    // docs/facts/activation-memory.md#the-loss).
    // Its backward holds more: nll_loss's gradient (4·V, fp32) and log_softmax's (4·V) beside the
    // kept output, 8·V per token more before the cast back to bf16 (torchtitan frees the bf16
    // logits before backward: `del pred` in train_step; docs/facts/activation-memory.md#the-loss).
    if (job.framework == "torchtitan") {
      outu.transient_bytes = static_cast<int64_t>(6 * tokens * static_cast<double>(m.vocab) / lay.tp);
      outu.backward_transient_bytes = static_cast<int64_t>(8 * tokens * static_cast<double>(m.vocab) / lay.tp);
      // The bf16 logits' block (2·V), freed before the backward, is too small for either fp32
      // gradient (4·V) that follows: the allocator keeps it and grows by 4·V instead, so the
      // loss region reserves 14·V where 12·V is live (docs/facts/activation-memory.md#the-loss-region).
      // An eager loss's tensors only: a compiled loss writes no fp32 copy or gradients.
      if (job.loss_kernel == model::LossKernel::kEager)
        outu.stranded_bytes = static_cast<int64_t>(2 * tokens * static_cast<double>(m.vocab) / lay.tp);
    }
    outu.loc = job.loc("model");
    f.units.push_back(outu);
    double st = 0;
    for (const StageSum& x : sum) st += states(x);
    jc.state_bytes_per_rank = static_cast<int64_t>(st);
    return true;
  }

  // A composed pipeline: pp ranks (one modelled rank per TP group), data parallelism per rank.
  PipelineSpec& p = lj.pipeline;
  p.name = stem;
  p.path = job.path;
  p.ranks = lay.pp;
  p.stages = stages;
  p.microbatches = std::max(1, job.microbatches);
  ScheduleRequest req;
  req.name = job.schedule;
  if (job.stages_per_rank > 1 || job.schedule == "interleaved-1f1b" || job.schedule == "interleaved-zb" ||
      job.schedule == "looped-bfs")
    req.chunks = job.stages_per_rank;
  req.megatron = job.framework == "megatron" && job.schedule == "interleaved-1f1b";
  req.loc = job.loc("schedule");
  p.named = req;
  p.placement = "loop";
  if (!job.schedule_actions.empty() && !use_schedule_actions(job, &p, diags)) return false;
  // torchtitan's stages run under PyTorch's pipelining runtime, whose FSDP2 backward skips the
  // gradient sync until each stage's last microbatch (Composition::accumulate_unsharded_grads).
  const bool accumulate_grads = fsdp && job.framework == "torchtitan";
  for (const StageSum& s : sum) {
    p.costs.f_s.push_back(s.f);
    p.costs.i_s.push_back(s.i);
    p.costs.w_s.push_back(s.w);
    p.costs.b_s.push_back(s.i + s.w);
    p.costs.r_s.push_back(s.r > 0 ? s.r : s.f);
    p.memory.params_bytes.push_back(s.params * pbytes);
    p.memory.activation_bytes.push_back(std::max<int64_t>(1, s.activation));
    p.memory.weight_grad_bytes.push_back(std::max<int64_t>(1, s.weight_grad));
    const bool recomputes = s.retained < s.activation;
    p.memory.recompute.push_back(!recomputes ? Recompute::kNone
                                 : job.recompute == model::Recompute::kFull ? Recompute::kFull
                                                                            : Recompute::kSelective);
    p.memory.retained_bytes.push_back(s.retained);
    // Resident besides what the program tracks (params_bytes, or its shard with FSDP).
    const double tracked = fsdp ? static_cast<double>(s.params * pbytes) / shard : static_cast<double>(s.params * pbytes);
    // With unsharded accumulation the step's gradients live unsharded (the program's "grad"
    // buffers); torchtitan's zero_grad(set_to_none) at the step's start leaves no sharded
    // gradient until the reduce-scatter writes it, after the unsharded copy's peak, so the shard
    // that state_bytes_per_param counts (4/N in fp32, 2/N with bf16 master weights) is left out.
    const double grad_shard =
        accumulate_grads ? (job.fp32_master ? 4.0 : 2.0) *
                               (static_cast<double>(s.params - s.expert_params) / shard +
                                static_cast<double>(s.expert_params) / expert_dp)
                         : 0.0;
    p.memory.state_bytes.push_back(
        std::max<int64_t>(0, static_cast<int64_t>(states(s) - tracked - grad_shard)));
  }
  p.memory.limit_bytes = hw.hbm_bytes;
  p.p2p.latency_s = jc.eff.latency_s;
  p.p2p.bandwidth_bytes_per_s = jc.pp_bandwidth;
  p.p2p.message_bytes = static_cast<int64_t>(tokens * static_cast<double>(m.dim) * 2 /
                                             (lay.sequence_parallel ? lay.tp : 1));
  // PyTorch's pipelining runtime (torchtitan's stages) allocates every microbatch's receive
  // buffers when the stage is set up and keeps them: a forward one on each stage but the first,
  // a backward one on each but the last, each the stage boundary's tensor
  // (PipelineStage._prepare_forward_infra and _prepare_backward_infra, torch/distributed/
  // pipelining/stage.py; docs/facts/composed-runtime.md#what-the-pipelining-runtime-keeps).
  // A non-first stage's first block reads its input from that buffer, so the block's kept input
  // is the buffer already, not an activation of its own. Its input gradients accumulate in the
  // buffers' .grad until the next step, and the last stage of torchtitan before 2025-10 keeps
  // every microbatch's logits (output_chunks) until step() ends (TrainingJob::pp_keeps_outputs):
  // MemorySpec::kept_input_grad_bytes, kept_output_bytes.
  if (job.framework == "torchtitan") {
    const int64_t msg = p.p2p.message_bytes;
    const int64_t logits_kept =
        static_cast<int64_t>(tokens * static_cast<double>(m.vocab) / lay.tp * in.activation_element_bytes);
    const int64_t mbs = p.microbatches;
    p.memory.kept_output_bytes.assign(stages, 0);
    p.memory.kept_input_grad_bytes.assign(stages, 0);
    for (int32_t st = 0; st < stages; ++st) {
      const bool first = st == 0, last = st == stages - 1;
      p.memory.state_bytes[st] += mbs * msg * ((first ? 0 : 1) + (last ? 0 : 1));
      if (!first) {
        p.memory.retained_bytes[st] = std::max<int64_t>(0, p.memory.retained_bytes[st] - msg);
        p.memory.activation_bytes[st] = std::max<int64_t>(1, p.memory.activation_bytes[st] - msg);
        p.memory.kept_input_grad_bytes[st] = msg;
      }
      if (last && job.pp_keeps_outputs)
        p.memory.kept_output_bytes[st] = logits_kept;
    }
    jc.notes.push_back(fmt::format("PyTorch's pipelining runtime keeps every microbatch's receive buffers ({} each, "
                                   "{} per stage and direction) and, until the step ends, the input gradients of "
                                   "every stage but the first (docs/facts/composed-runtime.md#what-the-pipelining-"
                                   "runtime-keeps)",
                                   format_bytes(msg), mbs));
    if (job.pp_keeps_outputs)
      jc.notes.push_back(fmt::format("the last stage keeps every microbatch's logits ({} each) until the step ends, as "
                                     "torchtitan did before 2025-10-22 (e5ef99aa), which {} dates this config to",
                                     format_bytes(logits_kept), job.loc("pp_outputs").line > 0
                                         ? fmt::format("line {}", job.loc("pp_outputs").line) : std::string("a key")));
    else
      jc.notes.push_back(fmt::format("torchtitan before 2025-10-22 (e5ef99aa) also kept the last stage's logits of "
                                     "every microbatch ({} each) until the step ended; no key dates this config that "
                                     "early, so they are not counted",
                                     format_bytes(logits_kept)));
  }
  Composition c;
  c.dp_replicate = replicate;
  c.dp_shard = shard;
  c.fsdp = fsdp;
  c.reshard_after_forward = fsdp && job.reshard_after_forward;
  c.accumulate_unsharded_grads = accumulate_grads;
  c.overlap_comm = job.overlap_comm;
  c.overlap_grad_reduce = job.overlap_grad_reduce;
  c.reduce_scatter_only = job.sharding == Sharding::kZero1 && job.overlap_param_gather;
  c.param_dtype = job.param_dtype;
  c.param_dtype_bytes = pbytes;
  c.reduce_dtype = job.reduce_dtype;
  c.reduce_dtype_bytes = dtype_bytes(job.reduce_dtype);
  c.bandwidth_bytes_per_s = jc.dp_bandwidth;
  c.latency_s = jc.eff.latency_s;
  c.loc = job.loc("pp");
  c.reduce_loc = job.loc("reduce_dtype");
  p.composition = c;
  p.locs.file = job.file;
  p.locs.ranks = job.loc("pp");
  p.locs.stages = job.loc("pp");
  p.locs.placement = job.loc("schedule");
  p.locs.microbatches = job.loc("microbatches");
  p.locs.memory_limit = job.loc("hardware");
  p.locs.schedule = job.loc("schedule");
  if ((job.sharding == Sharding::kZero1 || job.sharding == Sharding::kZero2) && !c.reduce_scatter_only)
    jc.notes.push_back("the distributed optimizer's reduce-scatter and all-gather are modelled as one all-reduce "
                       "(the same bytes on the wire, docs/facts/cost-formulas.md#communication-volume-and-time)");
  if (c.reduce_scatter_only)
    jc.notes.push_back("--overlap-param-gather: the step holds the gradient reduce-scatter; the parameter all-gather, "
                       "which Megatron-LM issues under the next step's first forward, is not timed (docs/fidelity.md)");
  if (c.overlap_grad_reduce && c.overlap_comm && replicate * shard > 1)
    jc.notes.push_back("the gradient reduction of each stage starts with its last backward (bucketed, as the backward "
                       "produces gradients); the last bucket's reduction after it is not modelled");
  std::vector<int64_t> per_rank(lay.pp, 0);  // loop placement; V places the same number of stages per rank
  for (int32_t s = 0; s < stages; ++s)
    per_rank[s % lay.pp] += p.memory.state_bytes[s] + p.memory.params_bytes[s] / (fsdp ? shard : 1);
  jc.state_bytes_per_rank = *std::max_element(per_rank.begin(), per_rank.end());
  if (job.grad_accum > 1)
    jc.notes.push_back(fmt::format("one pipeline step is modelled; the optimizer step runs after {} of them "
                                   "(gradient accumulation), so the step time is {} × the modelled makespan",
                                   job.grad_accum, job.grad_accum));
  return true;
}

}  // namespace sc::config
