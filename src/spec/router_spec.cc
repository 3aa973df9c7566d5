// Router spec loader: YAML text to RouterSpec, every error located and all of them collected.
#include "spec/router_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "spec/yaml_util.h"

#include "support/units.h"

namespace sc {
namespace {

const std::vector<std::string> kTopKeys = {"schedcheck", "name", "router"};
const std::vector<std::string> kCoreKeys = {"experts",        "top_k",          "policy",      "capacity_factor",
                                            "dropless",       "min_capacity",   "drop_policy", "capacity_scope",
                                            "fill_order",     "tie_break",      "pad_to_capacity"};
const std::vector<std::string> kFrameKeys = {"bound", "inference", "dispatch", "megatron", "deepspeed", "check"};
const std::vector<std::string> kPropertyNames = {"prefix_causality", "batch_independence", "train_inference",
                                                 "drop_free", "deterministic"};
const std::vector<std::string> kInferenceKeys = {"top_k",       "policy",         "capacity_factor", "dropless",
                                                 "min_capacity", "drop_policy",   "capacity_scope",  "fill_order",
                                                 "tie_break",   "pad_to_capacity"};
const std::vector<std::string> kBoundKeys = {"batch", "seq_len"};
const std::vector<std::string> kDispatchKeys = {"ep_size", "hidden", "dtype", "batch", "seq_len", "limit_bytes"};
const std::vector<std::string> kMegatronKeys = {"num_moe_experts", "moe_router_topk", "moe_expert_capacity_factor",
                                                "moe_token_drop_policy", "moe_pad_expert_input_to_capacity"};
const std::vector<std::string> kDeepSpeedKeys = {"num_experts",  "k",          "capacity_factor", "eval_capacity_factor",
                                                 "min_capacity", "drop_tokens", "use_rts"};

using yaml_util::Entry;
using yaml_util::Fields;
using yaml_util::describe;

// Reader options of router specs: every error is reported and user text is quoted as given.
yaml_util::ReaderOptions loader_options() {
  yaml_util::ReaderOptions o;
  o.max_errors = std::numeric_limits<int>::max();
  o.escape_text = false;
  return o;
}

class RouterLoader : public yaml_util::Reader {
 public:
  RouterLoader(int32_t file, Diagnostics& diags) : Reader(file, diags, loader_options()) {}

  std::optional<RouterSpec> load(const YAML::Node& root, const std::string& stem);

 private:
  // A whole number in [min, max] of at most 18 digits; errors name both bounds (unlike Reader::whole).
  std::optional<int64_t> ranged(const Entry& e, const std::string& key, int64_t min, int64_t max);
  std::optional<double> positive(const Entry& e, const std::string& key);

  // Reads the core keys present in `f` into `c` (for the top level and for `inference`).
  void read_core(const Fields& f, const std::string& section, RouterConfig& c, RouterLocs* locs, bool* cap_given,
                 bool* dropless_given);
  void read_megatron(const Entry& e, RouterSpec& spec);
  void read_deepspeed(const Entry& e, RouterSpec& spec);
  void read_bound(const Entry& e, RouterSpec& spec);
  void read_dispatch(const Entry& e, RouterSpec& spec);
  void check_config(RouterConfig& c, const std::string& what, const SourceLoc& where, bool cap_given,
                    bool dropless_given, bool drop_policy_given);
};

std::optional<int64_t> RouterLoader::ranged(const Entry& e, const std::string& key, int64_t min, int64_t max) {
  const std::string s = e.value.IsScalar() ? e.value.Scalar() : std::string();
  bool digits = !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    error(loc(e), fmt::format("{} must be a whole number from {} to {}, got {}", key, min, max, describe(e.value)));
    return std::nullopt;
  }
  int64_t v = std::stoll(s);
  if (v < min || v > max) {
    error(loc(e), fmt::format("{} must be from {} to {}, got {}", key, min, max, v));
    return std::nullopt;
  }
  return v;
}

std::optional<double> RouterLoader::positive(const Entry& e, const std::string& key) {
  if (e.value.IsScalar()) {
    const std::string& s = e.value.Scalar();
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(v) && v > 0 && v <= 1e6) return v;
    if (!s.empty() && end == s.c_str() + s.size() && !std::isnan(v) && v > 1e6) {
      error(loc(e), fmt::format("{} is {}, above the largest accepted, 1e6 (a capacity that large is dropless: "
                                "write dropless: true)", key, s));
      return std::nullopt;
    }
  }
  error(loc(e), fmt::format("{} must be a number above 0 and at most 1e6, got {}", key, describe(e.value)));
  return std::nullopt;
}

