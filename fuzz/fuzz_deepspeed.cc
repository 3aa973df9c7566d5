// libFuzzer harness: the deepspeed config reader, then lower_job on what it accepts.
#include "config_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return sc::fuzz::run_config(data, size, ".json", sc::config::read_deepspeed);
}
