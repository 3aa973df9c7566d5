// DeepSpeed config JSON to a TrainingJob, with DeepSpeed's own checks in its words
// (docs/facts/config-keys.md#deepspeed-zero-keys, #deepspeed-batch-and-precision, #deepspeed-pipeline). JSON is read with yaml-cpp, whose marks locate every value.
#include <algorithm>
#include <cmath>
#include <charconv>
#include <filesystem>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "config/config_keys.h"
#include "config/file_facts.h"
#include "config/readers.h"

#include "spec/yaml_util.h"

namespace sc::config {
namespace {

using yaml_util::Entry;
using yaml_util::Reader;

/// A DeepSpeed object's keys by name, in file order, with duplicates reported.
std::vector<std::pair<std::string, Entry>> entries(Reader& r, const YAML::Node& map, const std::string& section) {
  std::vector<std::pair<std::string, Entry>> out;
  std::map<std::string, int32_t> seen;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) {
      r.error(r.loc(kv.first), fmt::format("a key must be a name, got {}", yaml_util::describe(kv.first)));
      continue;
    }
    const std::string& name = kv.first.Scalar();
    auto [it, fresh] = seen.emplace(name, r.loc(kv.first).line);
    if (!fresh) {
      r.error(r.loc(kv.first), fmt::format("duplicate key '{}{}' (first given at line {})",
                                           section.empty() ? "" : section + ".", name, it->second));
      continue;
    }
    out.emplace_back(name, Entry{kv.first, kv.second});
  }
  return out;
}

/// Largest batch figure read: the product micro × accumulation × data parallel stays in range.
constexpr double kMaxBatch = 1 << 20;

class DeepSpeedReader {
 public:
  DeepSpeedReader(const std::string& path, int32_t file, const JobContext& ctx, Diagnostics& diags)
      : path_(path), ctx_(ctx), diags_(diags), r_(file, diags) {}

  Reader& reader() { return r_; }

  bool run(const YAML::Node& root, TrainingJob* job) {
    const size_t errors_before = diags_.error_count();
    TrainingJob& j = *job;
    j = TrainingJob{};
    j.framework = "deepspeed";
    j.path = path_;
    j.file = r_.file_start();
    j.hardware = ctx_.hardware;
    j.schedule = "1f1b";  // the pipeline engine's TrainSchedule (docs/facts/config-keys.md#deepspeed-pipeline)
    if (!root.IsMap()) {
      r_.error(r_.loc(root), fmt::format("a DeepSpeed config is a JSON object of settings, got {}",
                                         yaml_util::describe(root)));
      return false;
    }
    for (auto& [name, e] : entries(r_, root, "")) top_key(name, e, j);
    context(j);
    if (ctx_.gpus > 0) {
      layout(j);
    } else if (!train_loc_.valid() && !micro_loc_.valid() && ctx_.micro_batch_size <= 0) {
      diags_.error(r_.file_start(), kNoBatch);  // said now, not after --gpus is given
    }
    r_.note_unshown();
    return diags_.error_count() == errors_before;
  }

 private:
  /// DeepSpeed's error for a config with no batch size (runtime/config.py _batch_assertion), and
  /// the option that gives one.
  static constexpr const char* kNoBatch =
      "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided (or pass --micro-batch-size N, "
      "as the Hugging Face Trainer fills it from its own arguments)";