void RouterLoader::read_core(const Fields& f, const std::string& section, RouterConfig& c, RouterLocs* locs,
                             bool* cap_given, bool* dropless_given) {
  auto key = [&](const char* k) { return section.empty() ? std::string(k) : section + "." + k; };
  auto get = [&](const char* k) -> const Entry* {
    auto it = f.find(k);
    return it == f.end() ? nullptr : &it->second;
  };
  if (const Entry* e = get("experts"))
    if (auto v = ranged(*e, key("experts"), 1, kMaxRouterExperts)) c.experts = static_cast<int32_t>(*v);
  if (const Entry* e = get("top_k"))
    if (auto v = ranged(*e, key("top_k"), 1, kMaxRouterExperts)) c.top_k = static_cast<int32_t>(*v);
  if (const Entry* e = get("policy")) {
    if (locs) locs->policy = loc(*e);
    if (auto v = choice(*e, key("policy"), {"token_choice", "expert_choice"}))
      c.policy = *v == "token_choice" ? RoutingPolicy::kTokenChoice : RoutingPolicy::kExpertChoice;
  }
  if (const Entry* e = get("capacity_factor")) {
    if (locs) locs->capacity = loc(*e);
    if (auto v = positive(*e, key("capacity_factor"))) {
      c.capacity_factor = *v;
      c.dropless = false;
    }
    *cap_given = true;
  }
  if (const Entry* e = get("dropless")) {
    if (locs && !locs->capacity.valid()) locs->capacity = loc(*e);
    if (auto v = boolean(*e, key("dropless"))) {
      c.dropless = *v;
      *dropless_given = *v;
    }
  }
  if (const Entry* e = get("min_capacity"))
    if (auto v = ranged(*e, key("min_capacity"), 0, 1 << 30)) c.min_capacity = static_cast<int32_t>(*v);
  if (const Entry* e = get("drop_policy")) {
    if (locs) locs->drop_policy = loc(*e);
    if (auto v = choice(*e, key("drop_policy"), {"position", "probs", "priority", "random"}))
      c.drop_policy = *v == "position" ? DropPolicy::kPosition
                      : *v == "probs"  ? DropPolicy::kProbs
                      : *v == "priority" ? DropPolicy::kPriority
                                         : DropPolicy::kRandom;
  }
  if (const Entry* e = get("capacity_scope")) {
    if (locs) locs->scope = loc(*e);
    if (auto v = choice(*e, key("capacity_scope"), {"sequence", "microbatch", "ep_group"}))
      c.scope = *v == "sequence" ? CapacityScope::kSequence
                : *v == "microbatch" ? CapacityScope::kMicrobatch
                                     : CapacityScope::kEpGroup;
  }
  if (const Entry* e = get("fill_order")) {
    if (locs) locs->fill_order = loc(*e);
    if (auto v = choice(*e, key("fill_order"), {"position_major", "batch_major"}))
      c.fill_order = *v == "position_major" ? FillOrder::kPositionMajor : FillOrder::kBatchMajor;
  }
  if (const Entry* e = get("tie_break")) {
    if (locs) locs->tie_break = loc(*e);
    if (auto v = choice(*e, key("tie_break"), {"lower_index", "unspecified"}))
      c.tie_break = *v == "lower_index" ? TieBreak::kLowerIndex : TieBreak::kUnspecified;
  }
  if (const Entry* e = get("pad_to_capacity"))
    if (auto v = boolean(*e, key("pad_to_capacity"))) c.pad_to_capacity = *v;
}

