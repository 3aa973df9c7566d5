// `schedcheck lower`: add explicit SEND/RECV actions to a compute-only schedule.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/common.h"
#include "pipeline/lower_comms.h"
#include "spec/csv_schedule.h"

namespace sc::cli {
namespace {

struct LowerArgs {
  std::string file;
  std::string policy = "pytorch";
  std::string format = "csv";
  std::optional<std::string> placement;
  std::optional<std::string> output;
  bool merge_bw = false;
  std::string line_endings = "lf";
};

int run_lower(const LowerArgs& a) {
  Diagnostics diags;
  auto spec = load_spec(a.file, a.placement, diags);
  if (!spec) return report_spec_errors(diags);
  if (a.output) {  // never the input or a file it references
    std::string problem = check_output_path("--output", *a.output, {a.file});
    if (!problem.empty()) {
      std::cerr << "schedcheck: error: " << problem << "\n";
      return kExitUsage;
    }
  }
  auto actions = a.merge_bw ? merge_bw(spec->actions) : spec->actions;
  std::string why;
  auto lowered = lower_comms(actions, spec->stage_to_rank,
                             a.policy == "deferred" ? LowerPolicy::kDeferred : LowerPolicy::kPyTorch, &why,
                             spec->pipeline_starts);
  if (!lowered) {
    std::cerr << fmt::format("{}: error: cannot lower this schedule: {}\n", a.file, why);
    return kExitSpec;
  }
  std::string text = a.format == "yaml" ? yaml_spec_text(*spec, &*lowered) : write_csv_schedule(*lowered);
  if (a.format == "csv" && a.line_endings == "crlf") text = crlf_lines(text);
  return write_output(a.output, text) ? 0 : kExitUsage;
}

}  // namespace

Command add_lower(CLI::App& parent) {
  auto a = std::make_shared<LowerArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "lower", "Add explicit SEND/RECV actions to a compute-only schedule.\n"
               "  schedcheck lower zb1p_compute.csv --merge-bw --policy pytorch > zb1p_comms.csv");
  cmd->add_option("file", a->file, "compute-only schedule: a CSV or a YAML spec")->required();
  cmd->add_option("--policy", a->policy,
                  "pytorch: RECVs where PyTorch's _add_send_recv puts them; deferred: each RECV just before its "
                  "consumer (never after a later-sent message's), with the rank-parity rule that avoids "
                  "rendezvous deadlocks between two ranks")
      ->check(one_of({"pytorch", "deferred"}));
  cmd->add_option("--format", a->format, "csv (PyTorch compute_comms) or yaml (a spec with action lists)")
      ->check(one_of({"csv", "yaml"}));
  cmd->add_option("--placement", a->placement, "stage-to-rank placement of a CSV: loop, v or 0,1,1,0");
  cmd->add_flag("--merge-bw", a->merge_bw, "first merge each I directly followed by its W into B (as PyTorch's test)");
  cmd->add_option("-o,--output", a->output, "write to this file instead of standard output");
  cmd->add_option("--line-endings", a->line_endings,
                  "CSV line endings: lf (PyTorch's committed artefacts) or crlf (what Python's csv.writer, so a "
                  "fresh _dump_csv, writes)")
      ->check(one_of({"lf", "crlf"}))
      ->capture_default_str();
  return {cmd, [a] { return run_lower(*a); }};
}

}  // namespace sc::cli
