// `schedcheck verify fsdp.yaml`: FSDP / ZeRO-3 gather-free specs (a top-level `fsdp:` key).
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"
#include "report/report.h"

namespace sc::cli {

/// True when `path` is an FSDP spec (verify dispatches it here).
bool is_fsdp_spec_file(const std::string& path) { return is_fsdp_spec(path); }

/// Verifies FSDP specs `files`, printing text or JSON (one object, a list for several); writes
/// the Chrome trace of the single input to `trace` and its DOT picture to `dot` when given. Spec errors in any file stop
/// the run before anything is checked (exit 2). Returns the exit code.
int run_fsdp_verify(const std::vector<std::string>& files, const std::string& format, const std::string& trace,
                    const std::string& dot, bool force_min_cut) {
  std::vector<FsdpSpec> specs;
  Diagnostics diags;
  for (const auto& f : files) {
    Diagnostics d;
    if (!is_fsdp_spec(f))
      d.error(SourceLoc{register_source(f, ""), 1, 1},
              "this file is not an fsdp spec; check fsdp specs and other specs in separate runs");
    else if (auto spec = load_fsdp_spec(f, d))
      specs.push_back(std::move(*spec));
    diags.merge(d);
  }
  if (diags.has_errors()) return report_spec_errors(diags);
  diags.print(std::cerr);
  int exit = 0;
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < specs.size(); ++i) {
    FsdpVerifyResult r = verify_fsdp(specs[i], force_min_cut);
    int code = r.base.exit_code;
    if (exit == 0) exit = code;
    else if (code != 0 && code != exit) exit = 10;
    if (format == "json") {
      if (specs.size() == 1) std::cout << fsdp_json_report(r);
      else all.push_back(nlohmann::json::parse(fsdp_json_report(r)));
    } else {
      if (i) std::cout << "\n";
      write_fsdp_text_report(std::cout, r);
    }
    if (!trace.empty() && !write_output(trace, chrome_trace(r.base))) return kExitUsage;
    if (!dot.empty() && !write_output(dot, dot_graph(r.base))) return kExitUsage;
  }
  if (format == "json" && specs.size() > 1) std::cout << all.dump(2) << "\n";
  return exit;
}

}  // namespace sc::cli
