// A training job verified end to end: lowered with the cost model, checked by the composed or
// FSDP front-end's verify, and summarised as the figures a person plans with.
#pragma once

#include <algorithm>
#include <optional>

#include "config/lower_job.h"
#include "fsdp/verify_fsdp.h"
#include "pipeline/verify_pipeline.h"

namespace sc::config {

/// The predicted figures of a verified job. Absent figures (a deadlock) leave complete false.
struct JobPrediction {
  bool complete = false;
  double step_s = 0;          ///< one optimizer step: the program's makespan (pipeline: × grad_accum;
                              ///< FSDP: its steady second step)
  double mfu = 0;             ///< flops_per_step / (world · peak · step_s) (torchtitan's MFU)
  double tokens_per_s = 0;
  double bubble_rate = 0;     ///< of the modelled program (sim/timeline.h)
  int64_t peak_bytes = 0;     ///< largest timeline peak over modelled ranks
  int32_t peak_rank = 0;
  int64_t worst_bytes = 0;    ///< largest worst case over all interleavings
  /// Largest over modelled ranks of what the caching allocator reserves (Timeline::
  /// reserved_bytes_per_rank): what torch.cuda.max_memory_reserved, torchtitan's logged memory,
  /// reads. At least peak_bytes; above it where a side stream allocates (FSDP2).
  int64_t reserved_bytes = 0;
  /// The larger of peak_bytes and worst_bytes: what a rank may need, bytes.
  int64_t need_bytes() const { return std::max(peak_bytes, worst_bytes); }
};

/// A job and everything verify established for it.
struct VerifiedJob {
  LoweredJob lowered;
  /// The lowered program's result: FSDP's (with its extras, fsdp_extras()) when lowered.is_fsdp,
  /// else the composed pipeline's.
  VerifyResult result;
  JobPrediction prediction;
  int exit_code = 0;                     ///< the verify's exit code
};

/// Lowers `job` (lower_job), resolves the named schedule, verifies, and predicts. Returns false
/// after adding errors to `diags` when the job cannot be lowered; problems of the schedule are
/// findings of the result, not errors.
bool verify_job(const TrainingJob& job, const JobContext& ctx, bool force_min_cut, VerifiedJob* out,
                Diagnostics& diags);

}  // namespace sc::config
