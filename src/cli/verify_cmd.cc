// `schedcheck verify`: check schedules and predict their timeline.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipeline/verify_pipeline.h"
#include "cli/ci_verify.h"
#include "cli/common.h"
#include "cli/config_cmd.h"
#include "model/cost_model.h"
#include "cli/frontends.h"
#include "report/ci_report.h"
#include "report/report.h"
#include "solver/smt_engine.h"
#include "support/units.h"

namespace sc::cli {

namespace {

struct VerifyArgs {
  std::vector<std::string> files;
  std::string format = "text";
  std::optional<std::string> semantics;
  std::optional<std::string> placement;
  std::optional<std::string> blocking;
  std::optional<std::string> lower;
  std::optional<std::string> trace;
  std::optional<std::string> dot;
  std::optional<std::string> svg;
  bool min_cut = false;
  bool trace_all_ranks = false;
  bool forward_only = false;
  size_t timeline_ops = 400;
  std::string engine = "graph";
  config::JobContext job;  ///< --gpus, --model, --hardware (framework configs)
  std::optional<std::string> junit;
  std::vector<std::string> budgets;  ///< --budget KEY=VALUE
  std::vector<std::string> env;      ///< --env NAME=VALUE (launch scripts), parsed into job.env
  bool recorded = false;             ///< one file of a recorded run (ci_verify.h)
  std::optional<std::string> time_limit;  ///< wall clock of the solver (--engine smt, router proofs)
  uint64_t rlimit = 0;                     ///< Z3 resource limit per solver check; 0 = the default
};

int run_verify(const VerifyArgs& a, ReportSink& sink);

/// The first problem with the output paths (--trace, --dot, --svg, --junit): check_output_path
/// on each, and no two the same. Empty when they are fine.
std::string output_problem(const VerifyArgs& a) {
  return check_output_paths({{"--trace", a.trace}, {"--dot", a.dot}, {"--svg", a.svg}, {"--junit", a.junit}}, a.files);
}

/// Files of several kinds: each is checked on its own by its front-end, in the order given,
/// into one sink: text reports follow one another, JSON is one list with an entry per file (a
/// file whose spec has errors is {path, exit_code: 2, verdict: "error"} plus its diagnostics).
/// The exit code combines the files' as for one kind.
int run_mixed(const VerifyArgs& a, ReportSink& sink) {
  int exit = 0;
  for (size_t i = 0; i < a.files.size(); ++i) {
    VerifyArgs one = a;
    one.files = {a.files[i]};
    const size_t before = sink.values().size();
    const int code = run_verify(one, sink);
    exit = combine_exit(exit, code);
    if (sink.values().size() == before)  // a run that stopped before any report (a usage error)
      sink.add({{"exit_code", code}, {"verdict", code == kExitSpec ? "error" : "violated"}});
    nlohmann::json& entry = sink.values().back();
    if (!entry.contains("exit_code")) entry["exit_code"] = code;
    if (!entry.contains("verdict")) entry["verdict"] = code == kExitSpec ? "error" : "violated";
    entry["path"] = a.files[i];
    if (code == kExitSpec && sink.wants_text()) {  // the file's line in the text, as each other file has its report
      const std::string first = first_error_of(entry);
      sink.text() << a.files[i] << ": ERROR: " << (first.empty() ? "it could not be checked (see above)" : first)
                  << " (exit " << code << ")\n";
    }
  }
  return exit;
}

/// One message for an input that cannot be read, whichever front-end its name points to
/// ("FILE: error: cannot read FILE: no such file"); kExitSpec after printing it, else 0.
int unreadable_input(const std::string& file, ReportSink& sink) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  std::string why;
  if (!fs::exists(st)) why = ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file";
  else if (fs::is_directory(st)) why = "it is a directory";
  if (why.empty()) return 0;
  Diagnostics d;
  d.error(SourceLoc{register_source(file, ""), 0, 0}, fmt::format("cannot read {}: {}", file, why));
  sink.add(diagnostics_value(d));
  return report_spec_errors(d);
}

int run_verify(const VerifyArgs& a_in, ReportSink& sink) {
  VerifyArgs parsed = a_in;
  parsed.env.clear();  // moved into job.env once: runs for single files below start from `parsed`
  if (std::string problem = parse_env(a_in.env, &parsed.job); !problem.empty()) {
    std::cerr << "schedcheck: error: " << problem << "\n";
    return kExitUsage;
  }
  const VerifyArgs& a = parsed;
  // Every option must apply to every file it is given with (never silently ignored).
  const std::vector<std::pair<const char*, bool>> given = {
      {"--semantics", a.semantics.has_value()}, {"--placement", a.placement.has_value()},
      {"--blocking", a.blocking.has_value()},   {"--lower", a.lower.has_value()},
      {"--trace", a.trace.has_value()},         {"--dot", a.dot.has_value()},
      {"--svg", a.svg.has_value()},             {"--memory-min-cut", a.min_cut},
      {"--engine smt", a.engine == "smt"},      {"--forward-only", a.forward_only},
      {"--gpus", a.job.gpus > 0},                {"--model", !a.job.model.empty()},
      {"--hardware", !a.job.hardware.empty()},  {"--seq-len", a.job.seq_len > 0},
      {"--efficiency", a.job.efficiency > 0},
      {"--micro-batch-size", a.job.micro_batch_size > 0}, {"--grad-accum", a.job.grad_accum > 0},
      {"--tp", a.job.tp > 0}, {"--pp", a.job.pp > 0},
      {"--env", !a.job.env.empty()},
      {"--budget", !a.budgets.empty()},
      {"--time-limit", a.time_limit.has_value()}, {"--rlimit", a.rlimit > 0}};
  for (const auto& f : a.files) {
    const FrontEnd& fe = front_end_for(f);
    for (const auto& [option, on] : given)
      if (on && std::find(fe.options.begin(), fe.options.end(), option) == fe.options.end()) {
        std::cerr << fmt::format("schedcheck: error: {} does not apply to {}, one of the {}\n", option, f, fe.what);
        return kExitUsage;
      }
  }
  for (const auto& f : a.files)
    if ((a.time_limit || a.rlimit > 0) && a.engine != "smt" && std::string(front_end_for(f).name) != "router") {
      std::cerr << fmt::format("schedcheck: error: --time-limit and --rlimit bound a solver: they apply to --engine smt "
                               "and to router specs, not to {} checked by the graph engine\n", f);
      return kExitUsage;
    }
  if ((a.trace || a.dot || a.svg) && a.files.size() != 1) {
    std::cerr << "schedcheck: error: --trace, --dot and --svg take one input file\n";
    return kExitUsage;
  }
  if (std::string problem = output_problem(a); !problem.empty()) {
    std::cerr << "schedcheck: error: " << problem << "\n";
    return kExitUsage;
  }
  const RecordedOptions recorded{a.format, a.junit, a.budgets};
  if (!a.recorded && needs_recorded_run(a.files, recorded))
    return run_recorded(a.files, recorded, [&a](const std::string& file, ReportSink& one_sink) {
      VerifyArgs one = a;
      one.files = {file};
      one.format = one_sink.format();
      one.junit.reset();
      one.budgets.clear();
      one.recorded = true;
      return run_verify(one, one_sink);
    });
  // Several files: each is checked on its own, so that a file with errors is an entry of its own
  // (verdict "error" with its diagnostics) and the others are still checked.
  if (a.files.size() > 1) return run_mixed(a, sink);
  if (int code = unreadable_input(a.files.front(), sink)) return code;
  VerifyRequest q;
  q.semantics = a.semantics;
  q.placement = a.placement;
  q.blocking = a.blocking;
  q.lower = a.lower;
  q.trace = a.trace;
  q.dot = a.dot;
  q.svg = a.svg;
  q.min_cut = a.min_cut;
  q.trace_all_ranks = a.trace_all_ranks;
  q.forward_only = a.forward_only;
  q.timeline_ops = a.timeline_ops;
  q.engine = a.engine;
  q.job = a.job;
  q.rlimit = a.rlimit;
  if (a.time_limit) {
    std::string why;
    auto tl = parse_duration_s(*a.time_limit, &why);
    if (!tl || !(*tl > 0)) {
      std::cerr << "schedcheck: error: --time-limit: " << (why.empty() ? "must be positive" : why) << "\n";
      return kExitUsage;
    }
    q.time_limit_s = *tl;
  }
  return front_end_for(a.files.front()).run(a.files, q, sink);
}

/// The command's entry: every report goes to one sink, printed once the run is over.
int run_verify(const VerifyArgs& a) {
  ReportSink sink(std::cout, a.format, true, a.files.size() > 1);
  const int code = run_verify(a, sink);
  sink.finish();
  // Several files in text: one line that counts them (a recorded run prints its own).
  if (a.format == "text" && a.files.size() > 1 && !sink.values().empty())
    std::cout << "\n" << results_summary(nlohmann::json(sink.values()), code) << "\n";
  return code;
}

}  // namespace

