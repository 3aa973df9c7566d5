#include "solver/numerics_smt.h"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <z3++.h>

#include "numerics/analysis.h"

namespace sc {

using numerics::Algorithm;
using numerics::DType;

namespace {

struct Window {
  int lo = 0, hi = 0;  // inputs are 0 or in [2^lo, 2^hi)
};

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Relative error is scale invariant in the normal range, so the largest input is taken in [1, 2)
// and the others 0 or at least 2^-binades.
// At least p + 1 binades, so the tie family (one large value, the rest half an ulp) lies inside.
Window window_for(int binades, int precision) { return {-std::max(binades, precision + 1), 1}; }

// In units of u = 2^(lo - p + 1) (the spacing at the bottom of the window) every input, the
// exact sum and the computed sum are integers below 2^(hi + ceil(log2 N) - lo + p): that many bits.
unsigned sum_bits(const numerics::FormatInfo& f, Window w, int ranks) {
  return static_cast<unsigned>(w.hi + ceil_log2(ranks) - (w.lo - f.precision + 1)) + 1;
}

// One encoder per query: owns its context as its first member (never copied or moved).
// The fold runs in Z3's FloatingPoint sort of the element type; the exact side runs on unsigned
// bit-vectors in units of u (each input scaled by 1/u in a sort with the element's precision and
// fp32's exponent range, which is exact, then converted by fp.to_ubv, also exact). Products with
// the candidate's constants are taken in twice the width, so nothing wraps.
class Encoder {
 public:
  Encoder(const numerics::ReductionConfig& c, const NumericsSmtOptions& opt)
      : c_(c), info_(numerics::info(c.dtype)), window_(window_for(opt.window_binades, info_.precision)),
        unit_exp_(window_.lo - info_.precision + 1), width_(sum_bits(info_, window_, c.ranks)),
        elem_(ctx_.fpa_sort(c.dtype == DType::kBf16 ? 8 : 5, info_.precision)),
        scaled_(ctx_.fpa_sort(8, info_.precision)), base_(ctx_), opt_(opt) {
    ctx_.set_rounding_mode(z3::RNE);
    build();
  }

  // Is there an input whose relative error exceeds err / exact (both multiples of u)?
  // A fresh QF_FPBV solver per check: Z3 then bit-blasts the whole query, which is orders of
  // magnitude faster here than the incremental solver that push/pop would select.
  z3::check_result worse_than(double err, double exact, unsigned timeout_ms) {
    z3::solver solver(ctx_, "QF_FPBV");
    z3::params p(ctx_);
    p.set("timeout", std::max(1u, timeout_ms));
    p.set("random_seed", opt_.seed);
    if (opt_.rlimit) p.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(opt_.rlimit, UINT32_MAX)));
    solver.set(p);
    solver.add(base_);
    if (err == 0) {
      solver.add(z3::ugt(abs_err_, ctx_.bv_val(0, width_)));
    } else {
      // err / exact reduced to lowest terms: the tie family's 7/263 keeps both multipliers small.
      uint64_t num = static_cast<uint64_t>(std::ldexp(err, -unit_exp_));
      uint64_t den = static_cast<uint64_t>(std::ldexp(exact, -unit_exp_));
      uint64_t g = std::gcd(num, den);
      num /= g;
      den /= g;
      const unsigned wide = 2 * width_;
      z3::expr lhs = z3::zext(abs_err_, width_) * ctx_.bv_val(den, wide);
      z3::expr rhs = z3::zext(exact_, width_) * ctx_.bv_val(num, wide);
      solver.add(z3::ugt(lhs, rhs));
    }
    z3::check_result r = solver.check();
    if (r == z3::sat) read_model(solver.get_model());
    reason_ = r == z3::unknown ? solver.reason_unknown() : "";
    return r;
  }

  const std::vector<double>& model_inputs() const { return model_; }
  const std::string& reason() const { return reason_; }
  std::string bound() const {
    return fmt::format("{} {} values, the largest in [1, 2), each other +0 or in [2^{}, 2) (any input whose "
                       "nonzero values span less than 2^{}, scaled)", c_.ranks, numerics::dtype_name(c_.dtype),
                       window_.lo, -window_.lo);
  }

