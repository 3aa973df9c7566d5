// The SMT cross-check engine: deadlock-freedom and worst-case memory of a Program, encoded in Z3
// independently of the graph engine (check/execution.h, graph/worst_case_memory.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/verify_pipeline.h"
#include "ir/program.h"

namespace sc {

/// Effort bounds of the SMT engine: a resource limit per query (repeatable) and a wall-clock
/// limit for all queries together (a watchdog interrupts Z3 at it; honoured within ~0.1 s plus
/// the time to build the encoding).
struct SmtOptions {
  uint64_t rlimit = 0;        ///< Z3 resource limit per query; 0 = none
  uint32_t seed = 0;          ///< Z3 random seed
  double time_limit_s = 0;    ///< wall clock for the whole check, seconds; 0 = none
};

/// What the SMT engine established about a Program under its semantics.
/// `completes`: every op can complete (deadlock-freedom). `completed_ops`: the largest number of
/// ops some execution completes (all of them when `completes`; with a deadlock, the size of
/// the unique maximal set the graph engine reaches). `worst_case_bytes_per_rank`: per rank, the
/// largest live bytes (static included) at any moment of any allowed execution; filled only when
/// `completes`. `inconclusive` with `message` when Z3 answered unknown: nothing above is then
/// established.
struct SmtVerdict {
  bool completes = false;
  int64_t completed_ops = 0;
  std::vector<int64_t> worst_case_bytes_per_rank;
  bool inconclusive = false;
  /// With `inconclusive`: deadlock-freedom (`completes`) was established before Z3 stopped,
  /// and only the worst-case memory is missing.
  bool deadlock_established = false;
  std::string message;
  double seconds = 0;
};

/// Encodings (the rules of ExecutionResult and WorstCaseMemory, restated):
/// deadlock: a Boolean "completes" and an integer completion time per op; an op completes after
/// its stream predecessor and its deps; a recv after its matched send (at the same time under
/// rendezvous, where a send also needs its recv); under buffered:N the k-th send of a channel
/// after the (k-N)-th recv; an unmatched recv (and an unmatched rendezvous send) never. The
/// program is deadlock-free iff all ops complete is satisfiable; otherwise the maximum number of
/// completed ops is found with Z3's optimiser.
/// memory: a Boolean per start and end event, "in the moment" closed under the happens-before
/// rules of worst_case_memory(); the maximum of the rank's memory effects over such sets.
SmtVerdict smt_check(const Program& program, const SmtOptions& options = {});

/// `verify --engine smt`: runs smt_check on r.program and reports through `r`: the worst case per
/// rank becomes the SMT engine's and a pass time "smt" is added. `*note` (when not null) gets one
/// line: the SMT verdict and peaks, and whether they agree with the graph engine's; when Z3
/// stopped (a limit), what it had established by then. Returns 70 (internal error) when the
/// engines disagree, 5 (inconclusive) when Z3 answered unknown or hit a limit, else r.exit_code.
int apply_smt_engine(VerifyResult& r, std::string* note, const SmtOptions& options = {});

}  // namespace sc
