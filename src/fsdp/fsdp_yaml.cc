// FSDP spec loader: YAML text to FsdpSpec, every error located and all of them collected.
#include "fsdp/fsdp_yaml.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "spec/yaml_util.h"
#include "support/source.h"
#include "support/units.h"

namespace sc {
namespace {

const std::vector<std::string> kTopKeys = {"schedcheck", "name", "ranks", "memory", "fsdp", "numerics",
                                           "budget"};  // budget: read by spec/budget.cc
const std::vector<std::string> kMemoryKeys = {"limit_bytes"};
const std::vector<std::string> kFsdpKeys = {"implementation", "shard_size",   "replicate_size", "dtypes",
                                            "link",           "microbatches", "iterations",     "optimizer",
                                            "units",          "options",      "ranks_override", "programs"};
const std::vector<std::string> kDtypeKeys = {"param", "reduce"};
const std::vector<std::string> kLinkKeys = {"bandwidth", "latency", "model"};
const std::vector<std::string> kOptimizerKeys = {"kind", "state_bytes_per_param", "step"};
const std::vector<std::string> kUnitKeys = {"name",     "repeat",   "params_bytes", "params",
                                            "forward",  "backward", "activation_bytes"};
const std::vector<std::string> kOverrideKeys = {"skip_units", "repeat_units", "microbatches"};
const std::vector<std::string> kOpKeys = {"op", "unit", "stream", "id", "after"};
const std::vector<std::string> kOpKinds = {"all_gather", "forward",    "backward", "free",
                                           "reduce_scatter", "all_reduce", "optimizer"};
const std::vector<std::string> kStreams = {"compute", "all_gather", "ag_copy_in", "reduce_scatter", "all_reduce"};
const std::vector<std::string> kImplementations = {"fsdp1", "fsdp2", "zero3"};

// Data types and their sizes in bytes.
const std::vector<std::pair<std::string, int>> kDtypes = {{"bf16", 2}, {"fp16", 2}, {"fp32", 4},
                                                          {"fp8", 1},  {"e4m3", 1}, {"e5m2", 1}};

// Options and the implementations they belong to (docs/facts/fsdp-zero.md; PyTorch FSDP1/FSDP2, DeepSpeed).
const std::vector<std::pair<std::string, std::vector<std::string>>> kOptionOwners = {
    {"reshard_after_forward", {"fsdp2"}},
    {"gradient_divide_factor", {"fsdp2"}},
    {"forward_prefetch_depth", {"fsdp2"}},
    {"backward_prefetch_depth", {"fsdp2"}},
    {"forward_prefetch", {"fsdp1", "fsdp2"}},
    {"backward_prefetch", {"fsdp1", "fsdp2"}},
    {"limit_all_gathers", {"fsdp1"}},
    {"prefetch_bucket_size", {"zero3"}},
    {"max_live_parameters", {"zero3"}},
};

using yaml_util::describe;
using yaml_util::did_you_mean;
using yaml_util::Entry;
using yaml_util::Fields;
using yaml_util::printable;

std::vector<std::string> option_keys() {
  std::vector<std::string> out;
  for (const auto& [k, owners] : kOptionOwners) out.push_back(k);
  return out;
}

class FsdpLoader : public yaml_util::Reader {
 public:
  FsdpLoader(int32_t file, Diagnostics& diags) : Reader(file, diags) {}

  std::optional<FsdpSpec> load(const YAML::Node& root, const std::string& stem);

 private:
  // Reader's duration and bytes of e's value at loc(e), capped at kMaxFsdpSeconds and kMaxFsdpBytes.
  std::optional<double> duration(const Entry& e, const std::string& key);
  std::optional<int64_t> bytes(const Entry& e, const std::string& key);
  std::optional<int64_t> count(const Entry& e, const std::string& key);
  std::optional<double> number(const Entry& e, const std::string& key, double max);
  // A unit name that must exist (after expansion), with "did you mean".
  std::optional<std::string> unit_ref(const YAML::Node& n, const std::string& key);
  // A list of existing unit names (a single name is taken as a list of one).
  std::vector<std::string> unit_list(const Entry& e, const std::string& key);

  void read_dtypes(const Entry& e, FsdpSpec& spec);
  void read_groups(const Fields& f, FsdpSpec& spec);
  void read_link(const Entry* e, FsdpSpec& spec);
  void read_optimizer(const Entry& e, FsdpSpec& spec);
  void read_units(const Entry* e, FsdpSpec& spec);
  void read_options(const Entry& e, const std::string& impl, FsdpSpec& spec);
  std::map<std::string, std::vector<std::string>> read_prefetch_lists(const Entry& e, const std::string& key);
  void read_overrides(const Entry& e, FsdpSpec& spec);
  std::optional<int> rank_key(const YAML::Node& k, const std::string& section, int ranks);
  void read_programs(const Entry& e, FsdpSpec& spec);
  std::vector<FsdpProgramOp> read_program(const Entry& e, const std::string& key);

