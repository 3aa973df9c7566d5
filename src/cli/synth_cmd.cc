// `schedcheck synth`: search for the order with the least span (or makespan) under a memory limit.
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipeline/verify_pipeline.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "report/report.h"
#include "solver/synth.h"
#include "spec/csv_schedule.h"
#include "support/units.h"

namespace sc::cli {
namespace {

inline constexpr int kExitInconclusive = 5;
inline constexpr int kExitMemory = 13;

struct SynthArgs {
  std::string file;
  std::string objective = "span";
  std::string time_limit = "120s";
  uint64_t rlimit = 0;
  uint32_t seed = 0;
  std::optional<std::string> limit;
  std::string format = "text";
  std::optional<std::string> output;
  std::optional<std::string> csv;
  bool no_warm_start = false;
  bool no_closed_form = false;   ///< testing: the solver proves bounds without B1-B3
  bool require_optimal = false;  ///< exit 5 unless the result is proven optimal
  ShapeOverride shape;           ///< --ranks, --stages, --microbatches
};


// The spec's model and the synthesised action lists as spec v1 YAML (verify reads it back).
std::string synth_yaml(const PipelineSpec& spec, const SynthResult& r, const std::optional<int64_t>& limit) {
  PipelineSpec s = spec;
  s.name = spec.name + "-synth";
  s.memory.limit_bytes = limit;
  std::string out = yaml_spec_text(s, &r.actions);
  if (out.find("\ncosts:") != std::string::npos) return out;  // the writer already gives the model
  auto list = [](const auto& v, auto fmt_one) {
    std::string t = "[";
    for (size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + fmt_one(v[i]);
    return t + "]";
  };
  auto sec = [](double d) { return fmt::format("{:.9g}s", d); };
  auto num = [](int64_t b) { return std::to_string(b); };
  if (r.split_backward)
    out += fmt::format("costs: {{F: {}, I: {}, W: {}}}\n", list(spec.costs.f_s, sec), list(spec.costs.i_s, sec),
                       list(spec.costs.w_s, sec));
  else
    out += fmt::format("costs: {{F: {}, B: {}}}\n", list(spec.costs.f_s, sec), list(spec.costs.b_s, sec));
  out += fmt::format("p2p: {{latency: {}, message_bytes: {}, semantics: {}", sec(spec.p2p.latency_s),
                     spec.p2p.message_bytes, format_semantics(spec.p2p.semantics));
  if (std::isfinite(spec.p2p.bandwidth_bytes_per_s))
    out += fmt::format(", bandwidth: {:.17g}B/s", spec.p2p.bandwidth_bytes_per_s);
  out += "}\n";
  out += fmt::format("memory: {{params_bytes: {}, activation_bytes: {}, weight_grad_bytes: {}",
                     list(spec.memory.params_bytes, num), list(spec.memory.activation_bytes, num),
                     list(spec.memory.weight_grad_bytes, num));
  if (limit) out += fmt::format(", limit_bytes: {}", *limit);
  out += "}\n";
  return out;
}

int run_synth(const SynthArgs& a) {
  Diagnostics diags;
  auto spec = load_spec(a.file, std::nullopt, diags, /*schedule_optional=*/true, a.shape);
  if (!spec) return report_spec_errors(diags);
  // The outputs are checked before the search (which may take minutes): never the spec or a
  // file it references, never both the same file.
  if (std::string problem = check_output_paths({{"--output", a.output}, {"--csv", a.csv}}, {a.file}); !problem.empty()) {
    std::cerr << "schedcheck: error: " << problem << "\n";
    return kExitUsage;
  }
  SynthOptions opt;
  opt.objective = a.objective == "makespan" ? SynthObjective::kMakespan : SynthObjective::kSpan;
  std::string why;
  auto tl = parse_duration_s(a.time_limit, &why);
  if (!tl || *tl <= 0) {
    std::cerr << "schedcheck: error: --time-limit: " << (why.empty() ? "must be positive" : why) << "\n";
    return kExitUsage;
  }
  opt.time_limit_s = *tl;
  opt.rlimit = a.rlimit;
  opt.seed = a.seed;
  opt.warm_start = !a.no_warm_start;
  opt.closed_form_bounds = !a.no_closed_form;
  opt.on_progress = [](const std::string& line) { ProgressLine::set_detail(line); };
  if (a.limit) {
    auto b = parse_bytes(*a.limit, &why);
    if (!b) {
      std::cerr << "schedcheck: error: --memory-limit: " << why << "\n";
      return kExitUsage;
    }
    opt.limit_bytes = *b;
  }
  std::optional<int64_t> limit = opt.limit_bytes ? opt.limit_bytes : spec->memory.limit_bytes;

  SynthResult r = synthesize(*spec, opt);
  ProgressLine::set_detail("");
  const char* what = opt.objective == SynthObjective::kSpan ? "span" : "makespan";

  // The schedule goes through the same verify as any other.
  std::optional<VerifyResult> vr;
  PipelineSpec out_spec = *spec;
  if (r.has_schedule) {
    out_spec.name = spec->name + "-synth";
    out_spec.actions = r.actions;
    out_spec.named.reset();
    out_spec.memory.limit_bytes = limit;
    vr = verify(out_spec, VerifyOptions{});
  }
  int exit = 0;
  if (r.status == SynthStatus::kInfeasible) exit = kExitMemory;
  else if (r.status == SynthStatus::kUnknown) exit = kExitInconclusive;
  else if (!vr || vr->exit_code != 0) exit = kExitInternal;
  if (exit == 0 && a.require_optimal && r.status != SynthStatus::kOptimal) exit = kExitInconclusive;

  std::vector<OutputFile> outputs;  // all or none
  if (r.has_schedule && a.output) outputs.push_back({"--output", *a.output, synth_yaml(*spec, r, limit)});
  if (r.has_schedule && a.csv) outputs.push_back({"--csv", *a.csv, write_csv_schedule(r.actions)});
  if (!outputs.empty() && !write_outputs(outputs, {a.file})) return exit != 0 ? exit : kExitUsage;

  double gap = r.best_s > 0 ? (r.best_s - r.lower_bound_s) / r.best_s : 0;
  if (a.format == "json") {
    nlohmann::json j;
    j["status"] = synth_status_name(r.status);
    j["exit_code"] = exit;
    j["objective"] = what;
    j["units"] = "s";
    j["limit_bytes"] = limit ? nlohmann::json(*limit) : nlohmann::json(nullptr);
    if (r.has_schedule) j["best"] = r.best_s;
    else j["best"] = nullptr;
    j["lower_bound"] = r.lower_bound_s;
    j["structural_lower_bound"] = r.structural_lower_bound_s;
    j["closed_form_lower_bound"] = r.closed_form_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.closed_form_lower_bound_s);
    j["closed_form_source"] = r.closed_form_source;
    j["gap"] = r.has_schedule ? nlohmann::json(gap) : nlohmann::json(nullptr);
    j["source"] = r.source;
    j["warm_start"] = r.warm_start.empty() ? nlohmann::json(nullptr) : nlohmann::json({{"name", r.warm_start}, {"value", r.warm_start_s}});
    j["core"] = r.core;
    j["message"] = r.message;
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& p : r.probes)
      probes.push_back({{"bound", p.bound_s < 0 ? nlohmann::json(nullptr) : nlohmann::json(p.bound_s)}, {"answer", p.answer}, {"seconds", p.seconds}});
    j["probes"] = probes;
    j["stats"] = {{"variables", r.variables}, {"order_booleans", r.order_booleans}, {"constraints", r.constraints},
                  {"solver_seconds", r.solver_seconds}, {"time_unit_s", r.time_unit_s}};
    if (r.has_schedule) {
      nlohmann::json acts = nlohmann::json::object();
      for (size_t k = 0; k < r.actions.size(); ++k) {
        std::string line;
        for (const auto& st : r.actions[k]) line += (line.empty() ? "" : " ") + format_step(st);
        acts[std::to_string(k)] = line;
      }
      j["actions"] = acts;
      j["verify"] = json_report_value(*vr);
    }
    std::cout << j.dump(2) << "\n";
    return exit;
  }

