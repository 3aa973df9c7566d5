// Benchmark: generate and verify every named schedule at p = 64, m = 1024 (issue "schedule
// library", item 6). Each schedule runs in its own child process so its peak RSS is its own.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "pipeline/verify_pipeline.h"
#include "pipeline/generators.h"

int main(int argc, char** argv) {
  using namespace sc;
  int32_t p = argc > 1 ? std::atoi(argv[1]) : 64;
  int32_t m = argc > 2 ? std::atoi(argv[2]) : 1024;
  fmt::print("p = {}, m = {} (v = 2 where the schedule takes chunks)\n", p, m);
  fmt::print("{:<18} {:>9} {:>10} {:>10} {:>12} {:>10}  {}\n", "schedule", "ops", "generate", "verify", "ops/s",
             "RSS MiB", "verdict");
  for (const std::string& name : schedule_names()) {
    std::fflush(stdout);
    pid_t child = fork();
    if (child > 0) {
      int status = 0;
      waitpid(child, &status, 0);
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    std::string why;
    auto g = generate(GenOptions{name, p, m, std::nullopt, std::nullopt, false}, &why);
    double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!g) {
      fmt::print("{:<18} rejected: {}\n", name, why);
      std::fflush(stdout);
      _exit(0);
    }
    PipelineSpec spec = to_pipeline_spec(*g);
    auto t1 = std::chrono::steady_clock::now();
    VerifyResult r = verify(spec, {});
    double ver_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    fmt::print("{:<18} {:>9} {:>9.3f}s {:>9.3f}s {:>12.0f} {:>10.1f}  {}\n", name, r.program.ops.size(), gen_s, ver_s,
               r.program.ops.size() / ver_s, u.ru_maxrss / 1024.0, r.verdict());
    std::fflush(stdout);
    _exit(0);
  }
  return 0;
}
