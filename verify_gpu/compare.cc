#include "compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/report.h"

namespace sc::gpu {
namespace {

using Interval = std::pair<double, double>;

// Sorted, merged union of intervals (zero-length ones dropped).
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second) out.back().second = std::max(out.back().second, b);
    else out.push_back({a, b});
  }
  return out;
}

double length(const std::vector<Interval>& v) {
  double s = 0;
  for (const auto& [a, b] : v) s += b - a;
  return s;
}

double intersection(const std::vector<Interval>& x, const std::vector<Interval>& y) {
  double s = 0;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    double a = std::max(x[i].first, y[j].first), b = std::min(x[i].second, y[j].second);
    if (b > a) s += b - a;
    if (x[i].second < y[j].second) ++i;
    else ++j;
  }
  return s;
}

// Counts inversions of `v` (pairs i < j with v[i] > v[j]) by merge sort; ties are not inversions.
int64_t inversions(std::vector<double>& v, std::vector<double>& tmp, size_t lo, size_t hi) {
  if (hi - lo < 2) return 0;
  size_t mid = (lo + hi) / 2;
  int64_t c = inversions(v, tmp, lo, mid) + inversions(v, tmp, mid, hi);
  size_t i = lo, j = mid, k = lo;
  while (i < mid && j < hi) {
    if (v[j] < v[i]) {
      c += static_cast<int64_t>(mid - i);
      tmp[k++] = v[j++];
    } else {
      tmp[k++] = v[i++];
    }
  }
  while (i < mid) tmp[k++] = v[i++];
  while (j < hi) tmp[k++] = v[j++];
  std::copy(tmp.begin() + lo, tmp.begin() + hi, v.begin() + lo);
  return c;
}

double rel_error(double predicted, double measured) {
  if (predicted == measured) return 0;
  if (predicted == 0) return std::numeric_limits<double>::infinity();
  return std::abs(measured - predicted) / std::abs(predicted);
}

nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

}  // namespace

Figures figures_of(const GpuPlan& plan, const std::vector<ItemTime>& times, const std::vector<int64_t>& peak_bytes_per_rank) {
  Figures f;
  int32_t R = plan.num_ranks;
  f.busy_per_rank_s.assign(R, 0);
  f.idle_per_rank_s.assign(R, 0);
  f.comm_per_rank_s.assign(R, 0);
  f.overlap_per_rank_s.assign(R, 0);
  f.peak_bytes_per_rank = peak_bytes_per_rank;
  std::vector<double> first(R, std::numeric_limits<double>::infinity()), last(R, -std::numeric_limits<double>::infinity());
  std::vector<std::vector<Interval>> comp(R), comm(R);
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < plan.items.size() && i < times.size(); ++i) {
    const Item& it = plan.items[i];
    const ItemTime& t = times[i];
    if (i < plan.num_ops) {
      lo = std::min(lo, t.start_s);
      hi = std::max(hi, t.end_s);
    }
    if (it.cls == ItemClass::kCompute) {
      f.busy_per_rank_s[it.rank] += t.end_s - t.start_s;
      first[it.rank] = std::min(first[it.rank], t.start_s);
      last[it.rank] = std::max(last[it.rank], t.end_s);
      comp[it.rank].push_back({t.start_s, t.end_s});
    } else if (it.cls == ItemClass::kComm) {
      comm[it.rank].push_back({t.start_s, t.end_s});
    }
  }
  f.makespan_s = hi > lo ? hi - lo : 0;
  for (int32_t r = 0; r < R; ++r) {
    if (std::isfinite(first[r])) {
      double s = last[r] - first[r];
      f.span_s = std::max(f.span_s, s);
      f.idle_per_rank_s[r] = s - f.busy_per_rank_s[r];
    }
    auto c = merged(comp[r]);
    auto m = merged(comm[r]);
    f.comm_per_rank_s[r] = length(m);
    f.overlap_per_rank_s[r] = intersection(c, m);
  }
  return f;
}

