// libFuzzer harness: the PyTorch schedule CSV reader and the bare-CSV spec built from it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "spec/csv_schedule.h"
#include "support/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  sc::Diagnostics diags;
  (void)sc::spec_from_csv_text("fuzz.csv", text, diags, std::nullopt);
  sc::clear_sources();
  return 0;
}
