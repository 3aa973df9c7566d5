// Diagnostics as text, for the tests that assert a message and its location.
#pragma once

#include <string>

#include <fmt/format.h>

#include "pipeline/verify_pipeline.h"
#include "support/diagnostics.h"

namespace sc::test {

/// Every diagnostic of `d` formatted as the CLI prints it ("file:line:col: error: ..."), one per line.
inline std::string all_text(const Diagnostics& d) {
  std::string s;
  for (const auto& x : d.all()) s += format_diagnostic(x) + "\n";
  return s;
}

/// The first error of `d` as "line:col: message", or "" when there is none.
inline std::string first_error(const Diagnostics& d) {
  for (const Diagnostic& x : d.all())
    if (x.severity == Severity::kError) return fmt::format("{}:{}: {}", x.loc.line, x.loc.col, x.message);
  return "";
}

/// True when `r` has a finding of `kind` whose message contains `words`.
inline bool has_finding(const VerifyResult& r, FindingKind kind, const std::string& words) {
  for (const Finding& f : r.findings)
    if (f.kind == kind && f.message.find(words) != std::string::npos) return true;
  return false;
}

}  // namespace sc::test
