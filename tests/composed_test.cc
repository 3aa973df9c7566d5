// Tests of one program for a whole step: batched P2P groups, forward-only schedules,
// recomputation, and composed specs (pipeline x FSDP/HSDP/DP on a mesh) through the one verify.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch.h"
#include "check/passes.h"
#include "pipeline/fsdp_actions.h"
#include "pipeline/named_schedule.h"
#include "pipeline/verify_pipeline.h"
#include "spec/yaml_spec.h"
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

  CHECK(parse_step("(0SEND_F0)BATCH", SourceLoc{}).error.find("two or more") != std::string::npos);
  CHECK(parse_step("(0F0;0SEND_F0)BATCH", SourceLoc{}).error.find("only SEND and RECV") != std::string::npos);
  CHECK(parse_step("(0SEND_F0;0SEND_F0)BATCH", SourceLoc{}).error.find("twice") != std::string::npos);
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

  // Batching one side suffices: its RECV is posted together with its SEND.
  VerifyResult one_side =
      verify(load_text("one-side.yaml", one_f_one_b_p2("0SEND_F1 0RECV_B0", "(1SEND_B0;1RECV_F1)BATCH")), {});
  CHECK(one_side.findings.empty());
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
  // FACTS §6's example of _add_unshard_reshard with max_active_stages = 3.
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

TEST_CASE("lazy communicator creation: first uses that form a cycle deadlock; eager creation holds", "[comm-init]") {
  PipelineSpec spec = load_example("examples/lazy-comm-init-deadlock.yaml");
  REQUIRE(spec.p2p.lazy_comm_init);
  VerifyResult r = verify(spec, {});
  REQUIRE(r.exit_code == 11);
  const Finding& f = r.findings.at(0);
  // The cycle runs through the three pair creations: 0-2 on rank 0, 1-2 on rank 2, 0-1 on rank 1.
  CHECK(f.message.find("wait-for cycle init p2p 0-2@rank 0") != std::string::npos);
  CHECK(std::find(f.ops.begin(), f.ops.end(), "init p2p 1-2") != f.ops.end());
  CHECK(std::find(f.ops.begin(), f.ops.end(), "init p2p 0-1") != f.ops.end());
  // One creation per pair and rank: 3 pairs x 2 ranks.
  int inits = 0;
  for (const Op& o : r.program.ops) inits += o.kind == OpKind::kCollective && o.collective == CollectiveKind::kCommInit;
  CHECK(inits == 6);
  spec.p2p.lazy_comm_init = false;
  CHECK(verify(spec, {}).findings.empty());
}