  const std::string gap_note =
      r.status == SynthStatus::kFeasible ? fmt::format(", gap {:.2f}% (not proven optimal)", 100 * gap) : "";
  std::cout << fmt::format("{}: {} {}{} ({}, {}, {}, {} backward; limit {})\n", spec->path,
                           synth_status_name(r.status), what, gap_note, format_count(spec->ranks, "rank"),
                           format_count(spec->stages, "stage"), format_count(spec->microbatches, "microbatch", "microbatches"),
                           r.split_backward ? "split I/W" : "full B",
                           limit ? fmt::format("{} B per rank", *limit) : std::string("none"));
  switch (r.status) {
    case SynthStatus::kOptimal:
      std::cout << fmt::format("  optimal {} {}: no schedule within the limit does better (proven)\n", what,
                               format_duration(r.best_s));
      break;
    case SynthStatus::kFeasible:
      std::cout << fmt::format("  best {} {}, proven lower bound {}, gap {:.2f}%\n", what, format_duration(r.best_s),
                               format_duration(r.lower_bound_s), 100 * gap);
      break;
    case SynthStatus::kInfeasible: {
      std::string core;
      for (const auto& c : r.core) core += (core.empty() ? "" : ", ") + c;
      std::cout << "  no schedule fits the memory limit (proven)" << (core.empty() ? "" : "; unsat core: " + core) << "\n";
      break;
    }
    case SynthStatus::kUnknown:
      std::cout << fmt::format("  inconclusive: {}; ", r.message.empty() ? "the solver stopped without an answer" : r.message);
      if (r.has_schedule) std::cout << fmt::format("best {} {}, ", what, format_duration(r.best_s));
      std::cout << fmt::format("proven lower bound {}\n", format_duration(r.lower_bound_s));
      break;
  }
  if (!r.warm_start.empty())
    std::cout << fmt::format("  warm start: {} ({} {})\n", r.warm_start, what, format_duration(r.warm_start_s));
  std::cout << fmt::format("  structural lower bound: {} (work per rank, first microbatch's critical path)\n",
                           format_duration(r.structural_lower_bound_s));
  if (!r.closed_form_source.empty() && r.status != SynthStatus::kInfeasible)
    std::cout << fmt::format("  memory-aware lower bound: {} ({})\n", format_duration(r.closed_form_lower_bound_s),
                             r.closed_form_source);
  else if (r.status == SynthStatus::kInfeasible && !r.message.empty())
    std::cout << fmt::format("  proof: {}\n", r.message);
  for (const auto& p : r.probes) {
    if (p.bound_s < 0) std::cout << fmt::format("  probe: any schedule within the limit? {} ({:.3f} s)\n", p.answer, p.seconds);
    else std::cout << fmt::format("  probe: {} <= {}? {} ({:.3f} s)\n", what, format_duration(p.bound_s), p.answer, p.seconds);
  }
  std::cout << fmt::format("  stats: {} variables ({} order booleans), {} constraints, solver {:.3f} s, time unit {}\n",
                           r.variables, r.order_booleans, r.constraints, r.solver_seconds, format_duration(r.time_unit_s));
  if (r.has_schedule) {
    const Timeline* t = vr->timeline ? &*vr->timeline : nullptr;
    std::cout << fmt::format("schedule ({}; verify: {})\n", r.source, vr->verdict());
    if (t) {
      int64_t peak = *std::max_element(vr->worst_case->bytes_per_rank.begin(), vr->worst_case->bytes_per_rank.end());
      std::cout << fmt::format("  span {}, makespan {}, bubble rate {:.4f}, worst-case peak {} B\n",
                               format_duration(t->span_s), format_duration(t->makespan_s), t->bubble_rate, peak);
    }
    for (size_t k = 0; k < r.actions.size(); ++k) {
      std::string line;
      for (const auto& st : r.actions[k]) line += (line.empty() ? "" : " ") + format_step(st);
      std::cout << fmt::format("  {}: \"{}\"\n", k, line);
    }
  }
  return exit;
}

}  // namespace

