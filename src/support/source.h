// Source files and locations: every spec object keeps the file:line:col it came from.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

/// Makes register_source show files under `folder` (a path prefix, as the files are named when
/// registered) by another name: `rename(path_under_folder)` gives the name printed in
/// diagnostics. For inputs read from a private temporary folder (`diff --git` materialises a
/// revision there), so that no message names the temporary path. An empty `folder` clears it.
void set_source_display(std::string folder, std::function<std::string(const std::string&)> rename);

/// Forgets every registered source and every path read (SourceLocs made before become
/// invalid). For fuzzers that parse millions of inputs in one process.
void clear_sources();

/// The registered name of `file` ("<unknown>" for -1).
const std::string& source_name(int32_t file);

/// The whole registered text of `file`; empty when out of range. The view stays valid until the
/// next register_source (a short text lives inside its string, which registering may move).
std::string_view source_text(int32_t file);

/// The text of 1-based `line` of `file`, without its newline; empty when out of range.
std::string_view source_line(int32_t file, int32_t line);

/// "file:line:col" ("file:line" when col is 0, "file" when line is 0, "<generated>" when invalid).
std::string format_loc(const SourceLoc& loc);

/// Largest input file schedcheck reads, in bytes (256 MiB).
inline constexpr uint64_t kMaxInputBytes = uint64_t{256} << 20;

/// Reads a regular file of at most kMaxInputBytes into `*contents`. False with `*why` set
/// ("no such file", "it is a directory", "it is not a regular file", "it is larger than 256
/// MiB", or the system's reason) otherwise; devices, FIFOs and directories are refused before
/// any read, so /dev/zero cannot make it read forever.
bool read_input_file(const std::string& path, std::string* contents, std::string* why);

/// The paths read_input_file has read so far, as given, in order (a spec and every file it
/// references, such as a schedule.csv). An output never replaces one of them.
const std::vector<std::string>& input_files_read();

}  // namespace sc
