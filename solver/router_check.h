// Z3 proofs of the MoE router properties: prefix causality, batch independence, train/inference
// equivalence, drop-freedom and determinism, for every score assignment at the spec's bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "router/router_config.h"
#include "router/router_result.h"

namespace sc {

struct RouterCheckOptions {
  /// Z3 resource limit per solver check (repeatable, unlike a wall-clock timeout); an exhausted
  /// limit makes the property inconclusive, never proven.
  uint64_t rlimit = 400'000'000;
  /// Wall clock for every property together, seconds; 0 = none. A watchdog interrupts Z3 at it
  /// (within ~0.1 s); a property it stops, or one not started, is inconclusive, never proven.
  double time_limit_s = 0;
  unsigned seed = 0;
  /// Greedily make as many tokens as possible agree between the two inputs of a witness, so the
  /// remaining ones are the cause.
  bool minimize_witness = true;
  /// Ask for a witness whose scores are all different (no tie decides anything, so it reads
  /// plainly); the first witness is kept when that fails.
  bool plain_witness = true;
  /// Resource limit of each query that only polishes a witness (minimising its cause, plain
  /// scores); one that runs out leaves the witness as it was, it never changes a verdict.
  uint64_t plain_witness_rlimit = 30'000'000;
  /// Properties to check (names as in PropertyResult::name); empty means the spec's `check:` list,
  /// or all when that is empty too.
  std::vector<std::string> only;
};

/// Checks every property of `spec` (and its dispatch memory when given). Scores are symbolic
/// integers: every routing decision compares scores only by order (top-k, ranking by score or best
/// score, ties by a fixed index order), so integers in [0, 2·tokens·(E+1)] reach every order of
/// real scores and lose no generality. Each violation's witness is replayed through route() and
/// marked `replayed`. Z3 exceptions are caught and turn into an inconclusive result.
RouterReport check_router(const RouterSpec& spec, const RouterCheckOptions& opt = {});

}  // namespace sc
