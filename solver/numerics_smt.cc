#include "solver/numerics_smt.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

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
// A QF_FPBV solver with a time limit (ms, at least 1), a random seed and, when rlimit > 0, a
// resource limit (clamped to what Z3's unsigned parameter holds).
z3::solver fp_solver(z3::context& ctx, unsigned timeout_ms, unsigned seed, uint64_t rlimit) {
  z3::solver solver(ctx, "QF_FPBV");
  z3::params p(ctx);
  p.set("timeout", std::max(1u, timeout_ms));
  p.set("random_seed", seed);
  if (rlimit) p.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(rlimit, UINT32_MAX)));
  solver.set(p);
  return solver;
}

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
    z3::solver solver = fp_solver(ctx_, timeout_ms, opt_.seed, opt_.rlimit);
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

// The ring's worst case by induction over the fold (bf16 only; see smt_worst_case in the header).
// After k additions of nonnegative inputs the computed prefix sum t (a value of the element type)
// and the exact prefix sum s satisfy the invariant I_k, with u = 2^-p and U = 2^p:
//   upper  s <= t (1 + k u)                    (lost: s - t <= k u / (1 + k u) s)
//   lower  s >= t (U + k) / (U + 2k)           (gained: t - s <= k u / (1 + k u) s)
//   binade s >= t - B_k(t), B_k(t) = u 2^(e-1) (k + min(M, k)) for t in [2^e, 2^(e+1)) with
//          mantissa field M (B_k(0) = 0).
// The binade bound is what makes the lower bound inductive: a round-up adds less than half the
// spacing of its result's binade, and each round-up inside a binade raises M by at least one, so
// a sum that lands on 2^e from below has gained at most half a spacing of the binade under it.
// I_0 holds (t = s = the first input). One step, t' = fl(t + x), s' = s + x: I_k must imply I_k+1
// for every s in I_k's interval, i.e. for its end points, so s is eliminated and each check is a
// question about two values of the element type and one rounded addition:
//   (up)    t (U + k) + x U <= t' (U + k + 1)
//   (lin)   max(t (U + k) / (U + 2k), t - B_k(t)) + x >= t' (U + k + 1) / (U + 2k + 2)
//   (bin)   max(t (U + k) / (U + 2k), t - B_k(t)) + x >= t' - B_k+1(t')
// All three are homogeneous of degree one in (t, x, t'), and scaling t and x by a power of two
// scales t' exactly while everything stays normal (bf16 has fp32's exponent range; the bound keeps
// every prefix sum in [2^-w, 2^(1 + log2 N))), so max(t, x) is taken in [1, 2). The other in
// {0} u [2^-p, 2) is checked by Z3; below 2^-p the addition returns the larger operand exactly (the
// smaller is under half its spacing), and then the three hold by hand: (up) reduces to x U <= t or
// t (U + k) <= x (k + 1), and (lin), (bin) follow from (U + k + 1) / (U + 2k + 2) <= (U + k) /
// (U + 2k), B_k+1 >= B_k and t' <= s'. Each violation is a Z3 query (the max turns (lin) and
// (bin) into conjunctions; (lin) is asked in four cases); all unsat means I_(N-1) holds for every
// input in the bound, so the relative error is at most (N - 1) / (U + N - 1) in both directions.
class StepEncoder {
 public:
  enum class Check { kUpper, kLinear, kBinade };

  // `part` (0 to 3) splits kLinear into cases that Z3 settles faster apart: t in [1, 2) or not,
  // times M < k or not (the two branches of B_k(t)).
  StepEncoder(int precision, int exponent_bits, int k, Check which, int part = -1)
      : p_(precision), eb_(exponent_bits), bias_((1 << (exponent_bits - 1)) - 1), k_(k), which_(which), part_(part),
        unit_exp_(-2 * precision - 1), wide_(static_cast<unsigned>(4 * precision + 10)) {}

