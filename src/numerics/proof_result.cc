#include "numerics/proof_result.h"

namespace sc::numerics {

const char* smt_status_name(SmtStatus s) {
  switch (s) {
    case SmtStatus::kProven: return "proven";
    case SmtStatus::kWitness: return "witness";
    case SmtStatus::kInconclusive: return "inconclusive";
    case SmtStatus::kUnsupported: return "unsupported";
  }
  return "?";
}

}  // namespace sc::numerics
