// yaml-cpp helpers shared by the spec loaders.
#include "spec/yaml_util.h"

#include <charconv>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include <fmt/ranges.h>
#include <yaml-cpp/depthguard.h>

#include "support/units.h"

namespace sc::yaml_util {

std::string json_for_yaml(const std::string& json_text) {
  auto hex4 = [&](size_t at, unsigned* v) {
    if (at + 4 > json_text.size()) return false;
    *v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      const char c = json_text[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      *v = *v * 16 + static_cast<unsigned>(d);
    }
    return true;
  };
  std::string out;
  out.reserve(json_text.size());
  bool in_string = false;
  for (size_t i = 0; i < json_text.size(); ++i) {
    const char c = json_text[i];
    if (!in_string) {
      in_string = c == '"';
      out += c;
      continue;
    }
    if (c == '"') in_string = false;
    if (c != '\\' || i + 1 >= json_text.size()) {
      out += c;
      continue;
    }
    unsigned hi = 0, lo = 0;
    if (json_text[i + 1] == 'u' && hex4(i + 2, &hi) && hi >= 0xD800 && hi <= 0xDBFF &&
        json_text[i + 6] == '\\' && json_text[i + 7] == 'u' && hex4(i + 8, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
      out += fmt::format("\\U{:08x}", 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
      i += 11;
      continue;
    }
    out += c;  // any other escape: copied with the character it escapes
    out += json_text[++i];
  }
  return out;
}

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || c >= 0x80)
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    else
      out += static_cast<char>(c);
  }
  return out;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& names) {
  std::string near = closest_match(word, names);
  return near.empty() ? std::string() : fmt::format("; did you mean '{}'?", near);
}

std::string default_name(const std::string& path) {
  std::string s = std::filesystem::path(path).stem().string();
  return s.empty() ? path : s;
}

bool has_yaml_extension(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".yaml" || ext == ".yml";
}

bool declares_key(const std::string& text, const std::string& key) {
  if (text.find('\0') != std::string::npos) return false;
  // Block style (every spec we read): a top-level key is a line that starts at column 0 with the
  // key, plain or quoted, then ':'. Lines of nested maps, lists and block scalars are indented,
  // comments start with '#'. One pass over the text, no parse: detection runs for every front-end.
  size_t b = 0;
  bool flow = false;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    std::string_view line(text.data() + b, e - b);
    b = e + 1;
    if (line.empty() || line[0] == ' ' || line[0] == '\t' || line[0] == '#' || line[0] == '\r' || line[0] == '-' ||
        line[0] == '%' || line.rfind("...", 0) == 0)
      continue;
    if (line[0] == '{' || line[0] == '[') {  // a flow-style document: parsed below
      flow = true;
      break;
    }
    std::string_view name;
    size_t after = 0;
    if (line[0] == '"' || line[0] == '\'') {
      const size_t close = line.find(line[0], 1);
      if (close == std::string_view::npos) continue;
      name = line.substr(1, close - 1);
      after = close + 1;
      while (after < line.size() && (line[after] == ' ' || line[after] == '\t')) ++after;
    } else {
      after = line.find(':');
      if (after == std::string_view::npos) continue;
      name = line.substr(0, after);
      while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    }
    if (after < line.size() && line[after] == ':' &&
        (after + 1 == line.size() || line[after + 1] == ' ' || line[after + 1] == '\t' || line[after + 1] == '\r') &&
        name == key)
      return true;
  }
  if (!flow) return false;
  try {
    const YAML::Node root = YAML::Load(text);
    return root.IsMap() && static_cast<bool>(root[key]);
  } catch (const YAML::Exception&) {
    return false;
  }
}

std::optional<SpecFile> read_spec_file(const std::string& path, Diagnostics& diags) {
  SpecFile out;
  std::string why;
  if (!read_input_file(path, &out.text, &why)) {
    int32_t file = register_source(path, "");
    diags.error(SourceLoc{file, 1, 1}, fmt::format("cannot read the spec: {}", why));
    return std::nullopt;
  }
  out.file = register_source(path, out.text);
  return out;
}

Reader::Reader(int32_t file, Diagnostics& diags, ReaderOptions options)
    : file_(file), diags_(diags), options_(options) {}

SourceLoc Reader::at(int64_t line0, int64_t col0) const {
  return SourceLoc{file_, static_cast<int32_t>(std::max<int64_t>(line0, 0) + 1),
                   static_cast<int32_t>(std::max<int64_t>(col0, 0) + 1)};
}