  /// A whole number: a JSON integer or an integral float such as 5e7 (DeepSpeed's own configs
  /// write element counts that way). Errors at the value.
  std::optional<int64_t> count(const Entry& e, const std::string& key, int64_t min, double max = 9.0e18) {
    const SourceLoc l = r_.loc(e);
    if (!e.value.IsScalar()) {
      r_.error(l, fmt::format("{} must be a number, got {}", key, yaml_util::describe(e.value)));
      return std::nullopt;
    }
    const std::string& s = e.value.Scalar();
    double d = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(d)) {
      r_.error(l, fmt::format("{} must be a number, got '{}'{}", key, yaml_util::printable(s),
                              s == "auto" ? " ('auto' is filled in by the Hugging Face Trainer; give the value)" : ""));
      return std::nullopt;
    }
    if (d != std::floor(d)) {
      r_.error(l, fmt::format("{} must be a whole number, got {}", key, s));
      return std::nullopt;
    }
    if (d < static_cast<double>(min)) {
      r_.error(l, fmt::format("{} must be at least {}, got {}", key, min, s));
      return std::nullopt;
    }
    if (d > max) {
      r_.error(l, fmt::format("{} is too large (at most {}), got {}", key, static_cast<int64_t>(max), s));
      return std::nullopt;
    }
    return static_cast<int64_t>(d);
  }

  /// A batch key left to the autotuner (`"auto"`, filled in by the Hugging Face Trainer).
  static bool is_auto(const Entry& e) { return e.value.IsScalar() && e.value.Scalar() == "auto"; }

  /// A key read but not modelled: listed once with its location when DeepSpeed defines it; an
  /// error with the closest defined name when it does not (config_keys.h). DeepSpeed's own
  /// config models forbid unknown fields in their blocks (zero_optimization, ...) and ignore
  /// unknown top-level keys; a misspelt top-level key silently keeps the default, so it is an
  /// error here too.
  void unmodelled(TrainingJob& j, const std::string& name, const Entry& e) {
    const std::string leaf = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
    if (!is_deepspeed_key(leaf)) {
      const std::string near = closest_deepspeed_key(leaf);
      r_.error(r_.loc(e.key), fmt::format("unknown key '{}': DeepSpeed defines no such setting{}", name,
                                          near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
      return;
    }
    j.unmodelled.emplace_back(name, r_.loc(e.key));
  }

  void top_key(const std::string& name, const Entry& e, TrainingJob& j) {
    if (name == "train_batch_size") {
      train_loc_ = r_.loc(e);
      if (is_auto(e)) train_auto_ = true;
      else train_ = count(e, name, 1, kMaxBatch);
    } else if (name == "train_micro_batch_size_per_gpu") {
      micro_loc_ = r_.loc(e);
      if (is_auto(e)) micro_auto_ = true;
      else micro_ = count(e, name, 1, kMaxBatch);
    } else if (name == "gradient_accumulation_steps") {
      gas_loc_ = r_.loc(e);
      if (is_auto(e)) gas_auto_ = true;
      else gas_ = count(e, name, 1, kMaxBatch);
    } else if (name == "zero_optimization") {
      zero(e, j);
    } else if (name == "bf16" || name == "bfloat16" || name == "fp16") {
      precision_block(name, e, j);
    } else if (name == "communication_data_type") {
      comm_loc_ = r_.loc(e);
      const std::string v = e.value.IsScalar() ? e.value.Scalar() : yaml_util::describe(e.value);
      if (v == "fp32" || v == "fp16" || v == "bf16") {
        comm_ = v;
      } else {
        // runtime/config.py get_communication_data_type
        r_.error(comm_loc_, fmt::format("invalid communication_data_type; supported data types: ['fp16', 'bf16', "
                                        "'fp32'], got {}",
                                        e.value.IsScalar() ? fmt::format("'{}'", yaml_util::printable(v)) : v));
      }
    } else if (name == "pipeline") {
      pipeline_block(e, j);
    } else if (name == "activation_checkpointing") {
      if (!r_.is_map(e, name, "activation checkpointing settings")) return;
      // The block configures deepspeed.checkpointing; the model code calls checkpoint() per block.
      j.recompute = model::Recompute::kFull;
      j.where["recompute"] = r_.loc(e.key);
      for (auto& [k, v] : entries(r_, e.value, name)) unmodelled(j, name + "." + k, v);
    } else {
      unmodelled(j, name, e);
    }
  }

  /// zero_optimization (runtime/zero/config.py): stage and the ZeRO-3 prefetch and residency
  /// limits, in parameters.
  void zero(const Entry& e, TrainingJob& j) {
    if (!r_.is_map(e, "zero_optimization", "ZeRO settings")) return;
    for (auto& [k, v] : entries(r_, e.value, "zero_optimization")) {
      const std::string key = "zero_optimization." + k;
      if (k == "stage") {
        stage_loc_ = r_.loc(v);
        if (auto s = count(v, key, 0)) {
          if (*s > 3) {
            r_.error(stage_loc_, fmt::format("{} must be 0, 1, 2 or 3, got {}", key, *s));
          } else {
            stage_ = static_cast<int>(*s);
          }
        }
      } else if (k == "stage3_prefetch_bucket_size" || k == "prefetch_bucket_size") {
        const auto preset = is_auto(v) ? model::model_preset(ctx_.model) : std::nullopt;
        if (preset) {
          // The Hugging Face Trainer fills it from the model's hidden size h: 0.9·h² at ZeRO-3
          // (HfTrainerDeepSpeedConfig.trainer_config_finalize, transformers
          // src/transformers/integrations/deepspeed.py @0234833).
          const auto h = static_cast<double>(preset->dim);
          j.prefetch_bucket_params = static_cast<int64_t>(0.9 * h * h);
          diags_.note(r_.loc(v), fmt::format("{} is \"auto\": the Hugging Face Trainer sets it to 0.9 × hidden² = {} "
                                             "for {} (hidden size {})", key, j.prefetch_bucket_params, preset->name,
                                             preset->dim));
        } else if (auto n = count(v, key, 0)) {
          j.prefetch_bucket_params = *n;
        }
      } else if (k == "stage3_max_live_parameters" || k == "max_live_parameters") {
        if (auto n = count(v, key, 0)) j.max_live_params = *n;
      } else if (k == "overlap_comm") {
        if (auto b = r_.boolean(v, key)) {
          overlap_comm_ = *b;
          j.where["overlap_comm"] = r_.loc(v);
        }
      } else {
        unmodelled(j, key, v);
      }
    }
  }

  void precision_block(const std::string& name, const Entry& e, TrainingJob& j) {
    const bool is_fp16 = name == "fp16";
    if (!r_.is_map(e, name, "precision settings")) return;
    for (auto& [k, v] : entries(r_, e.value, name)) {
      if (k == "enabled" && is_auto(v)) {
        // The Hugging Face Trainer sets it from its --bf16 / --fp16 arguments (fill_match in
        // transformers src/transformers/integrations/deepspeed.py @0234833); settled in layout().
        (is_fp16 ? fp16_auto_ : bf16_auto_) = r_.loc(v);
      } else if (k == "enabled") {
        if (auto b = r_.boolean(v, name + ".enabled")) {
          (is_fp16 ? fp16_ : bf16_) = *b;
          (is_fp16 ? fp16_loc_ : bf16_loc_) = r_.loc(v);
        }
      } else {
        unmodelled(j, name + "." + k, v);
      }
    }
  }

  /// The `pipeline` block: stages (parsed but never read by DeepSpeed) and the activation
  /// checkpoint interval (read by the pipeline engine).
  void pipeline_block(const Entry& e, TrainingJob& j) {
    if (!r_.is_map(e, "pipeline", "pipeline settings")) return;
    for (auto& [k, v] : entries(r_, e.value, "pipeline")) {
      if (k == "stages") {
        if (v.value.IsScalar() && v.value.Scalar() == "auto") continue;
        if (auto s = count(v, "pipeline.stages", 1)) {
          if (*s > (1 << 20)) {
            r_.error(r_.loc(v), fmt::format("pipeline.stages is too large (at most {})", 1 << 20));
            continue;
          }
          pp_ = static_cast<int32_t>(*s);
          pp_loc_ = r_.loc(v);
          diags_.note(pp_loc_, fmt::format("DeepSpeed parses pipeline.stages but never reads it: the pipeline "
                                           "degree comes from PipelineModule(num_stages=...) in the training code; "
                                           "schedcheck takes it as {}",
                                           *s));
        }
      } else if (k == "activation_checkpoint_interval") {
        if (auto n = count(v, "pipeline.activation_checkpoint_interval", 0, 1 << 20); n && *n > 0) {
          // PipelineModule.forward checkpoints each run of `interval` consecutive layers.
          j.recompute = model::Recompute::kFull;
          j.recompute_method = model::RecomputeMethod::kUniform;
          j.recompute_layers = static_cast<int32_t>(*n);
          j.where["recompute"] = r_.loc(v);
        }
      } else {
        unmodelled(j, "pipeline." + k, v);
      }
    }
  }

  /// Facts the config cannot state: the world size and the model, from the command line.
  void context(TrainingJob& j) {
    if (ctx_.gpus <= 0)
      diags_.error(r_.file_start(), "a DeepSpeed config does not give the world size; pass --gpus");
    const std::vector<std::string> names = model::model_preset_names();
    if (ctx_.model.empty()) {
      diags_.error(r_.file_start(), fmt::format("a DeepSpeed config does not describe the model; pass --model with "
                                                "one of: {}",
                                                fmt::join(names, ", ")));
    } else if (auto preset = model::model_preset(ctx_.model)) {
      j.model = preset->name;
    } else {
      diags_.error(r_.file_start(), fmt::format("unknown model preset '{}'{} (known: {})", ctx_.model,
                                                yaml_util::did_you_mean(ctx_.model, names), fmt::join(names, ", ")));
    }
  }

  /// Sharding, dtypes, the data-parallel degree and the batch triple (runtime/config.py
  /// _set_batch_related_parameters and _batch_assertion; pipe/engine.py L76-111).
  void layout(TrainingJob& j) {
    j.world = ctx_.gpus;
    static const Sharding kByStage[] = {Sharding::kDdp, Sharding::kZero1, Sharding::kZero2, Sharding::kFsdp};
    j.sharding = kByStage[stage_];
    j.reshard_after_forward = stage_ == 3;
    // zero/config.py: overlap_comm None means True at stage 3, False below.
    j.overlap_comm = overlap_comm_.value_or(stage_ == 3);
    // overlap_comm at stages 1 and 2 is "overlap the reduction of the gradients with backward
    // computation" (DeepSpeed's ZeRO config docs); at stage 3 the per-unit reduce-scatters are
    // modelled by the FSDP front-end's streams.
    j.overlap_grad_reduce = j.overlap_comm;
    if (stage_loc_.valid()) j.where["sharding"] = stage_loc_;
    // "auto" precision: bf16 unless fp16 is the one left to the Trainer (or set) and bf16 is not.
    if (bf16_auto_.valid() && !fp16_) {
      bf16_ = true;
      bf16_loc_ = bf16_auto_;
      diags_.note(bf16_auto_, "bf16.enabled is \"auto\" (the Hugging Face Trainer sets it from --bf16): taken as true; "
                              "write true or false to say which");
    } else if (fp16_auto_.valid() && !bf16_) {
      fp16_ = true;
      fp16_loc_ = fp16_auto_;
      diags_.note(fp16_auto_, "fp16.enabled is \"auto\" (the Hugging Face Trainer sets it from --fp16): taken as true; "
                              "write true or false to say which");
    }
    if (bf16_ && fp16_)
      diags_.error(std::make_pair(bf16_loc_.line, bf16_loc_.col) >= std::make_pair(fp16_loc_.line, fp16_loc_.col)
                       ? bf16_loc_
                       : fp16_loc_,
                   "bfloat16 and fp16 modes cannot be simultaneously enabled");
    j.param_dtype = fp16_ ? "fp16" : bf16_ ? "bf16" : "fp32";
    // engine.py communication_data_type: the configured one, else fp16, bf16 or fp32 by mode.
    j.reduce_dtype = !comm_.empty() ? comm_ : fp16_ ? "fp16" : bf16_ ? "bf16" : "fp32";
    if (!comm_.empty())
      j.where["reduce_dtype"] = comm_loc_;
    else if (fp16_ || bf16_)
      j.where["reduce_dtype"] = fp16_ ? fp16_loc_ : bf16_loc_;
    // A model-parallel unit (Megatron-DeepSpeed passes mpu): DeepSpeedConfig takes its
    // world_size, the one the batch rule uses, from mpu.get_data_parallel_world_size()
    // (deepspeed/runtime/config.py DeepSpeedConfig.__init__ @ 01ccf331).
    if (ctx_.pp > 0) {
      if (pp_loc_.valid() && pp_ != ctx_.pp) {
        diags_.error(pp_loc_, fmt::format("pipeline.stages is {} here and --pp {} on the command line", pp_, ctx_.pp));
        return;
      }
      pp_ = ctx_.pp;
    }
    if (ctx_.tp > 0) {
      j.layout.tp = ctx_.tp;
      j.where["tp"] = r_.file_start();
    }
    j.layout.pp = pp_;
    if (pp_ > 1) {
      j.where["pp"] = pp_loc_;
      j.where["schedule"] = pp_loc_;
      if (stage_ >= 2)
        diags_.error(stage_loc_, "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism");
    }
    const int64_t model_parallel = static_cast<int64_t>(pp_) * j.layout.tp;
    if (j.world % model_parallel != 0) {
      diags_.error(located(pp_loc_),
                   j.layout.tp > 1 ? fmt::format("world size ({}) is not divisible by the tensor ({}) times pipeline ({}) "
                                                 "parallel ranks",
                                                 j.world, j.layout.tp, pp_)
                                   : fmt::format("world size ({}) is not divisible by the pipeline stages ({})", j.world, pp_));
      return;
    }
    const int64_t dp = j.world / model_parallel;
    const bool sharded = j.sharding == Sharding::kZero2 || j.sharding == Sharding::kFsdp;
    (sharded ? j.layout.dp_shard : j.layout.dp_replicate) = static_cast<int32_t>(dp);
    if (stage_loc_.valid()) j.where[sharded ? "dp_shard" : "dp_replicate"] = stage_loc_;
    batch(j, dp);
  }

  /// `loc`, or the start of the file when it is not in the file (a value from the command line).
  SourceLoc located(const SourceLoc& loc) const { return loc.valid() ? loc : r_.file_start(); }

  /// --micro-batch-size and --grad-accum fill the keys the config leaves to the autotuner
  /// ("auto" or absent); a key the config sets to a number is not replaced (an error).
  bool from_command_line(std::optional<int64_t>& value, const SourceLoc& loc, int64_t given, const char* key,
                         const char* option) {
    if (given <= 0) return true;
    if (value) {
      diags_.error(loc, fmt::format("{} is set here to {}; {} applies to configs that leave it to the autotuner "
                                    "(\"auto\" or absent)", key, *value, option));
      return false;
    }
    value = given;
    return true;
  }

  void batch(TrainingJob& j, int64_t dp) {
    const bool bad = (train_loc_.valid() && !train_ && !train_auto_) || (micro_loc_.valid() && !micro_ && !micro_auto_) ||
                     (gas_loc_.valid() && !gas_ && !gas_auto_);
    if (bad) return;  // already reported
    if (!from_command_line(micro_, micro_loc_, ctx_.micro_batch_size, "train_micro_batch_size_per_gpu",
                           "--micro-batch-size") ||
        !from_command_line(gas_, gas_loc_, ctx_.grad_accum, "gradient_accumulation_steps", "--grad-accum"))
      return;
    // "auto" keys the command line did not fill: the microbatch size must be given (nothing
    // determines it); accumulation defaults to 1 unless the global batch fixes it; a global batch
    // of "auto" follows from the other two.
    if ((micro_auto_ && !micro_) || (train_auto_ && !micro_)) {
      diags_.error(located(micro_auto_ ? micro_loc_ : train_loc_),
                   "the batch is left to the autotuner (\"auto\", filled in by the Hugging Face Trainer): give "
                   "--micro-batch-size N (and --grad-accum N, default 1) for the values the run uses");
      return;
    }
    if (gas_auto_ && !gas_ && !train_) gas_ = 1;
    int64_t train = train_.value_or(0), micro = micro_.value_or(0), gas = gas_.value_or(0);
    if (train_ && micro_ && gas_) {
    } else if (train_ && micro_) {
      gas = train / micro / dp;
    } else if (train_ && gas_) {
      micro = train / dp / gas;
    } else if (micro_ && gas_) {
      train = micro * gas * dp;
    } else if (train_) {
      gas = 1;
      micro = train / dp;
    } else if (micro_) {
      gas = 1;
      train = micro * dp;
    } else {
      diags_.error(r_.file_start(), kNoBatch);
      return;
    }
    // A value from the command line has no place in the file: its error is located at the
    // config's start rather than nowhere.
    const SourceLoc at = located(train_loc_.valid() ? train_loc_ : micro_loc_.valid() ? micro_loc_ : gas_loc_);
    if (micro <= 0) {
      diags_.error(at, fmt::format("Micro batch size per gpu: {} has to be greater than 0", micro));
      return;
    }
    if (gas <= 0) {
      diags_.error(at, fmt::format("Gradient accumulation steps: {} has to be greater than 0", gas));
      return;
    }
    if (train != micro * gas * dp) {
      diags_.error(at, fmt::format("Check batch related parameters. train_batch_size is not equal to "
                                   "micro_batch_per_gpu * gradient_acc_step * world_size {} != {} * {} * {}",
                                   train, micro, gas, dp));
      return;
    }
    if (gas > (int64_t{1} << 24)) {
      diags_.error(at, fmt::format("{} gradient accumulation steps is too many", gas));
      return;
    }
    j.global_batch_sequences = train;
    j.microbatch_sequences = micro;
    j.microbatches = static_cast<int32_t>(gas);  // pipe/engine.py: micro_batches = gradient_accumulation_steps
    j.grad_accum = 1;
    if (train_) j.where["global_batch"] = train_loc_;
    if (micro_) j.where["microbatch_sequences"] = micro_loc_;
    j.where["microbatches"] = gas_ ? gas_loc_ : at;
  }

  std::string path_;
  const JobContext& ctx_;
  Diagnostics& diags_;
  Reader r_;
  std::optional<int64_t> train_, micro_, gas_;
  bool train_auto_ = false, micro_auto_ = false, gas_auto_ = false;  ///< "auto": left to the autotuner
  SourceLoc train_loc_, micro_loc_, gas_loc_;
  int stage_ = 0;
  SourceLoc stage_loc_;
  std::optional<bool> overlap_comm_;
  bool bf16_ = false, fp16_ = false;
  SourceLoc bf16_loc_, fp16_loc_;
  SourceLoc bf16_auto_, fp16_auto_;  ///< where an "enabled": "auto" was written
  std::string comm_;
  SourceLoc comm_loc_;
  int32_t pp_ = 1;
  SourceLoc pp_loc_;
};

}  // namespace

