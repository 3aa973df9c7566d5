// Placeholder definitions until the Megatron-LM and DeepSpeed readers land: they claim no file.
#include "config/readers.h"

namespace sc::config {

bool is_megatron_config(const std::string&) { return false; }
bool is_deepspeed_config(const std::string&) { return false; }
bool read_megatron(const std::string&, const JobContext&, TrainingJob*, Diagnostics& d) {
  d.error(SourceLoc{}, "Megatron-LM arguments are not read yet");
  return false;
}
bool read_deepspeed(const std::string&, const JobContext&, TrainingJob*, Diagnostics& d) {
  d.error(SourceLoc{}, "DeepSpeed configs are not read yet");
  return false;
}

}  // namespace sc::config
