// What the sandboxed harnesses (fuzz_output_paths, fuzz_diff_git) share: reading a file back
// whole to compare it with what it must still hold.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sc::fuzz {

/// The bytes of `p`; empty when it cannot be read.
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sc::fuzz
