// Differential check of the SMT engine against the graph engine: one schedule, or a seeded
// sample of randomly mutated schedules (swapped ops, moved receives, dropped messages).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "pipeline/verify_pipeline.h"
#include "solver/smt_engine.h"
#include "spec/pipeline_spec.h"

namespace sc {

/// Counts of a differential run.
struct DifferentialTally {
  int64_t cases = 0;
  int64_t deadlocks = 0;      ///< cases the graph engine found deadlocked
  int64_t disagreements = 0;
  double smt_seconds = 0;
};

/// Verifies `spec` with `options` (graph engine) and runs smt_check on its program; the two agree
/// when they give the same verdict, the same number of completed ops and, for a schedule that
/// completes, the same worst case per rank. On a disagreement calls `report` with a message that
/// prints the schedule. Updates `tally`.
bool differential_case(const PipelineSpec& spec, const VerifyOptions& options, const SmtOptions& smt,
                       const std::string& what, DifferentialTally& tally,
                       const std::function<void(const std::string&)>& report);

/// `cases` mutated schedules from a seeded generator: small named schedules (1F1B, ZB-H1,
/// interleaved 1F1B, ZB-V, GPipe) lowered with PyTorch's and the deferred policy, each mutated one
/// to three times (swap two neighbouring actions, move a receive, drop a send or receive),
/// checked under eager, rendezvous, buffered:1 and buffered:2 in turn.
DifferentialTally run_mutation_differential(int64_t cases, uint32_t seed, const SmtOptions& smt,
                                            const std::function<void(const std::string&)>& report);

}  // namespace sc