/// The pipeline front-end's runner: loads every spec first (a spec error stops the run before
/// any report), then verifies each (and cross-checks with the SMT engine when asked).
int run_pipeline_verify(const std::vector<std::string>& files, const VerifyRequest& a, ReportSink& sink) {
  VerifyOptions opt;
  if (a.semantics) opt.semantics = parse_semantics(*a.semantics);  // validated by the option
  if (a.blocking) opt.blocking = *a.blocking == "whole-rank" ? BlockingModel::kWholeRank : BlockingModel::kCommStream;
  if (a.lower) opt.lower = *a.lower == "deferred" ? LowerPolicy::kDeferred : LowerPolicy::kPyTorch;
  opt.force_min_cut = a.min_cut;
  opt.keep_actions = false;  // only reported from here on
  std::vector<PipelineSpec> specs;
  std::vector<double> read_s;  // per spec: reading and parsing its files (the "read" pass)
  Diagnostics diags;
  for (const auto& f : files) {
    Diagnostics d;
    const auto t0 = std::chrono::steady_clock::now();
    auto spec = load_spec(f, a.placement, d);
    if (spec) read_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    diags.merge(d);
    if (spec && a.forward_only) spec->forward_only = true;
    if (spec) specs.push_back(std::move(*spec));
  }
  if (diags.has_errors()) {
    sink.add(diagnostics_value(diags));  // scripts get them as JSON too
    return report_spec_errors(diags);
  }
  diags.print(std::cerr);  // warnings
  for (const auto& spec : specs) {
    if (a.lower && spec.has_comms()) {  // refused, never silently ignored
      std::cerr << fmt::format("schedcheck: error: --lower adds SEND/RECV to a compute-only schedule, but {} already "
                               "has SEND/RECV actions; check it without --lower\n",
                               spec.path.empty() ? spec.name : spec.path);
      return kExitUsage;
    }
    // What `lower` refuses as its input (a collective), refused the same way (exit 2).
    if (std::string why = a.lower ? lowering_input_problem(spec.actions, spec.stage_to_rank) : ""; !why.empty()) {
      std::cerr << fmt::format("{}: error: cannot lower this schedule: {}\n", spec.path.empty() ? spec.name : spec.path,
                               why);
      return kExitSpec;
    }
  }
  // Now also the files the specs reference (a CSV, a router spec): never an output.
  if (std::string problem = check_output_paths({{"--trace", a.trace}, {"--dot", a.dot}, {"--svg", a.svg}}, files);
      !problem.empty()) {
    std::cerr << "schedcheck: error: " << problem << "\n";
    return kExitUsage;
  }
  int exit = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    VerifyResult r = verify(std::move(specs[i]), opt);  // not used after this
    r.pass_times.insert(r.pass_times.begin(), PassTime{"read", read_s[i]});
    if (a.engine == "smt") {
      std::string note;
      SmtOptions smt;
      smt.time_limit_s = a.time_limit_s.value_or(0);  // the SMT engine has no default limit
      smt.rlimit = a.rlimit;
      r.exit_code = apply_smt_engine(r, &note, smt);
      std::cerr << note << "\n";
    }
    exit = combine_exit(exit, r.exit_code);
    // The text report and the output files are made first, so that the JSON's per-pass table
    // and stats.seconds count them as the "report" pass (the JSON object itself is made last).
    const auto report_start = std::chrono::steady_clock::now();
    if (sink.wants_text()) write_text_report(sink.text(), r, a.timeline_ops);
    std::vector<OutputFile> outputs;  // all or none (an output that cannot be written keeps the verdict's exit code)
    if (a.trace) outputs.push_back({"--trace", *a.trace, chrome_trace(r, a.trace_all_ranks)});
    if (a.trace && a.trace_all_ranks) std::cerr << trace_all_ranks_note(r);
    if (a.dot) outputs.push_back({"--dot", *a.dot, dot_graph(r)});
    if (a.svg) outputs.push_back({"--svg", *a.svg, svg_timeline(r)});
    r.pass_times.push_back(
        PassTime{"report", std::chrono::duration<double>(std::chrono::steady_clock::now() - report_start).count()});
    sink.add(json_report_value(r));
    if (!outputs.empty() && !write_outputs(outputs, files)) return exit != 0 ? exit : kExitUsage;
  }
  return exit;
}

