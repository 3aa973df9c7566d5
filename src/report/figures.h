// The headline figures of a verify result (span, step time, bubbles, memory, communication),
// read from its versioned JSON report, and what budgets and `schedcheck diff` make of them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "spec/budget.h"

namespace sc {

/// A figure with the rank it belongs to (-1 when it is not a per-rank maximum).
struct RankedValue {
  double value = 0;
  int rank = -1;
};

/// Figures of one file's verify report (schema/report.schema.json); each is absent when the
/// report has none (a run that deadlocks has no timing; a router has no span).
/// Units: seconds, bytes, fractions in [0, 1], counts.
struct ReportFigures {
  std::string path;
  std::string verdict;      ///< "holds", "violated", "inconclusive", "error"
  int exit_code = 0;
  std::vector<std::string> findings;  ///< "kind: message" of each finding, in report order
  std::optional<double> span_s;       ///< timing.span
  std::optional<double> step_time_s;  ///< job.predicted.step_time_s, else fsdp_figures.step_time_s, else timing.makespan
  std::optional<double> bubble_rate;  ///< timing.bubble_rate
  std::optional<double> exposed_comm_s;  ///< fsdp_figures.exposed_comm_s
  std::optional<RankedValue> peak_bytes;        ///< max over ranks of memory.peak_bytes_per_rank
  std::optional<RankedValue> worst_case_bytes;  ///< max over ranks of memory.worst_case_bytes_per_rank
  std::optional<double> messages;    ///< stats.messages + stats.implicit_transfers (P2P messages)
  std::optional<double> comm_bytes;  ///< fsdp_figures.comm_bytes_per_step, else stats.message_bytes (P2P)
  /// A framework config's job only: job.tokens_per_step (the global batch in tokens, the work of
  /// one optimizer step), job.predicted.tokens_per_s and job.predicted.mfu (a fraction).
  std::optional<double> tokens_per_step, tokens_per_s, mfu;
  /// stats.compute_s: the work of the program, every compute op's duration summed over ranks.
  std::optional<double> compute_s;
};

/// The figures of `report` (one report object). Never fails: a missing or mistyped key leaves
/// its figure absent.
ReportFigures figures_of_report(const nlohmann::json& report);

/// The figure `key` of budget_keys() in `f`, or none.
std::optional<RankedValue> figure_for_key(const ReportFigures& f, const std::string& key);

/// One budget compared with its figure: `value` absent when the report has no such figure
/// (then not exceeded).
struct BudgetCheck {
  Budget budget;
  std::optional<RankedValue> value;
  bool exceeded = false;
};

/// Compares each budget with its figure (a value above the limit exceeds it; limits are
/// inclusive).
std::vector<BudgetCheck> check_budgets(const ReportFigures& f, const std::vector<Budget>& budgets);

/// "span 27 s exceeds the budget of 25 s (+8%)" or, per rank, "peak memory per rank 14 GiB on
/// rank 0 exceeds ..." for an exceeded check; "span 20 s within the budget of 25 s" otherwise;
/// "span: not predicted for this file" without a value.
std::string budget_message(const BudgetCheck& c);

/// Adds the budget checks to `report` (one report object): a `budgets` list ({key, value, rank,
/// limit, unit, exceeded, source, file, line, col}), a finding of kind "budget" per exceeded
/// budget (located at the budget's line, or naming the command line), `exit_code` as given and
/// verdict "violated" when a budget is exceeded.
void add_budget_results(nlohmann::json& report, const std::vector<BudgetCheck>& checks, int exit_code);

}  // namespace sc
