// `schedcheck plan`: which mix of data, fully-sharded, pipeline and tensor parallelism fits a
// model on N GPUs, and how fast is it. Enumerates layouts, discards them by the bounds the field
// knows (docs/facts/cost-formulas.md#planner-rules), ranks the rest by an analytic estimate, then verifies the best with the
// same lowering and checks `verify` uses on a config, and ranks those by predicted step time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "check/finding.h"
#include "cli/common.h"
#include "config/preset_names.h"
#include "config/verify_job.h"
#include "model/cost_model.h"
#include "support/escape.h"
#include "support/nesting.h"
#include "support/source.h"

namespace sc::cli {
namespace {

using config::TrainingJob;
using model::Recompute;

/// Exit code when no layout fits: the memory code, as the reason is almost always memory.
constexpr int kExitNoLayout = 13;
/// No layout verified because every candidate left was past schedcheck's own size limit.
constexpr int kExitPlanInconclusive = 5;

struct PlanArgs {
  std::vector<std::string> models, hardware;  ///< the sweep's presets (one each for a single plan)
  std::vector<int32_t> gpus;                  ///< the sweep's GPU counts
  std::string batch_tokens, format = "text";
  int64_t seq_len = 0;
  std::optional<std::string> shard;           ///< --shard K/N
  std::vector<std::string> merge;             ///< --merge SHARE...
  std::optional<std::string> output;          ///< -o: where a share or a sweep report goes
  size_t verify_top = 12;
  size_t show = 10;
  int32_t max_pp = 64;
  double efficiency = 0;
  std::optional<std::string> emit;  ///< --emit FILE: the best layout as a torchtitan TOML
  /// --verify-top, --max-pp or --efficiency given on the command line (at any value, the
  /// default's too): the sweep's tuning, which --merge takes from the shares.
  bool tuning_given = false;
  bool format_given = false;  ///< --format given (a share is always JSON)
};

/// "4M" = 4·2^20 tokens (K, M, G are binary, as a batch of 4M tokens at sequence length 8192 is
/// 512 sequences); a plain integer is taken as is. nullopt when malformed.
std::optional<int64_t> parse_tokens(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string suffix = text.substr(used);
  double mult = 1;
  if (suffix == "K" || suffix == "k") mult = 1024;
  else if (suffix == "M" || suffix == "m") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g" || suffix == "B") mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) return std::nullopt;
  const double t = v * mult;
  if (!(t >= 1) || t > 1e15 || std::floor(t) != t) return std::nullopt;
  return static_cast<int64_t>(t);
}

/// One candidate layout with its analytic estimate and, once verified, its prediction.
struct Candidate {
  TrainingJob job;
  std::string sharding;           ///< "fsdp", "hsdp"
  double est_step_s = 0;          ///< analytic: pipeline bubble and exposed FSDP communication
  int64_t est_bytes = 0;          ///< analytic peak per rank
  double fsdp_ops = 0;            ///< FSDP without a pipeline: the ops lower_job estimates (0 otherwise)
  double pipeline_ops = 0;        ///< with a pipeline: the ops lower_job estimates (0 otherwise)
  bool verified = false;
  int exit_code = 0;
  config::JobPrediction pred;
  double crossover = 0;           ///< FSDP crossover, tokens per GPU per microbatch
  std::string verdict;
  std::string reason;             ///< why a verified candidate does not hold (its first finding or error)
};

std::string schedule_label(const TrainingJob& j) {
  if (j.layout.pp == 1) return "-";
  return j.stages_per_rank > 1 ? fmt::format("{} v{}", j.schedule, j.stages_per_rank) : j.schedule;
}

const char* recompute_label(Recompute r) { return r == Recompute::kFull ? "full" : r == Recompute::kNone ? "none" : "selective"; }

/// The largest FSDP program (ops, as lower_job estimates them) a plan builds and verifies.
constexpr double kPlanMaxFsdpOps = 60000;
/// The largest pipeline program a plan builds and verifies. A plan verifies up to 48 layouts:
/// at --seq-len 1 a 1M-token step is 65,536 microbatches a pipeline rank, and verifying the
/// twelve best took 97 s and 1.27 GB; larger programs are left to `verify`, as FSDP's are.
constexpr double kPlanMaxPipelineOps = 250000;

std::string layout_label(const Candidate& c) {
  const auto& l = c.job.layout;
  return fmt::format("pp{} dp{}x{} tp{}", l.pp, l.dp_replicate, l.dp_shard, l.tp);
}

/// Analytic estimate of one candidate from the cost model alone (no program): per-stage work
/// Σ(F + I + W + R) of the slowest stage; a pipeline step (m + (p−1)/v)·t (docs/facts/cost-formulas.md#pipeline-bubble);
/// FSDP without PP pays its all-gathers and reduce-scatter per microbatch, exposed where they
/// exceed the compute; with PP once per step. Memory: states + in-flight activations of stage 0
/// (min(m, p) microbatches in 1F1B, × (1 + (p−1)/(p·v)) interleaved; Megatron's estimator,
/// docs/facts/cost-formulas.md#activation-memory) + gathered parameters.
std::string estimate(Candidate& c, const config::JobContext& ctx) {
  config::LoweredJob lj;
  Diagnostics d;
  if (!config::lower_job(c.job, ctx, &lj, d)) {
    std::string why = d.all().empty() ? "cannot be lowered" : d.all().front().message;
    if (auto p = why.find(" ("); p != std::string::npos && why.find("lowers to about") != std::string::npos)
      why = "the program to verify is too large (more than " + fmt::format("{:.0e}", config::kMaxJobOps) + " ops)";
    return why;
  }
  const auto& jc = lj.costs;
  const TrainingJob& j = c.job;
  // FSDP without a pipeline lowers to about 12 ops per block and microbatch, and its worst case
  // of memory (an exact closure over every interleaving of the compute and collective streams,
  // src/graph/worst_case_memory.cc) grows about as their square: 1.4 s at 52,000 ops, 6.7 s at
  // 104,000 on this project's 2-core machine. A plan verifies dozens of layouts, so it leaves
  // larger ones to `verify` (not a verdict: they are counted as too large to verify).
  // Checked after the analytic memory bound, which refutes where this only sets aside.
  c.fsdp_ops = lj.is_fsdp ? jc.estimated_ops : 0;
  c.pipeline_ops = lj.is_fsdp ? 0 : jc.estimated_ops;
  c.crossover = jc.fsdp_crossover_tokens;
  const int32_t p = j.layout.pp, v = j.stages_per_rank, m = j.microbatches;
  const double pdt = 2, rdt = j.reduce_dtype == "fp32" ? 4 : 2;
  if (lj.is_fsdp) {
    double t = 0, params = 0, act = 0;
    for (const FsdpUnit& u : lj.fsdp.units) {
      t += u.forward_s + u.backward_s;
      params += static_cast<double>(u.params_bytes) / pdt;
      act += static_cast<double>(u.activation_bytes);
    }
    const int32_t n = lj.fsdp.shard_size;
    const double comm = (n - 1.0) / n * params * (2 * pdt + rdt) / lj.fsdp.bandwidth_bytes_per_s;
    c.est_step_s = m * std::max(t, comm);
    int64_t largest = 0;
    for (const FsdpUnit& u : lj.fsdp.units) largest = std::max(largest, u.params_bytes);
    c.est_bytes = jc.state_bytes_per_rank + static_cast<int64_t>(act) + 3 * largest;
    return {};
  }
  const PipelineSpec& s = lj.pipeline;
  std::vector<double> per_rank(p, 0);
  std::vector<int64_t> act(p, 0), params(p, 0);
  for (int32_t st = 0; st < static_cast<int32_t>(s.costs.f_s.size()); ++st) {
    const double r = s.memory.recompute[st] != sc::Recompute::kNone ? s.costs.r_s[st] : 0;
    per_rank[st % p] += s.costs.f_s[st] + s.costs.i_s[st] + s.costs.w_s[st] + r;
    act[st % p] += s.memory.retained_bytes[st];
    params[st % p] += s.memory.params_bytes[st];
  }
  const double t = *std::max_element(per_rank.begin(), per_rank.end());
  c.est_step_s = (m + (p - 1.0) / v) * t * std::max(1, j.grad_accum);
  if (s.composition && s.composition->fsdp) {
    const int32_t n = s.composition->dp_shard;
    const double bytes = static_cast<double>(*std::max_element(params.begin(), params.end())) / pdt;
    c.est_step_s += (n - 1.0) / n * bytes * rdt / s.composition->bandwidth_bytes_per_s;  // the last reduce-scatter
  }
  const double inflight = std::min(m, p) * (v > 1 ? 1.0 + (p - 1.0) / (p * v) : 1.0);
  const int64_t a = *std::max_element(act.begin(), act.end()) / std::max(1, v);
  // FSDP under a pipeline: the rank's stages' parameters unsharded, and with torchtitan's runtime
  // their gradients accumulated unsharded in the reduce dtype (Composition::accumulate_unsharded_grads).
  const int64_t gathered = s.composition && s.composition->fsdp ? *std::max_element(params.begin(), params.end()) : 0;
  const int64_t grads = s.composition && s.composition->accumulate_unsharded_grads
                            ? static_cast<int64_t>(static_cast<double>(gathered) / pdt * rdt)
                            : 0;
  c.est_bytes = jc.state_bytes_per_rank + static_cast<int64_t>(inflight * static_cast<double>(a)) + gathered + grads;
  return {};
}

/// A torchtitan job TOML for `j` that `schedcheck verify` reads back to the same layout: the
/// preset comment names the world size and GPU, [model] the flavor where torchtitan has one.
std::string torchtitan_toml(const TrainingJob& j, const model::ModelDesc& m, const model::HardwareDesc& hw,
                            int64_t seqs) {
  const auto& l = j.layout;
  static const std::map<std::string, std::pair<const char*, const char*>> flavors = {
      {"llama3-8b", {"llama3", "8B"}},         {"llama3-70b", {"llama3", "70B"}},
      {"llama3-405b", {"llama3", "405B"}},     {"llama3-debug", {"llama3", "debugmodel"}},
      {"llama4-17bx16e", {"llama4", "17bx16e"}}, {"llama4-17bx128e", {"llama4", "17bx128e"}},
      {"deepseek-v3-16b", {"deepseek_v3", "16B"}}, {"deepseek-v3-671b", {"deepseek_v3", "671B"}}};
  std::string gpu = hw.name.substr(0, hw.name.find('-'));
  for (char& c : gpu) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string out = fmt::format("# NOTE: this toml config is a preset for {} {} GPUs.\n", j.world, gpu);
  out += fmt::format("# Written by schedcheck plan: {} on {} x {}; verify with schedcheck verify{}.\n\n", m.name, j.world,
                     hw.name, hw.name.find('-') != std::string::npos ? fmt::format(" --hardware {}", hw.name) : "");
  if (auto f = flavors.find(m.name); f != flavors.end())
    out += fmt::format("[model]\nname = \"{}\"\nflavor = \"{}\"\n\n", f->second.first, f->second.second);
  else
    out += fmt::format("# torchtitan has no flavor for {}: verify with --model {}\n\n", m.name, m.name);
  // Without PP a microbatch is a gradient-accumulation step of local_batch_size sequences; with PP
  // local_batch_size is split into microbatches of pipeline_parallel_microbatch_size.
  if (l.pp == 1)
    out += fmt::format("[training]\nlocal_batch_size = {}\nglobal_batch_size = {}\nseq_len = {}\n\n",
                       j.microbatch_sequences, seqs, j.seq_len);
  else
    out += fmt::format("[training]\nlocal_batch_size = {}\nseq_len = {}\n\n", seqs / (l.dp_replicate * l.dp_shard),
                       j.seq_len);
  out += fmt::format("[parallelism]\ndata_parallel_replicate_degree = {}\ndata_parallel_shard_degree = {}\n"
                     "tensor_parallel_degree = {}\npipeline_parallel_degree = {}\n",
                     l.dp_replicate, l.dp_shard, l.tp, l.pp);
  if (l.pp > 1) {
    out += fmt::format("pipeline_parallel_schedule = \"{}\"\npipeline_parallel_microbatch_size = {}\n",
                       j.schedule == "1f1b" ? "1F1B" : "Interleaved1F1B", j.microbatch_sequences);
    if (j.stages_per_rank > 1) {
      // ceil((layers + 2) / layers_per_stage) must give pp·v stages (docs/facts/config-keys.md#torchtitan-validation-rules).
      const int64_t stages = static_cast<int64_t>(l.pp) * j.stages_per_rank;
      out += fmt::format("pipeline_parallel_layers_per_stage = {}\n", (m.layers + 2 + stages - 1) / stages);
    }
  }
  out += fmt::format("\n[activation_checkpoint]\nmode = \"{}\"\n", recompute_label(j.recompute));
  return out;
}

/// One point of a sweep: a model, a GPU preset and a GPU count.
struct PlanPoint {
  model::ModelDesc m;
  model::HardwareDesc hw;
  int32_t gpus = 0;
  size_t index = 0;  ///< position in the sweep (model-major, then hardware, then GPU count)
};

/// What planning one point found: the candidates (the first n_verify built and verified, those
/// that hold first by predicted step time, then the others), the rejections by reason, and the
/// exit code of the point as a single plan gives it.
struct PointPlan {
  PlanPoint point;
  int64_t tokens = 0, seqs = 0;
  double flops_step = 0, secs = 0;
  std::vector<Candidate> cands;
  size_t n_verify = 0, holding = 0;
  std::map<std::string, std::pair<int, std::string>> rejected;  // reason -> (count, example)
  int too_large = 0;
  int exit_code = 0;
};

PointPlan plan_point(const PlanArgs& a, const PlanPoint& pt, int64_t tokens, bool tty) {
  PointPlan out;
  out.point = pt;
  out.tokens = tokens;
  const model::ModelDesc* m = &out.point.m;
  const model::HardwareDesc* hw = &out.point.hw;
  const int32_t gpus = pt.gpus;
  const int64_t seqs = tokens / a.seq_len;
  out.seqs = seqs;
  const auto t0 = std::chrono::steady_clock::now();
  config::JobContext ctx;
  ctx.gpus = gpus;
  ctx.model = m->name;
  ctx.hardware = hw->name;
  ctx.efficiency = a.efficiency;

  // Enumerate; count rejections by family and reason.
  auto& rejected = out.rejected;
  auto reject = [&](const std::string& why, const std::string& example) {
    auto& r = rejected[why];
    if (r.first++ == 0) r.second = example;
  };
  std::vector<Candidate>& cands = out.cands;
  struct Sched {
    const char* name;
    int32_t v;
  };
  const std::vector<Sched> scheds = {{"1f1b", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1}, {"interleaved-1f1b", 4}};
  for (int32_t tp : {1, 2, 4, 8}) {
    if (tp > hw->gpus_per_node || gpus % tp != 0) continue;
    if (m->heads % tp != 0) {
      reject("tensor parallel degree does not divide the attention heads", fmt::format("tp{}", tp));
      continue;
    }
    for (int32_t pp = 1; pp <= std::min<int64_t>(a.max_pp, m->layers) && (gpus / tp) % pp == 0; pp *= 2) {
      const int32_t dp = gpus / (tp * pp);
      const std::string fam = fmt::format("pp{} tp{} dp{}", pp, tp, dp);
      if (dp > seqs) {
        reject(fmt::format("data-parallel degree above the global batch of {} sequences (docs/facts/cost-formulas.md#batch-size-bounds)", seqs), fam);
        continue;
      }
      if (seqs % dp != 0) {
        reject("global batch not divisible by the data-parallel degree", fam);
        continue;
      }
      const int64_t local = seqs / dp;  // sequences per data-parallel rank per step
      std::vector<std::pair<std::string, int32_t>> shardings = {{"fsdp", dp}};
      const int32_t node_shard = std::max(1, hw->gpus_per_node / tp);
      if (node_shard > 1 && dp > node_shard && dp % node_shard == 0) shardings.push_back({"hsdp", node_shard});
      for (const auto& [sh, shard] : shardings) {
        for (int64_t b : {1, 2, 4}) {
          if (local % b != 0) continue;
          const int32_t mbs = static_cast<int32_t>(std::min<int64_t>(local / b, 1 << 20));
          for (const Sched& sc : scheds) {
            if (pp == 1 && &sc != &scheds.front()) continue;
            if (pp > 1 && sc.v > 1 && pp * sc.v > m->layers) continue;
            if (pp > 1 && mbs < pp) {
              reject("fewer microbatches than pipeline ranks", fmt::format("{} mbs {}", fam, b));
              continue;
            }
            for (Recompute rc : {Recompute::kNone, Recompute::kFull}) {
              Candidate c;
              TrainingJob& j = c.job;
              j.framework = "torchtitan";
              j.path = fmt::format("plan-{}", cands.size());
              j.model = m->name;
              j.hardware = hw->name;
              j.world = gpus;
              j.layout.tp = tp;
              j.layout.pp = pp;
              j.layout.dp_shard = shard;
              j.layout.dp_replicate = dp / shard;
              j.layout.sequence_parallel = tp > 1;
              j.schedule = pp > 1 ? sc.name : "1f1b";
              j.stages_per_rank = pp > 1 ? sc.v : 1;
              j.microbatches = mbs;
              j.grad_accum = 1;
              j.microbatch_sequences = b;
              j.global_batch_sequences = seqs;
              j.seq_len = a.seq_len;
              j.recompute = rc;
              j.sharding = config::Sharding::kFsdp;
              j.reshard_after_forward = pp == 1;
              c.sharding = sh;
              if (std::string why = estimate(c, ctx); !why.empty()) {
                reject(why, fmt::format("{} mbs {}", fam, b));
                continue;
              }
              if (c.est_bytes > hw->hbm_bytes) {
                reject(fmt::format("memory above {:.0f} GiB HBM by the analytic bound (states + in-flight activations)",
                                   static_cast<double>(hw->hbm_bytes) / double(int64_t{1} << 30)),
                       fmt::format("{} {} {} mbs {} recompute {}", fam, sh, schedule_label(j), b, recompute_label(rc)));
                continue;
              }
              if (c.fsdp_ops > kPlanMaxFsdpOps) {
                reject(fmt::format("the program to verify is too large for a plan (FSDP, about {:.0f} ops, more than "
                                   "{:.0f}: {} microbatches per step); verify that layout alone",
                                   c.fsdp_ops, kPlanMaxFsdpOps, j.microbatches),
                       fmt::format("{} {} mbs {} recompute {}", fam, sh, b, recompute_label(rc)));
                continue;
              }
              if (c.pipeline_ops > kPlanMaxPipelineOps) {
                reject(fmt::format("the program to verify is too large for a plan (a pipeline, about {:.0f} ops, more "
                                   "than {:.0f}: {} microbatches per step); verify that layout alone",
                                   c.pipeline_ops, kPlanMaxPipelineOps, j.microbatches),
                       fmt::format("{} {} {} mbs {} recompute {}", fam, sh, schedule_label(j), b, recompute_label(rc)));
                continue;
              }
              cands.push_back(std::move(c));
            }
          }
        }
      }
    }
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& x, const Candidate& y) { return x.est_step_s < y.est_step_s; });
  // Verify in the order of the estimate until verify_top hold (or 4 × verify_top were tried):
  // the analytic memory bound is a filter, not the answer.
  size_t& n_verify = out.n_verify;
  size_t& holding = out.holding;
  for (size_t i = 0; i < cands.size() && holding < a.verify_top && n_verify < 4 * a.verify_top; ++i, ++n_verify) {
    if (tty) std::cerr << fmt::format("\rverifying candidate {} ({} hold so far): {} ...", i + 1, holding, layout_label(cands[i])) << std::flush;
    config::VerifiedJob v;
    Diagnostics d;
    Candidate& c = cands[i];
    c.verified = config::verify_job(c.job, ctx, false, &v, d);
    if (!c.verified) {
      c.verdict = "error";
      for (const Diagnostic& x : d.all())
        if (x.severity == Severity::kError) {
          c.reason = x.message;
          break;
        }
      continue;
    }
    c.exit_code = v.exit_code;
    c.pred = v.prediction;
    c.verdict = v.exit_code == 0 ? "holds" : v.exit_code == 13 ? "over memory" : "violated";
    if (v.exit_code != 0) {
      const double gib = double(int64_t{1} << 30);
      c.reason = v.exit_code == 13 ? fmt::format("peak {:.1f} GiB, worst case {:.1f} GiB, over the {:.0f} GiB of HBM",
                                                 static_cast<double>(c.pred.peak_bytes) / gib,
                                                 static_cast<double>(c.pred.worst_bytes) / gib,
                                                 static_cast<double>(hw->hbm_bytes) / gib)
                 : !v.result.findings.empty()
                     ? fmt::format("{}: {}", kind_name(v.result.findings.front().kind), v.result.findings.front().message)
                     : fmt::format("exit {}", v.exit_code);
    }
    holding += v.exit_code == 0;
  }
  if (tty) std::cerr << "\r" << std::string(70, ' ') << "\r";
  // Verified candidates that hold first, by predicted step time; then the others.
  std::stable_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(n_verify), [](const Candidate& x, const Candidate& y) {
    const bool hx = x.verdict == "holds", hy = y.verdict == "holds";
    if (hx != hy) return hx;
    return x.pred.step_s < y.pred.step_s;
  });
  out.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Layouts that only our own size limit kept from being verified are not refuted: when no
  // layout was verified and some were set aside for size, the answer is inconclusive (exit 5),
  // not "no layout holds" (exit 13).
  int& too_large = out.too_large;
  for (const auto& [why, r] : rejected)
    if (why.rfind("the program to verify is too large", 0) == 0) too_large += r.first;
  const bool holds = n_verify > 0 && cands.front().verdict == "holds";
  out.exit_code = holds ? 0 : n_verify == 0 && too_large > 0 ? kExitPlanInconclusive : kExitNoLayout;
  out.flops_step = m->training_flops_per_token(a.seq_len) * static_cast<double>(tokens);
  return out;
}

