// `schedcheck verify` on framework configs: torchtitan TOML, Megatron-LM arguments, DeepSpeed JSON.
#pragma once

#include <string>
#include <vector>

#include "config/job.h"
#include "support/diagnostics.h"

namespace sc::cli {

class ReportSink;  // cli/common.h

/// Output options of verify that apply to a config's lowered program.
struct ConfigOutputs {
  std::string trace, dot, svg;  ///< empty: not written
  bool min_cut = false;
  size_t timeline_ops = 400;
  bool trace_all_ranks = false;  ///< --trace-all-ranks (chrome_trace)
};

/// Reads a framework config into a job with the reader its kind takes (torchtitan TOML,
/// DeepSpeed JSON, else Megatron-LM arguments; config/readers.h). False after adding errors.
bool read_config_job(const std::string& path, const config::JobContext& ctx, config::TrainingJob* job, Diagnostics& d);

/// Reads each config (config/readers.h), lowers it (config/lower_job.h), verifies the composed
/// or FSDP spec, and adds each file's report to `sink`: the JSON value with a `job` object, and
/// for text the job's figures (step time, MFU, memory per rank, FSDP crossover, notes, keys not
/// modelled) above the front-end's report. Config errors are located diagnostics (exit 2; added
/// as an error report). Returns the combined exit code.
int run_config_verify(const std::vector<std::string>& files, ReportSink& sink, const config::JobContext& ctx,
                      const ConfigOutputs& out);

}  // namespace sc::cli
