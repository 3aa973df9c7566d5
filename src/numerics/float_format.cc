#include "numerics/float_format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace sc::numerics {

namespace {

// Largest finite value: (2 - 2^(1-p)) * 2^emax, except e4m3 whose top binade loses its last
// pattern to NaN (1.75 * 2^8 = 448; OCP 8-bit floating point specification, table 1).
const FormatInfo kFormats[] = {
    {"fp32", 4, 24, -126, 3.4028234663852886e38, true},
    {"bf16", 2, 8, -126, 3.3895313892515355e38, true},
    {"fp16", 2, 11, -14, 65504.0, true},
    {"fp8_e4m3", 1, 4, -6, 448.0, false},
    {"fp8_e5m2", 1, 3, -14, 57344.0, true},
};

}  // namespace

const FormatInfo& info(DType t) { return kFormats[static_cast<int>(t)]; }

const char* dtype_name(DType t) { return info(t).name; }

std::optional<DType> parse_dtype(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "fp32" || s == "float32" || s == "float" || s == "f32") return DType::kFp32;
  if (s == "bf16" || s == "bfloat16") return DType::kBf16;
  if (s == "fp16" || s == "float16" || s == "half" || s == "f16") return DType::kFp16;
  if (s == "fp8_e4m3" || s == "e4m3" || s == "fp8e4m3" || s == "float8_e4m3fn" || s == "fp8-e4m3")
    return DType::kFp8E4M3;
  if (s == "fp8_e5m2" || s == "e5m2" || s == "fp8e5m2" || s == "float8_e5m2" || s == "fp8-e5m2")
    return DType::kFp8E5M2;
  return std::nullopt;
}

Overflow nccl_overflow(DType t) {
  return t == DType::kFp8E4M3 || t == DType::kFp8E5M2 ? Overflow::kSaturate : Overflow::kInfinity;
}

namespace {

double overflowed(const FormatInfo& f, double x, Overflow overflow) {
  if (overflow == Overflow::kSaturate) return std::copysign(f.max_finite, x);
  if (f.has_infinity) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return std::numeric_limits<double>::quiet_NaN();
}

// Exponent of the leading bit of a finite nonzero x: |x| in [2^e, 2^(e+1)).
int leading_exponent(double x) {
  int e = 0;
  std::frexp(x, &e);
  return e - 1;
}

}  // namespace

double round_to(DType t, double x, Overflow overflow) {
  const FormatInfo& f = info(t);
  if (std::isnan(x) || x == 0) return x;
  if (std::isinf(x)) return overflowed(f, x, overflow);
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  if (biased != 0) {
    // Fast path: x is a normal binary64. Drop the low `shift` bits of its significand with round
    // to nearest even by adding just under half of the dropped weight plus the lowest kept bit,
    // then clearing; a carry out of the significand moves into the exponent field, which is the
    // correct next binade. Valid while the lowest kept bit is a stored significand bit
    // (shift <= 51); at 52 it would be the hidden bit, whose place holds the exponent's low bit.
    const int lead = biased - 1023;
    const int shift = 52 - (f.precision - 1) + std::max(0, f.min_exponent - lead);
    if (shift <= 51) {
      const uint64_t dropped = (uint64_t{1} << shift) - 1;
      uint64_t r = bits + (dropped >> 1) + ((bits >> shift) & 1);
      r &= ~dropped;
      double y;
      std::memcpy(&y, &r, sizeof y);
      if (std::fabs(y) > f.max_finite) return overflowed(f, x, overflow);
      return y;
    }
  }
  // The quantum (spacing) at x in the target format: 2^(max(e, emin) - p + 1). Scaling by a power
  // of two is exact in binary64 over every range used here, so nearbyint rounds exactly once.
  int lead = std::max(leading_exponent(x), f.min_exponent);
  int quantum_exp = lead - (f.precision - 1);
  double y = std::ldexp(std::nearbyint(std::ldexp(x, -quantum_exp)), quantum_exp);
  // A value that rounds past the largest finite one overflows (IEEE 754 §7.4: the threshold is
  // max + half an ulp, which round to nearest even carries to the next binade).
  if (std::fabs(y) > f.max_finite) return overflowed(f, x, overflow);
  if (y == 0) return std::copysign(0.0, x);
  return y;
}

double ulp(DType t, double x) {
  const FormatInfo& f = info(t);
  int lead = x == 0 || !std::isfinite(x) ? f.min_exponent : std::max(leading_exponent(x), f.min_exponent);
  return std::ldexp(1.0, lead - (f.precision - 1));
}

bool representable(DType t, double x) {
  if (std::isnan(x)) return false;
  if (std::isinf(x)) return info(t).has_infinity;
  return round_to(t, x) == x;
}

}  // namespace sc::numerics
