#include "report/diff_report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "report/ci_report.h"
#include "support/version.h"

namespace sc {
namespace {

using nlohmann::json;

/// The figures of a framework config's job that only a diff shows (budgets bound step time and
/// memory): the work of a step and what it yields per token.
struct TokenFigure {
  const char* key;
  BudgetUnit unit;
  const char* what;
  bool higher_is_better;
};
const std::vector<TokenFigure>& token_figures() {
  static const std::vector<TokenFigure> f = {
      {"tokens_per_step", BudgetUnit::kCount, "tokens per step (global batch)", false},
      {"throughput", BudgetUnit::kCount, "throughput (tokens/s)", true},
      {"mfu", BudgetUnit::kFraction, "MFU", true},
  };
  return f;
}

std::optional<RankedValue> token_figure(const ReportFigures& f, const std::string& key) {
  const std::optional<double>& v = key == "tokens_per_step" ? f.tokens_per_step : key == "throughput" ? f.tokens_per_s : f.mfu;
  if (!v) return std::nullopt;
  return RankedValue{*v, -1};
}

const char* what_of(const std::string& key) {
  for (const BudgetKey& k : budget_keys())
    if (key == k.key) return k.what;
  for (const TokenFigure& k : token_figures())
    if (key == k.key) return k.what;
  return "";
}

/// The threshold group of a figure key.
const char* group_of(const std::string& key) {
  if (key == "span" || key == "step_time" || key == "exposed_comm" || key == "throughput") return "time";
  if (key == "mfu") return "mfu";
  if (key == "tokens_per_step") return "work";
  if (key == "peak_bytes_per_rank" || key == "worst_case_bytes_per_rank") return "memory";
  if (key == "comm_bytes" || key == "messages") return "comm";
  return "bubble";
}

std::string value_text(const FigureChange& c, const std::optional<RankedValue>& v) {
  if (!v) return "-";
  std::string s = format_budget_value(c.unit, v->value);
  if (v->rank >= 0) s += fmt::format(" (rank {})", v->rank);
  return s;
}

std::string abs_text(const FigureChange& c) {
  auto a = c.absolute();
  if (!a) return "-";
  if (c.unit == BudgetUnit::kFraction) return fmt::format("{:+.4g} pp", *a * 100);
  std::string s = format_budget_value(c.unit, std::abs(*a));
  return (*a < 0 ? "-" : "+") + s;
}

std::string rel_text(const FigureChange& c) {
  auto r = c.relative();
  if (!r) return c.absolute() && *c.absolute() > 0 ? "new" : "-";
  return fmt::format("{:+.2f}%", *r * 100);
}

/// Elements of `a` not matched in `b` (multiset difference), in `a`'s order.
std::vector<std::string> minus(const std::vector<std::string>& a, std::vector<std::string> b) {
  std::vector<std::string> out;
  for (const auto& x : a) {
    auto it = std::find(b.begin(), b.end(), x);
    if (it != b.end()) b.erase(it);
    else out.push_back(x);
  }
  return out;
}

std::string verdict_text(const ReportFigures& f) { return fmt::format("{} (exit {})", f.verdict, f.exit_code); }

/// "3 files: 1 regressed, 1 in error, 1 unchanged or better (exit 10)".
std::string summary_line(const std::vector<ReportDiff>& diffs, int exit_code) {
  size_t regressed = 0, errors = 0;
  for (const ReportDiff& d : diffs) {
    if (!d.error.empty()) ++errors;
    else if (!d.regressions.empty()) ++regressed;
  }
  std::string parts;
  if (regressed) parts += fmt::format(", {} regressed", regressed);
  if (errors) parts += fmt::format(", {} in error", errors);
  if (diffs.size() > regressed + errors) parts += fmt::format(", {} unchanged or better", diffs.size() - regressed - errors);
  return fmt::format("{} files: {} (exit {})", diffs.size(), parts.substr(2), exit_code);
}

}  // namespace

std::optional<double> FigureChange::absolute() const {
  if (!old_value || !new_value) return std::nullopt;
  return new_value->value - old_value->value;
}

std::optional<double> FigureChange::relative() const {
  if (!old_value || !new_value || old_value->value == 0) return std::nullopt;
  return (new_value->value - old_value->value) / old_value->value;
}

ReportDiff diff_reports(const std::string& old_label, const json& old_json, const std::string& new_label,
                        const json& new_json) {
  ReportDiff d;
  d.old_label = old_label;
  d.new_label = new_label;
  d.old_figures = figures_of_report(old_json);
  d.new_figures = figures_of_report(new_json);
  for (const auto& [label, record] : {std::pair{&old_label, &old_json}, std::pair{&new_label, &new_json}})
    if (record->value("verdict", "") == "error" && d.error.empty()) {
      d.error = first_error_of(*record);
      if (d.error.empty()) d.error = *label + ": it could not be checked (see the error output)";
    }
  if (!d.error.empty()) return d;  // nothing to compare
  // What the framework derived from the keys: the job's degrees and batch shape, both sides.
  if (old_json.contains("job") && new_json.contains("job") && old_json["job"].is_object() && new_json["job"].is_object()) {
    const json& oj = old_json["job"];
    const json& nj = new_json["job"];
    auto moved = [&d](const std::string& name, const json& o, const json& n) {
      if (!o.is_null() && !n.is_null() && o != n)
        d.derived.push_back(fmt::format("{} {} -> {}", name, o.is_string() ? o.get<std::string>() : o.dump(),
                                        n.is_string() ? n.get<std::string>() : n.dump()));
    };
    if (oj.contains("layout") && nj.contains("layout") && oj["layout"].is_object() && nj["layout"].is_object())
      for (const char* k : {"pp", "tp", "cp", "ep", "dp_shard", "dp_replicate"})
        moved(k, oj["layout"].value(k, json()), nj["layout"].value(k, json()));
    for (const char* k : {"world", "microbatches", "microbatch_sequences", "grad_accum", "stages_per_rank", "schedule"})
      moved(k, oj.value(k, json()), nj.value(k, json()));
  }
  d.findings_added = minus(d.new_figures.findings, d.old_figures.findings);
  d.findings_removed = minus(d.old_figures.findings, d.new_figures.findings);
  for (const BudgetKey& k : budget_keys()) {
    FigureChange c{k.key, k.unit, figure_for_key(d.old_figures, k.key), figure_for_key(d.new_figures, k.key)};
    if (c.old_value || c.new_value) d.figures.push_back(c);
  }
  for (const TokenFigure& k : token_figures()) {
    FigureChange c{k.key, k.unit, token_figure(d.old_figures, k.key), token_figure(d.new_figures, k.key),
                   k.higher_is_better};
    if (c.old_value || c.new_value) d.figures.push_back(c);
  }
  // Like for like: a config's span is the lowered program's (one step, or two for FSDP without a
  // pipeline), so its step time is the figure; and when the work per step changed (a batch
  // change), a step's time and traffic measure different work, while throughput and MFU do not.
  const auto& of = d.old_figures;
  const auto& nf = d.new_figures;
  const bool jobs = of.tokens_per_step && nf.tokens_per_step;
  const bool tokens_changed = jobs && std::abs(*of.tokens_per_step - *nf.tokens_per_step) > 0.5;
  // Schedules: the compute summed over ranks (two `gen` outputs of different chunk counts with
  // the same per-stage costs do different work).
  const bool compute_changed = !jobs && of.compute_s && nf.compute_s &&
                               std::abs(*of.compute_s - *nf.compute_s) > 1e-9 * std::max(*of.compute_s, *nf.compute_s);
  const bool work_changed = tokens_changed || compute_changed;
  for (FigureChange& c : d.figures) {
    if (jobs && c.key == "span") c.informational = true;
    if (work_changed && (c.key == "span" || c.key == "step_time" || c.key == "comm_bytes" || c.key == "messages" ||
                         c.key == "exposed_comm"))
      c.informational = true;
  }
  if (compute_changed)
    d.notes.push_back(fmt::format("the two schedules do not do the same work (compute summed over ranks {} and {}): span, "
                                  "step time and communication compare different amounts of work and are not regressions",
                                  format_budget_value(BudgetUnit::kSeconds, *of.compute_s),
                                  format_budget_value(BudgetUnit::kSeconds, *nf.compute_s)));
  if (tokens_changed)
    d.notes.push_back(fmt::format("the work per step changed from {:.0f} to {:.0f} tokens: step time and communication "
                                  "measure different work and are not regressions; throughput and MFU compare like for like",
                                  *of.tokens_per_step, *nf.tokens_per_step));
  return d;
}

std::optional<Thresholds> parse_thresholds(const std::string& text, std::string* why) {
  static const std::vector<std::string> groups = {"time", "memory", "bubble", "comm", "findings"};
  std::vector<std::string> keys = groups;
  for (const BudgetKey& k : budget_keys()) keys.push_back(k.key);
  keys.push_back("throughput");
  keys.push_back("mfu");
  Thresholds t;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      *why = fmt::format("--fail-on-regression: unknown figure '{}' (expected {})", key, fmt::join(keys, ", "));
      return std::nullopt;
    }
    if (key == "findings") {
      t[key] = 0;
      continue;
    }
    if (eq == std::string::npos) {
      *why = fmt::format("--fail-on-regression: '{}' needs a threshold, as {}=5%", item, key);
      return std::nullopt;
    }
    std::string v = item.substr(eq + 1);
    const bool percent = !v.empty() && v.back() == '%';
    if (percent) v.pop_back();
    char* endp = nullptr;
    double x = std::strtod(v.c_str(), &endp);
    if (v.empty() || *endp != '\0' || !std::isfinite(x) || x < 0) {
      *why = fmt::format("--fail-on-regression: '{}': expected a percentage, as {}=5%", item, key);
      return std::nullopt;
    }
    // A bare number has two readings (5 meaning 5 %, or the fraction 5, that is 500 %): refused.
    if (!percent) {
      *why = fmt::format("--fail-on-regression: '{}' has no unit: write {}={}% for {} percent, or {}={}% for the "
                         "fraction {} ({} percent)", item, key, v, v, key, fmt::format("{:g}", x * 100), v,
                         fmt::format("{:g}", x * 100));
      return std::nullopt;
    }
    t[key] = x / 100;
  }
  if (t.empty()) {
    *why = "--fail-on-regression: no thresholds given (as time=5%,memory=2%)";
    return std::nullopt;
  }
  return t;
}

