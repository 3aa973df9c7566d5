// Conformance with PyTorch's own pipelining tests: the schedules and plans they run, encoded here
// in our own notation, and schedcheck's verdict on each: the same accept or reject as PyTorch, or
// a deliberate difference documented in docs/frontends/pipeline.md#where-schedcheck-differs-from-pytorch.
//
// Sources (pytorch/pytorch):
// - test/distributed/pipelining/schedule_registry.py @ 18cadce2f3ccf73698a5ce291c5389c82a3fe53f:
//   ScheduleVShaped, ScheduleUnbalanced, ScheduleWithW, ScheduleWithReorderedB;
// - test/distributed/pipelining/test_schedule.py @ aee1d238d4ba5b1d29b86b694dc5bb9f71b34f25:
//   TestSchedulePlan's (local stages, microbatches, group size) grid for Interleaved1F1B,
//   LoopedBFS and the flexible interleaved schedule with and without zero bubble, and
//   TestScheduleLowering's action strings and unshard/reshard lowering.
#include <fmt/format.h>

#include "catch.h"
#include "diag_util.h"
#include "test_util.h"
#include "pipeline/fsdp_actions.h"
#include "pipeline/generators.h"
#include "pipeline/verify_pipeline.h"
#include "spec/action.h"
#include "spec/csv_schedule.h"
#include "spec/yaml_spec.h"

using namespace sc;
using sc::test::first_error;
using sc::test::has_finding;

namespace {

/// A spec of the registry: `placement` (stage -> rank) and one action list per rank (idle
/// slots of PyTorch's tables dropped: they only pad its simulation).
VerifyResult verify_registry(const std::string& name, const std::string& placement,
                             const std::vector<std::string>& rows, Diagnostics& d) {
  std::string yaml = fmt::format("schedcheck: 1\nranks: {}\nplacement: {}\nschedule:\n  actions:\n", rows.size(), placement);
  for (size_t r = 0; r < rows.size(); ++r) yaml += fmt::format("    {}: {}\n", r, rows[r]);
  std::optional<PipelineSpec> spec = parse_yaml_spec(name, yaml, d);
  REQUIRE(spec);
  return verify(*spec, VerifyOptions{});
}

/// The generated schedule `name` at (local stages, microbatches, group size) as PyTorch's plan
/// test builds it, verified.
VerifyResult verify_plan(const std::string& name, int32_t local, int32_t m, int32_t group, std::string* why) {
  GenOptions opt;
  opt.name = name;
  opt.ranks = group;
  opt.microbatches = m;
  opt.chunks = local;
  std::optional<Generated> g = generate(opt, why);
  REQUIRE(g);
  PipelineSpec s;
  s.name = name;
  s.ranks = group;
  s.stages = g->stages;
  s.microbatches = m;
  s.stage_to_rank = g->stage_to_rank;
  s.placement = g->placement;
  s.placement_declared = true;
  s.pipeline_starts = g->pipeline_starts;
  s.actions = g->actions;
  apply_unit_defaults(s);
  return verify(s, VerifyOptions{});
}

}  // namespace

TEST_CASE("PyTorch conformance: the schedule registry's hand-written schedules hold", "[conformance]") {
  Diagnostics d;
  // ScheduleVShaped: stages 0 and 3 on rank 0, 1 and 2 on rank 1; one microbatch.
  VerifyResult v = verify_registry("ScheduleVShaped", "[0, 1, 1, 0]", {"0F0 3F0 3B0 0B0", "1F0 2F0 2B0 1B0"}, d);
  CHECK(v.exit_code == 0);
  // ScheduleUnbalanced: stages 0, 1, 4 on rank 0 and 2, 3 on rank 1.
  VerifyResult u =
      verify_registry("ScheduleUnbalanced", "[0, 0, 1, 1, 0]", {"0F0 1F0 4F0 4B0 1B0 0B0", "2F0 3F0 3B0 2B0"}, d);
  CHECK(u.exit_code == 0);
  // ScheduleWithW: the split backward over two microbatches, loop placement.
  VerifyResult w = verify_registry(
      "ScheduleWithW", "[0, 1, 0, 1]",
      {"0F0 0F1 2F0 2F1 2I0 2W0 0I0 2I1 0W0 0I1 2W1 0W1", "1F0 1F1 3F0 3I0 3F1 1I0 3I1 3W0 1I1 1W0 3W1 1W1"}, d);
  CHECK(w.exit_code == 0);
  // ScheduleWithReorderedB: a compute-and-comms schedule whose sends and receives pair in the
  // same order on both ranks, so it holds even under rendezvous (blocking) semantics.
  VerifyResult b = verify_registry("ScheduleWithReorderedB", "[0, 1]",
                                   {"0F0 0F1 0SEND_F0 0SEND_F1 0RECV_B0 0RECV_B1 0B0 0B1",
                                    "1RECV_F0 1RECV_F1 1F0 1F1 1B0 1B1 1SEND_B0 1SEND_B1"},
                                   d);
  CHECK(b.exit_code == 0);
  CHECK_FALSE(d.has_errors());
}

