// The full grid of issue "schedule library" item 5: every generated schedule for p in 2..16,
// m in 1..64, v in 1..4 (where the reference accepts the shape), lowered with the pytorch and
// deferred policies, verified under rendezvous and eager P2P. Prints counts per schedule and
// every failure; exits 1 when any combination deadlocks or violates a property.
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "pipeline/verify_pipeline.h"
#include "pipeline/generators.h"

int main() {
  using namespace sc;
  auto t0 = std::chrono::steady_clock::now();
  size_t total = 0, failed = 0, ops = 0;
  for (const std::string& name : schedule_names()) {
    size_t shapes = 0, bad = 0;
    for (int32_t p = 2; p <= 16; ++p)
      for (int32_t m = 1; m <= 64; ++m)
        for (int32_t v = 1; v <= 4; ++v) {
          auto g = generate(GenOptions{name, p, m, std::nullopt, v, false});
          if (!g) continue;
          ++shapes;
          PipelineSpec spec = to_pipeline_spec(*g);
          for (auto policy : {LowerPolicy::kPyTorch, LowerPolicy::kDeferred})
            for (auto sem : {Semantics{Semantics::kRendezvous, 0}, Semantics{Semantics::kEager, 0}}) {
              VerifyOptions opt;
              opt.semantics = sem;
              opt.lower = policy;
              VerifyResult r = verify(spec, opt);
              ++total;
              ops += r.program.ops.size();
              if (!r.findings.empty()) {
                ++bad;
                fmt::print("FAIL {} p={} m={} v={} {} {}: {}\n", name, p, m, v,
                           policy == LowerPolicy::kPyTorch ? "pytorch" : "deferred", format_semantics(sem),
                           r.findings.front().message);
              }
            }
        }
    failed += bad;
    fmt::print("{:<18} {:>5} shapes x 4 (policy, semantics): {} failures\n", name, shapes, bad);
    std::fflush(stdout);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{} verifications ({} ops) in {:.1f} s: {} failures\n", total, ops, s, failed);
  return failed == 0 ? 0 : 1;
}
