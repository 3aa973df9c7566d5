// torchtitan job TOML (docs/facts/config-keys.md#torchtitan): the era A keys (TOML `JobConfig` at commit 238fa99), the
// older names they replaced, and the token-based names of current torchtitan (era C), read with
// toml++ so that every value keeps its line and column.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "config/config_keys.h"
#include "config/file_facts.h"
#include "config/lower_job.h"
#include "config/readers.h"
#include "config/toml_limits.h"
#include "model/cost_model.h"
#include "spec/csv_schedule.h"
#include "spec/yaml_util.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace sc::config {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// One TOML value with where it was written.
struct Value {
  const toml::node* node = nullptr;
  SourceLoc loc;
  std::string key;  ///< "parallelism.pipeline_parallel_degree"
};

/// The keys of the sections schedcheck models; a key outside these is listed as unmodelled.
const std::map<std::string, std::set<std::string>>& modelled() {
  static const std::map<std::string, std::set<std::string>> m = {
      {"parallelism",
       {"data_parallel_replicate_degree", "data_parallel_shard_degree", "data_parallel_degree", "fsdp_reshard_after_forward",
        "tensor_parallel_degree", "enable_sequence_parallel", "pipeline_parallel_degree", "pipeline_parallel_schedule",
        "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatch_size", "pipeline_parallel_microbatches", "num_pp_microbatches",
        "pipeline_parallel_layers_per_stage", "pipeline_parallel_first_stage_less_layers",
        "pipeline_parallel_last_stage_less_layers", "context_parallel_degree", "expert_parallel_degree",
        "expert_tensor_parallel_degree", "enable_async_tensor_parallel"}},
      {"experimental",
       {"enable_async_tensor_parallel", "pipeline_parallel_degree", "context_parallel_degree",
        "pipeline_parallel_schedule", "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatches"}},
      {"training",
       {"local_batch_size", "batch_size", "global_batch_size", "seq_len", "num_tokens_per_microbatch_per_dp_rank",
        "num_tokens_per_train_step", "max_context_length", "mixed_precision_param", "mixed_precision_reduce", "dtype",
        "compile", "enable_float8_linear", "enable_fp8_linear", "fp8_linear", "enable_fsdp_float8_all_gather",
        "enable_fsdp_fp8_all_gather", "precompute_float8_dynamic_scale_for_fsdp"}},
      {"compile", {"enable", "components", "enable_async_tensor_parallel"}},
      {"activation_checkpoint", {"mode", "selective_ac_option"}},
      {"model", {"name", "flavor", "converters"}},
      // fp8 linear layers (read_float8; docs/facts/cost-formulas.md#fp8-linear-layers).
      {"float8",
       {"enable_float8_linear", "enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp",
        "recipe_name", "emulate"}},
  };
  return m;
}

class Reader {
 public:
  Reader(const std::string& path, const JobContext& ctx, TrainingJob* job, Diagnostics& diags)
      : path_(path), ctx_(ctx), job_(*job), diags_(diags) {}

  bool run() {
    std::string text, why;
    if (!read_input_file(path_, &text, &why)) {
      diags_.error(SourceLoc{}, fmt::format("cannot read {}: {}", path_, why));
      return false;
    }
    file_ = register_source(path_, text);
    job_.framework = "torchtitan";
    job_.path = path_;
    job_.file = SourceLoc{file_, 1, 1};
    if (auto limit = toml_nesting_limit(text)) {  // before toml++, which recurses on nesting
      diags_.error(SourceLoc{file_, limit->line, limit->col}, limit->message);
      return false;
    }
    try {
      root_ = toml::parse(text, path_);
    } catch (const toml::parse_error& e) {
      diags_.error(at(e.source().begin), fmt::format("not a valid TOML file: {}", e.description()));
      return false;
    }
    const size_t errors = diags_.error_count();
    bool known = false;
    for (const char* t : {"job", "model", "training", "parallelism", "activation_checkpoint"}) known |= root_.contains(t);
    if (!known) {
      diags_.error(job_.file, "not a torchtitan job config: it has none of the tables [job], [model], [training], "
                              "[parallelism], [activation_checkpoint]");
      return false;
    }
    list_unmodelled();
    check_one_name_each();
    read_model();
    read_parallelism();
    read_training();
    read_float8();
    read_checkpointing();
    date_pipeline_outputs();
    if (diags_.error_count() == errors) validate(text);
    return diags_.error_count() == errors;
  }

 private:
  SourceLoc at(const toml::source_position& p) const {
    return SourceLoc{file_, static_cast<int32_t>(p.line), static_cast<int32_t>(p.column)};
  }

  std::optional<Value> get(const std::string& section, const std::string& key) const {
    const toml::table* t = root_.at_path(section).as_table();  // "quantize.linear.float8" too
    if (!t) return std::nullopt;
    const toml::node* n = t->get(key);
    if (!n) return std::nullopt;
    // The key's own position, so a message points at `key = value`, not just the value.
    SourceLoc loc = at(n->source().begin);
    for (auto it = t->begin(); it != t->end(); ++it)
      if (it->first.str() == key && it->first.source().begin.line > 0) loc = at(it->first.source().begin);
    return Value{n, loc, section + "." + key};
  }

  /// Reads the boolean `key` from the first of `sections` that has it into `*out`, recording
  /// where it was set true under `where`; a value that is not a boolean is an error at it.
  /// Only a TOML boolean is one: toml++'s value<bool>() would read `enable = 2` as true. The
  /// location it was read from goes to `*from` when given. Returns whether a section had the key.
  bool read_flag(std::initializer_list<const char*> sections, const std::string& key, const char* where, bool* out,
                 std::optional<Value>* from = nullptr) {
    for (const char* section : sections) {
      auto v = get(section, key);
      if (!v) continue;
      if (from) *from = v;
      if (auto b = v->node->value_exact<bool>()) {
        *out = *b;
        if (*b) job_.where[where] = v->loc;
      } else {
        diags_.error(v->loc, fmt::format("{} must be true or false", v->key));
      }
      return true;
    }
    return false;
  }