void find_regressions(ReportDiff& d, const Thresholds& t) {
  d.regressions.clear();
  if (!d.error.empty()) return;
  if (d.old_figures.verdict == "holds" && (d.new_figures.verdict == "violated" || d.new_figures.verdict == "inconclusive"))
    d.regressions.push_back(fmt::format("verdict {} -> {}", verdict_text(d.old_figures), verdict_text(d.new_figures)));
  for (const FigureChange& c : d.figures) {
    auto it = t.find(c.key);
    if (it == t.end()) it = t.find(group_of(c.key));
    if (it == t.end() || c.informational || !c.absolute()) continue;
    // For the worse: up for times, memory and traffic; down for throughput and MFU.
    const double worse = c.higher_is_better ? -*c.absolute() : *c.absolute();
    if (worse <= 0) continue;
    const double rel = c.relative() ? std::abs(*c.relative()) : std::numeric_limits<double>::infinity();
    if (rel <= it->second + 1e-12) continue;
    d.regressions.push_back(fmt::format("{} ({}) {} -> {} ({}) exceeds {}={:.4g}%", what_of(c.key), c.key,
                                        value_text(c, c.old_value), value_text(c, c.new_value), rel_text(c), it->first,
                                        it->second * 100));
  }
  if (t.count("findings"))
    for (const auto& f : d.findings_added) d.regressions.push_back("new finding: " + f);
}