/// The JSON of one point, as `plan --format json` prints it for a single point.
nlohmann::json point_json(const PlanArgs& a, const PointPlan& pp) {
  const auto& m = pp.point.m;
  const auto& hw = pp.point.hw;
  nlohmann::json out = {{"model", m.name}, {"hardware", hw.name}, {"gpus", pp.point.gpus},
                        {"global_batch_tokens", pp.tokens}, {"seq_len", a.seq_len}, {"flops_per_step", pp.flops_step},
                        {"candidates_considered", pp.cands.size()}, {"seconds", pp.secs}};
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < pp.n_verify; ++i) {
    const Candidate& c = pp.cands[i];
    const auto& l = c.job.layout;
    list.push_back({{"pp", l.pp}, {"dp_replicate", l.dp_replicate}, {"dp_shard", l.dp_shard}, {"tp", l.tp},
                    {"schedule", c.job.schedule}, {"stages_per_rank", c.job.stages_per_rank},
                    {"microbatches", c.job.microbatches}, {"microbatch_sequences", c.job.microbatch_sequences},
                    {"recompute", recompute_label(c.job.recompute)}, {"verdict", c.verdict}, {"exit_code", c.exit_code},
                    {"step_time_s", c.pred.step_s}, {"mfu", c.pred.mfu}, {"bubble_rate", c.pred.bubble_rate},
                    {"peak_bytes", c.pred.peak_bytes}, {"worst_case_bytes", c.pred.worst_bytes},
                    {"fsdp_crossover_tokens", c.crossover}, {"estimated_step_time_s", c.est_step_s}});
    if (!c.reason.empty()) list.back()["reason"] = c.reason;
  }
  out["ranked"] = list;
  nlohmann::json rej = nlohmann::json::array();
  for (const auto& [why, r] : pp.rejected) rej.push_back({{"reason", why}, {"count", r.first}, {"example", r.second}});
  out["rejected"] = rej;
  out["exit_code"] = pp.exit_code;
  return out;
}