Command add_synth(CLI::App& parent) {
  auto a = std::make_shared<SynthArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "synth", "Search for the pipeline order with the least span (or makespan) within the memory limit, with Z3.\n"
               "Reports optimal (the next better value proven impossible), feasible (best value, proven lower\n"
               "bound and gap) or infeasible (no order fits the limit). The spec gives ranks, placement,\n"
               "microbatches, costs, p2p latency and memory; its schedule is one more warm start.\n"
               "Exit codes: 0 optimal or feasible; 13 infeasible; 5 inconclusive (time or resource limit, or not proven\n"
               "optimal with --require-optimal).\n"
               "  schedcheck synth examples/synth-p4-m8.yaml --memory-limit 10");
  cmd->add_option("spec", a->file, "YAML spec giving ranks, placement, microbatches, costs, p2p and memory")->required();
  cmd->add_option("--objective", a->objective, "span (per rank, the ZB paper's) or makespan")
      ->check(CLI::IsMember({"span", "makespan"}));
  cmd->add_option("--time-limit", a->time_limit, "wall-clock limit for the search, e.g. 120s (default)");
  cmd->add_option("--rlimit", a->rlimit, "Z3 resource limit per solver call (repeatable effort; 0 = none)");
  cmd->add_option("--seed", a->seed, "Z3 random seed (default 0)");
  cmd->add_option("--ranks", a->shape.ranks, "pipeline ranks, replacing the spec's (its per-stage values must be uniform)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--stages", a->shape.stages, "stages, replacing the spec's (default: the spec's stages per rank)")
      ->check(CLI::Range(1, 8192));
  cmd->add_option("--microbatches", a->shape.microbatches, "microbatches, replacing the spec's")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--memory-limit", a->limit, "bytes per rank, overriding memory.limit_bytes (e.g. 10, 24GiB)");
  cmd->add_option("--format", a->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("-o,--output", a->output, "write the schedule as a spec (YAML, with the model) to FILE");
  cmd->add_option("--csv", a->csv, "write the schedule as a PyTorch compute-only CSV to FILE");
  cmd->add_flag("--no-warm-start", a->no_warm_start, "do not start from the best named schedule");
  cmd->add_flag("--no-closed-form-bounds", a->no_closed_form,
                "do not use the closed-form memory-aware bounds B1-B3 (the solver must prove optimality alone)");
  cmd->add_flag("--require-optimal", a->require_optimal,
                "exit 5 unless the result is proven optimal (a feasible result with a gap fails, for CI)");
  return {cmd, [a] { return run_synth(*a); }};
}

}  // namespace sc::cli