  /// TrainingJob::pp_keeps_outputs: a key torchtitan renamed or removed before its pipeline step
  /// stopped returning outputs (e5ef99aa, 2025-10-22) dates the config before it
  /// (docs/facts/config-keys.md#torchtitan-config-eras): `training.batch_size` (until 2025-06),
  /// `pipeline_parallel_microbatches` (until 2025-04), `parallelism.data_parallel_degree` (2024),
  /// `training.compile` (until 2025-04), the 2024 [experimental] pipeline keys.
  void date_pipeline_outputs() {
    for (const auto& [section, key] : std::initializer_list<std::pair<const char*, const char*>>{
             {"training", "batch_size"}, {"parallelism", "pipeline_parallel_microbatches"},
             {"experimental", "pipeline_parallel_microbatches"}, {"parallelism", "data_parallel_degree"},
             {"training", "compile"}, {"experimental", "pipeline_parallel_degree"}})
      if (auto v = get(section, key)) {
        job_.pp_keeps_outputs = true;
        job_.where["pp_outputs"] = v->loc;
        return;
      }
  }

  /// `parallelism.key`, or `experimental.key` where the pipeline and context parallel keys lived
  /// before they moved to [parallelism] (2024; docs/facts/config-keys.md#torchtitan-config-eras).
  std::optional<Value> parallelism(const std::string& key) const {
    auto v = get("parallelism", key);
    return v ? v : get("experimental", key);
  }

  /// Names that different torchtitan versions give one setting (docs/facts/config-keys.md#torchtitan-config-eras):
  /// a config written for one version has at most one of each group, so two of them, agreeing or
  /// not, are an error at the later one (the reader would otherwise take one and drop the other).
  void check_one_name_each() {
    static const std::vector<std::vector<std::pair<const char*, const char*>>> kGroups = {
        {{"parallelism", "enable_async_tensor_parallel"}, {"experimental", "enable_async_tensor_parallel"},
         {"compile", "enable_async_tensor_parallel"}},
        {{"parallelism", "data_parallel_shard_degree"}, {"parallelism", "data_parallel_degree"}},
        {{"parallelism", "num_pp_microbatches"}, {"parallelism", "pipeline_parallel_microbatches"},
         {"parallelism", "pipeline_parallel_microbatch_size"}, {"experimental", "pipeline_parallel_microbatches"}},
        {{"training", "local_batch_size"}, {"training", "batch_size"},
         {"training", "num_tokens_per_microbatch_per_dp_rank"}},
        {{"training", "seq_len"}, {"training", "max_context_length"}},
        {{"parallelism", "pipeline_parallel_degree"}, {"experimental", "pipeline_parallel_degree"}},
        {{"parallelism", "context_parallel_degree"}, {"experimental", "context_parallel_degree"}},
        {{"parallelism", "pipeline_parallel_schedule"}, {"experimental", "pipeline_parallel_schedule"}},
        {{"parallelism", "pipeline_parallel_schedule_csv"}, {"experimental", "pipeline_parallel_schedule_csv"}},
        {{"training", "enable_float8_linear"}, {"training", "enable_fp8_linear"}, {"training", "fp8_linear"},
         {"float8", "enable_float8_linear"}},
        {{"training", "enable_fsdp_float8_all_gather"}, {"training", "enable_fsdp_fp8_all_gather"},
         {"float8", "enable_fsdp_float8_all_gather"}, {"quantize.linear.float8", "enable_fsdp_float8_all_gather"}},
        {{"training", "precompute_float8_dynamic_scale_for_fsdp"}, {"float8", "precompute_float8_dynamic_scale_for_fsdp"},
         {"quantize.linear.float8", "precompute_float8_dynamic_scale_for_fsdp"}},
        {{"float8", "recipe_name"}, {"quantize.linear.float8", "recipe_name"}},
        {{"float8", "emulate"}, {"quantize.linear.float8", "emulate"}},
    };
    for (const auto& group : kGroups) {
      std::vector<Value> set;
      for (const auto& [section, key] : group)
        if (auto v = get(section, key)) set.push_back(*v);
      std::sort(set.begin(), set.end(), [](const Value& a, const Value& b) {
        return std::pair(a.loc.line, a.loc.col) < std::pair(b.loc.line, b.loc.col);
      });
      for (size_t i = 1; i < set.size(); ++i)
        diags_.error(set[i].loc, fmt::format("{} and {} (line {}) set the same thing under the names of different "
                                             "torchtitan versions; keep one", set[i].key, set[0].key, set[0].loc.line));
    }
  }

  std::optional<int64_t> integer(const std::optional<Value>& v, int64_t lo) {
    if (!v) return std::nullopt;
    // Only an integer node is read as one: toml++'s value<int64_t>() casts a float node, and a
    // float beyond int64 (seq_len = 81e92) made that cast undefined behaviour.
    const std::optional<int64_t> x = v->node->is_integer() ? v->node->value<int64_t>() : std::nullopt;
    if (!x) {
      diags_.error(v->loc, fmt::format("{} must be an integer", v->key));
      return std::nullopt;
    }
    if (*x < lo || *x > (int64_t{1} << 31) - 1) {
      diags_.error(v->loc, fmt::format("{} = {} is out of range: it must be between {} and 2147483647", v->key, *x, lo));
      return std::nullopt;
    }
    return *x;
  }

  std::optional<std::string> string(const std::optional<Value>& v) {
    if (!v) return std::nullopt;
    if (!v->node->is_string()) {
      diags_.error(v->loc, fmt::format("{} must be a string", v->key));
      return std::nullopt;
    }
    return std::string(*v->node->value<std::string_view>());
  }

  void set_where(const std::string& field, const std::optional<Value>& v) {
    if (v) job_.where[field] = v->loc;
  }

  /// Keys torchtitan does not define are errors with the closest defined key of their table
  /// (config_keys.h); defined keys schedcheck does not read are listed once as not modelled,
  /// each with its location (a whole table as one entry).
  void list_unmodelled() {
    check_defined(root_, "");
    for (auto it = root_.begin(); it != root_.end(); ++it) {
      const std::string name(it->first.str());
      if (!is_torchtitan_key(name, it->second.is_table())) continue;  // reported by check_defined
      if (name == "quantize" && it->second.is_table()) {
        list_unmodelled_quantize(*it->second.as_table(), "quantize");
        continue;
      }
      auto m = modelled().find(name);
      if (m == modelled().end()) {
        job_.unmodelled.emplace_back("[" + name + "]", at(it->first.source().begin));
        continue;
      }
      if (const toml::table* t = it->second.as_table())
        for (auto k = t->begin(); k != t->end(); ++k) {
          const std::string key(k->first.str());
          if (!m->second.count(key) && is_torchtitan_key(name + "." + key, k->second.is_table()))
            job_.unmodelled.emplace_back(name + "." + key, at(k->first.source().begin));
        }
    }
  }

