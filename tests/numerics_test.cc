// Tests of exact rounding, NCCL's fold orders and the reduction error analysis (src/numerics/).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "catch.h"
#include "numerics/analysis.h"
#include "numerics/float_format.h"
#include "numerics/reduction.h"

using namespace sc::numerics;

namespace {
double bf16_by_bits(float f) {  // fp32 -> bf16 round to nearest even on the bit pattern
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  u &= 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}
ReductionConfig config(DType t, ReduceOp op, int ranks, Algorithm a = Algorithm::kRing) {
  ReductionConfig c;
  c.dtype = t;
  c.op = op;
  c.ranks = ranks;
  c.algorithm = a;
  return c;
}
}  // namespace

// docs/facts/numerics.md (values computed exactly and checked with Z3's floating-point theory).
TEST_CASE("rounding reproduces the hand-checked values of docs/facts/numerics.md", "[numerics]") {
  CHECK(add(DType::kFp16, 2048, 1) == 2048);
  CHECK(add(DType::kFp16, 2048, 3) == 2052);
  CHECK(add(DType::kFp16, 1025, 0.5) == 1026);
  CHECK(add(DType::kBf16, 256, 1) == 256);
  CHECK(add(DType::kBf16, 1, std::ldexp(1.0, -8)) == 1);
  CHECK(round_to(DType::kBf16, 1.0 / 3) == 0.333984375);
  CHECK(round_to(DType::kFp16, 1.0 / 3) == 0.333251953125);
  CHECK(ulp(DType::kFp16, 1024) == 1);
  CHECK(ulp(DType::kBf16, 1024) == 8);
  CHECK(ulp(DType::kFp16, 2048) == 2);
  CHECK(ulp(DType::kBf16, 2048) == 16);
  CHECK(round_to(DType::kFp16, 65504) == 65504);
  CHECK(std::isinf(round_to(DType::kFp16, 65520)));
  CHECK(round_to(DType::kFp16, 65519.99) == 65504);
  CHECK(round_to(DType::kFp16, std::ldexp(1.0, -24)) == std::ldexp(1.0, -24));
  CHECK(round_to(DType::kFp16, std::ldexp(1.0, -25)) == 0);  // a tie between 0 and 2^-24: to even
  CHECK(round_to(DType::kFp16, std::ldexp(3.0, -26)) == std::ldexp(1.0, -24));
  CHECK(std::signbit(round_to(DType::kFp16, -std::ldexp(1.0, -26))));
}

TEST_CASE("fp8 formats round with subnormals and saturate where NCCL does", "[numerics]") {
  CHECK(info(DType::kFp8E4M3).max_finite == 448);
  CHECK(round_to(DType::kFp8E4M3, 464) == 448);  // the tie max + ulp/2 goes to the even 448
  CHECK(std::isnan(round_to(DType::kFp8E4M3, 465)));  // no infinity in e4m3: NaN (__NV_NOSAT)
  CHECK(round_to(DType::kFp8E4M3, 465, Overflow::kSaturate) == 448);
  CHECK(round_to(DType::kFp8E4M3, INFINITY, Overflow::kSaturate) == 448);
  CHECK(round_to(DType::kFp8E4M3, std::ldexp(1.0, -9)) == std::ldexp(1.0, -9));
  CHECK(round_to(DType::kFp8E4M3, std::ldexp(1.0, -10)) == 0);
  CHECK(round_to(DType::kFp8E4M3, std::ldexp(3.0, -11)) == std::ldexp(1.0, -9));
  CHECK(round_to(DType::kFp8E4M3, 1.0625) == 1);      // 1 + 2^-4 ties to the even 1
  CHECK(round_to(DType::kFp8E4M3, 1.1875) == 1.25);   // 1.125 + 2^-4 ties to the even 1.25
  CHECK(round_to(DType::kFp8E5M2, 57344) == 57344);
  CHECK(round_to(DType::kFp8E5M2, 61439) == 57344);
  CHECK(std::isinf(round_to(DType::kFp8E5M2, 61440)));
  CHECK(round_to(DType::kFp8E5M2, 61440, Overflow::kSaturate) == 57344);
  CHECK(round_to(DType::kFp8E5M2, std::ldexp(1.0, -16)) == std::ldexp(1.0, -16));
  CHECK(round_to(DType::kFp8E5M2, 1.125) == 1);
  // NCCL's fp8 sum goes through half and saturates: 448 + 448 stays 448, 57344 + 57344 stays 57344.
  CHECK(add(DType::kFp8E4M3, 448, 448) == 448);
  CHECK(add(DType::kFp8E5M2, 57344, 57344) == 57344);
  // Every e4m3 value round-trips; every midpoint goes to the neighbour with an even last bit.
  std::vector<double> values;
  for (int e = -6; e <= 8; ++e)
    for (int m = 0; m < 8; ++m) values.push_back(std::ldexp(1.0 + m / 8.0, e));
  for (int m = 1; m < 8; ++m) values.insert(values.begin() + (m - 1), std::ldexp(m / 8.0, -6));
  values.pop_back();  // 1.875 * 2^8 is NaN's pattern
  for (size_t i = 0; i < values.size(); ++i) {
    CHECK(round_to(DType::kFp8E4M3, values[i]) == values[i]);
    if (i + 1 < values.size()) {
      double mid = (values[i] + values[i + 1]) / 2;
      bool lower_even = (i % 2) == 1;  // index 0 is 2^-9 (pattern 001, odd)
      CHECK(round_to(DType::kFp8E4M3, mid) == (lower_even ? values[i] : values[i + 1]));
    }
  }
}

