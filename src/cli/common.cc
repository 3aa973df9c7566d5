#include "cli/common.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "pipeline/named_schedule.h"
#include "spec/csv_schedule.h"
#include "spec/yaml_spec.h"

namespace sc::cli {
namespace {

bool is_csv(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".csv";
}

}  // namespace

std::optional<PipelineSpec> load_spec(const std::string& path, const std::optional<std::string>& placement,
                                      Diagnostics& diags) {
  std::optional<PipelineSpec> spec;
  if (is_csv(path)) {
    spec = spec_from_csv(path, diags, placement);
  } else {
    if (placement)
      diags.error({}, fmt::format("--placement applies to a CSV schedule; {} declares its placement with the "
                                  "'placement' key", path));
    spec = load_yaml_spec(path, diags);
    if (spec && !diags.has_errors()) resolve_named_schedule(*spec, diags);
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

int report_spec_errors(const Diagnostics& diags) {
  diags.print(std::cerr);
  std::cerr << fmt::format("schedcheck: {} error{} in the input; nothing was checked\n", diags.error_count(),
                           diags.error_count() == 1 ? "" : "s");
  return kExitSpec;
}

bool write_output(const std::optional<std::string>& path, const std::string& text) {
  if (!path) {
    std::cout << text;
    return true;
  }
  std::string tmp = *path + ".tmp";
  bool ok = false;
  {
    std::ofstream out(tmp, std::ios::binary);
    if (out) {
      out << text;
      ok = static_cast<bool>(out.flush());
    }
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, *path, ec);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    std::cerr << "schedcheck: error: cannot write " << *path << "\n";
    return false;
  }
  return true;
}

std::string yaml_spec_text(const PipelineSpec& spec, const std::vector<std::vector<Step>>* actions) {
  const auto& lists = actions ? *actions : spec.actions;
  std::string out = "schedcheck: 1\n";
  out += fmt::format("name: {}\nranks: {}\nstages: {}\nmicrobatches: {}\nplacement: [", spec.name, spec.ranks,
                     spec.stages, spec.microbatches);
  for (size_t s = 0; s < spec.stage_to_rank.size(); ++s) out += fmt::format("{}{}", s ? ", " : "", spec.stage_to_rank[s]);
  out += "]\n";
  if (spec.pipeline_starts.size() > 1) {
    out += "pipelines: [";
    for (size_t i = 0; i < spec.pipeline_starts.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", spec.pipeline_starts[i]);
    out += "]\n";
  }
  out += "schedule:\n  actions:\n";
  for (size_t r = 0; r < lists.size(); ++r) {
    out += fmt::format("    {}: \"", r);
    for (size_t i = 0; i < lists[r].size(); ++i) out += (i ? " " : "") + format_step(lists[r][i]);
    out += "\"\n";
  }
  return out;
}

}  // namespace sc::cli
