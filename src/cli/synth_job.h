// Synthesis on a framework config: the named schedules the framework runs and the orders
// `synthesize` finds for the same job, each verified as the composed program the config lowers
// to (lower_job, verify_job), so every row of the comparison is predicted the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/verify_job.h"
#include "solver/synth.h"

namespace sc::cli {

/// One schedule of the comparison: a named one as the framework runs it, or a synthesised one
/// given to the framework as action lists (torchtitan: pipeline_parallel_schedule_csv).
struct JobSchedule {
  std::string label;           ///< the framework's name ("1F1B", "ZBVZeroBubble", ...), or "synthesised"
  /// The torchtitan schedule class that builds and places the stages (for a synthesised order,
  /// the one the emitted config names: "1F1B", "Interleaved1F1B" or "ZBVZeroBubble").
  std::string torch_name;
  bool synthesised = false;
  config::TrainingJob job;     ///< the job it runs: schedule, stages per rank, layer split, actions
  bool ran = false;            ///< lowered and verified; else `why`
  std::string why;             ///< why it was not run (a shape the schedule refuses, no order found)
  config::VerifiedJob verified;
  std::optional<SynthResult> synth;  ///< synthesised only: the search's outcome (span, seconds)
  int64_t synth_limit_bytes = 0;     ///< the per-rank memory limit the search ran under, bytes
  /// The schedule's objective (span or makespan) in the search's own terms (the pipeline without
  /// its data-parallel collectives), seconds; -1 when not computed. For a synthesised row, the
  /// search's best value.
  double search_objective_s = -1;
  /// A synthesised order whose composed peak exceeds the memory the search was given (the
  /// search's calibration missed): shown, never the best.
  bool over_memory = false;
  /// Lowered and verified, exit 0, with a complete prediction (step time, peak), within memory.
  bool holds() const { return ran && !over_memory && verified.exit_code == 0 && verified.prediction.complete; }
  /// "loop v1", "loop v2", "V".
  std::string placement() const;
};

/// How synthesize_job searches.
struct JobSynthOptions {
  /// Options of every search; time_limit_s is shared by all of them (each placement and split
  /// gets an equal part); limit_bytes is not used (see memory_bytes).
  SynthOptions synth;
  /// Memory per rank the synthesised orders may use, bytes, in the composed program's terms
  /// (model states included). Unset: the peak of the fastest named schedule that holds (the
  /// comparison is at equal memory), or the GPU's HBM when `match_named` is false or no named
  /// schedule holds.
  std::optional<int64_t> memory_bytes;
  bool match_named = true;
  /// torchtitan: also search the layer split (pipeline_parallel_first/last_stage_less_layers)
  /// that balances the busiest rank's work, besides the config's own split.
  bool search_split = true;
};

/// The comparison. `schedules` holds the named schedules first, then the synthesised ones.
struct JobSynthResult {
  std::vector<JobSchedule> schedules;
  int best_named = -1;   ///< index of the fastest named schedule that holds (step time); -1: none
  int best_synth = -1;   ///< index of the fastest synthesised one that holds; -1: none
  int64_t memory_bytes = 0;  ///< the memory per rank the searches ran under (composed terms), bytes
  std::string memory_source; ///< where it came from: "HBM", "--memory-limit", or the named schedule's label
  /// Every search ended kOptimal: within each placement and split searched, no order has a
  /// shorter pipeline span under its memory limit (proven).
  bool all_optimal = false;
  /// The lowest proven lower bound over every search (seconds of the objective): no order of the
  /// placements and splits searched does better; -1 when no search ran.
  double lower_bound_s = -1;
};

/// Runs the comparison for a job with pipeline parallelism (pp > 1):
/// - named: every schedule the framework runs on the job's shape (torchtitan: GPipe, 1F1B,
///   Interleaved1F1B, LoopedBFS, InterleavedZeroBubble at the config's stages per rank (2 when
///   the config's schedule has one stage per rank), ZBVZeroBubble and DualPipeV with two;
///   Megatron-LM: 1F1B, and the interleaved schedule at the config's virtual stages), each at the
///   config's layer split; a shape one refuses is a row with its reason;
/// - synthesised: for each placement (loop with one stage per rank, loop with the multi-stage
///   count above, V with two), synthesize() over the lowered pipeline's per-stage costs (F, I, W,
///   with recompute's forward added to I), P2P time and a memory limit of the memory per rank
///   below minus the model states and the largest recompute transient on the busiest rank; at the config's
///   split and, with search_split, at the torchtitan split that minimises the busiest rank's
///   compute (weights 0-2 for the embedding, 0-4 for the output); the memory per rank is
///   opt.memory_bytes, else the fastest named schedule's peak (equal memory), else HBM;
/// - each schedule then runs through verify_job, so step time, bubble, peak and MFU are those of
///   the composed program (FSDP or data-parallel collectives included).
/// Returns false with errors in `diags` when the job has no pipeline or cannot be lowered.
bool synthesize_job(const config::TrainingJob& job, const config::JobContext& ctx, const JobSynthOptions& opt,
                    JobSynthResult* out, Diagnostics& diags);

/// The job config torchtitan runs `s` with: `config_text` (the original TOML) with only the keys
/// that change edited in place (config::edit_toml_table; comments, order and spelling of every
/// other line kept): [parallelism] pipeline_parallel_schedule = s.torch_name where it differs,
/// pipeline_parallel_schedule_csv = `csv_path` (removed when `csv_path` is empty: `s` is a named
/// schedule torchtitan runs by name), the layer-split weights where they differ from the
/// config's (torchtitan's default 1), and pipeline_parallel_layers_per_stage removed where it no
/// longer gives the schedule's stage count. Returns "" with `why` when torchtitan cannot express
/// the schedule's stage count through these keys, or the file cannot be edited as text.
std::string torchtitan_synth_toml(const std::string& config_text, const JobSchedule& s, const std::string& csv_path,
                                  std::string* why);

}  // namespace sc::cli