TEST_CASE("PyTorch conformance: TestSchedulePlan's grid verifies for every schedule it validates", "[conformance]") {
  // (local stages, microbatches, group size) of TestSchedulePlan.setUp; test_pipeline_order
  // skips the cases with microbatches not a multiple of the group, and so do we.
  const int32_t cases[][3] = {{2, 2, 2},  {2, 4, 4},  {2, 8, 2},  {2, 8, 4},   {2, 8, 8},  {4, 4, 4},
                              {4, 8, 4},  {4, 8, 8},  {4, 16, 4}, {4, 32, 4},  {4, 64, 4}, {4, 16, 16},
                              {4, 32, 32}, {4, 128, 64}, {3, 2, 2}, {3, 8, 2}, {3, 12, 4}, {4, 6, 3},
                              {4, 10, 5}, {2, 3, 4},  {2, 4, 4},  {2, 10, 4}, {2, 15, 4}};
  int checked = 0;
  for (const char* name : {"interleaved-1f1b", "looped-bfs", "interleaved-zb"})
    for (const auto& c : cases) {
      if (c[1] % c[2] != 0) continue;
      INFO(fmt::format("{} local stages {} microbatches {} group {}", name, c[0], c[1], c[2]));
      std::string why;
      VerifyResult r = verify_plan(name, c[0], c[1], c[2], &why);
      CHECK(r.exit_code == 0);
      ++checked;
    }
  // 20 of the 23 cases divide, for each of the three schedules.
  CHECK(checked == 3 * 20);
}

TEST_CASE("PyTorch conformance: TestScheduleLowering's action strings and unshard/reshard lowering", "[conformance]") {
  // test_action_parse: each string parses and prints back the same.
  for (const char* s : {"1F0", "2B1", "0W3", "1UNSHARD", "3RESHARD"}) {
    const ParsedStep st = parse_step(s, SourceLoc{});
    REQUIRE(st.step);
    CHECK(format_step(*st.step) == s);
  }
  // test_unshard_reshard: ["0F0", "0F1", idle, "0B0", "0B1"] lowers to an UNSHARD before the
  // first compute and a RESHARD after the last.
  Diagnostics d;
  std::optional<CsvSchedule> cs = parse_csv_schedule("compute.csv", "0F0,0F1,,0B0,0B1\n", d);
  REQUIRE(cs);
  CHECK(cs->idle_cells == 1);
  const std::vector<Step> lowered = add_unshard_reshard(cs->actions[0], 3);
  CHECK(format_steps(lowered, ",") == "0UNSHARD,0F0,0F1,0B0,0B1,0RESHARD");
}

namespace {

/// verify of a CSV given as text, with the unit model.
VerifyResult verify_csv_text(const std::string& name, const std::string& text, Diagnostics& d) {
  std::optional<PipelineSpec> spec = spec_from_csv_text(name, text, d, std::nullopt);
  REQUIRE(spec);
  return verify(*spec, VerifyOptions{});
}

}  // namespace

