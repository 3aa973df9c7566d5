// `schedcheck synth`: search for the order with the least span (or makespan) under a memory limit.
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipeline/verify_pipeline.h"
#include "cli/common.h"
#include "cli/config_cmd.h"
#include "cli/frontends.h"
#include "cli/progress.h"
#include "cli/synth_job.h"
#include "config/file_facts.h"
#include "report/report.h"
#include "solver/synth.h"
#include "spec/csv_schedule.h"
#include "support/units.h"

namespace sc::cli {
namespace {

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
  std::optional<std::string> phase;  ///< --phase: the training phase of a `phases:` spec to order
  config::JobContext job;        ///< framework configs: --gpus, --model, --hardware, --efficiency
  std::optional<std::string> emit;  ///< framework configs: the job config that runs the schedule
  bool no_split = false;         ///< framework configs: keep the config's layer split
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

/// One row of the config comparison, for text.
std::string job_row(const JobSchedule& s) {
  const std::string split =
      s.job.framework == "torchtitan" ? fmt::format("{}/{}", s.job.input_weight, s.job.output_weight) : "-";
  std::string head = fmt::format("  {:<22} {:<9} {:<6}", s.label, s.placement(), split);
  std::string search;
  if (s.synth) {
    const SynthResult& r = *s.synth;
    if (r.status == SynthStatus::kOptimal)
      search = fmt::format("optimal span {} (proven)", format_duration(r.best_s));
    else if (r.has_schedule)
      search = fmt::format("span {}, bound {}, gap {:.1f}%", format_duration(r.best_s), format_duration(r.lower_bound_s),
                           r.best_s > 0 ? 100 * (r.best_s - r.lower_bound_s) / r.best_s : 0.0);
    else
      search = synth_status_name(r.status);
  }
  if (!s.ran) return head + fmt::format(" not run: {}{}\n", s.why, search.empty() ? "" : " (" + search + ")");
  const config::JobPrediction& p = s.verified.prediction;
  const std::vector<int64_t>& sl = s.verified.lowered.costs.stage_layers;
  const std::string blocks =
      sl.size() <= 8 ? fmt::format("{}", fmt::join(sl, ","))
                     : fmt::format("{},{},{},…,{},{} ({})", sl[0], sl[1], sl[2], sl[sl.size() - 2], sl.back(), sl.size());
  if (!p.complete)
    return head + fmt::format(" {:<18} {}: {}\n", blocks, s.verified.result.verdict(), search);
  return head + fmt::format(" {:<18} {:>10} {:>7.4f} {:>10} {:>6.1f}%  {}{}\n", blocks, format_duration(p.step_s),
                            p.bubble_rate, format_bytes(static_cast<double>(p.need_bytes())),
                            100 * p.mfu,
                            s.over_memory              ? "over the memory: " + s.why + "; "
                            : s.holds()                ? ""
                                                       : s.verified.result.verdict() + "; ",
                            search.empty() ? "named" : search);
}

/// `synth CONFIG`: the named schedules and synthesised orders of a framework config, compared.
int run_synth_config(const SynthArgs& a, const std::string& framework) {
  if (framework != "torchtitan" && framework != "megatron") {
    std::cerr << "schedcheck: error: synth takes pipeline specs, torchtitan TOML configs and Megatron-LM launch "
                 "scripts; " << a.file << " is a " << framework << " config, whose pipeline runs its own schedule\n";
    return kExitUsage;
  }
  if (a.emit && framework != "torchtitan") {
    std::cerr << "schedcheck: error: --emit writes a torchtitan job config; Megatron-LM runs only its named schedules "
                 "(--emit-csv still writes the order as PyTorch's CSV)\n";
    return kExitUsage;
  }
  if (a.output || a.shape.ranks || a.shape.stages || a.shape.microbatches) {
    std::cerr << "schedcheck: error: --output, --ranks, --stages and --microbatches take pipeline specs; a config's "
                 "shape is its own (write the schedule with --emit-csv and --emit)\n";
    return kExitUsage;
  }
  if (std::string problem = check_output_paths({{"--emit-csv", a.csv}, {"--emit", a.emit}}, {a.file}); !problem.empty()) {
    std::cerr << "schedcheck: error: " << problem << "\n";
    return kExitUsage;
  }
  if (a.emit && !a.csv) {
    std::cerr << "schedcheck: error: --emit writes a config that names the schedule's CSV: give --emit-csv too\n";
    return kExitUsage;
  }
  Diagnostics diags;
  config::TrainingJob job;
  if (!read_config_job(a.file, a.job, &job, diags)) return report_spec_errors(diags);
  JobSynthOptions opt;
  std::string why;
  auto tl = parse_duration_s(a.time_limit, &why);
  if (!tl || *tl <= 0) {
    std::cerr << "schedcheck: error: --time-limit: " << (why.empty() ? "must be positive" : why) << "\n";
    return kExitUsage;
  }
  opt.synth.time_limit_s = *tl;
  opt.synth.rlimit = a.rlimit;
  opt.synth.seed = a.seed;
  opt.synth.objective = a.objective == "makespan" ? SynthObjective::kMakespan : SynthObjective::kSpan;
  opt.synth.warm_start = !a.no_warm_start;
  opt.synth.closed_form_bounds = !a.no_closed_form;
  opt.search_split = !a.no_split;
  if (a.limit && *a.limit == "hbm") {
    opt.match_named = false;
  } else if (a.limit) {
    auto b = parse_bytes(*a.limit, &why);
    if (!b) {
      std::cerr << "schedcheck: error: --memory-limit: " << why << " (or hbm)\n";
      return kExitUsage;
    }
    opt.memory_bytes = *b;
  }
  JobSynthResult res;
  if (!synthesize_job(job, a.job, opt, &res, diags)) return report_spec_errors(diags);

  const JobSchedule* best = res.best_synth >= 0 ? &res.schedules[res.best_synth] : nullptr;
  const JobSchedule* named = res.best_named >= 0 ? &res.schedules[res.best_named] : nullptr;
  bool all_infeasible = true;
  for (const JobSchedule& s : res.schedules)
    if (s.synthesised && (!s.synth || s.synth->status != SynthStatus::kInfeasible)) all_infeasible = false;
  int exit = best ? (res.all_optimal ? 0 : kExitInconclusive) : all_infeasible ? kExitMemory : kExitInconclusive;
  if (exit == 0 && a.require_optimal && !res.all_optimal) exit = kExitInconclusive;

  // The order to hand back: the best synthesised one, unless a named schedule is as fast (the
  // search found nothing shorter): then the framework runs that schedule by name, with no CSV.
  const bool named_best = best && named && best->verified.prediction.step_s >= named->verified.prediction.step_s &&
                          named->verified.prediction.need_bytes() <= res.memory_bytes;
  const JobSchedule* handed = named_best ? named : best;
  std::vector<OutputFile> outputs;
  std::string emit_problem;
  if (handed && a.csv && !named_best)
    outputs.push_back({"--emit-csv", *a.csv, write_csv_schedule(best->job.schedule_actions)});
  if (handed && a.emit) {
    std::string text, rwhy;
    if (!read_input_file(a.file, &text, &rwhy)) emit_problem = rwhy;
    else if (std::string toml = torchtitan_synth_toml(text, *handed, named_best ? std::string() : *a.csv, &emit_problem);
             !toml.empty())
      outputs.push_back({"--emit", *a.emit, toml});
  }
  if (!emit_problem.empty()) {
    std::cerr << "schedcheck: error: --emit: " << emit_problem << "; nothing written\n";
    return kExitUsage;
  }
  if (!outputs.empty() && !write_outputs(outputs, {a.file})) return kExitUsage;

  const double gain = best && named ? 1 - best->verified.prediction.step_s / named->verified.prediction.step_s : 0;
  if (a.format == "json") {
    nlohmann::json rows = nlohmann::json::array();
    for (const JobSchedule& s : res.schedules) {
      nlohmann::json r = {{"label", s.label}, {"torchtitan_class", s.torch_name}, {"synthesised", s.synthesised},
                          {"placement", s.placement()}, {"stages_per_rank", s.job.stages_per_rank},
                          {"ran", s.ran}, {"holds", s.holds()}};
      if (s.job.framework == "torchtitan")
        r["split"] = {{"input_weight", s.job.input_weight}, {"output_weight", s.job.output_weight}};
      if (!s.ran) r["why"] = s.why;
      if (s.ran) {
        const config::JobPrediction& p = s.verified.prediction;
        r["verdict"] = s.verified.result.verdict();
        r["exit_code"] = s.verified.exit_code;
        r["stage_layers"] = s.verified.lowered.costs.stage_layers;
        r["step_s"] = p.complete ? nlohmann::json(p.step_s) : nlohmann::json(nullptr);
        r["bubble_rate"] = p.bubble_rate;
        r["peak_bytes"] = p.need_bytes();
        r["mfu"] = p.mfu;
      }
      r["search_objective_s"] = s.search_objective_s >= 0 ? nlohmann::json(s.search_objective_s) : nlohmann::json(nullptr);
      if (s.synth) {
        const SynthResult& x = *s.synth;
        r["search"] = {{"status", synth_status_name(x.status)},
                       {"objective", a.objective},
                       {"best_s", x.has_schedule ? nlohmann::json(x.best_s) : nlohmann::json(nullptr)},
                       {"lower_bound_s", x.lower_bound_s},
                       {"limit_bytes", s.synth_limit_bytes},
                       {"solver_seconds", x.solver_seconds}};
      }
      rows.push_back(r);
    }
    nlohmann::json j = {{"file", a.file},
                        {"exit_code", exit},
                        {"units", {{"time", "s"}, {"memory", "bytes"}}},
                        {"schedules", rows},
                        {"best_named", res.best_named >= 0 ? nlohmann::json(res.best_named) : nlohmann::json(nullptr)},
                        {"best_synthesised", res.best_synth >= 0 ? nlohmann::json(res.best_synth) : nlohmann::json(nullptr)},
                        {"all_optimal", res.all_optimal},
                        {"lower_bound_s", res.lower_bound_s >= 0 ? nlohmann::json(res.lower_bound_s) : nlohmann::json(nullptr)},
                        {"gain_over_best_named", best && named ? nlohmann::json(gain) : nlohmann::json(nullptr)}};
    j["handed_back"] = handed == nullptr ? nlohmann::json(nullptr)
                                         : nlohmann::json({{"schedule", handed->label},
                                                           {"named", named_best},
                                                           {"torchtitan_class", handed->torch_name}});
    nlohmann::json written = nlohmann::json::object();
    for (const OutputFile& f : outputs) written[f.option.substr(2)] = f.path;
    j["written"] = written;
    std::cout << j.dump(2) << "\n";
    return exit;
  }
  const model::HardwareDesc* hw = nullptr;
  for (const JobSchedule& s : res.schedules)
    if (s.ran) hw = &s.verified.lowered.costs.hardware;
  std::cout << fmt::format("{}: {} {} on {} GPUs{}; pp {}, {} microbatches of {} sequence{}; searched by {} per placement "
                           "and split\n",
                           a.file, job.framework, job.model.empty() ? a.job.model : job.model,
                           job.world > 0 ? job.world : job.layout.world(), hw ? " × " + hw->name : std::string(),
                           job.layout.pp, job.microbatches, job.microbatch_sequences,
                           job.microbatch_sequences > 1 ? "s" : "", a.objective);
  std::cout << fmt::format("  memory per rank for the searches: {} ({}), model states included\n",
                           format_bytes(static_cast<double>(res.memory_bytes)),
                           res.memory_source == "HBM" || res.memory_source == "--memory-limit"
                               ? res.memory_source
                               : "the peak of " + res.memory_source + ", the fastest named schedule: equal memory");
  std::cout << fmt::format("  {:<22} {:<9} {:<6} {:<18} {:>10} {:>7} {:>10} {:>7}  {}\n", "schedule", "placement", "split",
                           "blocks per stage", "step", "bubble", "peak/rank", "MFU", "search");
  for (const JobSchedule& s : res.schedules) std::cout << job_row(s);
  std::cout << (job.framework == "torchtitan"
                    ? "  split: torchtitan's first/last stage weights (pipeline_parallel_first/last_stage_less_layers); "
                    : "  split: the config's layer split (searching Megatron-LM's is not done); ")
            << "peak/rank: the larger of the timeline's and the worst case's\n";
  if (named)
    std::cout << fmt::format("best named: {} ({}), step {}, peak {}\n", named->label, named->placement(),
                             format_duration(named->verified.prediction.step_s),
                             format_bytes(static_cast<double>(named->verified.prediction.need_bytes())));
  else
    std::cout << "best named: none holds on this config\n";
  if (best) {
    const auto peak = [](const JobSchedule& s) { return s.verified.prediction.need_bytes(); };
    std::cout << fmt::format("best synthesised: {}{}, step {}{}, peak {}{}\n", best->placement(),
                             job.framework == "torchtitan"
                                 ? fmt::format(" {}/{}", best->job.input_weight, best->job.output_weight)
                                 : std::string(),
                             format_duration(best->verified.prediction.step_s),
                             named ? fmt::format(" ({:+.1f}% against {})", -100 * gain, named->label) : "",
                             format_bytes(static_cast<double>(peak(*best))),
                             named ? fmt::format(" ({} {})", peak(*best) <= peak(*named) ? "at or below" : "above",
                                                 format_bytes(static_cast<double>(peak(*named))))
                                   : "");
  } else {
    std::cout << "best synthesised: none (see the rows above)\n";
  }
  if (named && named->search_objective_s > 0 && res.lower_bound_s > 0) {
    const double room = 1 - res.lower_bound_s / named->search_objective_s;
    std::cout << fmt::format("bound: no order of these placements and splits within the memory has a {} below {} "
                             "(proven); {}'s is {}, so none is more than {:.1f}% shorter\n",
                             a.objective, format_duration(res.lower_bound_s), named->label,
                             format_duration(named->search_objective_s), std::max(0.0, 100 * room));
  }
  else if (named && res.lower_bound_s <= 0 && !all_infeasible)
    std::cout << "bound: none over every search (one stopped before its first bound: give it more --time-limit)\n";
  if (best && res.all_optimal)
    std::cout << fmt::format("result: every search proved its {}: no order of these placements and splits has a "
                             "shorter one within its memory limit (exit 0)\n", a.objective);
  else if (best)
    std::cout << fmt::format("result: a search ended before its proof (gaps in the rows above); the best order is "
                             "reported, not proven (exit 5)\n");
  else
    std::cout << fmt::format("result: no synthesised order holds (exit {})\n", exit);
  if (named_best && (a.csv || a.emit))
    std::cout << fmt::format("use {}: no synthesised order is shorter than this named schedule, which {} runs by "
                             "name{}\n",
                             named->label, job.framework == "torchtitan" ? "torchtitan" : "Megatron-LM",
                             a.csv ? fmt::format("; {} not written", *a.csv) : "");
  for (const OutputFile& f : outputs) std::cout << fmt::format("wrote {} ({})\n", f.path, f.option);
  if (a.emit && std::any_of(outputs.begin(), outputs.end(), [](const OutputFile& f) { return f.option == "--emit"; })) {
    // The facts the command line gave, which the emitted file (edited only at its schedule keys)
    // may not state itself.
    std::string facts, text, rwhy;
    config::FileFacts stated;
    if (read_input_file(*a.emit, &text, &rwhy)) {
      Diagnostics quiet;
      stated = config::read_file_facts(register_source(*a.emit, text), text, true, quiet);
    }
    if (a.job.gpus > 0 && stated.gpus == 0) facts += fmt::format(" --gpus {}", a.job.gpus);
    if (!a.job.hardware.empty() && stated.hardware.empty()) facts += " --hardware " + a.job.hardware;
    if (!a.job.model.empty() && stated.model.empty()) facts += " --model " + a.job.model;
    std::cout << fmt::format("check it: schedcheck verify {}{}\n", *a.emit, facts);
  }
  return exit;
}

int run_synth(const SynthArgs& a) {
  if (const std::string fe = front_end_for(a.file).name; fe == "torchtitan" || fe == "megatron" || fe == "deepspeed")
    return run_synth_config(a, fe);
  if (a.emit) {
    std::cerr << "schedcheck: error: --emit writes a torchtitan job config: it takes a torchtitan config (for a "
                 "spec, -o writes the schedule as a spec)\n";
    return kExitUsage;
  }
  if (a.no_split || a.job.gpus > 0 || !a.job.model.empty() || !a.job.hardware.empty() || a.job.efficiency > 0) {
    std::cerr << "schedcheck: error: --keep-split, --gpus, --model, --hardware and --efficiency take framework "
                 "configs; a spec gives its costs and shape itself\n";
    return kExitUsage;
  }
  if (a.phase && a.shape.microbatches) {
    std::cerr << "schedcheck: error: --microbatches and --phase: the phase gives the microbatch count (change it in "
                 "the spec's phases:)\n";
    return kExitUsage;
  }
  Diagnostics diags;
  auto spec = load_spec(a.file, std::nullopt, diags, /*schedule_optional=*/true, a.shape);
  int32_t first_id = 0;
  if (!spec || !narrow_to_phase(*spec, a.phase, "synth", diags, &first_id)) return report_spec_errors(diags);
  if (first_id > 0)
    std::cerr << fmt::format("schedcheck: note: phase {}: microbatch ids below count from 0 at the phase's first id, "
                             "{}\n", *a.phase, first_id);
  // synth orders compute with a message to the neighbouring stage only: a skip connection in
  // the given schedule (`0SEND_F0>2`) is not in its model, and is said so rather than dropped.
  const Step* skip = nullptr;
  for (const auto& row : spec->actions)
    for (const Step& st : row)
      if (st.peer_stage >= 0 && !skip) skip = &st;
  if (skip)
    std::cerr << fmt::format("schedcheck: note: {} at {} is a skip connection; synth models messages between "
                             "neighbouring stages only, so the schedules it finds leave it (and its latency) out: "
                             "add it back and check the result with verify\n",
                             format_step(*skip), format_loc(skip->loc));
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
               "On a framework config (torchtitan, Megatron-LM) it compares every named schedule the framework runs\n"
               "with the orders it synthesises per placement (loop, interleaved, V) and layer split, each verified as\n"
               "the composed program (step, bubble, peak, MFU); exit 0 when every search is proven optimal, 5 with a\n"
               "gap. --emit-csv and --emit hand the fastest to torchtitan:\n"
               "  schedcheck synth examples/synth-p4-m8.yaml --memory-limit 10\n"
               "  schedcheck synth examples/torchtitan-llama3-8b-pp2.toml --gpus 64 --hardware a100 \\\n"
               "      --emit-csv synth.csv --emit synth.toml");
  cmd->add_option("spec", a->file,
                  "YAML spec giving ranks, placement, microbatches, costs, p2p and memory; or a torchtitan TOML / "
                  "Megatron-LM launch script with pipeline parallelism, whose costs come from the cost model")
      ->required();
  cmd->add_option("--objective", a->objective, "span (per rank, the ZB paper's) or makespan")
      ->check(one_of({"span", "makespan"}));
  cmd->add_option("--time-limit", a->time_limit, "wall-clock limit for the search, e.g. 120s (default)");
  cmd->add_option("--rlimit", a->rlimit, "Z3 resource limit per solver call (repeatable effort; 0 = none)");
  cmd->add_option("--seed", a->seed, "Z3 random seed (default 0)");
  cmd->add_option("--ranks", a->shape.ranks, "pipeline ranks, replacing the spec's (its per-stage values must be uniform)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--stages", a->shape.stages, "stages, replacing the spec's (default: the spec's stages per rank)")
      ->check(CLI::Range(1, 8192));
  cmd->add_option("--microbatches", a->shape.microbatches, "microbatches, replacing the spec's")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--phase", a->phase,
                  "for a spec with phases: (a training step, then an evaluation), the training phase to order, by "
                  "name or position from 1 (its microbatches alone are ordered, renumbered from 0)");
  cmd->add_option("--memory-limit", a->limit,
                  "bytes per rank, overriding memory.limit_bytes (e.g. 10, 24GiB); for a config, the memory the "
                  "synthesised orders may use (default: the fastest named schedule's peak; hbm: the GPU's)");
  cmd->add_option("--format", a->format, "text or json")->check(one_of({"text", "json"}));
  cmd->add_option("-o,--output", a->output, "write the schedule as a spec (YAML, with the model) to FILE");
  cmd->add_option("--csv,--emit-csv", a->csv,
                  "write the schedule (a config's: the fastest synthesised one) as a PyTorch compute-only CSV to FILE, "
                  "as _PipelineScheduleRuntime._load_csv reads it");
  cmd->add_option("--emit", a->emit,
                  "torchtitan configs: write the job config that runs the fastest synthesised schedule to FILE (the "
                  "config with pipeline_parallel_schedule_csv naming the --emit-csv file, relative to where torchtitan "
                  "is launched)");
  cmd->add_option("--gpus", a->job.gpus, "framework configs: the world size, when the config does not fix it")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--model", a->job.model, "framework configs: the model preset, when the config names none");
  cmd->add_option("--hardware", a->job.hardware,
                  "framework configs: the GPU preset (default: the config's comment, else h100)");
  cmd->add_option("--efficiency", a->job.efficiency,
                  "framework configs: achieved fraction of peak FLOP/s of the largest GEMMs (default: the GPU preset's)")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_flag("--keep-split", a->no_split,
                "framework configs: search only the config's layer split (default: also the split that balances the "
                "busiest rank)");
  cmd->add_flag("--no-warm-start", a->no_warm_start, "do not start from the best named schedule");
  cmd->add_flag("--no-closed-form-bounds", a->no_closed_form,
                "do not use the closed-form memory-aware bounds B1-B3 (the solver must prove optimality alone)");
  cmd->add_flag("--require-optimal", a->require_optimal,
                "exit 5 unless the result is proven optimal (a feasible result with a gap fails, for CI)");
  return {cmd, [a] { return run_synth(*a); }};
}

}  // namespace sc::cli
