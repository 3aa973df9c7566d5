// Tests of one program for a whole step: batched P2P groups, forward-only schedules,
// recomputation, and composed specs (pipeline x FSDP/HSDP/DP on a mesh) through the one verify.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "check/passes.h"
#include "pipeline/fsdp_actions.h"
#include "pipeline/moe_router.h"
#include "pipeline/named_schedule.h"
#include "pipeline/verify_pipeline.h"
#include "solver/smt_differential.h"
#include "spec/yaml_spec.h"
#include "cli_util.h"
#include "test_util.h"

using namespace sc;

namespace {

/// Writes `text` to a fresh file under the temp folder and loads it as a spec; fails the test
/// on spec errors.
PipelineSpec load_text(const std::string& name, const std::string& text) {
  Diagnostics d;
  auto spec = load_yaml_spec(test::write_temp("schedcheck-composed-test", name, text), d);
  INFO(name);
  REQUIRE_FALSE(d.has_errors());
  REQUIRE(spec);
  return *spec;
}

PipelineSpec load_example(const std::string& rel) {
  Diagnostics d;
  auto spec = load_yaml_spec(test::source_path(rel), d);
  REQUIRE_FALSE(d.has_errors());
  REQUIRE(spec);
  REQUIRE(resolve_named_schedule(*spec, d));
  return *spec;
}

std::string row_text(const std::vector<Step>& row) { return format_steps(row, ","); }

std::vector<Step> parse_row(const std::string& text) {
  std::vector<Step> row;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    ParsedStep p = parse_step(text.substr(i, j - i), SourceLoc{});
    REQUIRE(p.step);
    if (p.batch.empty()) row.push_back(*p.step);
    for (const Step& s : p.batch) row.push_back(s);
    i = j + 1;
  }
  return row;
}

/// A finding's detail lines, one string.
std::string joined_details(const Finding& f) {
  std::string out;
  for (const std::string& d : f.details) out += d + "\n";
  return out;
}

bool has_kind(const VerifyResult& r, FindingKind k) {
  return std::any_of(r.findings.begin(), r.findings.end(), [&](const Finding& f) { return f.kind == k; });
}

// 1F1B on two ranks, two microbatches, with explicit SEND/RECV. In the steady state rank 0
// sends F1 and receives B0 while rank 1 sends B0 and receives F1 (pytorch PR #126419).
std::string one_f_one_b_p2(const std::string& rank0_mid, const std::string& rank1_mid) {
  return "schedcheck: 1\nranks: 2\nmicrobatches: 2\n"
         "p2p: {message_bytes: 1MiB, semantics: rendezvous}\n"
         "schedule:\n  actions:\n"
         "    0: \"0F0 0SEND_F0 0F1 " + rank0_mid + " 0B0 0RECV_B1 0B1\"\n"
         "    1: \"1RECV_F0 1F0 1B0 " + rank1_mid + " 1F1 1B1 1SEND_B1\"\n";
}

}  // namespace

TEST_CASE("BATCH groups parse into one step per member and format back", "[batch]") {
  ParsedStep p = parse_step("(0SEND_F1;0RECV_B0)BATCH", SourceLoc{});
  REQUIRE(p.step);
  REQUIRE(p.batch.size() == 2);
  CHECK(p.batch[0].first == Action{ActionKind::kSendF, 0, 1});
  CHECK(p.batch[1].first == Action{ActionKind::kRecvB, 0, 0});
  CHECK(p.batch[0].batched_with_next);
  CHECK_FALSE(p.batch[1].batched_with_next);
  const std::vector<Step> row = parse_row("0F0,(0SEND_F0;1RECV_B0;1SEND_B1)BATCH,0B0");
  CHECK(row.size() == 5);
  CHECK(count_tokens(row) == 3);
  CHECK(row_text(row) == "0F0,(0SEND_F0;1RECV_B0;1SEND_B1)BATCH,0B0");

  CHECK(parse_step("()BATCH", SourceLoc{}).error == "'()BATCH': a BATCH group needs at least one SEND or RECV action");
  CHECK(parse_step("(0F0;0SEND_F0)BATCH", SourceLoc{}).error.find("only SEND and RECV") != std::string::npos);
  CHECK(parse_step("(0SEND_F0;0SEND_F0)BATCH", SourceLoc{}).error.find("twice") != std::string::npos);
  // A nested group is named as such, at the inner '(' (not as a missing suffix).
  ParsedStep nested = parse_step("((0F1;1B0)OVERLAP_F_B;0SEND_F0)BATCH", SourceLoc{});
  CHECK(nested.error.find("groups do not nest") != std::string::npos);
  CHECK(nested.error_offset == 1);
}

TEST_CASE("batched P2P: the 1F1B exchange deadlocks unbatched and holds batched", "[batch]") {
  // Unbatched: both ranks block in their SEND, neither reaches its RECV.
  VerifyResult bad = verify(load_text("unbatched.yaml", one_f_one_b_p2("0SEND_F1 0RECV_B0", "1SEND_B0 1RECV_F1")), {});
  REQUIRE(bad.exit_code == 11);
  REQUIRE(bad.findings.size() == 1);
  const std::string& m = bad.findings[0].message;
  CHECK(m.find("wait-for cycle") != std::string::npos);
  CHECK(m.find("0SEND_F1") != std::string::npos);
  CHECK(m.find("1SEND_B0") != std::string::npos);

  // Batched on both ranks (PyTorch's fix: coalesce forward-receive and backward-send).
  VerifyResult good = verify(
      load_text("batched.yaml", one_f_one_b_p2("(0SEND_F1;0RECV_B0)BATCH", "(1SEND_B0;1RECV_F1)BATCH")), {});
  CHECK(good.findings.empty());
  CHECK(good.exit_code == 0);
  REQUIRE(good.program.groups.size() == 2);
  CHECK(good.program.validate().empty());
  // Both members of a group start together: when the group is launched.
  const auto& g0 = good.program.groups[0];
  CHECK(good.timeline->ops[g0[0]].start_s == good.timeline->ops[g0[1]].start_s);

  // Batching one side only is what NVIDIA/nccl#1279 calls undefined: the group completes as one
  // under the default semantics, so the exchange deadlocks and the finding names both sides.
  // With each member progressing on its own (rendezvous:independent) the group's RECV is posted
  // together with its SEND, and it holds.
  PipelineSpec one_side_spec = load_text("one-side.yaml", one_f_one_b_p2("0SEND_F1 0RECV_B0", "(1SEND_B0;1RECV_F1)BATCH"));
  VerifyResult one_side = verify(one_side_spec, {});
  REQUIRE(one_side.exit_code == 11);
  REQUIRE(one_side.findings.size() == 1);
  const auto& details = one_side.findings[0].details;
  CHECK(std::any_of(details.begin(), details.end(), [](const std::string& d) {
    return d.find("rank 1 posts 1SEND_B0") != std::string::npos && d.find("in one batch group, while rank 0 posts") != std::string::npos;
  }));
  VerifyOptions independent;
  independent.semantics = *parse_semantics("rendezvous:independent");
  CHECK(verify(one_side_spec, independent).findings.empty());
}

