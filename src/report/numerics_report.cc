#include "report/numerics_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/units.h"

namespace sc {

using namespace numerics;
using nlohmann::json;

std::string numerics_verdict(const NumericsReport& r) {
  if (!r.findings.empty()) return "violated";
  if (r.proof && (r.proof->status == SmtStatus::kInconclusive || r.proof->status == SmtStatus::kWitness))
    return "inconclusive";
  return "holds";
}

namespace {

std::string g(double v) { return fmt::format("{:.4g}", v); }
std::string signed_g(double v) { return fmt::format("{:+.4g}", v); }

std::string underflow_text(const UnderflowMode& u) {
  if (!u.found) return "none";
  return fmt::format("{} on every rank gives 0 (exact {}; lost in the {})", g(u.input), g(u.exact), u.stage);
}
std::string overflow_text(const OverflowMode& o) {
  if (!o.found) return "none";
  return fmt::format("{} on every rank gives {} (exact {}; in the {})", g(o.input), g(o.computed), g(o.exact), o.stage);
}

void figures_text(std::string& out, const Figures& f, const ReductionConfig& c) {
  const WorstCase& w = f.worst;
  out += fmt::format("worst relative error over the adversarial family: {}\n", g(w.relative_error));
  if (!w.family.empty())
    out += fmt::format("  input {} ({}): computed {}, exact {}\n", w.witness, w.family, fmt::format("{:.10g}", w.computed),
                       fmt::format("{:.10g}", w.exact));
  out += "bias over gradient-like inputs (mean signed relative error weighted by the exact result squared):\n";
  for (const BiasFigure& b : f.biases)
    out += fmt::format("  {:<14} bias {:>11}  spread {:>9}  stderr {:>8}  {} samples{}  seed {}\n", b.distribution,
                       signed_g(b.bias), g(b.spread), g(b.bias_stderr), b.samples,
                       b.left_out == 0   ? std::string()
                       : b.nonfinite == 0 ? fmt::format(" ({} left out)", b.left_out)
                                          : fmt::format(" ({} left out, {} of them inf or NaN)", b.left_out, b.nonfinite),
                       b.seed);
  out += "failure modes:\n";
  out += fmt::format("  underflow to zero: {}\n", underflow_text(f.underflow));
  out += fmt::format("  overflow: {}\n", overflow_text(f.overflow));
  for (const BiasFigure& b : f.biases)  // typical gradients that overflow (a finding, numerics_findings)
    if (b.nonfinite > 0)
      out += fmt::format("  inf or NaN from {} gradients: {} of {} (first in the {})\n", b.distribution, b.nonfinite,
                         b.samples + b.left_out, b.nonfinite_stage);
  if (c.op == ReduceOp::kAvg)
    out += fmt::format("  avg's scale: {} * {}(1/{}) - 1 = {}\n", c.ranks, dtype_name(c.dtype), c.ranks,
                       signed_g(f.avg_scale_error));
  if (f.order.found)
    out += fmt::format("  order dependence: {} gives {}, {} gives {} (exact {}) on {}\n", f.order.order_a,
                       fmt::format("{:.10g}", f.order.computed_a), f.order.order_b,
                       fmt::format("{:.10g}", f.order.computed_b), fmt::format("{:.10g}", f.order.exact), f.order.witness);
  else
    out += "  order dependence: none found\n";
}

std::string threshold(const UnderflowMode& u) { return u.found ? g(u.input) : "none"; }
std::string threshold(const OverflowMode& o) { return o.found ? g(o.input) : "none"; }

}  // namespace

std::string numerics_fixes_text(const Analysis& a, const std::string& indent, std::optional<double> collective_time_s) {
  if (a.fixes.empty()) return "";
  std::string out = indent + "fixes (the same figures; cost in bytes sent per element and rank";
  out += collective_time_s ? ", and in the collectives' time on the busiest rank):\n" : "):\n";
  const std::string time_head = collective_time_s ? fmt::format(" {:>10}", "time") : "";
  out += fmt::format("{}  {:<18} {:>12} {:>12} {:>12} {:>12} {:>10}{}\n", indent, "", "worst error", "worst bias",
                     "underflow <=", "overflow >=", "bytes", time_head);
  auto row = [&](const std::string& name, const Figures& f, double bytes, double ratio) {
    const std::string time = collective_time_s ? fmt::format(" {:>10}", format_duration(*collective_time_s * ratio)) : "";
    out += fmt::format("{}  {:<18} {:>12} {:>12} {:>12} {:>12} {:>10}{}\n", indent, name, g(f.worst.relative_error),
                       signed_g(f.worst_bias().bias), threshold(f.underflow), threshold(f.overflow),
                       fmt::format("{} (x{})", g(bytes), g(ratio)), time);
  };
  row("as configured", a.figures, a.sent_bytes_per_element, 1);
  for (const Fix& fix : a.fixes) row(fix.name, fix.figures, fix.sent_bytes_per_element, fix.bytes_ratio);
  for (const Fix& fix : a.fixes) out += fmt::format("{}  {}: {}\n", indent, fix.name, fix.note);
  return out;
}

std::optional<double> numerics_collective_time_s(const NumericsFixes& fx, const ProgramResult& r) {
  if (!r.timeline) return std::nullopt;
  std::vector<double> per_rank(static_cast<size_t>(std::max(r.program.num_ranks, 0)), 0.0);
  for (OpId id : fx.ops) {
    const OpTime& t = r.timeline->ops.at(static_cast<size_t>(id));
    const auto rank = static_cast<size_t>(r.program.ops[static_cast<size_t>(id)].rank);
    if (rank < per_rank.size()) per_rank[rank] += t.end_s - t.start_s;
  }
  return per_rank.empty() ? 0.0 : *std::max_element(per_rank.begin(), per_rank.end());
}

/// The job's collective ops of `fx`: its built ops, each counted once per job rank its built
/// rank stands for (Program::rank_classes).
static int64_t job_collective_ops(const NumericsFixes& fx, const Program& p) {
  if (p.rank_classes.empty()) return static_cast<int64_t>(fx.ops.size());
  int64_t n = 0;
  for (OpId id : fx.ops) n += p.job_class(p.ops[static_cast<size_t>(id)].rank).count;
  return n;
}

void write_numerics_fixes(std::ostream& os, const ProgramResult& r) {
  if (r.numerics_fixes.empty()) return;
  os << "\nnumerics fixes:\n";
  for (const NumericsFixes& fx : r.numerics_fixes) {
    std::optional<double> t = numerics_collective_time_s(fx, r);
    const int64_t ops = job_collective_ops(fx, r.program);
    os << fmt::format("  {} ({} collective op{}{})\n", describe(fx.analysis.config), ops, ops == 1 ? "" : "s",
                      t ? fmt::format(", {} on the busiest rank", format_duration(*t)) : std::string());
    os << numerics_fixes_text(fx.analysis, "    ", t);
  }
}

std::string numerics_text(const NumericsReport& r) {
  const Analysis& a = r.analysis;
  const ReductionConfig& c = a.config;
  std::string out = fmt::format("numerics: {}\n", describe(c));
  if (c.op == ReduceOp::kAvg || c.op == ReduceOp::kPremulSum)
    out += fmt::format("  NCCL pre-multiplies every input by {} ({})\n", fmt::format("{:.10g}", nccl_scalar(c)),
                       c.op == ReduceOp::kAvg ? fmt::format("{}(1/{})", dtype_name(c.dtype), c.ranks) : "premul_sum factor");
  out += fmt::format("  sent per element and rank: {} bytes\n", g(a.sent_bytes_per_element));
  figures_text(out, a.figures, c);
  out += numerics_fixes_text(a, "");
  if (r.proof) {
    const ProofResult& p = *r.proof;
    out += fmt::format("Z3 worst case: {}", smt_status_name(p.status));
    if (p.status == SmtStatus::kUnsupported) {
      out += fmt::format(" ({})\n", p.detail);
    } else {
      out += fmt::format(" after {} check{} in {:.2f} s\n", p.checks, p.checks == 1 ? "" : "s", p.seconds);
      out += fmt::format("  bound: {}\n", p.bound);
      std::string ws;
      for (size_t i = 0; i < p.witness.size(); ++i) ws += (i ? ", " : "") + fmt::format("{:.10g}", p.witness[i]);
      out += fmt::format("  {} relative error {} on [{}] (computed {}, exact {})\n",
                         p.status == SmtStatus::kProven ? "largest" : "largest found, not proven:", g(p.relative_error),
                         ws, fmt::format("{:.10g}", p.computed), fmt::format("{:.10g}", p.exact));
      if (!p.detail.empty()) out += fmt::format("  {}\n", p.detail);
    }
  }
  const Tolerances& t = r.tolerances;
  out += fmt::format("tolerances: max_relative_error {}, max_bias {}, underflow judged from {}, overflow up to {}{}{}\n",
                     g(t.max_relative_error), g(t.max_bias), g(t.min_gradient), g(t.max_gradient),
                     t.deterministic ? ", deterministic (bits independent of the fold order)" : "",
                     t.defaults ? " (defaults: set numerics.max_relative_error and numerics.max_bias in a spec, or "
                                  "--max-relative-error and --max-bias)"
                                : "");
  for (const NumericsFinding& f : r.findings) out += fmt::format("{}: {}: {}\n", f.kind, f.check, f.message);
  out += fmt::format("verdict: {}\n", numerics_verdict(r));
  return out;
}

namespace {

json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json config_json(const ReductionConfig& c) {
  json j = {{"dtype", dtype_name(c.dtype)},
            {"input_dtype", dtype_name(c.input_dtype.value_or(c.dtype))},
            {"op", op_name(c.op)},
            {"algorithm", algorithm_name(c.algorithm)},
            {"collective", collective_name(c.collective)},
            {"ranks", c.ranks},
            {"channels", c.channels},
            {"pre_divide", num(c.pre_divide)},
            {"post_divide", num(c.post_divide)},
            {"nccl_scalar", num(nccl_scalar(c))},
            {"description", describe(c)}};
  j["accum_dtype"] = c.algorithm == Algorithm::kNvls ? json(dtype_name(c.accum_dtype.value_or(DType::kFp32))) : json(nullptr);
  if (c.op == ReduceOp::kPremulSum) j["premul_factor"] = num(c.premul_factor);
  return j;
}

json figures_json(const Figures& f) {
  json inputs = json::array();
  for (double v : f.worst.witness_inputs) inputs.push_back(num(v));
  json biases = json::array();
  for (const BiasFigure& b : f.biases)
    biases.push_back({{"distribution", b.distribution}, {"seed", b.seed}, {"samples", b.samples}, {"left_out", b.left_out}, {"nonfinite", b.nonfinite},
                      {"bias", num(b.bias)}, {"spread", num(b.spread)}, {"bias_stderr", num(b.bias_stderr)}});
  return {
      {"worst", {{"relative_error", num(f.worst.relative_error)}, {"computed", num(f.worst.computed)},
                 {"exact", num(f.worst.exact)}, {"family", f.worst.family}, {"witness", f.worst.witness},
                 {"witness_inputs", inputs}, {"ring_start", f.worst.ring_start}}},
      {"bias", biases},
      {"avg_scale_error", num(f.avg_scale_error)},
      {"underflow", {{"found", f.underflow.found}, {"input", num(f.underflow.input)}, {"exact", num(f.underflow.exact)},
                     {"stage", f.underflow.stage}}},
      {"overflow", {{"found", f.overflow.found}, {"input", num(f.overflow.input)}, {"computed", num(f.overflow.computed)},
                    {"exact", num(f.overflow.exact)}, {"stage", f.overflow.stage}}},
      {"order_dependence", {{"found", f.order.found}, {"order_a", f.order.order_a}, {"order_b", f.order.order_b},
                            {"computed_a", num(f.order.computed_a)}, {"computed_b", num(f.order.computed_b)},
                            {"exact", num(f.order.exact)}, {"witness", f.order.witness}}},
  };
}

}  // namespace

std::string numerics_json(const NumericsReport& r) {
  const Analysis& a = r.analysis;
  json fixes = json::array();
  for (const Fix& fix : a.fixes)
    fixes.push_back({{"name", fix.name}, {"note", fix.note}, {"config", config_json(fix.config)},
                     {"figures", figures_json(fix.figures)}, {"sent_bytes_per_element", num(fix.sent_bytes_per_element)},
                     {"bytes_ratio", num(fix.bytes_ratio)}});
  json findings = json::array();
  for (const NumericsFinding& f : r.findings) {
    json data = json::object();
    for (const auto& [k, v] : f.data) data[k] = num(v);
    json inputs = json::array();
    for (double v : f.witness_inputs) inputs.push_back(num(v));
    findings.push_back({{"kind", f.kind}, {"check", f.check}, {"message", f.message}, {"data", data},
                        {"witness", f.witness}, {"witness_inputs", inputs}});
  }
  json proof = nullptr;
  if (r.proof) {
    const ProofResult& p = *r.proof;
    json w = json::array();
    for (double v : p.witness) w.push_back(num(v));
    proof = {{"status", smt_status_name(p.status)}, {"relative_error", num(p.relative_error)}, {"witness", w},
             {"computed", num(p.computed)}, {"exact", num(p.exact)}, {"bound", p.bound}, {"detail", p.detail},
             {"checks", p.checks}, {"seconds", num(p.seconds)}};
  }
  json j = {{"verdict", numerics_verdict(r)},
            {"exit_code", r.exit_code},
            {"config", config_json(a.config)},
            {"tolerances", {{"max_relative_error", num(r.tolerances.max_relative_error)},
                            {"max_bias", num(r.tolerances.max_bias)},
                            {"min_gradient", num(r.tolerances.min_gradient)},
                            {"max_gradient", num(r.tolerances.max_gradient)},
                            {"deterministic", r.tolerances.deterministic},
                            {"defaults", r.tolerances.defaults}}},
            {"figures", figures_json(a.figures)},
            {"sent_bytes_per_element", num(a.sent_bytes_per_element)},
            {"fixes", fixes},
            {"proof", proof},
            {"findings", findings},
            {"stats", {{"reduced_elements", a.reduced_elements}, {"analysis_seconds", num(r.analysis_seconds)}}}};
  return j.dump(2) + "\n";
}

json numerics_fixes_json(const ProgramResult& r) {
  json out = json::array();
  for (const NumericsFixes& fx : r.numerics_fixes) {
    const Analysis& a = fx.analysis;
    std::optional<double> t = numerics_collective_time_s(fx, r);
    json fixes = json::array();
    for (const Fix& fix : a.fixes)
      fixes.push_back({{"name", fix.name}, {"note", fix.note}, {"config", config_json(fix.config)},
                       {"figures", figures_json(fix.figures)}, {"sent_bytes_per_element", num(fix.sent_bytes_per_element)},
                       {"bytes_ratio", num(fix.bytes_ratio)}, {"time_s", t ? num(*t * fix.bytes_ratio) : json(nullptr)}});
    out.push_back({{"config", config_json(a.config)}, {"figures", figures_json(a.figures)},
                   {"sent_bytes_per_element", num(a.sent_bytes_per_element)}, {"collective_ops", job_collective_ops(fx, r.program)},
                   {"collective_time_s", t ? num(*t) : json(nullptr)}, {"fixes", fixes}});
  }
  return out;
}

}  // namespace sc