TEST_CASE("fp32, bf16 and fp16 rounding agree with the compiler's conversions bit for bit", "[numerics]") {
  std::mt19937_64 gen(7);
  for (int i = 0; i < 200000; ++i) {
    uint64_t b = gen();
    double x;
    std::memcpy(&x, &b, 8);
    if (!std::isfinite(x)) continue;
    int ignored;
    x = std::ldexp(std::frexp(x, &ignored), static_cast<int>(gen() % 320) - 160);
    float f = static_cast<float>(x);
    double r32 = round_to(DType::kFp32, x);
    REQUIRE((r32 == static_cast<double>(f) || (std::isinf(r32) && std::isinf(f))));
    double rb = round_to(DType::kBf16, f);
    double tb = bf16_by_bits(f);
    REQUIRE((rb == tb || (std::isinf(rb) && std::isinf(tb))));
#ifdef __FLT16_MAX__
    _Float16 h = static_cast<_Float16>(x);
    double r16 = round_to(DType::kFp16, x);
    REQUIRE((r16 == static_cast<double>(h) || (std::isinf(r16) && std::isinf(static_cast<double>(h)))));
#endif
  }
}

TEST_CASE("ring, tree and sequential folds give docs/facts/numerics.md's sums", "[numerics]") {
  std::vector<double> big_first{2048, 1, 1, 1, 1, 1, 1, 1};
  std::vector<double> big_last{1, 1, 1, 1, 1, 1, 1, 2048};
  CHECK(ring_fold(DType::kFp16, big_first, 0) == 2048);
  CHECK(ring_fold(DType::kFp16, big_last, 0) == 2056);  // exact 2055
  CHECK(ring_fold(DType::kFp16, big_first, 1) == 2056);  // the same data, the fold starting at rank 1
  CHECK(tree_fold(DType::kFp16, big_first) == 2054);
  CHECK(ring_fold(DType::kFp16, std::vector<double>(4096, 1.0), 0) == 2048);
  CHECK(tree_fold(DType::kFp16, std::vector<double>(4096, 1.0)) == 4096);
  CHECK(ring_fold(DType::kBf16, std::vector<double>(10000, 1.0), 0) == 256);
  CHECK(tree_fold(DType::kBf16, std::vector<double>(10000, 1.0)) == 9984);
  CHECK(round_to(DType::kBf16, 10000) == 9984);
  std::vector<double> tenth(10000, round_to(DType::kFp16, 0.1));
  CHECK(ring_fold(DType::kFp16, tenth, 0) == 256);
  CHECK(tree_fold(DType::kFp16, tenth) == 1000);
  // A sequential sum of ones stops where the spacing reaches 2: fp16 at 2048, bf16 at 256.
  double s16 = 0, sb = 0;
  for (int i = 0; i < 5000; ++i) {
    s16 = add(DType::kFp16, s16, 1);
    sb = add(DType::kBf16, sb, 1);
  }
  CHECK(s16 == 2048);
  CHECK(sb == 256);
  // 1000 updates w = bf16(w + 1e-4) from 1 leave w = 1.
  double w = 1;
  for (int i = 0; i < 1000; ++i) w = round_to(DType::kBf16, w + 1e-4);
  CHECK(w == 1);
}

