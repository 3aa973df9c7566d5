// libFuzzer harness: the megatron config reader, then lower_job on what it accepts.
#include "config_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return sc::fuzz::run_config(data, size, ".sh", sc::config::read_megatron);
}
