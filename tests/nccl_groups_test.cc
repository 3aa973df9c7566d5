// Batch groups under NCCL's guarantees: a group completes as one (docs/facts/p2p-semantics.md
// "Groups complete as one"), the reported hangs of NVIDIA/nccl#1279 and pytorch/pytorch PR
// #126419, their fixes, and the earlier rule kept as rendezvous:independent.
#include <algorithm>
#include <string>
#include <vector>

#include "catch.h"
#include "check/execution.h"
#include "pipeline/named_schedule.h"
#include "pipeline/verify_pipeline.h"
#include "solver/smt_engine.h"
#include "spec/yaml_spec.h"
#include "test_util.h"

using namespace sc;

namespace {

PipelineSpec load_example(const std::string& rel) {
  Diagnostics d;
  auto spec = load_yaml_spec(test::source_path(rel), d);
  REQUIRE_FALSE(d.has_errors());
  REQUIRE(spec);
  REQUIRE(resolve_named_schedule(*spec, d));
  return *spec;
}

VerifyResult run(const std::string& rel, const char* semantics) {
  VerifyOptions opt;
  opt.semantics = *parse_semantics(semantics);
  return verify(load_example(rel), opt);
}

bool has_detail(const Finding& f, const std::string& part) {
  return std::any_of(f.details.begin(), f.details.end(),
                     [&](const std::string& d) { return d.find(part) != std::string::npos; });
}

// The graph engine's verdict and the SMT engine's agree on `r.program`.
void check_engines_agree(const VerifyResult& r) {
  SmtVerdict v = smt_check(r.program);
  REQUIRE_FALSE(v.inconclusive);
  CHECK(v.completes == r.execution.completed);
  int64_t done = 0;
  for (uint8_t d : r.execution.done) done += d;
  CHECK(v.completed_ops == done);
}

// `rel` holds under the default semantics, with no finding, and the engines agree.
void check_holds(const std::string& rel) {
  VerifyResult r = run(rel, "rendezvous");
  INFO(rel << ": " << (r.findings.empty() ? std::string() : r.findings[0].message));
  CHECK(r.exit_code == 0);
  CHECK(r.findings.empty());
  check_engines_agree(r);
}

}  // namespace

TEST_CASE("rendezvous:independent parses, prints back and differs from rendezvous", "[semantics]") {
  auto atomic = parse_semantics("rendezvous");
  auto independent = parse_semantics("rendezvous:independent");
  REQUIRE(atomic);
  REQUIRE(independent);
  CHECK(atomic->atomic_groups());
  CHECK_FALSE(independent->atomic_groups());
  CHECK(format_semantics(*independent) == "rendezvous:independent");
  CHECK(format_semantics(*atomic) == "rendezvous");
  CHECK_FALSE(parse_semantics("eager")->atomic_groups());
  std::string why;
  CHECK_FALSE(parse_semantics("rendezvous:atomic", &why));
  CHECK(why.find("rendezvous:independent") != std::string::npos);
}