TEST_CASE("a BATCH group of one op parses, formats back and is a group of its own", "[batch]") {
  // PyTorch's pipelining runtime posts every SEND/RECV action through batch_isend_irecv, one
  // call per action: a group of one op.
  ParsedStep one = parse_step("(0SEND_F0)BATCH", SourceLoc{});
  REQUIRE(one.error.empty());
  REQUIRE(one.step);
  REQUIRE(one.batch.size() == 1);
  CHECK(one.batch[0].first == Action{ActionKind::kSendF, 0, 0});
  CHECK(one.batch[0].in_batch);
  CHECK_FALSE(one.batch[0].batched_with_next);
  // Two groups of one side by side stay two groups; a plain op next to them stays plain.
  const std::vector<Step> row = parse_row("0F0,(0SEND_F0)BATCH,(0RECV_B0)BATCH,0SEND_F1,(1SEND_B1;1RECV_F0)BATCH,0B0");
  CHECK(row.size() == 7);
  CHECK(count_tokens(row) == 6);
  CHECK(row_text(row) == "0F0,(0SEND_F0)BATCH,(0RECV_B0)BATCH,0SEND_F1,(1SEND_B1;1RECV_F0)BATCH,0B0");
  CHECK_FALSE(row[3].is_batched());
  // A group of one still refuses what a group refuses.
  CHECK(parse_step("(0F0)BATCH", SourceLoc{}).error.find("only SEND and RECV") != std::string::npos);
  CHECK(parse_step("(0SEND_F0 )BATCH", SourceLoc{}).error.find("unexpected") != std::string::npos);

  // In the program each is a group of one member, and its wait is a plain op's: the 1F1B
  // exchange with every SEND/RECV a group of one deadlocks exactly as the plain ops do.
  VerifyResult plain = verify(load_text("plain.yaml", one_f_one_b_p2("0SEND_F1 0RECV_B0", "1SEND_B0 1RECV_F1")), {});
  VerifyResult ones = verify(load_text("ones.yaml", one_f_one_b_p2("(0SEND_F1)BATCH (0RECV_B0)BATCH",
                                                                   "(1SEND_B0)BATCH (1RECV_F1)BATCH")),
                             {});
  CHECK(ones.program.validate().empty());
  REQUIRE(ones.program.groups.size() == 4);
  for (const auto& g : ones.program.groups) CHECK(g.size() == 1);
  REQUIRE(ones.exit_code == 11);
  REQUIRE(plain.exit_code == 11);
  REQUIRE(ones.findings.size() == 1);
  CHECK(ones.findings[0].kind == FindingKind::kDeadlock);
  CHECK(ones.findings[0].message == plain.findings.at(0).message);
  CHECK(ones.findings[0].ops == plain.findings.at(0).ops);
}

TEST_CASE("groups of one under rendezvous: each rank posting its send first deadlocks, two-op groups hold",
          "[batch]") {
  PipelineSpec spec = load_example("examples/single-op-batch-deadlock.yaml");
  VerifyResult r = verify(spec, {});
  REQUIRE(r.exit_code == 11);
  REQUIRE(r.findings.size() == 1);
  const Finding& f = r.findings[0];
  CHECK(f.kind == FindingKind::kDeadlock);
  // The cycle of pytorch/pytorch#172668: both ranks wait in their one-op send group.
  CHECK(f.message ==
        "deadlock under rendezvous semantics: wait-for cycle 0SEND_F1@rank 0 (comm stream) -> 1SEND_F0@rank 1 "
        "(comm stream) -> 0SEND_F1@rank 0 (comm stream)");
  CHECK(f.ranks == std::vector<int32_t>{0, 1});
  CHECK(f.ops == std::vector<std::string>{"0SEND_F1", "1SEND_F0"});
  REQUIRE(f.locations.size() == 2);
  CHECK(f.locations[0].line == 20);  // the member inside its group: 0SEND_F1 of (0SEND_F1)BATCH
  CHECK(f.locations[0].col == 34);
  CHECK(f.locations[1].line == 23);
  CHECK(f.locations[1].col == 30);
  // Every SEND/RECV of the example is a group of one.
  int p2p = 0;
  for (const Op& o : r.program.ops) p2p += o.kind == OpKind::kSend || o.kind == OpKind::kRecv;
  CHECK(p2p == 24);
  CHECK(r.program.groups.size() == 24);

  // Each send grouped with the receive that follows it from the same peer: both progress.
  std::string text = test::read_file(test::source_path("examples/single-op-batch-deadlock.yaml"));
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"(0SEND_F1)BATCH (2RECV_F0)BATCH", "(0SEND_F1;2RECV_F0)BATCH"},
      {"(2SEND_F0)BATCH (2RECV_F1)BATCH", "(2SEND_F0;2RECV_F1)BATCH"},
      {"(2SEND_B0)BATCH (2RECV_B1)BATCH", "(2SEND_B0;2RECV_B1)BATCH"},
      {"(2SEND_B1)BATCH (0RECV_B0)BATCH", "(2SEND_B1;0RECV_B0)BATCH"},
      {"(1SEND_F0)BATCH (1RECV_F1)BATCH", "(1SEND_F0;1RECV_F1)BATCH"},
      {"(1SEND_F1)BATCH (3RECV_F0)BATCH", "(1SEND_F1;3RECV_F0)BATCH"},
      {"(3SEND_B1)BATCH (1RECV_B0)BATCH", "(3SEND_B1;1RECV_B0)BATCH"},
      {"(1SEND_B0)BATCH (1RECV_B1)BATCH", "(1SEND_B0;1RECV_B1)BATCH"}};
  for (const auto& [from, to] : pairs) {
    INFO(from);
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), to);
  }
  VerifyResult two = verify(load_text("two-op-groups.yaml", text), {});
  INFO((two.findings.empty() ? std::string() : two.findings[0].message));
  CHECK(two.findings.empty());
  CHECK(two.exit_code == 0);
  CHECK(two.program.groups.size() == 16);  // 8 pairs and 8 groups of one
}

