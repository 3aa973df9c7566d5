#include "numerics/analysis.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <cmath>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "support/concurrent.h"

namespace sc::numerics {

namespace {

/// Folds (ranks x samples x configurations) from which figures_for draws its bias samples on
/// two threads: about 30 ms of work on one core, where a thread costs well under a millisecond.
constexpr int64_t kParallelFolds = int64_t{1} << 20;


DType input_type(const ReductionConfig& c) { return c.input_dtype.value_or(c.dtype); }

// Standard normal draws by Box-Muller over mt19937_64: the same numbers with every standard library.
class Normal {
 public:
  explicit Normal(uint64_t seed) : gen_(seed) {}
  double uniform() { return (static_cast<double>(gen_() >> 11) + 0.5) * 0x1p-53; }
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform(), u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2 * M_PI * u2);
  }

 private:
  std::mt19937_64 gen_;
  double spare_ = 0;
  bool has_spare_ = false;
};

std::string number(double v) { return fmt::format("{:.10g}", v); }

// "[1, 0.001953125 x 7]": runs of equal values collapsed; long lists cut after 8 runs.
std::string witness_text(const std::vector<double>& x) {
  std::string out = "[";
  size_t runs = 0;
  for (size_t i = 0; i < x.size();) {
    size_t j = i;
    while (j < x.size() && x[j] == x[i]) ++j;
    if (runs == 8) {
      out += fmt::format(", ... ({} more values)", x.size() - i);
      break;
    }
    if (runs) out += ", ";
    out += number(x[i]);
    if (j - i > 1) out += fmt::format(" x {}", j - i);
    ++runs;
    i = j;
  }
  return out + "]";
}

std::vector<int> ring_starts(const ReductionConfig& c, const AnalysisOptions& opt) {
  if (c.algorithm != Algorithm::kRing || c.op == ReduceOp::kMax) return {0};
  int n = std::min(c.ranks, std::max(1, opt.max_ring_starts));
  std::vector<int> s(n);
  for (int i = 0; i < n; ++i) s[i] = i;
  return s;
}

bool saturating(DType t) { return nccl_overflow(t) == Overflow::kSaturate; }

bool overflowed(const ReductionConfig& c, double computed, double exact) {
  if (!std::isfinite(computed)) return true;
  return saturating(c.dtype) && std::fabs(computed) == info(c.dtype).max_finite &&
         std::fabs(exact) > info(c.dtype).max_finite;
}

struct Candidate {
  std::string family;
  std::vector<double> x;
  bool every_start = true;  // structured inputs at every ring start; random ones at two
};

std::vector<Candidate> adversarial_family(const ReductionConfig& c, const AnalysisOptions& opt) {
  const int n = c.ranks;
  const DType in = input_type(c);
  std::vector<Candidate> out;
  for (double v : {1.0, 1.5, 2.0 - ulp(c.dtype, 1.0)})
    out.push_back({fmt::format("uniform {}", number(round_to(in, v))), std::vector<double>(n, round_to(in, v))});
  const double half = ulp(c.dtype, 1.0) / 2;
  for (auto [name, h] : {std::pair{"one large, rest half an ulp", half},
                         std::pair{"one large, rest just under half an ulp", half - ulp(c.dtype, half / 2) / 2}}) {
    std::vector<double> x(n, round_to(in, h));
    x[0] = 1.0;
    out.push_back({name, x});
  }
  Normal rng(opt.seed + 100);
  for (int t = 0; t < opt.random_trials; ++t) {
    std::vector<double> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      a[i] = round_to(in, 1.0 + rng.uniform());
      b[i] = round_to(in, std::exp2(-8.0 + 16.0 * rng.uniform()));
    }
    out.push_back({fmt::format("random uniform [1,2) #{} (seed {})", t, opt.seed + 100), a, false});
    out.push_back({fmt::format("random log-uniform [2^-8, 2^8] #{} (seed {})", t, opt.seed + 100), b, false});
  }
  return out;
}