TEST_CASE("NVIDIA/nccl#1279: one rank groups send and receive, the other calls them separately: a deadlock naming both call sites",
          "[semantics][deadlock]") {
  VerifyResult r = run("examples/nccl-group-mismatch-hang.yaml", "rendezvous");
  REQUIRE(r.exit_code == 11);
  REQUIRE(r.findings.size() == 1);
  const Finding& f = r.findings[0];
  CHECK(f.kind == FindingKind::kDeadlock);
  INFO(f.message);
  // Rank 0's group waits for rank 1 to post 1RECV_F1, which stands behind 1SEND_B0, which
  // completes only with rank 0's group.
  CHECK(f.message.find("wait-for cycle") != std::string::npos);
  CHECK(f.ranks == std::vector<int32_t>{0, 1});
  CHECK(std::find(f.ops.begin(), f.ops.end(), "1SEND_B0") != f.ops.end());
  // Both call sites of the differently grouped messages, with their lines.
  // (locations print the path the spec was read from: an absolute one here)
  CHECK(has_detail(f, "rank 0 posts 0SEND_F1 ("));
  CHECK(has_detail(f, "nccl-group-mismatch-hang.yaml:23:27), 0RECV_B0 ("));
  CHECK(has_detail(f, "nccl-group-mismatch-hang.yaml:23:36) in one batch group, while rank 1 posts 1RECV_F1 ("));
  CHECK(has_detail(f, "nccl-group-mismatch-hang.yaml:24:35), 1SEND_B0 ("));
  CHECK(has_detail(f, "nccl-group-mismatch-hang.yaml:24:26) in 2 separate calls"));
  // Each mismatch once, from one side.
  CHECK(std::count_if(f.details.begin(), f.details.end(),
                      [](const std::string& d) { return d.find("NVIDIA/nccl#1279), and under") != std::string::npos; }) == 1);
  CHECK(has_detail(f, "in 2 separate calls"));
  CHECK(has_detail(f, "NVIDIA/nccl#1279"));
  check_engines_agree(r);

  // The earlier rule, each member on its own, lets both progress (NCCL at this scale).
  VerifyResult loose = run("examples/nccl-group-mismatch-hang.yaml", "rendezvous:independent");
  CHECK(loose.exit_code == 0);
  check_engines_agree(loose);
}

TEST_CASE("NVIDIA/nccl#1279's fix, matching groups on both ranks, holds", "[semantics]") {
  check_holds("examples/nccl-group-mismatch-fixed.yaml");
}

TEST_CASE("pytorch PR #126419: 1F1B coalescing on one side only deadlocks, coalescing on both sides holds",
          "[semantics][deadlock]") {
  VerifyResult bad = run("examples/pytorch-1f1b-one-sided-coalescing.yaml", "rendezvous");
  REQUIRE(bad.exit_code == 11);
  REQUIRE_FALSE(bad.findings.empty());
  const Finding& f = bad.findings[0];
  INFO(f.message);
  CHECK(f.kind == FindingKind::kDeadlock);
  // The hang reported first is between stages 2 and 3: rank 2's plain send of its forward and
  // rank 3's group of its backward send and its next forward receive.
  CHECK(f.ranks == std::vector<int32_t>{2, 3});
  CHECK(has_detail(f, "rank 3 posts 3SEND_B0 ("));
  CHECK(has_detail(f, "pytorch-1f1b-one-sided-coalescing.yaml:34:36) in one batch group, while rank 2 posts 2RECV_B0 ("));
  CHECK(has_detail(f, "in 2 separate calls"));
  check_engines_agree(bad);
  CHECK(run("examples/pytorch-1f1b-one-sided-coalescing.yaml", "rendezvous:independent").exit_code == 0);

  VerifyResult good = run("examples/pytorch-1f1b-coalesced-both-sides.yaml", "rendezvous");
  INFO((good.findings.empty() ? std::string() : good.findings[0].message));
  CHECK(good.exit_code == 0);
  check_engines_agree(good);
}

