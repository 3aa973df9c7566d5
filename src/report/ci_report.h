// Reports for CI systems: SARIF 2.1.0 (code scanning), JUnit XML (test dashboards) and GitHub
// Actions workflow commands (annotations on a pull request's diff).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace sc {

/// All three render the per-file results of one `schedcheck verify` run. `records` is a JSON
/// list (a value, never text parsed back) with one verify report object per input file, as `verify --format json` prints it
/// (schema/report.schema.json, schema_version 1): each object has `path`, `exit_code`,
/// `verdict` ("holds", "violated", "inconclusive" or "error") and `findings` ({kind, message,
/// ops, locations: [{file, line, col} or null]}, ops and locations index-aligned); a spec error
/// has `diagnostics` ({severity, file, line, col, message}) instead. Router reports add
/// `properties` (name -> {result, message}). Throws nlohmann::json::exception only when
/// `records` is not such a list (a programming error).

/// Rule ids of SARIF results and JUnit test names: the finding kinds a front-end reports and
/// "spec-error". Each has a one-line description and a help text.
struct FindingRule {
  const char* id;
  const char* description;
  const char* help;
};
/// The known rules, in a fixed order (SARIF ruleIndex is the position); a kind not listed gets
/// a generic rule appended at run time.
const FindingRule* finding_rules(size_t* count);

/// A SARIF 2.1.0 log with one run: tool.driver (name, version, rules with help), one result per
/// finding (level error) and per spec error, located at the finding's first located op (else the
/// file, line 1) with the counterexample's other ops as relatedLocations, and
/// partialFingerprints["schedcheckFindingHash/v1"]: a hash of the file, the kind, the ops (or the
/// message with its digits removed) and the ranks, not of line numbers, so an edit elsewhere in
/// the file keeps a finding's identity. `exit_code` is the run's (invocations[0].exitCode).
std::string sarif_log(const nlohmann::json& records, int exit_code);

/// JUnit XML: <testsuites> with a <testsuite name=PATH> per file and a <testcase
/// classname=PATH name=PROPERTY> per checked property (structure, causality, deadlock, channel,
/// residency, memory, numerics, and budget when budgets were checked; a router's own
/// properties); a violated property has one <failure message=... type=KIND> per finding with its
/// located ops as text; a spec error is one test case "spec" with an <error>. Times in seconds.
std::string junit_xml(const nlohmann::json& records);

/// GitHub Actions workflow commands: `::error file=F,line=L,col=C,title=schedcheck KIND::MSG` per
/// finding and spec error (at most `max_annotations`, then one `::warning::` saying how many
/// were left out), then a plain summary line "schedcheck: N files, H hold, V violated, ...
/// (exit X)". Property values escape %, CR, LF, ':' and ','; messages escape %, CR and LF.
std::string github_annotations(const nlohmann::json& records, int exit_code, size_t max_annotations = 50);

/// A record in error's first error diagnostic, located as "FILE:LINE:COL: message" (FILE alone
/// without a line); empty when it has none.
std::string first_error_of(const nlohmann::json& record);

/// The line that ends a run over several files (text, GitHub): "schedcheck: 3 files, 1 hold, 1
/// violated, 1 in error; 4 findings (exit 10)", where findings count spec errors too.
std::string results_summary(const nlohmann::json& records, int exit_code);

/// `text` escaped for a workflow command's message (%, \r, \n as %25, %0D, %0A), or for a
/// property value (`property`: also ':' and ',' as %3A, %2C).
std::string github_escape(const std::string& text, bool property);

}  // namespace sc
