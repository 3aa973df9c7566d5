#include "numerics/reduction.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace sc::numerics {

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kPremulSum: return "premul_sum";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kNvls: return "nvls";
    case Algorithm::kAuto: return "auto";
  }
  return "?";
}

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kReduce: return "reduce";
  }
  return "?";
}

namespace {
std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}
}  // namespace

std::optional<ReduceOp> parse_op(std::string_view text) {
  std::string s = lower(text);
  if (s == "sum") return ReduceOp::kSum;
  if (s == "avg" || s == "mean") return ReduceOp::kAvg;
  if (s == "premul_sum" || s == "premulsum") return ReduceOp::kPremulSum;
  if (s == "max") return ReduceOp::kMax;
  return std::nullopt;
}

std::optional<Algorithm> parse_algorithm(std::string_view text) {
  std::string s = lower(text);
  if (s == "ring") return Algorithm::kRing;
  if (s == "tree") return Algorithm::kTree;
  if (s == "nvls" || s == "switch" || s == "nvls_tree") return Algorithm::kNvls;
  if (s == "auto") return Algorithm::kAuto;
  return std::nullopt;
}

std::optional<CollectiveKind> parse_collective(std::string_view text) {
  std::string s = lower(text);
  if (s == "all_reduce" || s == "allreduce") return CollectiveKind::kAllReduce;
  if (s == "reduce_scatter" || s == "reducescatter") return CollectiveKind::kReduceScatter;
  if (s == "reduce") return CollectiveKind::kReduce;
  return std::nullopt;
}

std::string validate(const ReductionConfig& c) {
  if (c.ranks < 1) return fmt::format("ranks must be at least 1 (got {})", c.ranks);
  if (c.channels < 1) return fmt::format("channels must be at least 1 (got {})", c.channels);
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (!positive(c.pre_divide)) return fmt::format("pre_divide must be a finite number > 0 (got {})", c.pre_divide);
  if (!positive(c.post_divide)) return fmt::format("post_divide must be a finite number > 0 (got {})", c.post_divide);
  if (c.op == ReduceOp::kPremulSum && !positive(c.premul_factor))
    return fmt::format("premul_sum factor must be a finite number > 0 (got {})", c.premul_factor);
  if (c.accum_dtype && c.algorithm != Algorithm::kNvls && c.algorithm != Algorithm::kAuto && *c.accum_dtype != c.dtype)
    return fmt::format("{} has no accumulation type: every hop stores {} (accumulate in fp32 by reducing in fp32, "
                       "or use nvls)", algorithm_name(c.algorithm), dtype_name(c.dtype));
  if (c.collective == CollectiveKind::kReduceScatter && c.algorithm == Algorithm::kTree)
    return "NCCL has no tree reduce_scatter (ring or nvls)";
  return "";
}

double nccl_scalar(const ReductionConfig& c) {
  DType held = c.dtype == DType::kFp8E4M3 || c.dtype == DType::kFp8E5M2 ? DType::kFp16 : c.dtype;
  if (c.op == ReduceOp::kAvg) return round_to(held, 1.0 / c.ranks);
  if (c.op == ReduceOp::kPremulSum) return round_to(held, c.premul_factor);
  return 1.0;
}

double avg_scale_error(const ReductionConfig& c) {
  if (c.op != ReduceOp::kAvg) return 0;
  return c.ranks * nccl_scalar(c) - 1.0;  // exact: <= 24 significand bits times a small integer
}

double exact_sum(std::span<const double> x) {
  std::vector<double> partials;
  for (double v : x) {
    size_t i = 0;
    for (double p : partials) {
      if (std::fabs(v) < std::fabs(p)) std::swap(v, p);
      double hi = v + p;
      double lo = p - (hi - v);
      if (lo != 0) partials[i++] = lo;
      v = hi;
    }
    partials.resize(i);
    partials.push_back(v);
    if (!std::isfinite(v)) return std::accumulate(x.begin(), x.end(), 0.0);
  }
  double total = 0;
  for (auto it = partials.rbegin(); it != partials.rend(); ++it) total += *it;
  return total;
}

