#include "config/verify_job.h"

#include <algorithm>

#include "pipeline/named_schedule.h"

namespace sc::config {

bool verify_job(const TrainingJob& job, const JobContext& ctx, bool force_min_cut, VerifiedJob* out,
                Diagnostics& diags) {
  VerifiedJob& v = *out;
  if (!lower_job(job, ctx, &v.lowered, diags)) return false;
  double fsdp_step = 0;
  if (v.lowered.is_fsdp) {
    v.fsdp = verify_fsdp(v.lowered.fsdp, force_min_cut);
    if (v.fsdp->figures && !v.fsdp->figures->step_time_s.empty()) fsdp_step = v.fsdp->figures->step_time_s.back();
  } else {
    if (!resolve_named_schedule(v.lowered.pipeline, diags)) return false;
    VerifyOptions opt;
    opt.force_min_cut = force_min_cut;
    v.pipeline = verify(v.lowered.pipeline, opt);
  }
  const VerifyResult& base = v.base();
  v.exit_code = base.exit_code;
  JobPrediction& p = v.prediction;
  if (!base.timeline) return true;
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
    if (peaks[r] > p.peak_bytes) p.peak_bytes = peaks[r], p.peak_rank = static_cast<int32_t>(r);
  if (base.worst_case)
    for (int64_t b : base.worst_case->bytes_per_rank) p.worst_bytes = std::max(p.worst_bytes, b);
  return true;
}

}  // namespace sc::config
