#include "cli/frontends.h"

#include <filesystem>

#include "config/readers.h"
#include "fsdp/fsdp_yaml.h"
#include "spec/router_spec.h"
#include "spec/yaml_util.h"
#include "support/source.h"

namespace sc::cli {
namespace {

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

}  // namespace

const std::vector<FrontEnd>& front_ends() {
  static const std::vector<FrontEnd> table = {
      {"torchtitan", "torchtitan job configs (.toml)", config::is_torchtitan_config, kConfigOptions},
      {"deepspeed", "DeepSpeed configs (.json with zero_optimization or a batch size)", config::is_deepspeed_config,
       with(kConfigOptions, {"--micro-batch-size", "--grad-accum"})},
      {"megatron", "Megatron-LM launch scripts and argument files", config::is_megatron_config,
       with(kConfigOptions, {"--env"})},
      {"router", "router specs (a top-level router: key)", is_router_spec, {"--time-limit", "--rlimit"}},
      {"fsdp", "fsdp specs (a top-level fsdp: key, no mesh:)", is_fsdp_spec, {"--trace", "--dot", "--svg", "--memory-min-cut", "--budget"}},
      {"composed", "composed specs (a top-level mesh: key)", composed,
       {"--semantics", "--blocking", "--lower", "--trace", "--dot", "--svg", "--memory-min-cut", "--engine smt",
        "--timeline-ops", "--budget", "--time-limit", "--rlimit"}},
      {"pipeline", "pipeline specs and PyTorch schedule CSVs", anything,
       {"--semantics", "--placement", "--blocking", "--lower", "--trace", "--dot", "--svg", "--memory-min-cut",
        "--engine smt", "--forward-only", "--timeline-ops", "--budget", "--time-limit", "--rlimit"}},
  };
  return table;
}

const FrontEnd& front_end_for(const std::string& path) {
  for (const FrontEnd& f : front_ends())
    if (f.claims(path)) return f;
  return front_ends().back();
}

}  // namespace sc::cli
