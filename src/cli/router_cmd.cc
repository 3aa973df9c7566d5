// `schedcheck verify router.yaml`: the MoE router checks (specs whose top level has `router:`).
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "router/router_result.h"
#include "solver/router_check.h"
#include "spec/router_spec.h"

namespace sc::cli {

/// Verifies router specs `files`, adding each file's report to `sink` (its text when the sink
/// wants text). Spec errors in any file stop the run before anything is checked (exit 2; the
/// diagnostics are added to the sink as a report too). `time_limit_s` (0 = none) bounds the
/// proofs of each file by wall clock, `rlimit` (0 = the default) each solver check's resources;
/// a property a limit stops is inconclusive (exit 5). Returns the exit code.
int run_router_verify(const std::vector<std::string>& files, ReportSink& sink, double time_limit_s,
                      uint64_t rlimit) {
  std::vector<RouterSpec> specs;
  Diagnostics diags;
  for (const auto& f : files) {
    Diagnostics d;
    if (!is_router_spec(f))
      d.error(SourceLoc{register_source(f, ""), 1, 1},
              "this file is not a router spec; check router specs and pipeline specs in separate runs");
    else if (auto spec = load_router_spec(f, d))
      specs.push_back(std::move(*spec));
    diags.merge(d);
  }
  if (diags.has_errors()) {
    sink.add(diagnostics_value(diags));  // scripts get them as JSON too
    return report_spec_errors(diags);
  }
  RouterCheckOptions opt;
  opt.time_limit_s = time_limit_s;
  if (rlimit > 0) opt.rlimit = rlimit;
  diags.print(std::cerr);
  int exit = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    RouterReport r = check_router(specs[i], opt);
    exit = combine_exit(exit, r.exit_code);  // kRouterExitSeveral is the same 10
    sink.add(router_json_value(files[i], r));
    if (sink.wants_text()) sink.text() << router_text_report(files[i], r);
  }
  return exit;
}

}  // namespace sc::cli
