// Text and JSON of a reduction numerics analysis (`schedcheck numerics`, later the verify pass).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "check/verify.h"

#include "numerics/analysis.h"
#include "numerics/proof_result.h"

namespace sc {

/// Everything one `numerics` report shows: the analysis, the tolerances it was judged by, its
/// findings, the Z3 worst case when one was asked for, and the seconds the analysis took.
struct NumericsReport {
  numerics::Analysis analysis;
  numerics::Tolerances tolerances;
  std::vector<numerics::NumericsFinding> findings;
  std::optional<numerics::ProofResult> proof;
  double analysis_seconds = 0;
  int exit_code = 0;
};

/// "holds", "violated" or "inconclusive" (a Z3 search that was asked for and did not finish, with
/// no finding).
std::string numerics_verdict(const NumericsReport& r);

/// The report for people: configuration, worst case with its input, bias and spread per
/// distribution with sample counts and seeds, failure modes, the fixes side by side with their
/// byte cost, the Z3 result, and the verdict with each finding. Ends with a newline.
std::string numerics_text(const NumericsReport& r);

/// One JSON object: verdict, exit_code, config, tolerances, figures, fixes, proof (or null),
/// findings (each with kind "numerics", check, message, data, witness), stats. Keys are stable
/// (specs/numerics.md lists them). Non-finite numbers are written as the strings "inf", "-inf", "nan".
std::string numerics_json(const NumericsReport& r);

/// The usual fixes of `a` side by side with the configuration as analysed: a header line (the
/// line "fixes (...)" at `indent`), one row per configuration (worst relative error, worst bias,
/// underflow and overflow thresholds, bytes sent per element and rank with their ratio, and, when
/// `collective_time_s` is given, that time scaled by the byte ratio: bandwidth-bound collectives),
/// then one note per fix. Empty when `a` has no fixes.
std::string numerics_fixes_text(const numerics::Analysis& a, const std::string& indent,
                                std::optional<double> collective_time_s = std::nullopt);

/// The busiest rank's simulated time in the collectives of `fx`, in seconds; absent without a
/// timeline.
std::optional<double> numerics_collective_time_s(const NumericsFixes& fx, const ProgramResult& r);

/// The "numerics fixes" section of a verify text report: for each configuration with a numerics
/// finding, its description, the collectives' time and numerics_fixes_text. Nothing when none.
void write_numerics_fixes(std::ostream& os, const ProgramResult& r);

/// The same as a JSON array, one object per configuration: config, figures, sent_bytes_per_element,
/// collective_time_s (null without a timeline) and fixes (each with name, note, config, figures,
/// sent_bytes_per_element, bytes_ratio, time_s).
nlohmann::json numerics_fixes_json(const ProgramResult& r);

}  // namespace sc