  z3::check_result check(unsigned timeout_ms, const NumericsSmtOptions& opt) {
    ctx_.set_rounding_mode(z3::RNE);
    z3::sort fs = ctx_.fpa_sort(static_cast<unsigned>(eb_), static_cast<unsigned>(p_));
    const unsigned bits = static_cast<unsigned>(eb_ + p_);
    z3::expr tb = ctx_.bv_const("t", bits), xb = ctx_.bv_const("x", bits);
    z3::expr t(ctx_, Z3_mk_fpa_to_fp_bv(ctx_, tb, fs)), x(ctx_, Z3_mk_fpa_to_fp_bv(ctx_, xb, fs));
    z3::expr rb(ctx_, Z3_mk_fpa_to_ieee_bv(ctx_, z3::expr(ctx_, Z3_mk_fpa_add(ctx_, ctx_.fpa_rounding_mode(), t, x))));
    z3::solver solver = fp_solver(ctx_, timeout_ms, opt.seed, opt.rlimit);
    solver.add(in_range(tb) && in_range(xb));
    solver.add(exponent(tb) == ctx_.bv_val(bias_, eb_) || exponent(xb) == ctx_.bv_val(bias_, eb_));
    const int64_t U = int64_t{1} << p_, k = k_, k1 = k_ + 1;
    z3::expr T = units(tb), X = units(xb), R = units(rb);
    switch (which_) {
      case Check::kUpper: solver.add(z3::ugt(T * c(U + k) + X * c(U), R * c(U + k1))); break;
      case Check::kLinear: {  // both lower ends of I_k + x fall under t' (U + k + 1) / (U + 2k + 2)
        const int64_t d = (U + 2 * k) * (U + 2 * k1);
        solver.add(z3::ult(T * c((U + k) * (U + 2 * k1)) + X * c(d), R * c((U + k1) * (U + 2 * k))));
        solver.add(z3::ult((T + X) * c(d), R * c((U + k1) * (U + 2 * k)) + binade(tb, k_) * c(d)));
        if (part_ >= 0) {
          z3::expr top = exponent(tb) == ctx_.bv_val(bias_, eb_);
          z3::expr few = z3::ult(z3::zext(mantissa(tb), wide_ - (p_ - 1)), c(k));
          solver.add((part_ & 1) ? top : !top);
          solver.add((part_ & 2) ? few : !few);
        }
        break;
      }
      case Check::kBinade:  // both fall under t' - B_k+1(t')
        solver.add(z3::ult(T * c(U + k) + X * c(U + 2 * k) + binade(rb, k_ + 1) * c(U + 2 * k), R * c(U + 2 * k)));
        solver.add(z3::ult(T + X + binade(rb, k_ + 1), R + binade(tb, k_)));
        break;
    }
    z3::check_result r = solver.check();
    reason_ = r == z3::unknown ? solver.reason_unknown() : "";
    return r;
  }
  const std::string& reason() const { return reason_; }

 private:
  z3::expr c(int64_t v) { return ctx_.bv_val(static_cast<uint64_t>(v), wide_); }
  z3::expr exponent(const z3::expr& b) { return b.extract(eb_ + p_ - 2, p_ - 1); }
  z3::expr mantissa(const z3::expr& b) { return b.extract(p_ - 2, 0); }
  // +0, or normal in [2^-p, 2).
  z3::expr in_range(const z3::expr& b) {
    z3::expr e = exponent(b);
    return b.extract(eb_ + p_ - 1, eb_ + p_ - 1) == ctx_.bv_val(0, 1) &&
           (b == ctx_.bv_val(0, eb_ + p_) || (z3::uge(e, ctx_.bv_val(bias_ - p_, eb_)) && z3::ule(e, ctx_.bv_val(bias_, eb_))));
  }
  // The value of a nonnegative normal (or +0) in units of 2^unit_exp_: (2^(p-1) + M) << (e - p + 1 - unit).
  z3::expr units(const z3::expr& b) {
    z3::expr e = z3::zext(exponent(b), wide_ - eb_);
    z3::expr sig = z3::zext(z3::concat(ctx_.bv_val(1, 1), mantissa(b)), wide_ - p_);
    return z3::ite(exponent(b) == ctx_.bv_val(0, eb_), c(0), z3::shl(sig, e - c(bias_ + unit_exp_ + p_ - 1)));
  }
  // B_k(v) in units: (k + min(M, k)) << (e - 1 - p - unit).
  z3::expr binade(const z3::expr& b, int k) {
    z3::expr m = z3::zext(mantissa(b), wide_ - (p_ - 1));
    z3::expr count = c(k) + z3::ite(z3::ult(m, c(k)), m, c(k));
    z3::expr e = z3::zext(exponent(b), wide_ - eb_);
    return z3::ite(exponent(b) == ctx_.bv_val(0, eb_), c(0), z3::shl(count, e - c(bias_ + 1 + p_ + unit_exp_)));
  }

