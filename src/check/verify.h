// The verify driver: builds the Program from a spec, runs every pass, collects the results.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "check/execution.h"
#include "check/finding.h"
#include "graph/worst_case_memory.h"
#include "ir/program.h"
#include "pipeline/lower_comms.h"
#include "sim/timeline.h"
#include "spec/pipeline_spec.h"

namespace sc {

/// Options of `schedcheck verify`.
struct VerifyOptions {
  std::optional<Semantics> semantics;        ///< overrides the spec's p2p.semantics
  BlockingModel blocking = BlockingModel::kCommStream;
  std::optional<LowerPolicy> lower;          ///< lower a compute-only schedule first
  bool force_min_cut = false;                ///< worst-case memory without the fast path
};

/// Wall time of one pass, in seconds.
struct PassTime {
  std::string pass;
  double seconds = 0;
};

/// Everything verify established. `timeline` and `worst_case` are absent when the program
/// does not execute to completion (a deadlock or a causality cycle).
struct VerifyResult {
  PipelineSpec spec;            ///< as checked (after lowering, if requested)
  Program program;
  std::vector<Finding> findings;
  ExecutionResult execution;
  std::optional<Timeline> timeline;
  std::optional<WorstCaseMemory> worst_case;
  std::vector<PassTime> pass_times;
  size_t edges = 0;             ///< stream-order edges + deps + matched messages
  int exit_code = 0;            ///< exit_code_for(findings)
  std::string verdict() const { return findings.empty() ? "holds" : "violated"; }
};

/// Runs structure, causality, deadlock (execution), channel, residency, timing and memory
/// passes over `spec`. Never fails: problems in the schedule are findings. Lowering that cannot
/// proceed is a structure finding.
VerifyResult verify(const PipelineSpec& spec, const VerifyOptions& options);

}  // namespace sc
