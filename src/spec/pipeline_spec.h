// The pipeline schedule spec: what `schedcheck verify` reads from YAML or a PyTorch CSV.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "spec/action.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace sc {

/// P2P completion semantics (DESIGN.md "Semantics switches").
/// kEager: a send never blocks. kRendezvous: a send completes only together with its matching
/// recv (NCCL for large messages; the default). kBuffered: a send completes while fewer than
/// `buffer` messages on its channel are sent and not yet received.
struct Semantics {
  enum Kind { kEager, kRendezvous, kBuffered };
  Kind kind = kRendezvous;
  int32_t buffer = 0;  ///< kBuffered only, >= 1
  bool operator==(const Semantics&) const = default;
};

/// Parses "eager", "rendezvous" or "buffered:N" (N >= 1); nullopt with `*why` otherwise.
std::optional<Semantics> parse_semantics(std::string_view text, std::string* why = nullptr);
/// Formats semantics back to the spec's spelling.
std::string format_semantics(const Semantics& s);

/// How a pending P2P op blocks its rank (issue: "model P2P ops on an in-order communication
/// stream per rank ...; offer the stricter whole-rank-blocks model as an option").
/// kCommStream: sends and receives run in order on one communication stream per rank; a pending
/// one blocks later communication, not compute. kWholeRank: every action runs in order on one
/// stream, so a pending send or receive blocks the rank.
enum class BlockingModel { kCommStream, kWholeRank };

/// Per-stage costs in seconds. Each vector has `stages` entries. B defaults to I + W.
struct Costs {
  std::vector<double> f_s, i_s, w_s, b_s;
};

/// The point-to-point link model: a transfer of n bytes takes latency_s + n / bandwidth.
struct P2PSpec {
  double latency_s = 0;
  double bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
  int64_t message_bytes = 0;  ///< bytes of one activation or gradient message
  Semantics semantics;
};

/// Memory model, bytes per rank. Every vector has `stages` entries.
/// A (stage, microbatch) holds activation_bytes from the start of its F until the end of its I
/// or B, and weight_grad_bytes from the end of its I until the end of its W. params_bytes of a
/// stage are resident on its rank for the whole step, except for stages the schedule UNSHARDs
/// (FSDP inside a pipeline stage): their params_bytes are the unsharded parameters, live from
/// each UNSHARD to the next RESHARD (the sharded copy is not modelled).
struct MemorySpec {
  std::optional<int64_t> limit_bytes;  ///< per rank; none = no limit check
  std::vector<int64_t> params_bytes;
  std::vector<int64_t> activation_bytes;
  std::vector<int64_t> weight_grad_bytes;
};

/// A schedule named in a spec instead of written out (`schedule: {name: zb-h1}`); the pipeline
/// front-end generates its action lists (src/pipeline/named_schedule.h).
struct ScheduleRequest {
  std::string name;
  std::optional<int32_t> chunks;  ///< stages per rank, where the schedule takes a choice
  bool megatron = false;          ///< interleaved-1f1b: Megatron-LM's variant
  SourceLoc loc;                  ///< the `name` value
};

/// Where the spec's values came from, for messages that point at a key.
struct SpecLocs {
  SourceLoc file;        ///< start of the file
  SourceLoc ranks, stages, placement, microbatches, memory_limit, schedule;
};

/// A pipeline schedule with its model. Invariants after a successful load:
/// ranks >= 1, stages >= 1, microbatches >= 1, stage_to_rank.size() == stages with entries in
/// [0, ranks), actions.size() == ranks, every action's stage in [0, stages) and microbatch in
/// [0, microbatches) (or -1 where the kind takes none), all cost/memory vectors sized `stages`.
struct PipelineSpec {
  std::string name;
  std::string path;              ///< file it was read from
  int32_t ranks = 0;
  int32_t stages = 0;
  int32_t microbatches = 0;
  std::vector<int32_t> stage_to_rank;
  /// "loop", "v", "explicit", or "inferred:loop" / "inferred:v" / "inferred" when the
  /// placement was not declared and was read off the action lists.
  std::string placement;
  bool placement_declared = false;
  Costs costs;
  P2PSpec p2p;
  MemorySpec memory;
  std::vector<std::vector<Step>> actions;  ///< per rank, in issue order
  /// First stage of each independent pipeline, ascending, starting with 0. One pipeline ({0})
  /// but for bidirectional schedules (DualPipe: {0, p}): a stage that starts a pipeline has no
  /// predecessor, and the stage before it is the previous pipeline's last.
  std::vector<int32_t> pipeline_starts{0};
  /// Set when the schedule is named rather than written out; `actions` is empty until resolved.
  std::optional<ScheduleRequest> named;
  SpecLocs locs;

  /// True when stage s has no predecessor (it starts a pipeline).
  bool is_first_stage(int32_t s) const;
  /// True when stage s has no successor (it ends a pipeline).
  bool is_last_stage(int32_t s) const;

  /// True when any action is a SEND or RECV (the schedule has explicit communication).
  bool has_comms() const;
};

/// Cost and memory defaults for a schedule given without a model (a bare CSV): F = I = W = 1 s,
/// B = 2 s, no link cost, activation_bytes = weight_grad_bytes = 1, params 0, no limit; so the
/// memory peak reads as a count of live (stage, microbatch) activations.
void apply_unit_defaults(PipelineSpec& spec);

/// Stage-to-rank maps of PyTorch's generators (FACTS §1): loop puts stage s on rank s % ranks;
/// v (2 stages per rank) puts stages r and 2*ranks-1-r on rank r. Empty when v does not fit
/// (stages != 2 * ranks).
std::vector<int32_t> loop_placement(int32_t ranks, int32_t stages);
std::vector<int32_t> v_placement(int32_t ranks, int32_t stages);

/// Reads the placement off the action lists: stage s belongs to the first rank whose list
/// names it; stages never named map to -1. A stage named on two ranks is not an error here:
/// the structure pass reports every action that runs on a rank other than its stage's.
std::vector<int32_t> infer_placement(const std::vector<std::vector<Step>>& actions, int32_t stages);

/// Names a placement: "loop", "v" or "explicit".
std::string placement_name(const std::vector<int32_t>& stage_to_rank, int32_t ranks);

}  // namespace sc
