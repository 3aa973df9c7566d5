// A linear pre-scan of TOML text for nesting that the TOML parser would follow by recursion.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sc::config {

/// Deepest nesting of arrays and inline tables (`[` and `{` in values, a header's brackets)
/// that a TOML file may have. A training config nests two or three deep.
inline constexpr int kMaxTomlNesting = 64;
/// Most dotted parts a key or table header may have on one line. A config's deepest header is
/// about three parts (`[parallelism.pipeline]`).
inline constexpr int kMaxTomlKeyParts = 128;

/// Where a TOML text passes one of the limits above, and why (1-based line and column).
struct TomlLimit {
  int32_t line = 1, col = 1;
  std::string message;
};

/// Scans `text` once (time linear in its size, no recursion), skipping strings and comments, and
/// returns the first place where arrays or inline tables nest deeper than kMaxTomlNesting, or a
/// key or header has more than kMaxTomlKeyParts dotted parts; nullopt when neither happens. toml++
/// (3.x) parses both by recursion, so a header of 30,000 dotted parts or 40,000 nested brackets
/// would exhaust the stack: this check runs first. A dot between two digits (a float, a time) is
/// not a key separator and is not counted.
std::optional<TomlLimit> toml_nesting_limit(const std::string& text);

}  // namespace sc::config