/// The text report of one point (a plan of one model, GPU and count).
int print_point(const PlanArgs& a, const PointPlan& pp) {
  const auto* m = &pp.point.m;
  const auto* hw = &pp.point.hw;
  const auto& cands = pp.cands;
  const size_t n_verify = pp.n_verify, holding = pp.holding;
  const auto& rejected = pp.rejected;
  const int64_t seqs = pp.seqs;
  const int exit_code = pp.exit_code;
  const int too_large = pp.too_large;
  std::cout << fmt::format("plan: {} on {} × {}, {} tokens per step ({} sequence{} of {}), {:.3g} FLOP per step\n",
                           m->name, pp.point.gpus, hw->name, pp.tokens, seqs, seqs == 1 ? "" : "s", a.seq_len, pp.flops_step);
  std::cout << fmt::format("{} candidates fit the analytic bounds; the best {} by estimate were built and verified, "
                           "{} hold ({:.1f} s)\n\n", cands.size(), n_verify, holding, pp.secs);
  std::cout << fmt::format("{:>2}  {:<18} {:<6} {:<20} {:>4} {:>4} {:<9} {:>9} {:>6} {:>7} {:>10} {:>13}  {}\n", "#",
                           "layout", "shard", "schedule", "mbs", "m", "recompute", "step (s)", "MFU", "bubble",
                           "peak GiB", "tok/GPU/mb", "verdict");
  // The best `show` layouts that hold, a tie (within 1 % of the step time of the row that
  // opens it) marked; then every verified layout that does not hold, with its reason.
  auto row = [&](size_t i, const std::string& note) {
    const Candidate& c = cands[i];
    const std::string tok = c.crossover > 0 ? fmt::format("{}/{:.0f}", c.job.microbatch_sequences * a.seq_len, c.crossover)
                                            : fmt::format("{}", c.job.microbatch_sequences * a.seq_len);
    if (c.verdict == "error") {
      std::cout << fmt::format("{:>2}  {:<18} {:<6} {:<20} {:>4} {:>4} {:<9} {:>9} {:>6} {:>7} {:>10} {:>13}  {}{}\n", i + 1,
                               layout_label(c), c.sharding, schedule_label(c.job), c.job.microbatch_sequences,
                               c.job.microbatches, recompute_label(c.job.recompute), "-", "-", "-", "-", tok, c.verdict, note);
      return;
    }
    std::cout << fmt::format("{:>2}  {:<18} {:<6} {:<20} {:>4} {:>4} {:<9} {:>9.3f} {:>5.1f}% {:>7.3f} {:>10.1f} {:>13}  {}{}\n",
                             i + 1, layout_label(c), c.sharding, schedule_label(c.job), c.job.microbatch_sequences,
                             c.job.microbatches, recompute_label(c.job.recompute), c.pred.step_s, 100 * c.pred.mfu,
                             c.pred.bubble_rate, static_cast<double>(c.pred.peak_bytes) / double(int64_t{1} << 30), tok,
                             c.verdict, note);
  };
  size_t shown = 0, tie_opens = 0;
  for (size_t i = 0; i < n_verify && shown < a.show && cands[i].verdict == "holds"; ++i, ++shown) {
    if (i == 0 || cands[i].pred.step_s > 1.01 * cands[tie_opens].pred.step_s) tie_opens = i;
    row(i, i > tie_opens ? fmt::format(", tie with #{} (within 1 %)", tie_opens + 1) : std::string());
  }
  if (holding > shown) std::cout << fmt::format("    ... {} more that hold (--show N lists more)\n", holding - shown);
  if (n_verify > holding) {
    std::cout << "\nverified and failed:\n";
    for (size_t i = holding; i < n_verify; ++i) {
      row(i, "");
      std::cout << fmt::format("      {}\n", cands[i].reason);
    }
  }
  std::cout << "\n  tok/GPU/mb: tokens per GPU per microbatch / the FSDP crossover above which the backward hides its\n"
               "  all-gather and reduce-scatter (docs/facts/cost-formulas.md#fsdp-crossover); bubble: idle fraction of the verified program.\n";
  if (!rejected.empty()) {
    std::cout << "\nrejected before verifying:\n";
    for (const auto& [why, r] : rejected)
      std::cout << fmt::format("  {:>5} × {} (e.g. {})\n", r.first, why, r.second);
  }
  // The best layout torchtitan can run by name (ZB-H1 needs a CSV schedule) as a job config.
  const Candidate* best = nullptr;
  for (size_t i = 0; i < n_verify && !best; ++i)
    if (cands[i].verdict == "holds" && cands[i].job.schedule != "zb-h1") best = &cands[i];
  if (best) {
    const std::string toml = torchtitan_toml(best->job, *m, *hw, seqs);
    std::cout << fmt::format("\nbest layout torchtitan runs by name (#{}) as a job config{}:\n\n{}",
                             best - cands.data() + 1, a.emit ? fmt::format(", written to {}", *a.emit) : "", toml);
    if (a.emit && !write_output(*a.emit, toml, "--emit")) return kExitUsage;
  }
  if (exit_code == kExitPlanInconclusive)
    std::cout << fmt::format("\nno layout was verified: {} candidate(s) lower to more than {:.0e} ops, schedcheck's limit, "
                             "and the rest were rejected; this is not a verdict on those layouts (exit 5)\n",
                             too_large, config::kMaxJobOps);
  else if (exit_code == kExitNoLayout)
    std::cout << fmt::format("\nno layout holds: every candidate was rejected or failed its check{} (exit 13)\n",
                             too_large > 0 ? fmt::format("; {} more were too large to verify", too_large) : "");
  return exit_code;
}

