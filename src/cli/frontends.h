// The front-ends the commands know, in one table: which input files each reads, which verify
// options apply to it, and the function that verifies its files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/job.h"

namespace sc::cli {

class ReportSink;  // cli/common.h

/// What `verify` asks of a front-end, from the command line (each option already checked to
/// apply to the front-end's files). Unset options leave the spec's own values.
struct VerifyRequest {
  std::optional<std::string> semantics, placement, blocking, lower;  ///< as the verify options
  std::optional<std::string> trace, dot, svg;                        ///< output paths
  bool min_cut = false;
  bool trace_all_ranks = false;             ///< --trace-all-ranks: a process per rank, none folded
  bool forward_only = false;
  size_t timeline_ops = 400;
  std::string engine = "graph";            ///< graph or smt
  config::JobContext job;                  ///< framework configs: --gpus, --model, --env, ...
  std::optional<double> time_limit_s;      ///< --time-limit, seconds (solvers)
  uint64_t rlimit = 0;                     ///< --rlimit; 0 = the default
};

/// Verifies `files` (all of this front-end's) and adds each file's report to the sink (its text
/// too when the sink wants text); writes the requested outputs; returns the combined exit code
/// (2 for spec errors, which are also added to the sink as an error report).
using VerifyRunner = std::function<int(const std::vector<std::string>& files, const VerifyRequest& request,
                                       ReportSink& sink)>;

/// One kind of input. `claims` is true when the file is this front-end's (decided by extension
/// and top-level keys, never by a file's position on the command line); `options` are the
/// verify options that apply to it (--format always does); `run` verifies its files.
struct FrontEnd {
  const char* name;  ///< "torchtitan", "deepspeed", "megatron", "router", "fsdp", "composed", "pipeline"
  const char* what;  ///< for messages: "router specs (a top-level router: key)"
  bool (*claims)(const std::string& path);
  std::vector<std::string> options;
  VerifyRunner run;
};

/// The table, in detection order; the last (pipeline: YAML specs and PyTorch CSVs) claims every
/// file the others do not.
const std::vector<FrontEnd>& front_ends();

/// Adds a front-end to the table, before the pipeline entry that claims every other file: a new
/// kind of input is this one entry (its claims, options and runner); `verify`, its formats, CI
/// reports, budgets and `diff` then take it as they take the others.
void register_front_end(FrontEnd front_end);

/// The front-end of `path`.
const FrontEnd& front_end_for(const std::string& path);

/// The pipeline front-end's runner (pipeline and composed specs, PyTorch CSVs; verify_cmd.cc).
int run_pipeline_verify(const std::vector<std::string>& files, const VerifyRequest& request, ReportSink& sink);

}  // namespace sc::cli
