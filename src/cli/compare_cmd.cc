// `schedcheck compare`: named schedules (and the spec's own) under one model, over sweeps of
// ranks, microbatches and chunks, for one or several spec files; one table, JSON or CSV.
#include <algorithm>
#include <map>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipeline/verify_pipeline.h"
#include "cli/common.h"
#include "cli/frontends.h"
#include "pipeline/generators.h"
#include "report/report.h"
#include "support/units.h"

namespace sc::cli {
namespace {

/// The row name that stands for the spec file's own schedule in --schedules.
constexpr const char* kSelf = "self";

struct CompareArgs {
  std::vector<std::string> files;
  std::vector<std::string> schedules;
  std::vector<int32_t> ranks, microbatches, chunks;  ///< sweeps; empty: the spec's own value
  std::string format = "text";
  std::optional<std::string> semantics;
  std::optional<std::string> lower;
  std::optional<std::string> svg;
  std::optional<std::string> phase;  ///< --phase: the training phase of a `phases:` spec to compare on
  bool swept() const { return !ranks.empty() || !microbatches.empty() || !chunks.empty(); }
};

// The model of each rank: the sum over its stages of the spec's per-stage costs (seconds) and
// memory (bytes); `recompute` is that of the rank's first stage.
struct RankShare {
  double f = 0, i = 0, w = 0, b = 0, r = 0;
  int64_t params = 0, act = 0, wgrad = 0, state = 0, retained = 0;
  Recompute recompute = Recompute::kNone;
};

template <class T>
T at(const std::vector<T>& v, int32_t st) {
  return st < static_cast<int32_t>(v.size()) ? v[st] : T{};
}

std::vector<RankShare> rank_shares(const PipelineSpec& s) {
  std::vector<RankShare> out(s.ranks);
  std::vector<uint8_t> seen(s.ranks, 0);
  for (int32_t st = 0; st < s.stages; ++st) {
    RankShare& r = out[s.stage_to_rank[st]];
    r.f += at(s.costs.f_s, st);
    r.i += at(s.costs.i_s, st);
    r.w += at(s.costs.w_s, st);
    r.b += at(s.costs.b_s, st);
    r.r += at(s.costs.r_s, st);
    r.params += at(s.memory.params_bytes, st);
    r.act += at(s.memory.activation_bytes, st);
    r.wgrad += at(s.memory.weight_grad_bytes, st);
    r.state += at(s.memory.state_bytes, st);
    r.retained += at(s.memory.retained_bytes, st);
    if (!seen[s.stage_to_rank[st]]++) r.recompute = at(s.memory.recompute, st);
  }
  return out;
}

// The shares of `s` on `ranks` ranks: the spec's own per-rank shares at its own rank count;
// at another count the model's totals split evenly over the ranks (bytes rounded half up).
std::vector<RankShare> shares_at(const PipelineSpec& s, int32_t ranks) {
  std::vector<RankShare> own = rank_shares(s);
  if (ranks == s.ranks) return own;
  RankShare total;
  for (const RankShare& r : own) {
    total.f += r.f, total.i += r.i, total.w += r.w, total.b += r.b, total.r += r.r;
    total.params += r.params, total.act += r.act, total.wgrad += r.wgrad, total.state += r.state;
    total.retained += r.retained;
  }
  auto split = [&](int64_t bytes) { return (bytes + ranks / 2) / ranks; };
  RankShare each{total.f / ranks, total.i / ranks, total.w / ranks, total.b / ranks, total.r / ranks,
                 split(total.params), split(total.act), split(total.wgrad), split(total.state), split(total.retained),
                 own.empty() ? Recompute::kNone : own.front().recompute};
  return std::vector<RankShare>(static_cast<size_t>(ranks), each);
}

// `base` with the generated schedule: each of its stages gets its rank's share divided by the
// number of stages the schedule puts on that rank (docs/facts/pipeline-schedules.md: chunk cost T/v, chunk memory M/v).
// Per-stage tables the spec leaves empty (recompute, costs.R, state bytes) stay empty.
PipelineSpec with_schedule(const PipelineSpec& base, const std::vector<RankShare>& shares, const Generated& g) {
  PipelineSpec s = base;
  s.name = g.name;
  s.ranks = g.ranks;
  s.stages = g.stages;
  s.microbatches = g.microbatches;
  s.stage_to_rank = g.stage_to_rank;
  s.placement = g.placement;
  s.placement_declared = true;
  s.pipeline_starts = g.pipeline_starts;
  s.actions = g.actions;
  s.named.reset();
  // Stages per rank within one pipeline: DualPipe's two pipelines each hold a full 1/p of the
  // model on every rank (its parameters are held twice), so each of its stages gets the whole
  // share; interleaved and V schedules split the rank's share over their v stages.
  std::vector<int32_t> per_rank(g.ranks, 0);
  for (size_t k = 0; k < g.pipeline_starts.size(); ++k) {
    int32_t from = g.pipeline_starts[k];
    int32_t to = k + 1 < g.pipeline_starts.size() ? g.pipeline_starts[k + 1] : g.stages;
    std::vector<int32_t> count(g.ranks, 0);
    for (int32_t st = from; st < to; ++st) ++count[g.stage_to_rank[st]];
    for (int32_t r = 0; r < g.ranks; ++r) per_rank[r] = std::max(per_rank[r], count[r]);
  }
  size_t n = static_cast<size_t>(g.stages);
  s.costs = Costs{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n), std::vector<double>(n), {}};
  if (!base.costs.r_s.empty()) s.costs.r_s.assign(n, 0);
  s.memory.params_bytes.assign(n, 0);
  s.memory.activation_bytes.assign(n, 0);
  s.memory.weight_grad_bytes.assign(n, 0);
  if (!base.memory.state_bytes.empty()) s.memory.state_bytes.assign(n, 0);
  if (!base.memory.retained_bytes.empty()) s.memory.retained_bytes.assign(n, 0);
  if (!base.memory.recompute.empty()) s.memory.recompute.assign(n, Recompute::kNone);
  for (size_t st = 0; st < n; ++st) {
    int32_t r = g.stage_to_rank[st];
    double v = per_rank[r];
    const RankShare& sh = shares[r];
    s.costs.f_s[st] = sh.f / v;
    s.costs.i_s[st] = sh.i / v;
    s.costs.w_s[st] = sh.w / v;
    s.costs.b_s[st] = sh.b / v;
    if (!s.costs.r_s.empty()) s.costs.r_s[st] = sh.r / v;
    // Whole bytes: a share that does not divide rounds half up (give memory in units divisible
    // by the chunk count for exact figures).
    auto split = [&](int64_t bytes) { return (bytes + per_rank[r] / 2) / per_rank[r]; };
    s.memory.params_bytes[st] = split(sh.params);
    s.memory.activation_bytes[st] = split(sh.act);
    s.memory.weight_grad_bytes[st] = split(sh.wgrad);
    if (!s.memory.state_bytes.empty()) s.memory.state_bytes[st] = split(sh.state);
    if (!s.memory.retained_bytes.empty()) s.memory.retained_bytes[st] = split(sh.retained);
    if (!s.memory.recompute.empty()) s.memory.recompute[st] = sh.recompute;
  }
  for (auto& row : s.actions)
    for (auto& st : row) st.loc = base.locs.schedule.valid() ? base.locs.schedule : base.locs.file;
  return s;
}

size_t messages_of(const VerifyResult& r) {
  size_t n = 0;
  for (const auto& ch : r.program.channels) n += ch.sends.size();
  for (const auto& d : r.program.deps) n += d.kind == DepKind::kTransfer ? 1 : 0;
  return n;
}

std::string kinds_of(const VerifyResult& r) {
  std::vector<std::string> kinds;
  for (const auto& f : r.findings)
    if (std::find(kinds.begin(), kinds.end(), kind_name(f.kind)) == kinds.end()) kinds.push_back(kind_name(f.kind));
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : ",") + k;
  return out;
}

