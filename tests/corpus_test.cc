// Every schedule of the shared PyTorch corpus verifies with the right verdict (skips cleanly
// when ../shared/corpus is absent).
#include "catch.h"
#include "pipeline/verify_pipeline.h"
#include "spec/csv_schedule.h"
#include "test_util.h"

namespace sc {
namespace {

std::optional<PipelineSpec> corpus_spec(const std::string& file) {
  Diagnostics diags;
  auto spec = spec_from_csv(test::corpus_dir() + "/pytorch/" + file, diags, std::nullopt);
  INFO(file);
  REQUIRE(!diags.has_errors());
  return spec;
}

}  // namespace

TEST_CASE("every corpus schedule holds, as written and lowered, under every P2P semantics", "[corpus]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("../shared/corpus not found; skipping the corpus tests");
  }
  struct Expect {
    const char* file;
    const char* placement;
    double busy_per_rank;  // unit costs: F = I = W = 1 s, B = 2 s, an overlapped pair F + B
  };
  // Busy time: zb1p and torchtitan, 2 stages x 8 microbatches x (F + I + W) = 48 s per rank;
  // dualpipev, 2 stages x 10 microbatches x 3 s = 60 s per rank.
  const Expect expect[] = {{"zb1p_2rank_2stagep_compute.csv", "inferred:loop", 48},
                           {"zb1p_2rank_2stagep_comms.csv", "inferred:loop", 48},
                           {"torchtitan_custom_schedule.csv", "inferred:loop", 48},
                           {"dualpipev_4rank_10mb.csv", "inferred:v", 60}};
  for (const auto& e : expect) {
    INFO(e.file);
    auto spec = corpus_spec(e.file);
    REQUIRE(spec);
    CHECK(spec->placement == e.placement);
    std::vector<VerifyOptions> variants;
    for (auto sem : {Semantics{Semantics::kRendezvous, 0}, Semantics{Semantics::kEager, 0}, Semantics{Semantics::kBuffered, 1}}) {
      VerifyOptions o;
      o.semantics = sem;
      variants.push_back(o);
      if (!spec->has_comms())
        for (auto pol : {LowerPolicy::kPyTorch, LowerPolicy::kDeferred}) {
          o.lower = pol;
          variants.push_back(o);
        }
    }
    for (const auto& o : variants) {
      INFO("semantics " << format_semantics(*o.semantics) << ", lowered " << (o.lower ? static_cast<int>(*o.lower) : -1));
      VerifyResult r = verify(*spec, o);
      for (const auto& f : r.findings) FAIL_CHECK(f.message);
      REQUIRE(r.timeline);
      for (double b : r.timeline->busy_per_rank_s) CHECK(b == Approx(e.busy_per_rank));
      if (o.lower) CHECK(r.program.explicit_comms);
    }
  }
}

TEST_CASE("the PyTorch-lowered zb1p schedule predicts the same compute time as the comms file", "[corpus]") {
  if (test::corpus_dir().empty()) return;
  auto compute = corpus_spec("zb1p_2rank_2stagep_compute.csv");
  auto comms = corpus_spec("zb1p_2rank_2stagep_comms.csv");
  VerifyOptions lowered;
  lowered.lower = LowerPolicy::kPyTorch;
  // The comms file merges I+W into B where adjacent; lowering the compute file without merging
  // keeps I and W apart, so compare the total busy time, which both keep.
  VerifyResult a = verify(*compute, lowered);
  VerifyResult b = verify(*comms, {});
  REQUIRE(a.timeline);
  REQUIRE(b.timeline);
  CHECK(a.timeline->busy_per_rank_s == b.timeline->busy_per_rank_s);
  CHECK(a.program.channels.size() == b.program.channels.size());
}

}  // namespace sc
