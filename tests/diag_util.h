// Diagnostics as text, for the tests that assert a message and its location.
#pragma once

#include <string>

#include "support/diagnostics.h"

namespace sc::test {

/// Every diagnostic of `d` formatted as the CLI prints it ("file:line:col: error: ..."), one per line.
inline std::string all_text(const Diagnostics& d) {
  std::string s;
  for (const auto& x : d.all()) s += format_diagnostic(x) + "\n";
  return s;
}

}  // namespace sc::test