WorstCase worst_case(const ReductionConfig& c, const AnalysisOptions& opt, const std::vector<Candidate>& family,
                     int64_t& work) {
  WorstCase w;
  w.relative_error = -1;
  for (const auto& cand : family) {
    double exact = exact_result(c, cand.x);
    if (exact == 0 || !std::isfinite(exact)) continue;
    std::vector<int> starts = ring_starts(c, opt);
    if (!cand.every_start && starts.size() > 2) starts.resize(2);
    // Every rotation of a uniform input is the same input: one start gives the fold of all.
    if (std::all_of(cand.x.begin(), cand.x.end(), [&](double v) { return v == cand.x.front(); })) starts.resize(1);
    for (int s : starts) {
      double out = reduce_element(c, cand.x, s);
      work += c.ranks;
      if (overflowed(c, out, exact) || (out == 0 && exact != 0)) continue;  // failure modes, not errors
      double rel = std::fabs(out - exact) / std::fabs(exact);
      if (rel > w.relative_error) {
        w.relative_error = rel;
        w.computed = out;
        w.exact = exact;
        w.family = cand.family;
        w.ring_start = s;
        // Show the input in the order the fold met it: rank s first.
        std::vector<double> ordered(cand.x.size());
        for (size_t i = 0; i < ordered.size(); ++i) ordered[i] = cand.x[(s + i) % ordered.size()];
        w.witness = witness_text(ordered);
        if (s != 0) w.witness += fmt::format(" (ring order from rank {})", s);
        w.witness_inputs = c.ranks <= 64 ? cand.x : std::vector<double>{};
      }
    }
  }
  if (w.relative_error < 0) w.relative_error = 0;
  return w;
}

// The first stage of rank 0's path through the reduction whose value is `bad`.
template <typename Bad>
std::string lost_stage(const StageValues& st, Bad bad) {
  if (bad(st.cast)) return "cast";
  if (bad(st.pre_divided)) return "pre-divide";
  if (bad(st.premultiplied)) return "pre-multiply";
  if (bad(st.folded)) return "reduction";
  return "post-divide";
}

// The bias figures of distribution `which` for every configuration in `cs`, which share the
// ranks and the input type: each element's inputs are drawn (and their exact sum taken) once and
// reduced under every configuration, so k configurations cost one draw and k folds per element
// instead of k draws. Each figure is what a run over its configuration alone gives.
std::vector<BiasFigure> bias_figures(std::span<const ReductionConfig> cs, const AnalysisOptions& opt, int which,
                                     int64_t& work) {
  static const char* kNames[] = {"consensus", "noisy", "heavy-tailed"};
  if (cs.empty()) return {};
  Normal rng(opt.seed + which);
  const DType in = input_type(cs.front());
  const int n = cs.front().ranks;
  struct Sums {
    double rd = 0, r2 = 0;
    std::vector<std::pair<double, double>> kept;  // (exact, computed)
    int64_t left_out = 0;
    int64_t nonfinite = 0;
    std::string nonfinite_stage;
  };
  std::vector<Sums> sums(cs.size());
  for (Sums& s : sums) s.kept.reserve(opt.samples);
  std::vector<double> x(n);
  for (int64_t e = 0; e < opt.samples; ++e) {
    double m = 0;
    if (which == 2) {
      m = std::pow(10.0, -7.0 + 6.0 * rng.uniform()) * (rng.uniform() < 0.5 ? -1 : 1);
    } else {
      m = rng() * 1e-3;
    }
    for (int i = 0; i < n; ++i) x[i] = round_to(in, which == 1 ? m + 4 * std::fabs(m) * rng() : m * (1 + 0.25 * rng()));
    const double sum = exact_sum(x);
    for (size_t k = 0; k < cs.size(); ++k) {
      const ReductionConfig& c = cs[k];
      double exact = exact_result_from_sum(c, x, sum);
      const int start = ring_start_rank(n, c.channels, opt.samples, e);
      double out = reduce_element(c, x, start);
      work += n;
      Sums& s = sums[k];
      if (!std::isfinite(out) && s.nonfinite++ == 0) {  // where the first one was lost
        StageValues st;
        reduce_element(c, x, start, &st);
        s.nonfinite_stage = lost_stage(st, [](double v) { return !std::isfinite(v); });
      }
      if (!std::isfinite(out) || exact == 0) {
        ++s.left_out;
        continue;
      }
      s.kept.emplace_back(exact, out);
      s.rd += exact * (out - exact);
      s.r2 += exact * exact;
    }
  }
  std::vector<BiasFigure> out(cs.size());
  for (size_t k = 0; k < cs.size(); ++k) {
    BiasFigure& b = out[k];
    const Sums& s = sums[k];
    b.distribution = kNames[which];
    b.seed = opt.seed + which;
    b.left_out = s.left_out;
    b.nonfinite = s.nonfinite;
    b.nonfinite_stage = s.nonfinite_stage;
    b.samples = static_cast<int64_t>(s.kept.size());
    if (s.r2 == 0) continue;
    b.bias = s.rd / s.r2;
    double resid = 0, sum_w = 0, sum_w2 = 0;
    for (auto [r, o] : s.kept) {
      double d = o - (1 + b.bias) * r;
      resid += d * d;
      double w = r * r;
      sum_w += w;
      sum_w2 += w * w;
    }
    b.spread = std::sqrt(resid / s.r2);
    double n_eff = sum_w * sum_w / sum_w2;
    b.bias_stderr = b.spread / std::sqrt(n_eff);
  }
  return out;
}

