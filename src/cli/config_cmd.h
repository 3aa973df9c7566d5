// `schedcheck verify` on framework configs: torchtitan TOML, Megatron-LM arguments, DeepSpeed JSON.
#pragma once

#include <string>
#include <vector>

#include "config/job.h"

namespace sc::cli {

/// Output options of verify that apply to a config's lowered program.
struct ConfigOutputs {
  std::string trace, dot, svg;  ///< empty: not written
  bool min_cut = false;
  size_t timeline_ops = 400;
};

/// Reads each config (config/readers.h), lowers it (config/lower_job.h), verifies the composed
/// or FSDP spec, and prints the job's figures (step time, MFU, memory per rank, FSDP crossover,
/// notes, keys not modelled) above the front-end's report; JSON adds a `job` object. Config
/// errors are located diagnostics (exit 2). Returns the combined exit code.
int run_config_verify(const std::vector<std::string>& files, const std::string& format, const config::JobContext& ctx,
                      const ConfigOutputs& out);

}  // namespace sc::cli
