// The one verify: runs every property pass whose inputs a Program has, whichever front-end built it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "check/execution.h"
#include "check/finding.h"
#include "check/numerics_fixes.h"
#include "graph/worst_case_memory.h"
#include "ir/program.h"
#include "sim/timeline.h"

namespace sc {

/// Options of the program passes (front-end options such as P2P semantics are already in the
/// Program when it reaches verify).
struct ProgramVerifyOptions {
  bool force_min_cut = false;            ///< worst-case memory without the exact fast paths
  /// Further views for the worst case over interleavings (for example only parameter buffers);
  /// their results are ProgramResult::extra_worst_case, in this order. Computed in the same
  /// pass as the full view.
  std::vector<MemoryView> extra_views;
  /// On a program of kConcurrentPassOps ops or more, the worst-case memory pass runs on a second
  /// thread beside the deadlock and timing walk; false runs them one after the other (the
  /// results are the same).
  bool concurrent_passes = true;
};

/// From this many ops on, verify_program runs independent passes on two threads: below it a
/// thread's start (tens of microseconds) is not worth it.
inline constexpr size_t kConcurrentPassOps = 100'000;

/// Wall time of one pass, in seconds.
struct PassTime {
  std::string pass;
  double seconds = 0;
  /// k > 0: the first pass of a second thread, which ran beside the k passes recorded just
  /// before it (one after another on the first thread); kContinuesThread: the next pass of that
  /// second thread; 0: ran alone. The run's wall time counts the longer of the two threads
  /// (total_seconds).
  int32_t beside = 0;
  static constexpr int32_t kContinuesThread = -1;
};

/// The wall time of a run's passes: their sum, where a pass that ran beside others
/// (PassTime::beside) adds only what it took beyond them.
double total_seconds(const std::vector<PassTime>& passes);

/// Everything the passes established about one program. `timeline` and `worst_case` are
/// absent when the program does not execute to completion (a deadlock, a hang or a causality
/// cycle).
struct ProgramResult {
  Program program;
  std::vector<Finding> findings;   ///< front-end findings first, then the passes' in pass order
  /// Findings not kept, per kind: at most kMaxFindingsPerKind of a kind are (cap_findings).
  std::map<FindingKind, int64_t> omitted_findings;
  ExecutionResult execution;
  std::optional<Timeline> timeline;
  std::optional<WorstCaseMemory> worst_case;
  std::vector<WorstCaseMemory> extra_worst_case;  ///< per ProgramVerifyOptions::extra_views
  std::vector<PassTime> pass_times;
  /// One per configuration with a numerics finding: its usual fixes and collectives.
  std::vector<NumericsFixes> numerics_fixes;
  size_t edges = 0;                ///< stream-order edges + deps + matched messages
  int exit_code = 0;               ///< exit_code_for(findings)
  std::string verdict() const { return findings.empty() ? "holds" : "violated"; }
};

/// The pass table. Each pass runs when the program has what it reads:
/// - collectives: communicators with two or more members (collective agreement, check_collectives);
/// - deadlock: always (execute); when collectives diverge, the hang it causes is explained by
///   the divergence (one finding leading with the culprit ranks); a program without P2P
///   messages reports its hangs without naming the P2P semantics;
/// - channel: P2P channels (check_channels);
/// - numerics: reducing collectives that carry their arithmetic (check_numerics);
/// - buffer residency: ops that declare buffer uses, when the program completes;
/// - timing: when it completes (simulate over the execution order);
/// - worst-case memory: when it completes; for ranks that are images of another
///   (Program::rank_images) the representative's result is copied and shifted (exact by that
///   symmetry), and the same holds for buffer residency;
/// - memory: when Program::memory_limit_bytes is set; findings that repeat on every rank are one.
/// Never fails: problems are findings. `front_end` findings are reported first. The pass times
/// are appended after `pass_times` (the front-end's own, e.g. lowering).
ProgramResult verify_program(Program program, std::vector<Finding> front_end, const ProgramVerifyOptions& options,
                             std::vector<PassTime> pass_times = {});

}  // namespace sc