TEST_CASE("lazy creation: a group of one uses the pipeline group's communicator, a plain op its pair's",
          "[comm-init][batch]") {
  const std::string head =
      "schedcheck: 1\nranks: 2\nstages: 2\nplacement: loop\nforward_only: true\nmicrobatches: 2\n"
      "p2p: {comm_init: lazy}\nschedule:\n  actions:\n";
  // Both ranks post groups of one: one creation of the pipeline group's communicator each, no
  // pair communicator, and the lists hold.
  VerifyResult ones = verify(load_text("lazy-ones.yaml", head +
                                                             "    0: \"0F0 (0SEND_F0)BATCH 0F1 (0SEND_F1)BATCH\"\n"
                                                             "    1: \"(1RECV_F0)BATCH 1F0 (1RECV_F1)BATCH 1F1\"\n"),
                             {});
  INFO((ones.findings.empty() ? std::string() : ones.findings[0].message));
  CHECK(ones.findings.empty());
  std::vector<std::string> created;
  for (const Op& o : ones.program.ops)
    if (o.kind == OpKind::kCollective && o.collective == CollectiveKind::kCommInit)
      created.push_back(ones.program.comms[o.comm()].name);
  CHECK(created == std::vector<std::string>{"pipeline", "pipeline"});
  for (const Op& o : ones.program.ops)
    if (o.kind == OpKind::kSend || o.kind == OpKind::kRecv)
      CHECK(ones.program.channels[o.channel()].comm >= 0);  // the pipeline group's, not the pair's

  // Rank 0 sends plainly (as an encoding that drops the runtime's groups would write it): its
  // messages travel on the pair's communicator, rank 1's receives on the group's, and the
  // group's creation waits for rank 0, which never joins.
  VerifyResult mixed = verify(load_text("lazy-mixed.yaml", head +
                                                               "    0: \"0F0 0SEND_F0 0F1 0SEND_F1\"\n"
                                                               "    1: \"(1RECV_F0)BATCH 1F0 (1RECV_F1)BATCH 1F1\"\n"),
                              {});
  REQUIRE(mixed.exit_code == 10);  // deadlock and channel findings
  const Finding& f = mixed.findings.at(0);
  CHECK(f.kind == FindingKind::kDeadlock);
  INFO(f.message);
  CHECK(f.message.find("hang caused by ranks 0-1") != std::string::npos);
  CHECK(f.ranks == std::vector<int32_t>{0, 1});
  bool group_never_joined = false, receives_alone = false;
  for (const Finding& c : mixed.findings) {
    if (c.kind != FindingKind::kChannel) continue;
    if (c.message.find("collectives diverge on communicator 'pipeline' at #1: rank 0 issues nothing more (no collective "
                       "left) where rank 1 issues communicator init 'init pipeline group' (0 B)") != std::string::npos) {
      group_never_joined = true;
      REQUIRE(c.locations.size() >= 2);
      CHECK(c.ops[0] == "rank 0's action list");  // what makes rank 0 differ
      CHECK(c.locations[0].line == 10);
      CHECK(c.locations[1].line == 11);  // rank 1's first group of one
      CHECK(c.locations[1].col == 10);
    }
    receives_alone |= c.message == "channel rank 0 -> rank 1 on communicator 'pipeline': 0 sends but 2 receives; 2 "
                                   "unmatched receive(s) wait forever";
  }
  CHECK(group_never_joined);
  CHECK(receives_alone);
}

TEST_CASE("verify --lower pytorch builds each lowered SEND/RECV as a group of one under lazy creation",
          "[comm-init][batch][lower]") {
  const std::string text =
      "schedcheck: 1\nranks: 2\nstages: 2\nplacement: loop\nmicrobatches: 2\n"
      "p2p: {comm_init: lazy}\nschedule:\n  actions:\n"
      "    0: \"0F0 0F1 0B0 0B1\"\n    1: \"1F0 1B0 1F1 1B1\"\n";
  VerifyOptions opt;
  opt.lower = LowerPolicy::kPyTorch;
  opt.keep_actions = true;
  VerifyResult lazy = verify(load_text("lower-lazy.yaml", text), opt);
  INFO((lazy.findings.empty() ? std::string() : lazy.findings[0].message));
  CHECK(lazy.findings.empty());
  int p2p = 0;
  for (const Op& o : lazy.program.ops)
    if (o.kind == OpKind::kSend || o.kind == OpKind::kRecv) {
      ++p2p;
      REQUIRE(o.group() >= 0);
      CHECK(lazy.program.groups[o.group()].size() == 1);
    }
  CHECK(p2p == 8);
  for (const Communicator& c : lazy.program.comms) CHECK(c.name == "pipeline");
  // Created eagerly, a group of one is the plain op: nothing is built as a group.
  PipelineSpec eager_spec = load_text("lower-eager.yaml", text);
  eager_spec.p2p.lazy_comm_init = false;
  VerifyResult eager = verify(eager_spec, opt);
  CHECK(eager.findings.empty());
  CHECK(eager.program.groups.empty());
}

TEST_CASE("a batched group completes only when every member has", "[batch]") {
  // Rank 1 batches its receive of F0 with a receive of F1 that rank 0 sends only after it
  // has received B0, which rank 1 sends after the group: the group never completes, although
  // the F0 member alone could (PiPPy#969's shape: batched receives that wait for each other).
  const std::string text =
      "schedcheck: 1\nranks: 2\nmicrobatches: 2\n"
      "p2p: {message_bytes: 1MiB, semantics: rendezvous}\n"
      "schedule:\n  actions:\n"
      "    0: \"0F0 0SEND_F0 0RECV_B0 0B0 0F1 0SEND_F1 0RECV_B1 0B1\"\n"
      "    1: \"(1RECV_F0;1RECV_F1)BATCH 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1\"\n";
  VerifyResult r = verify(load_text("batched-wait.yaml", text), {});
  REQUIRE(r.exit_code == 11);
  const Finding& f = r.findings.at(0);
  CHECK(f.kind == FindingKind::kDeadlock);
  // Rank 1 is stuck in the group's unfinished member, rank 0 in its receive of B0.
  CHECK(std::find(f.ops.begin(), f.ops.end(), "1RECV_F1") != f.ops.end());
  CHECK(std::find(f.ops.begin(), f.ops.end(), "0RECV_B0") != f.ops.end());
  // Unbatched, with rank 1 receiving F1 after it sends B0, the lists hold.
  const std::string plain =
      "schedcheck: 1\nranks: 2\nmicrobatches: 2\n"
      "p2p: {message_bytes: 1MiB, semantics: rendezvous}\n"
      "schedule:\n  actions:\n"
      "    0: \"0F0 0SEND_F0 0RECV_B0 0B0 0F1 0SEND_F1 0RECV_B1 0B1\"\n"
      "    1: \"1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\"\n";
  CHECK(verify(load_text("unbatched-wait.yaml", plain), {}).findings.empty());
}

