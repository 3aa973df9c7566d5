#include "cli/common.h"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
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

namespace {

/// Applies `shape` to a loaded spec (see load_spec). False after adding an error to `diags`.
bool apply_shape(PipelineSpec& spec, const ShapeOverride& shape, Diagnostics& diags) {
  const int32_t old_ranks = spec.ranks, old_stages = spec.stages;
  if (shape.ranks) spec.ranks = *shape.ranks;
  if (shape.microbatches) spec.microbatches = *shape.microbatches;
  if (shape.stages) {
    spec.stages = *shape.stages;
    if (!spec.locs.stages.valid()) spec.locs.stages = spec.locs.file;  // the generator then takes the count
  } else if (shape.ranks && old_ranks > 0) {
    spec.stages = spec.ranks * std::max(1, old_stages / old_ranks);  // the same stages per rank
  }
  if (spec.named) return true;  // the named schedule is generated for the new shape
  spec.actions.clear();         // written for the old shape
  const bool v = spec.placement == "v";
  spec.stage_to_rank = v ? v_placement(spec.ranks, spec.stages) : loop_placement(spec.ranks, spec.stages);
  if (spec.stage_to_rank.empty() || (spec.placement != "v" && spec.placement != "loop" && spec.placement_declared)) {
    diags.error(spec.locs.file, fmt::format("--ranks/--stages: {} stages on {} ranks do not fit the spec's placement "
                                            "'{}' (loop, or v with two stages per rank)", spec.stages, spec.ranks,
                                            spec.placement));
    return false;
  }
  spec.pipeline_starts = {0};
  const size_t n = static_cast<size_t>(spec.stages);
  auto fit = [n](auto& v) { return resize_uniform(v, n, /*allow_empty=*/true); };
  if (!(fit(spec.costs.f_s) && fit(spec.costs.i_s) && fit(spec.costs.w_s) && fit(spec.costs.b_s) && fit(spec.costs.r_s) &&
        fit(spec.memory.params_bytes) && fit(spec.memory.activation_bytes) && fit(spec.memory.weight_grad_bytes) &&
        fit(spec.memory.state_bytes) && fit(spec.memory.recompute) && fit(spec.memory.retained_bytes))) {
    diags.error(spec.locs.file, fmt::format("--ranks/--stages: the spec gives per-stage costs or memory for {} stages; "
                                            "a new stage count needs one value for every stage", old_stages));
    return false;
  }
  return true;
}

}  // namespace

