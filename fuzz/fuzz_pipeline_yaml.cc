// libFuzzer harness: the pipeline (and composed) YAML spec reader, then the named-schedule
// generator a spec may ask for.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/named_schedule.h"
#include "spec/yaml_spec.h"
#include "support/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  sc::Diagnostics diags;
  auto spec = sc::parse_yaml_spec("fuzz.yaml", text, diags);
  // Generated schedules are sized by stages x microbatches: keep the fuzzer's inputs quick.
  if (spec && !diags.has_errors() && static_cast<int64_t>(spec->stages) * spec->microbatches <= 4096)
    sc::resolve_named_schedule(*spec, diags);
  sc::clear_sources();
  return 0;
}
