#include "numerics/float_format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace sc::numerics {

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

double round_to_general(DType t, double x, Overflow overflow) {
  const FormatInfo& f = info(t);
  if (std::isnan(x) || x == 0) return x;
  if (std::isinf(x)) return overflowed(f, x, overflow);
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
