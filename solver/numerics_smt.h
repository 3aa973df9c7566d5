// Z3 floating-point worst case of a small reduction: a proof that no input is worse, or a witness.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "numerics/proof_result.h"
#include "numerics/reduction.h"

namespace sc {

struct NumericsSmtOptions {
  /// Z3 resource limit per solver check (repeatable); 0 for none. An exhausted limit makes the
  /// answer inconclusive, never proven.
  uint64_t rlimit = 0;
  /// Wall-clock limit for all checks together, in milliseconds (Z3's `timeout`).
  unsigned timeout_ms = 30'000;
  unsigned seed = 0;
  /// The bound: the largest input is scaled into [1, 2) (relative error is scale invariant in the
  /// normal range) and every other input is 0 or at least 2^-window_binades.
  int window_binades = 16;
  /// Rounds of "find a worse input than the best so far" before giving up (inconclusive).
  int max_rounds = 8;
};

/// The exact worst relative error of the fold of `c` (op sum, algorithm ring or tree, dtype bf16
/// or fp16, 2 <= ranks <= 16) over every input vector in the bound: values of the element type
/// that are +0 or normal in [2^lo, 2^hi) (bf16: [2^-16, 2^16); fp16: [2^-14, 2^(14 - ceil(log2 N))),
/// so no sum overflows), not all zero. Same-sign inputs, so the exact sum is no cancellation; the
/// relative error is scale invariant inside the normal range, so the window loses only
/// subnormals. The ring's fold from any start is the same question (a relabelling of the inputs).
/// Encoding: each input is a variable of Z3's FloatingPoint sort of the element type; the fold
/// adds with roundNearestTiesToEven in that sort (NCCL's rounding: a bf16 sum computed in fp32
/// and rounded again is the same, see numerics::add); the exact sum is the same fold in a sort wide
/// enough that no addition rounds, and "worse than e/d" is |exact - computed| * d > e * exact, with
/// products exact in that sort. The search starts from the worst input of numerics::analyze's
/// adversarial family and asks for a strictly worse input until Z3 says unsat (proven) or a limit
/// is hit (inconclusive). Every witness is replayed through numerics::reduce_element. Z3
/// exceptions become kInconclusive.
numerics::ProofResult smt_worst_case(const numerics::ReductionConfig& c, const NumericsSmtOptions& opt = {});

}  // namespace sc
