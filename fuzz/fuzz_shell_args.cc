// libFuzzer harness: the bash launch-script expander alone (variables, defaults, arithmetic,
// arrays), with its bounds as invariants: no value past kMaxShellValue, no more expanded text
// than kMaxShellExpansion, whatever the script. A violation aborts (a finding).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/shell_args.h"
#include "support/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const int32_t file = sc::register_source("fuzz.sh", "");
  const sc::config::ShellArgs a = sc::config::read_shell_args(file, text);
  size_t total = 0;
  for (const auto& [name, var] : a.vars) {
    if (var.value.size() > sc::config::kMaxShellValue) std::abort();
    total += var.value.size();
  }
  for (const auto& f : a.flags)
    for (const auto& v : f.values) total += v.text.size();
  // Values and flags hold expansions and literal text of the script (at most its size each time
  // it is referenced, itself counted in the expansion bound).
  if (total > sc::config::kMaxShellExpansion + a.vars.size() * size + size * 2) std::abort();
  return 0;
}
