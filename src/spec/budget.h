// Budgets: limits a spec (its `budget:` mapping) or the command line (--budget KEY=VALUE) puts on
// the predicted figures of a schedule, for gating changes in CI.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/diagnostics.h"
#include "support/source.h"

namespace sc {

/// The figures a budget can bound, with the unit of their values.
enum class BudgetUnit { kFraction, kSeconds, kBytes, kCount };

/// One budgetable figure: its key in `budget:` and for --budget, its unit and what it is.
struct BudgetKey {
  const char* key;   ///< "bubble_rate", "span", "step_time", "peak_bytes_per_rank", ...
  BudgetUnit unit;
  const char* what;  ///< for messages and help: "bubble rate (idle / (ranks x span))"
};

/// The keys, in a fixed order: bubble_rate (fraction, or a percentage "5%"), span and step_time
/// (durations: "12ms", a bare number is seconds), exposed_comm (duration: communication time no
/// compute hides, FSDP), peak_bytes_per_rank and worst_case_bytes_per_rank (the largest over
/// ranks; byte counts "70GiB"), messages (P2P messages per step, a count) and comm_bytes (bytes
/// communicated per step).
const std::vector<BudgetKey>& budget_keys();

/// One budget: the figure's key, the largest value it may take (in the key's unit), the text as
/// written, and where it was stated (`loc` in the spec, or `from_command_line`).
struct Budget {
  std::string key;
  BudgetUnit unit = BudgetUnit::kCount;
  double limit = 0;
  std::string text;
  SourceLoc loc;
  bool from_command_line = false;
};

/// Reads the `budget:` mapping of the YAML spec `path` (none: an empty list). Errors (a budget
/// that is not a map, an unknown key with "did you mean", a value that does not parse in the
/// key's unit, a negative value) go to `diags` at their file:line:col.
std::vector<Budget> load_budgets(const std::string& path, Diagnostics& diags);

/// Parses "KEY=VALUE" of --budget (as a budget: entry); nullopt with `*why` set otherwise.
std::optional<Budget> parse_budget_option(const std::string& text, std::string* why);

/// `budgets` with each of `overrides` replacing the entry of the same key (or appended).
std::vector<Budget> with_overrides(std::vector<Budget> budgets, const std::vector<Budget>& overrides);

/// `value` in `unit` for people: "12.5%", "1.5 ms", "2 GiB", "96".
std::string format_budget_value(BudgetUnit unit, double value);

}  // namespace sc
