// Shared body of the framework-config harnesses: the readers take a path, so each input is
// written to one temporary file per process; the job is then lowered with the cost model
// (lower_job), which must turn anything the reader accepts into a spec or a diagnostic.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/lower_job.h"
#include "config/readers.h"
#include "support/source.h"

namespace sc::fuzz {

/// Writes `data` to this process's temporary file ending in `suffix` and returns its path.
inline std::string input_file(const uint8_t* data, size_t size, const char* suffix) {
  static std::string path = [suffix] {
    std::string p = std::string("/tmp/schedcheck-fuzz-") + std::to_string(getpid()) + suffix;
    return p;
  }();
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

/// Reads the input with `read` and lowers what it accepts.
template <typename Read>
int run_config(const uint8_t* data, size_t size, const char* suffix, Read read) {
  const std::string path = input_file(data, size, suffix);
  config::JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-debug";
  ctx.seq_len = 128;
  config::TrainingJob job;
  Diagnostics diags;
  if (read(path, ctx, &job, diags)) {
    if (job.seq_len <= 0) job.seq_len = ctx.seq_len;
    config::LoweredJob lowered;
    (void)config::lower_job(job, ctx, &lowered, diags);
  }
  clear_sources();
  return 0;
}

}  // namespace sc::fuzz