 private:
  z3::expr elem_num(double v) { return z3::expr(ctx_, Z3_mk_fpa_numeral_double(ctx_, v, elem_)); }
  z3::expr fp_geq(const z3::expr& a, const z3::expr& b) { return z3::expr(ctx_, Z3_mk_fpa_geq(ctx_, a, b)); }
  z3::expr fp_lt(const z3::expr& a, const z3::expr& b) { return z3::expr(ctx_, Z3_mk_fpa_lt(ctx_, a, b)); }
  z3::expr is_zero(const z3::expr& a) { return z3::expr(ctx_, Z3_mk_fpa_is_zero(ctx_, a)); }
  z3::expr fp_add(const z3::expr& a, const z3::expr& b) {
    return z3::expr(ctx_, Z3_mk_fpa_add(ctx_, ctx_.fpa_rounding_mode(), a, b));
  }
  // x / u as an unsigned bit-vector: exact for values of the window (and for sums below 2^(hi+log N)).
  z3::expr to_units(const z3::expr& x) {
    z3::expr wide = z3::fpa_to_fpa(x, scaled_);
    z3::expr scale(ctx_, Z3_mk_fpa_numeral_double(ctx_, std::ldexp(1.0, -unit_exp_), scaled_));
    z3::expr scaled(ctx_, Z3_mk_fpa_mul(ctx_, ctx_.fpa_rounding_mode(), wide, scale));
    return z3::expr(ctx_, Z3_mk_fpa_to_ubv(ctx_, ctx_.fpa_rounding_mode(), scaled, width_));
  }

  z3::expr fold(const std::vector<z3::expr>& x) {
    if (c_.algorithm == Algorithm::kTree) {
      std::vector<z3::expr> level = x;
      while (level.size() > 1) {
        std::vector<z3::expr> next;
        for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(fp_add(level[i], level[i + 1]));
        if (level.size() % 2 == 1) next.push_back(level.back());
        level = next;
      }
      return level.front();
    }
    z3::expr s = x.front();
    for (size_t i = 1; i < x.size(); ++i) s = fp_add(s, x[i]);
    return s;
  }

  void build() {
    z3::expr lo = elem_num(std::ldexp(1.0, window_.lo)), hi = elem_num(std::ldexp(1.0, window_.hi));
    z3::expr exact = ctx_.bv_val(0, width_);
    for (int i = 0; i < c_.ranks; ++i) {
      z3::expr x = ctx_.constant(fmt::format("x{}", i).c_str(), elem_);
      xs_.push_back(x);
      z3::expr positive_zero = z3::expr(ctx_, Z3_mk_fpa_is_positive(ctx_, x)) && is_zero(x);
      base_.push_back(positive_zero || (fp_geq(x, lo) && fp_lt(x, hi)));
      exact = exact + to_units(x);
    }
    z3::expr_vector any_top(ctx_);
    for (const auto& x : xs_) any_top.push_back(fp_geq(x, elem_num(1.0)));
    base_.push_back(z3::mk_or(any_top));
    exact_ = exact;
    z3::expr computed = to_units(fold(xs_));
    abs_err_ = z3::ite(z3::uge(exact_, computed), exact_ - computed, computed - exact_);
  }

  void read_model(const z3::model& m) {
    model_.clear();
    for (const auto& x : xs_) {
      z3::expr r = m.eval(z3::expr(ctx_, Z3_mk_fpa_to_real(ctx_, x)), true);
      model_.push_back(r.as_double());
    }
  }

  z3::context ctx_;
  numerics::ReductionConfig c_;
  const numerics::FormatInfo& info_;
  Window window_;
  int unit_exp_;
  unsigned width_;
  z3::sort elem_, scaled_;
  z3::expr_vector base_;
  NumericsSmtOptions opt_;
  std::vector<z3::expr> xs_;
  z3::expr exact_{ctx_}, abs_err_{ctx_};
  std::vector<double> model_;
  std::string reason_;
};

