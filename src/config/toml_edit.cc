#include "config/toml_edit.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace sc::config {

size_t toml_column_to_byte(const std::string& line, size_t column) {
  size_t at = 0;
  for (size_t seen = 1; seen < column && at < line.size(); ++seen) {
    ++at;  // past the lead byte, then past its continuation bytes (10xxxxxx)
    while (at < line.size() && (static_cast<unsigned char>(line[at]) & 0xC0) == 0x80) ++at;
  }
  return std::min(at, line.size());
}

std::string toml_string_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\u{:04X}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::optional<std::string> edit_toml_table(const std::string& text, const std::string& table,
                                           const std::vector<TomlKeyEdit>& edits, std::string* why) {
  toml::table root;
  try {
    root = toml::parse(text);
  } catch (const toml::parse_error& e) {
    *why = fmt::format("the config does not parse: {}", e.description());
    return std::nullopt;
  }
  // The document as lines, each without its ending; the ending is put back when joining.
  const std::string eol = text.find("\r\n") != std::string::npos ? "\r\n" : "\n";
  std::vector<std::string> lines;
  for (size_t at = 0;;) {
    const size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  const bool ends_with_newline = !text.empty() && text.back() == '\n';
  if (ends_with_newline) lines.pop_back();  // the empty piece after the last ending

  toml::table* tb = root[table].as_table();
  int64_t header_line = -1;  // 1-based line of `[table]`
  int64_t last_entry = -1;   // 1-based last line of the table's own entries
  if (tb) {
    if (tb->is_inline()) {
      *why = fmt::format("[{}] is written as an inline table; set its keys by hand", table);
      return std::nullopt;
    }
    const auto& src = tb->source();
    const std::string& head = src.begin.line >= 1 && src.begin.line <= lines.size() ? lines[src.begin.line - 1] : "";
    const size_t first = head.find_first_not_of(" \t");
    if (first == std::string::npos || head[first] != '[') {
      *why = fmt::format("[{}] is set with dotted keys, not a [{}] section; set its keys by hand", table, table);
      return std::nullopt;
    }
    header_line = src.begin.line;
    for (auto&& [k, v] : *tb) {
      if ((v.is_table() && !v.as_table()->is_inline()) || v.is_array_of_tables()) continue;  // a section of its own
      last_entry = std::max<int64_t>(last_entry, static_cast<int64_t>(v.source().end.line));
    }
  }

  struct Change {
    int64_t line;       // 1-based
    int kind;           // 0 replace [col0, col1), 1 erase the line, 2 insert `text` after the line
    size_t col0 = 0, col1 = 0;
    std::string text;
  };
  std::vector<Change> changes;
  std::vector<std::string> added;
  for (const TomlKeyEdit& e : edits) {
    toml::node* n = tb ? tb->get(e.key) : nullptr;
    if (!n) {
      if (e.value) added.push_back(fmt::format("{} = {}", e.key, *e.value));
      continue;
    }
    const auto& s = n->source();
    if (s.begin.line != s.end.line || s.begin.line < 1 || s.begin.line > lines.size()) {
      *why = fmt::format("{}.{} spans several lines; set it by hand", table, e.key);
      return std::nullopt;
    }
    const std::string& line = lines[s.begin.line - 1];
    const size_t value_begin = toml_column_to_byte(line, s.begin.column);
    const size_t value_end = toml_column_to_byte(line, s.end.column);
    if (e.value) {
      changes.push_back({static_cast<int64_t>(s.begin.line), 0, value_begin, value_end, *e.value});
    } else {
      const size_t key_at = line.find_first_not_of(" \t");
      const std::string rest = line.substr(value_end);
      const size_t after = rest.find_first_not_of(" \t");
      if (key_at == std::string::npos || line.compare(key_at, e.key.size(), e.key) != 0 ||
          (after != std::string::npos && rest[after] != '#')) {
        *why = fmt::format("line {} holds more than {}.{}; remove it by hand", s.begin.line, table, e.key);
        return std::nullopt;
      }
      changes.push_back({static_cast<int64_t>(s.begin.line), 1, 0, 0, ""});
    }
  }
  if (!added.empty() && tb) {
    std::string block;
    for (size_t k = 0; k < added.size(); ++k) block += (k ? "\n" : "") + added[k];
    changes.push_back({std::max(header_line, last_entry), 2, 0, 0, block});
  }
  // Bottom-up, so that earlier lines keep their numbers; on one line an insertion after it
  // first, then its removal, then replacements right to left.
  std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    if (a.line != b.line) return a.line > b.line;
    if (a.kind != b.kind) return a.kind > b.kind;
    return a.col0 > b.col0;
  });
  for (const Change& c : changes) {
    std::string& line = lines[c.line - 1];
    if (c.kind == 0) {
      line = line.substr(0, c.col0) + c.text + line.substr(std::min(line.size(), c.col1));
    } else if (c.kind == 1) {
      lines.erase(lines.begin() + (c.line - 1));
    } else {
      std::vector<std::string> block;
      for (size_t at = 0;;) {
        const size_t nl = c.text.find('\n', at);
        block.push_back(c.text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
        if (nl == std::string::npos) break;
        at = nl + 1;
      }
      lines.insert(lines.begin() + c.line, block.begin(), block.end());
    }
  }
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) out += lines[k] + (k + 1 < lines.size() || ends_with_newline ? eol : "");
  if (!added.empty() && !tb) {
    if (!out.empty() && out.back() != '\n') out += eol;
    out += eol + "[" + table + "]" + eol;
    for (const std::string& a : added) out += a + eol;
  }
  try {
    (void)toml::parse(out);
  } catch (const toml::parse_error& e) {
    *why = fmt::format("the edited config does not parse ({}); set the keys by hand", e.description());
    return std::nullopt;
  }
  return out;
}

}  // namespace sc::config