TEST_CASE("forward-only schedules need no backward and free activations after the forward", "[forward-only]") {
  const std::string text =
      "schedcheck: 1\nranks: 2\nmicrobatches: 4\nforward_only: true\n"
      "costs: {F: 1ms, B: 2ms}\n"
      "memory: {activation_bytes: 100MB}\n"
      "p2p: {message_bytes: 1MiB, semantics: rendezvous}\n"
      "schedule:\n  actions:\n"
      "    0: \"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0F3 0SEND_F3\"\n"
      "    1: \"1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2 1RECV_F3 1F3\"\n";
  PipelineSpec spec = load_text("eval.yaml", text);
  CHECK(spec.forward_only);
  VerifyResult r = verify(spec, {});
  CHECK(r.findings.empty());
  REQUIRE(r.timeline);
  // One activation at a time: each is freed when its forward ends.
  CHECK(r.timeline->peak_bytes_per_rank[0] == 100'000'000);
  CHECK(r.worst_case->bytes_per_rank[1] == 100'000'000);
  // 4 forwards of 1 ms on rank 0, rank 1 one forward behind: makespan 5 ms.
  CHECK(r.timeline->makespan_s == Approx(0.005));

  // The same lists without forward_only are missing their backwards.
  spec.forward_only = false;
  VerifyResult train = verify(spec, {});
  CHECK(has_kind(train, FindingKind::kStructure));

  // A backward in a forward-only schedule is a structure finding.
  std::string with_b = text;
  with_b.replace(with_b.find("0SEND_F3\""), 9, "0SEND_F3 0B0\"");
  VerifyResult bad = verify(load_text("eval-with-b.yaml", with_b), {});
  REQUIRE(has_kind(bad, FindingKind::kStructure));
  CHECK(bad.findings[0].message.find("forward-only") != std::string::npos);
}

TEST_CASE("full recomputation lowers the peak by the dropped activations and costs a forward", "[recompute]") {
  // One rank, GPipe order, 2 microbatches of 100 bytes of activations. Without recompute both
  // are live before 0B0: peak 200. With full recompute keeping 10 bytes (the stage input):
  // during 0F1 10 + 100; at 0B0 20 + 90 recomputed: peak 110, 90 bytes lower.
  const std::string base =
      "schedcheck: 1\nranks: 1\nmicrobatches: 2\n"
      "costs: {F: 1ms, B: 2ms}\n"
      "schedule:\n  actions:\n    0: \"0F0 0F1 0B0 0B1\"\n";
  VerifyResult plain = verify(load_text("no-recompute.yaml", base + "memory: {activation_bytes: 100}\n"), {});
  VerifyResult full = verify(
      load_text("recompute.yaml", base + "memory: {activation_bytes: 100, recompute: full, recompute_retained_bytes: 10}\n"),
      {});
  REQUIRE(plain.findings.empty());
  REQUIRE(full.findings.empty());
  CHECK(plain.timeline->peak_bytes_per_rank[0] == 200);
  CHECK(full.timeline->peak_bytes_per_rank[0] == 110);
  CHECK(plain.worst_case->bytes_per_rank[0] == 200);
  CHECK(full.worst_case->bytes_per_rank[0] == 110);
  // Each B reruns the forward (F's time by default): 2 + 2·(2 + 1) ms.
  CHECK(plain.timeline->makespan_s == Approx(0.006));
  CHECK(full.timeline->makespan_s == Approx(0.008));
  // Selective recomputation needs the retained bytes and the recompute time.
  Diagnostics d;
  CHECK_FALSE(load_yaml_spec(
      test::write_temp("schedcheck-composed-test", "selective.yaml", base + "memory: {activation_bytes: 100, recompute: selective}\n"),
      d));
  CHECK(d.has_errors());
}

TEST_CASE("UNSHARD/RESHARD and REDUCE_GRAD are placed as PyTorch's runtime places them", "[composed]") {
  // docs/facts/composed-runtime.md's example of _add_unshard_reshard with max_active_stages = 3.
  std::vector<Step> row = parse_row("0F0,0F1,1F0,1F1,1B0,1B1,0B0,0B1");
  CHECK(row_text(add_unshard_reshard(row, 3)) ==
        "0UNSHARD,1UNSHARD,0F0,0F1,1F0,1F1,1B0,1B1,1RESHARD,0B0,0B1,0RESHARD");
  // With one active stage the stages take turns.
  CHECK(row_text(add_unshard_reshard(parse_row("0F0,1F0,1B0,0B0"), 1)) ==
        "0UNSHARD,0F0,0RESHARD,1UNSHARD,1F0,1B0,1RESHARD,0UNSHARD,0B0,0RESHARD");
  // _add_reduce_grad: right after the m-th B or W of a stage.
  CHECK(row_text(add_reduce_grad(row, 2)) == "0F0,0F1,1F0,1F1,1B0,1B1,1REDUCE_GRAD,0B0,0B1,0REDUCE_GRAD");
  CHECK(row_text(add_reduce_grad(parse_row("0F0,0I0,0W0"), 1)) == "0F0,0I0,0W0,0REDUCE_GRAD");
}

TEST_CASE("composed PP=2 x FSDP=2 interleaved 1F1B holds, with the collectives of a torchtitan step", "[composed]") {
  PipelineSpec spec = load_example("examples/composed-pp2-fsdp2-interleaved.yaml");
  REQUIRE(spec.composition);
  VerifyResult r = verify(spec, {});
  INFO(r.findings.size());
  CHECK(r.findings.empty());
  const Program& p = r.program;
  CHECK(p.num_ranks == 4);
  CHECK(p.validate().empty());
  // Two shard groups (one per pipeline rank), no replicate group.
  REQUIRE(p.comms.size() == 2);
  CHECK(p.comms[0].ranks == std::vector<int32_t>{0, 1});
  CHECK(p.comms[1].ranks == std::vector<int32_t>{2, 3});
  // Every rank: 2 stages, each gathered, reduced once; interleaved 1F1B keeps both active
  // (max_active_stages 3), so one all-gather per stage.
  int gathers = 0, scatters = 0;
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    const Op& o = p.ops[id];
    if (o.kind != OpKind::kCollective) continue;
    if (o.collective == CollectiveKind::kAllGather) ++gathers;
    if (o.collective == CollectiveKind::kReduceScatter) ++scatters;
  }
  CHECK(gathers == 4 * 2);
  CHECK(scatters == 4 * 2);
  // The gathered parameters and the sharded copy count in memory: the peak includes 2 stages
  // unsharded (3.5 GB each) and their shards (1.75 GB each).
  CHECK(r.timeline->peak_bytes_per_rank[0] > 2 * 3'500'000'000LL + 2 * 1'750'000'000LL);
  CHECK(p.static_bytes_per_rank[0] == 2 * 1'750'000'000LL);
}

TEST_CASE("composed PP x HSDP: memory per rank against the limit, reductions over both groups", "[composed]") {
  VerifyResult r = verify(load_example("examples/composed-pp4-hsdp.yaml"), {});
  const Program& p = r.program;
  CHECK(p.num_ranks == 32);
  int all_reduces = 0;
  for (const Op& o : p.ops) all_reduces += o.kind == OpKind::kCollective && o.collective == CollectiveKind::kAllReduce;
  CHECK(all_reduces == 32);  // one HSDP all-reduce of its stage's shard per rank
  REQUIRE(r.exit_code == 13);
  // The first pipeline rank holds 4 microbatches of activations in flight with its gathered
  // stage: the finding names its ranks (the 8 data-parallel copies of pipeline rank 0).
  const Finding& f = r.findings.at(0);
  CHECK(f.kind == FindingKind::kMemory);
  CHECK(f.message.find("ranks 0-7") != std::string::npos);
}

