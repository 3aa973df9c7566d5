#include "support/source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

namespace sc {
namespace {

struct SourceFile {
  std::string name;
  std::string contents;
  std::vector<size_t> line_starts;  ///< offset of each line's first byte; built by the first source_line
};

std::mutex& line_index_mutex() {
  static std::mutex m;
  return m;
}

std::deque<SourceFile>& files() {
  static std::deque<SourceFile> f;
  return f;
}

std::vector<std::string>& read_paths() {
  static std::vector<std::string> paths;
  return paths;
}

}  // namespace

const std::vector<std::string>& input_files_read() { return read_paths(); }

void clear_sources() {
  files().clear();
  read_paths().clear();
}

struct SourceDisplay {
  std::string folder;
  std::function<std::string(const std::string&)> rename;
};

SourceDisplay& source_display() {
  static SourceDisplay d;
  return d;
}

void set_source_display(std::string folder, std::function<std::string(const std::string&)> rename) {
  source_display() = {std::move(folder), std::move(rename)};
}

int32_t register_source(std::string name, std::string contents) {
  const SourceDisplay& d = source_display();
  if (!d.folder.empty() && d.rename && name.compare(0, d.folder.size(), d.folder) == 0) name = d.rename(name);
  files().push_back({std::move(name), std::move(contents)});
  return static_cast<int32_t>(files().size() - 1);
}

const std::string& source_name(int32_t file) {
  static const std::string unknown = "<unknown>";
  if (file < 0 || file >= static_cast<int32_t>(files().size())) return unknown;
  return files()[file].name;
}

std::string_view source_text(int32_t file) {
  if (file < 0 || file >= static_cast<int32_t>(files().size())) return {};
  return files()[file].contents;
}

std::string_view source_line(int32_t file, int32_t line) {
  if (file < 0 || file >= static_cast<int32_t>(files().size()) || line < 1) return {};
  SourceFile& f = files()[file];
  {
    // Indexed once, so that a diagnostic per line of a long file costs a lookup each, where
    // counting line ends from the start made 65,535 "rank has no actions" warnings take 14 s.
    std::lock_guard<std::mutex> lock(line_index_mutex());
    if (f.line_starts.empty()) {
      f.line_starts.push_back(0);
      for (size_t nl = f.contents.find('\n'); nl != std::string::npos; nl = f.contents.find('\n', nl + 1))
        f.line_starts.push_back(nl + 1);
    }
  }
  if (static_cast<size_t>(line) > f.line_starts.size()) return {};
  std::string_view text = f.contents;
  const size_t pos = f.line_starts[static_cast<size_t>(line) - 1];
  size_t end = text.find('\n', pos);
  std::string_view out = text.substr(pos, end == std::string_view::npos ? text.size() - pos : end - pos);
  if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
  return out;
}

std::string format_loc(const SourceLoc& loc) {
  if (!loc.valid()) return "<generated>";
  if (loc.line <= 0) return source_name(loc.file);
  if (loc.col <= 0) return fmt::format("{}:{}", source_name(loc.file), loc.line);
  return fmt::format("{}:{}:{}", source_name(loc.file), loc.line, loc.col);
}

bool read_input_file(const std::string& path, std::string* contents, std::string* why) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    *why = ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file";
    return false;
  }
  if (fs::is_directory(st)) {
    *why = "it is a directory";
    return false;
  }
  if (!fs::is_regular_file(st)) {
    *why = "it is not a regular file";
    return false;
  }
  uint64_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxInputBytes) {
    *why = "it is larger than 256 MiB";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = std::strerror(errno);
    return false;
  }
  // One read into a buffer of the file's size (no stream buffer growing by doubling and no
  // second copy out of it); whatever the file gained since it was measured is appended.
  std::string buf;
  buf.resize(ec ? 0 : size);
  in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  buf.resize(static_cast<size_t>(in.gcount()));
  if (!in.bad() && in.good()) {
    std::ostringstream rest;
    rest << in.rdbuf();
    buf += rest.str();
  }
  if (in.bad()) {
    *why = "read error";
    return false;
  }
  if (buf.size() > kMaxInputBytes) {
    *why = "it is larger than 256 MiB";
    return false;
  }
  *contents = std::move(buf);
  if (std::find(read_paths().begin(), read_paths().end(), path) == read_paths().end()) read_paths().push_back(path);
  return true;
}

}  // namespace sc