bool is_deepspeed_config(const std::string& path) {
  // A .json that DeepSpeed could mean: JSON that does not parse (its errors are DeepSpeed's to
  // give), or an object with a top-level key DeepSpeed defines (or an empty one). A trace, a
  // report or a schema is another front-end's (or none's), not a DeepSpeed config missing --gpus.
  if (std::filesystem::path(path).extension() != ".json") return false;
  std::string text, why;
  if (!read_input_file(path, &text, &why)) return true;  // the reader reports why
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return true;
  if (!j.is_object()) return false;
  for (const auto& [key, value] : j.items())
    if (is_deepspeed_key(key)) return true;
  return j.empty();
}

// What read_deepspeed fills: sharding from zero_optimization.stage (0 DDP, 1 ZeRO-1, 2 ZeRO-2,
// 3 FSDP); prefetch_bucket_params and max_live_params from stage3_prefetch_bucket_size and
// stage3_max_live_parameters (elements; integral floats such as 5e7 accepted); world = ctx.gpus;
// pp from pipeline.stages (default 1; DeepSpeed itself never reads that key, which a note says);
// dp = world / pp into dp_replicate (stages 0-1) or dp_shard (stages 2-3); the batch triple by
// DeepSpeed's rule (microbatches = gradient_accumulation_steps, microbatch_sequences = micro,
// global_batch_sequences = train_batch_size); param_dtype from bf16/fp16.enabled; reduce_dtype
// from communication_data_type, else fp16, bf16 or fp32 by mode; recompute kFull with an
// activation_checkpointing block or pipeline.activation_checkpoint_interval > 0; model =
// ctx.model (a preset name). Keys not modelled (optimizer, scheduler, ...) go to unmodelled.
// Errors at the value: invalid JSON, wrong types, non-integral or negative counts, DeepSpeed's
// batch assertions, "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism", bf16 with
// fp16, an unknown communication_data_type; at the file start: no --gpus, no or unknown --model.
namespace {

bool read_deepspeed_json(const std::string& path, const JobContext& ctx, TrainingJob* job, Diagnostics& diags) {
  std::string text, why;
  if (!read_input_file(path, &text, &why)) {
    const int32_t file = register_source(path, "");
    diags.error(SourceLoc{file, 1, 1}, fmt::format("cannot read the DeepSpeed config: {}", why));
    return false;
  }
  const int32_t file = register_source(path, text);
  DeepSpeedReader ds(path, file, ctx, diags);
  Reader& r = ds.reader();
  if (!r.prescan(text)) return false;
  // DeepSpeed reads the file with Python's json.load: comments, trailing commas, single quotes
  // and trailing text are errors there, so they are errors here (yaml-cpp alone would accept
  // them and read something else).
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    (void)parsed;
  } catch (const nlohmann::json::parse_error& e) {
    const size_t at = std::min(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const int32_t line = static_cast<int32_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n')) + 1;
    const size_t bol = text.rfind('\n', at == 0 ? 0 : at - 1);
    const int32_t col = static_cast<int32_t>(at - (bol == std::string::npos || at == 0 ? 0 : bol + 1)) + 1;
    std::string what = e.what();
    if (auto p = what.find("; "); p != std::string::npos) what = what.substr(p + 2);
    diags.error(SourceLoc{file, line, col}, fmt::format("invalid JSON (DeepSpeed reads it with json.load): {}",
                                                       yaml_util::printable(what)));
    return false;
  } catch (const nlohmann::json::exception& e) {
    // A number out of range (1e999) has no byte position.
    std::string what = e.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    diags.error(SourceLoc{file, 1, 1}, fmt::format("invalid JSON (DeepSpeed reads it with json.load): {}",
                                                   yaml_util::printable(what)));
    return false;
  }
  std::optional<YAML::Node> root;
  try {
    root = YAML::Load(yaml_util::json_for_yaml(text));
  } catch (const YAML::Exception& e) {
    const SourceLoc at = e.mark.is_null() ? r.file_start() : r.at(e.mark.line, e.mark.column);
    diags.error(at, fmt::format("invalid JSON: {}", yaml_util::printable(e.msg)));
    return false;
  }
  auto ok = r.guard([&]() -> std::optional<bool> { return ds.run(*root, job); });
  return ok.value_or(false);
}

}  // namespace

bool read_deepspeed(const std::string& path, const JobContext& cli, TrainingJob* job, Diagnostics& diags) {
  // JSON holds no comment: its facts (world size, GPU, model) come from the repository's
  // .schedcheck-facts, then the command line.
  return read_with_file_facts(path, cli, false, job, diags,
                              [&](const JobContext& ctx) { return read_deepspeed_json(path, ctx, job, diags); });
}

}  // namespace sc::config
