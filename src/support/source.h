// Source files and locations: every spec object keeps the file:line:col it came from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sc {

/// A position in a registered source file. `line` and `col` are 1-based; `file` is an index
/// returned by register_source(), or -1 for "no location" (generated objects).
struct SourceLoc {
  int32_t file = -1;
  int32_t line = 0;
  int32_t col = 0;
  bool valid() const { return file >= 0; }
};

/// Registers a file's name and contents so diagnostics can print the offending line.
/// Returns the file index for SourceLoc::file. Thread-compatible, not thread-safe.
int32_t register_source(std::string name, std::string contents);

/// The registered name of `file` ("<unknown>" for -1).
const std::string& source_name(int32_t file);

/// The text of 1-based `line` of `file`, without its newline; empty when out of range.
std::string_view source_line(int32_t file, int32_t line);

/// "file:line:col" (or "file:line" when col is 0, "<generated>" when invalid).
std::string format_loc(const SourceLoc& loc);

}  // namespace sc
