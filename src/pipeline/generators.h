// Named pipeline schedules (GPipe, 1F1B, interleaved, ZB, DualPipe): compute-only action lists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spec/action.h"
#include "spec/pipeline_spec.h"

namespace sc {

/// What to generate. Shape: `ranks` pipeline ranks p >= 1, `microbatches` m >= 1 (for
/// `dualpipe`: m micro-batches in all, m/2 in each direction, as DualPipe's `num_chunks`).
/// Stages per rank v come from `chunks` or from `stages` = v * p (both may be given when they
/// agree); schedules with one stage per rank need neither, interleaved-1f1b, looped-bfs and
/// interleaved-zb default to v = 2, zb-v, dualpipev and dualpipe always use v = 2.
struct GenOptions {
  std::string name;
  int32_t ranks = 0;
  int32_t microbatches = 0;
  std::optional<int32_t> stages;
  std::optional<int32_t> chunks;
  /// interleaved-1f1b only: Megatron-LM's forward_backward_pipelining_with_interleaving
  /// (requires m % p == 0) instead of PyTorch's ScheduleInterleaved1F1B.
  bool megatron = false;
};

/// A generated schedule. Invariants: actions.size() == ranks; stage_to_rank.size() == stages
/// with entries in [0, ranks); every action is F, I, W or B (or an F;B overlapped pair) with a
/// stage in [0, stages) on the rank stage_to_rank names and a microbatch in [0, microbatches);
/// each (stage, microbatch) gets one F and one backward (B, or I then W).
struct Generated {
  std::string name;
  int32_t ranks = 0;
  int32_t stages = 0;
  /// Microbatches each stage processes (m; m/2 for dualpipe, whose directions split them).
  int32_t microbatches = 0;
  std::vector<std::vector<Step>> actions;  ///< per rank, in issue order, no idle slots
  std::vector<int32_t> stage_to_rank;
  std::string placement;  ///< "loop" | "v" | "explicit" (placement_name of stage_to_rank)
  /// First stage of each independent pipeline, ascending, always starting with 0. One pipeline
  /// ({0}) except dualpipe: {0, p}, stages 0..p-1 are the forward direction (stage s on rank
  /// s) and stages p..2p-1 the reverse one (stage 2p-1-r on rank r); a stage that starts a
  /// pipeline has no predecessor and the stage before it is that pipeline's last.
  std::vector<int32_t> pipeline_starts;
  std::string source;  ///< the reference implementation followed, for reports
};

/// Generates schedule `options.name` (one of schedule_names()). Returns nullopt and sets
/// `*why` (when not null) to a lower-case message naming the reference's rule when the shape
/// is one the reference rejects, e.g. "1f1b needs microbatches >= stages (PyTorch Schedule1F1B
/// rejects m < stages): got m = 3, 4 stages", or when the name is unknown ("unknown schedule
/// 'zbh1'; did you mean 'zb-h1'?"). Sources and rules per name:
///  - gpipe: PyTorch ScheduleGPipe (all F, then all B in microbatch order); one stage per rank.
///  - 1f1b: PyTorch Schedule1F1B (docs/facts/pipeline-schedules.md order, full backward B); one stage per rank;
///    rejects m < stages.
///  - interleaved-1f1b: PyTorch ScheduleInterleaved1F1B, loop placement, rounds =
///    max(1, m // p), rejects m % rounds != 0. With `megatron`: Megatron-LM
///    forward_backward_pipelining_with_interleaving (warm-up (p-r-1)*2 + (v-1)*p capped at m*v),
///    rejects m % p != 0, and p < 2 (Megatron-LM initialize_model_parallel; older releases
///    rejected p <= 2).
///  - looped-bfs: PyTorch ScheduleLoopedBFS, loop placement.
///  - interleaved-zb: PyTorch ScheduleInterleavedZeroBubble (ZB1P, I and W), loop placement,
///    rejects m % rounds != 0.
///  - zb-h1, zb-h2: ZB paper (arXiv 2401.10241) handcrafted schedules, docs/facts/pipeline-schedules.md orders; one
///    stage per rank.
///  - zb-v: PyTorch ScheduleZBVZeroBubble, V placement; exactly 2 stages per rank.
///  - dualpipev: PyTorch ScheduleDualPipeV (OVERLAP_F_B steps), V placement; exactly 2 stages
///    per rank, rejects m < 2p.
///  - dualpipe: deepseek-ai/DualPipe DualPipe.step, two pipelines (see pipeline_starts);
///    rejects odd p, odd m and m < 2p.
/// All: rejects p < 1, m < 1, stages not a positive multiple of p, stages and chunks that
/// disagree, and a stage count the schedule does not support.
std::optional<Generated> generate(const GenOptions& options, std::string* why = nullptr);

/// The names generate() accepts, in a fixed order (the order `compare` lists them in).
std::vector<std::string> schedule_names();

/// "unknown schedule 'zbh1'; did you mean 'zb-h1'? (schedules: gpipe, 1f1b, ...)": the
/// message for a name not in schedule_names(), with the closest name when one is close.
std::string unknown_schedule_message(const std::string& name);

/// A PipelineSpec of a generated schedule with unit costs and memory (apply_unit_defaults),
/// its placement declared and its pipeline_starts copied. Name = g.name, path "<generated>".
/// Callers override costs and memory as needed.
PipelineSpec to_pipeline_spec(const Generated& g);

}  // namespace sc