int verify_one_file(const std::string& file, ReportSink& sink, const config::JobContext& job) {
  VerifyArgs a;
  a.files = {file};
  a.format = sink.format();
  // Config facts go to the front-ends that take them (the table's options), no other.
  const std::vector<std::string>& takes = front_end_for(file).options;
  if (std::find(takes.begin(), takes.end(), "--gpus") != takes.end()) a.job = job;
  a.recorded = true;
  return run_verify(a, sink);
}

Command add_verify(CLI::App& parent) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "verify", "Check schedules and predict their timeline.\n"
                "  schedcheck verify examples/llama7b-pp8-1f1b.yaml\n"
                "  schedcheck verify schedule.csv --semantics eager --format json\n"
                "  schedcheck verify examples/fsdp2-llama3-8b.yaml      (FSDP / ZeRO-3 specs: a top-level fsdp: key)\n"
                "  schedcheck verify train.toml --gpus 64 --hardware h100  (torchtitan, Megatron-LM, DeepSpeed configs)\n"
                "  schedcheck verify deadlock.yaml --dot stuck.dot --trace timeline.json --svg timeline.svg");
  cmd->add_option("files", a->files, "YAML specs (.yaml: pipeline, composed (mesh:), fsdp: or router:), PyTorch schedule CSVs (.csv), torchtitan TOML, Megatron-LM launch scripts or DeepSpeed JSON configs, any mix: each file is checked by its own front-end; with several, the exit code is that of the files that do not hold when they share it, else 10")->required();
  cmd->add_option("--format", a->format,
                  "text (for people), json (one object per file, a list for several; schema/report.schema.json), "
                  "sarif (SARIF 2.1.0 for code scanning) or github (GitHub Actions annotations)")
      ->check(one_of({"text", "json", "sarif", "github"}));
  cmd->add_option("--junit", a->junit, "also write JUnit XML to this file: a test case per (file, property)");
  cmd->add_option("--budget", a->budgets,
                  "KEY=VALUE: fail (exit 18) when a figure exceeds VALUE; overrides the spec's budget: entry. Keys: "
                  "bubble_rate (0.05 or 5%), span, step_time, exposed_comm (durations), peak_bytes_per_rank, "
                  "worst_case_bytes_per_rank, comm_bytes (bytes), messages (a count)")
      ->allow_extra_args(false);
  add_semantics_option(cmd, a->semantics);
  cmd->add_option("--placement", a->placement,
                  "stage-to-rank placement of a CSV: loop, v, or ranks per stage as 0,1,1,0 (default: inferred "
                  "from the rows and reported)");
  cmd->add_option("--blocking", a->blocking,
                  "comm-stream: sends and receives run in order on one communication stream per rank and block "
                  "only later communication (PyTorch's runtime, NCCL); whole-rank: a pending send or receive "
                  "blocks the whole rank (default: the spec's p2p.blocking, else comm-stream)")
      ->check(one_of({"comm-stream", "whole-rank"}));
  cmd->add_option("--lower", a->lower,
                  "add SEND/RECV to a compute-only schedule before checking: pytorch (PyTorch's _add_send_recv) "
                  "or deferred (each RECV just before its consumer, rank-parity order)")
      ->check(one_of({"pytorch", "deferred"}));
  auto* trace = cmd->add_option("--trace", a->trace,
                                "write the predicted timeline as Chrome trace JSON (open in Perfetto): one process per "
                                "class of ranks that run the same program, named for its ranks");
  cmd->add_flag("--trace-all-ranks", a->trace_all_ranks,
                "with --trace: a process for every modelled rank instead of one per class of identical ranks")
      ->needs(trace);
  cmd->add_option("--dot", a->dot, "write a Graphviz picture of the stuck state (or of the schedule)");
  cmd->add_flag("--forward-only", a->forward_only,
                "check an evaluation or inference schedule (as the spec key forward_only: true): no backward is "
                "required and each activation is freed when its forward ends");
  cmd->add_option("--svg", a->svg,
                  "write an SVG picture of the timeline: a lane per rank and stream, memory per rank, the stuck point "
                  "of a deadlock");
  cmd->add_flag("--memory-min-cut", a->min_cut,
                "compute worst-case memory by minimum cut for every rank (skips the exact single-stream fast "
                "path; for cross-checking)");
  cmd->add_option("--engine", a->engine, "graph (default) or smt: deadlock and worst-case memory also by an independent Z3 encoding, which must agree")
      ->check(one_of({"graph", "smt"}));
  cmd->add_option("--time-limit", a->time_limit,
                  "wall-clock limit of the solver, as 30s or 2min: --engine smt (all its queries) and the router "
                  "proofs (all properties; 60s unless given); when it runs out the check exits 5 and says what was "
                  "established");
  cmd->add_option("--rlimit", a->rlimit,
                  "Z3 resource limit per solver check (repeatable effort, unlike --time-limit): --engine smt and "
                  "the router proofs; 0 = none for smt, the router's default otherwise");
  cmd->add_option("--timeline-ops", a->timeline_ops, "print the text timeline for schedules up to this many ops");
  cmd->add_option("--gpus", a->job.gpus, "framework configs: the world size, when the config does not fix it")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--model", a->job.model,
                  fmt::format("framework configs: the model preset, when the config names none or to replace its model (with a "
                              "warning): {}",
                              fmt::join(model::model_preset_names(), ", ")));
  cmd->add_option("--env", a->env,
                  "Megatron-LM launch scripts: NAME=VALUE, a variable of the launch environment (SLURM_NNODES=4), "
                  "repeatable; unset variables are unset, and a ${NAME:-default} that took its default is noted");
  cmd->add_option("--micro-batch-size", a->job.micro_batch_size,
                  "DeepSpeed configs that leave train_micro_batch_size_per_gpu to the autotuner (\"auto\" or absent): "
                  "the value the run uses")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--grad-accum", a->job.grad_accum,
                  "DeepSpeed configs that leave gradient_accumulation_steps to the autotuner: the value the run uses")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--tp", a->job.tp,
                  "DeepSpeed configs run by Megatron-DeepSpeed: the tensor-parallel degree its launch arguments give "
                  "(DeepSpeed then applies its batch rule to the data-parallel size)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--pp", a->job.pp,
                  "DeepSpeed configs run by Megatron-DeepSpeed: the pipeline-parallel degree its launch arguments give")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--seq-len", a->job.seq_len, "framework configs: the sequence length, when the config states none (DeepSpeed)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--efficiency", a->job.efficiency,
                  "framework configs: achieved fraction of peak FLOP/s of the largest GEMMs (default: the GPU preset's, "
                  "fitted to published runs; specs/reference/README.md)")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--hardware", a->job.hardware,
                  fmt::format("framework configs: the GPU preset (default: the config's comment, else h100): {}",
                              fmt::join(model::hardware_preset_names(), ", ")));
  return {cmd, [a] { return run_verify(*a); }};
}

}  // namespace sc::cli