TEST_CASE("the composed tied-embedding hang: a wait-for cycle across P2P and collectives", "[composed]") {
  PipelineSpec spec = load_example("examples/composed-tied-embedding-deadlock.yaml");
  VerifyResult r = verify(spec, {});
  REQUIRE(r.exit_code == 11);
  const Finding& f = r.findings.at(0);
  CHECK(f.kind == FindingKind::kDeadlock);
  CHECK(std::find(f.ops.begin(), f.ops.end(), "0RECV_B1") != f.ops.end());
  CHECK(std::find(f.ops.begin(), f.ops.end(), "AR tied embedding") != f.ops.end());

  // The fix: send the last gradient before reducing.
  PipelineSpec fixed = spec;
  auto& row = fixed.actions[1];
  std::iter_swap(row.end() - 2, row.end() - 1);
  CHECK(verify(fixed, {}).findings.empty());

  // The same lists as a plain pipeline (no mesh) hold: the hang needs the composition.
  PipelineSpec plain = spec;
  plain.composition.reset();
  CHECK(verify(plain, {}).findings.empty());
  // And with the collectives on their own streams (comm-stream blocking) they hold too.
  VerifyOptions streams;
  streams.blocking = BlockingModel::kCommStream;
  CHECK(verify(spec, streams).findings.empty());
}

TEST_CASE("composed specs place each kind of FSDP action only where the user placed none", "[composed]") {
  // Explicit REDUCE_GRADs: UNSHARD/RESHARD are still added, so the gathered parameters count.
  // 1 GB of parameters over a shard group of 2: 0.5 GB shard resident + 1 GB gathered > 1.2 GB.
  const std::string explicit_reduce =
      "schedcheck: 1\nmesh: {pp: 2, dp_shard: 2, link: {bandwidth: 1GB/s}}\nfsdp: {}\n"
      "memory: {params_bytes: 1GB, limit_bytes: 1.2GB}\n"
      "schedule:\n  actions:\n    0: \"0F0 0F1 0B0 0B1 0REDUCE_GRAD\"\n    1: \"1F0 1F1 1B0 1B1 1REDUCE_GRAD\"\n";
  VerifyResult r = verify(load_text("explicit-reduce.yaml", explicit_reduce), {});
  CHECK(r.exit_code == 13);
  int gathers = 0;
  for (const Op& o : r.program.ops) gathers += o.kind == OpKind::kCollective && o.collective == CollectiveKind::kAllGather;
  CHECK(gathers == 4);

  // A REDUCE_GRAD before the stage's last backward is a residency finding, FSDP or not.
  const std::string early =
      "schedcheck: 1\nmesh: {pp: 2, dp_replicate: 2}\n"
      "schedule:\n  actions:\n    0: \"0F0 0F1 0B0 0B1 0REDUCE_GRAD\"\n    1: \"1F0 1F1 1B0 1REDUCE_GRAD 1B1\"\n";
  VerifyResult e = verify(load_text("early-reduce.yaml", early), {});
  REQUIRE(e.exit_code == 12);
  CHECK(e.findings[0].message.find("comes before stage 1's last backward") != std::string::npos);

  // A forward-only step is gathered too (and reduces nothing).
  const std::string fwd =
      "schedcheck: 1\nmesh: {pp: 2, dp_shard: 2}\nforward_only: true\nfsdp: {}\n"
      "memory: {params_bytes: 1GB, activation_bytes: 1GB, limit_bytes: 2.2GB}\n"
      "schedule:\n  actions:\n    0: \"0F0 0F1\"\n    1: \"1F0 1F1\"\n";
  VerifyResult f = verify(load_text("forward-fsdp.yaml", fwd), {});
  CHECK(f.exit_code == 13);  // 0.5 GB shard + 1 GB gathered + 1 GB activation
  for (const Op& o : f.program.ops) CHECK_FALSE((o.kind == OpKind::kCollective && o.collective == CollectiveKind::kReduceScatter));
}

TEST_CASE("lazy communicator creation: first uses that form a cycle deadlock, eager creation holds", "[comm-init]") {
  PipelineSpec spec = load_example("examples/lazy-comm-init-deadlock.yaml");
  REQUIRE(spec.p2p.lazy_comm_init);
  VerifyResult r = verify(spec, {});
  // Deadlock, and the creations disagree across ranks (collective divergence).
  REQUIRE(r.exit_code == 10);
  const Finding& f = r.findings.at(0);
  REQUIRE(f.kind == FindingKind::kDeadlock);
  // Rank 0's batched group needs the pipeline group's communicator, which ranks 1 and 2 (plain
  // sends and receives, pair communicators) never create; they wait in their pair creations.
  CHECK(f.message.find("init pipeline group@rank 0") != std::string::npos);
  CHECK(f.message.find("on communicator 'pipeline' for rank 1") != std::string::npos);
  const std::string all = joined_details(f);
  CHECK(all.find("rank 1 (comm stream) at init p2p 0-1") != std::string::npos);
  CHECK(all.find("rank 2 (comm stream) at init p2p 1-2") != std::string::npos);
  // One pipeline-group creation (rank 0's batch); pair creations: 0-1 on ranks 0 and 1, 1-2 on
  // ranks 1 and 2, 0-2 on rank 2 only (rank 0 receives from rank 2 inside its batch).
  int group_inits = 0, pair_inits = 0;
  for (const Op& o : r.program.ops) {
    if (o.kind != OpKind::kCollective || o.collective != CollectiveKind::kCommInit) continue;
    (r.program.comms[o.comm()].name == "pipeline" ? group_inits : pair_inits)++;
  }
  CHECK(group_inits == 1);
  CHECK(pair_inits == 5);
  // Created eagerly, the lists hold where each member of rank 0's group progresses on its own;
  // under the default semantics that group (a send to rank 1 and a receive from rank 2, whose
  // message needs rank 1's forward first) completes as one and still deadlocks: NCCL does not
  // promise that the receive cannot hold the send back (NVIDIA/nccl#1279).
  spec.p2p.lazy_comm_init = false;
  VerifyOptions independent;
  independent.semantics = *parse_semantics("rendezvous:independent");
  CHECK(verify(spec, independent).findings.empty());
  VerifyResult eager = verify(spec, {});
  CHECK(eager.exit_code == 11);
}