void RouterLoader::check_config(RouterConfig& c, const std::string& what, const SourceLoc& where, bool cap_given,
                                bool dropless_given, bool drop_policy_given) {
  if (c.experts >= 1 && c.top_k > c.experts)
    error(where, fmt::format("{}top_k is {} but there are only {} experts", what, c.top_k, c.experts));
  if (cap_given && dropless_given)
    error(where, fmt::format("{}give capacity_factor or dropless: true, not both", what));
  if (c.policy == RoutingPolicy::kExpertChoice && c.dropless)
    error(where, fmt::format("{}expert_choice needs a capacity_factor: each expert takes a fixed number of tokens",
                             what));
  if (c.policy == RoutingPolicy::kTokenChoice && !cap_given && !dropless_given)
    error(where, fmt::format("{}say how full experts get: capacity_factor: N (tokens beyond capacity are dropped) "
                             "or dropless: true", what));
  if (c.policy == RoutingPolicy::kTokenChoice && cap_given && !drop_policy_given)
    error(where, fmt::format("{}capacity_factor needs drop_policy: position, probs, priority or random", what));
}

void RouterLoader::read_bound(const Entry& e, RouterSpec& spec) {
  spec.locs.bound = loc(e);
  if (!is_map(e, "router.bound")) return;
  Fields f = fields(e.value, "router.bound", kBoundKeys);
  if (auto it = f.find("batch"); it != f.end())
    if (auto v = ranged(it->second, "router.bound.batch", 1, kMaxRouterBatch)) spec.batch = static_cast<int32_t>(*v);
  if (auto it = f.find("seq_len"); it != f.end())
    if (auto v = ranged(it->second, "router.bound.seq_len", 1, kMaxRouterSeqLen)) spec.seq_len = static_cast<int32_t>(*v);
  if (spec.batch * spec.seq_len > kMaxRouterTokens)
    error(loc(e), fmt::format("router.bound has {} x {} = {} tokens; the proofs take at most {}", spec.batch,
                              spec.seq_len, spec.batch * spec.seq_len, kMaxRouterTokens));
}

void RouterLoader::read_dispatch(const Entry& e, RouterSpec& spec) {
  spec.locs.dispatch = loc(e);
  if (!is_map(e, "router.dispatch")) return;
  Fields f = fields(e.value, "router.dispatch", kDispatchKeys);
  DispatchSpec& d = spec.dispatch;
  d.given = true;
  if (auto it = f.find("ep_size"); it != f.end())
    if (auto v = ranged(it->second, "router.dispatch.ep_size", 1, 1 << 16)) d.ep_size = static_cast<int32_t>(*v);
  if (auto it = f.find("hidden"); it != f.end()) {
    if (auto v = ranged(it->second, "router.dispatch.hidden", 1, int64_t{1} << 24)) d.hidden = *v;
  } else {
    error(loc(e), "router.dispatch needs hidden (elements per token, e.g. 4096)");
  }
  if (auto it = f.find("dtype"); it != f.end()) {
    if (auto v = choice(it->second, "router.dispatch.dtype", {"fp32", "bf16", "fp16", "fp8"})) {
      d.dtype = *v;
      d.dtype_bytes = *v == "fp32" ? 4 : *v == "fp8" ? 1 : 2;
    }
  }
  if (auto it = f.find("batch"); it != f.end())
    if (auto v = ranged(it->second, "router.dispatch.batch", 1, 1 << 20)) d.batch = *v;
  if (auto it = f.find("seq_len"); it != f.end())
    if (auto v = ranged(it->second, "router.dispatch.seq_len", 1, 1 << 24)) d.seq_len = *v;
  if (auto it = f.find("limit_bytes"); it != f.end()) {
    spec.locs.limit = loc(it->second);
    std::string why;
    auto v = it->second.value.IsScalar() ? parse_bytes(it->second.value.Scalar(), &why) : std::nullopt;
    if (!v)
      error(loc(it->second), fmt::format("router.dispatch.limit_bytes must be a byte count such as 2GiB{}",
                                         why.empty() ? "" : ": " + why));
    else
      d.limit_bytes = *v;
  }
}