std::string per_rank_bytes(const std::vector<int64_t>& v) {
  std::string out;
  for (int64_t b : v) out += (out.empty() ? "" : " ") + format_bytes(static_cast<double>(b));
  return out;
}

std::string joined(const std::vector<int32_t>& v) {
  std::string out;
  for (int32_t x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

/// One field of an RFC 4180 CSV row: quoted (quotes doubled) when it holds a comma, a quote or
/// a line break.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

constexpr const char* kCsvHeader =
    "file,schedule,ranks,microbatches,chunks,verdict,exit_code,span_s,makespan_s,bubble_rate,peak_bytes_max,"
    "worst_case_bytes_max,messages,reason\n";

/// One point of the sweep: a shape a schedule is generated at. `chunks`: stages per rank asked
/// for (nullopt: each schedule's default).
struct Point {
  int32_t ranks = 0;
  int32_t microbatches = 0;
  std::optional<int32_t> chunks;
};

/// The sweep's points for `spec` (ranks outermost, chunks innermost): the cartesian product of
/// the swept values, the spec's own ranks and microbatches where a dimension is not swept.
std::vector<Point> points_of(const CompareArgs& a, const PipelineSpec& spec) {
  std::vector<int32_t> ranks = a.ranks.empty() ? std::vector<int32_t>{spec.ranks} : a.ranks;
  std::vector<int32_t> mbs = a.microbatches.empty() ? std::vector<int32_t>{spec.microbatches} : a.microbatches;
  std::vector<std::optional<int32_t>> chunks;
  for (int32_t c : a.chunks) chunks.push_back(c);
  if (chunks.empty()) chunks.push_back(std::nullopt);
  std::vector<Point> out;
  for (int32_t p : ranks)
    for (int32_t m : mbs)
      for (const auto& v : chunks) out.push_back({p, m, v});
  return out;
}

bool has_own_schedule(const PipelineSpec& s) {
  return s.named.has_value() || std::any_of(s.actions.begin(), s.actions.end(), [](const auto& row) { return !row.empty(); });
}

/// Stages per rank of `s` (its largest count on one rank).
int32_t chunks_of(const PipelineSpec& s) {
  std::vector<int32_t> count(std::max(s.ranks, 1), 0);
  for (int32_t r : s.stage_to_rank)
    if (r >= 0 && r < s.ranks) ++count[r];
  return *std::max_element(count.begin(), count.end());
}

/// The spec's own schedule runs at this point: its ranks and microbatches, and its chunks where
/// chunks are swept.
bool own_shape(const PipelineSpec& s, const Point& pt) {
  return pt.ranks == s.ranks && pt.microbatches == s.microbatches && (!pt.chunks || *pt.chunks == chunks_of(s));
}

/// Collects the rows of every file in the three formats and the results to draw.
class Table {
 public:
  Table(const CompareArgs& a) : a_(a) {}

  void begin_file(const PipelineSpec& spec) {
    if (text_.tellp() > 0) text_ << "\n";
    text_ << fmt::format("{}: {}, {}; each rank's costs and memory split evenly over its stages\n", spec.path,
                         format_count(spec.ranks, "rank"), format_count(spec.microbatches, "microbatch", "microbatches"));
    if (a_.swept()) {
      std::string dims;
      if (!a_.ranks.empty()) dims += "ranks " + joined(a_.ranks);
      if (!a_.microbatches.empty()) dims += (dims.empty() ? "" : ", ") + std::string("microbatches ") + joined(a_.microbatches);
      if (!a_.chunks.empty()) dims += (dims.empty() ? "" : ", ") + std::string("chunks ") + joined(a_.chunks);
      text_ << "swept: " << dims;
      if (std::any_of(a_.ranks.begin(), a_.ranks.end(), [&](int32_t p) { return p != spec.ranks; }))
        text_ << fmt::format("; at a rank count other than {} the model's total costs and memory are split evenly over "
                             "the ranks",
                             spec.ranks);
      text_ << "\n";
    }
    text_ << "\n" << name_col("schedule") << point_cols("ranks", "mb", "chunks")
          << fmt::format("{:<22} {:>12} {:>12} {:>8} {:>12} {:>12} {:>9}\n", "verdict", "span", "makespan", "bubble",
                         "peak (max)", "worst (max)", "messages");
  }

  // A schedule the shape does not allow (or a row that cannot run): its reason.
  void invalid(const std::string& file, const std::string& name, const Point& pt, const std::string& why) {
    std::string chunks = pt.chunks ? std::to_string(*pt.chunks) : "";
    json_.push_back({{"file", file},
                     {"schedule", {{"name", name}}},
                     {"point", point_json(name, pt.ranks, pt.microbatches, pt.chunks)},
                     {"verdict", "invalid"},
                     {"reason", why}});
    text_ << name_col(name) << point_cols(std::to_string(pt.ranks), std::to_string(pt.microbatches), chunks.empty() ? "-" : chunks)
          << "invalid: " << why << "\n";
    csv_ << fmt::format("{},{},{},{},{},invalid,,,,,,,,{}\n", csv_field(file), csv_field(name), pt.ranks, pt.microbatches,
                        chunks, csv_field(why));
  }

  // A schedule that was verified: `label` names it in the picture.
  void result(const std::string& file, const std::string& name, const PipelineSpec& spec, VerifyResult r,
              const std::string& label) {
    const int32_t chunks = chunks_of(spec);
    nlohmann::json j = json_report_value(r);
    j["messages"] = messages_of(r);
    // The work the row does: every compute op's duration, summed over ranks (seconds).
    double work_s = 0;
    for (const Op& op : r.program.ops)
      if (op.kind == OpKind::kCompute) work_s += op.duration_s;
    j["compute_s"] = work_s;
    work_.push_back({spec.ranks, spec.microbatches, label_, work_s});
    j["file"] = file;
    j["point"] = point_json(name, spec.ranks, spec.microbatches, chunks);
    json_.push_back(j);
    exit_ = combine_exit(exit_, r.exit_code);
    std::string kinds = kinds_of(r);
    std::string verdict = r.findings.empty() ? "holds" : "violated: " + kinds;
    std::string row_start = name_col(name) + point_cols(std::to_string(spec.ranks), std::to_string(spec.microbatches),
                                                         std::to_string(chunks));
    std::string csv_start = fmt::format("{},{},{},{},{},{},{}", csv_field(file), csv_field(name), spec.ranks,
                                        spec.microbatches, chunks, r.findings.empty() ? "holds" : "violated", r.exit_code);
    if (r.timeline) {
      const Timeline& t = *r.timeline;
      int64_t peak = *std::max_element(t.peak_bytes_per_rank.begin(), t.peak_bytes_per_rank.end());
      int64_t worst = *std::max_element(r.worst_case->bytes_per_rank.begin(), r.worst_case->bytes_per_rank.end());
      text_ << row_start
            << fmt::format("{:<22} {:>12} {:>12} {:>8.4f} {:>12} {:>12} {:>9}\n", verdict, format_duration(t.span_s),
                           format_duration(t.makespan_s), t.bubble_rate, format_bytes(static_cast<double>(peak)),
                           format_bytes(static_cast<double>(worst)), messages_of(r));
      text_ << name_col("") << point_cols("", "", "") << "peak per rank: " << per_rank_bytes(t.peak_bytes_per_rank) << "\n";
      csv_ << csv_start
           << fmt::format(",{:.12g},{:.12g},{:.12g},{},{},{},{}\n", t.span_s, t.makespan_s, t.bubble_rate, peak, worst, messages_of(r),
                          csv_field(kinds));
    } else {
      text_ << row_start << fmt::format("{:<22} (does not complete: {})\n", verdict, r.findings.front().message);
      csv_ << csv_start << fmt::format(",,,,,,{},{}\n", messages_of(r), csv_field(kinds));
    }
    if (a_.svg) {
      drawn_ops_ += static_cast<int64_t>(r.program.ops.size());
      ++drawn_rows_;
      if (drawn_ops_ <= kMaxDrawnOps && drawn_rows_ <= kMaxDrawnRows) {
        r.spec.name = label;
        drawn_.push_back(std::move(r));
      }
    }
  }

  /// Names rows in work notes ("self", or "FILE: 1f1b" with several files).
  void set_label(const std::string& label) { label_ = label; }
  /// Notes, per point (ranks, microbatches) over every file, where the rows' schedules do not
  /// do the same work (compute summed over ranks): their spans then compare different work.
  void work_notes(const std::string& prefix) {
    std::map<std::pair<int32_t, int32_t>, std::vector<const Work*>> by_point;
    for (const Work& w : work_) by_point[{w.ranks, w.microbatches}].push_back(&w);
    for (const auto& [pt, rows] : by_point) {
      auto [lo, hi] = std::minmax_element(rows.begin(), rows.end(), [](const Work* x, const Work* y) { return x->work_s < y->work_s; });
      if ((*hi)->work_s <= (*lo)->work_s * (1 + 1e-9)) continue;
      std::string list;
      for (const Work* w : rows) list += fmt::format("{}{} {}", list.empty() ? "" : ", ", w->name, format_duration(w->work_s));
      note(fmt::format("{}at {} and {} the schedules do not do the same work (compute summed over ranks: {}); a span "
                       "compares like for like only between rows of equal work",
                       prefix, format_count(pt.first, "rank"), format_count(pt.second, "microbatch", "microbatches"), list));
    }
  }

  // A line under the file's table (text) or on standard error (json, csv).
  void note(const std::string& line) {
    if (a_.format == "text") text_ << line << "\n";
    else notes_.push_back(line);
  }

  int exit_code() const { return exit_; }
  const std::vector<VerifyResult>& drawn() const { return drawn_; }
  /// Ops of every row --svg would draw (rows past kMaxDrawnOps are counted, not kept).
  int64_t drawn_ops() const { return drawn_ops_; }
  int64_t drawn_rows() const { return drawn_rows_; }
  /// One picture holds at most this many ops (each kept row holds its whole program) and
  /// timelines (each is drawn at full width).
  static constexpr int64_t kMaxDrawnOps = 2'000'000;
  static constexpr int64_t kMaxDrawnRows = 64;

  void print(std::ostream& out, std::ostream& err) const {
    for (const auto& n : notes_) err << "schedcheck: note: " << n << "\n";
    if (a_.format == "json") out << json_.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else if (a_.format == "csv") out << kCsvHeader << csv_.str();
    else out << text_.str();
  }

 private:
  static nlohmann::json point_json(const std::string& name, int32_t ranks, int32_t mbs, std::optional<int32_t> chunks) {
    return {{"schedule", name}, {"ranks", ranks}, {"microbatches", mbs},
            {"chunks", chunks ? nlohmann::json(*chunks) : nlohmann::json(nullptr)}};
  }
  static std::string name_col(const std::string& s) { return fmt::format("{:<18} ", s); }
  // The point's columns, only when a dimension is swept (the table of one shape stays as it was).
  std::string point_cols(const std::string& p, const std::string& m, const std::string& v) const {
    return a_.swept() ? fmt::format("{:>5} {:>5} {:>6}  ", p, m, v) : "";
  }

  const CompareArgs& a_;
  nlohmann::json json_ = nlohmann::json::array();
  std::ostringstream text_, csv_;
  std::vector<std::string> notes_;
  std::vector<VerifyResult> drawn_;
  struct Work {
    int32_t ranks, microbatches;
    std::string name;
    double work_s;
  };
  std::vector<Work> work_;  ///< every row so far
  std::string label_;
  int64_t drawn_ops_ = 0, drawn_rows_ = 0;
  int exit_ = 0;
};

// Loads every file (through the pipeline front-end, `schedule:` optional); prints the
// diagnostics and returns nullopt-like false on the first refusal (exit code in *exit).
bool load_all(const CompareArgs& a, bool want_self, std::vector<PipelineSpec>& specs, int* exit) {
  Diagnostics diags;
  for (const auto& f : a.files) {
    const FrontEnd& fe = front_end_for(f);
    const std::string name = fe.name;
    if (name != "pipeline" && name != "composed") {
      std::cerr << "schedcheck: error: " << f << ": compare takes pipeline and composed specs and PyTorch schedule CSVs; "
                << "this is one of the " << fe.what << " (front-end '" << fe.name << "')\n";
      *exit = kExitSpec;
      return false;
    }
    Diagnostics d;
    auto spec = load_spec(f, std::nullopt, d, /*schedule_optional=*/true);
    int32_t first_id = 0;
    if (spec && narrow_to_phase(*spec, a.phase, "compare", d, &first_id) && first_id > 0)
      std::cerr << fmt::format("schedcheck: note: {}: phase {}: microbatch ids below count from 0 at the phase's "
                               "first id, {}\n", f, *a.phase, first_id);
    diags.merge(d);
    if (spec) specs.push_back(std::move(*spec));
  }
  if (diags.has_errors()) {
    *exit = report_spec_errors(diags);
    return false;
  }
  diags.print(std::cerr);  // warnings
  if (want_self)
    for (const auto& s : specs)
      if (!has_own_schedule(s)) {
        std::cerr << "schedcheck: error: " << s.path << ": --schedules self: the spec has no schedule: key, so there is no "
                     "own schedule to compare (give one, or leave self out)\n";
        *exit = kExitSpec;
        return false;
      }
  return true;
}

int run_compare(const CompareArgs& a) {
  if (a.phase && !a.microbatches.empty()) {
    std::cerr << "schedcheck: error: --microbatches and --phase: the phase gives the microbatch count (change it in "
                 "the spec's phases:)\n";
    return kExitUsage;
  }
  std::vector<std::string> names = a.schedules.empty() ? schedule_names() : a.schedules;
  const std::vector<std::string> known = schedule_names();
  for (const auto& name : names)
    if (name != kSelf && std::find(known.begin(), known.end(), name) == known.end()) {
      std::cerr << "schedcheck: error: --schedules: " << unknown_schedule_message(name) << " (or 'self', the spec's own)\n";
      return kExitUsage;
    }
  const bool want_self = std::find(names.begin(), names.end(), kSelf) != names.end();
  if (a.svg) {
    std::string problem = check_output_path("--svg", *a.svg, a.files);
    if (!problem.empty()) {
      std::cerr << "schedcheck: error: " << problem << "\n";
      return kExitUsage;
    }
  }
  std::vector<PipelineSpec> specs;
  int load_exit = 0;
  if (!load_all(a, want_self, specs, &load_exit)) return load_exit;
  VerifyOptions opt;
  if (a.semantics) opt.semantics = parse_semantics(*a.semantics);  // validated by the option
  if (a.lower) opt.lower = *a.lower == "deferred" ? LowerPolicy::kDeferred : LowerPolicy::kPyTorch;

  Table table(a);
  const bool several = specs.size() > 1;
  for (const PipelineSpec& base : specs) {
    table.begin_file(base);
    size_t self_skipped = 0, self_ran = 0;
    for (const Point& pt : points_of(a, base)) {
      std::vector<RankShare> shares = shares_at(base, pt.ranks);
      for (const auto& name : names) {
        std::string label = several ? base.path + ": " + name : name;
        table.set_label(several ? base.path + ": " + name : name);
        if (a.swept()) label += fmt::format(" (p = {}, m = {}{})", pt.ranks, pt.microbatches, pt.chunks ? fmt::format(", v = {}", *pt.chunks) : "");
        if (name == kSelf) {
          if (!own_shape(base, pt)) {
            ++self_skipped;
            continue;
          }
          ++self_ran;
          if (a.lower && base.has_comms()) {
            table.invalid(base.path, name, pt, "the spec's schedule already has SEND/RECV actions; --lower applies to compute-only schedules");
            continue;
          }
          table.result(base.path, name, base, verify(base, opt), label + ": " + base.name);
          continue;
        }
        GenOptions g_opt{name, pt.ranks, pt.microbatches, std::nullopt, pt.chunks, false};
        std::string why;
        std::optional<Generated> g = generate(g_opt, &why);
        if (!g) {
          table.invalid(base.path, name, pt, why);
          continue;
        }
        PipelineSpec s = with_schedule(base, shares, *g);
        table.result(base.path, name, s, verify(s, opt), label);
      }
    }
    if (self_skipped > 0)
      table.note(fmt::format("{}self (the spec's own schedule) runs only at its own shape ({}, {}, {} per rank): {}",
                             several ? base.path + ": " : "", format_count(base.ranks, "rank"),
                             format_count(base.microbatches, "microbatch", "microbatches"),
                             format_count(chunks_of(base), "stage"),
                             self_ran == 0 ? "no swept point has that shape, so it is left out"
                                           : "left out at " + format_count(self_skipped, "other point")));
  }
  table.work_notes("");
  int exit = table.exit_code();
  if (a.svg && (table.drawn_ops() > Table::kMaxDrawnOps || table.drawn_rows() > Table::kMaxDrawnRows)) {
    table.print(std::cout, std::cerr);
    std::cerr << fmt::format("schedcheck: error: --svg: {} timelines holding {} ops in all; one picture draws at most {} "
                             "timelines and {} ops; sweep fewer points or schedules for the picture (nothing was written)\n",
                             table.drawn_rows(), table.drawn_ops(), Table::kMaxDrawnRows, Table::kMaxDrawnOps);
    return kExitSpec;
  }
  if (a.svg) {
    std::vector<const VerifyResult*> pictures;
    for (const auto& r : table.drawn()) pictures.push_back(&r);
    if (!write_outputs({{"--svg", *a.svg, svg_timelines(pictures)}}, a.files)) return exit != 0 ? exit : kExitUsage;
  }
  table.print(std::cout, std::cerr);
  return exit;
}

}  // namespace

Command add_compare(CLI::App& parent) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "compare", "Verify several named schedules, and the spec's own (self), with the same costs and memory, over\n"
                 "sweeps of ranks, microbatches and chunks: one row per (file, schedule, point).\n"
                 "The spec's costs and memory are taken per rank (summed over the rank's stages) and split\n"
                 "evenly over the stages each schedule puts on the rank (chunk cost T/v, chunk memory M/v);\n"
                 "at a swept rank count other than the spec's, the model's totals are split evenly over the ranks.\n"
                 "A shape a schedule does not allow is a row with the reason; self runs only at the spec's shape.\n"
                 "  schedcheck compare model.yaml --schedules 1f1b,zb-h1,zb-h2,interleaved-1f1b\n"
                 "  schedcheck compare model.yaml --schedules self,1f1b,zb-h1 --microbatches 8,16,32 --format csv");
  cmd->add_option("specs", a->files, "YAML specs (or PyTorch schedule CSVs) giving ranks, microbatches, costs, p2p and "
                                     "memory; schedule: is needed only for self")
      ->required();
  cmd->add_option("--schedules", a->schedules,
                  "comma-separated schedule names, and 'self' for the spec's own schedule (default: every named one)")
      ->delimiter(',');
  cmd->add_option("--ranks", a->ranks, "comma-separated rank counts to sweep (default: the spec's)")
      ->delimiter(',')
      ->check(CLI::Range(1, kMaxSpecRanks));
  cmd->add_option("--microbatches", a->microbatches, "comma-separated microbatch counts to sweep (default: the spec's)")
      ->delimiter(',')
      ->check(CLI::Range(1, kMaxSpecMicrobatches));
  cmd->add_option("--chunks", a->chunks,
                  "comma-separated stages per rank to sweep, for the schedules that take a choice (default: each "
                  "schedule's own, 2 for the interleaved ones)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--format", a->format,
                  "text (a table), json (a list of verify objects with file and point) or csv (a header row, then "
                  "one row per result; seconds and bytes)")
      ->check(one_of({"text", "json", "csv"}));
  add_semantics_option(cmd, a->semantics);
  cmd->add_option("--svg", a->svg, "write every row's timeline as one SVG picture, one below the other on one time scale (at most 64 timelines and 2,000,000 ops)");
  cmd->add_option("--phase", a->phase,
                  "for specs with phases: (a training step, then an evaluation), the training phase to compare the "
                  "schedules on, by name or position from 1");
  cmd->add_option("--lower", a->lower, "add SEND/RECV to every schedule first: pytorch or deferred")
      ->check(one_of({"pytorch", "deferred"}));
  return {cmd, [a] { return run_compare(*a); }};
}

}  // namespace sc::cli
