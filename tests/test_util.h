// Helpers shared by the tests: corpus paths, reading files, running the CLI.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sc::test {

/// The shared corpus folder, or empty when it is absent (tests then skip cleanly).
inline std::string corpus_dir() {
  std::string d = SCHEDCHECK_CORPUS_DIR;
  return std::filesystem::is_directory(d) ? d : std::string();
}

/// A path under the source tree ("examples/x.yaml").
inline std::string source_path(const std::string& rel) {
  return std::string(SCHEDCHECK_SOURCE_DIR) + "/" + rel;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// Writes `text` to `name` in the folder `dir` under the system temp folder (created) and returns
/// the path: specs that tests write to disk to load through the real loaders.
inline std::string write_temp(const std::string& dir, const std::string& name, const std::string& text) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / dir;
  std::filesystem::create_directories(d);
  const std::string path = (d / name).string();
  write_file(path, text);
  return path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sc::test
