// The arithmetic of one reducing collective (NCCL's order of operations), emulated bit-exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "numerics/float_format.h"
#include "support/expected.h"

namespace sc::numerics {

/// The reduction operator as the framework asks NCCL for it.
/// - kSum: ncclSum.
/// - kAvg: ncclAvg; on floating types NCCL pre-multiplies every input by 1/nRanks converted to the
///   element type and then sums (docs/facts/numerics.md; NCCL src/enqueue.cc hostToDevRedOp, reduce_kernel.h
///   FuncPreMulSum), so the result is scaled by N * T(1/N) instead of exactly 1.
/// - kPremulSum: ncclRedOpCreatePreMulSum: every input multiplied by `premul_factor` converted to
///   the element type, then summed.
/// - kMax: ncclMax (exact in every format: no rounding).
enum class ReduceOp { kSum, kAvg, kPremulSum, kMax };

/// The reduction algorithm and so the order of the additions (docs/facts/numerics.md, NCCL src/device/all_reduce.h).
/// - kRing: every chunk is a left fold in ring order that starts at a chunk-dependent rank, each
///   hop rounded to the element type.
/// - kTree: partial sums of similar weight: the balanced pairwise sum (adjacent pairs, then pairs
///   of pairs; an odd one out moves up a level), each addition rounded to the element type.
/// - kNvls: NVLink SHARP switch reduction (NCCL >= 2.27.3, CUDA >= 12.2): a left fold in the
///   accumulation type (fp32 for fp16 and bf16), rounded once to the element type.
/// - kAuto: NCCL picks one per call by message size and topology; analyses take the worst of the
///   three.
enum class Algorithm { kRing, kTree, kNvls, kAuto };

/// The collective whose arithmetic this is (changes only the bytes a rank sends).
enum class CollectiveKind { kAllReduce, kReduceScatter, kReduce };

/// One reducing collective's arithmetic, as a front-end would set it from its knobs.
/// Invariants (checked by validate()): ranks >= 1, channels >= 1, divide factors and a premul
/// factor finite and > 0, accum only for kNvls (ring and tree have no accumulation type: each hop
/// stores the element type).
struct ReductionConfig {
  DType dtype = DType::kBf16;              ///< element type of the collective (what is sent)
  std::optional<DType> input_dtype;        ///< type of the gradients before the framework casts
                                           ///< them to `dtype` (default: dtype, no cast)
  std::optional<DType> accum_dtype;        ///< NVLS accumulation type (default fp32)
  ReduceOp op = ReduceOp::kSum;
  double premul_factor = 1.0;              ///< kPremulSum's scalar
  Algorithm algorithm = Algorithm::kRing;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int ranks = 8;                           ///< N, ranks in the communicator
  int channels = 1;                        ///< NCCL channels (each reduces its own slice)
  double pre_divide = 1.0;                 ///< framework divides each input by this before
  double post_divide = 1.0;                ///< and the result by this after (FSDP's factors)
};

const char* op_name(ReduceOp op);          ///< "sum", "avg", "premul_sum", "max"
const char* algorithm_name(Algorithm a);   ///< "ring", "tree", "nvls", "auto"
const char* collective_name(CollectiveKind k);  ///< "all_reduce", "reduce_scatter", "reduce"
std::optional<ReduceOp> parse_op(std::string_view text);
/// Also accepts "switch" and "nvls_tree" for kNvls.
std::optional<Algorithm> parse_algorithm(std::string_view text);
std::optional<CollectiveKind> parse_collective(std::string_view text);

/// Empty when `c` satisfies the invariants, else what is wrong (one lower-case line).
std::string validate(const ReductionConfig& c);

/// The scalar every input is multiplied by inside NCCL: T(1/N) for kAvg, T(premul_factor) for
/// kPremulSum, 1 otherwise. For fp8 the scalar is held as fp16 (NCCL multiplies fp8 in half).
double nccl_scalar(const ReductionConfig& c);

/// Relative error of nccl_scalar for kAvg: N * T(1/N) - 1, computed exactly (the product of an
/// integer and a short significand is exact in binary64). Zero for other ops.
/// Example: bf16, N = 3: 3 * 0.333984375 - 1 = +0.001953125 (docs/facts/numerics.md).
double avg_scale_error(const ReductionConfig& c);

/// The exact value the framework means: op over `inputs` (as given, before any cast) with its
/// divide factors: sum * scale where scale is 1/(pre*post), 1/(N*pre*post) for avg,
/// factor/(pre*post) for premul_sum; max for kMax. Computed with compensated summation, so
/// its relative error is below 2^-100 for the sizes used (inputs of at most 2^20 values).
double exact_result(const ReductionConfig& c, std::span<const double> inputs);

/// Shewchuk's exactly rounded sum of `x` (the algorithm of Python's math.fsum: non-overlapping
/// partial sums), so the result is the exact sum correctly rounded to binary64; the plain sum when
/// a partial overflows.
double exact_sum(std::span<const double> x);

/// exact_result() given `sum` = exact_sum(inputs) (ignored for kMax, which reads `inputs`): lets
/// several configurations over the same inputs share one exact sum.
double exact_result_from_sum(const ReductionConfig& c, std::span<const double> inputs, double sum);

/// The element NCCL's rounding produces for one position whose values on ranks 0..N-1 are
/// `inputs` (size N). Steps, each rounded to the element type with NCCL's overflow rule:
/// cast to dtype (when input_dtype differs), framework pre-divide, NCCL's pre-multiply (avg,
/// premul_sum), the algorithm's fold, framework post-divide. `ring_start` is the rank where the
/// ring's fold of this element's chunk starts (ignored by tree and nvls).
/// The sum of two elements is NCCL's: fp32 a+b; bf16 __float2bfloat16(float(a)+float(b)), which
/// equals one rounding because 24 >= 2*8+2 (double rounding is innocuous, Figueroa 1995); fp16
/// __hadd; fp8 __nv_fp8(__hadd(half(a), half(b))), i.e. rounded to fp16, then saturated to fp8.
/// kAuto is not a fold: callers pick ring, tree or nvls (std::invalid_argument otherwise).
/// When `stages` is given it receives rank 0's value after each step, so a caller can tell where a
/// value was lost.
struct StageValues {
  double cast = 0;           ///< rank 0's input in the element type
  double pre_divided = 0;    ///< after the framework's pre-divide
  double premultiplied = 0;  ///< after NCCL's pre-multiply (avg, premul_sum)
  double folded = 0;         ///< the reduction's result before the post-divide
  double result = 0;         ///< after the post-divide (the return value)
};
double reduce_element(const ReductionConfig& c, std::span<const double> inputs, int ring_start = 0,
                      StageValues* stages = nullptr);

/// One NCCL addition a + b of two values of type t (see reduce_element).
inline double add(DType t, double a, double b) {
  if (t == DType::kFp8E4M3 || t == DType::kFp8E5M2)
    return round_to(t, round_to(DType::kFp16, a + b), Overflow::kSaturate);
  return round_to(t, a + b, nccl_overflow(t));
}
/// One NCCL multiplication a * b rounded to t (fp8 through fp16, like add).
inline double mul(DType t, double a, double b) {
  if (t == DType::kFp8E4M3 || t == DType::kFp8E5M2)
    return round_to(t, round_to(DType::kFp16, a * b), Overflow::kSaturate);
  return round_to(t, a * b, nccl_overflow(t));
}

/// Left fold x[start] + x[start+1] + ... (indices mod size), rounded after every addition.
double ring_fold(DType t, std::span<const double> x, int start);
/// Balanced pairwise sum of x, rounded after every addition.
double tree_fold(DType t, std::span<const double> x);

/// The rank where the ring fold of element `index` of a buffer of `elements` starts: the buffer is
/// split evenly over `channels`, each channel's slice into N chunks, and chunk k's fold starts
/// at rank (k + 1) mod N so that it ends at rank k, its owner after the reduce-scatter phase
/// (NCCL all_reduce.h runRing). The exact start depends on NCCL's version and ring order, which
/// is why analyses range over every start.
int ring_start_rank(int ranks, int channels, int64_t elements, int64_t index);

}  // namespace sc::numerics