TEST_CASE("NVLS accumulates in fp32 and rounds once", "[numerics]") {
  auto c = config(DType::kFp16, ReduceOp::kSum, 8, Algorithm::kNvls);
  CHECK(reduce_element(c, std::vector<double>{2048, 1, 1, 1, 1, 1, 1, 1}) == 2056);  // fp16(2055), ties to even
  c.ranks = 4096;
  CHECK(reduce_element(c, std::vector<double>(4096, 1.0)) == 4096);
}

// docs/facts/numerics.md: bf16(1/N) relative error.
TEST_CASE("avg's scale error is N * T(1/N) - 1 exactly", "[numerics]") {
  auto delta = [](int n) { return avg_scale_error(config(DType::kBf16, ReduceOp::kAvg, n)); };
  for (int n : {3, 6, 12, 24, 48, 96}) CHECK(delta(n) == Approx(0.001953125).epsilon(1e-12));
  for (int n : {5, 100}) CHECK(delta(n) == Approx(0.0009765625).epsilon(1e-12));
  CHECK(delta(7) == Approx(-0.001953125).epsilon(1e-12));
  CHECK(delta(1000) == Approx(-0.00054931640625).epsilon(1e-12));
  CHECK(delta(1024) == 0);
  CHECK(nccl_scalar(config(DType::kBf16, ReduceOp::kAvg, 3)) == 0.333984375);
}

TEST_CASE("the measured bias of bf16 avg is the scale error of bf16(1/N)", "[numerics]") {
  // With a single rounding (nvls) the sum adds no bias of its own, so the measured multiplicative
  // bias over gradient-like inputs is delta, within its standard error.
  AnalysisOptions opt;
  opt.fixes = false;
  opt.samples = 2048;
  opt.random_trials = 2;
  for (int n : {3, 6, 7, 12, 24, 96, 1000, 1024}) {
    INFO("N = " << n);
    auto a = analyze(config(DType::kBf16, ReduceOp::kAvg, n, Algorithm::kNvls), opt);
    double delta = avg_scale_error(a.config);
    CHECK(a.figures.avg_scale_error == delta);
    const BiasFigure& b = a.figures.biases.front();  // consensus gradients
    CHECK(b.samples == 2048);
    CHECK(std::fabs(b.bias - delta) <= 4 * b.bias_stderr + 1e-5);
  }
  // With few hops a ring adds little: the bias is still delta.
  for (int n : {3, 7}) {
    auto a = analyze(config(DType::kBf16, ReduceOp::kAvg, n), opt);
    const BiasFigure& b = a.figures.biases.front();
    CHECK(std::fabs(b.bias - avg_scale_error(a.config)) <= 4 * b.bias_stderr + 1e-5);
  }
}

TEST_CASE("fp16 avg's pre-multiply by 1/N underflows small gradients to zero, with the witness", "[numerics]") {
  // docs/facts/numerics.md: fp16 avg over 1024 ranks of g = fp16(2e-5) gives 0.
  auto c = config(DType::kFp16, ReduceOp::kAvg, 1024);
  double g = round_to(DType::kFp16, 2e-5);
  CHECK(reduce_element(c, std::vector<double>(1024, g)) == 0);
  AnalysisOptions opt;
  opt.samples = 256;
  opt.random_trials = 2;
  auto a = analyze(c, opt);
  const UnderflowMode& u = a.figures.underflow;
  REQUIRE(u.found);
  CHECK(u.input == std::ldexp(1.0, -15));  // g * 2^-10 = 2^-25 ties to 0; anything larger survives
  CHECK(u.input >= g);
  CHECK(u.stage == "pre-multiply");
  CHECK(reduce_element(c, std::vector<double>(1024, u.input)) == 0);
  CHECK(reduce_element(c, std::vector<double>(1024, round_to(DType::kFp16, u.input * 1.001))) != 0);
  auto findings = numerics_findings(a, Tolerances{});
  auto it = std::find_if(findings.begin(), findings.end(), [](const auto& f) { return f.check == "underflow"; });
  REQUIRE(it != findings.end());
  CHECK(it->kind == "numerics");
  CHECK(it->witness == "[3.051757812e-05 x 1024]");
  // The fixes: fp32 reduction and sum-then-divide keep it; pre/post divide moves the threshold down.
  for (const Fix& f : a.fixes) {
    INFO(f.name);
    if (f.name == "fp32 reduction" || f.name == "sum then divide") CHECK_FALSE(f.figures.underflow.found);
    if (f.name == "pre/post divide") CHECK(f.figures.underflow.input < u.input);
    if (f.name == "fp32 reduction") CHECK(f.bytes_ratio == 2);
  }
}

