#include "config/key_changes.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <toml++/toml.h>
#include <yaml-cpp/yaml.h>

#include "config/shell_args.h"
#include "config/toml_edit.h"
#include "support/nesting.h"
#include "support/source.h"

namespace sc::config {
namespace {

/// A key's value as written and its line.
struct Entry {
  std::string value;
  int line = 0;
};

/// Keys in file order, each once (a later occurrence replaces the value, as the readers take it).
struct Flat {
  std::vector<std::string> order;
  std::map<std::string, Entry> at;
  void put(const std::string& key, std::string value, int line) {
    auto [it, added] = at.try_emplace(key);
    if (added) order.push_back(key);
    it->second = {std::move(value), line};
  }
};

std::string shorten(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

/// `lines`: the document's lines, for a value's text as written (`lr = 3e-4` stays `3e-4`).
void flatten_toml(const toml::table& t, const std::string& prefix, const std::vector<std::string>& lines, Flat& out) {
  for (auto&& [k, v] : t) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = v.as_table(); sub && !sub->is_inline()) {
      flatten_toml(*sub, key, lines, out);
    } else if (const toml::array* arr = v.as_array(); arr && arr->is_array_of_tables()) {
      for (size_t i = 0; i < arr->size(); ++i)
        flatten_toml(*arr->get(i)->as_table(), key + "[" + std::to_string(i) + "]", lines, out);
    } else {
      const auto& src = v.source();
      std::string text;
      if (src.begin.line == src.end.line && src.begin.line >= 1 && src.begin.line <= lines.size() &&
          src.end.column > src.begin.column) {
        const std::string& line = lines[src.begin.line - 1];
        const size_t from = toml_column_to_byte(line, src.begin.column);
        text = line.substr(from, toml_column_to_byte(line, src.end.column) - from);
      } else {
        std::ostringstream s;
        v.visit([&s](auto&& node) { s << node; });
        text = s.str();
      }
      out.put(key, shorten(text), static_cast<int>(src.begin.line));
    }
  }
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

void flatten_yaml(const YAML::Node& n, const std::string& prefix, Flat& out, int depth) {
  if (depth > kMaxInputNesting) return;
  if (n.IsMap()) {
    for (const auto& kv : n) {
      const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      flatten_yaml(kv.second, prefix.empty() ? k : prefix + "." + k, out, depth + 1);
    }
  } else if (n.IsSequence()) {
    bool scalars = true;
    for (const auto& item : n) scalars = scalars && (item.IsScalar() || item.IsNull());
    if (scalars) {
      std::string v = "[";
      for (const auto& item : n) v += (v.size() > 1 ? ", " : "") + (item.IsScalar() ? item.Scalar() : std::string("null"));
      out.put(prefix, shorten(v + "]"), n.Mark().line + 1);
    } else {
      size_t i = 0;
      for (const auto& item : n) flatten_yaml(item, prefix + "[" + std::to_string(i++) + "]", out, depth + 1);
    }
  } else {
    out.put(prefix, shorten(n.IsScalar() ? n.Scalar() : "null"), n.Mark().line + 1);
  }
}

std::optional<Flat> flatten(const std::string& path, const std::string& text) {
  const auto ends = [&path](const char* ext) {
    const std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  Flat f;
  try {
    if (ends(".toml")) {
      flatten_toml(toml::parse(text), "", split_lines(text), f);
    } else if (ends(".yaml") || ends(".yml") || ends(".json")) {
      if (json_nested_too_deep(text)) return std::nullopt;
      flatten_yaml(YAML::Load(text), "", f, 0);
    } else if (ends(".sh")) {
      // The launch script's flags after expansion, each at the line of its (last) flag word.
      const int32_t file = register_source(path, text);
      const ShellArgs sh = read_shell_args(file, text);
      for (const ShellFlag& flag : sh.flags) {
        std::string v;
        for (const ShellToken& t : flag.values) v += (v.empty() ? "" : " ") + t.text;
        f.put(flag.name, shorten(v.empty() ? "(set)" : v), flag.loc.line);
      }
    } else {
      return std::nullopt;
    }
  } catch (const std::exception&) {  // toml::parse_error, YAML::Exception: the readers report it
    return std::nullopt;
  }
  return f;
}

}  // namespace

std::vector<KeyChange> changed_keys(const std::string& path, const std::string& old_text, const std::string& new_text) {
  auto o = flatten(path, old_text);
  auto n = flatten(path, new_text);
  std::vector<KeyChange> out;
  if (!o || !n) return out;
  for (const std::string& k : n->order) {
    const Entry& ne = n->at[k];
    auto it = o->at.find(k);
    if (it == o->at.end()) out.push_back({k, std::nullopt, ne.value, 0, ne.line});
    else if (it->second.value != ne.value) out.push_back({k, it->second.value, ne.value, it->second.line, ne.line});
  }
  for (const std::string& k : o->order)
    if (!n->at.count(k)) out.push_back({k, o->at[k].value, std::nullopt, o->at[k].line, 0});
  // File order (toml++ iterates a table's keys sorted): by line in the new file, then the keys
  // only the old file has, by their old line.
  std::stable_sort(out.begin(), out.end(), [](const KeyChange& a, const KeyChange& b) {
    const bool an = a.new_value.has_value(), bn = b.new_value.has_value();
    if (an != bn) return an;
    return an ? a.new_line < b.new_line : a.old_line < b.old_line;
  });
  return out;
}

}  // namespace sc::config