SourceLoc Reader::loc(const YAML::Node& n) const {
  YAML::Mark m = n.Mark();
  if (m.is_null()) return file_start();
  return at(m.line, m.column);
}

void Reader::error(const SourceLoc& l, std::string message) {
  if (errors_++ < options_.max_errors) diags_.error(l, std::move(message));
}

void Reader::note_unshown() {
  if (errors_ > options_.max_errors)
    diags_.note(file_start(), fmt::format("{} more errors are not shown", errors_ - options_.max_errors));
}

bool Reader::prescan(std::string_view text) {
  int depth = 0;
  int64_t line = 0, col = 0;
  bool comment = false;
  char prev = '\n';
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\0') {
      error(at(line, col), "the spec is not text: it holds a NUL byte");
      return false;
    }
    if (c == '\n') {
      comment = false;
      ++line;
      col = 0;
      prev = c;
      continue;
    }
    if (col == 0) {
      // A block key at the start of a line closes every flow collection (bracket pairs inside
      // quoted or plain text then cannot add up across lines).
      if (std::isalnum(static_cast<unsigned char>(c))) depth = 0;
      // A document marker after content starts a second document. (yaml-cpp's LoadAll can loop
      // forever on some broken input, so documents are told apart here.)
      bool marker = text.compare(i, 3, "---") == 0 &&
                    (i + 3 == text.size() || std::isspace(static_cast<unsigned char>(text[i + 3])));
      if (marker && has_content_) {
        error(at(line, col), "a spec file holds one YAML document; remove everything from here on");
        return false;
      }
      if (marker) {
        i += 2;
        col += 3;
        prev = '-';
        continue;
      }
      if (c == '%') comment = true;  // a directive line
    }
    if (!comment) {
      if (c == '#' && (prev == ' ' || prev == '\t' || prev == '\n' || prev == '-')) {
        comment = true;
      } else if (c == '[' || c == '{') {
        if (++depth > kMaxFlowDepth) {
          error(at(line, col), fmt::format("collections are nested more than {} levels deep", kMaxFlowDepth));
          return false;
        }
      } else if ((c == ']' || c == '}') && depth > 0) {
        --depth;
      }
      if (!comment && !std::isspace(static_cast<unsigned char>(c))) has_content_ = true;
    }
    prev = c;
    ++col;
  }
  return true;
}

std::optional<YAML::Node> Reader::parse(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    diags_.error(e.mark.is_null() ? file_start() : at(e.mark.line, e.mark.column),
                 "collections are nested too deeply");
  } catch (const YAML::Exception& e) {
    diags_.error(e.mark.is_null() ? file_start() : at(e.mark.line, e.mark.column),
                 fmt::format("invalid YAML: {}", printable(e.msg)));
  }
  return std::nullopt;
}

Fields Reader::fields(const YAML::Node& map, const std::string& section, const std::vector<std::string>& allowed) {
  Fields out;
  for (const auto& kv : map) {
    const YAML::Node& k = kv.first;
    if (!k.IsScalar()) {
      error(loc(k), fmt::format("a key must be a name, got {}", describe(k)));
      continue;
    }
    const std::string& name = k.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string where = section.empty() ? "" : fmt::format(" in {}", section);
      std::string msg = fmt::format("unknown key '{}'{}", name, where);
      std::string near = closest_match(name, allowed);
      std::string home;
      if (options_.sections)
        for (const auto& [sec, keys] : *options_.sections)
          if (sec != section && std::find(keys->begin(), keys->end(), name) != keys->end())
            home = sec.empty() ? "the top level" : sec;
      if (!near.empty())
        msg += fmt::format("; did you mean '{}'?", near);
      else if (!home.empty())
        msg += fmt::format("; '{}' belongs in {}", name, home);
      else
        msg += fmt::format(" (expected one of: {})", fmt::join(allowed, ", "));
      error(loc(k), msg);
      continue;
    }
    auto [pos, inserted] = out.emplace(name, Entry{k, kv.second});
    if (!inserted) {
      std::string shown_name = options_.qualify_duplicates && !section.empty() ? section + "." + name : name;
      error(loc(k), fmt::format("duplicate key '{}' (first given at line {})", shown_name, loc(pos->second.key).line));
    }
  }
  return out;
}

bool Reader::is_map(const Entry& e, const std::string& key, std::string_view what) {
  if (e.value.IsMap()) return true;
  if (what.empty())
    error(loc(e), fmt::format("{} must be a map, got {}", key, describe(e.value)));
  else
    error(loc(e), fmt::format("{} must be a map of {}, got {}", key, what, describe(e.value)));
  return false;
}

