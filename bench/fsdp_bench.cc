// FSDP verify at scale: a 128-unit model on 64 ranks, two steps, every pass (lowering,
// collective agreement, deadlock, residency, timing, worst-case memory, memory limit, figures).
// Run by hand: ./build/bench/fsdp_bench [units] [ranks]. Prints seconds per pass, ops and the
// process's peak resident set; figures go to the README.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"

namespace {

/// Peak resident set of this process so far, in MiB (ru_maxrss is in KiB on Linux).
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

std::string spec_text(const std::string& implementation, int units, int ranks, int replicate) {
  std::string options = implementation == "fsdp1" ? "{limit_all_gathers: true, backward_prefetch: pre}"
                        : implementation == "zero3" ? "{prefetch_bucket_size: 200000000}"
                                                    : "{reshard_after_forward: true}";
  return fmt::format(
      "schedcheck: 1\nranks: {}\nmemory: {{limit_bytes: 80GiB}}\nfsdp:\n  implementation: {}\n"
      "  replicate_size: {}\n  dtypes: {{param: bf16, reduce: fp32}}\n  link: {{bandwidth: 450GB/s, latency: 10us}}\n"
      "  units:\n    - {{name: layer, repeat: {}, params: 200M, forward: 5ms, backward: 10ms, "
      "activation_bytes: 256MiB}}\n  options: {}\n",
      ranks, implementation, replicate, units, options);
}

}  // namespace

int main(int argc, char** argv) {
  const int units = argc > 1 ? std::stoi(argv[1]) : 128;
  const int ranks = argc > 2 ? std::stoi(argv[2]) : 64;
  std::printf("%-22s %8s %9s %9s %9s %9s %9s %9s %9s %9s\n", "case", "ops", "lower s", "deadlk s", "resid s", "timing s",
              "worst s", "figures s", "total s", "rss MiB");
  struct Case {
    const char* impl;
    int replicate;
    bool symmetry;  ///< false: the interleaving passes on every rank (as for divergent programs)
  };
  for (const Case& c : {Case{"fsdp2", 1, true}, Case{"fsdp1", 1, true}, Case{"zero3", 1, true}, Case{"fsdp2", 8, true},
                        Case{"fsdp2", 1, false}}) {
    sc::Diagnostics d;
    auto spec = sc::parse_fsdp_spec("bench.yaml", spec_text(c.impl, units, ranks, c.replicate), d);
    if (!spec) {
      d.print(std::cerr);
      return 2;
    }
    auto t0 = std::chrono::steady_clock::now();
    sc::FsdpVerifyResult r = sc::verify_fsdp(*spec, false, c.symmetry);
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto pass = [&](const char* name) {
      for (const auto& p : r.base.pass_times)
        if (p.pass == name) return p.seconds;
      return 0.0;
    };
    std::string name = fmt::format("{} {}u x {}r{}{}", c.impl, units, ranks, c.replicate > 1 ? " hsdp" : "",
                                   c.symmetry ? "" : " all");
    std::printf("%-22s %8zu %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.0f   %s\n", name.c_str(),
                r.base.program.ops.size(), pass("lower"), pass("deadlock"), pass("residency"), pass("timing"),
                pass("worst-case memory"), pass("figures"), total, peak_rss_mib(), r.base.verdict().c_str());
  }
  return 0;
}