UnderflowMode underflow_mode(const ReductionConfig& c, int64_t& work) {
  UnderflowMode u;
  if (c.op == ReduceOp::kMax && c.pre_divide == 1 && c.post_divide == 1) return u;
  const DType in = input_type(c);
  std::vector<double> x(c.ranks);
  // A failure: the result comes out as 0 although the exact result, rounded to the element
  // type, is not 0 (a result below the format's range is not the algorithm's fault).
  auto zero_out = [&](double g) {
    std::fill(x.begin(), x.end(), g);
    work += c.ranks;
    return reduce_element(c, x, 0) == 0 && round_to(c.dtype, exact_result(c, x)) != 0;
  };
  const int top = static_cast<int>(std::floor(std::log2(info(in).max_finite)));
  const int bottom = info(in).min_exponent - info(in).precision + 1;
  for (int k = top; k >= bottom; --k) {
    double g = std::ldexp(1.0, k);
    if (!zero_out(g)) continue;
    // Largest zero-producing value between g and 2g, by bisection over values of the input type.
    double lo = g, hi = std::ldexp(1.0, k + 1);
    for (int it = 0; it < 64; ++it) {
      double mid = round_to(in, (lo + hi) / 2);
      if (mid <= lo || mid >= hi) break;
      (zero_out(mid) ? lo : hi) = mid;
    }
    u.found = true;
    u.input = lo;
    std::fill(x.begin(), x.end(), lo);
    StageValues st;
    reduce_element(c, x, 0, &st);
    u.exact = exact_result(c, x);
    u.stage = lost_stage(st, [](double v) { return v == 0.0; });
    u.exact = exact_result(c, x);
    break;
  }
  return u;
}

OverflowMode overflow_mode(const ReductionConfig& c, int64_t& work) {
  OverflowMode o;
  const DType in = input_type(c);
  std::vector<double> x(c.ranks);
  // A failure: the result overflows although the exact result is finite in the element type
  // (an intermediate overflowed; a result beyond the format's range is not the algorithm's fault).
  auto over = [&](double g) {
    std::fill(x.begin(), x.end(), g);
    work += c.ranks;
    double exact = exact_result(c, x);
    return overflowed(c, reduce_element(c, x, 0), exact) && std::fabs(exact) <= info(c.dtype).max_finite;
  };
  const int top = static_cast<int>(std::floor(std::log2(info(in).max_finite)));
  for (int k = info(in).min_exponent; k <= top; ++k) {
    double g = std::ldexp(1.0, k);
    if (!over(g)) continue;
    double lo = std::ldexp(1.0, k - 1), hi = g;  // lo fits, hi overflows
    for (int it = 0; it < 64; ++it) {
      double mid = round_to(in, (lo + hi) / 2);
      if (mid <= lo || mid >= hi) break;
      (over(mid) ? hi : lo) = mid;
    }
    o.found = true;
    o.input = hi;
    std::fill(x.begin(), x.end(), hi);
    StageValues st;
    o.computed = reduce_element(c, x, 0, &st);
    o.exact = exact_result(c, x);
    o.exact_fits = std::fabs(o.exact) <= info(c.dtype).max_finite;
    const double max = info(c.dtype).max_finite;
    o.stage = lost_stage(st, [max](double v) { return !std::isfinite(v) || std::fabs(v) >= max; });
    break;
  }
  return o;
}

struct Variant {
  std::string name;
  ReductionConfig config;
  int start = 0;
};