double order_agreement(const GpuPlan& plan, const std::vector<ItemTime>& predicted, const std::vector<ItemTime>& measured,
                       std::vector<std::string>* disagreeing) {
  std::vector<std::vector<int32_t>> per_rank(plan.num_ranks);
  for (size_t i = 0; i < plan.num_ops; ++i) per_rank[plan.items[i].rank].push_back(static_cast<int32_t>(i));
  int64_t pairs = 0, bad = 0;
  for (auto& ops : per_rank) {
    std::sort(ops.begin(), ops.end(), [&](int32_t a, int32_t b) {
      if (predicted[a].start_s != predicted[b].start_s) return predicted[a].start_s < predicted[b].start_s;
      return a < b;
    });
    // Groups of equal predicted start are unordered: count pairs across groups only.
    size_t n = ops.size();
    int64_t total = static_cast<int64_t>(n) * (static_cast<int64_t>(n) - 1) / 2;
    int64_t tied = 0, tied_inv = 0;
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j < n && predicted[ops[j]].start_s == predicted[ops[i]].start_s) ++j;
      int64_t g = static_cast<int64_t>(j - i);
      tied += g * (g - 1) / 2;
      std::vector<double> v, tmp;
      for (size_t k = i; k < j; ++k) v.push_back(measured[ops[k]].start_s);
      tmp.resize(v.size());
      tied_inv += inversions(v, tmp, 0, v.size());
      i = j;
    }
    std::vector<double> v, tmp(n);
    for (int32_t id : ops) v.push_back(measured[id].start_s);
    int64_t inv = inversions(v, tmp, 0, n) - tied_inv;
    pairs += total - tied;
    bad += inv;
    if (disagreeing && inv > 0)
      for (size_t k = 1; k < n && disagreeing->size() < 10; ++k)
        if (measured[ops[k]].start_s < measured[ops[k - 1]].start_s &&
            predicted[ops[k]].start_s != predicted[ops[k - 1]].start_s)
          disagreeing->push_back(fmt::format("{} before {}", plan.items[ops[k]].label, plan.items[ops[k - 1]].label));
  }
  return pairs == 0 ? 1.0 : 1.0 - static_cast<double>(bad) / static_cast<double>(pairs);
}