TEST_CASE("lazy creation: a batched group waits for every pipeline rank to create the group's communicator",
          "[comm-init][batch]") {
  PipelineSpec spec = load_example("examples/batched-lazy-group-init-deadlock.yaml");
  REQUIRE(spec.p2p.lazy_comm_init);
  VerifyResult r = verify(spec, {});
  REQUIRE(r.exit_code == 10);  // deadlock, and the pipeline communicator's creations diverge
  const Finding& f = r.findings.at(0);
  REQUIRE(f.kind == FindingKind::kDeadlock);
  CHECK(f.message.find("hang caused by rank 0") != std::string::npos);
  CHECK(f.message.find("ranks 1-3 wait forever") != std::string::npos);
  CHECK(f.message.find("init pipeline group@rank 1") != std::string::npos);
  CHECK(f.message.find("communicator 'pipeline' for rank 0, which issues only 0 collectives") != std::string::npos);
  CHECK(std::find(f.ops.begin(), f.ops.end(), "init pipeline group") != f.ops.end());
  const std::string all = joined_details(f);
  CHECK(all.find("trace: init p2p 0-1 1RECV_F0 1RECV_F1 [stuck at init pipeline group") != std::string::npos);
  bool divergence = false;
  for (const Finding& c : r.findings)
    if (c.kind == FindingKind::kChannel && c.message.find("collectives diverge on communicator 'pipeline'") != std::string::npos) {
      divergence = true;
      // Rank 0 issues nothing: located first at what makes it differ, its action list, then at
      // the creation ranks 1-3 wait in.
      REQUIRE(c.locations.size() >= 2);
      CHECK(c.locations[0].line > 0);
      CHECK(c.ops.at(0) == "rank 0's action list");
      CHECK(c.ops.at(1) == "init pipeline group");
    }
  CHECK(divergence);
  // The group's members are the 4 pipeline ranks; ranks 1-3 create it, rank 0 never does.
  const Communicator* group = nullptr;
  for (const Communicator& c : r.program.comms)
    if (c.name == "pipeline") group = &c;
  REQUIRE(group != nullptr);
  CHECK(group->ranks == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(group->ops[0].empty());
  for (int m = 1; m < 4; ++m) CHECK(group->ops[m].size() == 1);
  // The one-line fix: communicators created eagerly.
  spec.p2p.lazy_comm_init = false;
  CHECK(verify(spec, {}).findings.empty());
  // Lazy, with rank 0 batching its sends (and rank 1 its receives from rank 0): every rank
  // creates the group's communicator, and the lists hold.
  const std::string text = test::read_file(test::source_path("examples/batched-lazy-group-init-deadlock.yaml"));
  std::string batched = text;
  const std::string r0 = "\"0F0 0SEND_F0 0F1 0SEND_F1\"", r1 = "\"1RECV_F0 1RECV_F1 1F0";
  REQUIRE(batched.find(r0) != std::string::npos);
  REQUIRE(batched.find(r1) != std::string::npos);
  batched.replace(batched.find(r0), r0.size(), "\"0F0 0F1 (0SEND_F0;0SEND_F1)BATCH\"");
  batched.replace(batched.find(r1), r1.size(), "\"(1RECV_F0;1RECV_F1)BATCH 1F0");
  VerifyResult fixed = verify(load_text("all-batched.yaml", batched), {});
  INFO((fixed.findings.empty() ? std::string() : fixed.findings[0].message));
  CHECK(fixed.findings.empty());
}

TEST_CASE("lazy creation: batched and plain messages of one rank pair travel on two communicators", "[comm-init][batch]") {
  const std::string head =
      "schedcheck: 1\nranks: 2\nstages: 2\nplacement: loop\nforward_only: true\np2p: {comm_init: lazy}\n";
  // Rank 0 sends F3 and F4 plainly (the pair's communicator); rank 1 receives them in a batch
  // (the pipeline group's): they never meet, though one channel per rank pair would pair them.
  VerifyResult mixed = verify(
      load_text("mixed.yaml", head + "microbatches: 5\nschedule:\n  actions:\n"
                                     "    0: \"0F0 0SEND_F0 0F1 0F2 (0SEND_F1;0SEND_F2)BATCH 0F3 0SEND_F3 0F4 0SEND_F4\"\n"
                                     "    1: \"1RECV_F0 1F0 (1RECV_F1;1RECV_F2)BATCH 1F1 1F2 (1RECV_F3;1RECV_F4)BATCH 1F3 1F4\"\n"),
      {});
  REQUIRE_FALSE(mixed.findings.empty());
  bool unmatched_recvs = false, unmatched_sends = false, deadlock = false;
  for (const Finding& f : mixed.findings) {
    deadlock |= f.kind == FindingKind::kDeadlock;
    if (f.kind != FindingKind::kChannel) continue;
    unmatched_recvs |= f.message.find("channel rank 0 -> rank 1 on communicator 'pipeline': 2 sends but 4 receives; 2 "
                                      "unmatched receive(s) wait forever") != std::string::npos;
    unmatched_sends |= f.message.find("channel rank 0 -> rank 1: 3 sends but 1 receives; 2 unmatched send(s) are never "
                                      "received") != std::string::npos;
  }
  CHECK(unmatched_recvs);
  CHECK(unmatched_sends);
  CHECK(deadlock);
  // Each communicator pairs its own messages in order: F0 and F1 plainly, F2 and F3 batched.
  // Under eager semantics that holds; under rendezvous, rank 0's plain send of F1 waits for a
  // receive that rank 1 posts after its batch, whose communicator rank 0 creates only after
  // that send: a real hang.
  PipelineSpec two = load_text("two.yaml", head + "microbatches: 4\nschedule:\n  actions:\n"
                                                  "    0: \"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0F3 (0SEND_F2;0SEND_F3)BATCH\"\n"
                                                  "    1: \"1RECV_F0 1F0 (1RECV_F2;1RECV_F3)BATCH 1RECV_F1 1F1 1F2 1F3\"\n");
  VerifyOptions eager;
  eager.semantics = parse_semantics("eager");
  VerifyResult ok = verify(two, eager);
  INFO((ok.findings.empty() ? std::string() : ok.findings[0].message));
  CHECK(ok.findings.empty());
  VerifyResult hang = verify(two, {});
  REQUIRE_FALSE(hang.findings.empty());
  CHECK(hang.findings[0].kind == FindingKind::kDeadlock);
  for (const Finding& f : hang.findings) CHECK(f.message.find("is sent as") == std::string::npos);  // nothing crossed
}

TEST_CASE("batched groups at pipeline size 2: the fixed op order pairs messages crosswise, rank parity holds",
          "[batch]") {
  // Megatron-LM#5100 / PR #5271: one peer is both prev and next, and NCCL pairs same-peer ops
  // in posting order, so [send_prev, recv_prev, send_next, recv_next] on both ranks meets a
  // gradient with an activation receive.
  VerifyResult bad = verify(load_example("examples/megatron-pp2-shape-exchange-swap.yaml"), {});
  REQUIRE(bad.exit_code == 14);
  REQUIRE(bad.findings.size() == 2);
  for (const Finding& f : bad.findings) CHECK(f.kind == FindingKind::kChannel);
  const Finding& f = bad.findings[0];
  CHECK(f.ranks == std::vector<int32_t>{0, 1});
  CHECK(f.message ==
        "channel rank 0 -> rank 1: message 4 is sent as 2SEND_B0 (gradients of microbatch 0 from stage 2 to stage 1) "
        "but received as 1RECV_F2 (activations of microbatch 2 from stage 0 to stage 1) (4 mismatched messages on "
        "this channel)");
  // The swapped pairs, both ways round, within one batch on each rank.
  CHECK(f.ops == std::vector<std::string>{"2SEND_B0", "1RECV_F2", "0SEND_F2", "1RECV_B0", "2SEND_B1", "1RECV_F3",
                                          "0SEND_F3", "1RECV_B1"});
  const Finding& g = bad.findings[1];
  CHECK(g.ranks == std::vector<int32_t>{1, 0});
  CHECK(g.message.find("channel rank 1 -> rank 0: message 4 is sent as 1SEND_B0") != std::string::npos);
  CHECK(g.message.find("received as 2RECV_F2") != std::string::npos);
  // Nothing hangs: the sizes agree and every group completes (the swap is silent).
  for (const Finding& x : bad.findings) CHECK(x.kind != FindingKind::kDeadlock);
  VerifyResult good = verify(load_example("examples/megatron-pp2-shape-exchange-parity.yaml"), {});
  INFO((good.findings.empty() ? std::string() : good.findings[0].message));
  CHECK(good.findings.empty());
  CHECK(good.exit_code == 0);
  // Same batches, same members: only the order inside the groups differs.
  REQUIRE(good.program.groups.size() == bad.program.groups.size());
  for (size_t i = 0; i < good.program.groups.size(); ++i)
    CHECK(good.program.groups[i].size() == bad.program.groups[i].size());
}

namespace {

// One pipeline rank holding two stages (100 bytes of parameters each, 50 resident per shard),
// sharded over two ranks, one active stage at a time: each stage is gathered for its forward
// and again for its backward.
std::string two_stage_fsdp(const std::string& options) {
  return "schedcheck: 1\nmesh: {pp: 1, dp_shard: 2, link: {bandwidth: 1e9, latency: 0}}\n"
         "stages: 2\nplacement: loop\nmicrobatches: 1\n"
         "costs: {F: 1ms, B: 2ms}\n"
         "fsdp: {implementation: fsdp2, options: {max_active_stages: 1" + options + "}}\n"
         "memory: {limit_bytes: 300, params_bytes: 100, activation_bytes: 0}\n"
         "schedule:\n  actions:\n    0: \"0F0 1F0 1B0 0B0\"\n";
}

std::string diag_text(const Diagnostics& d) {
  std::ostringstream os;
  d.print(os);
  return os.str();
}

int count_named(const Program& p, const std::string& prefix) {
  int n = 0;
  for (const Op& o : p.ops) n += o.name() >= 0 && p.names[o.name()].rfind(prefix, 0) == 0;
  return n;
}

}  // namespace

TEST_CASE("record_stream: a freed gather is released only after the collectives queued at the free", "[composed]") {
  // unshard_async_op (FSDP2's _set_unshard_async_op; PyTorch pipelining's unshard(async_op=True)):
  // each all-gather waits for the compute issued before it, so with events a stage's gather
  // follows the previous RESHARD: one gathered stage at a time, 100 static + 100 = 200 B.
  VerifyResult events =
      verify(load_text("rs-events.yaml", two_stage_fsdp(", unshard_async_op: true, record_stream: false")), {});
  INFO(events.findings.size());
  CHECK(events.findings.empty());
  CHECK(events.program.static_bytes_per_rank[0] == 100);
  CHECK(events.timeline->peak_bytes_per_rank[0] == 200);
  CHECK(events.worst_case->bytes_per_rank[0] == 200);
  CHECK(count_named(events.program, "release stage") == 0);

  // c10d's record_stream (the default with unshard_async_op): each free takes effect on the
  // allocator lane once the shard communicator's queued work is done, and nothing waits for
  // it. On the predicted timeline the releases come at once (200 B), but with the host ahead
  // of the GPU all three gathered instances (stage 0 twice, stage 1 once: 1F0 and 1B0 are
  // adjacent) can be held: 100 + 3 x 100 = 400 B > 300 B.
  VerifyResult recorded = verify(load_text("rs-recorded.yaml", two_stage_fsdp(", unshard_async_op: true")), {});
  CHECK(recorded.timeline->peak_bytes_per_rank[0] == 200);
  CHECK(recorded.worst_case->bytes_per_rank[0] == 400);
  CHECK(count_named(recorded.program, "release stage") == 2 * 3);  // 2 ranks x 3 RESHARDs
  REQUIRE(recorded.exit_code == 13);
  const Finding& f = recorded.findings.at(0);
  CHECK(f.kind == FindingKind::kMemory);
  CHECK(f.message.find("can exceed its memory limit") != std::string::npos);
  CHECK(std::any_of(f.details.begin(), f.details.end(),
                    [](const std::string& d) { return d.find("param stage 0 #1 (record_stream)") != std::string::npos; }));
  // Each release waits for its RESHARD and for the last collective queued on the shard
  // communicator when the free was issued.
  const Program& p = recorded.program;
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    const Op& o = p.ops[id];
    if (o.name() < 0 || p.names[o.name()].rfind("release stage", 0) != 0) continue;
    CHECK(std::string(p.streams[o.stream].name) == "allocator");
    bool after_reshard = false, after_collective = false;
    for (const Dep* d = p.deps_begin(id); d != p.deps_end(id); ++d) {
      const Op& s = p.ops[d->src];
      after_reshard |= s.kind == OpKind::kMarker && s.actions[0].kind == ActionKind::kReshard;
      after_collective |= s.kind == OpKind::kCollective;
    }
    CHECK(after_reshard);
    CHECK(after_collective);
  }
  // The SMT engine finds the same worst case (400 B) with the releases unordered.
  DifferentialTally tally;
  SmtOptions smt;
  smt.seed = 11;
  differential_case(load_text("rs-smt.yaml", two_stage_fsdp(", unshard_async_op: true")), {}, smt, "rs-smt.yaml", tally,
                    [](const std::string& m) { FAIL_CHECK(m); });
  CHECK(tally.cases == 1);
  CHECK(tally.disagreements == 0);
}