OrderDependence order_dependence(const ReductionConfig& c, const std::vector<Candidate>& family, int64_t& work) {
  OrderDependence d;
  if (c.op == ReduceOp::kMax || c.ranks < 2) return d;
  std::vector<Variant> variants;
  auto with = [&](Algorithm a) {
    ReductionConfig v = c;
    v.algorithm = a;
    if (a != Algorithm::kNvls) v.accum_dtype.reset();
    return v;
  };
  for (int s : {0, 1, c.ranks - 1})
    if (s < c.ranks) variants.push_back({fmt::format("ring from rank {}", s), with(Algorithm::kRing), s});
  if (c.channels > 1) {
    // The same element under 1 and under c.channels channels: a buffer of 4 chunks per rank and
    // channel, and its first element whose chunk (so ring start) moves with the channel count.
    int64_t elements = int64_t{c.ranks} * c.channels * 4;
    for (int64_t e = 0; e < elements; ++e) {
      int a = ring_start_rank(c.ranks, 1, elements, e), b = ring_start_rank(c.ranks, c.channels, elements, e);
      if (a == b) continue;
      variants.push_back({fmt::format("ring, 1 channel (element {} of {} starts at rank {})", e, elements, a),
                          with(Algorithm::kRing), a});
      variants.push_back({fmt::format("ring, {} channels (element {} of {} starts at rank {})", c.channels, e, elements, b),
                          with(Algorithm::kRing), b});
      break;
    }
  }
  if (c.collective != CollectiveKind::kReduceScatter) variants.push_back({"tree", with(Algorithm::kTree), 0});
  variants.push_back({"nvls", with(Algorithm::kNvls), 0});
  for (const auto& cand : family) {
    std::vector<double> outs;
    for (const auto& v : variants) {
      outs.push_back(reduce_element(v.config, cand.x, v.start));
      work += c.ranks;
    }
    for (size_t i = 0; i < variants.size(); ++i)
      for (size_t j = i + 1; j < variants.size(); ++j) {
        if (outs[i] == outs[j] || (std::isnan(outs[i]) && std::isnan(outs[j]))) continue;
        d.found = true;
        d.order_a = variants[i].name;
        d.order_b = variants[j].name;
        d.computed_a = outs[i];
        d.computed_b = outs[j];
        d.exact = exact_result(c, cand.x);
        d.witness = witness_text(cand.x) + " (" + cand.family + ")";
        return d;
      }
  }
  return d;
}

// The figures of every configuration in `cs` (same ranks and input type); the bias samples are
// shared (bias_figures).
std::vector<Figures> figures_for(std::span<const ReductionConfig> cs, const AnalysisOptions& opt, int64_t& work) {
  std::vector<Figures> out(cs.size());
  if (cs.empty()) return out;
  // The adversarial family and the first bias distribution on this thread, the other two
  // distributions on a second one where the folds are many (a reduce-scatter over thousands of
  // ranks: every sample folds one input per rank). Each distribution draws from its own seed, so
  // the figures are the same either way.
  std::vector<BiasFigure> biases[3];
  int64_t work_beside = 0;
  const int64_t folds = static_cast<int64_t>(cs.front().ranks) * opt.samples * static_cast<int64_t>(cs.size());
  run_concurrently(
      folds >= kParallelFolds && std::thread::hardware_concurrency() >= 2,
      [&] {
        for (size_t k = 0; k < cs.size(); ++k) {
          const ReductionConfig& c = cs[k];
          Figures& f = out[k];
          auto family = adversarial_family(c, opt);
          f.worst = worst_case(c, opt, family, work);
          f.avg_scale_error = avg_scale_error(c);
          f.underflow = underflow_mode(c, work);
          f.overflow = overflow_mode(c, work);
          f.order = order_dependence(c, family, work);
        }
        biases[0] = bias_figures(cs, opt, 0, work);
      },
      [&] {
        biases[1] = bias_figures(cs, opt, 1, work_beside);
        biases[2] = bias_figures(cs, opt, 2, work_beside);
      });
  work += work_beside;
  for (int which = 0; which < 3; ++which)
    for (size_t k = 0; k < cs.size(); ++k) out[k].biases.push_back(std::move(biases[which][k]));
  return out;
}

// Worst of several algorithms, metric by metric (for kAuto).
Figures worst_of(const std::vector<std::pair<Algorithm, Figures>>& all) {
  Figures f = all.front().second;
  for (const auto& [alg, g] : all) {
    if (g.worst.relative_error > f.worst.relative_error) f.worst = g.worst;
    if (g.order.found && !f.order.found) f.order = g.order;
    for (size_t k = 0; k < f.biases.size(); ++k)
      if (g.biases[k].nonfinite > f.biases[k].nonfinite ||
          (g.biases[k].nonfinite == f.biases[k].nonfinite && std::fabs(g.biases[k].bias) > std::fabs(f.biases[k].bias)))
        f.biases[k] = g.biases[k];
    if (g.underflow.found && (!f.underflow.found || g.underflow.input > f.underflow.input)) f.underflow = g.underflow;
    if (g.overflow.found && (!f.overflow.found || g.overflow.input < f.overflow.input)) f.overflow = g.overflow;
  }
  return f;
}