TEST_CASE("fp16 avg's underflow threshold is the largest gradient whose pre-multiply rounds to zero", "[numerics]") {
  // Every positive fp16 g held by every rank, reduced as NCCL's avg: g * fp16(1/N) rounded to fp16,
  // then summed. The largest g whose product rounds to 0 while the exact average (g) is a nonzero
  // fp16 value, found by enumerating all 31,743 positive finite fp16 values with exact rational
  // arithmetic (Python fractions, independent of this code):
  //   N = 3: 2^-24 (fp16(1/3) = 0.333251953125; even the smallest subnormal is lost)
  //   N = 7: 3 * 2^-24; N = 96: 3 * 2^-20; N = 1000: 499 * 2^-24; N = 1024: 2^-15.
  const std::pair<int, double> expected[] = {{3, std::ldexp(1.0, -24)},
                                             {7, std::ldexp(3.0, -24)},
                                             {96, std::ldexp(3.0, -20)},
                                             {1000, std::ldexp(499.0, -24)},
                                             {1024, std::ldexp(1.0, -15)}};
  AnalysisOptions opt;
  opt.fixes = false;
  opt.samples = 16;
  opt.random_trials = 1;
  for (auto [n, threshold] : expected) {
    INFO("N = " << n);
    auto c = config(DType::kFp16, ReduceOp::kAvg, n);
    auto a = analyze(c, opt);
    const UnderflowMode& u = a.figures.underflow;
    REQUIRE(u.found);
    CHECK(u.input == threshold);
    CHECK(u.stage == "pre-multiply");
    CHECK(u.exact == Approx(threshold).epsilon(1e-12));  // the average of N copies of g is g
    // The witness is lost, the next fp16 value above it is not.
    CHECK(reduce_element(c, std::vector<double>(n, u.input)) == 0);
    CHECK(reduce_element(c, std::vector<double>(n, u.input + ulp(DType::kFp16, u.input))) != 0);
    auto findings = numerics_findings(a, Tolerances{});
    auto it = std::find_if(findings.begin(), findings.end(), [](const auto& f) { return f.check == "underflow"; });
    REQUIRE(it != findings.end());
    CHECK(it->witness == fmt::format("[{:.10g} x {}]", threshold, n));
  }
  // fp32 and bf16 keep these gradients: their range reaches 2^-149 and 2^-133.
  for (DType t : {DType::kFp32, DType::kBf16}) {
    auto a = analyze(config(t, ReduceOp::kAvg, 1000), opt);
    CHECK((!a.figures.underflow.found || a.figures.underflow.input < 1e-30));
  }
}

TEST_CASE("an fp16 sum that overflows although the average fits is an overflow finding", "[numerics]") {
  auto c = config(DType::kFp16, ReduceOp::kSum, 1024);
  c.post_divide = 1024;  // sum then divide
  AnalysisOptions opt;
  opt.samples = 64;
  opt.random_trials = 1;
  opt.fixes = false;
  auto a = analyze(c, opt);
  REQUIRE(a.figures.overflow.found);
  CHECK(a.figures.overflow.exact_fits);
  CHECK(std::isinf(a.figures.overflow.computed));
  CHECK(a.figures.overflow.input <= 64);
  CHECK(a.figures.overflow.stage == "reduction");
}

