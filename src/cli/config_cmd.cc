// `schedcheck verify` on framework configs (torchtitan TOML, Megatron-LM arguments, DeepSpeed
// JSON): read the job, lower it with the cost model to a composed or FSDP spec, verify that, and
// report the job's predicted step time, MFU and memory above the front-end's report.
#include <algorithm>
#include <chrono>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/config_cmd.h"
#include "config/verify_job.h"
#include "config/readers.h"
#include "fsdp/verify_fsdp.h"
#include "model/fidelity_bands.h"
#include "pipeline/named_schedule.h"
#include "report/report.h"
#include "support/units.h"

namespace sc::cli {
namespace {

using config::JobCosts;
using config::TrainingJob;

std::string count(double n) {
  if (n >= 1e12) return fmt::format("{:.2f}T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

const char* sharding_name(config::Sharding s, int32_t replicate) {
  switch (s) {
    case config::Sharding::kDdp: return "DDP (replicated, gradients all-reduced)";
    case config::Sharding::kZero1: return "distributed optimizer / ZeRO-1 (optimizer state sharded)";
    case config::Sharding::kZero2: return "ZeRO-2 (optimizer state and gradients sharded)";
    case config::Sharding::kFsdp: return replicate > 1 ? "HSDP (sharded, replicated)" : "FSDP (fully sharded)";
  }
  return "";
}

std::string recompute_name(const TrainingJob& j) {
  switch (j.recompute) {
    case model::Recompute::kNone: return "none";
    case model::Recompute::kFull:
      return j.recompute_method == model::RecomputeMethod::kBlock
                 ? fmt::format("full (first {} block{} of each stage checkpointed)", j.recompute_layers,
                               j.recompute_layers > 1 ? "s" : "")
                 : fmt::format("full (one checkpoint per {} block{})", j.recompute_layers,
                               j.recompute_layers > 1 ? "s" : "");
    case model::Recompute::kSelective:
      switch (j.selective_policy) {
        case model::SelectivePolicy::kEveryNth: return fmt::format("selective (every {}-th block checkpointed)", j.selective_every);
        case model::SelectivePolicy::kOpPolicy: return "selective (per-op policy)";
        case model::SelectivePolicy::kCoreAttention: return "selective (attention core)";
      }
  }
  return "";
}

/// How far predictions of `framework`'s configs lay from published runs (docs/fidelity.md): the
/// held-out band (leave-one-source-out), for the text beside a prediction.
std::string fidelity_text(const std::string& framework) {
  const model::FidelityBand* b = model::fidelity_band(framework.c_str());
  if (!b)
    return fmt::format("no published {} run is checked yet: this prediction has no measured error band", framework);
  std::string text = fmt::format("the throughput predicted for {} published {} runs, each with the parameters "
                                 "fitted without its source, lies {:+.1f} % to {:+.1f} % from the published figure "
                                 "(docs/fidelity.md)",
                                 b->runs, framework, b->min_error_pct, b->max_error_pct);
  if (b->memory_runs > 0)
    text += fmt::format("; the memory reserved, for the {} that publish it, {:+.1f} % to {:+.1f} %", b->memory_runs,
                        b->memory_min_error_pct, b->memory_max_error_pct);
  return text;
}

void write_job_text(std::ostream& os, const TrainingJob& job, const JobCosts& jc, const config::JobPrediction& p) {
  const model::Layout& l = job.layout;
  os << fmt::format("{} config {}: {} on {} × {}\n", job.framework, job.path, jc.model.name, job.world,
                    jc.hardware.name);
  os << fmt::format("  parallelism   pp {} × dp_replicate {} × dp_shard {} × cp {} × tp {} = {} GPUs{}; {}\n", l.pp,
                    l.dp_replicate, l.dp_shard, l.cp, l.tp, l.world(), l.ep > 1 ? fmt::format(" (ep {})", l.ep) : "",
                    sharding_name(job.sharding, l.dp_replicate));
  if (l.pp > 1)
    os << fmt::format("  pipeline      {} with {} stage{} per rank, {} microbatches of {} sequence{}; blocks per stage {}\n",
                      !job.schedule_csv.empty()
                          ? fmt::format("{} (compute-only CSV, stages placed as {} places them)", job.schedule_csv,
                                        job.schedule)
                          : job.schedule,
                      job.stages_per_rank, job.stages_per_rank > 1 ? "s" : "", job.microbatches,
                      job.microbatch_sequences, job.microbatch_sequences > 1 ? "s" : "",
                      fmt::join(jc.stage_layers, ","));
  os << fmt::format("  batch         {} sequences × {} tokens = {} tokens per step; {} token{} per GPU per microbatch\n",
                    job.global_batch_sequences, job.seq_len, count(static_cast<double>(jc.tokens_per_step)),
                    jc.tokens_per_gpu_microbatch, jc.tokens_per_gpu_microbatch == 1 ? "" : "s");
  os << fmt::format("  model         {} parameters ({} active); {:.1f} GFLOP per token (6·N + attention); {:.3g} FLOP per step\n",
                    count(static_cast<double>(jc.total_params)), count(static_cast<double>(jc.active_params)),
                    jc.flops_per_token / 1e9, jc.flops_per_step);
  os << fmt::format("  recompute     {}; reduce dtype {}; model states {} per rank{}\n", recompute_name(job),
                    job.reduce_dtype, format_bytes(static_cast<double>(jc.state_bytes_per_rank)),
                    jc.expert_dp > 0 && jc.model.moe ? fmt::format(" (routed experts' states over {} expert data-parallel rank{})",
                                                                    jc.expert_dp, jc.expert_dp > 1 ? "s" : "")
                                                      : "");
  if (jc.fsdp_crossover_tokens > 0)
    os << fmt::format("  FSDP          {} tokens per GPU per microbatch against a crossover of {:.0f} over {}: {}\n",
                      jc.tokens_per_gpu_microbatch, jc.fsdp_crossover_tokens,
                      jc.dp_tier == model::LinkTier::kIntraNode ? "NVLink" : "the network",
                      jc.tokens_per_gpu_microbatch >= jc.fsdp_crossover_tokens ? "compute hides the collectives"
                                                                                : "communication-bound");
  if (p.complete) {
    os << fmt::format("  predicted     step {:.3f} s, MFU {:.1f}% (largest GEMMs at {:.0f}% of peak), {} tokens/s ({} per GPU); "
                      "peak {} on modelled rank {}, worst case {}, HBM {}\n",
                      p.step_s, 100 * p.mfu, 100 * jc.eff.compute, count(p.tokens_per_s),
                      count(p.tokens_per_s / std::max(1, job.world)), format_bytes(static_cast<double>(p.peak_bytes)),
                      p.peak_rank, format_bytes(static_cast<double>(p.worst_bytes)), format_bytes(static_cast<double>(jc.hardware.hbm_bytes)));
    if (p.reserved_bytes > p.peak_bytes)
      os << fmt::format("  reserved      {} by PyTorch's caching allocator, each stream's pool at its own peak "
                        "(what torchtitan logs as memory; docs/facts/activation-memory.md#reserved-memory)\n",
                        format_bytes(static_cast<double>(p.reserved_bytes)));
    os << "  checked       " << fidelity_text(job.framework) << "\n";
    // MFU counts the causal attention core in full, as the frameworks' own formulas do
    // (docs/fidelity.md#how-a-figure-is-compared), while FlashAttention runs half of it: at long
    // sequences the count can pass the peak.
    if (p.mfu > 1)
      os << fmt::format("  note: MFU above 100 %: the FLOP count (6·N per token plus the attention core, counted in full "
                        "as the frameworks count it) exceeds what the GPUs execute, since the causal attention core "
                        "runs at half its counted FLOPs (docs/facts/cost-formulas.md#time-of-the-causal-attention-core); "
                        "at sequence length {} the attention core is {:.0f} % of the count\n",
                        job.seq_len,
                        100 * 3.0 * static_cast<double>(jc.model.layers) *
                            jc.model.layer_attention_flops_per_token(job.seq_len) / jc.flops_per_token);
  } else {
    os << "  predicted     not predicted: the schedule does not run as the job needs (see the findings)\n";
  }
  for (const std::string& n : jc.notes) os << "  note: " << n << "\n";
  if (!job.unmodelled.empty()) {
    std::vector<std::string> keys;
    for (const auto& u : job.unmodelled) keys.push_back(u.first);
    os << fmt::format("  not modelled: {}\n", fmt::join(keys, ", "));
  }
  os << "\n";
}

nlohmann::json job_json(const TrainingJob& job, const JobCosts& jc, const config::JobPrediction& p) {
  const model::Layout& l = job.layout;
  nlohmann::json j = {
      {"framework", job.framework},
      {"model", jc.model.name},
      {"hardware", jc.hardware.name},
      {"world", job.world},
      {"layout", {{"pp", l.pp}, {"dp_replicate", l.dp_replicate}, {"dp_shard", l.dp_shard}, {"cp", l.cp}, {"tp", l.tp},
                  {"ep", l.ep}, {"sequence_parallel", l.sequence_parallel}}},
      {"schedule", job.schedule},
      {"schedule_csv", job.schedule_csv.empty() ? nlohmann::json(nullptr) : nlohmann::json(job.schedule_csv)},
      {"stages_per_rank", job.stages_per_rank},
      {"microbatches", job.microbatches},
      {"grad_accum", job.grad_accum},
      {"microbatch_sequences", job.microbatch_sequences},
      {"seq_len", job.seq_len},
      {"tokens_per_step", jc.tokens_per_step},
      {"params", jc.total_params},
      {"active_params", jc.active_params},
      {"flops_per_token", jc.flops_per_token},
      {"flops_per_step", jc.flops_per_step},
      {"state_bytes_per_rank", jc.state_bytes_per_rank},
      {"expert_dp", jc.expert_dp},
      {"recompute", recompute_name(job)},
      {"activation_transient_bytes", jc.transient_bytes},
      {"fsdp_crossover_tokens", jc.fsdp_crossover_tokens},
      {"tokens_per_gpu_microbatch", jc.tokens_per_gpu_microbatch},
      {"efficiency", jc.eff.compute},
      {"notes", jc.notes},
  };
  nlohmann::json un = nlohmann::json::array();
  for (const auto& u : job.unmodelled) un.push_back({{"key", u.first}, {"at", format_loc(u.second)}});
  j["unmodelled"] = un;
  if (p.complete)
    j["predicted"] = {{"step_time_s", p.step_s}, {"mfu", p.mfu}, {"tokens_per_s", p.tokens_per_s},
                      {"bubble_rate", p.bubble_rate}, {"peak_bytes", p.peak_bytes}, {"peak_rank", p.peak_rank}, {"worst_case_bytes", p.worst_bytes},
                      {"reserved_bytes", p.reserved_bytes}};
  if (const model::FidelityBand* b = model::fidelity_band(job.framework.c_str()))
    j["fidelity"] = {{"framework", b->framework}, {"runs", b->runs}, {"min_error_pct", b->min_error_pct},
                     {"memory_runs", b->memory_runs},
                     {"memory_min_error_pct", b->memory_runs > 0 ? nlohmann::json(b->memory_min_error_pct) : nlohmann::json(nullptr)},
                     {"memory_max_error_pct", b->memory_runs > 0 ? nlohmann::json(b->memory_max_error_pct) : nlohmann::json(nullptr)},
                     {"max_error_pct", b->max_error_pct}, {"source", "docs/fidelity.md"}};
  else
    j["fidelity"] = nullptr;
  return j;
}

}  // namespace

bool read_config_job(const std::string& path, const config::JobContext& ctx, TrainingJob* job, Diagnostics& d) {
  if (config::is_torchtitan_config(path)) return config::read_torchtitan(path, ctx, job, d);
  if (config::is_deepspeed_config(path)) return config::read_deepspeed(path, ctx, job, d);
  return config::read_megatron(path, ctx, job, d);
}

int run_config_verify(const std::vector<std::string>& files, ReportSink& sink, const config::JobContext& ctx,
                      const ConfigOutputs& out) {
  int exit = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    Diagnostics d;
    TrainingJob job;
    config::VerifiedJob v;
    const auto read_start = std::chrono::steady_clock::now();
    bool ok = read_config_job(files[i], ctx, &job, d);
    const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - read_start).count();
    if (ok && job.seq_len <= 0) job.seq_len = ctx.seq_len;
    else if (ok && ctx.seq_len > 0 && ctx.seq_len != job.seq_len)
      d.warning(job.loc("seq_len"), fmt::format("--seq-len {} is ignored: the config sets the sequence length to {} "
                                                "here", ctx.seq_len, job.seq_len));
    if (!ok || !config::verify_job(job, ctx, out.min_cut, &v, d)) {
      sink.add(diagnostics_value(d));
      exit = combine_exit(exit, report_spec_errors(d));
      continue;
    }
    d.print(std::cerr);  // warnings (e.g. sequence parallelism dropped at TP 1)
    exit = combine_exit(exit, v.exit_code);
    v.result.pass_times.insert(v.result.pass_times.begin(), PassTime{"read", read_s});
    const config::JobPrediction& p = v.prediction;
    const VerifyResult& result = v.result;
    const bool fsdp = fsdp_extras(result) != nullptr;
    config::LoweredJob& lowered = v.lowered;
    // As for a spec: the text report and the files first, timed as the "report" pass.
    const auto report_start = std::chrono::steady_clock::now();
    if (sink.wants_text()) {
      std::ostream& os = sink.text();
      write_job_text(os, job, lowered.costs, p);
      if (fsdp) write_fsdp_text_report(os, result);
      else write_text_report(os, result, out.timeline_ops);
    }
    std::vector<OutputFile> outputs;  // all or none; never the config or a file it references
    if (!out.trace.empty()) outputs.push_back({"--trace", out.trace, chrome_trace(result, out.trace_all_ranks)});
    if (!out.trace.empty() && out.trace_all_ranks) std::cerr << trace_all_ranks_note(result);
    if (!out.dot.empty()) outputs.push_back({"--dot", out.dot, dot_graph(result)});
    if (!out.svg.empty()) outputs.push_back({"--svg", out.svg, svg_timeline(result)});
    v.result.pass_times.push_back(
        PassTime{"report", std::chrono::duration<double>(std::chrono::steady_clock::now() - report_start).count()});
    nlohmann::json j = fsdp ? fsdp_json_value(result) : json_report_value(result);
    j["path"] = files[i];
    j["job"] = job_json(job, lowered.costs, p);
    sink.add(std::move(j));
    if (!outputs.empty() && !write_outputs(outputs, files)) return exit != 0 ? exit : kExitUsage;
  }
  return exit;
}

}  // namespace sc::cli