// The figures of each configuration in `tops` (same ranks and input type); a kAuto one is the
// worst of ring, tree (not for reduce_scatter) and nvls, metric by metric. Every algorithm of every
// configuration shares one draw of the bias samples.
std::vector<Figures> analyse_figures(std::span<const ReductionConfig> tops, const AnalysisOptions& opt,
                                     int64_t& work) {
  std::vector<ReductionConfig> flat;
  std::vector<std::vector<std::pair<Algorithm, size_t>>> parts(tops.size());  // per top: (algorithm, index in flat)
  for (size_t t = 0; t < tops.size(); ++t) {
    const ReductionConfig& c = tops[t];
    if (c.algorithm != Algorithm::kAuto) {
      parts[t].emplace_back(c.algorithm, flat.size());
      flat.push_back(c);
      continue;
    }
    for (Algorithm a : {Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls}) {
      if (a == Algorithm::kTree && c.collective == CollectiveKind::kReduceScatter) continue;
      ReductionConfig v = c;
      v.algorithm = a;
      if (a != Algorithm::kNvls) v.accum_dtype.reset();
      parts[t].emplace_back(a, flat.size());
      flat.push_back(v);
    }
  }
  std::vector<Figures> all = figures_for(flat, opt, work);
  std::vector<Figures> out;
  for (size_t t = 0; t < tops.size(); ++t) {
    if (tops[t].algorithm != Algorithm::kAuto) {
      out.push_back(std::move(all[parts[t].front().second]));
      continue;
    }
    std::vector<std::pair<Algorithm, Figures>> per;
    for (auto [a, i] : parts[t]) {
      Figures g = std::move(all[i]);
      g.worst.family = fmt::format("{}: {}", algorithm_name(a), g.worst.family);
      for (auto& b : g.biases) {
        b.distribution = fmt::format("{} ({})", b.distribution, algorithm_name(a));
        if (!b.nonfinite_stage.empty()) b.nonfinite_stage = fmt::format("{} ({})", b.nonfinite_stage, algorithm_name(a));
      }
      g.underflow.stage = fmt::format("{} ({})", g.underflow.stage, algorithm_name(a));
      g.overflow.stage = fmt::format("{} ({})", g.overflow.stage, algorithm_name(a));
      per.emplace_back(a, std::move(g));
    }
    out.push_back(worst_of(per));
  }
  return out;
}

}  // namespace

const BiasFigure& Figures::worst_bias() const {
  static const BiasFigure kNone;
  if (biases.empty()) return kNone;
  return *std::max_element(biases.begin(), biases.end(),
                           [](const BiasFigure& a, const BiasFigure& b) { return std::fabs(a.bias) < std::fabs(b.bias); });
}

double sent_bytes_per_element(const ReductionConfig& c) {
  const double n = c.ranks, bytes = info(c.dtype).bytes;
  const double share = n > 1 ? (n - 1) / n : 0;
  Algorithm a = c.algorithm == Algorithm::kAuto ? Algorithm::kRing : c.algorithm;
  if (a == Algorithm::kNvls) return bytes;
  switch (c.collective) {
    case CollectiveKind::kAllReduce: return bytes * (a == Algorithm::kTree ? 2.0 : 2 * share);
    case CollectiveKind::kReduceScatter: return bytes * share;
    case CollectiveKind::kReduce: return bytes * (a == Algorithm::kTree ? 1.0 : share);
  }
  return bytes;
}

int fsdp1_predivide_factor(int ranks) {
  int f = 1;
  while (ranks % f == 0 && ranks / static_cast<double>(f) > f) f *= 2;
  return f;
}

ReductionConfig fsdp_reduce_scatter(DType reduce, int ranks, bool fsdp2) {
  ReductionConfig c;
  c.dtype = reduce;
  c.ranks = ranks;
  c.collective = CollectiveKind::kReduceScatter;
  if (fsdp2 && reduce != DType::kFp16) {
    c.op = ReduceOp::kAvg;
    return c;
  }
  c.op = ReduceOp::kSum;
  c.pre_divide = fsdp1_predivide_factor(ranks);
  c.post_divide = ranks / c.pre_divide;
  return c;
}

