// Input text made safe to print on a terminal.
#pragma once

#include <string>
#include <string_view>

namespace sc {

/// `text` with every control byte other than tab and newline, and DEL, shown as `\xNN`
/// (lower-case hex): input text quoted in a message or a report (a YAML scalar, a plan share's
/// model name holding "\e[2J") never sends an escape sequence to the terminal. Other bytes,
/// UTF-8 included, are unchanged. Diagnostics print their messages through it.
std::string escape_controls(std::string_view text);

}  // namespace sc