TEST_CASE("the worst adversarial input of a bf16 ring sum of 8 is one large value and seven ties", "[numerics]") {
  AnalysisOptions opt;
  opt.fixes = false;
  opt.samples = 64;
  auto a = analyze(config(DType::kBf16, ReduceOp::kSum, 8), opt);
  CHECK(a.figures.worst.relative_error == Approx(7.0 / 263).epsilon(1e-12));  // 7 * 2^-8 / (1 + 7 * 2^-8)
  CHECK(a.figures.worst.witness == "[1, 0.00390625 x 7]");
  CHECK(a.figures.worst.computed == 1);
  REQUIRE(a.figures.order.found);  // the same data from another start, or by tree, gives other bits
  CHECK(a.figures.order.computed_a != a.figures.order.computed_b);
}

TEST_CASE("a bf16 ring avg over 1024 ranks fails a 1e-3 tolerance and fp32 holds", "[numerics]") {
  AnalysisOptions opt;
  opt.samples = 128;
  opt.random_trials = 2;
  opt.fixes = false;
  Tolerances tol{1e-3, 1e-3, 1e-12, false};
  auto bf16 = analyze(config(DType::kBf16, ReduceOp::kAvg, 1024), opt);
  auto findings = numerics_findings(bf16, tol);
  REQUIRE_FALSE(findings.empty());
  CHECK(findings.front().check == "max_relative_error");
  CHECK(findings.front().message.find("bf16 avg all_reduce over 1024 ranks, ring") == 0);
  CHECK(bf16.figures.worst.relative_error > 0.5);  // the ring stalls: bf16 stops adding at 256 ulps
  CHECK(bf16.figures.worst_bias().bias < -0.1);
  auto fp32 = analyze(config(DType::kFp32, ReduceOp::kAvg, 1024), opt);
  CHECK(numerics_findings(fp32, tol).empty());
}

TEST_CASE("channels move a ring's start and so the bits", "[numerics]") {
  CHECK(ring_start_rank(4, 1, 16, 0) == 1);
  CHECK(ring_start_rank(4, 1, 16, 15) == 0);
  CHECK(ring_start_rank(4, 2, 16, 8) == 1);
  auto c = config(DType::kFp16, ReduceOp::kSum, 8);
  c.channels = 2;
  AnalysisOptions opt;
  opt.fixes = false;
  opt.samples = 16;
  opt.random_trials = 1;
  auto a = analyze(c, opt);
  REQUIRE(a.figures.order.found);
}

TEST_CASE("bad configurations are refused with a reason", "[numerics]") {
  auto c = config(DType::kBf16, ReduceOp::kSum, 0);
  CHECK(validate(c) == "ranks must be at least 1 (got 0)");
  c.ranks = 8;
  c.accum_dtype = DType::kFp32;
  CHECK(validate(c).find("ring has no accumulation type") == 0);
  c.accum_dtype.reset();
  c.pre_divide = 0;
  CHECK(validate(c) == "pre_divide must be a finite number > 0 (got 0)");
  CHECK_THROWS_AS(analyze(c), std::invalid_argument);
  CHECK(parse_dtype("BFloat16") == DType::kBf16);
  CHECK_FALSE(parse_dtype("fp12"));
  // PyTorch's loop (docs/facts/numerics.md paraphrases it as "largest power of two f with N % f == 0 and
  // N/f > f", which would give 16 for 1024; the code gives 32).
  CHECK(fsdp1_predivide_factor(1024) == 32);
  CHECK(fsdp1_predivide_factor(8) == 4);
  CHECK(fsdp1_predivide_factor(6) == 4);
  CHECK(fsdp1_predivide_factor(3) == 2);
  CHECK(fsdp1_predivide_factor(1) == 1);
}

TEST_CASE("an FSDP2 bf16 reduce-scatter over 1024 ranks fails a 1e-3 tolerance and fp32 holds", "[numerics]") {
  AnalysisOptions opt;
  opt.samples = 128;
  opt.random_trials = 2;
  Tolerances tol{1e-3, 1e-3, 1e-12, false};
  auto bf16 = analyze(fsdp_reduce_scatter(DType::kBf16, 1024, true), opt);
  CHECK(bf16.config.op == ReduceOp::kAvg);
  auto findings = numerics_findings(bf16, tol);
  REQUIRE(findings.size() >= 2);
  CHECK(findings[0].check == "max_relative_error");
  CHECK(findings[0].witness == "[1, 0.00390625 x 1023]");
  CHECK(findings[1].check == "max_bias");
  // The report's fix table carries the fp32 side: it holds, at twice the bytes.
  REQUIRE(bf16.fixes.front().name == "fp32 reduction");
  CHECK(numerics_findings(Analysis{bf16.fixes.front().config, bf16.fixes.front().figures, {}, 0, 0}, tol).empty());
  CHECK(bf16.fixes.front().bytes_ratio == 2);
  auto fp32 = analyze(fsdp_reduce_scatter(DType::kFp32, 1024, true), opt);
  CHECK(numerics_findings(fp32, tol).empty());
  // FSDP2 fp16: sum between divides of 32 and 32.
  auto fp16 = fsdp_reduce_scatter(DType::kFp16, 1024, true);
  CHECK(fp16.op == ReduceOp::kSum);
  CHECK(fp16.pre_divide == 32);
  CHECK(fp16.post_divide == 32);
}