ReductionConfig fsdp2_gradient_divide(DType reduce, int ranks, double factor) {
  ReductionConfig c;
  c.dtype = reduce;
  c.ranks = ranks;
  c.collective = CollectiveKind::kReduceScatter;
  if (reduce == DType::kBf16 || reduce == DType::kFp32) {
    if (factor == ranks) {
      c.op = ReduceOp::kAvg;
    } else {
      c.op = ReduceOp::kPremulSum;
      c.premul_factor = 1.0 / factor;
    }
    return c;
  }
  double pre = 1;
  while (std::fmod(factor, pre) == 0 && factor / pre > pre) pre *= 2;
  c.op = ReduceOp::kSum;
  c.pre_divide = pre;
  c.post_divide = factor / pre;
  return c;
}

namespace {

std::vector<Fix> usual_fixes(const ReductionConfig& c) {
  std::vector<Fix> fixes;
  auto add = [&](std::string name, ReductionConfig v, std::string note) {
    fixes.push_back({std::move(name), v, {}, 0, 1, std::move(note)});
  };
  if (c.dtype != DType::kFp32) {
    ReductionConfig v = c;
    v.input_dtype = input_type(c);
    v.dtype = DType::kFp32;
    v.accum_dtype.reset();
    add("fp32 reduction", v, "reduce in fp32 (FSDP reduce_dtype / MixedPrecisionPolicy, Megatron's default)");
  }
  if (c.algorithm != Algorithm::kTree && c.collective != CollectiveKind::kReduceScatter) {
    ReductionConfig v = c;
    v.algorithm = Algorithm::kTree;
    v.accum_dtype.reset();
    add("tree", v, "NCCL_ALGO=Tree (all_reduce only)");
  }
  if (c.algorithm != Algorithm::kNvls) {
    ReductionConfig v = c;
    v.algorithm = Algorithm::kNvls;
    v.accum_dtype.reset();
    add("nvls", v, "NCCL_ALGO=NVLS: needs NVSwitch multicast, NCCL >= 2.27.3 and CUDA >= 12.2 for fp32 accumulation");
  }
  if (c.op == ReduceOp::kAvg && c.ranks > 1) {
    ReductionConfig v = c;
    v.op = ReduceOp::kSum;
    int f = fsdp1_predivide_factor(c.ranks);
    v.pre_divide = c.pre_divide * f;
    v.post_divide = c.post_divide * (static_cast<double>(c.ranks) / f);
    add("pre/post divide", v, fmt::format("sum with a pre-divide by {} and a post-divide by {} (FSDP1's rule)", f,
                                          number(static_cast<double>(c.ranks) / f)));
    ReductionConfig w = c;
    w.op = ReduceOp::kSum;
    w.post_divide = c.post_divide * c.ranks;
    add("sum then divide", w, fmt::format("sum, then divide by {} (no rounded 1/N)", c.ranks));
  }
  return fixes;
}

}  // namespace

Analysis analyze(const ReductionConfig& c, const AnalysisOptions& opt) {
  std::string problem = validate(c);
  if (!problem.empty()) throw std::invalid_argument(problem);
  Analysis a;
  a.config = c;
  a.figures = std::move(analyse_figures(std::span(&c, 1), opt, a.reduced_elements).front());
  a.sent_bytes_per_element = sent_bytes_per_element(c);
  if (opt.fixes) add_fixes(a, opt);
  return a;
}

void add_fixes(Analysis& a, const AnalysisOptions& opt) {
  a.fixes.clear();
  std::vector<Fix> fixes = usual_fixes(a.config);
  std::vector<ReductionConfig> configs;
  for (const Fix& fix : fixes) configs.push_back(fix.config);
  std::vector<Figures> figures = analyse_figures(configs, opt, a.reduced_elements);
  for (size_t i = 0; i < fixes.size(); ++i) {
    Fix& fix = fixes[i];
    fix.figures = std::move(figures[i]);
    fix.sent_bytes_per_element = sent_bytes_per_element(fix.config);
    fix.bytes_ratio = a.sent_bytes_per_element > 0 ? fix.sent_bytes_per_element / a.sent_bytes_per_element : 1;
    a.fixes.push_back(std::move(fix));
  }
}

