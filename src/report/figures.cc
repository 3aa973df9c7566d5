#include "report/figures.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sc {
namespace {

using nlohmann::json;

std::optional<double> number_at(const json& j, std::initializer_list<const char*> keys) {
  const json* at = &j;
  for (const char* k : keys) {
    if (!at->is_object() || !at->contains(k)) return std::nullopt;
    at = &(*at)[k];
  }
  return at->is_number() ? std::optional<double>(at->get<double>()) : std::nullopt;
}

std::optional<RankedValue> max_per_rank(const json& j, const char* section, const char* key) {
  if (!j.contains(section) || !j[section].is_object() || !j[section].contains(key) || !j[section][key].is_array())
    return std::nullopt;
  std::optional<RankedValue> best;
  int rank = 0;
  for (const json& v : j[section][key]) {
    if (v.is_number() && (!best || v.get<double>() > best->value)) best = RankedValue{v.get<double>(), rank};
    ++rank;
  }
  return best;
}

std::optional<RankedValue> plain(std::optional<double> v) {
  return v ? std::optional<RankedValue>(RankedValue{*v, -1}) : std::nullopt;
}

const BudgetKey& key_of(const std::string& key) {
  for (const BudgetKey& k : budget_keys())
    if (key == k.key) return k;
  return budget_keys().front();
}

}  // namespace

ReportFigures figures_of_report(const json& j) {
  ReportFigures f;
  if (!j.is_object()) return f;
  f.verdict = j.value("verdict", "");
  f.exit_code = j.value("exit_code", 0);
  if (j.contains("path") && j["path"].is_string()) f.path = j["path"];
  if (j.contains("findings") && j["findings"].is_array())
    for (const json& x : j["findings"])
      if (x.is_object()) f.findings.push_back(x.value("kind", "") + ": " + x.value("message", ""));
  f.span_s = number_at(j, {"timing", "span"});
  // A framework config's job predicts the optimizer step (gradient accumulation included).
  f.step_time_s = number_at(j, {"job", "predicted", "step_time_s"});
  if (!f.step_time_s) f.step_time_s = number_at(j, {"fsdp_figures", "step_time_s"});
  if (!f.step_time_s) f.step_time_s = number_at(j, {"timing", "makespan"});
  f.bubble_rate = number_at(j, {"timing", "bubble_rate"});
  f.exposed_comm_s = number_at(j, {"fsdp_figures", "exposed_comm_s"});
  f.peak_bytes = max_per_rank(j, "memory", "peak_bytes_per_rank");
  f.worst_case_bytes = max_per_rank(j, "memory", "worst_case_bytes_per_rank");
  f.messages = number_at(j, {"stats", "messages"});
  if (auto implicit = number_at(j, {"stats", "implicit_transfers"}); implicit && f.messages) *f.messages += *implicit;
  f.comm_bytes = number_at(j, {"fsdp_figures", "comm_bytes_per_step"});
  if (!f.comm_bytes) f.comm_bytes = number_at(j, {"stats", "message_bytes"});
  f.tokens_per_step = number_at(j, {"job", "tokens_per_step"});
  f.tokens_per_s = number_at(j, {"job", "predicted", "tokens_per_s"});
  f.mfu = number_at(j, {"job", "predicted", "mfu"});
  f.compute_s = number_at(j, {"stats", "compute_s"});
  return f;
}

std::optional<RankedValue> figure_for_key(const ReportFigures& f, const std::string& key) {
  if (key == "bubble_rate") return plain(f.bubble_rate);
  if (key == "span") return plain(f.span_s);
  if (key == "step_time") return plain(f.step_time_s);
  if (key == "exposed_comm") return plain(f.exposed_comm_s);
  if (key == "peak_bytes_per_rank") return f.peak_bytes;
  if (key == "worst_case_bytes_per_rank") return f.worst_case_bytes;
  if (key == "messages") return plain(f.messages);
  if (key == "comm_bytes") return plain(f.comm_bytes);
  return std::nullopt;
}

std::vector<BudgetCheck> check_budgets(const ReportFigures& f, const std::vector<Budget>& budgets) {
  std::vector<BudgetCheck> out;
  for (const Budget& b : budgets) {
    BudgetCheck c{b, figure_for_key(f, b.key), false};
    // A relative tolerance of 1e-9 keeps a figure equal to its budget (up to rounding) within it.
    c.exceeded = c.value && c.value->value > b.limit * (1 + 1e-9) + 1e-12;
    out.push_back(c);
  }
  return out;
}

std::string budget_message(const BudgetCheck& c) {
  const BudgetKey& k = key_of(c.budget.key);
  const std::string limit = format_budget_value(c.budget.unit, c.budget.limit);
  if (!c.value) return fmt::format("{} ({}): not predicted for this file (budget {})", k.what, c.budget.key, limit);
  const std::string value = format_budget_value(c.budget.unit, c.value->value);
  const std::string on = c.value->rank >= 0 ? fmt::format(" on rank {}", c.value->rank) : "";
  if (!c.exceeded) return fmt::format("{} ({}) {}{} within the budget of {}", k.what, c.budget.key, value, on, limit);
  const double pct = c.budget.limit > 0 ? (c.value->value / c.budget.limit - 1) * 100 : 0;
  std::string over = c.budget.limit <= 0 ? "" : pct >= 100 ? fmt::format(" (+{:.0f}%)", pct) : fmt::format(" (+{:.3g}%)", pct);
  return fmt::format("{} ({}) {}{} exceeds the budget of {}{}", k.what, c.budget.key, value, on, limit, over);
}

void add_budget_results(json& j, const std::vector<BudgetCheck>& checks, int exit_code) {
  json list = json::array();
  bool any = false;
  for (const BudgetCheck& c : checks) {
    json loc = nullptr;
    if (c.budget.loc.valid())
      loc = {{"file", source_name(c.budget.loc.file)}, {"line", c.budget.loc.line}, {"col", c.budget.loc.col}};
    list.push_back({{"key", c.budget.key},
                    {"value", c.value ? json(c.value->value) : json(nullptr)},
                    {"rank", c.value && c.value->rank >= 0 ? json(c.value->rank) : json(nullptr)},
                    {"limit", c.budget.limit},
                    {"exceeded", c.exceeded},
                    {"source", c.budget.from_command_line ? "command line" : "spec"},
                    {"location", loc},
                    {"message", budget_message(c)}});
    if (!c.exceeded) continue;
    any = true;
    json f = {{"kind", "budget"},
              {"message", budget_message(c) + (c.budget.from_command_line
                                                   ? fmt::format(" (--budget {}={})", c.budget.key, c.budget.text)
                                                   : "")},
              {"ranks", c.value->rank >= 0 ? json::array({c.value->rank}) : json::array()},
              {"ops", json::array({"budget." + c.budget.key})},
              {"locations", json::array({loc})},
              {"details", json::array()}};
    if (!j.contains("findings") || !j["findings"].is_array()) j["findings"] = json::array();
    j["findings"].push_back(f);
  }
  j["budgets"] = list;
  j["exit_code"] = exit_code;
  if (any) j["verdict"] = "violated";
}

}  // namespace sc
