// The pipeline front-end's verify: its own rules, lowering to the Program IR, then the one verify.
#pragma once

#include <memory>

#include <optional>
#include <string>
#include <vector>

#include "check/verify.h"
#include "pipeline/lower_comms.h"
#include "sim/timeline.h"
#include "spec/pipeline_spec.h"

namespace sc {

/// Options of `schedcheck verify`.
struct VerifyOptions {
  std::optional<Semantics> semantics;        ///< overrides the spec's p2p.semantics
  std::optional<BlockingModel> blocking;     ///< overrides the spec's p2p.blocking
  std::optional<LowerPolicy> lower;          ///< lower a compute-only schedule first
  bool force_min_cut = false;                ///< worst-case memory without the fast path
  /// false: VerifyResult::spec.actions is emptied while the Program is built, once every op
  /// is created (the ops carry their actions, and no report reads the lists): 44 bytes a step
  /// less at the peak. For callers that only report, such as `schedcheck verify`.
  bool keep_actions = true;
};

/// Everything verify established. `timeline` and `worst_case` are absent when the program
/// does not execute to completion (a deadlock or a causality cycle).
/// What a front-end adds to its program's result beyond the pipeline spec (FSDP: its spec, the
/// per-op info and its figures); that front-end's reports read it back by its type.
struct ResultExtras {
  virtual ~ResultExtras() = default;
};

/// The result of verify for every front-end: the program's result, the pipeline spec as
/// checked (for pipeline and composed specs), and the front-end's extras (null when none).
struct VerifyResult : ProgramResult {
  PipelineSpec spec;            ///< as checked (after lowering, if requested)
  std::shared_ptr<const ResultExtras> extras;
};

/// The pipeline front-end: the action-list rules (structure, UNSHARD/RESHARD residency), the
/// lowering (with causality findings met while wiring inputs), then verify_program. Never fails: problems in the schedule are findings. Lowering that cannot
/// proceed is a structure finding.
VerifyResult verify(const PipelineSpec& spec, const VerifyOptions& options);
/// The same, taking the spec over (VerifyResult::spec is it) instead of copying its action
/// lists: about 44 bytes an op less at the peak on large schedules.
VerifyResult verify(PipelineSpec&& spec, const VerifyOptions& options);

}  // namespace sc