std::string describe(const ReductionConfig& c) {
  std::string s = fmt::format("{} {}", dtype_name(c.dtype), op_name(c.op));
  if (c.op == ReduceOp::kPremulSum) s += fmt::format(" (factor {})", number(c.premul_factor));
  s += fmt::format(" {} over {} rank{}, {}", collective_name(c.collective), c.ranks, c.ranks == 1 ? "" : "s",
                   algorithm_name(c.algorithm));
  if (c.algorithm == Algorithm::kNvls) s += fmt::format(" accumulating in {}", dtype_name(c.accum_dtype.value_or(DType::kFp32)));
  s += fmt::format(", {} channel{}", c.channels, c.channels == 1 ? "" : "s");
  if (c.input_dtype && *c.input_dtype != c.dtype) s += fmt::format(", inputs {}", dtype_name(*c.input_dtype));
  if (c.pre_divide != 1) s += fmt::format(", pre-divide {}", number(c.pre_divide));
  if (c.post_divide != 1) s += fmt::format(", post-divide {}", number(c.post_divide));
  return s;
}

std::vector<NumericsFinding> numerics_findings(const Analysis& a, const Tolerances& tol) {
  std::vector<NumericsFinding> out;
  const Figures& f = a.figures;
  const std::string what = describe(a.config);
  if (f.worst.relative_error > tol.max_relative_error) {
    NumericsFinding n;
    n.check = "max_relative_error";
    n.message = fmt::format("{}: worst relative error {} on input {} exceeds max_relative_error {}", what,
                            fmt::format("{:.4g}", f.worst.relative_error), f.worst.witness, number(tol.max_relative_error));
    n.data = {{"relative_error", f.worst.relative_error}, {"computed", f.worst.computed}, {"exact", f.worst.exact},
              {"ring_start", f.worst.ring_start}, {"max_relative_error", tol.max_relative_error}};
    n.witness = f.worst.witness;
    n.witness_inputs = f.worst.witness_inputs;
    out.push_back(std::move(n));
  }
  const BiasFigure& b = f.worst_bias();
  // A bias is a finding only when it is also significant (four standard errors): a bias within
  // the sampling noise of the figure is not evidence.
  if (std::fabs(b.bias) > tol.max_bias && std::fabs(b.bias) > 4 * b.bias_stderr) {
    NumericsFinding n;
    n.check = "max_bias";
    n.message = fmt::format("{}: systematic bias {:+.4g} on {} gradients (spread {:.3g}, {} samples, seed {}) exceeds "
                            "max_bias {}", what, b.bias, b.distribution, b.spread, b.samples, b.seed, number(tol.max_bias));
    n.data = {{"bias", b.bias}, {"spread", b.spread}, {"bias_stderr", b.bias_stderr},
              {"samples", static_cast<double>(b.samples)}, {"seed", static_cast<double>(b.seed)},
              {"max_bias", tol.max_bias}, {"avg_scale_error", f.avg_scale_error}};
    out.push_back(std::move(n));
  }
  if (std::fabs(f.avg_scale_error) > tol.max_bias) {
    NumericsFinding n;
    n.check = "avg_scale";
    n.message = fmt::format("{}: avg multiplies by {}(1/{}) = {}, which scales every result by {:+.4g} (exceeds "
                            "max_bias {})", what, dtype_name(a.config.dtype), a.config.ranks,
                            number(nccl_scalar(a.config)), f.avg_scale_error, number(tol.max_bias));
    n.data = {{"avg_scale_error", f.avg_scale_error}, {"scalar", nccl_scalar(a.config)}, {"max_bias", tol.max_bias}};
    out.push_back(std::move(n));
  }
  if (f.underflow.found && f.underflow.input >= tol.min_gradient) {
    NumericsFinding n;
    n.check = "underflow";
    n.message = fmt::format("{}: a gradient of {} on every rank comes out as 0 (exact {}; lost in the {})", what,
                            number(f.underflow.input), number(f.underflow.exact), f.underflow.stage);
    n.data = {{"input", f.underflow.input}, {"exact", f.underflow.exact}};
    n.witness = fmt::format("[{} x {}]", number(f.underflow.input), a.config.ranks);
    out.push_back(std::move(n));
  }
  if (tol.deterministic && f.order.found) {
    NumericsFinding n;
    n.check = "deterministic";
    n.message = fmt::format("{}: the result depends on the fold order NCCL picks: {} gives {}, {} gives {} (exact {}) "
                            "on input {}, so its bits are not reproducible across ring starts, channel counts or "
                            "algorithms (numerics.deterministic)",
                            what, f.order.order_a, number(f.order.computed_a), f.order.order_b,
                            number(f.order.computed_b), number(f.order.exact), f.order.witness);
    n.data = {{"computed_a", f.order.computed_a}, {"computed_b", f.order.computed_b}, {"exact", f.order.exact}};
    n.witness = f.order.witness;
    out.push_back(std::move(n));
  }
  if (f.overflow.found && f.overflow.input <= tol.max_gradient) {
    NumericsFinding n;
    n.check = "overflow";
    n.message = fmt::format("{}: a gradient of {} on every rank overflows to {} in the {} (exact {}{})", what,
                            number(f.overflow.input), number(f.overflow.computed), f.overflow.stage,
                            number(f.overflow.exact), f.overflow.exact_fits ? ", which fits" : "");
    n.data = {{"input", f.overflow.input}, {"computed", f.overflow.computed}, {"exact", f.overflow.exact},
              {"exact_fits", f.overflow.exact_fits ? 1.0 : 0.0}};
    n.witness = fmt::format("[{} x {}]", number(f.overflow.input), a.config.ranks);
    out.push_back(std::move(n));
  }
  // Typical gradients that come out as inf or NaN: the figures above leave them out (they are
  // not an error to measure), so they are judged here, whatever the exact result.
  for (const BiasFigure& b : f.biases) {
    if (b.nonfinite == 0) continue;
    const int64_t drawn = b.samples + b.left_out;
    const double scalar = nccl_scalar(a.config);
    std::string why;
    if (!std::isfinite(scalar))
      why = fmt::format(", where NCCL's scalar {} becomes {} in the element type",
                        number(a.config.op == ReduceOp::kAvg ? 1.0 / a.config.ranks : a.config.premul_factor),
                        number(scalar));
    NumericsFinding n;
    n.check = "overflow";
    n.message = fmt::format("{}: {} of {} {} gradients come out as inf or NaN (first lost in the {}{})", what,
                            b.nonfinite, drawn, b.distribution, b.nonfinite_stage, why);
    n.data = {{"nonfinite", static_cast<double>(b.nonfinite)}, {"samples", static_cast<double>(drawn)},
              {"seed", static_cast<double>(b.seed)}, {"scalar", scalar}};
    out.push_back(std::move(n));
    break;  // the first distribution that overflows says it; the others add nothing new
  }
  return out;
}

