// Schedule synthesis: the order of each rank's pipeline ops that minimises span or makespan under a
// memory limit, searched with Z3, with an optimality proof or a proven lower bound.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "spec/action.h"
#include "spec/pipeline_spec.h"

namespace sc {

/// What synthesize() minimises (docs/facts/pipeline-schedules.md keeps the two apart).
/// kSpan: max over ranks of (end of its last compute op - start of its first compute op).
/// kMakespan: last end - first start over all ranks.
enum class SynthObjective { kSpan, kMakespan };

/// Options of `schedcheck synth`.
struct SynthOptions {
  SynthObjective objective = SynthObjective::kSpan;
  double time_limit_s = 120;  ///< wall clock for every solver call together
  uint64_t rlimit = 0;        ///< Z3 resource limit per solver call; 0 = none (repeatable effort)
  uint32_t seed = 0;          ///< Z3 random seed
  bool warm_start = true;     ///< take the best named schedule that fits as the first upper bound
  /// Overrides spec.memory.limit_bytes when set.
  std::optional<int64_t> limit_bytes;
  /// Use the closed-form memory-aware bounds B1-B3 (solver/synth_bounds.h) as the first lower
  /// bound where they apply (one stage per rank); off only to test the solver's own proofs.
  bool closed_form_bounds = true;
  /// Add the redundant energetic and transitivity constraints (Encoder::add_cuts in synth.cc);
  /// off only to measure what they buy.
  bool cuts = true;
  /// Called after each solver probe and when a warm start improves the best value, with a line
  /// such as "span <= 1.150 s? (best 1.153 s, bound 1.148 s)"; may be empty.
  std::function<void(const std::string&)> on_progress;
};

/// kOptimal: the best value found and the next better bound proven infeasible.
/// kFeasible: a schedule within the limit, with a proven lower bound below its value (a gap).
/// kInfeasible: no schedule fits the memory limit (proven).
/// kUnknown: the solver stopped (time or resource limit) before establishing a schedule or a
/// proof of infeasibility. Never reported as a result: the caller exits with code 5.
enum class SynthStatus { kOptimal, kFeasible, kInfeasible, kUnknown };

/// "optimal", "feasible", "infeasible", "unknown".
const char* synth_status_name(SynthStatus s);

/// One bound query of the search: "is there a schedule with objective <= bound_s?".
struct SynthProbe {
  double bound_s = 0;
  std::string answer;   ///< "sat", "unsat" or "unknown"
  double seconds = 0;
};

/// The outcome. Values are in seconds of the spec's costs (solver time units are the costs
/// scaled to integers: `time_unit_s` is one unit; a value is exact when every cost and link time is
/// a whole number of units). `actions` (per rank, in issue order) is set with kOptimal and
/// kFeasible, and with kUnknown when a schedule was found before the solver stopped.
struct SynthResult {
  SynthStatus status = SynthStatus::kUnknown;
  std::vector<std::vector<Step>> actions;
  bool has_schedule = false;
  double best_s = 0;          ///< objective of `actions` as the encoding counts it
  double lower_bound_s = 0;   ///< proven: no schedule within the limit does better
  double structural_lower_bound_s = 0;  ///< work per rank and the first microbatch's critical path
  /// The closed-form memory-aware bound (max of B1, B2, B3; 0 when they do not apply or are off).
  double closed_form_lower_bound_s = 0;
  /// Which closed-form bound gave it, e.g. "B3 (stage 7 seen from stage 0)"; "" when none applies.
  std::string closed_form_source;
  std::string source;         ///< "solver", or the named schedule the best value came from
  std::string warm_start;     ///< the named schedule taken as the first upper bound ("" when none)
  double warm_start_s = 0;
  double time_unit_s = 1;
  bool split_backward = true; ///< I and W ops (true) or one B op per (stage, microbatch)
  /// For kInfeasible: the spec keys of the constraints Z3's unsat core names, e.g.
  /// "memory.limit_bytes (rank 0)".
  std::vector<std::string> core;
  std::vector<SynthProbe> probes;
  // Statistics.
  int64_t variables = 0;      ///< integer start times and order booleans
  int64_t constraints = 0;    ///< assertions added to the solver
  int64_t order_booleans = 0;
  double solver_seconds = 0;  ///< wall time inside Z3 checks
  std::string message;        ///< why the search stopped (kUnknown), or an input problem
};

/// Most order booleans (pairs of one rank's ops whose order the dependencies leave open)
/// synthesize() gives Z3. Above it the result is the best warm start (named schedules, the ZB
/// heuristic, greedy list schedules) with the bounds that need no solver (structural and
/// closed-form), and `message` says so: an encoding of 2.3 million pairs took 8.6 GB.
inline constexpr int64_t kMaxOrderBooleans = 1'000'000;

/// Synthesises an order for `spec` (ranks, stages, placement, pipeline_starts, microbatches,
/// costs, p2p latency/bandwidth/message_bytes, memory). The spec's own actions are not used but
/// as one more warm start. Ops: F, then I and W when any I or W cost is non-zero, else one B per
/// (stage, microbatch). Memory model as verify's: activation_bytes live from the start of F to
/// the end of I/B, weight_grad_bytes from the end of I to the end of W, params static; the
/// limit is checked at every F start (where live bytes grow), which covers every moment when
/// weight_grad_bytes <= activation_bytes per stage (otherwise also at I ends, conservatively).
/// Symmetry breaking: each stage runs its F's, its I's (B's) and its W's in microbatch order.
/// Method: integer start times, an order boolean for each pair of ops of one rank whose order
/// the dependencies do not fix, pseudo-boolean memory constraints over the order booleans, and
/// bound tightening on the objective (each "objective <= bound?" under an assumption; UNSAT of
/// the next better bound is the optimality proof). Errors in the input (zero or negative costs,
/// shapes too large) give kUnknown with `message`.
SynthResult synthesize(const PipelineSpec& spec, const SynthOptions& options);

}  // namespace sc
