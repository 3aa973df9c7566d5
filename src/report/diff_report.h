// `schedcheck diff`: two verify results of the same kind of input side by side (verdict,
// findings added and removed, time, bubbles, memory, communication) and the regressions among
// them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/figures.h"

namespace sc {

/// One figure (a budget_keys() key, or a per-token figure of a framework config: throughput,
/// mfu, tokens_per_step) before and after; either side absent when its report has none.
struct FigureChange {
  std::string key;
  BudgetUnit unit = BudgetUnit::kCount;
  std::optional<RankedValue> old_value, new_value;
  /// Throughput and MFU: a decrease is the regression. Every other figure: an increase.
  bool higher_is_better = false;
  /// Not a like-for-like figure of this pair (a step's time or traffic when the work per step
  /// changed; the span of lowered programs of configs, which covers one or two steps by layout):
  /// shown, never a regression.
  bool informational = false;
  /// new - old, and (new - old) / old (absent when old is 0 or either side is absent).
  std::optional<double> absolute() const;
  std::optional<double> relative() const;
};

/// Two results compared: `old_label` and `new_label` name them ("specs/a.yaml@HEAD~1").
struct ReportDiff {
  std::string old_label, new_label;
  ReportFigures old_figures, new_figures;
  std::vector<std::string> findings_added, findings_removed;  ///< "kind: message", as multisets
  std::vector<FigureChange> figures;  ///< in budget_keys() order, then the per-token figures; only those either side has
  std::vector<std::string> regressions;  ///< filled by find_regressions
  /// Why figures are informational ("the work per step changed from 2.1M to 4.19M tokens: ...").
  std::vector<std::string> notes;
};

/// Compares two verify reports (JSON objects as `verify --format json` prints them).
ReportDiff diff_reports(const std::string& old_label, const nlohmann::json& old_report, const std::string& new_label,
                        const nlohmann::json& new_report);

/// Largest allowed relative change for the worse per figure key; "time" stands for span,
/// step_time, exposed_comm and throughput (time per token: a fall of throughput), "memory" for
/// peak_bytes_per_rank and worst_case_bytes_per_rank, "comm" for comm_bytes and messages,
/// "bubble" for bubble_rate; `throughput` and `mfu` alone bound a fall of those; "findings" (any
/// value) makes a new finding a regression.
using Thresholds = std::map<std::string, double>;

/// Parses "time=5%,memory=2%" (values as fractions 0.05 or percentages 5%); nullopt with `*why`
/// naming the bad item and the keys otherwise.
std::optional<Thresholds> parse_thresholds(const std::string& text, std::string* why);

/// Sets d.regressions: each figure whose relative increase exceeds its threshold ("span 24 s ->
/// 27 s (+12.5%) exceeds time=5%"; from 0 to more counts as infinite increase), and with
/// "findings" each added finding.
void find_regressions(ReportDiff& d, const Thresholds& t);

/// Text: per pair a header, the verdicts, findings added and removed, and a table of figures
/// with old, new, absolute and relative change; then the regressions.
std::string diff_text(const std::vector<ReportDiff>& diffs);

/// JSON: {schema_version, schedcheck_version, exit_code, diffs: [{old, new, verdict: {old, new},
/// exit_code: {old, new}, findings_added, findings_removed, figures: {KEY: {unit, old, new,
/// old_rank, new_rank, absolute, relative, higher_is_better, like_for_like}}, notes, regressions}]}.
std::string diff_json(const std::vector<ReportDiff>& diffs, int exit_code);

/// GitHub-flavoured Markdown for a pull-request comment: a heading per pair and a table.
std::string diff_markdown(const std::vector<ReportDiff>& diffs);

}  // namespace sc