TEST_CASE("pytorch/PiPPy#969: a skip connection with each stage's sends and receives batched across peers deadlocks, "
          "one batch per peer holds",
          "[semantics][deadlock]") {
  VerifyResult bad = run("examples/pippy-skip-connection-hang.yaml", "rendezvous");
  REQUIRE(bad.exit_code == 11);
  REQUIRE_FALSE(bad.findings.empty());
  const Finding& f = bad.findings[0];
  INFO(f.message);
  CHECK(f.kind == FindingKind::kDeadlock);
  CHECK(f.message.find("wait-for cycle") != std::string::npos);
  // Stage 2's group of receives (the culprit: from stages 0 and 1 at once) waits for 1SEND_F0,
  // which rank 1 posts after its forward, whose receive completes only with rank 0's group,
  // joined through 0SEND_F0>2 to stage 2's group.
  CHECK(f.ranks == std::vector<int32_t>{1, 2});
  CHECK(f.ops == std::vector<std::string>{"1RECV_F0", "2RECV_F0"});
  CHECK(has_detail(f, "rank 2 (comm stream) is stuck at 2RECV_F0 ("));
  CHECK(has_detail(f, "waits for 1SEND_F0 on rank 1 to send"));
  CHECK(has_detail(f, "rank 1 (comm stream) is stuck at 1RECV_F0 ("));
  // The link: rank 0's group, whose skip send meets stage 2's group, with its line.
  CHECK(has_detail(f, "completes only together with 2RECV_F0 on rank 2, joined through rank 0's batch group "
                      "0SEND_F0, 0SEND_F0>2 ("));
  CHECK(has_detail(f, "pippy-skip-connection-hang.yaml:26:14) (NCCL completes a batch group as one"));
  CHECK(has_detail(f, "also stuck: rank 0 (comm stream) at 0SEND_F0 ("));
  check_engines_agree(bad);
  // Each member on its own (NCCL with a channel per peer) lets the pipeline run.
  VerifyResult loose = run("examples/pippy-skip-connection-hang.yaml", "rendezvous:independent");
  CHECK(loose.exit_code == 0);
  check_engines_agree(loose);

  check_holds("examples/pippy-skip-connection-fixed.yaml");
  VerifyResult good = run("examples/pippy-skip-connection-fixed.yaml", "rendezvous");
  // The skip messages travel on their own channel, rank 0 -> rank 2, one per microbatch.
  bool found = false;
  for (const Channel& ch : good.program.channels)
    if (ch.src == 0 && ch.dst == 2) {
      found = true;
      CHECK(ch.sends.size() == 2);
      CHECK(ch.recvs.size() == 2);
      CHECK(good.program.label(ch.sends[1]) == "0SEND_F1>2");
      CHECK(good.program.label(ch.recvs[1]) == "2RECV_F1<0");
    }
  CHECK(found);
}

TEST_CASE("a group on one channel completes member by member, a group on two as one", "[semantics]") {
  // Rank 0 groups two sends to rank 1; rank 1 receives them one call at a time. NCCL moves one
  // peer's sends in order, so the first send never waits behind the second: this holds under
  // every semantics. Rank 0 grouping a send and a receive instead (two channels) while rank 1
  // calls them separately is NVIDIA/nccl#1279's pattern: a hang under the default semantics.
  auto load = [](const std::string& name, const std::string& row0, const std::string& row1, bool forward_only) {
    std::string text = "schedcheck: 1\nname: " + name + "\nranks: 2\nstages: 2\nmicrobatches: 2\n" +
                       (forward_only ? "forward_only: true\ncosts: {F: 1ms}\n" : "costs: {F: 1ms, B: 2ms}\n") +
                       "p2p: {latency: 10us, bandwidth: 50GB/s, message_bytes: 16MiB}\nschedule:\n  actions:\n"
                       "    0: \"" + row0 + "\"\n    1: \"" + row1 + "\"\n";
    Diagnostics d;
    auto spec = load_yaml_spec(test::write_temp("schedcheck-nccl-groups-test", name + ".yaml", text), d);
    REQUIRE(spec);
    REQUIRE(resolve_named_schedule(*spec, d));
    return *spec;
  };
  PipelineSpec one = load("two-sends", "0F0 0F1 (0SEND_F0;0SEND_F1)BATCH", "1RECV_F0 1F0 1RECV_F1 1F1", true);
  VerifyResult r = verify(one, {});
  INFO((r.findings.empty() ? std::string() : r.findings[0].message));
  CHECK(r.exit_code == 0);
  check_engines_agree(r);

  PipelineSpec two = load("send-and-receive", "0F0 0SEND_F0 0F1 (0SEND_F1;0RECV_B0)BATCH 0B0 0RECV_B1 0B1",
                          "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1", false);
  VerifyResult h = verify(two, {});
  REQUIRE(h.exit_code == 11);
  REQUIRE(h.findings.size() == 1);
  INFO(h.findings[0].message);
  CHECK(has_detail(h.findings[0], "rank 0 posts 0SEND_F1"));
  CHECK(has_detail(h.findings[0], "while rank 1 posts 1RECV_F1"));
  check_engines_agree(h);
  VerifyOptions loose;
  loose.semantics = *parse_semantics("rendezvous:independent");
  CHECK(verify(two, loose).exit_code == 0);
}
