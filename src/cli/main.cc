// schedcheck: the command-line driver (verify, lower).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "check/verify.h"
#include "pipeline/lower_comms.h"
#include "report/report.h"
#include "spec/csv_schedule.h"
#include "spec/yaml_spec.h"

namespace {

constexpr int kExitUsage = 1;
constexpr int kExitSpec = 2;
constexpr int kExitInternal = 70;

// Largest stages x microbatches table a schedule may need (tables are indexed by both).
constexpr int64_t kMaxStageMicrobatchPairs = 10'000'000;

bool is_csv(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".csv";
}

// Loads a YAML spec or a bare CSV; diagnostics on failure.
std::optional<sc::PipelineSpec> load_spec(const std::string& path, const std::optional<std::string>& placement,
                                          sc::Diagnostics& diags) {
  std::optional<sc::PipelineSpec> spec;
  if (is_csv(path)) {
    spec = sc::spec_from_csv(path, diags, placement);
  } else {
    if (placement)
      diags.error({}, fmt::format("--placement applies to a CSV schedule; {} declares its placement with the "
                                  "'placement' key", path));
    spec = sc::load_yaml_spec(path, diags);
  }
  if (!spec || diags.has_errors()) return std::nullopt;
  if (static_cast<int64_t>(spec->stages) * spec->microbatches > kMaxStageMicrobatchPairs) {
    diags.error(spec->locs.stages.valid() ? spec->locs.stages : spec->locs.file,
                fmt::format("{} stages x {} microbatches is more than the {} (stage, microbatch) pairs schedcheck "
                            "supports", spec->stages, spec->microbatches, kMaxStageMicrobatchPairs));
    return std::nullopt;
  }
  return spec;
}

// Writes `text` to `path` atomically (a temporary file renamed into place).
bool write_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return false;
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

struct VerifyArgs {
  std::vector<std::string> files;
  std::string format = "text";
  std::optional<std::string> semantics;
  std::optional<std::string> placement;
  std::string blocking = "comm-stream";
  std::optional<std::string> lower;
  std::optional<std::string> trace;
  std::optional<std::string> dot;
  bool min_cut = false;
  size_t timeline_ops = 400;
};

int run_verify(const VerifyArgs& a) {
  sc::VerifyOptions opt;
  if (a.semantics) {
    std::string why;
    opt.semantics = sc::parse_semantics(*a.semantics, &why);
    if (!opt.semantics) {
      std::cerr << "schedcheck: error: --semantics: " << why << "\n";
      return kExitUsage;
    }
  }
  opt.blocking = a.blocking == "whole-rank" ? sc::BlockingModel::kWholeRank : sc::BlockingModel::kCommStream;
  if (a.lower) opt.lower = *a.lower == "deferred" ? sc::LowerPolicy::kDeferred : sc::LowerPolicy::kPyTorch;
  opt.force_min_cut = a.min_cut;
  if ((a.trace || a.dot) && a.files.size() != 1) {
    std::cerr << "schedcheck: error: --trace and --dot take one input file\n";
    return kExitUsage;
  }

  // Load everything first: a spec error stops the run before any report is written.
  std::vector<sc::PipelineSpec> specs;
  sc::Diagnostics diags;
  for (const auto& f : a.files) {
    sc::Diagnostics d;
    auto spec = load_spec(f, a.placement, d);
    diags.merge(d);
    if (spec) specs.push_back(std::move(*spec));
  }
  if (diags.has_errors()) {
    diags.print(std::cerr);
    std::cerr << fmt::format("schedcheck: {} error{} in the input; nothing was checked\n", diags.error_count(),
                             diags.error_count() == 1 ? "" : "s");
    return kExitSpec;
  }
  diags.print(std::cerr);  // warnings

  int exit = 0;
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < specs.size(); ++i) {
    sc::VerifyResult r = sc::verify(specs[i], opt);
    if (exit == 0) exit = r.exit_code;
    else if (r.exit_code != 0 && r.exit_code != exit) exit = 10;
    if (a.format == "json") {
      if (specs.size() == 1) std::cout << sc::json_report(r);
      else all.push_back(nlohmann::json::parse(sc::json_report(r)));
    } else {
      if (i) std::cout << "\n";
      sc::write_text_report(std::cout, r, a.timeline_ops);
    }
    if (a.trace && !write_file(*a.trace, sc::chrome_trace(r))) {
      std::cerr << "schedcheck: error: cannot write trace file " << *a.trace << "\n";
      return kExitUsage;
    }
    if (a.dot && !write_file(*a.dot, sc::dot_graph(r))) {
      std::cerr << "schedcheck: error: cannot write DOT file " << *a.dot << "\n";
      return kExitUsage;
    }
  }
  if (a.format == "json" && specs.size() > 1) std::cout << all.dump(2) << "\n";
  return exit;
}

struct LowerArgs {
  std::string file;
  std::string policy = "pytorch";
  std::string format = "csv";
  std::optional<std::string> placement;
  std::optional<std::string> output;
  bool merge_bw = false;
};

std::string yaml_actions(const sc::PipelineSpec& spec, const std::vector<std::vector<sc::Step>>& actions) {
  std::string out = "# lowered by schedcheck lower\nschedcheck: 1\n";
  out += fmt::format("name: {}\nranks: {}\nstages: {}\nmicrobatches: {}\nplacement: [", spec.name, spec.ranks,
                     spec.stages, spec.microbatches);
  for (size_t s = 0; s < spec.stage_to_rank.size(); ++s) out += fmt::format("{}{}", s ? ", " : "", spec.stage_to_rank[s]);
  out += "]\nschedule:\n  actions:\n";
  for (size_t r = 0; r < actions.size(); ++r) {
    out += fmt::format("    {}: \"", r);
    for (size_t i = 0; i < actions[r].size(); ++i) out += (i ? " " : "") + sc::format_step(actions[r][i]);
    out += "\"\n";
  }
  return out;
}