TEST_CASE("PyTorch conformance: rows are ranks, and a rank with no actions leaves its stage unrun", "[conformance]") {
  // PyTorch's reader counts CSV rows as ranks: a second, empty row is rank 1 holding stage 1,
  // whose forward and backward of microbatch 0 never run, so the schedule is refused.
  Diagnostics d;
  VerifyResult r = verify_csv_text("missing-rank.csv", "0F0,0B0\n,\n", d);
  CHECK(r.exit_code == 12);
  CHECK(has_finding(r, FindingKind::kStructure, "no forward F: 1F0"));
  // The final line break is not a rank; a blank line before it is (Python's csv reader gives
  // "0F0,0B0\n\n" two rows, and _load_csv then counts two ranks).
  Diagnostics d2;
  VerifyResult one = verify_csv_text("one-rank.csv", "0F0,0B0\n", d2);
  CHECK(one.spec.ranks == 1);
  CHECK(one.exit_code == 0);
  VerifyResult two = verify_csv_text("blank-rank.csv", "0F0,0B0\n\n", d2);
  CHECK(two.spec.ranks == 2);
  CHECK(two.exit_code == 12);
}

TEST_CASE("PyTorch conformance: OVERLAP_F_B runs its two actions in order, as the runtime does", "[conformance]") {
  Diagnostics d;
  CHECK(verify_csv_text("overlap.csv", "(0F0;0B0)OVERLAP_F_B\n", d).exit_code == 0);
  CHECK(verify_csv_text("overlap-iw.csv", "0F0,(0I0;0W0)OVERLAP_F_B\n", d).exit_code == 0);
}

TEST_CASE("PyTorch conformance: UNSHARD and RESHARD rules hold for FSDP-wrapped stages only", "[conformance]") {
  Diagnostics d;
  // A stage no UNSHARD names is not FSDP-wrapped: its RESHARD is a no-op, as in PyTorch.
  CHECK(verify_csv_text("reshard-only.csv", "0F0,0B0,0RESHARD\n", d).exit_code == 0);
  // An unsharded stage resharded twice: PyTorch asserts "Resharding stage_idx=0 without unsharding".
  VerifyResult twice = verify_csv_text("reshard-twice.csv", "0UNSHARD,0F0,0B0,0RESHARD,0RESHARD\n", d);
  CHECK(twice.exit_code == 12);
  CHECK(has_finding(twice, FindingKind::kResidency, "RESHARD without UNSHARD"));
  // With `fsdp:` every stage is wrapped: a rank that unshards stage 0 but computes stage 2
  // sharded fails as PyTorch's "Attempted to compute on sharded stage_idx=2" does.
  const std::string yaml =
      "schedcheck: 1\nmesh: {pp: 2, dp_shard: 2}\nplacement: [0, 1, 0, 1]\nfsdp: {implementation: fsdp2}\n"
      "schedule:\n  actions:\n    0: 0UNSHARD 0F0 2F0 2B0 0B0 0RESHARD\n"
      "    1: 1UNSHARD 3UNSHARD 1F0 3F0 3B0 1B0 1RESHARD 3RESHARD\n";
  std::optional<PipelineSpec> spec = parse_yaml_spec("partial-unshard.yaml", yaml, d);
  REQUIRE(spec);
  VerifyResult r = verify(*spec, VerifyOptions{});
  CHECK(r.exit_code == 12);
  CHECK(has_finding(r, FindingKind::kResidency, "2F0 on rank 0 runs while stage 2's parameters are sharded"));
  CHECK_FALSE(d.has_errors());
}

TEST_CASE("PyTorch conformance: Schedule1F1B's order listing is not the order it runs", "[conformance]") {
  // examples/pytorch-1f1b-order-listing.csv: _get_pipeline_order's last rank at p = 4, m = 4
  // never runs forward 0 and names forward 4; PyTorch's own validator rejects it, and so does
  // verify, while `gen 1f1b` (the executed order) holds.
  Diagnostics d;
  std::optional<PipelineSpec> listing =
      spec_from_csv(test::source_path("examples/pytorch-1f1b-order-listing.csv"), d, std::nullopt);
  REQUIRE(listing);
  VerifyResult r = verify(*listing, VerifyOptions{});
  CHECK(r.exit_code == 12);
  CHECK(has_finding(r, FindingKind::kStructure, "3F0"));
  std::string why;
  CHECK(verify_plan("1f1b", 1, 4, 4, &why).exit_code == 0);
}