Comparison compare(const GpuPlan& plan, const Figures& p, const Figures& m, const std::vector<ItemTime>& predicted_times,
                   const std::vector<ItemTime>& measured_times, const Tolerance& tol) {
  Comparison c;
  auto add = [&](std::string name, int32_t rank, double pred, double meas, double allowed, std::string units, double err) {
    FigureCheck f{std::move(name), rank, pred, meas, err, allowed, err <= allowed, std::move(units)};
    c.within = c.within && f.within;
    c.checks.push_back(std::move(f));
  };
  add("makespan", -1, p.makespan_s, m.makespan_s, tol.time_rel, "s", rel_error(p.makespan_s, m.makespan_s));
  add("span", -1, p.span_s, m.span_s, tol.time_rel, "s", rel_error(p.span_s, m.span_s));
  // Idle and overlap: absolute differences measured against the predicted makespan.
  double scale = p.makespan_s > 0 ? p.makespan_s : 1;
  for (int32_t r = 0; r < plan.num_ranks; ++r) {
    double pi = r < (int32_t)p.idle_per_rank_s.size() ? p.idle_per_rank_s[r] : 0;
    double mi = r < (int32_t)m.idle_per_rank_s.size() ? m.idle_per_rank_s[r] : 0;
    add("idle", r, pi, mi, tol.time_rel, "s", std::abs(mi - pi) / scale);
  }
  for (int32_t r = 0; r < plan.num_ranks; ++r) {
    double po = r < (int32_t)p.overlap_per_rank_s.size() ? p.overlap_per_rank_s[r] : 0;
    double mo = r < (int32_t)m.overlap_per_rank_s.size() ? m.overlap_per_rank_s[r] : 0;
    add("overlap", r, po, mo, tol.time_rel, "s", std::abs(mo - po) / scale);
  }
  for (int32_t r = 0; r < plan.num_ranks; ++r) {
    double pp = r < (int32_t)p.peak_bytes_per_rank.size() ? static_cast<double>(p.peak_bytes_per_rank[r]) : 0;
    double mp = r < (int32_t)m.peak_bytes_per_rank.size() ? static_cast<double>(m.peak_bytes_per_rank[r]) : 0;
    int32_t live = r < (int32_t)plan.max_live_buffers_per_rank.size() ? plan.max_live_buffers_per_rank[r] : 0;
    double slack = static_cast<double>(tol.rounding_bytes) * live;
    // Within 1 % plus the rounding of every live buffer: relative error of the excess over it.
    double excess = std::max(0.0, std::abs(mp - pp) - slack);
    double err = pp > 0 ? excess / pp : (excess > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    add("peak_bytes", r, pp, mp, tol.peak_rel, "bytes", err);
  }
  c.order_agreement = order_agreement(plan, predicted_times, measured_times, &c.order_disagreements);
  FigureCheck o{"op_order", -1, 1.0, c.order_agreement, 1.0 - c.order_agreement, 1.0 - tol.order_min,
                c.order_agreement >= tol.order_min, "fraction"};
  c.within = c.within && o.within;
  c.checks.push_back(o);
  c.exit_code = c.within ? 0 : kExitMeasurementDisagrees;
  return c;
}

namespace {

nlohmann::json measured_object(const GpuPlan& plan, const Comparison& c, const Measurement& m, const Tolerance& tol) {
  using nlohmann::json;
  json checks = json::array();
  for (const auto& f : c.checks)
    checks.push_back({{"figure", f.name},
                      {"rank", f.rank < 0 ? json(nullptr) : json(f.rank)},
                      {"predicted", num(f.predicted)},
                      {"measured", num(f.measured)},
                      {"rel_error", num(f.rel_error)},
                      {"allowed", num(f.allowed)},
                      {"within", f.within},
                      {"units", f.units}});
  const Calibration& k = m.calibration;
  std::vector<double> sorted = m.makespan_per_repeat_s;
  std::sort(sorted.begin(), sorted.end());
  json j = {{"verdict", c.within ? "agrees" : "differs"},
            {"units", {{"time", "s"}, {"memory", "bytes"}}},
            {"device", {{"name", k.device_name}, {"index", k.device}, {"compute_capability", k.compute_capability}}},
            {"kernels", m.kernels},
            {"tolerance", {{"time_rel", tol.time_rel}, {"peak_rel", tol.peak_rel}, {"pool_rounding_bytes", tol.rounding_bytes},
                           {"order_min", tol.order_min}}},
            {"checks", checks},
            {"op_order_agreement", c.order_agreement},
            {"op_order_disagreements", c.order_disagreements},
            {"repeats", m.makespan_per_repeat_s.size()},
            {"warmup_runs", m.warmup_runs},
            {"makespan_per_repeat", m.makespan_per_repeat_s},
            {"makespan_median", sorted.empty() ? json(nullptr) : json(sorted[(sorted.size() - 1) / 2])},
            {"peak_bytes_per_rank", m.peak_bytes_per_rank},
            {"reserved_peak_bytes_per_rank", m.reserved_peak_bytes_per_rank},
            {"expected_peak_bytes_per_rank", plan.expected_peak_bytes_per_rank},
            {"calibration", {{"launch_latency", k.launch_latency_s},
                             {"timer_overhead", k.timer_overhead_s},
                             {"timer_resolution", k.timer_resolution_s},
                             {"copy_bandwidth_bytes_per_s", k.copy_bandwidth_bytes_per_s},
                             {"pool_rounding_bytes", k.pool_rounding_bytes},
                             {"gemm_flops_per_s", k.gemm_flops_per_s}}},
            {"correctness", {{"ok", m.correctness_problems.empty()}, {"problems", m.correctness_problems}}},
            {"plan", {{"streams", plan.streams.size()}, {"events", plan.events.size()}, {"items", plan.items.size()},
                      {"commands", plan.commands.size()}, {"buffers", plan.buffers.size()}, {"device_of_rank", plan.device_of_rank}}}};
  return j;
}

}  // namespace

std::string measured_json(const GpuPlan& plan, const Comparison& c, const Measurement& m, const Tolerance& tol) {
  return measured_object(plan, c, m, tol).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string run_json_report(const VerifyResult& r, const GpuPlan& plan, const Comparison& c, const Measurement& m,
                            const Tolerance& tol, int exit_code) {
  return run_json_report(json_report(r), plan, c, m, tol, exit_code);
}

std::string run_json_report(const std::string& verify_json, const GpuPlan& plan, const Comparison& c,
                            const Measurement& m, const Tolerance& tol, int exit_code) {
  nlohmann::json j = nlohmann::json::parse(verify_json);
  j["exit_code"] = exit_code;
  j["measured"] = measured_object(plan, c, m, tol);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

namespace {

std::string fmt_value(double v, const std::string& units) {
  if (!std::isfinite(v)) return "inf";
  if (units == "s") return fmt::format("{:.3f} ms", v * 1e3);
  if (units == "bytes") {
    if (std::abs(v) >= 1 << 30) return fmt::format("{:.3f} GiB", v / (1 << 30));
    if (std::abs(v) >= 1 << 20) return fmt::format("{:.3f} MiB", v / (1 << 20));
    return fmt::format("{:.0f} B", v);
  }
  return fmt::format("{:.4f}", v);
}

}  // namespace

std::string comparison_text(const GpuPlan& plan, const Comparison& c, const Measurement& m, const Tolerance& tol) {
  std::ostringstream os;
  const Calibration& k = m.calibration;
  if (k.device < 0)
    os << "replayed on the ideal in-memory GPU (--dry-run: no device, no launch or copy costs)\n";
  else
    os << fmt::format("measured on {} (device {}, sm_{}), {} kernels, median of {} runs after {} warm-up\n", k.device_name,
                      k.device, k.compute_capability, m.kernels, m.makespan_per_repeat_s.size(), m.warmup_runs);
  os << fmt::format("{:<12} {:>5} {:>16} {:>16} {:>9} {:>9}  {}\n", "figure", "rank", "predicted", "measured", "error",
                    "allowed", "");
  for (const auto& f : c.checks)
    os << fmt::format("{:<12} {:>5} {:>16} {:>16} {:>8.2f}% {:>8.2f}%  {}\n", f.name, f.rank < 0 ? "" : std::to_string(f.rank),
                      fmt_value(f.predicted, f.units), fmt_value(f.measured, f.units),
                      std::isfinite(f.rel_error) ? f.rel_error * 100 : 1e9, f.allowed * 100, f.within ? "ok" : "DIFFERS");
  os << fmt::format("op order agreement: {:.4f}", c.order_agreement);
  for (const auto& d : c.order_disagreements) os << "\n  measured " << d;
  os << "\n";
  if (k.device >= 0)
    os << fmt::format(
      "calibration: launch latency {:.2f} us, timer overhead {:.0f} ns (resolution {:.0f} ns), copy {:.1f} GB/s, pool "
      "rounding {} B{}\n",
      k.launch_latency_s * 1e6, k.timer_overhead_s * 1e9, k.timer_resolution_s * 1e9, k.copy_bandwidth_bytes_per_s / 1e9,
      k.pool_rounding_bytes, k.gemm_flops_per_s > 0 ? fmt::format(", GEMM {:.1f} TFLOP/s", k.gemm_flops_per_s / 1e12) : "");
  if (m.correctness_problems.empty()) {
    os << "correctness: every op ran once, in an order the happens-before relation allows; every buffer freed\n";
  } else {
    os << fmt::format("correctness: {} problem(s)\n", m.correctness_problems.size());
    for (const auto& p : m.correctness_problems) os << "  " << p << "\n";
  }
  os << (c.within ? "measurement agrees with the prediction" : "MEASUREMENT DIFFERS from the prediction (exit 20)")
     << fmt::format(" (tolerance {:.1f}% time, {:.1f}% + rounding memory)\n", tol.time_rel * 100, tol.peak_rel * 100);
  return os.str();
}

namespace {

// Chrome trace microseconds that Perfetto turns back into exactly `ns` nanoseconds whether it
// truncates (older releases) or rounds (newer ones), as chrome_trace writes the prediction: a
// measured 6999.999999999999 us would be 6999999 ns truncated and 7000000 rounded, and a slice
// that ends a nanosecond after the next one starts leaves its thread's track.
double trace_us(int64_t ns) { return (static_cast<double>(ns) + 0.25) / 1000.0; }

}  // namespace

std::string side_by_side_trace(const VerifyResult& r, const GpuPlan& plan, const std::vector<ItemTime>& measured) {
  using nlohmann::json;
  json t = json::parse(chrome_trace(r));
  json& ev = t["traceEvents"];
  // Prediction: rank N sorts at 2N; measurement: process 100000 + N sorts at 2N + 1.
  for (auto& e : ev)
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_sort_index")
      e["args"]["sort_index"] = 2 * e["pid"].get<int>();
  const int base = 100000;
  constexpr double kUs = 1e6;
  for (int32_t r2 = 0; r2 < plan.num_ranks; ++r2) {
    ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", base + r2}, {"args", {{"name", fmt::format("rank {} measured", r2)}}}});
    ev.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", base + r2}, {"args", {{"sort_index", 2 * r2 + 1}}}});
  }
  for (size_t s = 0; s < plan.streams.size(); ++s)
    ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", base + plan.streams[s].rank}, {"tid", s}, {"args", {{"name", plan.streams[s].name}}}});
  for (size_t i = 0; i < plan.items.size() && i < measured.size(); ++i) {
    const Item& it = plan.items[i];
    const char* cat = it.cls == ItemClass::kCompute ? "compute" : it.cls == ItemClass::kComm ? "comm" : "marker";
    // Whole nanoseconds, end and start rounded apart so that a slice ending where the next one
    // starts still does in Perfetto.
    const int64_t start_ns = static_cast<int64_t>(std::llround(measured[i].start_s * 1e9));
    const int64_t end_ns = std::max(start_ns, static_cast<int64_t>(std::llround(measured[i].end_s * 1e9)));
    ev.push_back({{"ph", "X"}, {"name", it.label}, {"cat", cat}, {"pid", base + it.rank}, {"tid", it.stream},
                  {"ts", trace_us(start_ns)}, {"dur", trace_us(end_ns - start_ns)},
                  {"args", {{"predicted_start_us", it.predicted_start_s * kUs}, {"predicted_end_us", it.predicted_end_s * kUs}}}});
  }
  t["otherData"]["measured"] = "processes 100000 + rank: the GPU run (median repeat), streams as threads";
  return t.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

VerifyResult measured_result(const VerifyResult& r, const GpuPlan& plan, const std::vector<ItemTime>& measured,
                             const std::string& name) {
  VerifyResult out = r;
  out.spec.name = name;
  std::vector<OpTime> ops(r.program.ops.size());
  for (size_t i = 0; i < ops.size() && i < plan.num_ops && i < measured.size(); ++i)
    ops[i] = {measured[i].start_s, measured[i].end_s};
  out.timeline = timeline_of_times(r.program, r.execution.order, std::move(ops));
  return out;
}

std::string side_by_side_svg(const VerifyResult& r, const GpuPlan& plan, const std::vector<ItemTime>& measured,
                             const std::string& device) {
  VerifyResult predicted = r;
  predicted.spec.name = r.spec.name + " predicted";
  VerifyResult m = measured_result(r, plan, measured, r.spec.name + " measured on " + device);
  return svg_timelines({&predicted, &m});
}

}  // namespace sc::gpu
