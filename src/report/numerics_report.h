// Text and JSON of a reduction numerics analysis (`schedcheck numerics`, later the verify pass).
#pragma once

#include <optional>
#include <string>
#include <vector>

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

}  // namespace sc