TEST_CASE("fp8 sums round through half and stall like the wider formats", "[numerics]") {
  // By hand: 1.5 added 16 times in e4m3 (spacing 1 in [8, 16), 2 in [16, 32)); the ties at 10.5,
  // 13.5 and 15.5 go to the even neighbours 10, 14 and 16, and above 16 every 1.5 becomes 2.
  CHECK(ring_fold(DType::kFp8E4M3, std::vector<double>(16, 1.5), 0) == 28);
  CHECK(tree_fold(DType::kFp8E4M3, std::vector<double>(16, 1.5)) == 24);
  // 448 is e4m3's largest value: a sum beyond it saturates instead of becoming NaN.
  CHECK(ring_fold(DType::kFp8E4M3, std::vector<double>(4, 256), 0) == 448);
}

TEST_CASE("auto takes the worst of ring, tree and nvls metric by metric", "[numerics]") {
  AnalysisOptions opt;
  opt.fixes = false;
  opt.samples = 64;
  opt.random_trials = 2;
  auto c = config(DType::kBf16, ReduceOp::kSum, 8, Algorithm::kAuto);
  auto a = analyze(c, opt);
  auto ring = analyze(config(DType::kBf16, ReduceOp::kSum, 8), opt);
  CHECK(a.figures.worst.relative_error == ring.figures.worst.relative_error);
  CHECK(a.figures.worst.family.find("ring: ") == 0);
  CHECK(a.figures.order.found);
  CHECK(describe(c) == "bf16 sum all_reduce over 8 ranks, auto, 1 channel");
}

TEST_CASE("the numerics pass analyses each distinct configuration once and locates every collective", "[numerics]") {
  std::vector<LocatedReduction> rs;
  auto bf16 = fsdp_reduce_scatter(DType::kBf16, 1024, true);
  auto fp32 = fsdp_reduce_scatter(DType::kFp32, 1024, true);
  for (int unit = 0; unit < 3; ++unit) {
    rs.push_back({bf16, sc::SourceLoc{0, 7, 3}, "rs.unit" + std::to_string(unit)});
    rs.push_back({fp32, sc::SourceLoc{0, 9, 3}, "rs.fp32.unit" + std::to_string(unit)});
  }
  AnalysisOptions opt;
  opt.samples = 64;
  opt.random_trials = 1;
  auto check = check_reductions(rs, Tolerances{1e-3, 1e-3, 1e-12, false}, opt);
  REQUIRE(check.analyses.size() == 2);
  CHECK(check.analyses[0].config.dtype == DType::kBf16);
  CHECK_FALSE(check.analyses[0].fixes.empty());  // it has findings, so its fixes are shown
  CHECK(check.analyses[1].fixes.empty());        // fp32 holds: no fixes computed
  REQUIRE_FALSE(check.findings.empty());
  for (const auto& f : check.findings) {
    CHECK(f.ops == std::vector<std::string>{"rs.unit0", "rs.unit1", "rs.unit2"});
    REQUIRE(f.locations.size() == 3);
    CHECK(f.locations[0].line == 7);
  }
}