/// Version of the share files `plan --shard` writes and `plan --merge` reads.
constexpr int kShareVersion = 1;

/// The sweep's parameters as a JSON object: what every share of one sweep must agree on.
nlohmann::json sweep_json(const PlanArgs& a, int64_t tokens) {
  return {{"models", a.models}, {"hardware", a.hardware}, {"gpus", a.gpus}, {"global_batch_tokens", tokens},
          {"seq_len", a.seq_len}, {"verify_top", a.verify_top}, {"max_pp", a.max_pp},
          // null: each GPU preset's own efficiency
          {"efficiency", a.efficiency > 0 ? nlohmann::json(a.efficiency) : nlohmann::json(nullptr)}};
}

/// A sweep's report from its points' JSON (point_json plus "index", in sweep order): the points,
/// a ranking of each point's best layout that holds by MFU (the measure comparable across
/// models, GPUs and counts; ties by sweep order), the points where none holds after them, and
/// the exit code: 0 when some point has a layout that holds, else 13 when a layout was refuted,
/// else 5 (nothing verified).
nlohmann::json sweep_report(const nlohmann::json& sweep, const nlohmann::json& points) {
  nlohmann::json ranking = nlohmann::json::array(), none = nlohmann::json::array();
  int exit_code = kExitPlanInconclusive;
  for (const auto& pt : points) {
    const int code = pt.at("exit_code").get<int>();
    if (code == 0) exit_code = 0;
    else if (code == kExitNoLayout && exit_code != 0) exit_code = kExitNoLayout;
    nlohmann::json row = {{"index", pt.at("index")}, {"model", pt.at("model")}, {"hardware", pt.at("hardware")}, {"gpus", pt.at("gpus")}};
    const auto& ranked = pt.at("ranked");
    if (code != 0 || ranked.empty()) {
      row["verdict"] = code == kExitPlanInconclusive ? "nothing verified" : "no layout holds";
      // Why: the best verified layout's reason, else the commonest rejection.
      for (const auto& c : ranked)
        if (c.contains("reason")) {
          row["reason"] = fmt::format("best verified, pp{} dp{}x{} tp{}: {}", c.at("pp").get<int>(),
                                      c.at("dp_replicate").get<int>(), c.at("dp_shard").get<int>(), c.at("tp").get<int>(),
                                      c.at("reason").get<std::string>());
          break;
        }
      if (!row.contains("reason") && pt.contains("rejected") && !pt.at("rejected").empty()) {
        const nlohmann::json* most = nullptr;
        for (const auto& r : pt.at("rejected"))
          if (!most || r.at("count").get<int64_t>() > most->at("count").get<int64_t>()) most = &r;
        row["reason"] = fmt::format("{} candidate(s) rejected: {}", most->at("count").get<int64_t>(),
                                    most->at("reason").get<std::string>());
      }
      none.push_back(row);
      continue;
    }
    const auto& b = ranked[0];
    for (const char* k : {"pp", "dp_replicate", "dp_shard", "tp", "schedule", "stages_per_rank", "microbatch_sequences",
                          "recompute", "step_time_s", "mfu", "peak_bytes"})
      row[k] = b.at(k);
    row["tokens_per_s_per_gpu"] =
        pt.at("global_batch_tokens").get<double>() / b.at("step_time_s").get<double>() / pt.at("gpus").get<double>();
    ranking.push_back(row);
  }
  std::stable_sort(ranking.begin(), ranking.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
    return x["mfu"].get<double>() > y["mfu"].get<double>();
  });
  for (auto& r : none) ranking.push_back(std::move(r));
  return {{"sweep", sweep}, {"points", points}, {"ranking", ranking}, {"exit_code", exit_code}};
}

