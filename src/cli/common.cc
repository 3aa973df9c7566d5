#include "cli/common.h"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipeline/named_schedule.h"
#include "pipeline/moe_router.h"
#include "spec/csv_schedule.h"
#include "spec/yaml_spec.h"
#include "support/version.h"

namespace sc::cli {
namespace {

bool is_csv(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".csv";
}

}  // namespace

std::optional<PipelineSpec> load_spec(const std::string& path, const std::optional<std::string>& placement,
                                      Diagnostics& diags, bool schedule_optional) {
  std::optional<PipelineSpec> spec;
  const std::string ext = std::filesystem::path(path).extension().string();
  if (is_csv(path)) {
    spec = spec_from_csv(path, diags, placement);
  } else {
    if (placement)
      diags.error(SourceLoc{register_source("--placement", ""), 0, 0},
                  fmt::format("--placement applies to a CSV schedule; a YAML spec such as {} gives its placement "
                              "with the 'placement' key", path));
    spec = load_yaml_spec(path, diags, schedule_optional);
    if (spec && !diags.has_errors()) resolve_named_schedule(*spec, diags);
    if (spec && !diags.has_errors()) resolve_moe_router(*spec, diags);
  }
  if (!spec || diags.has_errors()) return std::nullopt;
  // Memory and time are summed along the schedule: keep the sums exact and finite.
  std::vector<long double> bytes(static_cast<size_t>(std::max(spec->ranks, 1)), 0.0L);
  long double seconds = 0;
  for (int32_t s = 0; s < spec->stages && s < static_cast<int32_t>(spec->stage_to_rank.size()); ++s) {
    int32_t r = std::clamp(spec->stage_to_rank[s], 0, std::max(spec->ranks - 1, 0));
    auto at = [&](const auto& v) { return s < static_cast<int32_t>(v.size()) ? static_cast<long double>(v[s]) : 0.0L; };
    bytes[r] += at(spec->memory.params_bytes) +
                spec->microbatches * (at(spec->memory.activation_bytes) + at(spec->memory.weight_grad_bytes));
    seconds += spec->microbatches * (at(spec->costs.f_s) + at(spec->costs.i_s) + at(spec->costs.w_s) + at(spec->costs.b_s));
  }
  long double link = spec->p2p.latency_s;
  if (spec->p2p.bandwidth_bytes_per_s > 0 && spec->p2p.bandwidth_bytes_per_s < 1e300)
    link += spec->p2p.message_bytes / static_cast<long double>(spec->p2p.bandwidth_bytes_per_s);
  size_t steps = 0;
  for (const auto& row : spec->actions) steps += row.size();
  seconds += link * 2.0L * static_cast<long double>(steps);
  if (const auto& c = spec->composition) {  // the collectives and the optimizer step of a composed spec
    long double params = 0;
    for (int64_t b : spec->memory.params_bytes) params += b;
    params += c->tied_embedding_bytes;
    seconds += c->optimizer_s + 4.0L * static_cast<long double>(spec->stages) * c->latency_s;
    if (c->bandwidth_bytes_per_s > 0 && c->bandwidth_bytes_per_s < 1e300)
      seconds += 4.0L * params * c->reduce_dtype_bytes / c->param_dtype_bytes / c->bandwidth_bytes_per_s;
    if (c->moe && c->bandwidth_bytes_per_s > 0 && c->bandwidth_bytes_per_s < 1e300) {  // four all-to-alls per layer
      long double layers = 0;
      for (int32_t s = 0; s < spec->stages; ++s) layers += c->moe->layers_of(s);
      const long double b = std::max(c->moe->dispatch_bytes, c->moe->combine_bytes);
      seconds += 4.0L * spec->microbatches * layers * (c->latency_s + b / c->bandwidth_bytes_per_s);
    }
    // Recompute reruns a forward in each backward.
    for (double r : spec->costs.r_s) seconds += spec->microbatches * static_cast<long double>(r);
  }
  if (const auto& c = spec->composition) {
    // A composed program has every action once per data-parallel replica, and four all-to-alls
    // per MoE layer after each F, I and B: cap it as the FSDP front-end caps its programs
    // (about 470 bytes per op: 10^7 ops take some 4.7 GB).
    long double ops = 0;
    for (const auto& row : spec->actions)
      for (const Step& st : row) {
        ops += 1;
        if (c->moe && (st.first.kind == ActionKind::kF || st.first.kind == ActionKind::kI || st.first.kind == ActionKind::kB))
          ops += 2.0L * c->moe->layers_of(st.first.stage);
      }
    ops *= c->data_parallel();
    if (ops > 1e7L) {
      diags.error(c->loc, fmt::format("the composed program would have about {:.3g} ops ({} data-parallel replica{} of "
                                      "each pipeline rank's actions{}), more than the 10^7 schedcheck checks at once "
                                      "(about 470 bytes per op); check a smaller mesh or fewer microbatches",
                                      static_cast<double>(ops), c->data_parallel(), c->data_parallel() == 1 ? "" : "s",
                                      c->moe ? " and their all-to-alls" : ""));
      return std::nullopt;
    }
  }
  if (*std::max_element(bytes.begin(), bytes.end()) > static_cast<long double>(int64_t{1} << 62)) {
    diags.error(spec->locs.file, "the memory values add up to more than 2^62 bytes on one rank; schedcheck's sums "
                                 "would overflow");
    return std::nullopt;
  }
  if (!(seconds <= 1e12L)) {
    diags.error(spec->locs.file, "the costs and link times add up to more than 10^12 s; the timeline would lose its "
                                 "precision");
    return std::nullopt;
  }
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
  return write_outputs({OutputFile{"--output", *path, text}});
}

bool write_outputs(const std::vector<OutputFile>& files, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  for (size_t i = 0; i < files.size(); ++i) {
    std::string problem = check_output_path(files[i].option, files[i].path, inputs);
    for (size_t j = 0; j < i && problem.empty(); ++j) {
      std::error_code ec;
      if (files[j].path == files[i].path || fs::equivalent(files[j].path, files[i].path, ec))
        problem = fmt::format("{} and {} name the same file {}", files[j].option, files[i].option, files[i].path);
    }
    if (!problem.empty()) {
      std::cerr << "schedcheck: error: " << problem << "; nothing was written\n";
      return false;
    }
  }
  std::vector<std::string> temps;
  auto fail = [&](const std::string& path, const std::string& reason) {
    std::error_code ec;
    for (const auto& t : temps) fs::remove(t, ec);
    std::cerr << "schedcheck: error: cannot write " << path << ": " << reason << "; nothing was written\n";
    return false;
  };
  for (const auto& f : files) {
    fs::path target(f.path);
    fs::path dir = target.parent_path();
    std::string pattern = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    int fd = ::mkstemp(name.data());
    if (fd < 0) return fail(f.path, std::strerror(errno));
    temps.emplace_back(name.data());
    const char* p = f.text.data();
    size_t left = f.text.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::string reason = std::strerror(errno);
        ::close(fd);
        return fail(f.path, reason);
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    // mkstemp makes the file 0600; an output is an ordinary file (0666 less the umask).
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
    if (::close(fd) != 0) return fail(f.path, std::strerror(errno));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    fs::rename(temps[i], files[i].path, ec);
    if (ec) {  // the earlier ones are in place already: a rename in one folder fails only for odd reasons
      std::string reason = ec.message();
      temps.erase(temps.begin(), temps.begin() + static_cast<std::ptrdiff_t>(i));
      return fail(files[i].path, reason);
    }
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
  // The model, per stage, in base units (seconds, bytes), so the file verifies as the input did.
  auto list = [](const auto& v, bool integral) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + (integral ? fmt::format("{}", v[i]) : fmt::format("{}", static_cast<double>(v[i])));
    return s + "]";
  };
  out += fmt::format("costs: {{F: {}, I: {}, W: {}, B: {}}}\n", list(spec.costs.f_s, false), list(spec.costs.i_s, false),
                     list(spec.costs.w_s, false), list(spec.costs.b_s, false));
  out += fmt::format("p2p: {{latency: {}, message_bytes: {}, semantics: {}", spec.p2p.latency_s,
                     spec.p2p.message_bytes, format_semantics(spec.p2p.semantics));
  if (std::isfinite(spec.p2p.bandwidth_bytes_per_s))
    out += fmt::format(", bandwidth: {}", spec.p2p.bandwidth_bytes_per_s);
  out += "}\nmemory:\n";
  if (spec.memory.limit_bytes) out += fmt::format("  limit_bytes: {}\n", *spec.memory.limit_bytes);
  out += fmt::format("  params_bytes: {}\n  activation_bytes: {}\n  weight_grad_bytes: {}\n",
                     list(spec.memory.params_bytes, true), list(spec.memory.activation_bytes, true),
                     list(spec.memory.weight_grad_bytes, true));
  out += "schedule:\n  actions:\n";
  for (size_t r = 0; r < lists.size(); ++r) {
    out += fmt::format("    {}: \"", r);
    out += format_steps(lists[r], " ");
    out += "\"\n";
  }
  return out;
}

void add_semantics_option(CLI::App* cmd, std::optional<std::string>& value) {
  cmd->add_option("--semantics", value,
                  "P2P semantics: eager (sends never block), rendezvous (a send completes with its receive; "
                  "NCCL's behaviour for large messages; the default), buffered:N (N messages in flight per "
                  "channel); overrides the spec's")
      ->check(CLI::Validator(
          [](const std::string& text) {
            std::string why;
            return parse_semantics(text, &why) ? std::string() : why;
          },
          "SEMANTICS"));
}

std::string check_output_path(const std::string& option, const std::string& path,
                              const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> all = inputs;
  all.insert(all.end(), input_files_read().begin(), input_files_read().end());
  for (const auto& in : all) {
    std::error_code e1, e2;
    fs::path a = fs::weakly_canonical(path, e1), b = fs::weakly_canonical(in, e2);
    if (fs::equivalent(path, in, ec) || (!e1 && !e2 && a == b))
      return std::find(inputs.begin(), inputs.end(), in) != inputs.end()
                 ? fmt::format("{} {} would overwrite the input file", option, path)
                 : fmt::format("{} {} would overwrite {}, which an input reads", option, path, in);
  }
  if (fs::is_directory(path, ec)) return fmt::format("{} {} is a folder, not a file", option, path);
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec)) return fmt::format("{} {}: no such directory {}", option, path, parent.string());
  if (::access(parent.c_str(), W_OK) != 0)
    return fmt::format("{} {}: cannot write in {}: {}", option, path, parent.string(), std::strerror(errno));
  return {};
}

void print_json_diagnostics(const Diagnostics& diags) {
  nlohmann::json j = {{"schema_version", kReportSchemaVersion}, {"schedcheck_version", kToolVersion}, {"verdict", "error"},
                      {"exit_code", kExitSpec}, {"diagnostics", nlohmann::json::array()}};
  for (const auto& d : diags.all())
    j["diagnostics"].push_back({{"severity", d.severity == Severity::kError ? "error" : "warning"},
                                {"file", d.loc.valid() ? source_name(d.loc.file) : ""},
                                {"line", d.loc.line},
                                {"col", d.loc.col},
                                {"message", d.message}});
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace sc::cli
