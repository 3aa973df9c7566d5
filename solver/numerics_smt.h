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
/// or fp16, 2 <= ranks <= 16, no divides or casts) over every input in the bound: values of the
/// element type, the largest in [1, 2) and every other +0 or in [2^-w, 2) with w =
/// max(window_binades, p + 1). Relative error is scale invariant in the normal range, so this
/// covers every same-sign input whose nonzero values span less than 2^w binades (scaled by a power
/// of two), except where scaling would push a value into the subnormals or past the largest
/// finite value. Same-sign inputs, so the exact sum is never a cancellation. The ring's fold from
/// any start is the same question (a relabelling of the inputs).
/// Encoding: each input is a variable of Z3's FloatingPoint sort of the element type; the fold
/// adds with roundNearestTiesToEven in that sort (NCCL's rounding: a bf16 sum computed in fp32
/// and rounded again is the same, see numerics::add); the exact sum is taken on bit-vectors in
/// units of the window's smallest spacing (each input scaled by a power of two and converted
/// with fp.to_ubv, both exact), and "worse than e/d" (e/d the best relative error known, in lowest
/// terms) is |exact - computed| * d > e * exact in twice the width, so nothing wraps.
/// The search starts from the worst input of numerics::analyze's adversarial family and asks
/// for a strictly worse input until Z3 says unsat (kProven) or a limit is hit (kInconclusive,
/// or kWitness when a worse input was found first). Every model is replayed through
/// numerics::reduce_element and must be worse there too. Z3 exceptions become kInconclusive.
/// bf16 ring: when the start input attains (N - 1) / (2^p + N - 1) (the tie family does), the proof
/// is an induction over the fold instead (numerics_smt.cc, prove_ring_by_induction): 6 (N - 1)
/// unsat checks, each about one bf16 addition, run on every core; `checks` counts them. It covers
/// every input of the bound (indeed every nonnegative one whose prefix sums stay normal). When a
/// check is not unsat in time, the search above decides. Measured (README): N = 8 took 77 s of
/// wall time on 2 cores shared with other builds.
numerics::ProofResult smt_worst_case(const numerics::ReductionConfig& c, const NumericsSmtOptions& opt = {});

}  // namespace sc