/// The text of a sweep's report: one row per point, ranked as sweep_report ranks them.
std::string sweep_text(const nlohmann::json& report) {
  const auto& sw = report.at("sweep");
  std::string out = fmt::format(
      "plan sweep: {} point{} ({} × {} × {} GPUs), {} tokens per step of {}\n"
      "each point's best layout that holds, ranked by MFU (`schedcheck plan` on one point lists its layouts):\n\n",
      report.at("points").size(), report.at("points").size() == 1 ? "" : "s",
      fmt::join(sw.at("models").get<std::vector<std::string>>(), ", "),
      fmt::join(sw.at("hardware").get<std::vector<std::string>>(), ", "),
      fmt::join(sw.at("gpus").get<std::vector<int32_t>>(), ", "), sw.at("global_batch_tokens").get<int64_t>(),
      sw.at("seq_len").get<int64_t>());
  out += fmt::format("{:>3}  {:<16} {:<10} {:>7}  {:<18} {:<20} {:>4} {:<9} {:>9} {:>6} {:>10} {:>9}\n", "#", "model",
                     "hardware", "GPUs", "layout", "schedule", "mbs", "recompute", "step (s)", "MFU", "tok/s/GPU",
                     "peak GiB");
  size_t n = 0;
  for (const auto& r : report.at("ranking")) {
    ++n;
    if (!r.contains("mfu")) {
      out += fmt::format("{:>3}  {:<16} {:<10} {:>7}  {}{}\n", n, r.at("model").get<std::string>(),
                         r.at("hardware").get<std::string>(), r.at("gpus").get<int32_t>(), r.at("verdict").get<std::string>(),
                         r.contains("reason") ? " (" + r.at("reason").get<std::string>() + ")" : std::string());
      continue;
    }
    const std::string layout = fmt::format("pp{} dp{}x{} tp{}", r.at("pp").get<int>(), r.at("dp_replicate").get<int>(),
                                           r.at("dp_shard").get<int>(), r.at("tp").get<int>());
    const std::string sched = r.at("pp").get<int>() == 1 ? "-"
                              : r.at("stages_per_rank").get<int>() > 1
                                  ? fmt::format("{} v{}", r.at("schedule").get<std::string>(), r.at("stages_per_rank").get<int>())
                                  : r.at("schedule").get<std::string>();
    out += fmt::format("{:>3}  {:<16} {:<10} {:>7}  {:<18} {:<20} {:>4} {:<9} {:>9.3f} {:>5.1f}% {:>10.0f} {:>9.1f}\n", n,
                       r.at("model").get<std::string>(), r.at("hardware").get<std::string>(), r.at("gpus").get<int32_t>(), layout,
                       sched, r.at("microbatch_sequences").get<int>(), r.at("recompute").get<std::string>(),
                       r.at("step_time_s").get<double>(), 100 * r.at("mfu").get<double>(),
                       r.at("tokens_per_s_per_gpu").get<double>(),
                       r.at("peak_bytes").get<double>() / double(int64_t{1} << 30));
  }
  return out;
}