int diff_exit_code(const std::vector<ReportDiff>& diffs) {
  int exit = 0;
  for (const ReportDiff& d : diffs) {
    const int code = !d.error.empty() ? 2 : !d.regressions.empty() ? kExitRegression : 0;
    exit = exit == 0 ? code : (code == 0 || code == exit) ? exit : 10;
  }
  return exit;
}

namespace {

/// Changed keys listed per file in text and markdown (JSON lists all): a review reads the first
/// ones; a file rewritten whole is summarised.
constexpr size_t kKeysShown = 12;

/// "parallelism.pipeline_parallel_degree 2 -> 4 (line 52)"; with `code`, key and values in
/// backticks (markdown).
std::string key_change_text(const KeyChange& k, bool code = false) {
  auto q = [code](const std::string& s) { return code ? "`" + s + "`" : s; };
  if (!k.old_value) return fmt::format("{} added: {} (line {})", q(k.key), q(*k.new_value), k.new_line);
  if (!k.new_value) return fmt::format("{} removed (was {}, old line {})", q(k.key), q(*k.old_value), k.old_line);
  return fmt::format("{} {} -> {} (line {})", q(k.key), q(*k.old_value), q(*k.new_value), k.new_line);
}

}  // namespace

json key_changes_json(const std::vector<KeyChange>& keys) {
  json out = json::array();
  for (const KeyChange& k : keys)
    out.push_back({{"key", k.key},
                   {"old", k.old_value ? json(*k.old_value) : json(nullptr)},
                   {"new", k.new_value ? json(*k.new_value) : json(nullptr)},
                   {"old_line", k.old_line ? json(k.old_line) : json(nullptr)},
                   {"new_line", k.new_line ? json(k.new_line) : json(nullptr)}});
  return out;
}

