#include "cli/frontends.h"

#include <filesystem>

#include "cli/config_cmd.h"
#include "config/readers.h"
#include "fsdp/fsdp_yaml.h"
#include "spec/router_spec.h"
#include "spec/yaml_util.h"
#include "support/source.h"

namespace sc::cli {

// The runners of the other front-ends (router_cmd.cc, fsdp_cmd.cc).
int run_router_verify(const std::vector<std::string>& files, ReportSink& sink, double time_limit_s, uint64_t rlimit);
int run_fsdp_verify(const std::vector<std::string>& files, ReportSink& sink, const std::string& trace,
                    const std::string& dot, bool force_min_cut, const std::string& svg, bool trace_all_ranks);

namespace {

/// Wall-clock bound of the router proofs when --time-limit is not given, seconds (a 127-byte
/// spec of 16 experts under expert choice once searched for minutes).
constexpr double kRouterDefaultTimeLimitS = 60;

int run_configs(const std::vector<std::string>& files, const VerifyRequest& q, ReportSink& sink) {
  return run_config_verify(files, sink, q.job,
                           ConfigOutputs{q.trace.value_or(""), q.dot.value_or(""), q.svg.value_or(""), q.min_cut,
                                         q.timeline_ops, q.trace_all_ranks});
}
int run_routers(const std::vector<std::string>& files, const VerifyRequest& q, ReportSink& sink) {
  return run_router_verify(files, sink, q.time_limit_s.value_or(kRouterDefaultTimeLimitS), q.rlimit);
}
int run_fsdp(const std::vector<std::string>& files, const VerifyRequest& q, ReportSink& sink) {
  return run_fsdp_verify(files, sink, q.trace.value_or(""), q.dot.value_or(""), q.min_cut, q.svg.value_or(""),
                         q.trace_all_ranks);
}

bool declares(const std::string& path, const char* key) {
  std::string text, why;
  return yaml_util::has_yaml_extension(path) && read_input_file(path, &text, &why) && yaml_util::declares_key(text, key);
}

bool composed(const std::string& path) { return declares(path, "mesh"); }
bool anything(const std::string&) { return true; }

/// Options of the framework-config front-ends: the job's facts and the lowered program's outputs.
const std::vector<std::string> kConfigOptions = {"--gpus", "--model", "--hardware", "--seq-len", "--efficiency", "--budget", "--trace", "--dot", "--svg",
                                                 "--memory-min-cut", "--timeline-ops"};

std::vector<std::string> with(std::vector<std::string> options, std::initializer_list<const char*> more) {
  options.insert(options.end(), more.begin(), more.end());
  return options;
}


std::vector<FrontEnd>& table() {
  static std::vector<FrontEnd> t = {
      {"torchtitan", "torchtitan job configs (.toml)", config::is_torchtitan_config, kConfigOptions, run_configs},
      {"deepspeed", "DeepSpeed configs (.json with zero_optimization or a batch size)", config::is_deepspeed_config,
       with(kConfigOptions, {"--micro-batch-size", "--grad-accum", "--tp", "--pp"}), run_configs},
      {"megatron", "Megatron-LM launch scripts and argument files", config::is_megatron_config,
       with(kConfigOptions, {"--env"}), run_configs},
      {"router", "router specs (a top-level router: key)", is_router_spec, {"--time-limit", "--rlimit"}, run_routers},
      {"fsdp", "fsdp specs (a top-level fsdp: key, no mesh:)", is_fsdp_spec,
       {"--trace", "--dot", "--svg", "--memory-min-cut", "--budget"}, run_fsdp},
      {"composed", "composed specs (a top-level mesh: key)", composed,
       {"--semantics", "--blocking", "--lower", "--trace", "--dot", "--svg", "--memory-min-cut", "--engine smt",
        "--timeline-ops", "--budget", "--time-limit", "--rlimit"},
       run_pipeline_verify},
      {"pipeline", "pipeline specs and PyTorch schedule CSVs", anything,
       {"--semantics", "--placement", "--blocking", "--lower", "--trace", "--dot", "--svg", "--memory-min-cut",
        "--engine smt", "--forward-only", "--timeline-ops", "--budget", "--time-limit", "--rlimit"},
       run_pipeline_verify},
  };
  return t;
}

}  // namespace

const std::vector<FrontEnd>& front_ends() { return table(); }

void register_front_end(FrontEnd front_end) {
  std::vector<FrontEnd>& t = table();
  t.insert(t.end() - 1, std::move(front_end));
}

const FrontEnd& front_end_for(const std::string& path) {
  for (const FrontEnd& f : front_ends())
    if (f.claims(path)) return f;
  return front_ends().back();
}

}  // namespace sc::cli
