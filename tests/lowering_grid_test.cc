// Every generated schedule, lowered with each policy, holds under rendezvous and eager P2P
// (issue: schedule library, item 5). The full grid (p up to 16, m up to 64) is
// bench/lowering_grid_bench.cc; this test runs a bounded sample.
#include "catch.h"
#include "pipeline/verify_pipeline.h"
#include "pipeline/generators.h"

namespace sc {

TEST_CASE("generated schedules lowered with pytorch or deferred never deadlock", "[gen][lower]") {
  size_t checked = 0;
  for (const std::string& name : schedule_names())
    for (int32_t p = 2; p <= 8; ++p)
      for (int32_t m = 1; m <= 24; ++m)
        for (int32_t v = 1; v <= 4; ++v) {
          GenOptions o{name, p, m, std::nullopt, v, false};
          auto g = generate(o);
          if (!g) continue;
          PipelineSpec spec = to_pipeline_spec(*g);
          for (auto policy : {LowerPolicy::kPyTorch, LowerPolicy::kDeferred})
            for (auto sem : {Semantics{Semantics::kRendezvous, 0}, Semantics{Semantics::kEager, 0}}) {
              VerifyOptions opt;
              opt.semantics = sem;
              opt.lower = policy;
              VerifyResult r = verify(spec, opt);
              ++checked;
              if (!r.findings.empty()) {
                INFO(name << " p=" << p << " m=" << m << " v=" << v << " policy "
                          << (policy == LowerPolicy::kPyTorch ? "pytorch" : "deferred") << " " << format_semantics(sem));
                FAIL_CHECK(r.findings.front().message);
              }
            }
        }
  CHECK(checked > 1000);
}

}  // namespace sc