std::string diff_text(const std::vector<ReportDiff>& diffs, int exit_code) {
  std::string out;
  for (size_t i = 0; i < diffs.size(); ++i) {
    const ReportDiff& d = diffs[i];
    if (i) out += "\n";
    out += fmt::format("{} -> {}\n", d.old_label, d.new_label);
    if (!d.error.empty()) {
      out += fmt::format("  ERROR: {} (not compared)\n", d.error);
      continue;
    }
    out += fmt::format("  verdict: {} -> {}\n", verdict_text(d.old_figures), verdict_text(d.new_figures));
    if (!d.keys.empty()) {
      out += fmt::format("  keys changed: {}\n", d.keys.size());
      for (size_t i = 0; i < d.keys.size() && i < kKeysShown; ++i) out += "    " + key_change_text(d.keys[i]) + "\n";
      if (d.keys.size() > kKeysShown)
        out += fmt::format("    ... and {} more (--format json lists every key)\n", d.keys.size() - kKeysShown);
    }
    if (!d.derived.empty()) out += fmt::format("  derived: {}\n", fmt::join(d.derived, ", "));
    out += fmt::format("  findings: {} added, {} removed\n", d.findings_added.size(), d.findings_removed.size());
    for (const auto& f : d.findings_added) out += "    + " + f + "\n";
    for (const auto& f : d.findings_removed) out += "    - " + f + "\n";
    size_t w = 6;
    for (const auto& c : d.figures) w = std::max(w, std::string(what_of(c.key)).size());
    out += fmt::format("  {:<{}}  {:>18}  {:>18}  {:>14}  {:>9}\n", "figure", w, "old", "new", "change", "relative");
    for (const auto& c : d.figures)
      out += fmt::format("  {:<{}}  {:>18}  {:>18}  {:>14}  {:>9}{}\n", what_of(c.key), w, value_text(c, c.old_value),
                         value_text(c, c.new_value), abs_text(c), rel_text(c), c.informational ? "  (not like for like)" : "");
    for (const auto& n : d.notes) out += "  note: " + n + "\n";
    for (const auto& r : d.regressions) out += fmt::format("{}: REGRESSION: {}\n", d.new_label, r);
  }
  if (diffs.size() > 1) out += "\n" + summary_line(diffs, exit_code) + "\n";
  return out;
}

