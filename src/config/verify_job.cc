#include "config/verify_job.h"

#include <algorithm>

#include <fmt/format.h>

#include "pipeline/named_schedule.h"
#include "support/units.h"

namespace sc::config {
namespace {

/// "key at file:line:col" for the fields of `job` that were written in the config.
std::string written(const TrainingJob& job, std::initializer_list<std::pair<const char*, const char*>> fields) {
  std::string out;
  for (const auto& [field, what] : fields) {
    auto it = job.where.find(field);
    if (it == job.where.end() || !it->second.valid()) continue;
    out += fmt::format("{}{} at {}", out.empty() ? "" : ", ", what, format_loc(it->second));
  }
  return out.empty() ? "defaults" : out;
}

/// The first of `fields` the config wrote, else the file's start.
SourceLoc first_written(const TrainingJob& job, std::initializer_list<const char*> fields) {
  for (const char* f : fields)
    if (auto it = job.where.find(f); it != job.where.end() && it->second.valid()) return it->second;
  return job.file;
}

/// A memory finding of a config names its contributors with the keys that set them and is
/// located first at the largest one a user controls: the activations (batch, sequence length,
/// recompute mode) or the model states (sharding degrees and dtypes).
void locate_memory_findings(const TrainingJob& job, const JobCosts& jc, int64_t peak, std::vector<Finding>& findings) {
  const int64_t states = jc.state_bytes_per_rank;
  const int64_t rest = std::max<int64_t>(0, peak - states);
  for (Finding& f : findings) {
    if (f.kind != FindingKind::kMemory) continue;
    f.details.push_back(fmt::format(
        "contributors: activations, gathered parameters and buffers {} (set by {}); model states {} (set by {})",
        format_bytes(static_cast<double>(rest)),
        written(job, {{"microbatch_sequences", "the microbatch size"}, {"seq_len", "the sequence length"},
                      {"recompute", "the recompute mode"}, {"recompute_layers", "the recompute layers"},
                      {"selective_ac_option", "the selective policy"}}),
        format_bytes(static_cast<double>(states)),
        written(job, {{"sharding", "the sharding"}, {"dp_shard", "the shard degree"}, {"tp", "tensor parallelism"},
                      {"pp", "pipeline parallelism"}, {"ep", "expert parallelism"}, {"reduce_dtype", "the reduce dtype"}})));
    SourceLoc at;
    std::string what;
    if (rest >= states) {
      // Recompute, where it is not full, is the cheaper lever than a smaller batch.
      at = job.recompute != model::Recompute::kFull && job.where.count("recompute") && job.where.at("recompute").line > 1
               ? job.where.at("recompute")
               : first_written(job, {"microbatch_sequences", "seq_len", "recompute"});
      what = "activations (the largest contributor a config sets)";
    } else {
      at = first_written(job, {"sharding", "dp_shard", "dp_replicate", "tp", "pp"});
      what = "model states (the largest contributor a config sets)";
    }
    f.ops.insert(f.ops.begin(), what);
    f.locations.insert(f.locations.begin(), at);
  }
}

}  // namespace

bool verify_job(const TrainingJob& job, const JobContext& ctx, bool force_min_cut, VerifiedJob* out,
                Diagnostics& diags) {
  VerifiedJob& v = *out;
  if (!lower_job(job, ctx, &v.lowered, diags)) return false;
  double fsdp_step = 0;
  if (v.lowered.is_fsdp) {
    v.result = verify_fsdp(v.lowered.fsdp, force_min_cut);
    const FsdpExtras* x = fsdp_extras(v.result);
    if (x->figures && !x->figures->step_time_s.empty()) fsdp_step = x->figures->step_time_s.back();
  } else {
    if (!resolve_named_schedule(v.lowered.pipeline, diags)) return false;
    VerifyOptions opt;
    opt.force_min_cut = force_min_cut;
    v.result = verify(v.lowered.pipeline, opt);
  }
  const VerifyResult& base = v.result;
  v.exit_code = base.exit_code;
  JobPrediction& p = v.prediction;
  if (!base.timeline) return true;
  // A schedule that leaves work out (a microbatch without its forward or backward, an action
  // on the wrong rank) would predict a step the job never runs: no figures then.
  for (const Finding& f : base.findings)
    if (f.kind == FindingKind::kStructure) return true;
  const JobCosts& jc = v.lowered.costs;
  p.complete = true;
  p.step_s = fsdp_step > 0 ? fsdp_step : base.timeline->makespan_s * std::max(1, job.grad_accum);
  p.bubble_rate = base.timeline->bubble_rate;
  const double world = job.world > 0 ? job.world : job.layout.world();
  if (p.step_s > 0) {
    p.mfu = jc.flops_per_step / (world * jc.hardware.peak_flops * p.step_s);
    p.tokens_per_s = static_cast<double>(jc.tokens_per_step) / p.step_s;
  }
  const auto& peaks = base.timeline->peak_bytes_per_rank;
  for (size_t r = 0; r < peaks.size(); ++r)
    if (peaks[r] > p.peak_bytes) p.peak_bytes = peaks[r], p.peak_rank = base.program.job_class(static_cast<int32_t>(r)).first;
  for (int64_t b : base.timeline->reserved_bytes_per_rank) p.reserved_bytes = std::max(p.reserved_bytes, b);
  if (base.worst_case)
    for (int64_t b : base.worst_case->bytes_per_rank) p.worst_bytes = std::max(p.worst_bytes, b);
  locate_memory_findings(job, jc, std::max(p.peak_bytes, p.worst_bytes),
                         v.result.findings);
  return true;
}

}  // namespace sc::config
