// Edits a TOML document as text: the keys asked for are replaced, added or removed on their own
// lines, and every other byte (comments, key order, number spelling, blank lines) is kept.
// `synth --emit` uses it so that a reviewer's diff of the emitted config shows only the keys
// that changed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace sc::config {

/// One key of a table to set or remove.
struct TomlKeyEdit {
  std::string key;                    ///< a bare key of the table (no dots)
  std::optional<std::string> value;   ///< a TOML literal (`"1F1B"`, `2`); nullopt removes the key
};

/// Applies `edits` to the keys of top-level table `table` in `text`:
/// - a key that exists gets its value replaced where it stands (a trailing comment is kept);
/// - a key to set that does not exist gets a line `key = value` after the table's last key (or
///   its header), or, with no such table, a new `[table]` section at the end;
/// - a key to remove loses its line; removing an absent key does nothing.
/// The line ending of the document (LF or CRLF) is kept. Returns nullopt with a reason in `why`
/// when the document does not parse, the table is written inline or only with dotted keys, a
/// value to replace spans several lines, or a line to remove holds more than its key.
std::optional<std::string> edit_toml_table(const std::string& text, const std::string& table,
                                           const std::vector<TomlKeyEdit>& edits, std::string* why);

/// The byte offset in `line` (UTF-8) of toml++'s 1-based `column`, which counts code points;
/// line.size() when the column is past the end.
size_t toml_column_to_byte(const std::string& line, size_t column);

/// `s` as a TOML basic string literal (quoted; `"`, `\` and control characters escaped).
std::string toml_string_literal(const std::string& s);

}  // namespace sc::config