/// Writes `text` to -o FILE (whole or not at all) or standard output; false after an error.
bool emit_report(const PlanArgs& a, const std::string& text) { return write_output(a.output, text); }

int run_merge_shares(const PlanArgs& a, std::string* reading);

/// What is wrong with point `index` of a share of `sweep`, or "": its model, GPU and count must
/// be the sweep's at that index (model-major, then hardware, then count), and each layout's
/// figures what a plan writes (a positive finite step, MFU in (0, 1], peaks >= 0, degrees
/// >= 1 whose product is the GPU count).
std::string point_problem(const nlohmann::json& sweep, int64_t index, const nlohmann::json& pt) {
  const auto& models = sweep.at("models");
  const auto& hws = sweep.at("hardware");
  const auto& gpus = sweep.at("gpus");
  const size_t g = static_cast<size_t>(index) % gpus.size();
  const size_t h = static_cast<size_t>(index) / gpus.size() % hws.size();
  const size_t m = static_cast<size_t>(index) / gpus.size() / hws.size();
  if (pt.at("model") != models.at(m) || pt.at("hardware") != hws.at(h) || pt.at("gpus") != gpus.at(g))
    return fmt::format("model, hardware and GPUs are not the sweep's {} on {} × {}", models.at(m).get<std::string>(),
                       gpus.at(g).get<int64_t>(), hws.at(h).get<std::string>());
  for (const auto& c : pt.at("ranked")) {
    for (const char* k : {"pp", "dp_replicate", "dp_shard", "tp"})
      if (!c.at(k).is_number_integer()) return fmt::format("a layout's {} is not a whole number", k);
    const double step = c.at("step_time_s").get<double>(), mfu = c.at("mfu").get<double>();
    const int64_t pp = c.at("pp").get<int64_t>(), dr = c.at("dp_replicate").get<int64_t>(),
                  ds = c.at("dp_shard").get<int64_t>(), tp = c.at("tp").get<int64_t>();
    if (c.at("verdict") != "error" &&
        (!(step > 0) || !std::isfinite(step) || !(mfu > 0) || mfu > 1 || c.at("peak_bytes").get<double>() < 0))
      return "a layout's figures are not a plan's (step, MFU or peak out of range)";
    if (pp < 1 || dr < 1 || ds < 1 || tp < 1 || pp * dr * ds * tp != pt.at("gpus").get<int64_t>())
      return "a layout's degrees do not multiply to the point's GPUs";
  }
  return {};
}

/// `plan --merge SHARE...`: the shares of one sweep, checked to be whole (every share 1..N of
/// the same sweep, once), ranked as the single-process sweep ranks them. A share whose JSON has
/// not the shape `--shard` writes (a key missing, a value of another type) is an error, exit 2.
int run_merge(const PlanArgs& a) {
  std::string reading;  // the share being read, for the message
  try {
    return run_merge_shares(a, &reading);
  } catch (const nlohmann::json::exception& e) {
    std::cerr << fmt::format("schedcheck: error: --merge{}{}: not what `schedcheck plan --shard K/N` writes ({})\n",
                             reading.empty() ? "" : " ", reading, e.what());
    return kExitSpec;
  }
}

int run_merge_shares(const PlanArgs& a, std::string* reading) {
  nlohmann::json sweep;
  int64_t count = -1;
  std::map<int64_t, std::string> seen;  // share index -> file
  std::map<int64_t, nlohmann::json> points;
  for (const std::string& path : a.merge) {
    *reading = path;
    std::string text, why;
    if (!read_input_file(path, &text, &why)) {
      std::cerr << fmt::format("schedcheck: error: --merge {}: {}\n", path, why);
      return kExitSpec;
    }
    // Copying, comparing and printing a parsed document recurse into it: a share nested deeper
    // than any plan writes is refused before it is parsed.
    if (auto deep = json_nested_too_deep(text)) {
      std::cerr << fmt::format("schedcheck: error: --merge {}:{}:{}: arrays and objects nest more than {} levels deep "
                               "(a plan share is a few levels deep)\n",
                               escape_controls(path), deep->line, deep->col, kMaxInputNesting);
      return kExitSpec;
    }
    nlohmann::json share = nlohmann::json::parse(text, nullptr, false);
    if (share.is_discarded() || !share.is_object() || !share.contains("schedcheck_plan_share") ||
        !share.contains("sweep") || !share.contains("shard") || !share.contains("points") ||
        !share["shard"].contains("index") || !share["shard"].contains("count") || !share["points"].is_array()) {
      std::cerr << fmt::format("schedcheck: error: --merge {}: not a plan share (the JSON `schedcheck plan --shard K/N` "
                               "writes)\n", path);
      return kExitSpec;
    }
    if (share["schedcheck_plan_share"] != kShareVersion) {
      std::cerr << fmt::format("schedcheck: error: --merge {}: share version {}, this schedcheck reads {}\n", path,
                               share["schedcheck_plan_share"].dump(), kShareVersion);
      return kExitSpec;
    }
    if (!share["shard"]["index"].is_number_integer() || !share["shard"]["count"].is_number_integer() ||
        share["shard"]["count"].get<int64_t>() < 1 || share["shard"]["count"].get<int64_t>() > 1000000) {
      std::cerr << fmt::format("schedcheck: error: --merge {}: shard.index and shard.count must be whole numbers, "
                               "the count 1 to 1000000\n", path);
      return kExitSpec;
    }
    const int64_t k = share["shard"]["index"].get<int64_t>(), n = share["shard"]["count"].get<int64_t>();
    if (count < 0) {
      sweep = share["sweep"];
      count = n;
    } else if (share["sweep"] != sweep || n != count) {
      std::cerr << fmt::format("schedcheck: error: --merge {}: a share of another sweep than {} (the sweep's options "
                               "and the share count must be the same in every share)\n", path, seen.begin()->second);
      return kExitSpec;
    }
    if (auto it = seen.find(k); it != seen.end()) {
      std::cerr << fmt::format("schedcheck: error: --merge {}: share {}/{} again (also {})\n", path, k, n, it->second);
      return kExitSpec;
    }
    if (k < 1 || k > n) {
      std::cerr << fmt::format("schedcheck: error: --merge {}: share {}/{} is not one of 1..{}\n", path, k, n, n);
      return kExitSpec;
    }
    seen[k] = path;
    const int64_t total = static_cast<int64_t>(sweep.at("models").size() * sweep.at("hardware").size() *
                                               sweep.at("gpus").size());
    for (const auto& pt : share["points"]) {
      // A number that is not an integer would convert to int64 out of range (undefined).
      if (!pt.is_object() || !pt.contains("index") || !pt["index"].is_number_integer()) {
        std::cerr << fmt::format("schedcheck: error: --merge {}: a point's index is not a whole number\n", path);
        return kExitSpec;
      }
      const int64_t index = pt.at("index").get<int64_t>();
      if (index < 0 || index >= total || index % n != k - 1) {
        std::cerr << fmt::format("schedcheck: error: --merge {}: point {} does not belong to share {}/{} of a sweep "
                                 "of {} points\n", path, index, k, n, total);
        return kExitSpec;
      }
      if (points.count(index)) {
        std::cerr << fmt::format("schedcheck: error: --merge {}: point {} is in the share twice\n", path, index);
        return kExitSpec;
      }
      if (std::string why = point_problem(sweep, index, pt); !why.empty()) {
        std::cerr << fmt::format("schedcheck: error: --merge {}: point {}: {}\n", path, index, escape_controls(why));
        return kExitSpec;
      }
      points[index] = pt;
    }
  }
  reading->clear();
  std::vector<std::string> missing;
  for (int64_t k = 1; k <= count; ++k)
    if (!seen.count(k)) missing.push_back(fmt::format("{}/{}", k, count));
  if (!missing.empty()) {
    std::cerr << fmt::format("schedcheck: error: --merge: share{} {} missing; run `schedcheck plan --shard K/N` with "
                             "the same options for {}\n", missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
                             missing.size() == 1 ? "it" : "each");
    return kExitSpec;
  }
  const size_t total = sweep.at("models").size() * sweep.at("hardware").size() * sweep.at("gpus").size();
  if (points.size() != total) {
    std::cerr << fmt::format("schedcheck: error: --merge: the shares hold {} of the sweep's {} points\n", points.size(),
                             total);
    return kExitSpec;
  }
  nlohmann::json list = nlohmann::json::array();
  for (auto& [index, pt] : points) list.push_back(std::move(pt));
  const nlohmann::json report = sweep_report(sweep, list);
  // A share's names are its author's text: control bytes are shown escaped, never sent to the
  // terminal (JSON escapes them itself).
  const std::string text = a.format == "json" ? report.dump(2) + "\n" : escape_controls(sweep_text(report));
  if (!emit_report(a, text)) return kExitUsage;
  return report["exit_code"].get<int>();
}

