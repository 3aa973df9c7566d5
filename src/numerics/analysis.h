// Error, bias and failure modes of one reducing collective, and of the usual fixes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "numerics/reduction.h"
#include "support/source.h"

namespace sc::numerics {

/// Effort and seeds of an analysis. Every figure is a pure function of the config and these.
struct AnalysisOptions {
  int64_t samples = 1024;          ///< elements drawn per bias distribution
  uint64_t seed = 0x5eed'2026;     ///< base seed; distribution k uses seed + k
  int max_ring_starts = 64;        ///< ring starts tried per adversarial input (all when N is smaller)
  int random_trials = 32;          ///< random positive vectors per adversarial random family
  bool fixes = true;               ///< also analyse the usual fixes
};

/// The worst relative error |computed - exact| / |exact| found over the adversarial family, with
/// its input. The family (same-sign inputs, so the exact result is never a cancellation):
/// - "uniform c": every rank holds c, for c in {1, 1.5, 2 - ulp(1)}: sequential stagnation
///   (fp16 stops at 2048, bf16 at 256) and avg's rounded 1/N;
/// - "one large, rest half an ulp": rank 0 holds 1, every other rank ulp(1)/2 (exact ties that
///   round to even, so each one is lost in a ring that starts at rank 0);
/// - "one large, rest just under half an ulp": the same with the next smaller value;
/// - "random uniform [1,2)" and "random log-uniform [2^-8, 2^8]": `random_trials` vectors each.
/// The structured inputs are tried at every ring start (up to max_ring_starts), the random ones
/// at starts 0 and 1. Results that overflow or
/// underflow are not errors here: they are failure modes (see FailureModes).
struct WorstCase {
  double relative_error = 0;
  double computed = 0;
  double exact = 0;
  std::string family;              ///< which member of the family above
  std::string witness;             ///< the input in rank order, "[1, 0.001953125 x 7]"
  std::vector<double> witness_inputs;  ///< the input itself when N <= 64, else empty
  int ring_start = 0;              ///< where the ring fold started (ring only)
};

/// Systematic bias and spread over one documented gradient-like distribution. Per element e with
/// exact result r_e and computed o_e, the relative error is (o_e - r_e) / r_e; `bias` is its mean
/// weighted by r_e^2, i.e. sum r_e (o_e - r_e) / sum r_e^2 (the least-squares scale error: o = (1 +
/// bias) r fits best), and `spread` the weighted standard deviation around it,
/// sqrt(sum (o_e - (1 + bias) r_e)^2 / sum r_e^2). `bias_stderr` = spread / sqrt(n_eff) with
/// n_eff = (sum w)^2 / sum w^2, w = r_e^2. Elements with a non-finite output or r_e = 0 are left
/// out and counted.
/// Distributions (x_{e,i} is rank i's value of element e, m_e the element's mean gradient, z
/// standard normal from a Box-Muller transform over std::mt19937_64 with the listed seed):
/// - "consensus": m_e ~ N(0, 1) * 1e-3, x = m_e (1 + 0.25 z): ranks agree in sign;
/// - "noisy": m_e ~ N(0, 1) * 1e-3, x = m_e + 4 |m_e| z: per-rank noise dominates (small batches);
/// - "heavy-tailed": |m_e| log-uniform over [1e-7, 1e-1] with a random sign, x = m_e (1 + 0.25 z).
/// Inputs are rounded to the input dtype before use.
struct BiasFigure {
  std::string distribution;
  uint64_t seed = 0;
  int64_t samples = 0;             ///< elements used
  int64_t left_out = 0;            ///< elements left out (non-finite output or zero exact result)
  /// Of those left out, elements whose output is inf or NaN: typical gradients that overflow
  /// (a failure, numerics_findings), and where the first of them was lost ("cast",
  /// "pre-divide", "pre-multiply", "reduction" or "post-divide"; empty when none).
  int64_t nonfinite = 0;
  std::string nonfinite_stage;
  double bias = 0;
  double spread = 0;
  double bias_stderr = 0;
};

/// An input every rank holds that is lost or blown up although the exact result is within the
/// element type's range, with the step where it happened (the search scans powers of two, then
/// bisects over values of the input type).
struct UnderflowMode {
  bool found = false;
  double input = 0;    ///< the largest uniform input found whose result comes out as 0 while the
                       ///< exact result rounds to a nonzero value of the element type
  double exact = 0;    ///< what the result should be
  std::string stage;   ///< "cast", "pre-divide", "pre-multiply", "reduction" or "post-divide"
};
struct OverflowMode {
  bool found = false;
  double input = 0;    ///< the smallest uniform input found whose result overflows (inf, NaN, or
                       ///< saturated at the largest finite value) while the exact result fits
  double computed = 0;
  double exact = 0;
  bool exact_fits = false;  ///< always true when found (kept for the report)
  std::string stage;
};

/// Two fold orders NCCL may choose for the same data (ring starts, channel counts, algorithms)
/// that give different bits on one input.
struct OrderDependence {
  bool found = false;
  std::string order_a, order_b;
  double computed_a = 0, computed_b = 0;
  double exact = 0;
  std::string witness;
};

/// All figures of one configuration.
struct Figures {
  WorstCase worst;
  std::vector<BiasFigure> biases;   ///< one per distribution, in the order above
  double avg_scale_error = 0;       ///< N * T(1/N) - 1 for avg (avg_scale_error()), else 0
  UnderflowMode underflow;
  OverflowMode overflow;
  OrderDependence order;
  /// The bias figure with the largest |bias| (index into biases).
  const BiasFigure& worst_bias() const;
};

/// Bytes a rank sends per element: element bytes times the algorithm's factor: ring all_reduce
/// 2(N-1)/N, ring reduce_scatter (N-1)/N, tree all_reduce 2 (up and down the tree), nvls 1
/// (each rank's data crosses its link to the switch once; the result comes back by multicast);
/// reduce: ring (N-1)/N, tree 1. Estimates for bandwidth-bound messages; time scales with them.
double sent_bytes_per_element(const ReductionConfig& c);

/// The figures under one usual fix, and what it costs.
struct Fix {
  std::string name;                 ///< "fp32 reduction", "tree", "nvls", "pre/post divide", "sum then divide"
  ReductionConfig config;
  Figures figures;
  double sent_bytes_per_element = 0;
  double bytes_ratio = 1;           ///< sent bytes relative to the analysed configuration
  std::string note;                 ///< availability (NVLS needs NVSwitch and NCCL >= 2.27.3 ...)
};

/// The analysis of one configuration. For kAuto the figures are the worst over ring, tree and
/// nvls, metric by metric, and `algorithms` lists the three.
struct Analysis {
  ReductionConfig config;
  Figures figures;
  std::vector<Fix> fixes;
  double sent_bytes_per_element = 0;
  int64_t reduced_elements = 0;     ///< elements emulated in all (the work done)
};

/// PyTorch FSDP1's pre-divide factor, exactly its loop (torch/distributed/fsdp/_runtime_utils.py
/// and default_hooks.py, _get_gradient_predivide_factor): f = 1; while N % f == 0 and N / f > f:
/// f *= 2. So 1024 -> 32, 8 -> 4, 6 -> 4, 3 -> 2 (the last step may pass a non-divisor; the
/// post-divide is N / f, not always an integer). docs/facts/numerics.md paraphrases it as the largest power of
/// two with N % f == 0 and N / f > f, which gives 16 for 1024; the code is what runs.
int fsdp1_predivide_factor(int ranks);

/// The arithmetic of an FSDP gradient reduce-scatter over `ranks` with reduce dtype `reduce`
/// (docs/facts/numerics.md): FSDP2 reduces bf16 and fp32 with avg and fp16 with sum between a pre- and a
/// post-divide; FSDP1 always sums between the pre- and post-divide of fsdp1_predivide_factor. The
/// algorithm is NCCL's default for the caller to set (ring here).
ReductionConfig fsdp_reduce_scatter(DType reduce, int ranks, bool fsdp2);

/// The same for FSDP2 with `FSDPModule.set_gradient_divide_factor(factor)`, exactly
/// `_get_gradient_divide_factors` of torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
/// (pytorch/pytorch @ 010ae4a): bf16 and fp32 reduce with avg when `factor` equals the shard
/// group's size, else with premul_sum by 1/factor (NCCL multiplies each input by dtype(1/factor)
/// before summing); fp16 sums between a pre-divide p (p = 1, doubled while factor % p == 0 and
/// factor / p > p) and a post-divide factor / p. Requires ranks >= 1 and factor > 0.
ReductionConfig fsdp2_gradient_divide(DType reduce, int ranks, double factor);

/// Analyses `c` (which must pass validate(); std::invalid_argument otherwise). Runs in
/// O((samples * 3 + family) * N) element operations per algorithm and fix.
Analysis analyze(const ReductionConfig& c, const AnalysisOptions& opt = {});

/// Fills `a.fixes` (replacing any) for an analysis made without them, with `opt`'s effort
/// whatever its `fixes` flag: the same fixes and figures analyze() gives with fixes, without
/// analysing the configuration itself again. Adds the work to a.reduced_elements.
void add_fixes(Analysis& a, const AnalysisOptions& opt);

/// Tolerances a spec states (`numerics: {max_relative_error, max_bias}`, specs/numerics.md).
/// Defaults (when a spec states none): a quarter of the value lost on the worst adversarial input,
/// 0.1 % of systematic bias, which compounds over steps, and underflow judged for gradients of at
/// least 1e-12 (below that every avg underflows somewhere in the subnormals of bf16 and fp32,
/// which no training run meets).
struct Tolerances {
  double max_relative_error = 0.25;
  double max_bias = 1e-3;
  double min_gradient = 1e-12;      ///< an underflow of a smaller uniform input is not a finding
  /// An overflow that needs a larger uniform input is not a finding: loss-scaled fp16 gradients
  /// reach thousands, while bf16 and fp32 sums only overflow near 3e38 / N, where the fp32
  /// reference and every optimizer overflow too.
  double max_gradient = 1e9;
  /// Bitwise reproducibility asked for (`numerics.deterministic`, `numerics --deterministic`):
  /// a result that depends on the fold order NCCL may choose is a finding.
  bool deterministic = false;
  bool defaults = true;             ///< whether these are the defaults (the report says so)
};

/// A finding-like record for the numerics pass: kind "numerics"; `check` says which rule
/// ("max_relative_error", "max_bias", "underflow", "overflow"); `message` is one lower-case line;
/// `data` holds the figures (name, value) and `witness` the input in rank order.
struct NumericsFinding {
  std::string kind = "numerics";
  std::string check;
  std::string message;
  std::vector<std::pair<std::string, double>> data;
  std::string witness;
  std::vector<double> witness_inputs;
  std::vector<SourceLoc> locations;   ///< where the spec chose the dtype or op (check_reductions)
  std::vector<std::string> ops;       ///< the collectives with this arithmetic (check_reductions)
};

/// The findings of `a` under `tol`: worst relative error above max_relative_error, |bias| above
/// max_bias and four standard errors (for the distribution with the largest one), avg's scale error |N T(1/N) - 1| above
/// max_bias, an underflow to zero of a nonzero input of at least min_gradient, an overflow of a
/// result that fits, for a uniform input of at most max_gradient, and with `deterministic` a
/// result that two fold orders NCCL may choose (ring starts, channel counts, algorithms;
/// OrderDependence) give with different bits, the two orders as witnesses (NVIDIA/nccl#1055).
/// Gradient-like inputs (the bias distributions, |g| from 1e-7 to 1e-1) whose result comes out as
/// inf or NaN are an "overflow" finding whatever the exact result, with the count and the stage
/// where the first was lost: such results are failures, never left out of the verdict (a
/// premul_sum factor or divide factor the element type cannot hold makes every result inf).
/// Empty when the configuration holds.
std::vector<NumericsFinding> numerics_findings(const Analysis& a, const Tolerances& tol);

/// One reducing collective as a verify pass sees it: its arithmetic, where the spec chose its dtype
/// or op, and the op's label ("rs.unit3", "0F3") for the finding.
struct LocatedReduction {
  ReductionConfig config;
  SourceLoc where;
  std::string op;
};

/// The numerics pass over a program's reducing collectives: each distinct configuration is
/// analysed once (with `opt`; fixes are computed only for configurations with findings), and
/// every finding lists the locations and ops of all collectives that share it. `analyses` holds
/// one analysis per distinct configuration, in first-seen order. Cost: O(collectives · log) to
/// key them plus one analysis per distinct configuration, and the fixes of those with findings
/// (bench/numerics_bench.cc: inside verify on 10^6-op composed programs, 0.03 s with a 64-rank
/// shard group, 0.34 s with a 1024-rank one whose bf16 finding brings 4 fixes; README).
struct ReductionCheck {
  std::vector<Analysis> analyses;
  std::vector<NumericsFinding> findings;
  /// members[i]: the positions in `collectives` of the collectives analyses[i] stands for.
  std::vector<std::vector<size_t>> members;
};
ReductionCheck check_reductions(const std::vector<LocatedReduction>& collectives, const Tolerances& tol,
                                AnalysisOptions opt = {});

/// A one-line name of a configuration: "bf16 avg all_reduce over 1024 ranks, ring, 1 channel".
std::string describe(const ReductionConfig& c);

}  // namespace sc::numerics
