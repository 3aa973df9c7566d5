// The SMT engine against the graph engine: same deadlock verdicts, completed ops and worst-case
// peaks on the bundled schedules and on randomly mutated ones.
#include <filesystem>

#include "catch.h"
#include "pipeline/verify_pipeline.h"
#include "pipeline/generators.h"
#include "pipeline/named_schedule.h"
#include "solver/smt_differential.h"
#include "spec/yaml_spec.h"
#include "test_util.h"

namespace {

sc::SmtOptions pinned() {
  sc::SmtOptions o;
  o.seed = 11;
  o.rlimit = 20'000'000;
  return o;
}

std::vector<sc::Semantics> all_semantics() {
  return {sc::Semantics{sc::Semantics::kEager, 0}, sc::Semantics{sc::Semantics::kRendezvous, 0},
          sc::Semantics{sc::Semantics::kRendezvous, 0, true},
          sc::Semantics{sc::Semantics::kBuffered, 1}, sc::Semantics{sc::Semantics::kBuffered, 2}};
}

// A disagreement fails the test and prints the schedule.
void fail(const std::string& message) { FAIL_CHECK(message); }

}  // namespace

TEST_CASE("the SMT engine agrees with the graph engine on every bundled pipeline spec under each P2P semantics",
          "[solver]") {
  sc::DifferentialTally tally;
  for (const char* dir : {"specs/reference", "specs/valid", "examples"}) {
    for (const auto& e : std::filesystem::directory_iterator(sc::test::source_path(dir))) {
      if (e.path().extension() != ".yaml") continue;
      sc::Diagnostics diags;
      auto spec = sc::load_yaml_spec(e.path().string(), diags);
      if (!spec || !sc::resolve_named_schedule(*spec, diags)) continue;  // router specs and the like
      if (static_cast<int64_t>(spec->stages) * spec->microbatches > 64) continue;  // bounded CI time
      if (const auto& c = spec->composition) {  // and bounded programs: replicas times all-to-alls
        const int64_t per_action = 1 + (c->moe ? 4 * static_cast<int64_t>(c->moe->layers_of(0)) : 0);
        if (static_cast<int64_t>(spec->stages) * spec->microbatches * c->data_parallel() * per_action > 1024) continue;
        // record_stream's releases, which nothing waits for, leave the worst-case optimisation
        // too open for Z3 at this size; composed_test.cc cross-checks a small one.
        if (c->record_stream && static_cast<int64_t>(spec->stages) * spec->microbatches > 16) continue;
      }
      for (const auto& sem : all_semantics()) {
        sc::VerifyOptions opt;
        opt.semantics = sem;
        if (spec->has_comms()) {
          sc::differential_case(*spec, opt, pinned(), e.path().filename().string(), tally, fail);
          continue;
        }
        for (auto policy : {sc::LowerPolicy::kPyTorch, sc::LowerPolicy::kDeferred}) {
          opt.lower = policy;
          sc::differential_case(*spec, opt, pinned(), e.path().filename().string(), tally, fail);
        }
      }
    }
  }
  CHECK(tally.cases >= 40);
  CHECK(tally.deadlocks >= 1);  // the rendezvous deadlock example
}

TEST_CASE("the SMT engine agrees with the graph engine on randomly mutated schedules (bounded sample)", "[solver]") {
  // The benchmark runs thousands: bench/synth_bench differential N.
  const int64_t kCases = 240;
  sc::DifferentialTally tally = sc::run_mutation_differential(kCases, 20261129, pinned(), fail);
  CHECK(tally.cases == kCases);
  CHECK(tally.disagreements == 0);
  CHECK(tally.deadlocks > kCases / 10);  // the sample exercises both verdicts
  CHECK(tally.deadlocks < tally.cases);
}

TEST_CASE("the SMT engine reports the worst case of a buffered:1 channel as the graph engine does", "[solver]") {
  auto g = sc::generate(sc::GenOptions{"1f1b", 2, 2, std::nullopt, std::nullopt, false});
  REQUIRE(g);
  sc::PipelineSpec s = sc::to_pipeline_spec(*g);
  sc::VerifyOptions opt;
  opt.semantics = sc::Semantics{sc::Semantics::kBuffered, 1};
  opt.lower = sc::LowerPolicy::kPyTorch;
  sc::VerifyResult r = sc::verify(s, opt);
  REQUIRE(r.execution.completed);
  std::string note;
  int code = sc::apply_smt_engine(r, &note, pinned());
  CHECK(code == 0);
  CHECK(note.find("agrees with the graph engine") != std::string::npos);
  CHECK(note.find("deadlock-free") != std::string::npos);
}