  z3::context ctx_;
  int p_, eb_, bias_, k_;
  Check which_;
  int part_;
  // Units of 2^(-2p-1): the spacing of inputs >= 2^-p is 2^(-2p+1) and B_k(t) for t >= 2^-p is a
  // multiple of u 2^(-p-1) = 2^(-2p-1), so every quantity is a whole number of units (a coarser unit
  // would round B_k of small t to 0 and make the hypothesis too strong). Sums below 4 need 2p + 3
  // bits; times constants below 2^(2p + 2) and added up, 4p + 10 bits never wrap.
  int unit_exp_;
  unsigned wide_;
  std::string reason_;
};

struct InductionOutcome {
  bool proven = false;
  int checks = 0;
  std::string detail;
};

// All 6 (N - 1) step checks, on as many threads as the machine has (each query owns its context).
InductionOutcome prove_ring_by_induction(const numerics::ReductionConfig& c, const NumericsSmtOptions& opt,
                                         double left_ms) {
  struct Job {
    int k;
    StepEncoder::Check which;
    int part;
    z3::check_result result = z3::unknown;
    std::string reason;
    bool ran = false;
  };
  std::vector<Job> jobs;
  for (int k = 0; k + 1 < c.ranks; ++k) {
    for (int part = 0; part < 4; ++part) jobs.push_back({k, StepEncoder::Check::kLinear, part});
    jobs.push_back({k, StepEncoder::Check::kUpper, -1});
    jobs.push_back({k, StepEncoder::Check::kBinade, -1});
  }
  // The linear checks are the slow ones: they go first.
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    return (a.which == StepEncoder::Check::kLinear) > (b.which == StepEncoder::Check::kLinear);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(left_ms);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (size_t i; !failed && (i = next++) < jobs.size();) {
      double ms = std::chrono::duration<double, std::milli>(deadline - std::chrono::steady_clock::now()).count();
      if (ms <= 0) {
        jobs[i].reason = "time limit reached";
        failed = true;
        break;
      }
      jobs[i].ran = true;
      try {
        StepEncoder enc(numerics::info(c.dtype).precision, 8, jobs[i].k, jobs[i].which, jobs[i].part);  // bf16: 8 exponent bits
        jobs[i].result = enc.check(static_cast<unsigned>(ms), opt);
        jobs[i].reason = enc.reason();
      } catch (const z3::exception& e) {
        jobs[i].reason = std::string("z3: ") + e.msg();
      }
      if (jobs[i].result != z3::unsat) failed = true;
    }
  };
  unsigned threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  InductionOutcome out;
  out.proven = true;
  for (const Job& j : jobs) {
    if (!j.ran) {  // not run: another check failed first
      out.proven = false;
      continue;
    }
    ++out.checks;
    if (j.result != z3::unsat) {
      out.proven = false;
      if (out.detail.empty()) {
        const char* name = j.which == StepEncoder::Check::kUpper ? "upper" : j.which == StepEncoder::Check::kLinear ? "lower" : "binade";
        out.detail = j.result == z3::sat ? fmt::format("the {} invariant is not inductive at step {}", name, j.k + 1)
                                         : fmt::format("step {} ({}): {}", j.k + 1, name, j.reason.empty() ? "unknown" : j.reason);
      }
    }
  }
  return out;
}

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
    // bf16 ring: when the start input attains (N - 1) / (2^p + N - 1), the induction over the fold
    // proves that nothing in the bound is worse (prove_ring_by_induction); else, or when a step
    // check does not come back unsat, the search below decides.
    const double U = std::ldexp(1.0, numerics::info(c.dtype).precision), n1 = c.ranks - 1;
    if (c.dtype == DType::kBf16 && c.algorithm == Algorithm::kRing && rb.err * (U + n1) == n1 * rb.exact) {
      InductionOutcome io = prove_ring_by_induction(c, opt, opt.timeout_ms - elapsed_ms());
      r.checks += io.checks;
      if (io.proven) {
        r.status = numerics::SmtStatus::kProven;
        r.detail = fmt::format("proven by induction over the fold ({} step checks, each unsat): after k additions the "
                               "error is at most k/({} + k) of the exact prefix sum, either way",
                               io.checks, U);
      } else {
        r.detail = io.detail;
      }
    }
    for (int round = 0; r.status != numerics::SmtStatus::kProven && round < opt.max_rounds; ++round) {
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
