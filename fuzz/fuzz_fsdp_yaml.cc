// libFuzzer harness: the FSDP / ZeRO-3 YAML spec reader.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fsdp/fsdp_yaml.h"
#include "support/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  sc::Diagnostics diags;
  (void)sc::parse_fsdp_spec("fuzz.yaml", text, diags);
  sc::clear_sources();
  return 0;
}