void RouterLoader::read_megatron(const Entry& e, RouterSpec& spec) {
  spec.preset = "megatron";
  if (!is_map(e, "router.megatron")) return;
  Fields f = fields(e.value, "router.megatron", kMegatronKeys);
  RouterConfig& c = spec.train;
  // Megatron-Core: capacity over the local tokens flattened from [s, b, h] (position-major).
  c.scope = CapacityScope::kMicrobatch;
  c.fill_order = FillOrder::kPositionMajor;
  c.top_k = 2;
  c.drop_policy = DropPolicy::kProbs;
  c.dropless = true;
  if (auto it = f.find("num_moe_experts"); it != f.end()) {
    if (auto v = ranged(it->second, "router.megatron.num_moe_experts", 1, kMaxRouterExperts))
      c.experts = static_cast<int32_t>(*v);
  } else {
    error(loc(e), "router.megatron needs num_moe_experts");
  }
  if (auto it = f.find("moe_router_topk"); it != f.end())
    if (auto v = ranged(it->second, "router.megatron.moe_router_topk", 1, kMaxRouterExperts))
      c.top_k = static_cast<int32_t>(*v);
  if (auto it = f.find("moe_expert_capacity_factor"); it != f.end()) {
    spec.locs.capacity = loc(it->second);
    if (!it->second.value.IsNull() && !(it->second.value.IsScalar() && it->second.value.Scalar() == "None"))
      if (auto v = positive(it->second, "router.megatron.moe_expert_capacity_factor")) {
        c.capacity_factor = *v;
        c.dropless = false;
      }
  }
  if (auto it = f.find("moe_token_drop_policy"); it != f.end()) {
    spec.locs.drop_policy = loc(it->second);
    if (auto v = choice(it->second, "router.megatron.moe_token_drop_policy", {"probs", "position"}))
      c.drop_policy = *v == "probs" ? DropPolicy::kProbs : DropPolicy::kPosition;
  }
  if (auto it = f.find("moe_pad_expert_input_to_capacity"); it != f.end())
    if (auto v = boolean(it->second, "router.megatron.moe_pad_expert_input_to_capacity")) c.pad_to_capacity = *v;
  if (c.pad_to_capacity && c.dropless)
    error(loc(e), "moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor");
}

void RouterLoader::read_deepspeed(const Entry& e, RouterSpec& spec) {
  spec.preset = "deepspeed";
  if (!is_map(e, "router.deepspeed")) return;
  Fields f = fields(e.value, "router.deepspeed", kDeepSpeedKeys);
  RouterConfig& c = spec.train;
  // DeepSpeed MoE (deepspeed/moe/sharded_moe.py): capacity over the microbatch's tokens flattened
  // batch-major; top-1 gating keeps tokens by random token selection (use_rts, on by default),
  // otherwise by position (cumulative sum); top-2 by position. Defaults as in its MoE layer.
  c.scope = CapacityScope::kMicrobatch;
  c.fill_order = FillOrder::kBatchMajor;
  c.top_k = 1;
  c.capacity_factor = 1.0;
  c.min_capacity = 4;
  bool drop_tokens = true, use_rts = true;
  double eval_cf = 1.0;
  if (auto it = f.find("num_experts"); it != f.end()) {
    if (auto v = ranged(it->second, "router.deepspeed.num_experts", 1, kMaxRouterExperts))
      c.experts = static_cast<int32_t>(*v);
  } else {
    error(loc(e), "router.deepspeed needs num_experts");
  }
  if (auto it = f.find("k"); it != f.end())
    if (auto v = ranged(it->second, "router.deepspeed.k", 1, 2)) c.top_k = static_cast<int32_t>(*v);
  if (auto it = f.find("capacity_factor"); it != f.end()) {
    spec.locs.capacity = loc(it->second);
    if (auto v = positive(it->second, "router.deepspeed.capacity_factor")) c.capacity_factor = *v;
  }
  bool eval_given = false;
  if (auto it = f.find("eval_capacity_factor"); it != f.end()) {
    spec.locs.inference = loc(it->second);
    if (auto v = positive(it->second, "router.deepspeed.eval_capacity_factor")) eval_cf = *v;
    eval_given = true;
  }
  if (auto it = f.find("min_capacity"); it != f.end())
    if (auto v = ranged(it->second, "router.deepspeed.min_capacity", 0, 1 << 30)) c.min_capacity = static_cast<int32_t>(*v);
  if (auto it = f.find("drop_tokens"); it != f.end()) {
    if (!spec.locs.capacity.valid()) spec.locs.capacity = loc(it->second);
    if (auto v = boolean(it->second, "router.deepspeed.drop_tokens")) drop_tokens = *v;
  }
  if (auto it = f.find("use_rts"); it != f.end()) {
    spec.locs.drop_policy = loc(it->second);
    if (auto v = boolean(it->second, "router.deepspeed.use_rts")) use_rts = *v;
  }
  c.dropless = !drop_tokens;
  c.drop_policy = c.top_k == 1 && use_rts ? DropPolicy::kRandom : DropPolicy::kPosition;
  spec.inference = c;
  if (eval_given || eval_cf != c.capacity_factor) {
    spec.inference.capacity_factor = eval_cf;
    spec.inference_given = eval_cf != c.capacity_factor;
  }
}

