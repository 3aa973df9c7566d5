// `schedcheck verify router.yaml`: the MoE router checks (specs whose top level has `router:`).
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "router/router_result.h"
#include "solver/router_check.h"
#include "spec/router_spec.h"

namespace sc::cli {

/// True when `path` is a router spec (verify dispatches it here).
bool is_router_spec_file(const std::string& path) { return is_router_spec(path); }

/// Verifies router specs `files`, printing text or JSON (one object, a list for several). Spec
/// errors in any file stop the run before anything is checked (exit 2; with json, the
/// diagnostics are printed as JSON on standard output too). `time_limit_s` (0 = none) bounds the
/// proofs of each file by wall clock, `rlimit` (0 = the default) each solver check's resources;
/// a property a limit stops is inconclusive (exit 5). Returns the exit code.
int run_router_verify(const std::vector<std::string>& files, const std::string& format, double time_limit_s,
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
    if (format == "json") print_json_diagnostics(diags);  // scripts get them as JSON too
    return report_spec_errors(diags);
  }
  RouterCheckOptions opt;
  opt.time_limit_s = time_limit_s;
  if (rlimit > 0) opt.rlimit = rlimit;
  diags.print(std::cerr);
  int exit = 0;
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < specs.size(); ++i) {
    RouterReport r = check_router(specs[i], opt);
    exit = combine_exit(exit, r.exit_code);  // kRouterExitSeveral is the same 10
    if (format == "json") {
      if (specs.size() == 1) std::cout << router_json_report(files[i], r);
      else all.push_back(router_json_value(files[i], r));
    } else {
      if (i) std::cout << "\n";
      std::cout << router_text_report(files[i], r);
    }
  }
  if (format == "json" && specs.size() > 1) std::cout << all.dump(2) << "\n";
  return exit;
}

}  // namespace sc::cli