TEST_CASE("record_stream and unshard_async_op are FSDP2 options with located errors", "[composed]") {
  Diagnostics d;
  std::string text = two_stage_fsdp(", unshard_async_op: true");
  text.replace(text.find("fsdp2"), 5, "fsdp1");
  CHECK_FALSE(load_yaml_spec(test::write_temp("schedcheck-composed-test", "rs-fsdp1.yaml", text), d));
  CHECK(diag_text(d).find("rs-fsdp1.yaml:7:") != std::string::npos);
  CHECK(diag_text(d).find("unshard_async_op is an FSDP2 option") != std::string::npos);
}

TEST_CASE("MoE layers: dispatch and combine all-to-alls over the EP group, forward and backward", "[composed][moe]") {
  // Two data-parallel ranks form one EP group; one MoE layer with 1 MB per all-to-all over a
  // 1 GB/s link: each takes (2 - 1)/2 x 1 MB / 1 GB/s = 0.5 ms. F 1 ms + 2 x 0.5, B 2 ms + 2 x 0.5:
  // a 5 ms step; the receive buffer of each pair is the only memory.
  const std::string text =
      "schedcheck: 1\nmesh: {pp: 1, dp_shard: 2, ep: 2, link: {bandwidth: 1e9, latency: 0}}\n"
      "microbatches: 1\ncosts: {F: 1ms, B: 2ms}\n"
      "memory: {activation_bytes: 0}\n"
      "moe: {layers: 1, dispatch_bytes: 1000000}\n"
      "schedule:\n  actions:\n    0: \"0F0 0B0\"\n";
  VerifyResult r = verify(load_text("moe.yaml", text), {});
  INFO(r.findings.size());
  CHECK(r.findings.empty());
  const Program& p = r.program;
  std::vector<std::string> names;
  for (const Op& o : p.ops)
    if (o.kind == OpKind::kCollective && o.collective == CollectiveKind::kAllToAll && o.rank == 0) names.push_back(p.names[o.name()]);
  CHECK(names == std::vector<std::string>{"A2A dispatch L0 0F0", "A2A combine L0 0F0", "A2A grad combine L0 0B0",
                                          "A2A grad dispatch L0 0B0"});
  const auto ep = std::find_if(p.comms.begin(), p.comms.end(), [](const Communicator& c) { return c.name.rfind("ep", 0) == 0; });
  REQUIRE(ep != p.comms.end());
  CHECK(ep->ranks == std::vector<int32_t>{0, 1});
  CHECK(r.timeline->makespan_s == Approx(0.005));
  CHECK(r.timeline->peak_bytes_per_rank[0] == 1'000'000);
  CHECK(r.worst_case->bytes_per_rank[0] == 1'000'000);
  // The SMT engine encodes all-to-alls like the other collectives and agrees.
  DifferentialTally tally;
  SmtOptions smt;
  smt.seed = 11;
  differential_case(load_text("moe-smt.yaml", text), {}, smt, "moe-smt.yaml", tally,
                    [](const std::string& m) { FAIL_CHECK(m); });
  CHECK(tally.cases == 1);
  CHECK(tally.disagreements == 0);

  // mesh.ep must divide dp_shard; moe needs ep >= 2.
  Diagnostics d;
  std::string bad = text;
  bad.replace(bad.find("ep: 2"), 5, "ep: 3");
  CHECK_FALSE(load_yaml_spec(test::write_temp("schedcheck-composed-test", "moe-ep3.yaml", bad), d));
  CHECK(diag_text(d).find("mesh.ep (3) must divide mesh.dp_shard (2)") != std::string::npos);
}

