// `schedcheck diff`: two verify results of the same kind of input side by side (verdict,
// findings added and removed, time, bubbles, memory, communication) and the regressions among
// them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/figures.h"
#include "support/key_change.h"

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
  /// Non-empty when either side is an input error (verdict "error"): that side's first error,
  /// located ("configs/a.toml:3:1: ..."; the label when it has no location). Such a pair has no
  /// findings or figures and no regressions; it counts as an input error (exit 2).
  std::string error;
  /// The keys of the file that changed (set by the caller, which reads both versions), in the
  /// new file's order; empty when the caller had none to give (a CSV, an added file).
  std::vector<KeyChange> keys;
  /// What the framework derived from those keys and moved with them, from both reports' `job`:
  /// "dp_shard 32 -> 16", "microbatches 8 -> 4" (parallel degrees, microbatches and their size,
  /// gradient accumulation, stages per rank, world size, schedule); empty for specs.
  std::vector<std::string> derived;
};

/// `keys` as JSON: [{"key", "old", "new", "old_line", "new_line"}], null where absent (the diff
/// JSON's `keys_changed`, and a verify record's for sarif_log's related locations).
nlohmann::json key_changes_json(const std::vector<KeyChange>& keys);

/// Compares two verify reports (JSON objects as `verify --format json` prints them).
ReportDiff diff_reports(const std::string& old_label, const nlohmann::json& old_report, const std::string& new_label,
                        const nlohmann::json& new_report);

/// Largest allowed relative change for the worse per figure key; "time" stands for span,
/// step_time, exposed_comm and throughput (time per token: a fall of throughput), "memory" for
/// peak_bytes_per_rank and worst_case_bytes_per_rank, "comm" for comm_bytes and messages,
/// "bubble" for bubble_rate; `throughput` and `mfu` alone bound a fall of those; "findings" (any
/// value) makes a new finding a regression.
using Thresholds = std::map<std::string, double>;

/// Parses "time=5%,memory=2%" (each value a percentage with its '%'); nullopt with `*why` naming
/// the bad item and the keys otherwise. A value without its unit ("time=5") is refused with both
/// readings spelled out (5 %, or the fraction 5, that is 500 %).
std::optional<Thresholds> parse_thresholds(const std::string& text, std::string* why);

/// Sets d.regressions: a verdict that held and now does not (violated or inconclusive; whatever
/// the thresholds, `t` may be empty), each figure whose relative increase exceeds its threshold
/// ("span 24 s -> 27 s (+12.5%) exceeds time=5%"; from 0 to more counts as infinite increase),
/// and with "findings" each added finding. A pair in error (d.error) has none.
void find_regressions(ReportDiff& d, const Thresholds& t);

/// The exit code of a diff run over `diffs` (after find_regressions): 0 when nothing regressed
/// and nothing is in error, kExitRegression (19) when some pair regressed, 2 when some pair is in
/// error, 10 when both (the pairs' codes combined as verify combines files').
int diff_exit_code(const std::vector<ReportDiff>& diffs);

/// Exit code of a diff whose pairs regressed.
inline constexpr int kExitRegression = 19;

/// Text: per pair a header, the verdicts, findings added and removed, and a table of figures
/// with old, new, absolute and relative change; then the regressions (a pair in error: its
/// error instead). With several pairs a last line counts them: "3 files: 1 regressed, 1 in
/// error, 1 unchanged or better (exit 10)".
std::string diff_text(const std::vector<ReportDiff>& diffs, int exit_code);

/// JSON: {schema_version, schedcheck_version, exit_code, diffs: [{old, new, verdict: {old, new},
/// exit_code: {old, new}, findings_added, findings_removed, figures: {KEY: {unit, old, new,
/// old_rank, new_rank, absolute, relative, higher_is_better, like_for_like}}, notes, regressions,
/// error (the located input error, or null)}]}.
std::string diff_json(const std::vector<ReportDiff>& diffs, int exit_code);

/// GitHub-flavoured Markdown for a pull-request comment: with several pairs a summary line
/// first (as diff_text's last), then a heading per pair and a table (a pair in error: its error).
std::string diff_markdown(const std::vector<ReportDiff>& diffs, int exit_code);

}  // namespace sc
