// Readers of framework configs: each fills a TrainingJob, applies the framework's own startup
// validation rules in its words (docs/facts/config-keys.md#torchtitan-validation-rules, #megatron-derived-sizes, #megatron-startup-checks, #deepspeed-batch-and-precision, #deepspeed-pipeline), located at the key or
// flag that set the value, and lists the keys it read but does not model.
#pragma once

#include <string>

#include "config/job.h"
#include "support/diagnostics.h"

namespace sc::config {

/// True for a torchtitan job TOML (`.toml` with a [parallelism], [training] or [model] table).
bool is_torchtitan_config(const std::string& path);
/// True for Megatron-LM arguments: a shell script or an arguments file (`.sh`, `.args`, `.txt`)
/// that names Megatron flags (--pipeline-model-parallel-size, --micro-batch-size, ...).
bool is_megatron_config(const std::string& path);
/// True for a DeepSpeed config (`.json` with zero_optimization or train_batch_size /
/// train_micro_batch_size_per_gpu).
bool is_deepspeed_config(const std::string& path);

/// Each reader: reads `path`, registers it as a source, fills `*job` and returns true; or adds
/// located errors to `diags` and returns false. Facts the config cannot state (world size,
/// model, hardware) come from `ctx` where the config is silent.
bool read_torchtitan(const std::string& path, const JobContext& ctx, TrainingJob* job, Diagnostics& diags);
bool read_megatron(const std::string& path, const JobContext& ctx, TrainingJob* job, Diagnostics& diags);
bool read_deepspeed(const std::string& path, const JobContext& ctx, TrainingJob* job, Diagnostics& diags);

}  // namespace sc::config
