// libFuzzer harness: Megatron-LM's --pipeline-model-parallel-layout, read directly
// (megatron_stage_layers) and as a launch script passes it (read_megatron, then lower_job).
// Input: byte 0 the pipeline degree (1-8), byte 1 --num-layers (0-63), byte 2 flags (bit 0
// --account-for-embedding-in-pipeline-split, bit 1 ...-loss-..., bits 2-3 the quoting in the
// script: double, single, none, or the value through a variable), the rest the layout text.
// A split that is accepted must hold pp x vpp stages, none negative, whose decoder layers sum to
// --num-layers; a refusal must name what Megatron names.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config_harness.h"
#include "config/megatron_layers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  sc::config::MegatronSplitFlags f;
  f.pp = 1 + data[0] % 8;
  f.num_layers = data[1] % 64;
  f.embedding = (data[2] & 1) != 0;
  f.loss = (data[2] & 2) != 0;
  const int quoting = (data[2] >> 2) & 3;
  const std::string layout(reinterpret_cast<const char*>(data) + 3, size - 3);
  f.layout = layout;

  const sc::config::MegatronSplit split = sc::config::megatron_stage_layers(f);
  if (split.error.empty()) {
    if (split.vpp < 1 || split.stage_layers.size() != static_cast<size_t>(f.pp) * static_cast<size_t>(split.vpp))
      std::abort();
    int64_t sum = 0;
    for (int64_t n : split.stage_layers) {
      if (n < 0) std::abort();
      sum += n;
    }
    if (sum != f.num_layers) std::abort();
  }

  // The same value in a launch script, quoted as bash would take it.
  std::string value;
  for (char c : layout) {
    if (c == '\0') return 0;  // a script cannot pass it
    value += c;
  }
  std::string word;
  std::string prelude;
  switch (quoting) {
    case 0: word = "\"" + value + "\""; break;
    case 1: word = "'" + value + "'"; break;
    case 2: word = value; break;
    default:
      prelude = "LAYOUT=\"" + value + "\"\n";
      word = "\"$LAYOUT\"";
      break;
  }
  const std::string script = "#!/bin/bash\n" + prelude +
                             "torchrun --nproc_per_node 8 pretrain_gpt.py --pipeline-model-parallel-size " +
                             std::to_string(f.pp) + " --num-layers " + std::to_string(f.num_layers) +
                             (f.embedding ? " --account-for-embedding-in-pipeline-split" : "") +
                             (f.loss ? " --account-for-loss-in-pipeline-split" : "") +
                             " --pipeline-model-parallel-layout " + word +
                             " --micro-batch-size 1 --global-batch-size 16 --hidden-size 256"
                             " --num-attention-heads 8 --seq-length 1024 --vocab-size 1000\n";
  return sc::fuzz::run_config(reinterpret_cast<const uint8_t*>(script.data()), script.size(), ".sh",
                              sc::config::read_megatron);
}
