// libFuzzer harness: a pipeline spec with `phases:` (a training step and an evaluation in one
// spec), through the commands that read phases: `verify` (the program a phase builds, forward-only
// frees, the collectives between phases) and `compare --phase` (one training phase narrowed out of
// the spec, then the named schedules generated for it). Inputs without phases are skipped: the
// pipeline YAML harness covers them. Whatever the input says, neither command may end in an
// internal error (70), and compare on a phase it accepted may not be inconclusive (5): the
// schedules it generates for a training phase are sized by that phase alone.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli_util.h"
#include "spec/yaml_spec.h"
#include "support/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    sc::Diagnostics diags;
    auto spec = sc::parse_yaml_spec("fuzz.yaml", text, diags);
    sc::clear_sources();
    // Generated schedules are sized by stages x microbatches: keep the inputs quick.
    if (!spec || diags.has_errors() || spec->phases.empty() ||
        static_cast<int64_t>(spec->stages) * spec->microbatches > 1024 || spec->ranks > 64)
      return 0;
  }
  static const std::string path = "/tmp/schedcheck-fuzz-" + std::to_string(getpid()) + "-phases.yaml";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  if (sc::fuzz::run_cli_quiet({"schedcheck", "verify", path}) == 70) std::abort();
  sc::clear_sources();
  for (const char* phase : {"1", "2"}) {
    const int code = sc::fuzz::run_cli_quiet(
        {"schedcheck", "compare", path, "--phase", phase, "--schedules", "1f1b,gpipe,self"});
    if (code == 70 || code == 5) std::abort();
    sc::clear_sources();
  }
  return 0;
}