// Relative error of `x` (fold order) as emulated by numerics::, with the exact sum and output.
struct Replay {
  double computed, exact, err;
};
Replay replay(const numerics::ReductionConfig& c, const std::vector<double>& x) {
  double computed = numerics::reduce_element(c, x, 0);
  double exact = numerics::exact_result(c, x);
  return {computed, exact, std::fabs(exact - computed)};
}

}  // namespace

numerics::ProofResult smt_worst_case(const numerics::ReductionConfig& c, const NumericsSmtOptions& opt) {
  numerics::ProofResult r;
  auto start = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  if (c.op != numerics::ReduceOp::kSum || (c.algorithm != Algorithm::kRing && c.algorithm != Algorithm::kTree) ||
      (c.dtype != DType::kBf16 && c.dtype != DType::kFp16) || c.ranks < 2 || c.ranks > 16 ||
      c.pre_divide != 1 || c.post_divide != 1 || (c.input_dtype && *c.input_dtype != c.dtype)) {
    r.status = numerics::SmtStatus::kUnsupported;
    r.detail = "the Z3 worst case covers sum over ring or tree in bf16 or fp16 for 2 to 16 ranks, without divides or casts";
    return r;
  }
  // Start from the worst input of the adversarial family, as the fold meets it, scaled so that its
  // largest value lies in [1, 2) (exact, and the relative error does not change); one that does
  // not fit the window is replaced by the tie family's member, which always does.
  numerics::AnalysisOptions aopt;
  aopt.fixes = false;
  aopt.samples = 1;
  aopt.random_trials = 8;
  numerics::Analysis a = numerics::analyze(c, aopt);
  std::vector<double> best = a.figures.worst.witness_inputs;
  std::rotate(best.begin(), best.begin() + a.figures.worst.ring_start, best.end());
  int top = 0;
  std::frexp(*std::max_element(best.begin(), best.end()), &top);
  for (double& v : best) v = std::ldexp(v, 1 - top);
  const Window w = window_for(opt.window_binades, numerics::info(c.dtype).precision);
  if (std::any_of(best.begin(), best.end(), [&](double v) { return v != 0 && v < std::ldexp(1.0, w.lo); })) {
    best.assign(c.ranks, numerics::ulp(c.dtype, 1.0) / 2);
    best.front() = 1.0;
  }
  Replay rb = replay(c, best);
  try {
    Encoder enc(c, opt);
    r.bound = enc.bound();
    for (int round = 0; round < opt.max_rounds; ++round) {
      double left_ms = opt.timeout_ms - elapsed_ms();
      if (left_ms <= 0) {
        r.detail = "time limit reached";
        break;
      }
      ++r.checks;
      z3::check_result cr = enc.worse_than(rb.err, rb.exact, static_cast<unsigned>(left_ms));
      if (cr == z3::unsat) {
        r.status = numerics::SmtStatus::kProven;
        break;
      }
      if (cr == z3::unknown) {
        r.detail = "z3: " + enc.reason();
        break;
      }
      Replay w = replay(c, enc.model_inputs());
      if (!(w.err * rb.exact > rb.err * w.exact)) {  // the model must replay as worse
        r.detail = "a Z3 model did not replay as worse through the emulation";
        break;
      }
      best = enc.model_inputs();
      rb = w;
      r.status = numerics::SmtStatus::kWitness;
      r.detail = "round limit reached";
    }
  } catch (const z3::exception& e) {
    r.status = numerics::SmtStatus::kInconclusive;
    r.detail = std::string("z3: ") + e.msg();
  }
  if (r.status != numerics::SmtStatus::kProven && r.status != numerics::SmtStatus::kWitness) r.status = numerics::SmtStatus::kInconclusive;
  if (r.status == numerics::SmtStatus::kWitness && r.detail.empty()) r.detail = "round limit reached";
  r.witness = best;
  r.computed = rb.computed;
  r.exact = rb.exact;
  r.relative_error = rb.exact != 0 ? rb.err / rb.exact : 0;
  r.seconds = elapsed_ms() / 1000;
  return r;
}

}  // namespace sc