std::optional<RouterSpec> RouterLoader::load(const YAML::Node& root, const std::string& stem) {
  const size_t errors_before = diags_.error_count();
  RouterSpec spec;
  spec.name = stem;
  spec.locs.file = file_start();
  if (!root.IsMap()) {
    error(loc(root), fmt::format("a router spec is a map with schedcheck: 1 and router:, got {}", describe(root)));
    return std::nullopt;
  }
  Fields top = fields(root, "the top level", kTopKeys);
  if (auto it = top.find("schedcheck"); it == top.end()) {
    error(spec.locs.file, "the spec must start with schedcheck: 1 (the spec version)");
  } else if (!it->second.value.IsScalar() || it->second.value.Scalar() != "1") {
    error(loc(it->second), fmt::format("schedcheck must be 1 (the spec version), got {}", describe(it->second.value)));
  }
  if (auto it = top.find("name"); it != top.end())
    if (auto v = text(it->second, "name")) spec.name = *v;
  auto rt = top.find("router");
  if (rt == top.end()) {
    error(spec.locs.file, "the spec has no router: section");
    return std::nullopt;
  }
  const Entry& r = rt->second;
  spec.locs.router = loc(r.key);
  if (!is_map(r, "router")) return std::nullopt;
  std::vector<std::string> allowed = kCoreKeys;
  allowed.insert(allowed.end(), kFrameKeys.begin(), kFrameKeys.end());
  Fields f = fields(r.value, "router", allowed);

  const bool megatron = f.count("megatron"), deepspeed = f.count("deepspeed");
  bool cap_given = false, dropless_given = false;
  if (megatron && deepspeed) error(loc(f.at("deepspeed").key), "give one framework preset: megatron or deepspeed");
  if (megatron || deepspeed) {
    const Entry& pre = f.at(megatron ? "megatron" : "deepspeed");
    for (const auto& [name, e] : f)
      if (std::find(kCoreKeys.begin(), kCoreKeys.end(), name) != kCoreKeys.end() && name != "tie_break")
        error(loc(e.key), fmt::format("'{}' is set by the {} preset; remove it or drop the preset", name,
                                      megatron ? "megatron" : "deepspeed"));
    if (megatron) read_megatron(pre, spec);
    else read_deepspeed(pre, spec);
    if (auto it = f.find("tie_break"); it != f.end()) {
      Fields only{{"tie_break", it->second}};
      read_core(only, "", spec.train, &spec.locs, &cap_given, &dropless_given);
    }
    if (!deepspeed) spec.inference = spec.train;
    else spec.inference.tie_break = spec.train.tie_break;
  } else {
    read_core(f, "", spec.train, &spec.locs, &cap_given, &dropless_given);
    if (!f.count("experts")) error(spec.locs.router, "router needs experts (the number of experts)");
    if (!f.count("top_k")) error(spec.locs.router, "router needs top_k (experts per token, or tokens per expert "
                                                   "factor for expert_choice)");
    check_config(spec.train, "", spec.locs.router, cap_given, dropless_given, f.count("drop_policy") > 0);
    spec.inference = spec.train;
  }
  if (auto it = f.find("bound"); it != f.end()) read_bound(it->second, spec);
  if (auto it = f.find("inference"); it != f.end()) {
    spec.locs.inference = loc(it->second.key);
    if (is_map(it->second, "router.inference")) {
      Fields inf = fields(it->second.value, "router.inference", kInferenceKeys);
      bool icap = false, idropless = false;
      if (inf.count("capacity_factor")) spec.inference.dropless = false;
      read_core(inf, "router.inference", spec.inference, nullptr, &icap, &idropless);
      spec.inference_given = true;
      check_config(spec.inference, "router.inference: ", loc(it->second.key), icap || !idropless, idropless, true);
    }
  }
  if (auto it = f.find("dispatch"); it != f.end()) read_dispatch(it->second, spec);
  // The encoding compares every pair of a token's experts: keep it to a size Z3 answers quickly.
  const int64_t pairs = int64_t{spec.train.experts} * spec.train.experts * spec.batch * spec.seq_len;
  if (pairs > kMaxRouterExpertPairs)
    error(spec.locs.bound.valid() ? spec.locs.bound : spec.locs.router,
          fmt::format("{} tokens x {} experts squared is more than the {} expert comparisons the proofs take; "
                      "lower router.bound",
                      spec.batch * spec.seq_len, spec.train.experts, kMaxRouterExpertPairs));
  if (auto it = f.find("check"); it != f.end()) {
    const YAML::Node& v = it->second.value;
    if (!v.IsSequence() || v.size() == 0) {
      error(loc(it->second), fmt::format("router.check must be a list of properties ({}), got {}",
                                         fmt::join(kPropertyNames, ", "), describe(v)));
    } else {
      for (const YAML::Node& item : v) {
        Entry e{it->second.key, item};
        if (auto name = choice(e, "router.check", kPropertyNames)) spec.checks.push_back(*name);
      }
    }
  }
  if (spec.dispatch.given) {
    if (spec.dispatch.batch == 0) spec.dispatch.batch = spec.batch;
    if (spec.dispatch.seq_len == 0) spec.dispatch.seq_len = spec.seq_len;
    if (spec.train.experts > 0 && spec.train.experts % spec.dispatch.ep_size != 0)
      error(spec.locs.dispatch, fmt::format("router.dispatch.ep_size {} does not divide the {} experts",
                                            spec.dispatch.ep_size, spec.train.experts));
  }
  if (diags_.error_count() != errors_before) return std::nullopt;
  return spec;
}

