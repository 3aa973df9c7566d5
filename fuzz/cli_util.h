// What the harnesses that run a whole command in process share: schedcheck's command line called
// as main() would call it, with its standard output and error dropped.
#pragma once

#include <iostream>
#include <streambuf>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace sc::fuzz {

/// A stream buffer that drops what it is given.
struct NullBuf : std::streambuf {
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

/// Runs `schedcheck args...` (args[0] is the program name) and returns its exit code; what the
/// command prints is dropped. Arguments must not hold a NUL (argv cannot).
inline int run_cli_quiet(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  NullBuf null;
  std::streambuf* out = std::cout.rdbuf(&null);
  std::streambuf* err = std::cerr.rdbuf(&null);
  const int code = sc::cli::run_cli(static_cast<int>(argv.size()) - 1, argv.data());
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
  return code;
}

}  // namespace sc::fuzz
