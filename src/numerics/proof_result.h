// The result of a solver's worst-case search for one reduction (plain data, no solver types).
#pragma once

#include <string>
#include <vector>

namespace sc::numerics {

/// What the search established.
/// kProven: no input in the bound has a larger relative error than `relative_error` (UNSAT), and
/// `witness` attains it. kWitness: a witness was found but the last check was cut short (so a worse
/// input may exist: inconclusive). kInconclusive: no answer within the limits. kUnsupported: the
/// configuration is outside what this encoding covers (see `detail`).
enum class SmtStatus { kProven, kWitness, kInconclusive, kUnsupported };

const char* smt_status_name(SmtStatus s);  ///< "proven", "witness", "inconclusive", "unsupported"

struct ProofResult {
  SmtStatus status = SmtStatus::kInconclusive;
  double relative_error = 0;        ///< |computed - exact| / exact of the witness
  std::vector<double> witness;      ///< the inputs in fold order (rank where the fold starts first)
  double computed = 0, exact = 0;
  std::string bound;                ///< the input set searched, in words
  std::string detail;               ///< why inconclusive or unsupported; Z3's reason
  int checks = 0;                   ///< solver checks made
  double seconds = 0;
};

}  // namespace sc::numerics