ReductionCheck check_reductions(const std::vector<LocatedReduction>& collectives, const Tolerances& tol,
                                AnalysisOptions opt) {
  using Key = std::tuple<int, int, int, int, int, int, int, int, double, double, double>;
  auto key = [](const ReductionConfig& c) {
    return Key{static_cast<int>(c.dtype), c.input_dtype ? static_cast<int>(*c.input_dtype) : -1,
               c.accum_dtype ? static_cast<int>(*c.accum_dtype) : -1, static_cast<int>(c.op),
               static_cast<int>(c.algorithm), static_cast<int>(c.collective), c.ranks, c.channels,
               c.op == ReduceOp::kPremulSum ? c.premul_factor : 1.0, c.pre_divide, c.post_divide};
  };
  std::map<Key, size_t> index;                 // configuration -> position in `groups`
  std::vector<std::vector<const LocatedReduction*>> groups;
  ReductionCheck out;
  for (size_t i = 0; i < collectives.size(); ++i) {
    const LocatedReduction& r = collectives[i];
    auto [it, fresh] = index.emplace(key(r.config), groups.size());
    if (fresh) groups.emplace_back(), out.members.emplace_back();
    groups[it->second].push_back(&r);
    out.members[it->second].push_back(i);
  }
  const bool want_fixes = opt.fixes;
  for (const auto& group : groups) {
    opt.fixes = false;
    Analysis a = analyze(group.front()->config, opt);
    std::vector<NumericsFinding> found = numerics_findings(a, tol);
    if (!found.empty() && want_fixes) add_fixes(a, opt);  // the configuration's own figures are kept
    for (NumericsFinding& f : found) {
      for (const LocatedReduction* r : group) {
        if (r->where.valid()) f.locations.push_back(r->where);
        if (!r->op.empty()) f.ops.push_back(r->op);
      }
      out.findings.push_back(std::move(f));
    }
    out.analyses.push_back(std::move(a));
  }
  return out;
}

}  // namespace sc::numerics
