// `schedcheck compare`: several named schedules under one model, one table.
#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipeline/verify_pipeline.h"
#include "cli/common.h"
#include "pipeline/generators.h"
#include "report/report.h"
#include "support/units.h"

namespace sc::cli {
namespace {

struct CompareArgs {
  std::string file;
  std::vector<std::string> schedules;
  std::optional<int32_t> chunks;
  std::string format = "text";
  std::optional<std::string> semantics;
  std::optional<std::string> lower;
  std::optional<std::string> svg;
};

// The model of each rank: the sum over its stages of the spec's per-stage costs and memory.
struct RankShare {
  double f = 0, i = 0, w = 0, b = 0;
  int64_t params = 0, act = 0, wgrad = 0;
};

std::vector<RankShare> rank_shares(const PipelineSpec& s) {
  std::vector<RankShare> out(s.ranks);
  for (int32_t st = 0; st < s.stages; ++st) {
    RankShare& r = out[s.stage_to_rank[st]];
    r.f += s.costs.f_s[st];
    r.i += s.costs.i_s[st];
    r.w += s.costs.w_s[st];
    r.b += s.costs.b_s[st];
    r.params += s.memory.params_bytes[st];
    r.act += s.memory.activation_bytes[st];
    r.wgrad += s.memory.weight_grad_bytes[st];
  }
  return out;
}

// `base` with the generated schedule: each of its stages gets its rank's share divided by the
// number of stages the schedule puts on that rank (FACTS §1: chunk cost T/v, chunk memory M/v).
PipelineSpec with_schedule(const PipelineSpec& base, const std::vector<RankShare>& shares, const Generated& g) {
  PipelineSpec s = base;
  s.name = g.name;
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
  s.costs = Costs{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  s.memory.params_bytes.assign(n, 0);
  s.memory.activation_bytes.assign(n, 0);
  s.memory.weight_grad_bytes.assign(n, 0);
  for (size_t st = 0; st < n; ++st) {
    int32_t r = g.stage_to_rank[st];
    double v = per_rank[r];
    const RankShare& sh = shares[r];
    s.costs.f_s[st] = sh.f / v;
    s.costs.i_s[st] = sh.i / v;
    s.costs.w_s[st] = sh.w / v;
    s.costs.b_s[st] = sh.b / v;
    // Whole bytes: a share that does not divide rounds half up (give memory in units divisible
    // by the chunk count for exact figures).
    auto split = [&](int64_t bytes) { return (bytes + per_rank[r] / 2) / per_rank[r]; };
    s.memory.params_bytes[st] = split(sh.params);
    s.memory.activation_bytes[st] = split(sh.act);
    s.memory.weight_grad_bytes[st] = split(sh.wgrad);
  }
  for (auto& row : s.actions)
    for (auto& st : row) st.loc = base.locs.schedule;
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

int run_compare(const CompareArgs& a) {
  if (a.svg) {
    std::string problem = check_output_path("--svg", *a.svg, {a.file});
    if (!problem.empty()) {
      std::cerr << "schedcheck: error: " << problem << "\n";
      return kExitUsage;
    }
  }
  Diagnostics diags;
  auto base = load_spec(a.file, std::nullopt, diags);
  if (!base) return report_spec_errors(diags);
  VerifyOptions opt;
  if (a.semantics) opt.semantics = parse_semantics(*a.semantics);  // validated by the option
  if (a.lower) opt.lower = *a.lower == "deferred" ? LowerPolicy::kDeferred : LowerPolicy::kPyTorch;
  std::vector<RankShare> shares = rank_shares(*base);
  std::vector<std::string> names = a.schedules.empty() ? schedule_names() : a.schedules;
  const std::vector<std::string> known = schedule_names();
  for (const auto& name : names)
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::cerr << "schedcheck: error: --schedules: " << unknown_schedule_message(name) << "\n";
      return kExitUsage;
    }

  nlohmann::json rows = nlohmann::json::array();
  std::ostringstream table;
  table << fmt::format("{}: {}, {}; each rank's costs and memory split evenly over its stages\n\n", base->path,
                       format_count(base->ranks, "rank"), format_count(base->microbatches, "microbatch", "microbatches"));
  table << fmt::format("{:<18} {:<22} {:>12} {:>12} {:>8} {:>12} {:>12} {:>9}\n", "schedule", "verdict", "span",
                       "makespan", "bubble", "peak (max)", "worst (max)", "messages");
  int exit = 0;
  std::vector<VerifyResult> drawn;  // for --svg
  for (const auto& name : names) {
    GenOptions g_opt{name, base->ranks, base->microbatches, std::nullopt, a.chunks, false};
    std::string why;
    std::optional<Generated> g = generate(g_opt, &why);
    if (!g) {
      rows.push_back({{"schedule", {{"name", name}}}, {"verdict", "invalid"}, {"reason", why}});
      table << fmt::format("{:<18} invalid: {}\n", name, why);
      continue;
    }
    VerifyResult r = verify(with_schedule(*base, shares, *g), opt);
    auto j = nlohmann::json::parse(json_report(r));
    j["messages"] = messages_of(r);
    rows.push_back(j);
    if (r.exit_code != 0) exit = exit == 0 || exit == r.exit_code ? r.exit_code : 10;
    std::string verdict = r.findings.empty() ? "holds" : "violated: " + kinds_of(r);
    if (r.timeline) {
      const Timeline& t = *r.timeline;
      int64_t peak = *std::max_element(t.peak_bytes_per_rank.begin(), t.peak_bytes_per_rank.end());
      int64_t worst = *std::max_element(r.worst_case->bytes_per_rank.begin(), r.worst_case->bytes_per_rank.end());
      table << fmt::format("{:<18} {:<22} {:>12} {:>12} {:>8.4f} {:>12} {:>12} {:>9}\n", name, verdict,
                           format_duration(t.span_s), format_duration(t.makespan_s), t.bubble_rate,
                           format_bytes(static_cast<double>(peak)), format_bytes(static_cast<double>(worst)),
                           messages_of(r));
      table << fmt::format("{:<18} peak per rank: {}\n", "", per_rank_bytes(t.peak_bytes_per_rank));
    } else {
      table << fmt::format("{:<18} {:<22} (does not complete: {})\n", name, verdict, r.findings.front().message);
    }
    if (a.svg) drawn.push_back(std::move(r));
  }
  if (a.svg) {
    std::vector<const VerifyResult*> pictures;
    for (const auto& r : drawn) pictures.push_back(&r);
    if (!write_outputs({{"--svg", *a.svg, svg_timelines(pictures)}}, {a.file})) return exit != 0 ? exit : kExitUsage;
  }
  if (a.format == "json")
    std::cout << rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    std::cout << table.str();
  return exit;
}

}  // namespace

Command add_compare(CLI::App& parent) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "compare", "Verify several named schedules with the same ranks, microbatches, costs and memory.\n"
                 "The spec's costs and memory are taken per rank (summed over the rank's stages) and split\n"
                 "evenly over the stages each schedule puts on the rank (chunk cost T/v, chunk memory M/v).\n"
                 "  schedcheck compare model.yaml --schedules 1f1b,zb-h1,zb-h2,interleaved-1f1b");
  cmd->add_option("spec", a->file, "YAML spec giving ranks, microbatches, costs, p2p and memory")->required();
  cmd->add_option("--schedules", a->schedules, "comma-separated schedule names (default: all)")->delimiter(',');
  cmd->add_option("--chunks", a->chunks, "stages per rank for the interleaved schedules (default 2)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--format", a->format, "text (a table) or json (a list of verify objects)")
      ->check(CLI::IsMember({"text", "json"}));
  add_semantics_option(cmd, a->semantics);
  cmd->add_option("--svg", a->svg, "write the schedules' timelines as one SVG picture, one below the other on one time scale");
  cmd->add_option("--lower", a->lower, "add SEND/RECV to every schedule first: pytorch or deferred")
      ->check(CLI::IsMember({"pytorch", "deferred"}));
  return {cmd, [a] { return run_compare(*a); }};
}

}  // namespace sc::cli
