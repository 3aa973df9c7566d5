// The one nesting cap for the structured text schedcheck reads (JSON files, YAML flow collections).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sc {

/// Deepest nesting of arrays and objects (`[[[...` and `{"a": {...`) any JSON or YAML input may
/// have. A spec, config or plan share is a few levels deep; the cap keeps every recursive walk
/// over a parsed document (a copy, a comparison, a dump, yaml-cpp's own parser) far from the
/// stack's end, whatever the input: a plan share nested 200,000 arrays deep once crashed
/// `plan --merge` in nlohmann::json's recursive copy.
inline constexpr int kMaxInputNesting = 256;

/// A 1-based line and column in a text.
struct TextPosition {
  int32_t line = 1;
  int32_t col = 1;
};

/// Where JSON `text` first opens an array or object deeper than `max_depth` (the `[` or `{`,
/// counted outside strings, with `\"` escapes skipped), or nullopt when it nests no deeper. One
/// pass, O(text) time and O(1) memory; it does not check that the text is JSON (the parser that
/// runs after it does). Columns count bytes.
std::optional<TextPosition> json_nested_too_deep(std::string_view text, int max_depth = kMaxInputNesting);

}  // namespace sc
