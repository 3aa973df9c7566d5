// A linear pre-scan of TOML text for nesting that the TOML parser would follow by recursion.
#include "config/toml_limits.h"

#include <cctype>

namespace sc::config {

std::optional<TomlLimit> toml_nesting_limit(const std::string& text) {
  int32_t line = 1, col = 1;
  int depth = 0, dots = 0;
  const size_t n = text.size();
  auto digit = [&](size_t k) { return k < n && std::isdigit(static_cast<unsigned char>(text[k])); };
  size_t i = 0;
  auto step = [&] {
    if (text[i] == '\n') {
      ++line;
      col = 1;
      dots = 0;
    } else {
      ++col;
    }
    ++i;
  };
  while (i < n) {
    const char c = text[i];
    if (c == '#') {  // a comment runs to the end of the line
      while (i < n && text[i] != '\n') step();
      continue;
    }
    if (c == '"' || c == '\'') {  // a basic or literal string, one line or multi-line
      const bool multi = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
      const int32_t keep_dots = dots;
      for (int k = 0; k < (multi ? 3 : 1); ++k) step();
      while (i < n) {
        if (c == '"' && text[i] == '\\' && i + 1 < n) {
          step();
          step();
          continue;
        }
        if (text[i] == c && (!multi || (i + 2 < n && text[i + 1] == c && text[i + 2] == c))) {
          for (int k = 0; k < (multi ? 3 : 1); ++k) step();
          break;
        }
        if (!multi && text[i] == '\n') break;  // unterminated: the parser reports it
        step();
      }
      if (!multi) dots = keep_dots;  // a quoted key part stays on its line
      continue;
    }
    if (c == '[' || c == '{') {
      if (++depth > kMaxTomlNesting)
        return TomlLimit{line, col,
                         "arrays and inline tables nest more than " + std::to_string(kMaxTomlNesting) +
                             " deep: a training config nests two or three deep, so this is not read"};
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (c == '.' && !(i > 0 && digit(i - 1) && digit(i + 1))) {
      if (++dots > kMaxTomlKeyParts - 1)
        return TomlLimit{line, col,
                         "a key or table header has more than " + std::to_string(kMaxTomlKeyParts) +
                             " dotted parts: a training config's keys have two or three, so this is not read"};
    }
    step();
  }
  return std::nullopt;
}

}  // namespace sc::config