std::string diff_json(const std::vector<ReportDiff>& diffs, int exit_code) {
  json list = json::array();
  for (const ReportDiff& d : diffs) {
    json figs = json::object();
    for (const auto& c : d.figures) {
      auto val = [](const std::optional<RankedValue>& v) { return v ? json(v->value) : json(nullptr); };
      auto rank = [](const std::optional<RankedValue>& v) { return v && v->rank >= 0 ? json(v->rank) : json(nullptr); };
      figs[c.key] = {{"unit", c.unit == BudgetUnit::kFraction  ? "fraction"
                              : c.unit == BudgetUnit::kSeconds ? "s"
                              : c.unit == BudgetUnit::kBytes   ? "bytes"
                                                               : "count"},
                     {"old", val(c.old_value)},
                     {"new", val(c.new_value)},
                     {"old_rank", rank(c.old_value)},
                     {"new_rank", rank(c.new_value)},
                     {"absolute", c.absolute() ? json(*c.absolute()) : json(nullptr)},
                     {"relative", c.relative() ? json(*c.relative()) : json(nullptr)},
                     {"higher_is_better", c.higher_is_better},
                     {"like_for_like", !c.informational}};
    }
    list.push_back({{"old", d.old_label},
                    {"new", d.new_label},
                    {"verdict", {{"old", d.old_figures.verdict}, {"new", d.new_figures.verdict}}},
                    {"exit_code", {{"old", d.old_figures.exit_code}, {"new", d.new_figures.exit_code}}},
                    {"findings_added", d.findings_added},
                    {"findings_removed", d.findings_removed},
                    {"figures", figs},
                    {"notes", d.notes},
                    {"keys_changed", key_changes_json(d.keys)},
                    {"derived", d.derived},
                    {"regressions", d.regressions},
                    {"error", d.error.empty() ? json(nullptr) : json(d.error)}});
  }
  json j = {{"schema_version", kReportSchemaVersion},
            {"schedcheck_version", kToolVersion},
            {"exit_code", exit_code},
            {"diffs", list}};
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string diff_markdown(const std::vector<ReportDiff>& diffs, int exit_code) {
  auto cell = [](std::string s) {
    std::string out;
    for (char c : s) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
    return out;
  };
  std::string out;
  if (diffs.size() > 1) out += "**schedcheck:** " + cell(summary_line(diffs, exit_code)) + "\n\n";
  for (const ReportDiff& d : diffs) {
    out += fmt::format("### schedcheck: `{}` → `{}`\n\n", cell(d.old_label), cell(d.new_label));
    if (!d.error.empty()) {
      out += fmt::format("**Error:** :x: {} (not compared)\n\n", cell(d.error));
      continue;
    }
    out += fmt::format("**Verdict:** {} → {}  \n", cell(verdict_text(d.old_figures)), cell(verdict_text(d.new_figures)));
    if (!d.keys.empty()) {
      out += "**Keys changed:**";
      for (size_t i = 0; i < d.keys.size() && i < kKeysShown; ++i) out += " " + cell(key_change_text(d.keys[i], true)) + ";";
      out.back() = ' ';
      if (d.keys.size() > kKeysShown) out += fmt::format("(and {} more) ", d.keys.size() - kKeysShown);
      out += " \n";
    }
    if (!d.derived.empty()) out += "**Derived:** " + cell(fmt::format("{}", fmt::join(d.derived, ", "))) + "  \n";
    out += fmt::format("**Findings:** {} added, {} removed\n\n", d.findings_added.size(), d.findings_removed.size());
    for (const auto& f : d.findings_added) out += "- ➕ " + cell(f) + "\n";
    for (const auto& f : d.findings_removed) out += "- ➖ " + cell(f) + "\n";
    if (!d.findings_added.empty() || !d.findings_removed.empty()) out += "\n";
    out += "| figure | old | new | change | relative |\n|---|---:|---:|---:|---:|\n";
    for (const auto& c : d.figures)
      out += fmt::format("| {}{} | {} | {} | {} | {} |\n", what_of(c.key), c.informational ? " (not like for like)" : "",
                         cell(value_text(c, c.old_value)), cell(value_text(c, c.new_value)), abs_text(c), rel_text(c));
    for (const auto& n : d.notes) out += "\n_Note:_ " + cell(n) + "\n";
    if (!d.regressions.empty()) {
      out += "\n**Regressions:**\n\n";
      for (const auto& r : d.regressions) out += "- :x: " + cell(r) + "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace sc