TEST_CASE("MoE all-to-alls sized by a router spec's dispatch worst case", "[composed][moe]") {
  PipelineSpec spec = load_example("examples/composed-moe-ep.yaml");
  Diagnostics d;
  REQUIRE(resolve_moe_router(spec, d));
  // router-mixtral-dropless.yaml: dropless top-2 of 8 experts over ep_size 8, one expert per
  // rank, 1 x 4096 tokens per rank, hidden 4096, bf16: every rank's 4096 tokens can pick this
  // rank's expert, 8 senders: 8 x 4096 tokens x 4096 x 2 B = 256 MiB (router/dispatch.h).
  CHECK(spec.composition->moe->dispatch_bytes == 8LL * 4096 * 4096 * 2);
  VerifyResult r = verify(spec, {});
  CHECK(r.findings.empty());
  int a2a = 0;
  for (const Op& o : r.program.ops) a2a += o.kind == OpKind::kCollective && o.collective == CollectiveKind::kAllToAll;
  CHECK(a2a == 16 * 8 * 4 * 4);  // ranks x microbatches x layers x (2 forward + 2 backward)

  // The router's EP group must be the mesh's.
  std::string text = test::read_file(test::source_path("examples/composed-moe-ep.yaml"));
  text.replace(text.find("dp_shard: 8, ep: 8"), 18, "dp_shard: 8, ep: 4");
  text.replace(text.find("router: router-mixtral"), 22, "router: " + test::source_path("examples/router-mixtral"));
  Diagnostics d2;
  auto bad = load_yaml_spec(test::write_temp("schedcheck-composed-test", "moe-ep4.yaml", text), d2);
  REQUIRE(bad);
  CHECK_FALSE(resolve_moe_router(*bad, d2));
  CHECK(diag_text(d2).find("dispatches over ep_size 8 but mesh.ep is 4") != std::string::npos);
  CHECK(diag_text(d2).find("moe-ep4.yaml:16:") != std::string::npos);
}

TEST_CASE("composed specs: a moe.layers list needs one entry per stage, a program above 10^7 ops is refused", "[composed][moe]") {
  const std::string head = "schedcheck: 1\nmicrobatches: 8\ncosts: {F: 1ms, B: 2ms}\nschedule: {name: 1f1b}\n";
  const std::string list = test::write_temp("schedcheck-composed-test", "moe-list.yaml",
                                            head + "mesh: {pp: 2, dp_shard: 2, ep: 2}\nmoe: {layers: [1, 2, 3], dispatch_bytes: 1MiB}\n");
  auto r = test::run_schedcheck("verify '" + list + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("moe-list.yaml:6:6: error: moe.layers lists 3 values but the schedule has 2 stages") != std::string::npos);
  // 256 x 256 ranks, 256 microbatches of 1F1B: 256 x 1,024 actions x 256 replicas = 6.7e7 ops.
  const std::string huge = test::write_temp(
      "schedcheck-composed-test", "huge-mesh.yaml",
      "schedcheck: 1\nmicrobatches: 256\ncosts: {F: 1ms, B: 2ms}\nschedule: {name: 1f1b}\nmesh: {pp: 256, dp_shard: 256}\n");
  r = test::run_schedcheck("verify '" + huge + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("huge-mesh.yaml:5:7: error: the composed program would have about") != std::string::npos);
  CHECK(r.out.find("more than the 10^7 schedcheck checks at once") != std::string::npos);
}

TEST_CASE("composed FSDP: an UNSHARD's all-gather waits for the RESHARDs listed before it", "[composed]") {
  // Without unshard_async_op the all-gather stream still cannot run ahead of a free it follows
  // in the list (the host issues them in order, FSDP2's gather reuses the freed memory): one
  // stage gathered at a time, 100 static + 100 B, as with unshard_async_op.
  VerifyResult r = verify(load_text("rs-default.yaml", two_stage_fsdp("")), {});
  CHECK(r.findings.empty());
  CHECK(r.timeline->peak_bytes_per_rank[0] == 200);
  CHECK(r.worst_case->bytes_per_rank[0] == 200);
}
