#include "config/file_facts.h"

#include <fnmatch.h>

#include <filesystem>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <regex>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/preset_names.h"
#include "model/cost_model.h"

namespace sc::config {
namespace {

constexpr const char* kKeys[] = {"gpus", "hardware", "model"};

/// A positive integer at most `max` written in decimal digits only; 0 otherwise.
int64_t positive(const std::string& v, int64_t max) {
  if (v.empty() || v.size() > 9 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) return 0;
  const int64_t x = std::strtoll(v.c_str(), nullptr, 10);
  return x >= 1 && x <= max ? x : 0;
}

/// " (did you mean 'x'?)" or empty.
std::string suggestion(const std::string& word, const std::vector<std::string>& names) {
  const std::string near = closest_match(word, names);
  return near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near);
}

/// One directive line: `body` is the text after "schedcheck:", starting at 1-based column `col`.
void read_directive(int32_t file, int32_t line, const std::string& body, int32_t col, FileFacts& f, Diagnostics& diags) {
  size_t i = 0;
  while (i < body.size()) {
    if (body[i] == ' ' || body[i] == '\t' || body[i] == '\r') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < body.size() && body[end] != ' ' && body[end] != '\t' && body[end] != '\r') ++end;
    const std::string item = body.substr(i, end - i);
    const SourceLoc at{file, line, col + static_cast<int32_t>(i)};
    i = end;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::vector<std::string> keys(std::begin(kKeys), std::end(kKeys));
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      diags.error(at, fmt::format("unknown fact '{}' in the schedcheck: directive{}; it states {} as KEY=VALUE "
                                  "(gpus=64 hardware=a100-80gb)", key, suggestion(key, keys), fmt::join(keys, ", ")));
      continue;
    }
    if (eq == std::string::npos || eq + 1 == item.size()) {
      diags.error(at, fmt::format("'{}' in the schedcheck: directive needs a value, as {}=...", item, key));
      continue;
    }
    const std::string value = item.substr(eq + 1);
    SourceLoc* stated = key == "gpus" ? &f.gpus_at : key == "hardware" ? &f.hardware_at : &f.model_at;
    if (stated->valid()) {
      diags.error(at, fmt::format("{} is stated twice (first at {})", key, format_loc(*stated)));
      continue;
    }
    if (key == "gpus") {
      f.gpus = static_cast<int32_t>(positive(value, int64_t{1} << 20));
      if (!f.gpus) {
        diags.error(at, fmt::format("gpus={}: expected a whole number of GPUs from 1 to 1048576", value));
        continue;
      }

    } else if (key == "hardware") {
      auto h = model::hardware_preset(value);
      if (!h) {
        diags.error(at, fmt::format("hardware={}: no such GPU preset{}; the presets are {}", value,
                                    hardware_preset_hint(value),
                                    fmt::join(model::hardware_preset_names(), ", ")));
        continue;
      }
      f.hardware = h->name;
    } else {
      auto m = model::model_preset(value);
      if (!m) {
        diags.error(at, fmt::format("model={}: no such model preset{}; the presets are {}", value,
                                    model_preset_hint(value),
                                    fmt::join(model::model_preset_names(), ", ")));
        continue;
      }
      f.model = m->name;
    }
    *stated = at;
  }
}

/// Calls `fn(line_number, line)` for each line of `text` (1-based; without its '\n').
template <typename Fn>
void for_each_line(const std::string& text, Fn fn) {
  int32_t line = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    fn(++line, text.substr(start, end - start));
    start = end + 1;
  }
}

/// Each fact `into` does not state, taken from `from` with its location.
void fill_unstated(FileFacts& into, const FileFacts& from) {
  if (!into.gpus_at.valid() && from.gpus_at.valid()) into.gpus = from.gpus, into.gpus_at = from.gpus_at;
  if (!into.hardware_at.valid() && from.hardware_at.valid()) into.hardware = from.hardware, into.hardware_at = from.hardware_at;
  if (!into.model_at.valid() && from.model_at.valid()) into.model = from.model, into.model_at = from.model_at;
}

/// The facts file that applies to `config_path`: the first `.schedcheck-facts` found walking up
/// from the config's folder, stopping after the repository's root (a folder with `.git`) or at
/// the filesystem's root; empty when none.
std::filesystem::path find_facts_file(const std::string& config_path) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(config_path, ec).parent_path();
  if (ec) return {};
  for (int depth = 0; depth < 256 && !dir.empty(); ++depth) {
    const std::filesystem::path candidate = dir / kFactsFileName;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
    if (std::filesystem::exists(dir / ".git", ec) || dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return {};
}

/// The facts the repository's facts file gives `config_path`: for each fact, the first line
/// whose glob matches the config's path relative to the facts file's folder. Errors in a
/// matching line are located there.
FileFacts repository_facts(const std::string& config_path, Diagnostics& diags) {
  FileFacts out;
  const std::filesystem::path facts = find_facts_file(config_path);
  if (facts.empty()) return out;
  std::string text, why;
  if (!read_input_file(facts.string(), &text, &why)) {
    diags.error(SourceLoc{}, fmt::format("{}: {}", facts.string(), why));
    return out;
  }
  std::error_code ec;
  const std::string rel =
      std::filesystem::relative(std::filesystem::absolute(config_path, ec), facts.parent_path(), ec).generic_string();
  if (ec || rel.empty()) return out;
  const int32_t file = register_source(facts.string(), text);
  for_each_line(text, [&](int32_t line, const std::string& l) {
    const size_t first = l.find_first_not_of(" \t\r");
    if (first == std::string::npos || l[first] == '#') return;
    const size_t colon = l.find(": ", first);
    if (colon == std::string::npos) {
      diags.error(SourceLoc{file, line, static_cast<int32_t>(first) + 1},
                  "a facts line is GLOB: KEY=VALUE..., as configs/*.toml: gpus=64 hardware=a100-80gb");
      return;
    }
    const std::string glob = l.substr(first, colon - first);
    if (fnmatch(glob.c_str(), rel.c_str(), 0) != 0) return;
    FileFacts here;
    read_directive(file, line, l.substr(colon + 1), static_cast<int32_t>(colon) + 2, here, diags);
    fill_unstated(out, here);
  });
  return out;
}

}  // namespace

