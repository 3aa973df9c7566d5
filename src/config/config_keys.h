// The keys torchtitan, DeepSpeed and Megatron-LM define, kept in the repository with the upstream
// commits they were read at (src/config/config_keys.cc, written by scripts/config_keys.py;
// docs/facts/config-keys.md#key-dictionaries). The readers model a key, list it once as not
// modelled with its location, or, when the framework does not define it, report it as an error
// with the closest defined key.
#pragma once

#include <string>
#include <vector>

namespace sc::config {

/// torchtitan: "section.key" (nested tables "section.sub.key"; "a.b.*" admits every key under
/// the table a.b). Every name JobConfig defined from the first TOML config to the last
/// (torchtitan 238fa995), plus the current config system's names the reader accepts.
const std::vector<std::string>& torchtitan_keys();
/// DeepSpeed: setting names at any depth of the config ("zero_optimization", "overlap_comm"),
/// from DeepSpeed's config constants and config models at edaa7221.
const std::vector<std::string>& deepspeed_keys();
/// Megatron-LM: "--flag" names of arguments.py over its history up to d98e8a64, and those its
/// ArgumentGroupFactory generates from the config dataclasses.
const std::vector<std::string>& megatron_flags();

/// True when torchtitan defines `dotted` ("parallelism.pipeline_parallel_degree"), directly or
/// under a "prefix.*" entry; for a table (`is_table`), also when it is a prefix of a defined key.
bool is_torchtitan_key(const std::string& dotted, bool is_table = false);
/// Whether some torchtitan key lies below the table `dotted` ("quantize.linear.float8" has its options).
bool torchtitan_table_has_keys(const std::string& dotted);
bool is_deepspeed_key(const std::string& name);
bool is_megatron_flag(const std::string& flag);

/// The defined key closest to an undefined one (support/diagnostics.h closest_match): for
/// torchtitan the closest key of the same table, given without the table ("pipeline_parallel_degree");
/// empty when none is close.
std::string closest_torchtitan_key(const std::string& dotted);
std::string closest_deepspeed_key(const std::string& name);
std::string closest_megatron_flag(const std::string& flag);

}  // namespace sc::config
