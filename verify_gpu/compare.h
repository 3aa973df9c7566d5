// Predicted against measured: the figures of a timeline of plan items, their comparison with
// tolerances, op-order agreement, and the reports (text, JSON `measured`, side-by-side trace).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/verify_pipeline.h"
#include "plan.h"

namespace sc::gpu {

/// Exit code of `schedcheck run` when a measured figure differs from the prediction beyond the
/// tolerance (DESIGN: 20).
inline constexpr int kExitMeasurementDisagrees = 20;

/// Figures of one timeline of plan items, with the definitions of sim/timeline.h:
/// makespan = last end - first start over all op items; span = max over ranks of (end of its
/// last compute op - start of its first); busy = sum of compute durations per rank; idle =
/// (last compute end - first compute start) - busy per rank. Overlap per rank: the time during
/// which the rank has both a compute item and a communication item (its sends, receives,
/// collectives, and implicit transfers it sends) in flight, i.e. |union(compute) ∩
/// union(comm)|; comm per rank is |union(comm)|. All in seconds; peak in bytes.
struct Figures {
  double makespan_s = 0;
  double span_s = 0;
  std::vector<double> busy_per_rank_s;
  std::vector<double> idle_per_rank_s;
  std::vector<double> comm_per_rank_s;
  std::vector<double> overlap_per_rank_s;
  std::vector<int64_t> peak_bytes_per_rank;
};

/// The figures of `times` (one per plan item, seconds) with the given per-rank peaks.
Figures figures_of(const GpuPlan& plan, const std::vector<ItemTime>& times, const std::vector<int64_t>& peak_bytes_per_rank);

/// Fraction of pairs of ops on the same rank whose measured start order agrees with the
/// predicted one, over the pairs whose predicted starts differ (ties in the prediction are not
/// ordered and not counted). 1 when there is no such pair. Counted by merge-sort inversions,
/// O(n log n) per rank. `disagreeing` gets up to 10 example pairs ("1F3 before 1B0").
double order_agreement(const GpuPlan& plan, const std::vector<ItemTime>& predicted, const std::vector<ItemTime>& measured,
                       std::vector<std::string>* disagreeing = nullptr);

/// One compared figure: relative error = |measured - predicted| / |predicted| (0 when both are
/// 0, infinite when only the prediction is 0); `allowed` is the relative error it may have.
struct FigureCheck {
  std::string name;      ///< "makespan", "span", "idle", "overlap", "peak_bytes", "op_order"
  int32_t rank = -1;     ///< per-rank figures, -1 for global ones
  double predicted = 0;
  double measured = 0;
  double rel_error = 0;
  double allowed = 0;
  bool within = true;
  std::string units;     ///< "s", "bytes", "fraction"
};

/// Tolerances: `time_rel` for makespan and span (5 % by default); idle and overlap per rank are
/// reported and checked against `time_rel` of the predicted makespan (an absolute allowance, so a
/// rank with almost no idle time does not fail on microseconds); peak bytes within `peak_rel`
/// (1 %) plus the pool's rounding (`rounding_bytes` times the most live buffers of the rank);
/// op order must agree on at least `order_min` (1.0) of the pairs.
struct Tolerance {
  double time_rel = 0.05;
  double peak_rel = 0.01;
  int64_t rounding_bytes = 1;
  double order_min = 1.0;
};

/// The whole comparison. `exit_code` is 0 or kExitMeasurementDisagrees.
struct Comparison {
  std::vector<FigureCheck> checks;
  double order_agreement = 1;
  std::vector<std::string> order_disagreements;
  bool within = true;
  int exit_code = 0;
};

/// Compares `measured` with `predicted` (figures of the same plan) under `tol`.
Comparison compare(const GpuPlan& plan, const Figures& predicted, const Figures& measured,
                   const std::vector<ItemTime>& predicted_times, const std::vector<ItemTime>& measured_times,
                   const Tolerance& tol);

/// Calibration facts measured at start (seconds, bytes/s, bytes).
struct Calibration {
  std::string device_name;
  int32_t compute_capability = 0;        ///< 90 for sm_90
  int32_t device = 0;
  double launch_latency_s = 0;           ///< back-to-back empty kernel launches, per launch
  double timer_overhead_s = 0;           ///< one read of the global nanosecond timer
  double timer_resolution_s = 0;         ///< smallest non-zero step of the global timer
  double copy_bandwidth_bytes_per_s = 0; ///< device-to-device cudaMemcpyAsync of the largest message
  int64_t pool_rounding_bytes = 1;       ///< a 1-byte cudaMallocAsync raises used memory by this
  double gemm_flops_per_s = 0;           ///< cuBLAS throughput (only with --kernels gemm)
};

/// What the executor measured: the median repeat's item times (by makespan), every repeat's
/// makespan, the pool peaks (used and reserved high-water marks) per rank, calibration, and
/// the problems of the untimed correctness pass (empty when correct).
struct Measurement {
  Calibration calibration;
  std::vector<ItemTime> items;
  std::vector<double> makespan_per_repeat_s;
  int32_t warmup_runs = 0;
  std::vector<int64_t> peak_bytes_per_rank;
  std::vector<int64_t> reserved_peak_bytes_per_rank;
  std::vector<std::string> correctness_problems;
  std::string kernels = "spin";
};

/// The `measured` JSON object (beside `timing` and `memory` in the report): per figure the
/// predicted and measured value, relative error, allowed error and verdict; op order
/// agreement; calibration; repeats; correctness. Units in `units`.
std::string measured_json(const GpuPlan& plan, const Comparison& c, const Measurement& m, const Tolerance& tol);

/// A verify JSON report (`verify_json`, one object: json_report or fsdp_json_report) with the
/// `measured` object added and `exit_code` replaced.
std::string run_json_report(const std::string& verify_json, const GpuPlan& plan, const Comparison& c,
                            const Measurement& m, const Tolerance& tol, int exit_code);

/// The same for the pipeline verify result `r` (json_report).
std::string run_json_report(const VerifyResult& r, const GpuPlan& plan, const Comparison& c, const Measurement& m,
                            const Tolerance& tol, int exit_code);

/// Text for people: one line per figure (predicted, measured, error, allowed, ok/DIFFERS),
/// order agreement, calibration and correctness.
std::string comparison_text(const GpuPlan& plan, const Comparison& c, const Measurement& m, const Tolerance& tol);

/// One Chrome/Perfetto trace with the prediction (chrome_trace of `r`, process "rank N") and
/// the measurement (process "rank N measured", one thread per plan stream) side by side: rank N's
/// two processes are sorted next to each other.
std::string side_by_side_trace(const VerifyResult& r, const GpuPlan& plan, const std::vector<ItemTime>& measured);

/// `r` (a verify result whose program ran to completion, the one `plan` was made from) with its
/// timeline replaced by the measured op times: items [0, plan.num_ops) of `measured` (seconds,
/// one per plan item) become the op times, and the figures and live-memory curve are those of
/// timeline_of_times (the IR's allocations placed at the measured times; the pool's own peak is
/// in the Measurement). Implicit transfer items are not ops: their arrows run between the
/// measured producer and consumer. `name` replaces spec.name (the picture's title).
VerifyResult measured_result(const VerifyResult& r, const GpuPlan& plan, const std::vector<ItemTime>& measured,
                             const std::string& name);

/// One SVG (svg_timelines): the predicted timeline of `r` on top, titled "NAME predicted", and
/// below it the measured one (measured_result), titled "NAME measured on DEVICE", on one time
/// scale, so the rows of a rank line up.
std::string side_by_side_svg(const VerifyResult& r, const GpuPlan& plan, const std::vector<ItemTime>& measured,
                             const std::string& device);

}  // namespace sc::gpu