FileFacts read_file_facts(int32_t file, const std::string& text, bool torchtitan, Diagnostics& diags) {
  FileFacts f;
  SourceLoc note_at;
  int32_t note_gpus = 0;
  std::string note_hw;
  for_each_line(text, [&](int32_t line, const std::string& l) {
    const size_t hash = l.find_first_not_of(" \t");
    if (hash == std::string::npos || l[hash] != '#') return;
    const size_t word = l.find_first_not_of(" \t", hash + 1);
    if (word == std::string::npos) return;
    static const std::string kTag = "schedcheck:";
    if (l.compare(word, kTag.size(), kTag) == 0) {
      read_directive(file, line, l.substr(word + kTag.size()), static_cast<int32_t>(word + kTag.size()) + 1, f, diags);
      return;
    }
    // torchtitan's presets: "# NOTE: this toml config is a preset for 64 A100 GPUs."
    static const std::regex note(R"(preset for (\d{1,7}) ([A-Za-z0-9-]+) GPUs)");
    std::smatch m;
    if (torchtitan && !note_at.valid() && std::regex_search(l, m, note)) {
      note_at = SourceLoc{file, line, static_cast<int32_t>(m.position(0)) + 1};
      note_gpus = static_cast<int32_t>(positive(m[1].str(), int64_t{1} << 20));
      if (auto h = model::hardware_preset(m[2].str())) note_hw = h->name;
      else
        diags.warning(note_at, fmt::format("the preset comment names {} GPUs, which no hardware preset describes: "
                                           "state hardware= in a schedcheck: directive or pass --hardware",
                                           m[2].str()));
    }
  });
  if (note_at.valid()) {
    auto take = [&](auto& fact, SourceLoc& at, const auto& noted, const char* key) {
      using T = std::decay_t<decltype(noted)>;
      if (at.valid() && noted != T() && fact != noted)
        diags.error(at, fmt::format("{}={} differs from the preset comment at {}, which says {}", key, fact,
                                    format_loc(note_at), noted));
      else if (!at.valid() && noted != T()) {
        fact = noted;
        at = note_at;
      }
    };
    take(f.gpus, f.gpus_at, note_gpus, "gpus");
    take(f.hardware, f.hardware_at, note_hw, "hardware");
  }
  return f;
}

JobContext merge_file_facts(const JobContext& cli, const FileFacts& facts, Diagnostics& diags) {
  JobContext ctx = cli;
  auto merge = [&](auto& into, const auto& stated, const SourceLoc& at, const char* option, const char* key) {
    if (!at.valid()) return;  // the file leaves it open: the command line's, if any
    if (into != std::decay_t<decltype(into)>() && into != stated)
      diags.warning(at, fmt::format("{} {} is not applied to this file: it states {}={} here", option, into, key, stated));
    into = stated;
  };
  merge(ctx.gpus, facts.gpus, facts.gpus_at, "--gpus", "gpus");
  merge(ctx.hardware, facts.hardware, facts.hardware_at, "--hardware", "hardware");
  merge(ctx.model, facts.model, facts.model_at, "--model", "model");
  return ctx;
}

void locate_file_facts(const FileFacts& facts, TrainingJob* job) {
  if (facts.gpus_at.valid() && job->world == facts.gpus) job->where["world"] = facts.gpus_at;
  if (facts.hardware_at.valid() && job->hardware == facts.hardware) job->where["hardware"] = facts.hardware_at;
  if (facts.model_at.valid() && job->model == facts.model) job->where["model"] = facts.model_at;
}

bool read_with_file_facts(const std::string& path, const JobContext& cli, bool torchtitan, TrainingJob* job,
                          Diagnostics& diags, const std::function<bool(const JobContext&)>& read) {
  std::string text, why;
  if (!read_input_file(path, &text, &why) || text.find('\0') != std::string::npos) return read(cli);
  FileFacts facts = read_file_facts(register_source(path, text), text, torchtitan, diags);
  // What the file leaves open, the repository's facts file may state.
  fill_unstated(facts, repository_facts(path, diags));
  if (diags.has_errors()) return false;
  if (!read(merge_file_facts(cli, facts, diags))) return false;
  locate_file_facts(facts, job);
  return true;
}

}  // namespace sc::config