TEST_CASE("a bf16 sum overflows only near its range's end, which is not a finding, fp16 overflows at thousands", "[numerics]") {
  // DeepSpeed ZeRO-3 in bf16 sums and divides after (docs/facts/config-keys.md#deepspeed-batch-and-precision): the intermediate sum of 8
  // overflows only for gradients near 3.4e38 / 8, where the fp32 reference overflows too.
  AnalysisOptions opt;
  opt.samples = 16;
  opt.random_trials = 1;
  opt.fixes = false;
  auto c = config(DType::kBf16, ReduceOp::kSum, 8);
  c.post_divide = 8;
  auto a = analyze(c, opt);
  REQUIRE(a.figures.overflow.found);
  CHECK(a.figures.overflow.input > 1e37);
  for (const auto& f : numerics_findings(a, Tolerances{})) CHECK(f.check != "overflow");
  auto h = config(DType::kFp16, ReduceOp::kSum, 8);
  h.post_divide = 8;
  auto b = analyze(h, opt);
  REQUIRE(b.figures.overflow.found);
  CHECK(b.figures.overflow.input <= 65504.0 / 8 + 32);
  bool found = false;
  for (const auto& f : numerics_findings(b, Tolerances{})) found |= f.check == "overflow";
  CHECK(found);
}

TEST_CASE("fixes added to an analysis are the fixes analyze computes, without a second analysis", "[numerics]") {
  AnalysisOptions opt;
  opt.samples = 64;
  opt.random_trials = 2;
  auto c = config(DType::kBf16, ReduceOp::kAvg, 24);
  Analysis whole = analyze(c, opt);
  opt.fixes = false;
  Analysis base = analyze(c, opt);
  const int64_t base_work = base.reduced_elements;
  add_fixes(base, opt);  // opt.fixes is false: add_fixes computes them all the same
  REQUIRE(base.fixes.size() == whole.fixes.size());
  REQUIRE(base.fixes.size() == 5);  // fp32 reduction, tree, nvls, pre/post divide, sum then divide
  for (size_t i = 0; i < base.fixes.size(); ++i) {
    INFO(whole.fixes[i].name);
    CHECK(base.fixes[i].name == whole.fixes[i].name);
    CHECK(base.fixes[i].figures.worst.relative_error == whole.fixes[i].figures.worst.relative_error);
    CHECK(base.fixes[i].figures.worst_bias().bias == whole.fixes[i].figures.worst_bias().bias);
    CHECK(base.fixes[i].bytes_ratio == whole.fixes[i].bytes_ratio);
  }
  CHECK(base.figures.worst.relative_error == whole.figures.worst.relative_error);
  CHECK(base.reduced_elements == whole.reduced_elements);  // the configuration was not analysed twice
  CHECK(base.reduced_elements > base_work);
}

TEST_CASE("fixes and the algorithms of auto share one draw of the bias samples and get the figures each gives alone",
          "[numerics]") {
  // analyze() draws each distribution's samples once for all fixes (and once for the three
  // algorithms of kAuto) and reduces them under each; every figure must equal the analysis of
  // that configuration by itself, bit for bit.
  AnalysisOptions opt;
  opt.samples = 64;
  opt.random_trials = 2;
  auto c = config(DType::kBf16, ReduceOp::kAvg, 24);
  c.channels = 2;
  Analysis whole = analyze(c, opt);
  REQUIRE(whole.fixes.size() == 5);  // fp32 reduction, tree, nvls, pre/post divide, sum then divide
  opt.fixes = false;
  for (const Fix& fix : whole.fixes) {
    INFO(fix.name);
    Analysis alone = analyze(fix.config, opt);
    REQUIRE(alone.figures.biases.size() == 3);
    for (size_t k = 0; k < 3; ++k) {
      CHECK(fix.figures.biases[k].bias == alone.figures.biases[k].bias);
      CHECK(fix.figures.biases[k].spread == alone.figures.biases[k].spread);
      CHECK(fix.figures.biases[k].samples == alone.figures.biases[k].samples);
    }
    CHECK(fix.figures.worst.relative_error == alone.figures.worst.relative_error);
  }
  // kAuto: its worst bias is the worst of ring, tree and nvls analysed one by one.
  ReductionConfig a = c;
  a.algorithm = Algorithm::kAuto;
  Analysis autod = analyze(a, opt);
  double worst = 0;
  for (Algorithm alg : {Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls}) {
    ReductionConfig v = c;
    v.algorithm = alg;
    for (const BiasFigure& b : analyze(v, opt).figures.biases) worst = std::max(worst, std::fabs(b.bias));
  }
  CHECK(std::fabs(autod.figures.worst_bias().bias) == worst);
  CHECK(std::fabs(autod.figures.worst_bias().bias) > 0);
}