int run_lower(const LowerArgs& a) {
  sc::Diagnostics diags;
  auto spec = load_spec(a.file, a.placement, diags);
  if (!spec) {
    diags.print(std::cerr);
    return kExitSpec;
  }
  auto actions = a.merge_bw ? sc::merge_bw(spec->actions) : spec->actions;
  std::string why;
  auto lowered = sc::lower_comms(actions, spec->stage_to_rank,
                                 a.policy == "deferred" ? sc::LowerPolicy::kDeferred : sc::LowerPolicy::kPyTorch, &why,
                                 spec->pipeline_starts);
  if (!lowered) {
    std::cerr << fmt::format("{}: error: cannot lower this schedule: {}\n", a.file, why);
    return kExitSpec;
  }
  std::string text = a.format == "yaml" ? yaml_actions(*spec, *lowered) : sc::write_csv_schedule(*lowered);
  if (a.output) {
    if (!write_file(*a.output, text)) {
      std::cerr << "schedcheck: error: cannot write " << *a.output << "\n";
      return kExitUsage;
    }
  } else {
    std::cout << text;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "schedcheck: a model checker for distributed-training schedules.\n"
      "It reads a pipeline schedule (a YAML spec, or a CSV from torch.distributed.pipelining) and proves or\n"
      "refutes deadlock-freedom, causality, channel agreement and memory limits, and predicts span, makespan,\n"
      "bubbles and peak memory per rank.\n\n"
      "Exit codes: 0 holds; 1 usage error; 2 spec error; 10 violations of several kinds; 11 deadlock;\n"
      "12 structure or causality; 13 memory limit exceeded; 14 channel mismatch; 70 internal error.",
      "schedcheck"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "schedcheck 0.1.0");

  VerifyArgs va;
  CLI::App* verify = app.add_subcommand(
      "verify", "Check schedules and predict their timeline.\n"
                "  schedcheck verify examples/llama7b-pp8-1f1b.yaml\n"
                "  schedcheck verify schedule.csv --semantics eager --format json\n"
                "  schedcheck verify deadlock.yaml --dot stuck.dot --trace timeline.json");
  verify->add_option("files", va.files, "YAML specs (.yaml) or PyTorch schedule CSVs (.csv)")->required();
  verify->add_option("--format", va.format, "text (for people) or json (one object per file)")
      ->check(CLI::IsMember({"text", "json"}));
  verify->add_option("--semantics", va.semantics,
                     "P2P semantics: eager (sends never block), rendezvous (a send completes with its receive; "
                     "NCCL's behaviour for large messages; the default), buffered:N; overrides the spec's");
  verify->add_option("--placement", va.placement,
                     "stage-to-rank placement of a CSV: loop, v, or ranks per stage as 0,1,1,0 (default: inferred "
                     "from the rows and reported)");
  verify->add_option("--blocking", va.blocking,
                     "comm-stream: sends and receives run in order on one communication stream per rank and block "
                     "only later communication (PyTorch's runtime, NCCL); whole-rank: a pending send or receive "
                     "blocks the whole rank")
      ->check(CLI::IsMember({"comm-stream", "whole-rank"}));
  verify->add_option("--lower", va.lower,
                     "add SEND/RECV to a compute-only schedule before checking: pytorch (PyTorch's _add_send_recv) "
                     "or deferred (each RECV just before its consumer, rank-parity order)")
      ->check(CLI::IsMember({"pytorch", "deferred"}));
  verify->add_option("--trace", va.trace, "write the predicted timeline as Chrome trace JSON (open in Perfetto)");
  verify->add_option("--dot", va.dot, "write a Graphviz picture of the stuck state (or of the schedule)");
  verify->add_flag("--memory-min-cut", va.min_cut,
                   "compute worst-case memory by minimum cut for every rank (skips the exact single-stream fast "
                   "path; for cross-checking)");
  verify->add_option("--timeline-ops", va.timeline_ops, "print the text timeline for schedules up to this many ops");

  LowerArgs la;
  CLI::App* lower = app.add_subcommand(
      "lower", "Add explicit SEND/RECV actions to a compute-only schedule.\n"
               "  schedcheck lower zb1p_compute.csv --merge-bw --policy pytorch > zb1p_comms.csv");
  lower->add_option("file", la.file, "compute-only schedule: a CSV or a YAML spec with actions")->required();
  lower->add_option("--policy", la.policy,
                    "pytorch: RECVs where PyTorch's _add_send_recv puts them; deferred: each RECV just before its "
                    "consumer, with the rank-parity rule that avoids rendezvous deadlocks between two ranks")
      ->check(CLI::IsMember({"pytorch", "deferred"}));
  lower->add_option("--format", la.format, "csv (PyTorch compute_comms) or yaml (action lists)")
      ->check(CLI::IsMember({"csv", "yaml"}));
  lower->add_option("--placement", la.placement, "stage-to-rank placement of a CSV: loop, v or 0,1,1,0");
  lower->add_flag("--merge-bw", la.merge_bw, "first merge each I directly followed by its W into B (as PyTorch's test)");
  lower->add_option("-o,--output", la.output, "write to this file instead of standard output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  try {
    if (*verify) return run_verify(va);
    if (*lower) return run_lower(la);
  } catch (const std::exception& e) {
    std::cerr << "schedcheck: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
  return kExitUsage;
}
