// Spec v1 loader: YAML text to PipelineSpec, every error located and all of them collected.
#include "spec/yaml_spec.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "spec/yaml_util.h"

#include "spec/csv_schedule.h"
#include "support/units.h"

namespace sc {
namespace {

// Limits that keep a hostile or mistaken spec from exhausting memory or time. They are far
// above any real pipeline and documented in specs/README.md.
constexpr int64_t kMaxRanks = kMaxSpecRanks;
constexpr int64_t kMaxStages = kMaxSpecStages;
constexpr int64_t kMaxMicrobatches = kMaxSpecMicrobatches;

const std::vector<std::string> kTopKeys = {"schedcheck", "name",   "ranks", "stages",
                                           "placement",  "pipelines", "microbatches", "costs",
                                           "p2p",        "memory", "schedule", "forward_only",
                                           "mesh",       "fsdp",   "tied_embedding_bytes", "optimizer",
                                           "numerics",   "budget",  "moe",  "groups", "phases"};  // budget: read by spec/budget.cc
const std::vector<std::string> kCostKeys = {"F", "I", "W", "B", "R"};
const std::vector<std::string> kP2PKeys = {"latency", "bandwidth", "message_bytes", "semantics", "blocking",
                                           "comm_init"};
const std::vector<std::string> kMemoryKeys = {"limit_bytes", "params_bytes", "activation_bytes",
                                              "weight_grad_bytes", "recompute", "recompute_retained_bytes", "state_bytes"};
const std::vector<std::string> kMeshKeys = {"pp", "dp_replicate", "dp_shard", "ep", "link"};
const std::vector<std::string> kComposedFsdpKeys = {"implementation", "dtypes", "options"};
const std::vector<std::string> kDtypeKeys = {"param", "reduce"};
const std::vector<std::string> kLinkKeys = {"bandwidth", "latency"};
const std::vector<std::string> kComposedOptionKeys = {"max_active_stages", "unshard_async_op", "record_stream"};
const std::vector<std::string> kMoeKeys = {"layers", "dispatch_bytes", "combine_bytes", "router"};
const std::vector<std::string> kGroupKeys = {"ranks", "bytes"};
const std::vector<std::string> kPhaseKeys = {"name", "microbatches", "forward_only"};
const std::vector<std::string> kScheduleKeys = {"actions", "csv", "format", "name", "chunks",
                                                "megatron"};

// The sections with their keys, for "it belongs in p2p" hints.
const yaml_util::Sections kSections = {
    {"", &kTopKeys},       {"costs", &kCostKeys},   {"p2p", &kP2PKeys},
    {"memory", &kMemoryKeys}, {"schedule", &kScheduleKeys}, {"mesh", &kMeshKeys}, {"moe", &kMoeKeys}};

using yaml_util::Entry;
using yaml_util::Fields;
using yaml_util::describe;
using yaml_util::printable;

// Reader options of pipeline specs: keys are hinted to their section, duplicates named with it.
yaml_util::ReaderOptions loader_options() {
  yaml_util::ReaderOptions o;
  o.sections = &kSections;
  o.qualify_duplicates = true;
  return o;
}

class Loader : public yaml_util::Reader {
 public:
  Loader(int32_t file, const std::string& text, std::string dir, Diagnostics& diags)
      : Reader(file, diags, loader_options()), text_(text), dir_(std::move(dir)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text_.size(); ++i)
      if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::optional<PipelineSpec> load(const YAML::Node& root, const std::string& path,
                                   const std::string& default_name);

 private:
  SourceLoc loc_of_offset(size_t offset) const {
    size_t line = static_cast<size_t>(
        std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin() - 1);
    return at(static_cast<int64_t>(line), static_cast<int64_t>(offset - line_starts_[line]));
  }

  template <typename T, typename Parse>
  std::optional<std::vector<T>> per_stage(const Entry& e, const std::string& key,
                                          const char* what, Parse parse);

  // A declared placement: loop, v or a list with the rank of each stage (kNone when absent).
  struct Placement {
    enum Kind { kNone, kLoop, kV, kList } kind = kNone;
    std::vector<int32_t> listed;
    bool ok = true;  // false after an error: no stage-to-rank map is built
  };

  void read_schedule(const Entry* s, int32_t ranks, PipelineSpec& spec);
  Placement read_placement(const Entry* pe, int32_t ranks);
  void place_stages(const Entry* st, const Entry* pe, Placement& p, int32_t max_stage,
                    PipelineSpec& spec);
  void read_named(const Fields& sched, const Entry& name, PipelineSpec& spec);
  void read_pipelines(const Entry& e, PipelineSpec& spec);
  void read_actions(const Entry& e, int32_t ranks, PipelineSpec& spec);
  void read_action_text(const YAML::Node& n, int32_t rank, std::vector<Step>& out,
                        std::vector<SourceLoc>& seconds);
  void read_csv(const Fields& sched, const Entry& csv, int32_t ranks, PipelineSpec& spec);
  void check_actions(const PipelineSpec& spec, bool microbatches_given);
  void read_costs(const Entry& e, PipelineSpec& spec);
  void read_p2p(const Entry& e, PipelineSpec& spec);
  void read_memory(const Entry& e, PipelineSpec& spec);
  void read_mesh(const Entry& e, PipelineSpec& spec);
  void read_moe(const Entry& e, Composition& c);
  void read_composed_fsdp(const Entry& e, Composition& c);
  void read_groups(const Entry& e, PipelineSpec& spec);
  void read_phases(const Entry& e, PipelineSpec& spec, bool* microbatches_given);
  std::optional<std::vector<int32_t>> group_ranks(const Entry& e, const std::string& key, int32_t ranks);