  /// [quantize]'s keys one by one: those of [quantize.linear.float8] that read_float8 models are
  /// not listed.
  void list_unmodelled_quantize(const toml::table& t, const std::string& prefix) {
    static const std::set<std::string> kRead = {"quantize.linear.float8.enable_fsdp_float8_all_gather",
                                                "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp",
                                                "quantize.linear.float8.recipe_name", "quantize.linear.float8.emulate"};
    for (auto k = t.begin(); k != t.end(); ++k) {
      const std::string dotted = prefix + "." + std::string(k->first.str());
      if (!is_torchtitan_key(dotted, k->second.is_table())) continue;  // reported by check_defined
      if (const toml::table* sub = k->second.as_table())
        list_unmodelled_quantize(*sub, dotted);
      else if (!kRead.count(dotted))
        job_.unmodelled.emplace_back(dotted, at(k->first.source().begin));
    }
  }

  /// fp8 linear layers (TrainingJob::fp8_linear), in the names of each torchtitan era
  /// (docs/facts/config-keys.md#torchtitan-config-eras): `training.enable_float8_linear` (and
  /// `enable_fp8_linear`, `fp8_linear`) before 2024-08, `float8.enable_float8_linear` until the
  /// model converters (2025-02), then `model.converters` naming "float8" (options in [float8]) or
  /// "quantize.linear.float8" (options in [quantize.linear.float8]). FSDP2's float8 all-gather
  /// is `enable_fsdp_float8_all_gather` beside them; torchtitan uses it only with dp_shard > 1
  /// (torchtitan/float8.py @9dec370). torchao's recipes: "tensorwise" (the default), "rowwise",
  /// "rowwise_with_gw_hp"; the float8 all-gather needs tensorwise scaling.
  void read_float8() {
    bool enabled = false;
    for (const char* key : {"enable_float8_linear", "enable_fp8_linear", "fp8_linear"}) read_flag({"training"}, key, "fp8", &enabled);
    const std::optional<Value> legacy_on = get("float8", "enable_float8_linear");
    read_flag({"float8"}, "enable_float8_linear", "fp8", &enabled);
    if (auto conv = get("model", "converters")) {
      // The converters torchtitan registers (torchtitan/protocols/model_converter.py's registry):
      // an unknown name is a KeyError at startup.
      static const std::vector<std::string> kConverters = {"float8", "mx", "quantize.linear.float8", "quantize.linear.mx",
                                                           "quantize.grouped_mm.float8", "quantize.grouped_mm.mx"};
      const toml::array* a = conv->node->as_array();
      const bool strings = a && (a->empty() || a->is_homogeneous(toml::node_type::string));
      if (!strings) diags_.error(conv->loc, "model.converters must be an array of strings, e.g. [\"float8\"]");
      std::set<std::string> listed;
      if (strings)
        for (const toml::node& n : *a) {
          const std::optional<std::string> v = n.value_exact<std::string>();
          if (std::find(kConverters.begin(), kConverters.end(), *v) == kConverters.end()) {
            const std::string near = closest_match(*v, kConverters);
            diags_.error(conv->loc, fmt::format("model.converters names \"{}\", which torchtitan does not register{}; "
                                                "its converters are {}",
                                                v->substr(0, 64), near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                                                fmt::format("\"{}\"", fmt::join(kConverters, "\", \""))));
            break;
          }
          if (*v == "float8" || *v == "quantize.linear.float8") {
            if (legacy_on) {
              diags_.error(conv->loc, fmt::format("model.converters turns float8 on, and float8.enable_float8_linear "
                                                  "(line {}) sets the same thing under an earlier torchtitan's name; keep "
                                                  "one", legacy_on->loc.line));
              break;
            }
            enabled = true;
            job_.where["fp8"] = conv->loc;
          } else if (listed.insert(*v).second) {
            job_.unmodelled.emplace_back(fmt::format("model.converters \"{}\"", *v), conv->loc);
          }
        }
    }
    // The options: [float8] (and [training] before it) or [quantize.linear.float8]; two names of
    // one option are an error (check_one_name_each), so at most one table states each.
    // precompute_float8_dynamic_scale_for_fsdp (one all-reduce of the amaxes per step) is read
    // for its type only: its time is not modelled.
    bool gathered = false, precompute = false, emulate = false;
    for (const char* key : {"enable_fsdp_float8_all_gather", "enable_fsdp_fp8_all_gather"})
      read_flag({"training"}, key, "fp8_gather", &gathered);
    read_flag({"training"}, "precompute_float8_dynamic_scale_for_fsdp", "fp8_precompute", &precompute);
    std::optional<Value> recipe_at, gather_at;
    for (const char* table : {"float8", "quantize.linear.float8"}) {
      read_flag({table}, "enable_fsdp_float8_all_gather", "fp8_gather", &gathered, gather_at ? nullptr : &gather_at);
      read_flag({table}, "precompute_float8_dynamic_scale_for_fsdp", "fp8_precompute", &precompute);
      read_flag({table}, "emulate", "fp8_emulate", &emulate);
      if (auto v = get(table, "recipe_name")) recipe_at = v;
    }
    if (auto r = string(recipe_at)) {
      static const std::vector<std::string> kRecipes = {"tensorwise", "rowwise", "rowwise_with_gw_hp"};
      if (std::find(kRecipes.begin(), kRecipes.end(), *r) == kRecipes.end()) {
        const std::string near = closest_match(*r, kRecipes);
        diags_.error(recipe_at->loc,
                     fmt::format("{} = \"{}\" is not a torchao float8 recipe{}; the recipes are "
                                 "\"tensorwise\", \"rowwise\" and \"rowwise_with_gw_hp\"",
                                 recipe_at->key, *r, near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
      } else if (enabled && gathered) {
        // torchtitan/components/float8.py @069bae28 (where recipe_name came in) asserts it.
        diags_.error(recipe_at->loc, fmt::format("torchtitan refuses {} together with enable_fsdp_float8_all_gather "
                                                 "(line {}): \"using `float8_config.enable_fsdp_float8_all_gather` "
                                                 "together with `float8_config.recipe_name` is not supported\"",
                                                 recipe_at->key, gather_at ? gather_at->loc.line : recipe_at->loc.line));
      } else {
        job_.fp8_recipe = *r;
      }
    }
    if (enabled && emulate) {
      // torchao emulates the fp8 GEMMs in high precision: no fp8 rate (and slower than bf16,
      // which is not modelled).
      job_.unmodelled.emplace_back("float8.emulate (emulated fp8 GEMMs: timed as bf16)", job_.loc("fp8_emulate"));
      enabled = false;
    }
    job_.fp8_linear = enabled;
    // FSDP2's float8 all-gather needs tensorwise scaling; torchtitan applies it only when dp_shard > 1.
    job_.fp8_weights_gathered = enabled && gathered && job_.fp8_recipe == "tensorwise";
  }

  void check_defined(const toml::table& t, const std::string& prefix) {
    for (auto it = t.begin(); it != t.end(); ++it) {
      const std::string dotted = prefix + std::string(it->first.str());
      const bool table = it->second.is_table();
      if (!is_torchtitan_key(dotted, table) && is_torchtitan_key(dotted, !table)) {
        // A defined name of the other kind: `compile = true` for the [compile] table, or a table
        // (or array of tables) where a value belongs.
        diags_.error(at(it->first.source().begin),
                     table ? fmt::format("{} is a value in torchtitan's JobConfig, not a table: write {} = ...", dotted,
                                         std::string(it->first.str()))
                           : fmt::format("{} is a table in torchtitan's JobConfig: write [{}] with its keys below it, "
                                         "not a {}", dotted, dotted, it->second.is_array() ? "list" : "single value"));
        continue;
      }
      if (!is_torchtitan_key(dotted, table)) {
        const std::string near = closest_torchtitan_key(dotted);
        diags_.error(at(it->first.source().begin),
                     fmt::format("unknown {} '{}': torchtitan's JobConfig defines no such {}{}",
                                 prefix.empty() ? "table" : "key", dotted, prefix.empty() ? "table" : "key",
                                 near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
        continue;
      }
      // A table's keys are checked too, also where its name is a key as well
      // ("quantize.linear.float8" is both a converter name and the table of its options).
      if (table && (!is_torchtitan_key(dotted) || torchtitan_table_has_keys(dotted)))
        check_defined(*it->second.as_table(), dotted + ".");
    }
  }

  /// model.name and model.flavor to a preset; --model overrides.
  void read_model() {
    auto name = get("model", "name");
    auto flavor = get("model", "flavor");
    std::string n = string(name).value_or("llama3"), f = string(flavor).value_or("debugmodel");
    if (!ctx_.model.empty()) {
      job_.model = ctx_.model;
      const std::string named = model::torchtitan_preset(n, f);
      if (flavor && named != ctx_.model)
        diags_.warning(flavor->loc, fmt::format("--model {} replaces the model the config names ({} {})", ctx_.model,
                                                n, f));
    } else {
      job_.model = model::torchtitan_preset(n, f);
      if (job_.model.empty())
        diags_.error(flavor ? flavor->loc : job_.file,
                     fmt::format("model {} flavor {} has no preset: pass --model with one of {}", n, f,
                                 fmt::join(model::model_preset_names(), ", ")));
    }
    job_.where["model"] = flavor ? flavor->loc : job_.file;
    // The world size and GPU the file states (its schedcheck: directive or torchtitan's preset
    // comment) arrive in ctx_, merged with the command line's (config/file_facts.h).
    if (!ctx_.hardware.empty()) job_.hardware = ctx_.hardware;
  }

  void read_parallelism() {
    Layout& l = job_.layout;
    auto deg = [&](const char* key, const char* field, int32_t* out) {
      auto v = parallelism(key);
      if (auto x = integer(v, 1)) *out = static_cast<int32_t>(*x);
      set_where(field, v);
    };
    deg("data_parallel_replicate_degree", "dp_replicate", &l.dp_replicate);
    deg("tensor_parallel_degree", "tp", &l.tp);
    deg("pipeline_parallel_degree", "pp", &l.pp);
    deg("context_parallel_degree", "cp", &l.cp);
    deg("expert_parallel_degree", "ep", &l.ep);
    deg("expert_tensor_parallel_degree", "etp", &etp_);
    // data_parallel_shard_degree: -1 (the default) means the ranks left over.
    auto shard = get("parallelism", "data_parallel_shard_degree");
    if (!shard) shard = get("parallelism", "data_parallel_degree");  // before 2024-10 (docs/facts/config-keys.md#torchtitan-config-eras)
    if (shard) {
      if (auto x = integer(shard, -1)) {
        if (*x == 0) diags_.error(shard->loc, fmt::format("{} must be -1 or at least 1", shard->key));
        dp_shard_ = static_cast<int32_t>(*x);
      }
      set_where("dp_shard", shard);
    }
    // Async TP: parallelism.enable_async_tensor_parallel (experimental.* before 2025-02,
    // compile.* in the Python config system).
    std::optional<Value> async_tp;
    read_flag({"parallelism", "experimental", "compile"}, "enable_async_tensor_parallel", "tp_comm_overlap",
              &job_.tp_comm_overlap, &async_tp);
    // torch.compile of the model fuses each block's elementwise chains (compile.enable with
    // "model" among compile.components, default ["model", "loss"]; training.compile before
    // 2025-04; docs/facts/cost-formulas.md#elementwise-ops). A file that sets both must agree.
    std::optional<Value> enable_at, legacy_at;
    bool legacy = false;
    read_flag({"compile"}, "enable", "compile", &job_.fused_elementwise, &enable_at);
    read_flag({"training"}, "compile", "compile", &legacy, &legacy_at);
    if (enable_at && legacy_at && legacy != job_.fused_elementwise)
      diags_.error(legacy_at->loc, fmt::format("training.compile = {} (before 2025-04) contradicts compile.enable = {} at "
                                               "line {}: set one of them", legacy, job_.fused_elementwise,
                                               enable_at->loc.line));
    if (!enable_at) job_.fused_elementwise = legacy;
    // The loss is compiled with it, unless compile.components leaves "loss" out
    // (torchtitan/components/loss.py::build_cross_entropy_loss; training.compile compiles it
    // from 2025-04, docs/facts/cost-formulas.md#the-loss).
    bool compiled_model = job_.fused_elementwise, compiled_loss = job_.fused_elementwise;
    if (auto comps = get("compile", "components")) {
      const toml::array* a = comps->node->as_array();
      bool ok = a != nullptr;
      bool model = false, loss = false;
      if (a)
        for (const toml::node& n : *a) {
          auto v = n.value_exact<std::string>();
          if (!v) {
            ok = false;
            break;
          }
          if (*v != "model" && *v != "loss") {
            const std::string near = closest_match(*v, {"model", "loss"});
            diags_.error(comps->loc, fmt::format("compile.components has \"{}\", which torchtitan does not compile{}; "
                                                 "its components are \"model\" and \"loss\"", *v,
                                                 near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
          }
          model = model || *v == "model";
          loss = loss || *v == "loss";
        }
      if (!ok) {
        diags_.error(comps->loc, "compile.components must be an array of strings, e.g. [\"model\", \"loss\"]");
      } else if (job_.fused_elementwise) {
        compiled_model = model;
        compiled_loss = loss;
      }
    }
    job_.fused_elementwise = compiled_model;
    // torchtitan refuses async TP without a compiled model when TP is on
    // (torchtitan/distributed/tensor_parallel.py::maybe_enable_async_tp @238fa99; from the
    // Python config system on, CompileConfig.__post_init__ whatever the TP degree).
    if (async_tp && job_.tp_comm_overlap && !compiled_model &&
        (l.tp > 1 || async_tp->key.rfind("compile.", 0) == 0))
      diags_.error(async_tp->loc, fmt::format("{} = true needs the model compiled: torchtitan raises \"Async TP requires "
                                              "'model' in --compile.components and --compile.enable\"", async_tp->key));
    job_.loss_kernel = compiled_loss ? model::LossKernel::kCompiled : model::LossKernel::kEager;
    // FSDP2 reduce-scatters each unit's gradients as its backward ends, and DDP buckets do the
    // same, so the step's reduction runs under the last backward.
    job_.overlap_grad_reduce = true;
    if (auto sp = get("parallelism", "enable_sequence_parallel")) {
      if (auto b = sp->node->value_exact<bool>()) l.sequence_parallel = *b;
      else diags_.error(sp->loc, "parallelism.enable_sequence_parallel must be true or false");
    }
    auto sched = parallelism("pipeline_parallel_schedule");
    if (auto s = string(sched)) {
      schedule_name_ = *s;
      if (s->empty()) diags_.error(sched->loc, "pipeline_parallel_schedule is empty: name a schedule (1F1B, ...)");
    }
    if (auto csv = parallelism("pipeline_parallel_schedule_csv"))
      if (auto path = string(csv); path && !path->empty()) {
        csv_path_ = *path;
        csv_loc_ = csv->loc;
      }
    job_.where["schedule"] = sched ? sched->loc : job_.loc("pp");
    schedule_loc_ = sched ? sched->loc : job_.loc("pp");
    if (auto r = string(get("parallelism", "fsdp_reshard_after_forward"))) {
      auto v = get("parallelism", "fsdp_reshard_after_forward");
      if (*r != "default" && *r != "always" && *r != "never")
        diags_.error(v->loc, fmt::format("parallelism.fsdp_reshard_after_forward = \"{}\": expected \"default\", "
                                         "\"always\" or \"never\"", *r));
      reshard_ = *r;
    }
    auto lps = get("parallelism", "pipeline_parallel_layers_per_stage");
    if (auto x = integer(lps, 1)) layers_per_stage_ = static_cast<int32_t>(*x);
    lps_loc_ = lps ? lps->loc : SourceLoc{};
    auto first = get("parallelism", "pipeline_parallel_first_stage_less_layers");
    auto last = get("parallelism", "pipeline_parallel_last_stage_less_layers");
    if (auto x = integer(first, 0)) first_less_ = *x;
    if (auto x = integer(last, 0)) last_less_ = *x;
    first_loc_ = first ? first->loc : SourceLoc{};
    last_loc_ = last ? last->loc : SourceLoc{};
    split_loc_ = first ? first->loc : last ? last->loc : SourceLoc{};
    mbs_value_ = get("parallelism", "pipeline_parallel_microbatch_size");
    if (auto x = integer(mbs_value_, 1)) mbs_ = *x;
    count_value_ = get("parallelism", "num_pp_microbatches");
    if (!count_value_) count_value_ = parallelism("pipeline_parallel_microbatches");  // before 2025-04
    if (auto x = integer(count_value_, 1)) pp_count_ = static_cast<int32_t>(*x);
  }

  void read_training() {
    local_ = get("training", "local_batch_size");
    if (!local_) local_ = get("training", "batch_size");  // before 2025-06 (docs/facts/config-keys.md#torchtitan-config-eras)
    if (auto x = integer(local_, 1)) local_batch_ = *x;
    global_ = get("training", "global_batch_size");
    if (auto x = integer(global_, -1)) global_batch_ = *x;
    auto seq = get("training", "seq_len");
    if (!seq) seq = get("training", "max_context_length");  // era C
    if (auto x = integer(seq, 1)) job_.seq_len = *x;
    else if (!seq) job_.seq_len = 2048;  // JobConfig default
    job_.where["seq_len"] = seq ? seq->loc : job_.file;
    // Era C: tokens per microbatch per data-parallel rank and per step (docs/facts/config-keys.md#torchtitan-validation-rules).
    tokens_mb_ = get("training", "num_tokens_per_microbatch_per_dp_rank");
    if (auto x = integer(tokens_mb_, 1)) tokens_per_mb_ = *x;
    tokens_step_ = get("training", "num_tokens_per_train_step");
    if (auto x = integer(tokens_step_, -1)) tokens_per_step_ = *x;
    if (auto v = get("training", "mixed_precision_reduce")) {
      // torchtitan types it Literal["float32"] (docs/facts/config-keys.md#torchtitan-training-keys).
      if (auto s = string(v); s && *s != "float32")
        diags_.error(v->loc, fmt::format("training.mixed_precision_reduce = \"{}\": torchtitan accepts only "
                                         "\"float32\"", *s));
      job_.where["reduce_dtype"] = v->loc;
    }
    if (auto v = get("training", "mixed_precision_param")) {
      auto s = string(v);
      if (s && *s == "float32") job_.param_dtype = "fp32";
      else if (s && *s != "bfloat16")
        diags_.error(v->loc, fmt::format("training.mixed_precision_param = \"{}\": expected \"bfloat16\" or \"float32\"", *s));
    }
    if (auto v = get("training", "dtype")) {
      // training.dtype = "bfloat16" keeps params, gradients and optimizer state in bf16 (no fp32 master).
      // torchtitan types it Literal["bfloat16", "float32"] (training.dtype, job_config.py @238fa99).
      if (auto s = string(v); s && *s == "bfloat16") job_.fp32_master = false;
      else if (s && *s != "float32")
        diags_.error(v->loc, fmt::format("training.dtype = \"{}\": expected \"bfloat16\" or \"float32\"", *s));
    }
    job_.reduce_dtype = "fp32";
  }

  void read_checkpointing() {
    auto mode = get("activation_checkpoint", "mode");
    std::string m = string(mode).value_or("selective");
    if (mode) job_.where["recompute"] = mode->loc;
    else job_.where["recompute"] = job_.file;
    if (m == "none") {
      job_.recompute = model::Recompute::kNone;
    } else if (m == "full") {
      // One checkpoint per transformer block (apply_ac wraps each block).
      job_.recompute = model::Recompute::kFull;
      job_.recompute_method = model::RecomputeMethod::kUniform;
      job_.recompute_layers = 1;
    } else if (m == "selective") {
      job_.recompute = model::Recompute::kSelective;
      auto opt = get("activation_checkpoint", "selective_ac_option");
      std::string o = string(opt).value_or("2");
      job_.selective_policy = o == "op" ? model::SelectivePolicy::kOpPolicy : model::SelectivePolicy::kEveryNth;
      if (opt) job_.where["selective_ac_option"] = opt->loc;
      if (o != "op") {
        char* end = nullptr;
        const long n = std::strtol(o.c_str(), &end, 10);
        if (o.empty() || *end != '\0' || n < 1 || n > 1 << 20)
          diags_.error(opt ? opt->loc : job_.file,
                       fmt::format("activation_checkpoint.selective_ac_option = \"{}\": expected \"op\" or a "
                                   "positive integer", o));
        else job_.selective_every = static_cast<int32_t>(n);
      }
    } else if (m == "memory_budget") {
      diags_.error(mode->loc, "activation_checkpoint.mode = \"memory_budget\" is not modelled (its saving depends "
                              "on the compiler's choice of what to recompute)");
    } else {
      diags_.error(mode->loc, fmt::format("activation_checkpoint.mode = \"{}\": expected \"none\", \"selective\", "
                                          "\"full\" or \"memory_budget\"", m));
    }
  }

  /// torchtitan's startup rules (docs/facts/config-keys.md#torchtitan-validation-rules, #pipeline-schedule-names), in its words where it has them.
  void validate(const std::string& text) {
    Layout& l = job_.layout;
    // World size: the file's (directive or preset comment) or --gpus, else the product of fixed degrees.
    const int32_t fixed = l.dp_replicate * l.cp * l.tp * l.pp;
    if (ctx_.gpus > 0) {
      job_.world = ctx_.gpus;
    } else if (dp_shard_ > 0) {
      job_.world = fixed * dp_shard_;
    } else {
      diags_.error(job_.loc("dp_shard"), "data_parallel_shard_degree = -1 takes the ranks left over, so the world "
                                         "size is needed: pass --gpus N, or state it in the file (# schedcheck: gpus=N)");
      return;
    }
    if (dp_shard_ < 0) {
      if (job_.world % fixed != 0) {
        diags_.error(job_.loc("dp_shard"),
                     fmt::format("data_parallel_shard_degree = -1 takes the ranks left over, WORLD_SIZE / (dp_replicate "
                                 "* cp * tp * pp) = {} / ({} * {} * {} * {}) = {} / {}, which is not a whole number "
                                 "(torchtitan's ParallelDims requires it to divide)",
                                 job_.world, l.dp_replicate, l.cp, l.tp, l.pp, job_.world, fixed));
        // Point at the degrees that do not divide the world size (the usual culprit: tp 3 of 64).
        const std::pair<const char*, int32_t> degrees[] = {
            {"dp_replicate", l.dp_replicate}, {"cp", l.cp}, {"tp", l.tp}, {"pp", l.pp}};
        for (const auto& [field, degree] : degrees)
          if (degree > 1 && job_.world % degree != 0 && job_.where.count(field))
            diags_.note(job_.loc(field), fmt::format("this degree, {}, does not divide the world size {}", degree, job_.world));
        return;
      }
      dp_shard_ = job_.world / fixed;
      if (!job_.where.count("dp_shard")) job_.where["dp_shard"] = job_.file;
    }
    l.dp_shard = dp_shard_;
    l.etp = etp_;  // era A: 1 or tp; current torchtitan splits experts over EP only
    if (l.world() != job_.world) {
      diags_.error(job_.loc(job_.where.count("world") ? "world" : "dp_shard"),
                   fmt::format("Invalid parallel dims: dp_replicate({}) * dp_shard({}) * cp({}) * tp({}) * pp({}) != "
                               "WORLD_SIZE({})", l.dp_replicate, l.dp_shard, l.cp, l.tp, l.pp, job_.world));
      return;
    }
    if (l.ep > 1) {
      if (etp_ != 1 && etp_ != l.tp)
        diags_.error(job_.loc("etp"), fmt::format("expert_tensor_parallel_degree = {} must be 1 or equal to "
                                                  "tensor_parallel_degree ({})", etp_, l.tp));
      if ((l.dp_shard * l.cp * l.tp) % l.ep != 0)
        diags_.error(job_.loc("ep"), fmt::format("expert_parallel_degree = {} must divide dp_shard * cp * tp = {} (EP "
                                                 "borrows ranks from FSDP and TP)", l.ep, l.dp_shard * l.cp * l.tp));
    }
    if (l.dp_replicate > 1 && l.dp_shard == 1 && (l.tp > 1 || l.pp > 1 || l.cp > 1))
      diags_.error(job_.loc("dp_replicate"), "DDP has not supported > 1D parallelism");
    if (l.tp == 1) l.sequence_parallel = false;
    const int64_t divisor = static_cast<int64_t>(l.tp) * 2 * l.cp;  // seq_len_divisor, asserted at any degree
    if (job_.seq_len % divisor != 0)
      diags_.error(job_.loc("seq_len"), fmt::format("seq_len = {} must be divisible by tp * 2 * cp = {}", job_.seq_len,
                                                    divisor));
    // Sharding of the data-parallel group: FSDP over dp_shard·cp, HSDP with dp_replicate.
    const bool fsdp = l.dp_shard * l.cp > 1;
    job_.sharding = fsdp ? Sharding::kFsdp : Sharding::kDdp;
    job_.reshard_after_forward = reshard_ == "always" || (reshard_ == "default" && l.pp == 1);
    // Batch: era C tokens or era A sequences.
    const int64_t dp = static_cast<int64_t>(l.dp_replicate) * l.dp_shard;
    if (tokens_mb_) {
      read_tokens(dp);
    } else {
      read_sequences(dp);
    }
    resolve_schedule();
    (void)text;
  }

  void read_sequences(int64_t dp) {
    Layout& l = job_.layout;
    job_.where["microbatch_sequences"] = local_ ? local_->loc : job_.file;
    const int64_t global = global_batch_ < 0 ? local_batch_ * dp : global_batch_;
    if (global == 0) {
      diags_.error(global_ ? global_->loc : job_.file,
                   fmt::format("global_batch_size = 0: it must be -1 (local_batch_size × data-parallel degree, {}) or "
                               "a positive multiple of that", local_batch_ * dp));
      return;
    }
    if (global % (local_batch_ * dp) != 0) {
      diags_.error(global_ ? global_->loc : job_.file,
                   fmt::format("global_batch_size ({}) must be divisible by local_batch_size ({}) * data parallel "
                               "degree ({})", global, local_batch_, dp));
      return;
    }
    job_.global_batch_sequences = global;
    job_.where["global_batch"] = global_ ? global_->loc : job_.loc("microbatch_sequences");
    job_.grad_accum = static_cast<int32_t>(global / (local_batch_ * dp));
    if (l.pp > 1) {
      if (count_value_ && !mbs_value_) {
        // pipeline_parallel_microbatches (before 2025-04): a count.
        if (local_batch_ % pp_count_ != 0)
          diags_.error(count_value_->loc, fmt::format("local_batch_size ({}) must be divisible by {} ({})", local_batch_,
                                                      count_value_->key, pp_count_));
        job_.microbatches = pp_count_;
        job_.microbatch_sequences = local_batch_ / std::max(1, pp_count_);
        job_.where["microbatches"] = count_value_->loc;
      } else {
        if (local_batch_ % mbs_ != 0) {
          diags_.error(mbs_value_ ? mbs_value_->loc : job_.loc("microbatch_sequences"),
                       fmt::format("Batch size {} must be divisible by microbatch_size {}. Update the config arguments "
                                   "for either batch_size or pipeline_parallel_microbatch_size.", local_batch_, mbs_));
          return;
        }
        job_.microbatches = static_cast<int32_t>(local_batch_ / mbs_);
        job_.microbatch_sequences = mbs_;
        job_.where["microbatches"] = mbs_value_ ? mbs_value_->loc : job_.loc("microbatch_sequences");
        // Under PP a microbatch holds pipeline_parallel_microbatch_size sequences: that key sets
        // the activations a finding names ("set by the microbatch size at ..."), not
        // local_batch_size.
        if (mbs_value_) job_.where["microbatch_sequences"] = mbs_value_->loc;
      }
    } else {
      // Without PP each gradient-accumulation step is one microbatch of local_batch_size.
      job_.microbatches = job_.grad_accum;
      job_.grad_accum = 1;
      job_.microbatch_sequences = local_batch_;
      job_.where["microbatches"] = job_.loc("global_batch");
    }
  }

  void read_tokens(int64_t dp) {
    Layout& l = job_.layout;
    const int64_t count = l.pp > 1 ? pp_count_ : 1;
    const int64_t per_rank = tokens_per_mb_ * count;
    const int64_t step = tokens_per_step_ < 0 ? per_rank * dp : tokens_per_step_;
    if (step % (per_rank * dp) != 0) {
      diags_.error(tokens_step_ ? tokens_step_->loc : tokens_mb_->loc,
                   fmt::format("num_tokens_per_train_step ({}) must be divisible by tokens per data-parallel rank ({}) "
                               "* data parallel degree ({})", step, per_rank, dp));
      return;
    }
    if (tokens_per_mb_ % job_.seq_len != 0) {
      diags_.error(tokens_mb_->loc, fmt::format("num_tokens_per_microbatch_per_dp_rank ({}) is not a whole number of "
                                                "sequences of {} tokens: schedcheck models whole sequences",
                                                tokens_per_mb_, job_.seq_len));
      return;
    }
    job_.microbatch_sequences = tokens_per_mb_ / job_.seq_len;
    job_.where["microbatch_sequences"] = tokens_mb_->loc;
    job_.grad_accum = static_cast<int32_t>(step / (per_rank * dp));
    job_.global_batch_sequences = step / job_.seq_len;
    job_.where["global_batch"] = tokens_step_ ? tokens_step_->loc : tokens_mb_->loc;
    if (l.pp > 1) {
      job_.microbatches = static_cast<int32_t>(count);
      job_.where["microbatches"] = count_value_ ? count_value_->loc : job_.file;
    } else {
      job_.microbatches = job_.grad_accum;
      job_.grad_accum = 1;
      job_.where["microbatches"] = job_.loc("global_batch");
    }
  }

  /// The schedule class, stages per rank and the schedule's own microbatch rule (docs/facts/config-keys.md#pipeline-schedule-names).
  void resolve_schedule() {
    Layout& l = job_.layout;
    if (l.pp == 1) {
      job_.schedule = "1f1b";
      job_.stages_per_rank = 1;
      if (!schedule_name_.empty())
        job_.unmodelled.emplace_back("parallelism.pipeline_parallel_schedule (pipeline_parallel_degree is 1)",
                                     schedule_loc_);
      if (!csv_path_.empty())
        job_.unmodelled.emplace_back("parallelism.pipeline_parallel_schedule_csv (pipeline_parallel_degree is 1)",
                                     csv_loc_);
      return;
    }
    const std::string name = lower(schedule_name_.empty() ? "1F1B" : schedule_name_);
    const TorchtitanSchedule* k = nullptr;
    std::vector<std::string> names;
    for (const TorchtitanSchedule& e : torchtitan_schedules()) {
      if (name == lower(e.torch)) k = &e;
      names.push_back(e.torch);
    }
    if (!k) {
      diags_.error(schedule_loc_, fmt::format("pipeline_parallel_schedule = \"{}\" is not a schedule "
                                              "get_schedule_class knows (or one schedcheck models): expected one of {}",
                                              schedule_name_, fmt::join(names, ", ")));
      return;
    }
    job_.schedule = k->ours;
    const int32_t n = job_.microbatches;
    int32_t stages_per_rank = k->multi ? 2 : 1;
    if (layers_per_stage_ > 0) {
      const model::ModelDesc* m = nullptr;
      std::optional<model::ModelDesc> desc = model::model_preset(job_.model);
      if (desc) m = &*desc;
      if (m) {
        const int64_t eff = m->layers + first_less_ + last_less_;
        const int64_t stages = (eff + layers_per_stage_ - 1) / layers_per_stage_;
        if (stages % l.pp != 0) {
          diags_.error(lps_loc_, fmt::format("Number of virtual stages ({}) must be divisible by pipeline parallel "
                                             "size ({})", stages, l.pp));
          return;
        }
        stages_per_rank = static_cast<int32_t>(stages / l.pp);
        if (!k->multi && stages_per_rank != 1) {
          diags_.error(lps_loc_, fmt::format("Single stage schedule requires exactly 1 stage per rank, but got {} "
                                             "stages per rank ({} layers per stage)", stages_per_rank,
                                             layers_per_stage_));
          return;
        }
        if (k->multi && stages_per_rank < 2) {
          diags_.error(lps_loc_, fmt::format("Multi-stage schedule requires at least 2 stages per rank, but got {} "
                                             "stage per rank", stages_per_rank));
          return;
        }
      }
    }
    if (k->v && stages_per_rank != 2) {
      diags_.error(schedule_loc_, fmt::format("{} places stages in a V and requires exactly 2 stages per rank, got {}",
                                              schedule_name_, stages_per_rank));
      return;
    }
    job_.stages_per_rank = stages_per_rank;
    job_.layers_per_stage = layers_per_stage_;
    const int32_t stages = l.pp * stages_per_rank;
    if (split_loc_.valid() && !split_layers(stages)) return;
    if (!csv_path_.empty()) {
      read_schedule_csv();
      return;  // _PipelineScheduleRuntime runs the CSV: the named class's microbatch rules do not apply
    }
    const SourceLoc mb = job_.loc("microbatches");
    if (std::string why = torchtitan_microbatch_rule(job_.schedule, n, l.pp, stages); !why.empty())
      diags_.error(mb, job_.schedule == "interleaved-1f1b" || job_.schedule == "interleaved-zb"
                           ? fmt::format("{} of {}", why, schedule_name_)
                           : why);
    if (n < stages && job_.schedule != "1f1b")
      diags_.warning(mb, fmt::format("{} microbatches is fewer than the {} pipeline stages: torchtitan warns that this "
                                     "leaves the pipeline partly idle", n, stages));
  }

  /// Blocks per stage as generate_llm_fqn_per_model_part assigns them with the written
  /// pipeline_parallel_first/last_stage_less_layers (torchtitan@02ef790
  /// distributed/pipeline_parallel.py; config::torchtitan_stage_layers); its errors at the key.
  bool split_layers(int32_t stages) {
    std::optional<model::ModelDesc> m = model::model_preset(job_.model);
    if (!m) return true;  // lower_job reports the unknown model
    std::string why;
    std::vector<int64_t> split = torchtitan_stage_layers(m->layers, stages, first_less_, last_less_, &why);
    if (split.empty()) {
      // At the key whose weight torchtitan names (the first written key otherwise).
      const bool output = why.rfind("output_weight", 0) == 0;
      diags_.error(output && last_loc_.valid() ? last_loc_ : !output && first_loc_.valid() ? first_loc_ : split_loc_,
                   why);
      return false;
    }
    job_.stage_layers = std::move(split);
    job_.input_weight = first_less_;
    job_.output_weight = last_less_;
    job_.where["stage_layers"] = split_loc_;
    return true;
  }

  /// parallelism.pipeline_parallel_schedule_csv: torchtitan then runs _PipelineScheduleRuntime,
  /// which loads the file as compute-only action lists (_load_csv's default format); the named
  /// schedule still builds the stages and places them (loop, or V for ZBVZeroBubble and
  /// DualPipeV). The path is opened as torchtitan opens it, from the working directory. Shape
  /// checks against the job are lower_job's (it knows the stage placement).
  void read_schedule_csv() {
    std::error_code ec;
    // A NUL cannot be in a file name (os.path.isfile is False for it); the C library would stop
    // the name there and open another file.
    if (csv_path_.find('\0') != std::string::npos || !std::filesystem::is_regular_file(csv_path_, ec)) {
      const std::string dir = std::filesystem::path(path_).parent_path().string();
      diags_.error(csv_loc_, fmt::format("pipeline_parallel_schedule_csv = \"{}\" does not exist or is not a file: "
                                         "torchtitan opens the path from the directory it is launched in, and so does "
                                         "schedcheck{}", yaml_util::printable(csv_path_),
                                         dir.empty() ? "" : fmt::format(" (the config is in {}/)", dir)));
      return;
    }
    std::optional<CsvSchedule> cs = read_csv_schedule(csv_path_, diags_, CsvFormat::kComputeOnly, csv_loc_);
    if (!cs) return;
    if (cs->pipeline_starts.size() > 1) {
      diags_.error(csv_loc_, fmt::format("{} runs {} pipelines over its stages; torchtitan builds one", csv_path_,
                                         cs->pipeline_starts.size()));
      return;
    }
    job_.schedule_actions = std::move(cs->actions);
    job_.schedule_csv = csv_path_;
    job_.where["schedule_csv"] = csv_loc_;
  }

  using Layout = model::Layout;
  std::string path_;
  const JobContext& ctx_;
  TrainingJob& job_;
  Diagnostics& diags_;
  int32_t file_ = -1;
  toml::table root_;
  int32_t dp_shard_ = -1, etp_ = 1, pp_count_ = 1, layers_per_stage_ = 0;
  int64_t first_less_ = 1, last_less_ = 1, mbs_ = 1, local_batch_ = 8, global_batch_ = -1;
  int64_t tokens_per_mb_ = 0, tokens_per_step_ = -1;
  std::optional<Value> local_, global_, mbs_value_, count_value_, tokens_mb_, tokens_step_;
  std::string schedule_name_, reshard_ = "default";
  std::string csv_path_;         ///< pipeline_parallel_schedule_csv ("" when absent or empty)
  SourceLoc csv_loc_, split_loc_, first_loc_, last_loc_;
  SourceLoc schedule_loc_, lps_loc_;
};

}  // namespace

bool is_torchtitan_config(const std::string& path) {
  // Every .toml: the reader says when one is not a torchtitan job config, with its reason.
  return std::filesystem::path(path).extension() == ".toml";
}

bool read_torchtitan(const std::string& path, const JobContext& cli, TrainingJob* job, Diagnostics& diags) {
  return read_with_file_facts(path, cli, true, job, diags,
                              [&](const JobContext& ctx) { return Reader(path, ctx, job, diags).run(); });
}

}  // namespace sc::config
