// Running the schedcheck binary from tests: exit code and output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "catch.h"

namespace sc::test {

/// What one run of the CLI gave.
struct CliRun {
  int exit_code = -1;
  std::string out;  ///< standard output, and standard error unless dropped
};

/// Runs `schedcheck ARGS` from the source folder (so paths in its output are relative).
/// `merge_stderr` false drops standard error (for JSON on standard output).
inline CliRun run_schedcheck(const std::string& args, bool merge_stderr = true) {
  std::string cmd = "cd '" + std::string(SCHEDCHECK_SOURCE_DIR) + "' && '" + SCHEDCHECK_BINARY + "' " + args +
                    (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CliRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace sc::test
