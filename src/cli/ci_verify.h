// `schedcheck verify` with per-file result records: the CI formats (SARIF, GitHub annotations,
// JUnit XML) and budgets, over every front-end's versioned JSON report.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/job.h"

namespace sc::cli {

/// Exit code of an exceeded budget (alone; with other violations it combines to 10).
inline constexpr int kExitBudget = 18;

class ReportSink;  // cli/common.h

/// Runs one input file through its front-end's verify with the other options of the command,
/// adding its report to `sink` (and its text, when the sink wants text); returns its exit code.
using RunOneFile = std::function<int(const std::string& file, ReportSink& sink)>;

/// What the recorded run prints and checks beyond the per-file reports.
struct RecordedOptions {
  std::string format = "text";         ///< text, json, sarif or github
  std::optional<std::string> junit;    ///< write JUnit XML here too
  std::vector<std::string> budgets;    ///< --budget KEY=VALUE, for every file
};

/// True when `format`, `options` or a file's `budget:` mapping need the recorded run.
bool needs_recorded_run(const std::vector<std::string>& files, const RecordedOptions& options);

/// Checks each of `files` once on its own with `run_one` (its JSON report value is its record;
/// for text also its text report), adds its budgets (the spec's `budget:` overridden by --budget),
/// and prints text (each file's report, then its budgets), json (one object, a list for
/// several), sarif or github; writes JUnit XML to options.junit when given. A malformed --budget
/// is a usage error (1); a malformed budget: mapping a spec error (2, located). The exit code
/// combines the files' (combine_exit), an exceeded budget counting kExitBudget.
int run_recorded(const std::vector<std::string>& files, const RecordedOptions& options, const RunOneFile& run_one);

/// The versioned JSON report of one file as `run_one` gives it, with `path` set; a run that
/// gave no report (a usage error) becomes {path, exit_code, verdict "error" or "violated"}.
nlohmann::json record_of(const std::string& file, const RunOneFile& run_one, int* exit_code);

}  // namespace sc::cli

namespace sc::cli {

/// Verifies one input file through its front-end (the table in frontends.h) with default
/// options, except the framework-config facts of `job` (--gpus, --model, --hardware,
/// --seq-len, --env, ...), which apply when the file is a config; adds its report to `sink`;
/// returns its exit code (verify_cmd.cc).
int verify_one_file(const std::string& file, ReportSink& sink, const config::JobContext& job = {});

}  // namespace sc::cli
