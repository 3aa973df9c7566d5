// Bit-exact rounding of real numbers to the floating-point formats NCCL reduces in.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sc::numerics {

/// An element type of a reduction. Each is a binary floating-point format with round to nearest
/// even (IEEE 754-2008 roundTiesToEven), gradual underflow (subnormals) and signed zeros.
/// - kFp32: IEEE binary32, 24 significand bits, max 3.4028235e38, min subnormal 2^-149.
/// - kBf16: bfloat16, 8 significand bits, fp32's exponent range (max 3.3895314e38).
/// - kFp16: IEEE binary16, 11 significand bits, max 65504, min normal 2^-14, min subnormal 2^-24.
/// - kFp8E4M3: OCP FP8 E4M3 ("e4m3fn", CUDA __nv_fp8_e4m3): 4 significand bits, max 448,
///   min subnormal 2^-9, no infinity (the all-ones pattern is NaN).
/// - kFp8E5M2: OCP FP8 E5M2 (__nv_fp8_e5m2): 3 significand bits, fp16's exponent range,
///   max 57344, infinities.
enum class DType { kFp32, kBf16, kFp16, kFp8E4M3, kFp8E5M2 };

/// What a rounding does with a value beyond the largest finite one.
/// kInfinity: IEEE overflow (to +-inf; for e4m3, which has no infinity, to NaN as CUDA's
/// __NV_NOSAT does). kSaturate: to +-max finite, infinities too (CUDA's __NV_SATFINITE, which
/// the __nv_fp8_* constructors NCCL uses apply; cuda_fp8.hpp).
enum class Overflow { kInfinity, kSaturate };

/// Constants of a format. `precision` counts significand bits including the hidden one;
/// `min_exponent` is the exponent of the smallest normal (2^min_exponent).
struct FormatInfo {
  const char* name;
  int bytes;
  int precision;
  int min_exponent;
  double max_finite;
  bool has_infinity;
};

/// The constants of each DType, indexed by its value. Largest finite value: (2 - 2^(1-p)) * 2^emax,
/// except e4m3, whose top binade loses its last pattern to NaN (1.75 * 2^8 = 448; OCP 8-bit
/// floating point specification, table 1).
inline constexpr FormatInfo kFormatInfo[] = {
    {"fp32", 4, 24, -126, 3.4028234663852886e38, true},
    {"bf16", 2, 8, -126, 3.3895313892515355e38, true},
    {"fp16", 2, 11, -14, 65504.0, true},
    {"fp8_e4m3", 1, 4, -6, 448.0, false},
    {"fp8_e5m2", 1, 3, -14, 57344.0, true},
};

inline const FormatInfo& info(DType t) { return kFormatInfo[static_cast<int>(t)]; }

/// "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2".
const char* dtype_name(DType t);

/// Parses a dtype as a user writes it: the names above, and the aliases float32/float/f32,
/// bfloat16, float16/half/f16, e4m3/fp8e4m3/float8_e4m3fn, e5m2/fp8e5m2/float8_e5m2
/// (case-insensitive). nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view text);

/// `x` rounded to `t`: round to nearest, ties to even, with subnormals, exactly as one IEEE
/// conversion from binary64 (no double rounding: the significand of `x` is scaled by a power of
/// two, which is exact, and rounded once with nearbyint under the default rounding mode).
/// Overflow follows `overflow`; NaN stays NaN; the sign of zero is kept.
/// The general case of round_to: every input (zeros, subnormals, infinities, NaN, overflow).
double round_to_general(DType t, double x, Overflow overflow);

inline double round_to(DType t, double x, Overflow overflow = Overflow::kInfinity) {
  // Inlined fast path for a normal binary64 whose result is finite: drop the low `shift` bits of
  // the significand with round to nearest even by adding just under half of the dropped weight
  // plus the lowest kept bit, then clearing; a carry out of the significand moves into the
  // exponent field, which is the correct next binade. Valid while the lowest kept bit is a stored
  // significand bit (shift <= 51); at 52 it would be the hidden bit, whose place holds the
  // exponent's low bit. Everything else goes to round_to_general.
  const FormatInfo& f = info(t);
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  if (biased != 0 && biased != 0x7FF) {
    const int lead = biased - 1023;
    const int shift = 52 - (f.precision - 1) + std::max(0, f.min_exponent - lead);
    if (shift <= 51) {
      const uint64_t dropped = (uint64_t{1} << shift) - 1;
      uint64_t r = bits + (dropped >> 1) + ((bits >> shift) & 1);
      r &= ~dropped;
      const double y = std::bit_cast<double>(r);
      if (std::fabs(y) <= f.max_finite) return y;
    }
  }
  return round_to_general(t, x, overflow);
}

/// The overflow rule NCCL's kernels apply when they store a value of type `t`: saturating for
/// both fp8 formats (the __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors use __NV_SATFINITE),
/// IEEE overflow to infinity for fp32, bf16 and fp16.
inline Overflow nccl_overflow(DType t) {
  return t == DType::kFp8E4M3 || t == DType::kFp8E5M2 ? Overflow::kSaturate : Overflow::kInfinity;
}

/// Unit in the last place of a finite value `x` of format `t` (the spacing at |x|; the smallest
/// subnormal spacing below the normal range). Example: ulp(kFp16, 1024) = 1, ulp(kBf16, 1024) = 8.
double ulp(DType t, double x);

/// Whether `x` is exactly a value of `t` (infinities count where `t` has them).
bool representable(DType t, double x);

}  // namespace sc::numerics
