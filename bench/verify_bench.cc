// Benchmark: verify throughput on 1F1B schedules (p from 8 to 64, m up to 1024 and beyond).
// Prints, per shape: ops, seconds per pass, ops per second through every pass but worst-case
// memory, the worst-case memory pass by min cut, and peak RSS (bytes per op).
// Usage: verify_bench [--quick]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "pipeline/verify_pipeline.h"
#include "fixtures.h"

namespace {

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  struct Shape {
    int p, m;
  };
  std::vector<Shape> shapes = {{8, 64}, {8, 1024}, {16, 1024}, {32, 1024}, {64, 1024}, {64, 8192}};
  if (quick) shapes = {{8, 64}, {64, 1024}};
  fmt::print("{:>4} {:>6} {:>9} {:>10} {:>12} {:>12} {:>12} {:>14} {:>10}\n", "p", "m", "ops", "build+check",
             "ops/s", "wc fast", "wc min-cut", "peak RSS MiB", "B/op");
  for (const Shape& sh : shapes) {
    // Each shape in a fresh child process, so its peak RSS is its own.
    std::fflush(stdout);
    pid_t child = fork();
    if (child > 0) {
      int status = 0;
      waitpid(child, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
      continue;
    }
    long rss0 = peak_rss_kib();
    sc::PipelineSpec spec = sc::test::make_spec("1f1b", sh.p, sh.m, sc::test::one_f_one_b(sh.p, sh.m));
    sc::VerifyOptions opt;
    auto t0 = std::chrono::steady_clock::now();
    sc::VerifyResult r = sc::verify(spec, opt);
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double wc_fast = 0;
    for (const auto& pt : r.pass_times)
      if (pt.pass == "worst-case memory") wc_fast = pt.seconds;
    double rest = total - wc_fast;
    size_t ops = r.program.ops.size();
    long rss = peak_rss_kib();
    double min_cut = -1;
    if (ops <= 200000) {  // the min-cut pass on every rank, for the 10^5-op target
      auto t1 = std::chrono::steady_clock::now();
      sc::WorstCaseMemory wc = sc::worst_case_memory(r.program, true);
      min_cut = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      if (wc.bytes_per_rank != r.worst_case->bytes_per_rank) {
        std::cerr << "min cut and fast path disagree\n";
        return 1;
      }
    }
    fmt::print("{:>4} {:>6} {:>9} {:>9.3f}s {:>12.0f} {:>11.3f}s {:>11} {:>14.1f} {:>10.0f}  {}\n", sh.p, sh.m, ops,
               rest, ops / rest, wc_fast, min_cut < 0 ? std::string("-") : fmt::format("{:.3f}s", min_cut),
               rss / 1024.0, (rss - rss0) * 1024.0 / ops, r.verdict());
    std::fflush(stdout);
    _exit(0);
  }
  return 0;
}