std::optional<RouterSpec> parse_registered(int32_t file, const std::string& name, const std::string& text,
                                           Diagnostics& diags) {
  RouterLoader loader(file, diags);
  if (text.find('\0') != std::string::npos) {
    diags.error(SourceLoc{file, 1, 1}, "the spec is not text: it holds a NUL byte");
    return std::nullopt;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    diags.error(e.mark.is_null() ? SourceLoc{file, 1, 1} : loader.at(e.mark.line, e.mark.column),
                fmt::format("invalid YAML: {}", e.msg));
    return std::nullopt;
  }
  return loader.guard([&] { return loader.load(root, yaml_util::default_name(name)); });
}

}  // namespace

bool is_router_spec(const std::string& path) {
  std::string text;
  std::string why;  // read_input_file applies the input size cap before reading
  return yaml_util::has_yaml_extension(path) && read_input_file(path, &text, &why) &&
         yaml_util::declares_key(text, "router");
}

std::optional<RouterSpec> load_router_spec(const std::string& path, Diagnostics& diags) {
  std::string text, why;
  // read_input_file records the path, so that no output replaces a router spec another spec references.
  if (!read_input_file(path, &text, &why)) {
    int32_t file = register_source(path, "");
    diags.error(SourceLoc{file, 1, 1}, fmt::format("cannot read the spec: {}", why));
    return std::nullopt;
  }
  int32_t file = register_source(path, text);
  return parse_registered(file, path, text, diags);
}

std::optional<RouterSpec> parse_router_spec(const std::string& name, const std::string& text, Diagnostics& diags) {
  int32_t file = register_source(name, text);
  return parse_registered(file, name, text, diags);
}

}  // namespace sc
