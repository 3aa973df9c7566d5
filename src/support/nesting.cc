// JSON nesting depth, checked before any parser builds a document from the text.
#include "support/nesting.h"

namespace sc {

std::optional<TextPosition> json_nested_too_deep(std::string_view text, int max_depth) {
  TextPosition at;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character (an escaped newline is not JSON; the parser says so)
        at.col += 2;
        continue;
      }
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return at;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    if (c == '\n') {
      ++at.line;
      at.col = 1;
    } else {
      ++at.col;
    }
  }
  return std::nullopt;
}

}  // namespace sc