/// Looks up each of `names` with `lookup` into `out`; false after an "unknown preset" error
/// naming `option` and the presets `known`.
template <typename Desc, typename Lookup>
bool resolve_presets(const char* option, const std::vector<std::string>& names, Lookup lookup,
                     const std::vector<std::string>& known, std::vector<Desc>* out) {
  for (const std::string& name : names) {
    std::optional<Desc> d = lookup(name);
    if (!d) {
      const std::string hint = std::string(option) == "--hardware" ? config::hardware_preset_hint(name)
                                                                   : config::model_preset_hint(name);
      std::cerr << fmt::format("schedcheck: error: {} {}: unknown preset{}; the presets are {}\n", option, name, hint,
                               fmt::join(known, ", "));
      return false;
    }
    out->push_back(std::move(*d));
  }
  return true;
}

int run_plan(const PlanArgs& given) {
  PlanArgs a = given;
  if (a.hardware.empty()) a.hardware = {"h100"};
  if (!a.merge.empty()) {
    if (!a.models.empty() || !a.gpus.empty() || !given.hardware.empty() || !a.batch_tokens.empty() || a.seq_len > 0 ||
        a.shard || a.emit || a.tuning_given) {
      std::cerr << "schedcheck: error: --merge takes the shares alone: the sweep's options (--model, --hardware, "
                   "--gpus, the batch, --verify-top, --max-pp, --efficiency) are in them, as the shards were planned\n";
      return kExitUsage;
    }
    return run_merge(a);
  }
  for (const auto& [opt, given] : std::vector<std::pair<const char*, bool>>{
           {"--model", !a.models.empty()}, {"--gpus", !a.gpus.empty()},
           {"--global-batch-tokens", !a.batch_tokens.empty()}, {"--seq-len", a.seq_len > 0}})
    if (!given) {
      std::cerr << fmt::format("schedcheck: error: {} is required (or --merge SHARE... to rank a sweep's shares)\n", opt);
      return kExitUsage;
    }
  if (std::string problem = check_output_paths({{"--emit", a.emit}, {"-o", a.output}}, {}); !problem.empty()) {
    std::cerr << "schedcheck: error: " << problem << "\n";
    return kExitUsage;
  }
  // Lists: no empty item, no item with a space, no item twice (a sweep would plan and rank it twice).
  for (const auto& [opt, items] : std::vector<std::pair<const char*, std::vector<std::string>>>{
           {"--model", a.models}, {"--hardware", a.hardware}}) {
    std::set<std::string> seen;
    for (const std::string& item : items) {
      std::string why = item.empty()                                    ? "an empty item"
                        : item.find_first_of(" \t") != std::string::npos ? fmt::format("'{}' has a space", item)
                        : !seen.insert(item).second                     ? fmt::format("'{}' twice", item)
                                                                        : std::string();
      if (!why.empty()) {
        std::cerr << fmt::format("schedcheck: error: {} {}: {}\n", opt, fmt::join(items, ","), why);
        return kExitUsage;
      }
    }
  }
  if (std::set<int32_t>(a.gpus.begin(), a.gpus.end()).size() != a.gpus.size()) {
    std::cerr << fmt::format("schedcheck: error: --gpus {}: a count twice\n", fmt::join(a.gpus, ","));
    return kExitUsage;
  }
  std::vector<PlanPoint> points;
  std::vector<model::ModelDesc> models;
  std::vector<model::HardwareDesc> hws;
  if (!resolve_presets("--model", a.models, model::model_preset, model::model_preset_names(), &models) ||
      !resolve_presets("--hardware", a.hardware, model::hardware_preset, model::hardware_preset_names(), &hws))
    return kExitSpec;
  for (const auto& m : models)
    for (const auto& hw : hws)
      for (int32_t g : a.gpus) points.push_back(PlanPoint{m, hw, g, points.size()});
  auto tokens = parse_tokens(a.batch_tokens);
  if (!tokens) {
    std::cerr << fmt::format("schedcheck: error: --global-batch-tokens {}: expected a token count such as 4M "
                             "(4·2^20) or 4194304\n", a.batch_tokens);
    return kExitSpec;
  }
  if (*tokens % a.seq_len != 0) {
    std::cerr << fmt::format("schedcheck: error: --global-batch-tokens {} = {} is not a whole number of sequences of "
                             "{} tokens\n", a.batch_tokens, *tokens, a.seq_len);
    return kExitSpec;
  }
  int64_t shard_k = 1, shard_n = 1;
  if (a.shard) {
    // K/N with 1 <= K <= N: this process plans the points whose index is K-1 modulo N.
    const std::string& t = *a.shard;
    const size_t slash = t.find('/');
    char* end = nullptr;
    shard_k = slash == std::string::npos ? 0 : std::strtoll(t.c_str(), &end, 10);
    const bool k_ok = slash != std::string::npos && end == t.c_str() + slash;
    shard_n = k_ok ? std::strtoll(t.c_str() + slash + 1, &end, 10) : 0;
    if (!k_ok || *end != '\0' || shard_n < 1 || shard_k < 1 || shard_k > shard_n || shard_n > 1000000) {
      std::cerr << fmt::format("schedcheck: error: --shard {}: expected K/N with 1 <= K <= N, such as 2/3\n", t);
      return kExitUsage;
    }
  }
  if (a.shard && a.format_given && a.format != "json") {
    std::cerr << "schedcheck: error: --shard writes its share as JSON for --merge; --format text applies to the "
                 "merge's report\n";
    return kExitUsage;
  }
  const bool sweep = points.size() > 1 || a.shard;
  if (sweep && a.emit) {
    std::cerr << "schedcheck: error: --emit writes one plan's best layout; a sweep has one per point (plan that point "
                 "alone to write its config)\n";
    return kExitUsage;
  }
  const bool tty = isatty(STDERR_FILENO);
  if (!sweep) {
    const PointPlan pp = plan_point(a, points.front(), *tokens, tty);
    if (a.format == "json") {
      if (!emit_report(a, point_json(a, pp).dump(2) + "\n")) return kExitUsage;
      return pp.exit_code;
    }
    if (a.output) {
      std::cerr << "schedcheck: error: -o writes a sweep's report, a share or --format json; a single plan's text goes "
                   "to standard output\n";
      return kExitUsage;
    }
    return print_point(a, pp);
  }
  nlohmann::json list = nlohmann::json::array();
  size_t mine = 0;
  for (const PlanPoint& pt : points) mine += static_cast<int64_t>(pt.index % shard_n) == shard_k - 1;
  size_t done = 0;
  for (const PlanPoint& pt : points) {
    if (static_cast<int64_t>(pt.index % shard_n) != shard_k - 1) continue;
    if (tty)
      std::cerr << fmt::format("\rplanning point {} of {}: {} on {} × {}{}", ++done, mine, pt.m.name, pt.gpus,
                               pt.hw.name, std::string(20, ' ')) << std::flush;
    nlohmann::json j = point_json(a, plan_point(a, pt, *tokens, tty));
    j["index"] = pt.index;
    list.push_back(std::move(j));
  }
  if (tty) std::cerr << "\r" << std::string(78, ' ') << "\r" << std::flush;
  const nlohmann::json sw = sweep_json(a, *tokens);
  if (a.shard) {
    nlohmann::json share = {{"schedcheck_plan_share", kShareVersion}, {"sweep", sw},
                            {"shard", {{"index", shard_k}, {"count", shard_n}}}, {"points", list}};
    if (!emit_report(a, share.dump(2) + "\n")) return kExitUsage;
    return 0;  // a share is not a verdict: the merge ranks the sweep
  }
  const nlohmann::json report = sweep_report(sw, list);
  if (!emit_report(a, a.format == "json" ? report.dump(2) + "\n" : sweep_text(report))) return kExitUsage;
  return report["exit_code"].get<int>();
}

}  // namespace

