// `schedcheck run`: execute a verified schedule on a GPU and compare the measurement with the
// prediction (verify_gpu/).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "pipeline/verify_pipeline.h"
#include "cli/common.h"
#include "cli/frontends.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"
#include "report/report.h"
#include "verify_gpu/compare.h"
#include "verify_gpu/executor.h"
#include "verify_gpu/plan.h"

namespace sc::cli {

/// Exit code of `schedcheck run` when there is no GPU to run on: built without CUDA, no CUDA
/// driver, or no such device (sysexits' EX_UNAVAILABLE).
inline constexpr int kExitNoGpu = 69;

namespace {

struct RunArgs {
  std::string file;
  int32_t device = 0;
  int32_t repeat = 5;
  int32_t warmup = 2;
  std::string tolerance = "5%";
  std::optional<std::string> trace;
  std::optional<std::string> svg;
  std::string format = "text";
  bool force = false;
  std::string kernels = "spin";
  std::optional<std::string> semantics;
  std::optional<std::string> lower;
  double watchdog_s = 60;
  bool dry_run = false;
};

// "5%" -> 0.05, "0.05" -> 0.05; nullopt when not a number in [0, 1e6].
std::optional<double> parse_tolerance(const std::string& s) {
  std::string t = s;
  bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  try {
    size_t used = 0;
    double v = std::stod(t, &used);
    if (used != t.size() || !std::isfinite(v) || v < 0) return std::nullopt;
    return percent ? v / 100 : v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool deadlock_free(const VerifyResult& r) {
  if (!r.execution.completed || !r.timeline) return false;
  for (const Finding& f : r.findings)
    if (f.kind == FindingKind::kDeadlock) return false;
  return true;
}

int run_run(const RunArgs& a) {
  auto tol_rel = parse_tolerance(a.tolerance);
  if (!tol_rel) {
    std::cerr << "schedcheck: error: --tolerance: expected a fraction or a percentage (5%), got '" << a.tolerance << "'\n";
    return kExitUsage;
  }
  if (std::string problem = check_output_paths({{"--trace", a.trace}, {"--svg", a.svg}}, {a.file}); !problem.empty()) {
    std::cerr << "schedcheck: error: " << problem << "\n";
    return kExitUsage;
  }
  // The front-end table decides: fsdp specs have their own verify; pipeline and composed specs
  // (and PyTorch CSVs) go through the pipeline's; the others have no program to run.
  const FrontEnd& fe = front_end_for(a.file);
  const std::string fe_name = fe.name;
  if (fe_name != "fsdp" && fe_name != "pipeline" && fe_name != "composed") {
    std::cerr << "schedcheck: error: " << a.file << ": schedcheck run executes pipeline, composed and fsdp specs; this is "
              << "one of the " << fe.what << " (front-end '" << fe.name << "'), which it does not run\n";
    return kExitSpec;
  }
  VerifyResult r;
  Diagnostics diags;
  if (fe_name == "fsdp") {
    if (a.semantics || a.lower) {
      std::cerr << "schedcheck: error: --semantics and --lower apply to pipeline specs, not to fsdp specs\n";
      return kExitUsage;
    }
    auto spec = load_fsdp_spec(a.file, diags);
    if (!spec || diags.has_errors()) return report_spec_errors(diags);
    diags.print(std::cerr);
    // Every rank built: the GPU runs each rank's work, where verify's quotient builds one rank
    // for many (docs/facts/symmetry.md).
    r = verify_fsdp(*spec, false, /*use_symmetry=*/false);
  } else {
    auto spec = load_spec(a.file, std::nullopt, diags);
    if (!spec || diags.has_errors()) return report_spec_errors(diags);
    diags.print(std::cerr);
    VerifyOptions opt;
    if (a.semantics) opt.semantics = parse_semantics(*a.semantics);
    if (a.lower) opt.lower = *a.lower == "deferred" ? LowerPolicy::kDeferred : LowerPolicy::kPyTorch;
    r = verify(*spec, opt);
  }
  const bool fsdp = fsdp_extras(r) != nullptr;
  auto verify_json = [&] { return fsdp ? fsdp_json_report(r) : json_report(r); };
  auto verify_text = [&](std::ostream& os) {
    if (fsdp) write_fsdp_text_report(os, r);
    else write_text_report(os, r, 0);
  };
  bool free_of_deadlock = deadlock_free(r);
  if (!free_of_deadlock || (!r.findings.empty() && !a.force)) {
    if (a.format == "json") std::cout << verify_json();
    else verify_text(std::cout);
    if (!free_of_deadlock && a.force)
      std::cerr << "schedcheck: error: cannot run: the schedule has no complete execution (verify found a deadlock), so "
                   "there is no order to issue its ops in; the ops verify reports stuck are the ones that would hang\n";
    else if (!free_of_deadlock)
      std::cerr << "schedcheck: error: refusing to run a schedule that verify does not prove deadlock-free\n";
    else
      std::cerr << "schedcheck: error: refusing to run a schedule with verify findings (--force runs it anyway)\n";
    return r.exit_code != 0 ? r.exit_code : 11;
  }
  if (!r.findings.empty())
    std::cerr << fmt::format("schedcheck: warning: verify reports {} finding(s) (exit {}); running anyway (--force)\n",
                             r.findings.size(), r.exit_code);

  const bool lazy_init = std::any_of(r.program.ops.begin(), r.program.ops.end(), [](const Op& o) {
    return o.kind == OpKind::kCollective && o.collective == CollectiveKind::kCommInit;
  });
  if (lazy_init) {
    // The executor's communicators exist before the step.
    std::cerr << "schedcheck: error: " << a.file << ": schedcheck run does not execute "
              << "lazy communicator creation (p2p.comm_init: lazy) yet; verify checks it\n";
    return kExitSpec;
  }
  gpu::PlanOptions popt;
  auto plan = gpu::make_plan(r.program, *r.timeline, popt);
  if (!plan) {
    // With --force a schedule verify found malformed (a W before its I, an action twice) can
    // free what it never allocated: that is the schedule's finding, not our failure.
    if (!r.findings.empty()) {
      std::cerr << fmt::format("schedcheck: error: cannot run: {}; the schedule is malformed (verify reports {} "
                               "finding(s), exit {}: schedcheck verify {} lists them)\n",
                               plan.error(), r.findings.size(), r.exit_code, a.file);
      return r.exit_code != 0 ? r.exit_code : kExitSpec;
    }
    std::cerr << "schedcheck: internal error: cannot plan the execution: " << plan.error() << "\n";
    return kExitInternal;
  }
  std::vector<gpu::ItemTime> predicted(plan->items.size());
  for (size_t i = 0; i < plan->items.size(); ++i)
    predicted[i] = {plan->items[i].predicted_start_s, plan->items[i].predicted_end_s};

  gpu::Measurement m;
  if (a.dry_run) {
    // The ideal in-memory GPU: checks the plan end to end without a device.
    gpu::ReplayResult rep = gpu::replay(*plan);
    m.calibration.device_name = "replay (ideal in-memory GPU, no device)";
    m.calibration.device = -1;
    m.items = rep.items;
    m.makespan_per_repeat_s = {gpu::figures_of(*plan, rep.items, {}).makespan_s};
    m.peak_bytes_per_rank = rep.peak_bytes_per_rank;
    m.reserved_peak_bytes_per_rank = rep.peak_bytes_per_rank;
    m.correctness_problems = gpu::check_execution(*plan, rep.tickets, rep.leaked_bytes_per_rank);
  } else {
    if (!gpu::cuda_executor_built()) {
      std::cerr << "schedcheck: error: schedcheck was built without CUDA; rebuild with -DWITH_CUDA=ON on a machine with "
                   "the CUDA toolkit (exit 69)\n";
      return kExitNoGpu;
    }
    gpu::ExecOptions eo;
    eo.device = a.device;
    eo.repeat = a.repeat;
    eo.warmup = a.warmup;
    eo.kernels = a.kernels;
    eo.watchdog_s = a.watchdog_s;
    gpu::ExecOutcome out = gpu::execute_plan(*plan, eo);
    if (!out.ok) {
      std::cerr << "schedcheck: error: " << out.error.message << "\n";
      switch (out.error.failure) {
        case gpu::ExecFailure::kNotBuilt:
        case gpu::ExecFailure::kNoDevice: return kExitNoGpu;
        case gpu::ExecFailure::kHang: return 11;
        case gpu::ExecFailure::kCuda: return kExitInternal;
      }
      return kExitInternal;
    }
    m = std::move(out.measurement);
  }

  gpu::Tolerance tol;
  tol.time_rel = *tol_rel;
  tol.rounding_bytes = std::max<int64_t>(1, m.calibration.pool_rounding_bytes);
  gpu::Figures pf = gpu::figures_of(*plan, predicted, r.timeline->peak_bytes_per_rank);
  gpu::Figures mf = gpu::figures_of(*plan, m.items, m.peak_bytes_per_rank);
  gpu::Comparison c = gpu::compare(*plan, pf, mf, predicted, m.items, tol);
  int exit = c.exit_code;
  if (!m.correctness_problems.empty()) exit = gpu::kExitMeasurementDisagrees;
  if (exit == 0) exit = r.exit_code;
  if (a.format == "json") {
    std::cout << gpu::run_json_report(verify_json(), *plan, c, m, tol, exit);
  } else {
    verify_text(std::cout);
    std::cout << "\n" << gpu::comparison_text(*plan, c, m, tol);
  }
  std::vector<OutputFile> outputs;  // all or none
  if (a.trace) outputs.push_back({"--trace", *a.trace, gpu::side_by_side_trace(r, *plan, m.items)});
  if (a.svg) outputs.push_back({"--svg", *a.svg, gpu::side_by_side_svg(r, *plan, m.items, m.calibration.device_name)});
  if (!outputs.empty() && !write_outputs(outputs, {a.file})) return exit != 0 ? exit : kExitUsage;
  return exit;
}

}  // namespace

Command add_run(CLI::App& parent) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "run",
      "Execute a verified schedule on a GPU and compare the measured makespan, span, idle time, overlap, peak memory\n"
      "and op order with the prediction. Ranks share the GPU (one set of CUDA streams and one memory pool per rank).\n"
      "  schedcheck run examples/gpu-1f1b-p4-m8.yaml --repeat 5 --trace side-by-side.json\n"
      "  schedcheck run examples/gpu-zbh1-p4-m8.yaml --format json --tolerance 5%\n"
      "  schedcheck run SPEC --dry-run      # plan and replay on the CPU, no GPU needed\n"
      "  schedcheck run SPEC --dry-run --svg both.svg   # predicted above measured (here: replayed) lanes\n"
      "SPEC is a pipeline spec (YAML or CSV), a composed spec (mesh:) or an fsdp spec (collectives run as copies between ranks on the GPU).\n"
      "Exit codes: 0 the measurement agrees; 20 a figure differs beyond tolerance (or the correctness pass failed);\n"
      "a schedule verify does not prove deadlock-free is refused with verify's exit code (11 deadlock, 10 when\n"
      "findings of several kinds come with it); 11 also when the run hung; 12-14: verify's other findings\n"
      "(refused without --force; with --force they are returned when the measurement agrees); 2 spec error;\n"
      "1 usage error; 69 no GPU: schedcheck was built without CUDA, no CUDA driver or device, or too little free\n"
      "device memory for every rank's planned peak; 70 internal or CUDA error.");
  cmd->add_option("file", a->file, "pipeline or composed YAML spec (.yaml), PyTorch schedule CSV (.csv), or fsdp spec")->required();
  cmd->add_option("--device", a->device, "CUDA device index all ranks run on")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--repeat", a->repeat, "timed runs; the median by makespan is reported")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "untimed runs before the timed ones")->check(CLI::Range(0, 100))->capture_default_str();
  cmd->add_option("--tolerance", a->tolerance,
                  "allowed relative error of makespan and span (and of idle and overlap, relative to the makespan): "
                  "5% or 0.05; peak memory is allowed 1% plus the pool's rounding")->capture_default_str();
  cmd->add_option("--trace", a->trace, "write predicted and measured timelines side by side as Chrome trace JSON (Perfetto)");
  cmd->add_option("--svg", a->svg,
                  "write the predicted timeline and below it the measured one as one SVG picture, on one time scale "
                  "(with --dry-run the measured lanes are the replay's)");
  cmd->add_option("--format", a->format, "text or json (the verify report with a `measured` object)")
      ->check(one_of({"text", "json"}))->capture_default_str();
  cmd->add_flag("--force", a->force,
                "run even when verify reports findings other than a deadlock (memory limit, channel, structure); "
                "the watchdog reports a run that does not finish");
  cmd->add_option("--kernels", a->kernels, "spin (timer-driven kernels, default) or gemm (cuBLAS GEMMs sized from the costs)")
      ->check(one_of({"spin", "gemm"}))->capture_default_str();
  add_semantics_option(cmd, a->semantics);
  cmd->add_option("--lower", a->lower, "add SEND/RECV to a compute-only schedule first: pytorch or deferred")
      ->check(one_of({"pytorch", "deferred"}));
  cmd->add_option("--watchdog", a->watchdog_s, "seconds after which a run that has not finished is reported as a hang")
      ->check(CLI::Range(1.0, 86400.0))->capture_default_str();
  cmd->add_flag("--dry-run", a->dry_run, "plan and replay on an ideal in-memory GPU instead of a device (no CUDA needed)");
  return {cmd, [a] { return run_run(*a); }};
}

}  // namespace sc::cli
