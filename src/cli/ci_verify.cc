#include "cli/ci_verify.h"

#include <algorithm>

#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "report/ci_report.h"
#include "report/figures.h"
#include "spec/budget.h"
#include "spec/yaml_util.h"
#include "support/diagnostics.h"
#include "support/source.h"
#include "support/version.h"

namespace sc::cli {
namespace {

using nlohmann::json;

bool declares_budget(const std::string& path) {
  std::string text, why;
  return yaml_util::has_yaml_extension(path) && read_input_file(path, &text, &why) &&
         yaml_util::declares_key(text, "budget");
}

}  // namespace

bool needs_recorded_run(const std::vector<std::string>& files, const RecordedOptions& options) {
  if (options.format == "sarif" || options.format == "github" || options.junit || !options.budgets.empty()) return true;
  for (const auto& f : files)
    if (declares_budget(f)) return true;
  return false;
}

namespace {

/// `j` (one file's report, or null when the run gave none) with the keys every record has.
json completed(json j, const std::string& file, int exit_code) {
  if (!j.is_object()) j = json::object();
  if (!j.contains("schema_version")) j["schema_version"] = kReportSchemaVersion;
  if (!j.contains("schedcheck_version")) j["schedcheck_version"] = kToolVersion;
  if (!j.contains("exit_code")) j["exit_code"] = exit_code;
  if (!j.contains("verdict")) j["verdict"] = exit_code == kExitSpec ? "error" : "violated";
  j["path"] = file;
  return j;
}

/// Runs `file` once into a sink of `format` whose text goes to `text`; its record.
json run_into(const std::string& file, const RunOneFile& run_one, const std::string& format, std::ostream& text,
              int* exit_code) {
  ReportSink sink(text, format, false);
  *exit_code = run_one(file, sink);
  return completed(sink.values().empty() ? json() : sink.values().back(), file, *exit_code);
}

}  // namespace

json record_of(const std::string& file, const RunOneFile& run_one, int* exit_code) {
  return run_into(file, run_one, "json", std::cout, exit_code);
}

int run_recorded(const std::vector<std::string>& files, const RecordedOptions& options, const RunOneFile& run_one) {
  if (options.junit) {
    std::string problem = check_output_path("--junit", *options.junit, files);
    if (!problem.empty()) {
      std::cerr << "schedcheck: error: " << problem << "\n";
      return kExitUsage;
    }
  }
  std::vector<Budget> overrides;
  for (const auto& text : options.budgets) {
    std::string why;
    auto b = parse_budget_option(text, &why);
    if (!b) {
      std::cerr << "schedcheck: error: " << why << "\n";
      return kExitUsage;
    }
    for (const Budget& earlier : overrides)
      if (earlier.key == b->key) {  // the last one would win silently: say which one was meant
        std::cerr << fmt::format("schedcheck: error: --budget {} is given twice ('{}' and '{}'); give it once\n",
                                 b->key, earlier.text, b->text);
        return kExitUsage;
      }
    overrides.push_back(*b);
  }
  // Each file's budgets are read before it is checked: a bad budget: mapping makes that file one
  // result in error (its diagnostics), and the other files are still checked.
  std::vector<std::vector<Budget>> budgets;
  std::vector<std::optional<json>> budget_errors;
  for (const auto& f : files) {
    Diagnostics diags;
    budgets.push_back(with_overrides(load_budgets(f, diags), overrides));
    if (!diags.has_errors()) {
      budget_errors.emplace_back();
      continue;
    }
    json rec = diagnostics_value(diags);
    rec["path"] = f;
    budget_errors.emplace_back(std::move(rec));
    report_spec_errors(diags);
  }

  int exit = 0;
  json records = json::array();
  for (size_t i = 0; i < files.size(); ++i) {
    int code = 0;
    // One run per file: its record, and for text its report (written here, printed below with
    // its budgets).
    std::ostringstream text;
    if (budget_errors[i]) {
      exit = combine_exit(exit, kExitSpec);
      if (options.format == "text")
        std::cout << (i ? "\n" : "") << files[i] << ": ERROR: " << first_error_of(*budget_errors[i]) << " (exit "
                  << kExitSpec << ")\n";
      records.push_back(std::move(*budget_errors[i]));
      continue;
    }
    json record = run_into(files[i], run_one, options.format == "text" ? "text" : "json", text, &code);
    if (options.format == "text" && code == kExitSpec) {
      const std::string first = first_error_of(record);
      text << files[i] << ": ERROR: " << (first.empty() ? "it could not be checked (see above)" : first) << " (exit "
           << code << ")\n";
    }
    std::vector<BudgetCheck> checks;
    if (code != kExitSpec && !budgets[i].empty()) {
      checks = check_budgets(figures_of_report(record), budgets[i]);
      for (const auto& c : checks)
        if (c.exceeded) code = combine_exit(code, kExitBudget);
      add_budget_results(record, checks, code);
    }
    exit = combine_exit(exit, code);
    if (options.format == "text") {
      if (i) std::cout << "\n";
      std::string report = text.str();
      // The headline was written before the budgets were checked: it says what the exit is.
      const size_t exceeded_count =
          static_cast<size_t>(std::count_if(checks.begin(), checks.end(), [](const BudgetCheck& c) { return c.exceeded; }));
      const size_t eol = report.find('\n');
      if (exceeded_count && eol != std::string::npos) {
        const std::string budgets_note = fmt::format("{} of {} budgets exceeded", exceeded_count, checks.size());
        if (const size_t at = report.rfind(" (exit ", eol); at != std::string::npos)  // "holds (exit 0)"
          report.replace(at, eol - at, fmt::format("; {} (exit {})", budgets_note, code));
        else if (const size_t at2 = report.rfind(", exit ", eol); at2 != std::string::npos)  // "(4 findings, exit 13)"
          report.replace(at2, eol - at2, fmt::format("; {}, exit {})", budgets_note, code));
      }
      std::cout << report;
      if (!checks.empty()) {
        std::cout << "budgets:\n";
        size_t exceeded = 0;
        for (const auto& c : checks) {
          const std::string where = c.budget.from_command_line ? "command line" : format_loc(c.budget.loc);
          std::cout << fmt::format("  {}: {}{}\n", where, c.exceeded ? "EXCEEDED: " : "", budget_message(c));
          exceeded += c.exceeded ? 1 : 0;
        }
        if (exceeded)
          std::cout << fmt::format("{}: BUDGET EXCEEDED ({} of {} budgets, exit {})\n", files[i], exceeded,
                                   checks.size(), code);
      }
    }
    records.push_back(std::move(record));
  }
  if (options.format == "text" && files.size() > 1) std::cout << "\n" << results_summary(records, exit) << "\n";
  if (options.format == "json") {
    const json& out = records.size() == 1 ? records[0] : records;
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else if (options.format == "sarif") {
    std::cout << sarif_log(records, exit);
  } else if (options.format == "github") {
    std::cout << github_annotations(records, exit);
  }
  if (options.junit && !write_output(*options.junit, junit_xml(records), "--junit")) return kExitUsage;
  return exit;
}

}  // namespace sc::cli