Command add_plan(CLI::App& parent) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "plan", "Find the parallel layouts that fit a model on N GPUs and rank them by predicted step time.\n"
              "  schedcheck plan --model llama3-70b --hardware h100 --gpus 512 --global-batch-tokens 4M --seq-len 8192\n"
              "Enumerates tensor (1-8, inside a node), pipeline (schedule, chunks, microbatch size) and data-parallel\n"
              "degrees with FSDP or HSDP and recompute none/full; discards layouts by the global batch (in sequences),\n"
              "the microbatch count and an analytic memory bound; verifies the best by estimate (deadlock, memory per\n"
              "rank over all interleavings, timeline) and prints them ranked, why the others were rejected, and the\n"
              "best as a torchtitan job config (--emit FILE writes it).\n"
              "A sweep: lists for --model, --hardware and --gpus plan every combination and rank each one's best\n"
              "layout by MFU; --shard K/N plans every N-th point from the K-th as a share (JSON) on its own machine,\n"
              "and --merge SHARE... ranks the shares as one process would:\n"
              "  schedcheck plan --model llama3-8b,llama3-70b --gpus 64,512 --global-batch-tokens 4M --seq-len 8192 \\\n"
              "    --shard 1/2 -o share-1.json\n"
              "  schedcheck plan --merge share-1.json share-2.json\n"
              "Exit codes: 0 a layout holds (a sweep: at some point; a share: written); 13 none does; 5 none was\n"
              "verified because every candidate left lowers past schedcheck's size limit (not a verdict); 1 misused\n"
              "options; 2 an unknown preset, a malformed batch, or shares that are not one whole sweep.");
  cmd->add_option("--model", a->models,
                  fmt::format("model preset, or a comma-separated list for a sweep: {}", fmt::join(model::model_preset_names(), ", ")))
      ->delimiter(',');
  cmd->add_option("--hardware", a->hardware,
                  fmt::format("GPU preset (default h100), or a list: {}", fmt::join(model::hardware_preset_names(), ", ")))
      ->delimiter(',');
  cmd->add_option("--gpus", a->gpus, "number of GPUs, or a list such as 512,1024,2048")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--global-batch-tokens", a->batch_tokens, "tokens per optimizer step: 4M (= 4·2^20), 512K or 4194304");
  cmd->add_option("--seq-len", a->seq_len, "sequence length in tokens")->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  CLI::Option* verify_top = cmd->add_option("--verify-top", a->verify_top, "build and verify candidates, best by estimate first, until this many hold (default 12; at most 4x as many are tried)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--show", a->show, "layouts that hold listed in the ranked table (default 10); every verified layout that fails is listed after them with its reason");
  CLI::Option* max_pp = cmd->add_option("--max-pp", a->max_pp, "largest pipeline degree to consider (default 64)")->check(CLI::Range(1, 1 << 16));
  CLI::Option* efficiency =
      cmd->add_option("--efficiency", a->efficiency, "achieved fraction of peak FLOP/s of the largest GEMMs (default: the GPU preset's)")
          ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--emit", a->emit, "write the best layout torchtitan runs by name as a job TOML (schedcheck verify reads it back)");
  cmd->add_option("--shard", a->shard,
                  "K/N: plan the sweep's points K-1, K-1+N, ... (points in model, hardware, GPU-count order) and write "
                  "them as a share (JSON) for --merge");
  cmd->add_option("--merge", a->merge, "rank the shares of one sweep (every K/N once) as the single-process sweep would")
      ->expected(1, -1);
  cmd->add_option("-o,--output", a->output, "write the share, or the sweep's report, to this file (whole or not at all)");
  CLI::Option* format =
      cmd->add_option("--format", a->format, "text (for people) or json")->check(one_of({"text", "json"}));
  return {cmd, [a, verify_top, max_pp, efficiency, format] {
            a->tuning_given = verify_top->count() + max_pp->count() + efficiency->count() > 0;
            a->format_given = format->count() > 0;
            return run_plan(*a);
          }};
}

}  // namespace sc::cli