std::optional<int64_t> Reader::whole(const Entry& e, const std::string& key, int64_t min, int64_t max) {
  const std::string s = e.value.IsScalar() ? e.value.Scalar() : std::string();
  auto all_digits = [](std::string_view t) {
    return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!all_digits(s)) {
    if (s.size() > 1 && s[0] == '-' && all_digits(std::string_view(s).substr(1)))
      error(loc(e), fmt::format("{} must be at least {}, got {}", key, min, s));
    else
      error(loc(e), fmt::format("{} must be a whole number, got {}", key, describe(e.value)));
    return std::nullopt;
  }
  if (s.size() > 18) {
    error(loc(e), fmt::format("{} is too large (at most {})", key, max));
    return std::nullopt;
  }
  int64_t v = std::stoll(s);
  if (v < min) {
    error(loc(e), fmt::format("{} must be at least {}, got {}", key, min, v));
    return std::nullopt;
  }
  if (v > max) {
    error(loc(e), fmt::format("{} is too large (at most {})", key, max));
    return std::nullopt;
  }
  return v;
}

std::optional<bool> Reader::boolean(const Entry& e, const std::string& key) {
  if (e.value.IsScalar()) {
    const std::string& s = e.value.Scalar();
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
  }
  error(loc(e), fmt::format("{} must be true or false, got {}", key, describe(e.value)));
  return std::nullopt;
}

std::optional<std::string> Reader::choice(const Entry& e, const std::string& key,
                                          const std::vector<std::string>& names) {
  if (e.value.IsScalar()) {
    const std::string& s = e.value.Scalar();
    if (std::find(names.begin(), names.end(), s) != names.end()) return s;
    error(loc(e), fmt::format("{} must be one of {}, got '{}'{}", key, fmt::join(names, ", "), shown(s),
                              did_you_mean(s, names)));
    return std::nullopt;
  }
  error(loc(e), fmt::format("{} must be one of {}, got {}", key, fmt::join(names, ", "), describe(e.value)));
  return std::nullopt;
}

std::optional<std::string> Reader::text(const Entry& e, const std::string& key) {
  if (e.value.IsScalar() && !e.value.Scalar().empty()) return e.value.Scalar();
  error(loc(e), fmt::format("{} must be text, got {}", key, describe(e.value)));
  return std::nullopt;
}

std::optional<double> Reader::duration(const YAML::Node& n, const SourceLoc& l, const std::string& key) {
  return parsed(n, l, key, "a duration such as 1.5ms", parse_duration_s);
}

std::optional<int64_t> Reader::bytes(const YAML::Node& n, const SourceLoc& l, const std::string& key) {
  return parsed(n, l, key, "a byte count such as 64MiB", parse_bytes);
}

void Reader::check_version(const Entry* v) {
  if (!v) {
    error(file_start(), "missing required key 'schedcheck' (the spec version, 1)");
    return;
  }
  if (auto n = whole(*v, "schedcheck", 0, 1'000'000); n && *n != 1)
    error(loc(*v), fmt::format("unsupported spec version {}; this schedcheck reads version 1", *n));
}

void Reader::numerics_tolerances(const Entry& e, std::optional<double>& max_relative_error,
                                 std::optional<double>& max_bias, bool& deterministic) {
  if (!is_map(e, "numerics", "max_relative_error, max_bias and deterministic")) return;
  Fields f = fields(e.value, "numerics", {"max_relative_error", "max_bias", "deterministic"});
  if (auto it = f.find("deterministic"); it != f.end())
    if (auto b = boolean(it->second, "numerics.deterministic")) deterministic = *b;
  auto number = [&](const char* key, std::optional<double>& out) {
    auto it = f.find(key);
    if (it == f.end()) return;
    auto v = parsed(it->second.value, loc(it->second), fmt::format("numerics.{}", key), "a number such as 1e-3",
                    [](std::string_view s, std::string* why) -> std::optional<double> {
                      double d = 0;
                      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
                      if (ec != std::errc() || ptr != s.data() + s.size() || !(d >= 0) || d > 1e6) {
                        if (why) *why = fmt::format("'{}' is not a non-negative number", s);
                        return std::nullopt;
                      }
                      return d;
                    });
    if (v) out = *v;
  };
  number("max_relative_error", max_relative_error);
  number("max_bias", max_bias);
}

}  // namespace sc::yaml_util