  const std::string& text_;
  std::string dir_;
  std::vector<size_t> line_starts_;
  int32_t stages_ = 0;  // known stage count, 0 while unknown
  bool from_csv_ = false;      // the lists come from schedule.csv (whose reader warns about empty rows)
 public:
  bool schedule_optional = false;  // a model without a schedule: key is a spec (synthesis)
 private:
  bool no_schedule_ = false;       // schedule_optional and the key is absent
  bool check_lengths_ = true;  // false while a named schedule may still change the stage count
  std::vector<std::vector<SourceLoc>> seconds_;  // per rank, per step: second action's location
};

template <typename T, typename Parse>
std::optional<std::vector<T>> Loader::per_stage(const Entry& e, const std::string& key,
                                                const char* what, Parse parse) {
  if (e.value.IsScalar()) {
    auto v = parse(e.value, loc(e), key);
    if (!v) return std::nullopt;
    return std::vector<T>(static_cast<size_t>(stages_), *v);
  }
  if (!e.value.IsSequence()) {
    error(loc(e), fmt::format("{} must be a {} or a list with one per stage, got {}", key, what,
                              describe(e.value)));
    return std::nullopt;
  }
  bool ok = true;
  if (check_lengths_ && stages_ > 0 && e.value.size() != static_cast<size_t>(stages_)) {
    error(loc(e), fmt::format("{} lists {} value{} but stages is {}; give one per stage or a "
                              "single value for all",
                              key, e.value.size(), e.value.size() == 1 ? "" : "s", stages_));
    ok = false;
  }
  std::vector<T> out;
  size_t i = 0;
  for (const YAML::Node& item : e.value) {
    auto v = parse(item, loc(item), fmt::format("{}[{}]", key, i++));
    if (!v)
      ok = false;
    else
      out.push_back(*v);
  }
  if (!ok) return std::nullopt;
  return out;
}

void Loader::read_action_text(const YAML::Node& n, int32_t rank, std::vector<Step>& out,
                              std::vector<SourceLoc>& seconds) {
  const std::string& value = n.Scalar();
  SourceLoc node_loc = loc(n);
  // Tokens appear in the source in order, separated only by blanks, commas and line breaks
  // (outside a tensor list's brackets),
  // whatever the scalar's style; follow them there to give each one its own column. When a
  // token is not found verbatim (escapes), every later token points at the scalar itself.
  YAML::Mark m = n.Mark();
  bool exact = !m.is_null() && static_cast<size_t>(m.line) < line_starts_.size();
  size_t src = exact ? line_starts_[m.line] + static_cast<size_t>(m.column) : 0;
  if (exact && src < text_.size()) {
    char c = text_[src];
    if (c == '"' || c == '\'') {
      ++src;
    } else if (c == '|' || c == '>') {
      size_t nl = text_.find('\n', src);
      src = nl == std::string::npos ? text_.size() : nl + 1;
    }
  }
  auto is_sep = [](char c) { return c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r'; };
  size_t i = 0;
  while (i < value.size()) {
    if (is_sep(value[i])) {
      ++i;
      continue;
    }
    // A tensor list (`0SEND_F1[act, mask]`) is part of its token, separators and all.
    size_t j = i;
    int depth = 0;
    while (j < value.size() && (depth > 0 || !is_sep(value[j]))) {
      if (value[j] == '[') ++depth;
      else if (value[j] == ']' && depth > 0) --depth;
      else if (value[j] == ')') depth = 0;  // no name holds ')': an unclosed list inside a BATCH group ends there
      else if (value[j] == '\n' || value[j] == '\r') break;
      ++j;
    }
    std::string_view token(value.data() + i, j - i);
    SourceLoc tok_loc = node_loc;
    if (exact) {
      while (src < text_.size() && (is_sep(text_[src]) || text_[src] == '\\')) ++src;
      if (text_.compare(src, token.size(), token) == 0) {
        tok_loc = loc_of_offset(src);
        src += token.size();
      } else {
        exact = false;
      }
    }
    ParsedStep p = parse_step(token, tok_loc);
    if (!p.step) {
      SourceLoc err = tok_loc;
      if (exact) err.col += p.error_offset;
      error(err, fmt::format("rank {}: {}", rank, p.error));
    } else {
      SourceLoc second = tok_loc;
      if (exact && p.step->second) second.col += static_cast<int32_t>(token.find(';') + 1);
      if (p.batch.empty()) {
        out.push_back(*p.step);
        seconds.push_back(second);
      }
      for (const Step& member : p.batch) {  // a BATCH group: one step per member
        out.push_back(member);
        seconds.push_back(exact ? member.loc : tok_loc);
      }
    }
    i = j;
  }
}

// groups: {name: [ranks...]} or {name: {ranks: [...], bytes: N}}: the groups collective actions
// (ALL_REDUCE@name) run over. Names as the action notation takes them; `world` is every rank
// and cannot be declared.
void Loader::read_groups(const Entry& e, PipelineSpec& spec) {
  if (!is_map(e, "groups", "a map from a group name to its ranks, as in groups: {eval: [0, 3]}")) return;
  std::map<std::string, SourceLoc> seen;
  for (const auto& kv : e.value) {
    Entry g{kv.first, kv.second};
    const SourceLoc kl = loc(g.key);
    if (!g.key.IsScalar()) {
      error(kl, fmt::format("a group name must be a name, got {}", describe(g.key)));
      continue;
    }
    const std::string name = g.key.Scalar();
    const bool valid = !name.empty() && name.size() <= 64 && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                       });
    if (!valid) {
      error(kl, fmt::format("group name '{}' must start with a letter or '_' and hold letters, digits, '_' and '-' "
                            "(at most 64)",
                            printable(name)));
      continue;
    }
    if (name == kWorldGroup) {
      error(kl, "'world' is every rank and is not declared; name a group of your own for other ranks or bytes");
      continue;
    }
    if (auto [pos, inserted] = seen.emplace(name, kl); !inserted) {
      error(kl, fmt::format("duplicate group '{}' (first given at line {})", name, pos->second.line));
      continue;
    }
    CollectiveGroup out;
    out.loc = kl;
    const std::string key = "groups." + name;
    std::optional<std::vector<int32_t>> ranks;
    if (g.value.IsMap()) {
      Fields f = fields(g.value, key, kGroupKeys);
      auto r = f.find("ranks");
      if (r == f.end()) {
        error(kl, fmt::format("{} needs ranks, as in {{ranks: [0, 3], bytes: 4}}", key));
        continue;
      }
      ranks = group_ranks(r->second, key + ".ranks", spec.ranks);
      if (auto b = f.find("bytes"); b != f.end())
        if (auto v = bytes(b->second.value, loc(b->second), key + ".bytes")) out.bytes = *v;
    } else {
      ranks = group_ranks(g, key, spec.ranks);
    }
    if (!ranks) continue;
    out.ranks = std::move(*ranks);
    const int32_t index = intern_group_name(name);
    if (index < 0) {
      error(kl, fmt::format("more than {} distinct group names", kMaxGroupNames));
      continue;
    }
    out.name = index;
    spec.groups.push_back(std::move(out));
  }
}

// A group's ranks: a list of distinct pipeline ranks, sorted here.
std::optional<std::vector<int32_t>> Loader::group_ranks(const Entry& e, const std::string& key, int32_t ranks) {
  if (!e.value.IsSequence()) {
    error(loc(e), fmt::format("{} must be a list of ranks, as in [0, 3], got {}", key, describe(e.value)));
    return std::nullopt;
  }
  if (e.value.size() == 0) {
    error(loc(e), fmt::format("{} lists no ranks; give at least one, as in [0, 3]", key));
    return std::nullopt;
  }
  std::vector<int32_t> out;
  std::map<int64_t, SourceLoc> seen;
  bool ok = true;
  for (const auto& item : e.value) {
    Entry one{item, item};
    auto r = whole(one, "a rank in " + key, 0, kMaxRanks);
    if (!r) {
      ok = false;
      continue;
    }
    if (ranks > 0 && *r >= ranks) {
      error(loc(item), fmt::format("rank {} of {} is out of range: ranks is {} (ids 0 to {})", *r, key, ranks, ranks - 1));
      ok = false;
      continue;
    }
    if (auto [pos, inserted] = seen.emplace(*r, loc(item)); !inserted) {
      error(loc(item), fmt::format("rank {} is listed twice in {}", *r, key));
      ok = false;
      continue;
    }
    out.push_back(static_cast<int32_t>(*r));
  }
  if (!ok) return std::nullopt;
  std::sort(out.begin(), out.end());
  return out;
}

void Loader::read_actions(const Entry& e, int32_t ranks, PipelineSpec& spec) {
  if (!e.value.IsMap()) {
    if (!e.value.IsNull())
      error(loc(e), fmt::format("schedule.actions must be a map from rank to its actions, got {}",
                                describe(e.value)));
    else
      error(loc(e), "schedule.actions is empty; give each rank's actions, as in 0: \"0F0 0B0\"");
    return;
  }
  std::map<int64_t, SourceLoc> seen;
  for (const auto& kv : e.value) {
    Entry r{kv.first, kv.second};
    SourceLoc kl = loc(r.key);
    if (!r.key.IsScalar()) {
      error(kl, fmt::format("a key of schedule.actions must be a rank number, got {}",
                            describe(r.key)));
      continue;
    }
    Entry as_number{r.key, r.key};
    auto rank = whole(as_number, "a rank in schedule.actions", 0, kMaxRanks);
    if (!rank) continue;
    if (ranks > 0 && *rank >= ranks) {
      error(kl, fmt::format("rank {} is out of range: ranks is {} (ids 0 to {})", *rank, ranks,
                            ranks - 1));
      continue;
    }
    if (auto [pos, inserted] = seen.emplace(*rank, kl); !inserted) {
      error(kl, fmt::format("duplicate rank {} in schedule.actions (first given at line {})", *rank,
                            pos->second.line));
      continue;
    }
    // Where the rank's list is written (its key), for findings about the rank as a whole.
    if (ranks > 0) {
      if (spec.locs.rank_lists.size() < static_cast<size_t>(ranks)) spec.locs.rank_lists.resize(ranks);
      spec.locs.rank_lists[*rank] = kl;
    }
    // Without a valid rank count, parse into a scratch list so syntax errors still show.
    std::vector<Step> scratch;
    std::vector<SourceLoc> scratch_seconds;
    bool keep = ranks > 0;
    std::vector<Step>& out = keep ? spec.actions[*rank] : scratch;
    std::vector<SourceLoc>& seconds = keep ? seconds_[*rank] : scratch_seconds;
    int32_t rank32 = static_cast<int32_t>(*rank);
    if (r.value.IsNull()) continue;
    if (r.value.IsScalar()) {
      read_action_text(r.value, rank32, out, seconds);
    } else if (r.value.IsSequence()) {
      for (const YAML::Node& item : r.value) {
        if (!item.IsScalar()) {
          error(loc(item), fmt::format("rank {}: an action must be a string such as 0F3, got {}",
                                              rank32, describe(item)));
          continue;
        }
        read_action_text(item, rank32, out, seconds);
      }
    } else {
      error(loc(r.value), fmt::format("rank {}: actions must be a string or a list of strings, got {}",
                                      rank32, describe(r.value)));
    }
  }
}

void Loader::read_csv(const Fields& sched, const Entry& csv, int32_t ranks, PipelineSpec& spec) {
  if (!csv.value.IsScalar()) {
    error(loc(csv), fmt::format("schedule.csv must be a file name, got {}", describe(csv.value)));
    return;
  }
  std::optional<CsvFormat> format;
  if (auto f = sched.find("format"); f != sched.end()) {
    const Entry& fe = f->second;
    std::string v = fe.value.IsScalar() ? fe.value.Scalar() : std::string();
    if (v == "compute_only") {
      format = CsvFormat::kComputeOnly;
    } else if (v == "compute_comms") {
      format = CsvFormat::kComputeComms;
    } else {
      std::string near = closest_match(v, {"compute_only", "compute_comms"});
      error(loc(fe), fmt::format("schedule.format must be compute_only or compute_comms, got {}{}",
                                 describe(fe.value),
                                 near.empty() ? "" : fmt::format("; did you mean '{}'?", near)));
      return;
    }
  }
  std::filesystem::path p(csv.value.Scalar());
  if (p.is_relative() && !dir_.empty()) p = std::filesystem::path(dir_) / p;
  auto table = read_csv_schedule(p.string(), diags_, format, loc(csv));
  from_csv_ = true;
  if (!table) return;
  if (ranks > 0 && table->actions.size() != static_cast<size_t>(ranks)) {
    error(loc(csv), fmt::format("{} has {} rows but ranks is {}; a CSV holds one row per rank",
                                csv.value.Scalar(), table->actions.size(), ranks));
    return;
  }
  if (ranks <= 0) return;
  spec.actions = std::move(table->actions);
  for (size_t r = 0; r < spec.actions.size(); ++r) {
    seconds_[r].clear();
    for (const Step& s : spec.actions[r]) seconds_[r].push_back(s.loc);
  }
}

void Loader::read_phases(const Entry& e, PipelineSpec& spec, bool* microbatches_given) {
  if (!e.value.IsSequence() || e.value.size() == 0) {
    error(loc(e), fmt::format("phases must be a list such as [{{name: train, microbatches: 8}}, {{name: eval, "
                              "microbatches: 2, forward_only: true}}], got {}",
                              e.value.IsSequence() ? std::string("an empty list") : describe(e.value)));
    return;
  }
  if (spec.named) {
    error(loc(e), "phases need the action lists written out: a named schedule generates one training phase");
    return;
  }
  std::vector<Phase> out;
  int64_t first = 0;
  bool ok = true;
  size_t i = 0;
  for (const YAML::Node& item : e.value) {
    const std::string key = fmt::format("phases[{}]", i++);
    const Entry pe{item, item};
    if (!item.IsMap()) {
      error(loc(pe), fmt::format("{} must be a map such as {{name: eval, microbatches: 2, forward_only: true}}, "
                                 "got {}", key, describe(item)));
      ok = false;
      continue;
    }
    Fields f = fields(item, key, kPhaseKeys);
    Phase ph;
    ph.loc = loc(pe);
    ph.first = static_cast<int32_t>(first);
    auto m = f.find("microbatches");
    if (m == f.end()) {
      error(ph.loc, fmt::format("{} needs microbatches (how many ids the phase takes)", key));
      ok = false;
      continue;
    }
    auto n = whole(m->second, key + ".microbatches", 1, kMaxMicrobatches);
    if (!n) {
      ok = false;
      continue;
    }
    ph.microbatches = static_cast<int32_t>(*n);
    if (auto nm = f.find("name"); nm != f.end())
      if (auto t = text(nm->second, key + ".name")) ph.name = *t;
    if (auto fo = f.find("forward_only"); fo != f.end())
      if (auto b = boolean(fo->second, key + ".forward_only")) ph.forward_only = *b;
    first += ph.microbatches;
    if (first > kMaxMicrobatches) {
      error(ph.loc, fmt::format("the phases hold more than {} microbatches", kMaxMicrobatches));
      return;
    }
    out.push_back(std::move(ph));
  }
  if (!ok) return;
  if (*microbatches_given && first != spec.microbatches) {
    error(loc(e), fmt::format("the phases add up to {} microbatches but microbatches is {}", first, spec.microbatches));
    return;
  }
  if (!*microbatches_given && spec.microbatches > first) {
    error(loc(e), fmt::format("the schedule names microbatch {} but the phases add up to {} (ids 0 to {})",
                              spec.microbatches - 1, first, first - 1));
    return;
  }
  spec.microbatches = static_cast<int32_t>(first);
  *microbatches_given = true;
  spec.forward_only = std::all_of(out.begin(), out.end(), [](const Phase& p) { return p.forward_only; });
  spec.phases = std::move(out);
}

void Loader::read_pipelines(const Entry& e, PipelineSpec& spec) {
  if (!e.value.IsSequence() || e.value.size() == 0) {
    error(loc(e), fmt::format("pipelines must be a list of the first stage of each pipeline, such "
                              "as [0, 4], got {}",
                              describe(e.value)));
    return;
  }
  std::vector<int32_t> starts;
  bool ok = true;
  for (const YAML::Node& item : e.value) {
    std::string key = fmt::format("pipelines[{}]", starts.size());
    auto s = whole(Entry{item, item}, key, 0, kMaxStages);
    if (!s) {
      ok = false;
      starts.push_back(-1);
      continue;
    }
    if (starts.empty() && *s != 0) {
      error(loc(item), fmt::format("pipelines must start with stage 0, got {}", *s));
      ok = false;
    } else if (!starts.empty() && *s <= starts.back()) {
      error(loc(item), fmt::format("{} is stage {}, not after stage {}: list the first stages in "
                                   "increasing order",
                                   key, *s, starts.back()));
      ok = false;
    } else if (check_lengths_ && spec.stages > 0 && *s >= spec.stages) {
      error(loc(item), fmt::format("{} is stage {}, out of range: stages is {} (ids 0 to {})", key,
                                   *s, spec.stages, spec.stages - 1));
      ok = false;
    }
    starts.push_back(static_cast<int32_t>(*s));
  }
  if (ok) spec.pipeline_starts = std::move(starts);
}

void Loader::check_actions(const PipelineSpec& spec, bool microbatches_given) {
  for (size_t r = 0; r < spec.actions.size(); ++r) {
    for (size_t k = 0; k < spec.actions[r].size(); ++k) {
      const Step& st = spec.actions[r][k];
      auto check = [&](const Action& a, const SourceLoc& l) {
        if (a.stage >= spec.stages)
          error(l, fmt::format("stage {} of '{}' is out of range: stages is {} (ids 0 to {})",
                                      a.stage, format_action(a), spec.stages, spec.stages - 1));
        if (microbatches_given && takes_microbatch(a.kind) && a.microbatch >= spec.microbatches)
          error(l, fmt::format("microbatch {} of '{}' is out of range: microbatches is {} "
                                      "(ids 0 to {})",
                                      a.microbatch, format_action(a), spec.microbatches,
                                      spec.microbatches - 1));
      };
      check(st.first, st.loc);
      if (st.second) check(*st.second, k < seconds_[r].size() ? seconds_[r][k] : st.loc);
    }
  }
}

void Loader::read_costs(const Entry& e, PipelineSpec& spec) {
  if (!is_map(e, "costs", "F, I, W and B")) return;
  Fields f = fields(e.value, "costs", kCostKeys);
  auto dur = [this](const YAML::Node& n, const SourceLoc& l, const std::string& key) {
    return duration(n, l, key);
  };
  auto get = [&](const char* key) -> std::optional<std::vector<double>> {
    auto it = f.find(key);
    if (it == f.end()) return std::nullopt;
    return per_stage<double>(it->second, fmt::format("costs.{}", key), "duration", dur);
  };
  bool has_b = f.count("B") > 0;
  if (!f.count("F")) error(loc(e.key), "costs needs F (the forward time per stage per microbatch)");
  if (!has_b && spec.trains())  // a forward-only schedule runs no backward
    for (const char* k : {"I", "W"})
      if (!f.count(k))
        error(loc(e.key), fmt::format("costs needs {} when B is not given (B defaults to I + W)", k));
  auto fv = get("F"), iv = get("I"), wv = get("W"), bv = get("B");
  if (auto rv = get("R")) spec.costs.r_s = *rv;
  if (!bv && iv && wv && iv->size() != wv->size()) {
    // Lengths differ only for a named schedule whose stage count is still open; a value given
    // once then follows the list.
    auto uniform = [](const std::vector<double>& v) {
      return !v.empty() && std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
    };
    if (uniform(*wv))
      wv->assign(iv->size(), wv->front());
    else if (uniform(*iv))
      iv->assign(wv->size(), iv->front());
    else
      error(loc(e.key), fmt::format("costs.I lists {} stages but costs.W lists {}", iv->size(),
                                    wv->size()));
  }
  size_t n = static_cast<size_t>(spec.stages);
  if (fv) spec.costs.f_s = *fv;
  spec.costs.i_s = iv ? *iv : std::vector<double>(n, 0.0);
  spec.costs.w_s = wv ? *wv : std::vector<double>(n, 0.0);
  if (bv) {
    spec.costs.b_s = *bv;
  } else if (iv && wv && iv->size() == wv->size()) {
    spec.costs.b_s.resize(iv->size());
    for (size_t s = 0; s < iv->size(); ++s) spec.costs.b_s[s] = (*iv)[s] + (*wv)[s];
  }
}

void Loader::read_p2p(const Entry& e, PipelineSpec& spec) {
  if (!is_map(e, "p2p", "latency, bandwidth, message_bytes and semantics")) return;
  Fields f = fields(e.value, "p2p", kP2PKeys);
  if (auto it = f.find("latency"); it != f.end())
    if (auto v = duration(it->second.value, loc(it->second), "p2p.latency")) spec.p2p.latency_s = *v;
  if (auto it = f.find("bandwidth"); it != f.end()) {
    if (auto v = parsed(it->second.value, loc(it->second), "p2p.bandwidth", "bytes per second such as 50GB/s",
                        parse_bandwidth_bytes_per_s))
      spec.p2p.bandwidth_bytes_per_s = *v;
  }
  if (auto it = f.find("message_bytes"); it != f.end())
    if (auto v = bytes(it->second.value, loc(it->second), "p2p.message_bytes"))
      spec.p2p.message_bytes = *v;
  if (auto it = f.find("semantics"); it != f.end()) {
    if (auto sem = parsed(it->second.value, loc(it->second), "p2p.semantics", "eager, rendezvous or buffered:N",
                          parse_semantics))
      spec.p2p.semantics = *sem;
  }
  if (auto it = f.find("blocking"); it != f.end())
    if (auto b = choice(it->second, "p2p.blocking", {"comm-stream", "whole-rank"}))
      spec.p2p.blocking = *b == "whole-rank" ? BlockingModel::kWholeRank : BlockingModel::kCommStream;
  if (auto it = f.find("comm_init"); it != f.end())
    if (auto b = choice(it->second, "p2p.comm_init", {"eager", "lazy"})) spec.p2p.lazy_comm_init = *b == "lazy";
}

void Loader::read_mesh(const Entry& e, PipelineSpec& spec) {
  if (!is_map(e, "mesh", "pp, dp_replicate, dp_shard and link")) return;
  Fields f = fields(e.value, "mesh", kMeshKeys);
  Composition c;
  c.loc = loc(e);
  spec.locs.ranks = loc(e);
  auto get = [&](const char* key, int32_t& out) {
    if (auto it = f.find(key); it != f.end())
      if (auto n = whole(it->second, fmt::format("mesh.{}", key), 1, kMaxRanks)) out = static_cast<int32_t>(*n);
  };
  int32_t pp = 0;
  if (f.count("pp")) get("pp", pp);
  else error(loc(e), "mesh needs pp (the number of pipeline ranks)");
  get("dp_replicate", c.dp_replicate);
  get("dp_shard", c.dp_shard);
  get("ep", c.ep);
  if (auto it = f.find("ep"); it != f.end() && c.ep > 1 && c.dp_shard % c.ep != 0)
    error(loc(it->second), fmt::format("mesh.ep ({}) must divide mesh.dp_shard ({}): expert-parallel groups are "
                                       "formed from the shard ranks of one pipeline rank, as torchtitan borrows them",
                                       c.ep, c.dp_shard));
  if (auto it = f.find("link"); it != f.end() && is_map(it->second, "mesh.link", "bandwidth and latency")) {
    Fields l = fields(it->second.value, "mesh.link", kLinkKeys);
    if (auto b = l.find("bandwidth"); b != l.end())
      if (auto v = parsed(b->second.value, loc(b->second), "mesh.link.bandwidth", "bytes per second such as 450GB/s",
                          parse_bandwidth_bytes_per_s))
        c.bandwidth_bytes_per_s = *v;
    if (auto t = l.find("latency"); t != l.end())
      if (auto v = duration(t->second.value, loc(t->second), "mesh.link.latency")) c.latency_s = *v;
  }

  if (pp > 0 && static_cast<int64_t>(pp) * c.dp_replicate * c.dp_shard > kMaxRanks) {
    error(loc(e), fmt::format("the mesh has {} ranks, more than the {} schedcheck checks at once",
                              static_cast<int64_t>(pp) * c.dp_replicate * c.dp_shard, kMaxRanks));
    return;
  }
  spec.ranks = pp;
  spec.composition = c;
}

void Loader::read_composed_fsdp(const Entry& e, Composition& c) {
  if (!is_map(e, "fsdp", "implementation, dtypes and options")) return;
  Fields f = fields(e.value, "fsdp", kComposedFsdpKeys);
  c.fsdp = true;
  c.reduce_loc = loc(e);
  if (auto it = f.find("implementation"); it != f.end())
    if (auto v = choice(it->second, "fsdp.implementation", {"fsdp2", "fsdp1"})) c.fsdp2 = *v == "fsdp2";
  const std::vector<std::string> dtypes = {"fp32", "bf16", "fp16", "fp8"};
  auto dtype_bytes = [](const std::string& d) { return d == "fp32" ? 4.0 : d == "fp8" ? 1.0 : 2.0; };
  if (auto it = f.find("dtypes"); it != f.end() && is_map(it->second, "fsdp.dtypes", "param and reduce")) {
    Fields d = fields(it->second.value, "fsdp.dtypes", kDtypeKeys);
    if (auto p = d.find("param"); p != d.end())
      if (auto v = choice(p->second, "fsdp.dtypes.param", dtypes)) c.param_dtype = *v, c.param_dtype_bytes = dtype_bytes(*v);
    if (auto r = d.find("reduce"); r != d.end() && (c.reduce_loc = loc(r->second), true))
      if (auto v = choice(r->second, "fsdp.dtypes.reduce", dtypes)) c.reduce_dtype = *v, c.reduce_dtype_bytes = dtype_bytes(*v);
  }
  if (auto it = f.find("options");
      it != f.end() && is_map(it->second, "fsdp.options", "max_active_stages, unshard_async_op and record_stream")) {
    Fields o = fields(it->second.value, "fsdp.options", kComposedOptionKeys);
    if (auto m = o.find("max_active_stages"); m != o.end())
      if (auto n = whole(m->second, "fsdp.options.max_active_stages", 1, 1 << 20)) c.max_active_stages = static_cast<int32_t>(*n);
    if (auto a = o.find("unshard_async_op"); a != o.end())
      if (auto v = boolean(a->second, "fsdp.options.unshard_async_op")) {
        c.unshard_async_op = *v;
        if (*v && !c.fsdp2)
          error(loc(a->second), "fsdp.options.unshard_async_op is an FSDP2 option (_set_unshard_async_op); "
                                "fsdp.implementation is fsdp1");
      }
    c.record_stream = c.unshard_async_op;
    if (auto r = o.find("record_stream"); r != o.end())
      if (auto v = boolean(r->second, "fsdp.options.record_stream")) c.record_stream = *v;
  }
}

void Loader::read_moe(const Entry& e, Composition& c) {
  if (!is_map(e, "moe", "layers, dispatch_bytes, combine_bytes and router")) return;
  Fields f = fields(e.value, "moe", kMoeKeys);
  MoeSpec m;
  m.loc = loc(e);
  if (c.ep < 2)
    error(loc(e), "moe needs mesh.ep of 2 or more: with one expert-parallel rank every expert is local and no "
                  "all-to-all runs");
  if (auto it = f.find("layers"); it == f.end()) {
    error(loc(e), "moe needs layers (the MoE layers of each stage: one number for every stage, or a list)");
  } else if (it->second.value.IsSequence()) {
    size_t i = 0;
    for (const YAML::Node& item : it->second.value)
      if (auto n = whole(Entry{item, item}, fmt::format("moe.layers[{}]", i++), 0, 1 << 16))
        m.layers_per_stage.push_back(static_cast<int32_t>(*n));
  } else if (auto n = whole(it->second, "moe.layers", 0, 1 << 16)) {
    m.layers = static_cast<int32_t>(*n);
  }
  const bool router = f.count("router") > 0;
  if (auto it = f.find("router"); it != f.end()) {
    m.router_loc = loc(it->second);
    if (!it->second.value.IsScalar() || it->second.value.Scalar().empty())
      error(loc(it->second), fmt::format("moe.router must be the path of a router spec, got {}", describe(it->second.value)));
    else
      m.router = (dir_.empty() || it->second.value.Scalar().front() == '/' ? "" : dir_ + "/") + it->second.value.Scalar();
  }
  if (auto it = f.find("dispatch_bytes"); it != f.end()) {
    if (router)
      error(loc(it->second), "moe has both dispatch_bytes and router; give one (the router spec's dispatch worst "
                             "case sets dispatch_bytes)");
    else if (auto v = bytes(it->second.value, loc(it->second), "moe.dispatch_bytes"))
      m.dispatch_bytes = *v;
  } else if (!router) {
    error(loc(e), "moe needs dispatch_bytes (what one rank receives per layer and microbatch) or router (a router "
                  "spec whose dispatch worst case gives it)");
  }
  if (auto it = f.find("combine_bytes"); it != f.end())
    if (auto v = bytes(it->second.value, loc(it->second), "moe.combine_bytes")) m.combine_bytes = *v;
  c.moe = std::move(m);
}

void Loader::read_memory(const Entry& e, PipelineSpec& spec) {
  if (!is_map(e, "memory", "limit_bytes, params_bytes, activation_bytes and weight_grad_bytes")) return;
  Fields f = fields(e.value, "memory", kMemoryKeys);
  if (auto it = f.find("limit_bytes"); it != f.end()) {
    spec.locs.memory_limit = loc(it->second);
    if (auto v = bytes(it->second.value, loc(it->second), "memory.limit_bytes"))
      spec.memory.limit_bytes = *v;
  }
  auto b = [this](const YAML::Node& n, const SourceLoc& l, const std::string& key) {
    return bytes(n, l, key);
  };
  struct Field {
    const char* key;
    std::vector<int64_t>* out;
  };
  for (Field fd : {Field{"params_bytes", &spec.memory.params_bytes},
                   Field{"activation_bytes", &spec.memory.activation_bytes},
                   Field{"weight_grad_bytes", &spec.memory.weight_grad_bytes},
                   Field{"state_bytes", &spec.memory.state_bytes}}) {
    auto it = f.find(fd.key);
    if (it == f.end()) continue;
    if (auto v = per_stage<int64_t>(it->second, fmt::format("memory.{}", fd.key), "byte count", b))
      *fd.out = *v;
  }
  if (auto it = f.find("recompute"); it != f.end()) {
    auto mode = [this](const YAML::Node& n, const SourceLoc& l, const std::string& key) -> std::optional<Recompute> {
      (void)l;  // choice() reports at the value's own mark
      auto v = choice(Entry{n, n}, key, {"none", "selective", "full"});
      if (!v) return std::nullopt;
      return *v == "full" ? Recompute::kFull : *v == "selective" ? Recompute::kSelective : Recompute::kNone;
    };
    if (auto v = per_stage<Recompute>(it->second, "memory.recompute", "none, selective or full", mode))
      spec.memory.recompute = *v;
  }
  if (auto it = f.find("recompute_retained_bytes"); it != f.end())
    if (auto v = per_stage<int64_t>(it->second, "memory.recompute_retained_bytes", "byte count", b))
      spec.memory.retained_bytes = *v;
  if (auto it = f.find("recompute_retained_bytes"); it != f.end())
    for (size_t s = 0; s < spec.memory.retained_bytes.size() && s < spec.memory.activation_bytes.size(); ++s)
      if (spec.memory.retained_bytes[s] > spec.memory.activation_bytes[s]) {
        error(loc(it->second), fmt::format("stage {} retains {} bytes after its forward but holds only {} "
                                           "(memory.activation_bytes): recompute_retained_bytes is part of the "
                                           "activations",
                                           s, spec.memory.retained_bytes[s], spec.memory.activation_bytes[s]));
        break;
      }
  for (size_t s = 0; s < spec.memory.recompute.size(); ++s)
    if (spec.memory.recompute[s] == Recompute::kSelective &&
        (spec.memory.retained_bytes.size() <= s || spec.costs.r_s.size() <= s)) {
      error(loc(f.find("recompute")->second),
            fmt::format("stage {} recomputes selectively: give memory.recompute_retained_bytes (the activations "
                        "it keeps) and costs.R (the recompute time)",
                        s));
      break;
    }
}

void Loader::read_schedule(const Entry* s, int32_t ranks, PipelineSpec& spec) {
  spec.actions.assign(static_cast<size_t>(ranks), {});
  seconds_.assign(static_cast<size_t>(ranks), {});
  if (!s) {
    if (schedule_optional) no_schedule_ = true;
    else error(file_start(), "missing required key 'schedule' (the per-rank action lists; `schedcheck synth` searches for one, `schedcheck compare` tries the named ones)");
    return;
  }
  spec.locs.schedule = loc(s->key);
  if (!s->value.IsMap()) {
    error(loc(*s), fmt::format("schedule must be a map with actions or csv, got {}",
                               describe(s->value)));
    return;
  }
  Fields sched = fields(s->value, "schedule", kScheduleKeys);
  // Exactly one source; the other keys only go with theirs.
  std::vector<const Entry*> sources;
  for (const char* k : {"actions", "csv", "name"})
    if (auto it = sched.find(k); it != sched.end()) sources.push_back(&it->second);
  std::sort(sources.begin(), sources.end(), [&](const Entry* x, const Entry* y) {
    SourceLoc a = loc(x->key), b = loc(y->key);
    return std::pair(a.line, a.col) < std::pair(b.line, b.col);
  });
  if (sources.size() > 1) {
    error(loc(sources[1]->key), fmt::format("schedule has both {} and {}; give one of them",
                                            sources[0]->key.Scalar(), sources[1]->key.Scalar()));
    return;
  }
  if (sources.empty()) {
    error(loc(s->key), "schedule needs actions (per-rank action lists), csv (a PyTorch schedule "
                       "file) or name (a schedule to generate)");
    return;
  }
  const std::string source = sources[0]->key.Scalar();
  for (const auto& [key, owner] : {std::pair<const char*, const char*>{"format", "csv"},
                                   {"chunks", "name"}, {"megatron", "name"}})
    if (auto it = sched.find(key); it != sched.end() && source != owner)
      error(loc(it->second.key), fmt::format("schedule.{} applies only to schedule.{}", key, owner));
  if (source == "actions")
    read_actions(*sources[0], ranks, spec);
  else if (source == "csv")
    read_csv(sched, *sources[0], ranks, spec);
  else
    read_named(sched, *sources[0], spec);
}

void Loader::read_named(const Fields& sched, const Entry& name, PipelineSpec& spec) {
  if (!name.value.IsScalar() || name.value.Scalar().empty()) {
    error(loc(name), fmt::format("schedule.name must be a schedule name such as 1f1b, got {}",
                                 describe(name.value)));
    return;
  }
  ScheduleRequest req;
  req.name = name.value.Scalar();
  req.loc = loc(name);
  if (auto it = sched.find("chunks"); it != sched.end())
    if (auto n = whole(it->second, "schedule.chunks", 1, kMaxStages)) req.chunks = static_cast<int32_t>(*n);
  if (auto it = sched.find("megatron"); it != sched.end()) {
    const YAML::Node& v = it->second.value;
    std::string b = v.IsScalar() ? v.Scalar() : std::string();
    if (b == "true" || b == "True" || b == "TRUE")
      req.megatron = true;
    else if (!(b == "false" || b == "False" || b == "FALSE"))
      error(loc(it->second), fmt::format("schedule.megatron must be true or false, got {}",
                                         describe(v)));
  }
  spec.named = req;
}

Loader::Placement Loader::read_placement(const Entry* pe, int32_t ranks) {
  Placement p;
  if (!pe) return p;
  if (pe->value.IsScalar()) {
    const std::string& v = pe->value.Scalar();
    if (v == "loop" || v == "v") {
      p.kind = v == "loop" ? Placement::kLoop : Placement::kV;
      return p;
    }
    std::string near = closest_match(v, {"loop", "v"});
    error(loc(*pe), fmt::format("unknown placement '{}' (expected loop, v or a list with the rank "
                                "of each stage){}",
                                v, near.empty() ? "" : fmt::format("; did you mean '{}'?", near)));
    p.ok = false;
    return p;
  }
  if (!pe->value.IsSequence()) {
    error(loc(*pe), fmt::format("placement must be loop, v or a list with the rank of each stage, "
                                "got {}",
                                describe(pe->value)));
    p.ok = false;
    return p;
  }
  p.kind = Placement::kList;
  for (const YAML::Node& item : pe->value) {
    std::string key = fmt::format("placement[{}]", p.listed.size());
    auto r = whole(Entry{item, item}, key, 0, kMaxRanks);
    if (r && ranks > 0 && *r >= ranks) {
      error(loc(item), fmt::format("{} is rank {}, out of range: ranks is {} (ids 0 to {})", key, *r,
                                   ranks, ranks - 1));
      r.reset();
    }
    if (!r) p.ok = false;
    p.listed.push_back(r ? static_cast<int32_t>(*r) : 0);
  }
  if (p.listed.empty() || static_cast<int64_t>(p.listed.size()) > kMaxStages) {
    error(loc(*pe), fmt::format("placement must list between 1 and {} stages", kMaxStages));
    p.ok = false;
  }
  return p;
}

void Loader::place_stages(const Entry* st, const Entry* pe, Placement& p, int32_t max_stage,
                          PipelineSpec& spec) {
  const int32_t ranks = spec.ranks;
  int32_t stages = 0;
  if (st) {
    spec.locs.stages = loc(*st);
    if (auto n = whole(*st, "stages", 1, kMaxStages)) stages = static_cast<int32_t>(*n);
    if (stages > 0 && ranks > 0 && p.ok) {
      if (p.kind == Placement::kV && stages != 2 * ranks) {
        error(loc(*pe), fmt::format("placement v needs stages = 2 * ranks = {}, but stages is {}",
                                    2 * ranks, stages));
        p.ok = false;
      } else if (p.kind == Placement::kList && p.listed.size() != static_cast<size_t>(stages)) {
        error(loc(*pe), fmt::format("placement lists {} stages but stages is {}", p.listed.size(),
                                    stages));
        p.ok = false;
      }
    }
  } else if (ranks > 0) {
    switch (p.kind) {
      case Placement::kLoop: stages = ranks; break;
      case Placement::kV: stages = 2 * ranks; break;
      case Placement::kList: stages = static_cast<int32_t>(p.listed.size()); break;
      case Placement::kNone: stages = std::max(ranks, max_stage + 1); break;
    }
    // A named schedule decides its own stage count when `stages` is not given; the resolver
    // reads an invalid location as "not given".
    if (!spec.named) spec.locs.stages = pe ? loc(*pe) : spec.locs.schedule;
    check_lengths_ = !spec.named || p.kind == Placement::kV || p.kind == Placement::kList;
    if (stages > kMaxStages) {
      error(spec.locs.stages, fmt::format("the schedule names more than {} stages", kMaxStages));
      stages = 0;
    }
  }
  spec.stages = stages_ = stages;
  if (ranks <= 0 || stages <= 0 || !p.ok) return;

  spec.placement_declared = p.kind != Placement::kNone;
  spec.locs.placement = pe ? loc(*pe) : spec.locs.schedule;
  switch (p.kind) {
    case Placement::kLoop:
      spec.stage_to_rank = loop_placement(ranks, stages);
      spec.placement = "loop";
      break;
    case Placement::kV:
      spec.stage_to_rank = v_placement(ranks, stages);
      spec.placement = "v";
      break;
    case Placement::kList:
      spec.stage_to_rank = p.listed;
      spec.placement = "explicit";
      break;
    case Placement::kNone: {
      // Read off the actions; a stage no action names takes its loop rank.
      spec.stage_to_rank = infer_placement(spec.actions, stages);
      for (int32_t s = 0; s < stages; ++s)
        if (spec.stage_to_rank[s] < 0) spec.stage_to_rank[s] = s % ranks;
      std::string name = placement_name(spec.stage_to_rank, ranks);
      spec.placement = name == "explicit" ? "inferred" : "inferred:" + name;
      break;
    }
  }
}

std::optional<PipelineSpec> Loader::load(const YAML::Node& root, const std::string& path,
                                         const std::string& default_name) {
  size_t errors_before = diags_.error_count();
  PipelineSpec spec;
  spec.path = path;
  spec.name = default_name;
  spec.locs.file = file_start();

  if (!root.IsDefined() || root.IsNull()) {
    error(file_start(), "the spec is empty; it needs at least schedcheck: 1, ranks and schedule");
    return std::nullopt;
  }
  if (!root.IsMap()) {
    error(loc(root), fmt::format("a spec must be a map of keys (schedcheck, ranks, schedule, ...), "
                                 "got {}",
                                 describe(root)));
    return std::nullopt;
  }
  Fields top = fields(root, "", kTopKeys);
  auto field = [&](const char* key) -> const Entry* {
    auto it = top.find(key);
    return it == top.end() ? nullptr : &it->second;
  };

  check_version(field("schedcheck"));

  if (const Entry* n = field("name")) {
    if (n->value.IsScalar())
      spec.name = n->value.Scalar();
    else
      error(loc(*n), fmt::format("name must be a string, got {}", describe(n->value)));
  }

  const Entry* mesh = field("mesh");
  if (mesh) read_mesh(*mesh, spec);
  if (spec.composition) {
    if (const Entry* r = field("ranks")) {
      const int64_t world = static_cast<int64_t>(spec.ranks) * spec.composition->data_parallel();
      if (auto n = whole(*r, "ranks", 1, kMaxRanks); n && *n != world)
        error(loc(*r), fmt::format("ranks is {} but the mesh has pp x dp_replicate x dp_shard = {} ranks; give the "
                                   "world size or leave ranks out",
                                   *n, world));
    }
    if (const Entry* f = field("fsdp")) read_composed_fsdp(*f, *spec.composition);
    if (const Entry* o = field("optimizer"))
      if (auto v = duration(o->value, loc(*o), "optimizer")) spec.composition->optimizer_s = *v;
    if (const Entry* t = field("tied_embedding_bytes"))
      if (auto v = bytes(t->value, loc(*t), "tied_embedding_bytes")) spec.composition->tied_embedding_bytes = *v;
    if (const Entry* m = field("moe")) read_moe(*m, *spec.composition);
  } else if (const Entry* r = field("ranks")) {
    spec.locs.ranks = loc(*r);
    if (auto n = whole(*r, "ranks", 1, kMaxRanks)) spec.ranks = static_cast<int32_t>(*n);
  } else if (!mesh) {  // a mesh with errors is reported already
    error(file_start(), "missing required key 'ranks' (the number of pipeline ranks)");
  }
  if (const Entry* n = field("numerics")) numerics_tolerances(*n, spec.max_relative_error, spec.max_bias, spec.deterministic);
  if (!mesh)
    for (const char* key : {"fsdp", "tied_embedding_bytes", "optimizer", "moe"})
      if (const Entry* e = field(key))
        error(loc(*e), fmt::format("{} belongs to a composed spec: add mesh: {{pp: ..., dp_shard: ...}} (a spec with "
                                   "fsdp: and no mesh: is an fsdp spec, which has no schedule)",
                                   key));

  read_schedule(field("schedule"), spec.ranks, spec);

  int32_t max_stage = -1, max_mb = -1;
  size_t total_actions = 0;
  for (const auto& row : spec.actions)
    for (const Step& st : row) {
      ++total_actions;
      for (const Action* a : {&st.first, st.second ? &*st.second : nullptr}) {
        if (!a) continue;
        // Ids reach 2^31 - 1: refuse them before any `id + 1` sizes a table.
        if (a->stage >= kMaxStages) {
          error(st.loc, fmt::format("stage id {} of '{}' is out of range (at most {} stages)", a->stage,
                                    format_action(*a), kMaxStages));
          continue;
        }
        if (takes_microbatch(a->kind) && a->microbatch >= kMaxMicrobatches) {
          error(st.loc, fmt::format("microbatch id {} of '{}' is out of range (at most {} microbatches)",
                                    a->microbatch, format_action(*a), kMaxMicrobatches));
          continue;
        }
        max_stage = std::max(max_stage, a->stage);
        if (takes_microbatch(a->kind)) max_mb = std::max(max_mb, a->microbatch);
      }
    }
  if (spec.ranks > 0 && total_actions == 0 && !spec.named && !no_schedule_ && errors_ == 0 &&
      diags_.error_count() == errors_before)
    error(spec.locs.schedule.valid() ? spec.locs.schedule : file_start(),
          "the schedule has no actions");


  Placement placement = read_placement(field("placement"), spec.ranks);
  place_stages(field("stages"), field("placement"), placement, max_stage, spec);

  bool mb_given = false;
  if (const Entry* m = field("microbatches")) {
    spec.locs.microbatches = loc(*m);
    if (auto n = whole(*m, "microbatches", 1, kMaxMicrobatches)) {
      spec.microbatches = static_cast<int32_t>(*n);
      mb_given = true;
    }
  } else if (spec.named) {
    error(spec.locs.schedule, fmt::format("schedule.name needs microbatches: the {} generator "
                                          "takes the count from the spec",
                                          spec.named->name));
  } else if (no_schedule_) {
    error(file_start(), "missing required key 'microbatches' (a spec without a schedule gives the count)");
  } else {
    spec.microbatches = std::max(1, max_mb + 1);
    spec.locs.microbatches = spec.locs.schedule;
  }
  if (const Entry* pl = field("pipelines")) read_pipelines(*pl, spec);
  if (const Entry* g = field("groups")) read_groups(*g, spec);
  if (const Entry* fo = field("forward_only")) {
    if (field("phases"))
      error(loc(*fo), "forward_only and phases are both given: mark the forward-only phases instead "
                      "(phases: [{name: eval, microbatches: 2, forward_only: true}])");
    else if (auto b = boolean(*fo, "forward_only"))
      spec.forward_only = *b;
  }
  if (const Entry* ph = field("phases")) read_phases(*ph, spec, &mb_given);
  if (spec.stages > 0) check_actions(spec, mb_given);

  // The model: unit defaults, then whatever the spec gives.
  if (spec.stages > 0) apply_unit_defaults(spec);
  if (const Entry* c = field("costs")) read_costs(*c, spec);
  if (const Entry* p = field("p2p")) read_p2p(*p, spec);
  if (const Entry* m = field("memory")) read_memory(*m, spec);

  note_unshown();
  if (diags_.error_count() != errors_before) return std::nullopt;
  // As for a CSV row: a rank without actions is allowed (it idles) but worth a warning.
  if (!spec.named && !from_csv_ && !no_schedule_)
    for (size_t r = 0; r < spec.actions.size(); ++r)
      if (spec.actions[r].empty())
        diags_.warning(spec.locs.schedule.valid() ? spec.locs.schedule : file_start(),
                       fmt::format("rank {} has no actions", r));
  return spec;
}

std::optional<PipelineSpec> parse_registered(int32_t file, const std::string& name,
                                             const std::string& text, Diagnostics& diags,
                                             bool schedule_optional = false) {
  std::string dir = std::filesystem::path(name).parent_path().string();
  Loader loader(file, text, dir, diags);
  loader.schedule_optional = schedule_optional;
  if (!loader.prescan(text)) return std::nullopt;
  std::optional<YAML::Node> parsed = loader.parse(text);
  if (!parsed) return std::nullopt;
  const YAML::Node& root = *parsed;
  // yaml-cpp reads some broken text (a line starting with ',' or ']') as an empty document
  // without an error; text that is more than comments cannot be an empty spec.
  if (loader.has_content() && (!root.IsDefined() || root.IsNull())) {
    YAML::Mark m = root.Mark();
    SourceLoc l = m.is_null() ? SourceLoc{file, 1, 1} : loader.at(m.line, m.column);
    std::string_view rest = source_line(file, l.line);
    rest = rest.substr(std::min(rest.size(), static_cast<size_t>(l.col - 1)));
    static constexpr std::string_view kNulls[] = {"~", "null", "Null", "NULL"};
    bool spelled_null = false;
    for (std::string_view n : kNulls)
      if (rest.substr(0, n.size()) == n) spelled_null = true;
    if (!spelled_null) {
      diags.error(l, fmt::format("invalid YAML: unexpected '{}'",
                                 printable(rest.empty() ? std::string_view("end of line") : rest.substr(0, 1))));
      return std::nullopt;
    }
  }
  return loader.guard([&] { return loader.load(root, name, yaml_util::default_name(name)); });
}

}  // namespace

std::optional<PipelineSpec> load_yaml_spec(const std::string& path, Diagnostics& diags, bool schedule_optional) {
  std::optional<yaml_util::SpecFile> f = yaml_util::read_spec_file(path, diags);
  if (!f) return std::nullopt;
  return parse_registered(f->file, path, f->text, diags, schedule_optional);
}

std::optional<PipelineSpec> parse_yaml_spec(const std::string& name, const std::string& text,
                                            Diagnostics& diags) {
  int32_t file = register_source(name, text);
  return parse_registered(file, name, text, diags);
}

}  // namespace sc