double exact_result_from_sum(const ReductionConfig& c, std::span<const double> inputs, double sum) {
  if (c.op == ReduceOp::kMax) {
    double m = -INFINITY;
    for (double v : inputs) m = std::max(m, v);
    return m / (c.pre_divide * c.post_divide);
  }
  double scale = 1.0 / (c.pre_divide * c.post_divide);
  if (c.op == ReduceOp::kAvg) scale /= c.ranks;
  if (c.op == ReduceOp::kPremulSum) scale *= c.premul_factor;
  return sum * scale;
}

double exact_result(const ReductionConfig& c, std::span<const double> inputs) {
  return exact_result_from_sum(c, inputs, c.op == ReduceOp::kMax ? 0.0 : exact_sum(inputs));
}

double ring_fold(DType t, std::span<const double> x, int start) {
  const int n = static_cast<int>(x.size());
  start %= n;
  double s = x[start];
  for (int i = start + 1; i < n; ++i) s = add(t, s, x[i]);  // the same order as (start + k) mod n,
  for (int i = 0; i < start; ++i) s = add(t, s, x[i]);      // without a division per element
  return s;
}

double tree_fold(DType t, std::span<const double> x) {
  thread_local std::vector<double> level;
  level.assign(x.begin(), x.end());
  while (level.size() > 1) {
    size_t out = 0;
    for (size_t i = 0; i + 1 < level.size(); i += 2) level[out++] = add(t, level[i], level[i + 1]);
    if (level.size() % 2 == 1) level[out++] = level.back();
    level.resize(out);
  }
  return level.front();
}

double reduce_element(const ReductionConfig& c, std::span<const double> inputs, int ring_start, StageValues* stages) {
  const DType t = c.dtype;
  const Overflow ov = nccl_overflow(t);
  const bool cast = c.input_dtype && *c.input_dtype != t;
  const double scalar = nccl_scalar(c);
  const bool premul = c.op == ReduceOp::kAvg || c.op == ReduceOp::kPremulSum;
  thread_local std::vector<double> v;
  v.assign(inputs.begin(), inputs.end());
  for (size_t i = 0; i < v.size(); ++i) {
    double& x = v[i];
    if (cast) x = round_to(t, x, ov);
    if (stages && i == 0) stages->cast = x;
    if (c.pre_divide != 1.0) x = round_to(t, x / c.pre_divide, ov);
    if (stages && i == 0) stages->pre_divided = x;
    if (premul) x = mul(t, x, scalar);
    if (stages && i == 0) stages->premultiplied = x;
  }
  double r = 0;
  if (c.op == ReduceOp::kMax) {
    r = *std::max_element(v.begin(), v.end());
  } else {
    switch (c.algorithm) {
      case Algorithm::kRing: r = ring_fold(t, v, ring_start); break;
      case Algorithm::kTree: r = tree_fold(t, v); break;
      case Algorithm::kNvls: {
        DType acc = c.accum_dtype.value_or(DType::kFp32);
        double s = v.front();
        for (size_t i = 1; i < v.size(); ++i) s = round_to(acc, s + v[i], nccl_overflow(acc));
        r = round_to(t, s, ov);
        break;
      }
      case Algorithm::kAuto: throw std::invalid_argument("reduce_element: auto is not a fold order");
    }
  }
  if (stages) stages->folded = r;
  if (c.post_divide != 1.0) r = round_to(t, r / c.post_divide, ov);
  if (stages) stages->result = r;
  return r;
}

int ring_start_rank(int ranks, int channels, int64_t elements, int64_t index) {
  int64_t per_channel = std::max<int64_t>(1, (elements + channels - 1) / channels);
  int64_t in_channel = index % per_channel;
  int64_t per_chunk = std::max<int64_t>(1, (per_channel + ranks - 1) / ranks);
  int64_t chunk = in_channel / per_chunk;
  return static_cast<int>((chunk + 1) % ranks);
}

}  // namespace sc::numerics