std::optional<PipelineSpec> load_spec(const std::string& path, const std::optional<std::string>& placement,
                                      Diagnostics& diags, bool schedule_optional, const ShapeOverride& shape) {
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
    if (spec && !diags.has_errors() && shape.any() && !apply_shape(*spec, shape, diags)) return std::nullopt;
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
  // A collective over a group moves the group's bytes (an all-reduce twice: build_program's
  // ring model), on the same link: each one's wire time is in the sum too.
  if (spec->p2p.bandwidth_bytes_per_s > 0 && spec->p2p.bandwidth_bytes_per_s < 1e300) {
    std::map<int32_t, long double> wire_s;  // per group name: 2 x bytes / bandwidth
    for (const auto& row : spec->actions)
      for (const Step& st : row) {
        if (!is_collective(st.first.kind)) continue;
        auto [it, added] = wire_s.try_emplace(st.group, 0.0L);
        if (added)
          if (std::optional<CollectiveGroup> g = spec->collective_group(st.group))
            it->second = 2.0L * static_cast<long double>(g->bytes) / spec->p2p.bandwidth_bytes_per_s;
        seconds += it->second;
      }
  }
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

bool refuse_forward_only(const PipelineSpec& spec, const std::string& command, Diagnostics& diags) {
  const auto phase = std::find_if(spec.phases.begin(), spec.phases.end(), [](const Phase& p) { return p.forward_only; });
  if (!spec.forward_only && phase == spec.phases.end()) return false;
  const std::string what = phase != spec.phases.end()
                               ? fmt::format("phase {}runs microbatches {}..{} forward only",
                                             phase->name.empty() ? "" : "'" + phase->name + "' ", phase->first,
                                             phase->first + phase->microbatches - 1)
                               : std::string("the spec runs forward only (forward_only: true)");
  diags.error(phase != spec.phases.end() && phase->loc.valid() ? phase->loc : spec.locs.file,
              fmt::format("{}: {} orders training steps only, a forward and a backward for every microbatch; "
                          "`schedcheck verify` checks this schedule as written",
                          what, command));
  return true;
}

bool narrow_to_phase(PipelineSpec& spec, const std::optional<std::string>& phase, const std::string& command,
                     Diagnostics& diags, int32_t* first_id) {
  *first_id = 0;
  auto describe = [](const Phase& p) {
    return fmt::format("{}microbatches {}..{}{}", p.name.empty() ? "" : "'" + p.name + "' ", p.first,
                       p.first + p.microbatches - 1, p.forward_only ? " forward only" : "");
  };
  if (!phase) {
    if (spec.phases.size() <= 1) return !refuse_forward_only(spec, command, diags);
    std::vector<std::string> list;
    for (const Phase& p : spec.phases) list.push_back(describe(p));
    const auto train = std::find_if(spec.phases.begin(), spec.phases.end(), [](const Phase& p) { return !p.forward_only; });
    const std::string pick =
        train == spec.phases.end()
            ? std::string("none of them trains, so there is nothing to order; `schedcheck verify` checks the lists as written")
            : fmt::format("name the training phase to order: --phase {}",
                          train->name.empty() ? std::to_string(train - spec.phases.begin() + 1) : train->name);
    diags.error(spec.phases.front().loc.valid() ? spec.phases.front().loc : spec.locs.file,
                fmt::format("the spec runs {} phases one after the other ({}); {} orders one training phase at a "
                            "time: {}",
                            spec.phases.size(), fmt::join(list, ", "), command, pick));
    return false;
  }
  if (spec.phases.empty()) {
    diags.error(spec.locs.file, fmt::format("--phase {}: the spec has no phases: key (it is one phase of {} "
                                            "microbatches); leave --phase out",
                                            *phase, spec.microbatches));
    return false;
  }
  auto it = std::find_if(spec.phases.begin(), spec.phases.end(), [&](const Phase& p) { return p.name == *phase; });
  if (it == spec.phases.end() && !phase->empty() &&
      std::all_of(phase->begin(), phase->end(), [](char c) { return c >= '0' && c <= '9'; }) && phase->size() < 9) {
    const size_t k = std::stoul(*phase);
    if (k >= 1 && k <= spec.phases.size()) it = spec.phases.begin() + static_cast<std::ptrdiff_t>(k - 1);
  }
  if (it == spec.phases.end()) {
    std::vector<std::string> names;
    for (size_t k = 0; k < spec.phases.size(); ++k)
      names.push_back(spec.phases[k].name.empty() ? std::to_string(k + 1) : spec.phases[k].name);
    const std::string near = closest_match(*phase, names);
    diags.error(spec.phases.front().loc.valid() ? spec.phases.front().loc : spec.locs.file,
                fmt::format("--phase {}: no such phase; the spec's phases are {} (a name, or a position from 1){}",
                            *phase, fmt::join(names, ", "), near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
    return false;
  }
  const Phase chosen = *it;
  if (chosen.forward_only) {
    diags.error(chosen.loc.valid() ? chosen.loc : spec.locs.file,
                fmt::format("--phase {}: phase {}: {} orders training steps only, a forward and a backward for every "
                            "microbatch; a forward-only phase runs its forwards in id order, and `schedcheck verify` "
                            "checks it as written",
                            *phase, describe(chosen), command));
    return false;
  }
  for (auto& list : spec.actions) {
    std::vector<Step> kept;
    std::vector<size_t> from;  // each kept step's index in the written list
    for (size_t k = 0; k < list.size(); ++k) {
      Step s = list[k];
      if (is_collective(s.first.kind)) continue;
      const int32_t mb = s.first.microbatch;  // an overlapped pair goes with its first half
      if (mb < chosen.first || mb >= chosen.first + chosen.microbatches) continue;
      s.first.microbatch -= chosen.first;
      if (s.second && s.second->microbatch >= 0) s.second->microbatch -= chosen.first;
      kept.push_back(s);
      from.push_back(k);
    }
    // A BATCH group stays linked only between members that were next to each other.
    for (size_t k = 0; k < kept.size(); ++k)
      kept[k].batched_with_next = kept[k].batched_with_next && k + 1 < kept.size() && from[k + 1] == from[k] + 1;
    list = std::move(kept);
  }
  spec.microbatches = chosen.microbatches;
  spec.phases.clear();
  spec.forward_only = false;
  *first_id = chosen.first;
  return true;
}

CLI::Validator one_of(std::vector<std::string> names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
  return CLI::Validator(
      [names](std::string& value) -> std::string {
        if (std::find(names.begin(), names.end(), value) != names.end()) return "";
        const std::string near = closest_match(value, names);
        return fmt::format("'{}' is not one of {}{}", value, fmt::join(names, ", "),
                           near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
      },
      "{" + list + "}");
}

int report_spec_errors(const Diagnostics& diags) {
  diags.print(std::cerr);
  std::cerr << fmt::format("schedcheck: {} error{} in the input; nothing was checked\n", diags.error_count(),
                           diags.error_count() == 1 ? "" : "s");
  return kExitSpec;
}

bool write_output(const std::optional<std::string>& path, const std::string& text, const std::string& option) {
  if (!path) {
    std::cout << text;
    return true;
  }
  return write_outputs({OutputFile{option, *path, text}});
}

namespace {

/// Where an output path leads once symbolic links are followed (issue: an output must never replace
/// a link, a FIFO or a device node, nor land on an input under another spelling of its path).
struct OutputTarget {
  std::string real;     ///< absolute path written (links followed); the path as given for a stream
  bool stream = false;  ///< an existing FIFO or character device: written through, never replaced
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string problem;  ///< why it cannot be an output; empty when it can
};

/// The identity of an existing file (device and inode, following links) and its real path.
struct FileId {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string real;
};

FileId file_id(const std::string& path) {
  FileId id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  if (char* r = ::realpath(path.c_str(), nullptr)) {
    id.real = r;
    std::free(r);
  }
  return id;
}

OutputTarget resolve_output(const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  OutputTarget t;
  struct stat st {};
  if (path.empty()) {
    t.problem = fmt::format("{} needs a file name", option);
    return t;
  }
  if (::stat(path.c_str(), &st) == 0) {
    t.exists = true;
    t.dev = st.st_dev;
    t.ino = st.st_ino;
    if (S_ISDIR(st.st_mode)) {
      t.problem = fmt::format("{} {} is a folder, not a file", option, path);
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
      t.stream = true;
      t.real = path;
    } else if (S_ISREG(st.st_mode)) {
      FileId id = file_id(path);
      t.real = id.real.empty() ? fs::absolute(path).string() : id.real;
      const std::string dir = fs::path(t.real).parent_path().string();
      // The file is replaced by a rename, which needs only the folder's write bit: a file the
      // user may not write (mode 0444, another user's) is refused as `>` would refuse it.
      if (::access(t.real.c_str(), W_OK) != 0)
        t.problem = fmt::format("{} {}: cannot write the file: {}", option, path, std::strerror(errno));
      else if (::access(dir.c_str(), W_OK) != 0)
        t.problem = fmt::format("{} {}: cannot write in {}: {}", option, path, dir, std::strerror(errno));
    } else {
      t.problem = fmt::format("{} {} is {}; an output is a regular file, a FIFO or a character device", option, path,
                              S_ISBLK(st.st_mode) ? "a block device" : "a socket");
    }
    return t;
  }
  if (errno != ENOENT) {
    t.problem = fmt::format("{} {}: {}", option, path, std::strerror(errno));
    return t;
  }
  // The file does not exist: follow a dangling link to the path it names, so that the link's
  // target is created and the link itself kept.
  fs::path p(path);
  for (int hops = 0;; ++hops) {
    struct stat lst {};
    if (::lstat(p.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) break;
    if (hops == 40) {
      t.problem = fmt::format("{} {}: too many levels of symbolic links", option, path);
      return t;
    }
    std::error_code ec;
    fs::path to = fs::read_symlink(p, ec);
    if (ec) {
      t.problem = fmt::format("{} {}: {}", option, path, ec.message());
      return t;
    }
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  if (!p.has_filename() || p.filename() == "." || p.filename() == "..") {
    t.problem = fmt::format("{} {} names a folder, not a file", option, path);
    return t;
  }
  fs::path parent = p.parent_path();
  if (parent.empty()) parent = ".";
  FileId dir = file_id(parent.string());
  std::error_code ec;
  if (!dir.exists || !fs::is_directory(parent, ec)) {
    t.problem = fmt::format("{} {}: no such directory {}", option, path, parent.string());
    return t;
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    t.problem = fmt::format("{} {}: cannot write in {}: {}", option, path, parent.string(), std::strerror(errno));
    return t;
  }
  t.real = (fs::path(dir.real) / p.filename()).string();
  return t;
}

bool same_file(const OutputTarget& t, const FileId& id) {
  if (t.exists && id.exists) return t.dev == id.dev && t.ino == id.ino;
  return !t.real.empty() && t.real == id.real;
}

bool same_target(const OutputTarget& a, const OutputTarget& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.real == b.real;
}

/// Writes all of `text` to `fd`; false with errno's reason in `*why`.
bool write_all(int fd, const std::string& text, std::string* why) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = n < 0 ? std::strerror(errno) : "nothing could be written";
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

/// check_output_path, keeping the resolved target in `*out` for the caller.
std::string check_target(const std::string& option, const std::string& path, const std::vector<std::string>& inputs,
                         OutputTarget* out);

}  // namespace

bool write_outputs(const std::vector<OutputFile>& files, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::vector<OutputTarget> targets;
  for (size_t i = 0; i < files.size(); ++i) {
    OutputTarget t;
    std::string problem = check_target(files[i].option, files[i].path, inputs, &t);
    for (size_t j = 0; j < i && problem.empty(); ++j)
      if (same_target(targets[j], t))
        problem = fmt::format("{} {} and {} {} name the same file", files[j].option, files[j].path, files[i].option,
                              files[i].path);
    if (!problem.empty()) {
      std::cerr << "schedcheck: error: " << problem << "; nothing was written\n";
      return false;
    }
    targets.push_back(std::move(t));
  }
  std::vector<std::string> temps(files.size());
  auto fail = [&](const std::string& path, const std::string& reason) {
    std::error_code ec;
    for (const auto& t : temps)
      if (!t.empty()) fs::remove(t, ec);
    std::cerr << "schedcheck: error: cannot write " << path << ": " << reason << "; nothing was written\n";
    return false;
  };
  // Regular files first, each to a temporary file beside its (real) target; streams after them,
  // so that a failure before the renames leaves every regular file as it was.
  for (size_t i = 0; i < files.size(); ++i) {
    if (targets[i].stream) continue;
    fs::path target(targets[i].real);
    std::string pattern = (target.parent_path() / ("." + target.filename().string() + ".XXXXXX")).string();
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    int fd = ::mkstemp(name.data());
    if (fd < 0) return fail(files[i].path, std::strerror(errno));
    temps[i] = name.data();
    std::string why;
    if (!write_all(fd, files[i].text, &why)) {
      ::close(fd);
      return fail(files[i].path, why);
    }
    // mkstemp makes the file 0600; an output is an ordinary file (0666 less the umask), and a
    // file replaced keeps its mode.
    struct stat old {};
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, targets[i].exists && ::stat(targets[i].real.c_str(), &old) == 0 ? (old.st_mode & 07777)
                                                                                 : (0666 & ~mask));
    if (::close(fd) != 0) return fail(files[i].path, std::strerror(errno));
  }
  std::cout.flush();  // what the report printed so far comes first on a shared terminal or pipe
  for (size_t i = 0; i < files.size(); ++i) {
    if (!targets[i].stream) continue;
    int fd = ::open(targets[i].real.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return fail(files[i].path, std::strerror(errno));
    std::string why;
    const bool ok = write_all(fd, files[i].text, &why);
    ::close(fd);
    if (!ok) return fail(files[i].path, why);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (targets[i].stream) continue;
    std::error_code ec;
    fs::rename(temps[i], targets[i].real, ec);
    // The earlier ones are in place already (their temps cleared): a rename in one folder fails
    // only for odd reasons; the rest are removed.
    if (ec) return fail(files[i].path, ec.message());
    temps[i].clear();
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
                  "NCCL's behaviour for large messages; the default: a batched group completes as one, all NCCL "
                  "guarantees), rendezvous:independent (each member of a batched group completes on its own, as "
                  "NCCL does for small groups with few peers), buffered:N (N messages in flight per "
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
  OutputTarget t;
  return check_target(option, path, inputs, &t);
}

namespace {

std::string check_target(const std::string& option, const std::string& path, const std::vector<std::string>& inputs,
                         OutputTarget* out) {
  OutputTarget& t = *out;
  t = resolve_output(option, path);
  if (!t.problem.empty()) return t.problem;
  std::vector<std::string> all = inputs;
  all.insert(all.end(), input_files_read().begin(), input_files_read().end());
  for (const auto& in : all) {
    if (!same_file(t, file_id(in))) continue;
    return std::find(inputs.begin(), inputs.end(), in) != inputs.end()
               ? fmt::format("{} {} would overwrite the input file", option, path)
               : fmt::format("{} {} would overwrite {}, which an input reads", option, path, in);
  }
  return {};
}

}  // namespace

std::string check_output_paths(const std::vector<std::pair<std::string, std::optional<std::string>>>& named,
                               const std::vector<std::string>& inputs) {
  std::vector<std::pair<std::string, OutputTarget>> seen;
  for (const auto& [option, path] : named) {
    if (!path) continue;
    OutputTarget t;
    if (std::string problem = check_target(option, *path, inputs, &t); !problem.empty()) return problem;
    for (const auto& [other, u] : seen)
      if (same_target(u, t)) return fmt::format("{} and {} name the same file {}", other, option, *path);
    seen.emplace_back(option, std::move(t));
  }
  return {};
}

/// Parses each --env NAME=VALUE into `job->env`; the problem (a bad name, a name given twice),
/// or empty.
std::string parse_env(const std::vector<std::string>& items, config::JobContext* job) {
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const bool valid = eq != std::string::npos && !name.empty() &&
                       (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                       std::all_of(name.begin(), name.end(),
                                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!valid) return fmt::format("--env {}: expected NAME=VALUE with a shell variable name (SLURM_NNODES=4)", item);
    if (!job->env.emplace(name, item.substr(eq + 1)).second)
      return fmt::format("--env {} is given twice; give it once", name);
  }
  return {};
}

nlohmann::json diagnostics_value(const Diagnostics& diags) {
  nlohmann::json j = {{"schema_version", kReportSchemaVersion}, {"schedcheck_version", kToolVersion}, {"verdict", "error"},
                      {"exit_code", kExitSpec}, {"diagnostics", nlohmann::json::array()}};
  for (const auto& d : diags.all())
    j["diagnostics"].push_back({{"severity", d.severity == Severity::kError ? "error" : "warning"},
                                {"file", d.loc.valid() ? source_name(d.loc.file) : ""},
                                {"line", d.loc.line},
                                {"col", d.loc.col},
                                {"message", d.message}});
  return j;
}

std::ostream& ReportSink::text() {
  if (any_text_) text_ << "\n";
  any_text_ = true;
  return text_;
}

void ReportSink::add(nlohmann::json report) { values_.push_back(std::move(report)); }

void ReportSink::finish() {
  if (format_ != "json" || !print_json_ || values_.empty()) return;
  const nlohmann::json out = values_.size() == 1 && !list_ ? values_.front() : nlohmann::json(values_);
  text_ << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace sc::cli