  std::vector<std::string> unit_names_;                  // expanded, in forward order
  std::unordered_map<std::string, size_t> unit_index_;  // expanded name -> position
  std::unordered_map<std::string, int64_t> repeated_;    // name of a unit with repeat -> repeat
  bool units_ok_ = false;  // the unit list loaded without errors (references can be checked)
};

std::optional<double> FsdpLoader::duration(const Entry& e, const std::string& key) {
  auto v = Reader::duration(e.value, loc(e), key);
  if (!v) return std::nullopt;
  if (*v > kMaxFsdpSeconds) {
    error(loc(e), fmt::format("{} is too long (at most {:g} s)", key, kMaxFsdpSeconds));
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> FsdpLoader::bytes(const Entry& e, const std::string& key) {
  auto v = Reader::bytes(e.value, loc(e), key);
  if (!v) return std::nullopt;
  if (*v > kMaxFsdpBytes) {
    error(loc(e), fmt::format("{} is too large (at most 2^62 bytes)", key));
    return std::nullopt;
  }
  return v;
}

// A parameter count: a plain number ("50000000", "5e7") or one with K, M or B (thousand,
// million, billion): "525M". Rounded to the nearest whole parameter.
std::optional<int64_t> FsdpLoader::count(const Entry& e, const std::string& key) {
  const std::string s = e.value.IsScalar() ? e.value.Scalar() : std::string();
  auto fail = [&](const std::string& why) {
    error(loc(e), fmt::format("{} must be a parameter count such as 525M, 7B or 5e7{}, got {}", key, why,
                              describe(e.value)));
    return std::nullopt;
  };
  if (s.empty()) return fail("");
  double v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v, std::chars_format::general);
  if (ec != std::errc() || ptr == s.data() || !std::isfinite(v)) return fail("");
  if (v < 0) {
    error(loc(e), fmt::format("{} must not be negative, got {}", key, describe(e.value)));
    return std::nullopt;
  }
  std::string_view unit(ptr, static_cast<size_t>(end - ptr));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  double scale = unit.empty() ? 1 : unit == "K" ? 1e3 : unit == "M" ? 1e6 : unit == "B" ? 1e9 : 0;
  if (scale == 0) return fail(" (suffixes: K, M, B)");
  double n = std::round(v * scale);
  if (n > static_cast<double>(kMaxFsdpBytes)) {
    error(loc(e), fmt::format("{} is too large (at most 2^62)", key));
    return std::nullopt;
  }
  return static_cast<int64_t>(n);
}

std::optional<double> FsdpLoader::number(const Entry& e, const std::string& key, double max) {
  if (e.value.IsScalar()) {
    const std::string& s = e.value.Scalar();
    double v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
    if (!s.empty() && ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(v) && v >= 0 && v <= max)
      return v;
  }
  error(loc(e), fmt::format("{} must be a number from 0 to {:g}, got {}", key, max, describe(e.value)));
  return std::nullopt;
}

std::optional<std::string> FsdpLoader::unit_ref(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar() || n.Scalar().empty()) {
    error(loc(n), fmt::format("{} must name a unit, got {}", key, describe(n)));
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  if (!units_ok_ || unit_index_.count(s)) return s;
  if (auto it = repeated_.find(s); it != repeated_.end()) {
    error(loc(n), fmt::format("{} names '{}', which has repeat: {}; name one of {}.0 .. {}.{}", key, printable(s),
                              it->second, printable(s), printable(s), it->second - 1));
    return std::nullopt;
  }
  error(loc(n), fmt::format("{} names '{}', which is no unit{}", key, printable(s), did_you_mean(s, unit_names_)));
  return std::nullopt;
}

std::vector<std::string> FsdpLoader::unit_list(const Entry& e, const std::string& key) {
  std::vector<std::string> out;
  if (e.value.IsScalar()) {
    if (auto u = unit_ref(e.value, key)) out.push_back(*u);
    return out;
  }
  if (!e.value.IsSequence()) {
    error(loc(e), fmt::format("{} must be a list of unit names, got {}", key, describe(e.value)));
    return out;
  }
  for (const YAML::Node& item : e.value)
    if (auto u = unit_ref(item, key)) out.push_back(*u);
  return out;
}

void FsdpLoader::read_dtypes(const Entry& e, FsdpSpec& spec) {
  if (!is_map(e, "fsdp.dtypes", "param and reduce")) return;
  Fields f = fields(e.value, "fsdp.dtypes", kDtypeKeys);
  std::vector<std::string> names;
  for (const auto& [n, b] : kDtypes) names.push_back(n);
  auto dtype = [&](const Entry& d, const std::string& key) -> std::optional<DType> {
    auto n = choice(d, key, names);
    if (!n) return std::nullopt;
    for (const auto& [name, size] : kDtypes)
      if (name == *n) return DType{name, size};
    return std::nullopt;
  };
  bool reduce_given = false;
  if (auto it = f.find("param"); it != f.end()) {
    if (auto d = dtype(it->second, "fsdp.dtypes.param")) spec.param_dtype = *d;
    spec.locs.reduce_dtype = loc(it->second.value);
  }
  if (auto it = f.find("reduce"); it != f.end()) {
    reduce_given = true;
    if (auto d = dtype(it->second, "fsdp.dtypes.reduce")) spec.reduce_dtype = *d;
    spec.locs.reduce_dtype = loc(it->second.value);
  }
  if (!reduce_given) spec.reduce_dtype = spec.param_dtype;
}

void FsdpLoader::read_groups(const Fields& f, FsdpSpec& spec) {
  std::optional<int64_t> shard, replicate;
  SourceLoc where = spec.locs.fsdp;
  if (auto it = f.find("shard_size"); it != f.end()) {
    where = loc(it->second);
    shard = whole(it->second, "fsdp.shard_size", 1, kMaxFsdpRanks);
    if (!shard) return;
  }
  if (auto it = f.find("replicate_size"); it != f.end()) {
    if (!shard) where = loc(it->second);
    replicate = whole(it->second, "fsdp.replicate_size", 1, kMaxFsdpRanks);
    if (!replicate) return;
  }
  if (spec.ranks <= 0) return;  // ranks was missing or wrong: reported already
  spec.replicate_size = static_cast<int>(replicate.value_or(1));
  if (!shard) {
    if (spec.ranks % spec.replicate_size != 0) {
      error(where, fmt::format("fsdp.replicate_size {} does not divide ranks {}", spec.replicate_size, spec.ranks));
      return;
    }
    spec.shard_size = spec.ranks / spec.replicate_size;
    return;
  }
  spec.shard_size = static_cast<int>(*shard);
  if (int64_t{spec.shard_size} * spec.replicate_size != spec.ranks)
    error(where, fmt::format("fsdp.shard_size {} x replicate_size {} is {}, but ranks is {}", spec.shard_size,
                             spec.replicate_size, int64_t{spec.shard_size} * spec.replicate_size, spec.ranks));
}

void FsdpLoader::read_link(const Entry* e, FsdpSpec& spec) {
  if (!e) {
    error(spec.locs.fsdp, "fsdp needs link: {bandwidth: ...} (the collective bandwidth per rank, such as 450GB/s)");
    return;
  }
  if (!is_map(*e, "fsdp.link", "bandwidth, latency and model")) return;
  Fields f = fields(e->value, "fsdp.link", kLinkKeys);
  if (auto it = f.find("bandwidth"); it != f.end()) {
    const Entry& b = it->second;
    if (auto v = parsed(b.value, loc(b), "fsdp.link.bandwidth", "bytes per second such as 450GB/s",
                        parse_bandwidth_bytes_per_s)) {
      if (!(*v > 0) || !std::isfinite(*v))
        error(loc(b), "fsdp.link.bandwidth must be above 0");
      else
        spec.bandwidth_bytes_per_s = *v;
    }
  } else {
    error(loc(e->key), "fsdp.link needs bandwidth (bytes per second per rank, such as 450GB/s)");
  }
  if (auto it = f.find("latency"); it != f.end())
    if (auto v = duration(it->second, "fsdp.link.latency")) spec.latency_s = *v;
  if (auto it = f.find("model"); it != f.end())
    if (auto v = choice(it->second, "fsdp.link.model", {"ring", "alpha-beta"}))
      spec.collective_model = *v == "ring" ? CollectiveModel::kRing : CollectiveModel::kAlphaBeta;
}

void FsdpLoader::read_optimizer(const Entry& e, FsdpSpec& spec) {
  auto by_kind = [](const std::string& k) { return k == "adam" ? 8.0 : 0.0; };
  const std::vector<std::string> kinds = {"adam", "sgd", "none"};
  if (e.value.IsScalar()) {
    if (auto k = choice(e, "fsdp.optimizer", kinds)) spec.optimizer_state_bytes_per_param = by_kind(*k);
    return;
  }
  if (!e.value.IsMap()) {
    error(loc(e), fmt::format("fsdp.optimizer must be adam, sgd, none or a map of kind or state_bytes_per_param "
                              "and step, got {}",
                              describe(e.value)));
    return;
  }
  Fields f = fields(e.value, "fsdp.optimizer", kOptimizerKeys);
  auto kind = f.find("kind"), state = f.find("state_bytes_per_param");
  if (kind != f.end() && state != f.end())
    error(loc(state->second.key), "fsdp.optimizer takes kind or state_bytes_per_param, not both");
  else if (kind != f.end()) {
    if (auto k = choice(kind->second, "fsdp.optimizer.kind", kinds)) spec.optimizer_state_bytes_per_param = by_kind(*k);
  } else if (state != f.end()) {
    if (auto v = number(state->second, "fsdp.optimizer.state_bytes_per_param", 1024))
      spec.optimizer_state_bytes_per_param = *v;
  }
  if (auto it = f.find("step"); it != f.end())
    if (auto v = duration(it->second, "fsdp.optimizer.step")) spec.optimizer_step_s = *v;
}

void FsdpLoader::read_units(const Entry* e, FsdpSpec& spec) {
  if (!e) {
    error(spec.locs.fsdp, "fsdp needs units (the FSDP units in forward order)");
    return;
  }
  spec.locs.units = loc(e->key);
  if (!e->value.IsSequence() || e->value.size() == 0) {
    error(loc(*e), fmt::format("fsdp.units must be a non-empty list of units, got {}", describe(e->value)));
    return;
  }
  const size_t errors_before = static_cast<size_t>(errors_);
  std::unordered_map<std::string, SourceLoc> first_at;  // expanded name -> the entry that made it
  __int128 params_sum = 0, activation_sum = 0;
  int64_t total = 0;
  size_t i = 0;
  for (const YAML::Node& item : e->value) {
    const std::string key = fmt::format("fsdp.units[{}]", i++);
    if (!item.IsMap()) {
      error(loc(item), fmt::format("{} must be a map with name, params_bytes, forward and backward, got {}", key,
                                   describe(item)));
      continue;
    }
    Fields f = fields(item, key, kUnitKeys);
    FsdpUnit u;
    u.loc = loc(item);
    bool ok = true;
    if (auto it = f.find("name"); it != f.end()) {
      if (auto n = text(it->second, key + ".name"))
        u.name = *n;
      else
        ok = false;
    } else {
      error(u.loc, fmt::format("{} needs a name", key));
      ok = false;
    }
    const std::string ukey = u.name.empty() ? key : fmt::format("unit '{}'", printable(u.name));
    // How a key of this unit is named in messages: "unit 'layer' repeat", "fsdp.units[2].repeat".
    auto key_of = [&](const char* k) {
      return u.name.empty() ? fmt::format("{}.{}", key, k) : fmt::format("{} {}", ukey, k);
    };
    int64_t repeat = 0;  // 0: no repeat given
    if (auto it = f.find("repeat"); it != f.end()) {
      if (auto v = whole(it->second, key_of("repeat"), 1, kMaxFsdpRepeat)) repeat = *v;
      else ok = false;
    }
    auto pb = f.find("params_bytes"), pc = f.find("params");
    if (pb != f.end() && pc != f.end()) {
      error(loc(pc->second.key), fmt::format("{} takes params_bytes or params, not both", ukey));
      ok = false;
    } else if (pb != f.end()) {
      if (auto v = bytes(pb->second, key_of("params_bytes"))) u.params_bytes = *v;
      else ok = false;
    } else if (pc != f.end()) {
      if (auto v = count(pc->second, key_of("params"))) {
        if (*v > kMaxFsdpBytes / spec.param_dtype.bytes) {
          error(loc(pc->second), fmt::format("{} x {} bytes is more than 2^62 bytes", key_of("params"),
                                             spec.param_dtype.bytes));
          ok = false;
        } else {
          u.params_bytes = *v * spec.param_dtype.bytes;
        }
      } else {
        ok = false;
      }
    } else {
      error(u.loc, fmt::format("{} needs params_bytes (such as 436MiB) or params (a count such as 525M)", ukey));
      ok = false;
    }
    for (auto [k, out] : {std::pair<const char*, double*>{"forward", &u.forward_s}, {"backward", &u.backward_s}}) {
      if (auto it = f.find(k); it != f.end()) {
        if (auto v = duration(it->second, key_of(k))) *out = *v;
        else ok = false;
      } else {
        error(u.loc, fmt::format("{} needs {} (the {} time of one microbatch, such as 1.1ms)", ukey, k, k));
        ok = false;
      }
    }
    if (auto it = f.find("activation_bytes"); it != f.end()) {
      if (auto v = bytes(it->second, key_of("activation_bytes"))) u.activation_bytes = *v;
      else ok = false;
    }
    if (!ok || u.name.empty()) continue;
    const int64_t copies = repeat == 0 ? 1 : repeat;
    if (total + copies > kMaxFsdpUnits) {
      error(u.loc, fmt::format("the units expand to more than {} units", kMaxFsdpUnits));
      break;
    }
    total += copies;
    if (repeat > 0) repeated_.emplace(u.name, repeat);
    params_sum += static_cast<__int128>(u.params_bytes) * copies;
    activation_sum += static_cast<__int128>(u.activation_bytes) * copies;
    for (int64_t r = 0; r < copies; ++r) {
      FsdpUnit x = u;
      if (repeat > 0) x.name = fmt::format("{}.{}", u.name, r);
      auto [pos, inserted] = first_at.emplace(x.name, u.loc);
      if (!inserted) {
        error(u.loc, fmt::format("unit name '{}' is already taken by the unit at line {}{}", printable(x.name),
                                 pos->second.line,
                                 repeat > 0 ? fmt::format(" (unit '{}' with repeat {} makes {}.0 .. {}.{})",
                                                          printable(u.name), repeat, printable(u.name),
                                                          printable(u.name), repeat - 1)
                                            : ""));
        break;
      }
      spec.units.push_back(std::move(x));
    }
  }
  if (params_sum > kMaxFsdpBytes)
    error(spec.locs.units, "the units' params_bytes add up to more than 2^62 bytes");
  if (activation_sum > kMaxFsdpBytes)
    error(spec.locs.units, "the units' activation_bytes add up to more than 2^62 bytes");
  if (spec.ranks > 0 && int64_t{spec.ranks} * total > kMaxFsdpRankUnits)
    error(spec.locs.units, fmt::format("{} ranks x {} units is more than the {} rank-units schedcheck models",
                                       spec.ranks, total, kMaxFsdpRankUnits));
  for (size_t k = 0; k < spec.units.size(); ++k) {
    unit_names_.push_back(spec.units[k].name);
    unit_index_.emplace(spec.units[k].name, k);
  }
  units_ok_ = static_cast<size_t>(errors_) == errors_before;
}

std::map<std::string, std::vector<std::string>> FsdpLoader::read_prefetch_lists(const Entry& e,
                                                                                const std::string& key) {
  std::map<std::string, std::vector<std::string>> out;
  if (!e.value.IsMap()) {
    error(loc(e), fmt::format("{} must be a map from a unit to the units it prefetches (such as {{embed: "
                              "[layer.0]}}), got {}",
                              key, describe(e.value)));
    return out;
  }
  for (const auto& kv : e.value) {
    auto unit = unit_ref(kv.first, key);
    if (!unit) continue;
    Entry item{kv.first, kv.second};
    std::vector<std::string> list = unit_list(item, fmt::format("{}.{}", key, *unit));
    if (!out.emplace(*unit, std::move(list)).second)
      error(loc(kv.first), fmt::format("{} lists unit '{}' twice", key, printable(*unit)));
  }
  return out;
}

void FsdpLoader::read_options(const Entry& e, const std::string& impl, FsdpSpec& spec) {
  spec.locs.options = loc(e.key);
  if (!is_map(e, "fsdp.options", "the implementation's options")) return;
  Fields f = fields(e.value, "fsdp.options", option_keys());
  if (impl.empty()) return;  // the implementation was wrong: reported already
  for (const auto& [key, entry] : f) {
    const std::string& name = key;  // a plain reference: lambdas may not capture a structured binding in C++20
    const auto& owners = std::find_if(kOptionOwners.begin(), kOptionOwners.end(),
                                      [&](const auto& o) { return o.first == name; })->second;
    if (std::find(owners.begin(), owners.end(), impl) == owners.end())
      error(loc(entry.key), fmt::format("{} is {} {} option; this spec uses {}", name,
                                        owners.front() == "zero3" ? "a" : "an", fmt::join(owners, " and "), impl));
  }
  auto get = [&](const char* k) -> const Entry* {
    auto it = f.find(k);
    return it == f.end() ? nullptr : &it->second;
  };
  if (impl == "fsdp2") {
    if (const Entry* g = get("gradient_divide_factor")) {
      spec.locs.gradient_divide_factor = loc(*g);
      auto v = parsed(g->value, loc(*g), "fsdp.options.gradient_divide_factor", "a positive number such as 1024",
                      [](std::string_view s, std::string* why) -> std::optional<double> {
                        double d = 0;
                        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
                        if (ec != std::errc() || ptr != s.data() + s.size() || !(d > 0) || d > 1e9) {
                          if (why) *why = fmt::format("'{}' is not a positive number up to 1e9", s);
                          return std::nullopt;
                        }
                        return d;
                      });
      if (v) spec.gradient_divide_factor = *v;
    }
    if (const Entry* r = get("reshard_after_forward")) {
      const std::string s = r->value.IsScalar() ? r->value.Scalar() : std::string();
      if (s == "true" || s == "True" || s == "false" || s == "False") {
        spec.reshard_after_forward = s[0] == 't' || s[0] == 'T' ? -1 : 0;
      } else if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
        if (auto k = whole(*r, "fsdp.options.reshard_after_forward", 1, kMaxFsdpRanks)) {
          // FSDP2 (fully_shard): an int is the world size to reshard to after forward; it divides
          // the shard group size.
          if (spec.shard_size > 0 && spec.shard_size % *k != 0)
            error(loc(*r), fmt::format("fsdp.options.reshard_after_forward {} must divide shard_size {}", *k,
                                       spec.shard_size));
          else
            spec.reshard_after_forward = static_cast<int>(*k);
          if (*k > 1 && (spec.shard_size <= 0 || *k < spec.shard_size))
            diags_.note(loc(*r), fmt::format(
                "reshard_after_forward {0}: after each forward a unit keeps a 1/{0} slice of its parameters "
                "(the post-forward shard) and its backward all-gathers over {0} ranks on the spec's bandwidth; "
                "the process group FSDP2 creates per fully_shard call for it is not counted "
                "(docs/facts/fsdp-zero.md#integer-reshard-after-forward)",
                *k));
          else if (*k == 1)
            diags_.note(loc(*r), "reshard_after_forward 1: FSDP2 reshards to a group of one rank, which it treats as "
                                 "false (the parameters stay gathered from forward to backward)");
        }
      } else {
        error(loc(*r), fmt::format("fsdp.options.reshard_after_forward must be true, false or a whole number of "
                                   "ranks above 0, got {}",
                                   describe(r->value)));
      }
    }
    if (const Entry* d = get("forward_prefetch_depth"))
      if (auto v = whole(*d, "fsdp.options.forward_prefetch_depth", 0, kMaxFsdpUnits))
        spec.forward_prefetch_depth = static_cast<int>(*v);
    if (const Entry* d = get("backward_prefetch_depth"))
      if (auto v = whole(*d, "fsdp.options.backward_prefetch_depth", 0, kMaxFsdpUnits))
        spec.backward_prefetch_depth = static_cast<int>(*v);
    if (const Entry* p = get("forward_prefetch"))
      spec.forward_prefetch = read_prefetch_lists(*p, "fsdp.options.forward_prefetch");
    if (const Entry* p = get("backward_prefetch"))
      spec.backward_prefetch = read_prefetch_lists(*p, "fsdp.options.backward_prefetch");
  } else if (impl == "fsdp1") {
    if (const Entry* b = get("limit_all_gathers"))
      if (auto v = boolean(*b, "fsdp.options.limit_all_gathers")) spec.limit_all_gathers = *v;
    if (const Entry* b = get("forward_prefetch"))
      if (auto v = boolean(*b, "fsdp.options.forward_prefetch")) spec.forward_prefetch_fsdp1 = *v;
    if (const Entry* b = get("backward_prefetch"))
      if (auto v = choice(*b, "fsdp.options.backward_prefetch", {"pre", "post", "none"}))
        spec.backward_prefetch_fsdp1 = *v == "pre"    ? BackwardPrefetch::kPre
                                       : *v == "post" ? BackwardPrefetch::kPost
                                                      : BackwardPrefetch::kNone;
  } else {
    if (const Entry* c = get("prefetch_bucket_size"))
      if (auto v = count(*c, "fsdp.options.prefetch_bucket_size")) spec.prefetch_bucket_size = *v;
    if (const Entry* c = get("max_live_parameters"))
      if (auto v = count(*c, "fsdp.options.max_live_parameters")) spec.max_live_parameters = *v;
  }
}

std::optional<int> FsdpLoader::rank_key(const YAML::Node& k, const std::string& section, int ranks) {
  Entry e{k, k};
  auto r = whole(e, fmt::format("a rank in {}", section), 0, kMaxFsdpRanks - 1);
  if (!r) return std::nullopt;
  if (ranks > 0 && *r >= ranks) {
    error(loc(k), fmt::format("rank {} in {} is out of range: ranks is {} (ids 0 to {})", *r, section, ranks,
                              ranks - 1));
    return std::nullopt;
  }
  return static_cast<int>(*r);
}

void FsdpLoader::read_overrides(const Entry& e, FsdpSpec& spec) {
  if (!is_map(e, "fsdp.ranks_override", "rank numbers to overrides")) return;
  for (const auto& kv : e.value) {
    auto rank = rank_key(kv.first, "fsdp.ranks_override", spec.ranks);
    if (!rank) continue;
    const std::string key = fmt::format("fsdp.ranks_override.{}", *rank);
    Entry item{kv.first, kv.second};
    if (!is_map(item, key, "skip_units, repeat_units and microbatches")) continue;
    FsdpRankOverride o;
    o.loc = loc(kv.first);
    Fields f = fields(kv.second, key, kOverrideKeys);
    if (auto it = f.find("skip_units"); it != f.end()) o.skip_units = unit_list(it->second, key + ".skip_units");
    if (auto it = f.find("repeat_units"); it != f.end())
      o.repeat_units = unit_list(it->second, key + ".repeat_units");
    if (auto it = f.find("microbatches"); it != f.end())
      if (auto v = whole(it->second, key + ".microbatches", 1, kMaxFsdpMicrobatches))
        o.microbatches = static_cast<int>(*v);
    for (const std::string& u : o.skip_units)
      if (std::find(o.repeat_units.begin(), o.repeat_units.end(), u) != o.repeat_units.end())
        error(loc(f.find("repeat_units")->second.value),
              fmt::format("{}: unit '{}' is both skipped and repeated", key, u));
    if (auto [pos, inserted] = spec.overrides.emplace(*rank, o); !inserted)
      error(o.loc, fmt::format("rank {} is overridden twice (first at line {})", *rank, pos->second.loc.line));
  }
}

std::vector<FsdpProgramOp> FsdpLoader::read_program(const Entry& e, const std::string& key) {
  std::vector<FsdpProgramOp> ops;
  if (!e.value.IsSequence()) {
    error(loc(e), fmt::format("{} must be a list of ops such as {{op: all_gather, unit: embed}}, got {}", key,
                              describe(e.value)));
    return ops;
  }
  std::map<std::string, std::pair<size_t, SourceLoc>> ids;  // id -> (position, where)
  std::vector<std::vector<std::pair<std::string, YAML::Node>>> afters;
  size_t i = 0;
  for (const YAML::Node& item : e.value) {
    const std::string okey = fmt::format("{}[{}]", key, i);
    FsdpProgramOp op;
    op.loc = loc(item);
    afters.emplace_back();
    if (!item.IsMap()) {
      error(loc(item), fmt::format("{} must be a map with op and unit, got {}", okey, describe(item)));
      ++i;
      ops.push_back(std::move(op));
      continue;
    }
    Fields f = fields(item, okey, kOpKeys);
    if (auto it = f.find("op"); it != f.end()) {
      if (auto v = choice(it->second, okey + ".op", kOpKinds)) op.kind = *v;
    } else {
      error(op.loc, fmt::format("{} needs op ({})", okey, fmt::join(kOpKinds, ", ")));
    }
    if (auto it = f.find("unit"); it != f.end()) {
      if (op.kind == "optimizer")
        error(loc(it->second.key), fmt::format("{}: an optimizer op takes no unit", okey));
      else if (auto u = unit_ref(it->second.value, okey + ".unit"))
        op.unit = *u;
    } else if (!op.kind.empty() && op.kind != "optimizer") {
      error(op.loc, fmt::format("{}: a {} op needs unit", okey, op.kind));
    }
    if (auto it = f.find("stream"); it != f.end()) {
      if (auto v = choice(it->second, okey + ".stream", kStreams)) op.stream = *v;
    } else if (op.kind == "all_gather" || op.kind == "reduce_scatter" || op.kind == "all_reduce") {
      op.stream = op.kind;
    } else {
      op.stream = "compute";
    }
    if (auto it = f.find("id"); it != f.end()) {
      const YAML::Node& n = it->second.value;
      if (auto id = text(it->second, okey + ".id")) {
        if (auto [pos, inserted] = ids.emplace(*id, std::pair(i, loc(n))); !inserted)
          error(loc(n), fmt::format("id '{}' is used twice in {} (first at line {})", printable(*id), key,
                                    pos->second.second.line));
        else
          op.id = *id;
      }
    }
    if (auto it = f.find("after"); it != f.end()) {
      const YAML::Node& a = it->second.value;
      if (a.IsScalar()) {
        afters.back().emplace_back(a.Scalar(), a);
      } else if (a.IsSequence()) {
        for (const YAML::Node& x : a) {
          if (x.IsScalar() && !x.Scalar().empty())
            afters.back().emplace_back(x.Scalar(), x);
          else
            error(loc(x), fmt::format("{}.after must list ids of earlier ops, got {}", okey, describe(x)));
        }
      } else {
        error(loc(it->second), fmt::format("{}.after must be a list of ids of earlier ops, got {}", okey,
                                           describe(a)));
      }
    }
    ops.push_back(std::move(op));
    ++i;
  }
  std::vector<std::string> id_names;
  for (const auto& [id, where] : ids) id_names.push_back(id);
  for (size_t k = 0; k < afters.size(); ++k) {
    for (const auto& [id, node] : afters[k]) {
      auto it = ids.find(id);
      if (it == ids.end())
        error(loc(node), fmt::format("{}[{}].after names '{}', which is no id in {}{}", key, k, printable(id), key,
                                     did_you_mean(id, id_names)));
      else if (it->second.first >= k)
        error(loc(node), fmt::format("{}[{}].after names '{}', which is not an earlier op (it is at line {})", key, k,
                                     printable(id), it->second.second.line));
      else
        ops[k].after.push_back(id);
    }
  }
  return ops;
}

void FsdpLoader::read_programs(const Entry& e, FsdpSpec& spec) {
  spec.locs.programs = loc(e.key);
  if (!is_map(e, "fsdp.programs", "all or rank numbers to op lists")) return;
  for (const auto& kv : e.value) {
    std::optional<int> rank;
    if (kv.first.IsScalar() && kv.first.Scalar() == "all") rank = -1;
    else rank = rank_key(kv.first, "fsdp.programs", spec.ranks);
    if (!rank) continue;
    const std::string key = *rank < 0 ? std::string("fsdp.programs.all") : fmt::format("fsdp.programs.{}", *rank);
    std::vector<FsdpProgramOp> ops = read_program(Entry{kv.first, kv.second}, key);
    if (spec.programs.count(*rank))
      error(loc(kv.first), fmt::format("{} is given twice", key));
    else
      spec.programs.emplace(*rank, std::move(ops));
  }
}

std::optional<FsdpSpec> FsdpLoader::load(const YAML::Node& root, const std::string& stem) {
  const size_t errors_before = diags_.error_count();
  FsdpSpec spec;
  spec.name = stem;
  spec.locs.file = file_start();
  if (!root.IsDefined() || root.IsNull()) {
    error(file_start(), "the spec is empty; it needs at least schedcheck: 1, ranks and fsdp");
    return std::nullopt;
  }
  if (!root.IsMap()) {
    error(loc(root), fmt::format("an fsdp spec must be a map of keys (schedcheck, ranks, fsdp, ...), got {}",
                                 describe(root)));
    return std::nullopt;
  }
  Fields top = fields(root, "the top level", kTopKeys);
  auto field = [](const Fields& f, const char* key) -> const Entry* {
    auto it = f.find(key);
    return it == f.end() ? nullptr : &it->second;
  };
  check_version(field(top, "schedcheck"));
  if (const Entry* n = field(top, "name"))
    if (auto v = text(*n, "name")) spec.name = *v;
  if (const Entry* r = field(top, "ranks")) {
    if (auto n = whole(*r, "ranks", 1, kMaxFsdpRanks)) spec.ranks = static_cast<int>(*n);
  } else {
    error(file_start(), "missing required key 'ranks' (the number of ranks)");
  }
  if (const Entry* m = field(top, "memory")) {
    if (is_map(*m, "memory", "limit_bytes")) {
      Fields f = fields(m->value, "memory", kMemoryKeys);
      if (auto it = f.find("limit_bytes"); it != f.end()) {
        spec.locs.limit = loc(it->second);
        if (auto v = bytes(it->second, "memory.limit_bytes")) spec.limit_bytes = *v;
      }
    }
  }
  if (const Entry* n = field(top, "numerics")) numerics_tolerances(*n, spec.max_relative_error, spec.max_bias, spec.deterministic);
  const Entry* fe = field(top, "fsdp");
  if (!fe) {
    error(file_start(), "missing required key 'fsdp' (the FSDP units and their settings)");
    return std::nullopt;
  }
  spec.locs.fsdp = loc(fe->key);
  if (!is_map(*fe, "fsdp", "implementation, link, units and the other fsdp keys")) return std::nullopt;
  Fields f = fields(fe->value, "fsdp", kFsdpKeys);

  std::string impl = "fsdp2";
  if (const Entry* i = field(f, "implementation")) {
    auto v = choice(*i, "fsdp.implementation", kImplementations);
    impl = v.value_or("");
  }
  spec.implementation = impl == "fsdp1" ? FsdpImplementation::kFsdp1
                        : impl == "zero3" ? FsdpImplementation::kZero3
                                          : FsdpImplementation::kFsdp2;
  read_groups(f, spec);
  if (const Entry* d = field(f, "dtypes")) read_dtypes(*d, spec);
  read_link(field(f, "link"), spec);
  if (const Entry* m = field(f, "microbatches"))
    if (auto v = whole(*m, "fsdp.microbatches", 1, kMaxFsdpMicrobatches)) spec.microbatches = static_cast<int>(*v);
  if (const Entry* it = field(f, "iterations"))
    if (auto v = whole(*it, "fsdp.iterations", 1, kMaxFsdpIterations)) spec.iterations = static_cast<int>(*v);
  if (const Entry* o = field(f, "optimizer")) read_optimizer(*o, spec);
  read_units(field(f, "units"), spec);
  if (const Entry* o = field(f, "options")) read_options(*o, impl, spec);
  if (const Entry* o = field(f, "ranks_override")) read_overrides(*o, spec);
  if (const Entry* p = field(f, "programs")) {
    read_programs(*p, spec);
    // Explicit programs replace the generated sequences these keys describe.
    for (const char* k : {"ranks_override", "microbatches", "iterations"})
      if (const Entry* e = field(f, k))
        diags_.warning(loc(e->key), fmt::format("fsdp.{} has no effect with fsdp.programs (explicit programs "
                                                "replace the generated sequences)",
                                                k));
  }

  note_unshown();
  if (diags_.error_count() != errors_before) return std::nullopt;
  return spec;
}

std::optional<FsdpSpec> parse_registered(int32_t file, const std::string& name, const std::string& text,
                                         Diagnostics& diags) {
  FsdpLoader loader(file, diags);
  if (!loader.prescan(text)) return std::nullopt;
  std::optional<YAML::Node> root = loader.parse(text);
  if (!root) return std::nullopt;
  return loader.guard([&] { return loader.load(*root, yaml_util::default_name(name)); });
}

}  // namespace

bool is_fsdp_spec(const std::string& path) {
  std::string text, why;
  return yaml_util::has_yaml_extension(path) && read_input_file(path, &text, &why) &&
         yaml_util::declares_key(text, "fsdp") && !yaml_util::declares_key(text, "mesh");
}

std::optional<FsdpSpec> load_fsdp_spec(const std::string& path, Diagnostics& diags) {
  std::optional<yaml_util::SpecFile> f = yaml_util::read_spec_file(path, diags);
  if (!f) return std::nullopt;
  return parse_registered(f->file, path, f->text, diags);
}

std::optional<FsdpSpec> parse_fsdp_spec(const std::string& name, const std::string& text, Diagnostics& diags) {
  int32_t file = register_source(name, text);
  return parse_registered(file, name, text, diags);
}

}  // namespace sc
