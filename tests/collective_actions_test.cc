// Collectives in pipeline action lists (`ALL_REDUCE@world`, `BROADCAST@eval`, `groups:`): the
// notation, the structure rules, the hang of a rank that skips one, and their timing.
#include <optional>
#include <sstream>
#include <string>

#include "catch.h"
#include "cli_util.h"
#include "pipeline/verify_pipeline.h"
#include "spec/yaml_spec.h"
#include "test_util.h"

namespace sc {
namespace {

std::optional<PipelineSpec> parse(const std::string& text, Diagnostics& d) { return parse_yaml_spec("t.yaml", text, d); }

std::string errors_of(const std::string& text) {
  Diagnostics d;
  if (parse(text, d)) return "<loaded>";
  std::ostringstream os;
  d.print(os);
  return os.str();
}

VerifyResult verify_text(const std::string& text) {
  Diagnostics d;
  auto spec = parse(text, d);
  INFO(errors_of(text));
  REQUIRE(spec);
  return verify(*spec, VerifyOptions{});
}

// Three pipeline ranks, one forward-only microbatch each way; `tail0..2` end each rank's list.
std::string three_ranks(const std::string& groups, const std::string& tail0, const std::string& tail1,
                        const std::string& tail2) {
  return "schedcheck: 1\nranks: 3\nforward_only: true\ncosts: {F: 1ms}\n"
         "p2p: {latency: 10us, bandwidth: 1GB/s}\n" +
         groups +
         "schedule:\n  actions:\n"
         "    0: 0F0 0SEND_F0" + tail0 + "\n"
         "    1: 1RECV_F0 1F0 1SEND_F0" + tail1 + "\n"
         "    2: 2RECV_F0 2F0" + tail2 + "\n";
}

}  // namespace

TEST_CASE("collectives over a group are read, formatted and located as written", "[spec][collective]") {
  Diagnostics d;
  auto spec = parse(three_ranks("groups:\n  pair: [2, 1]\n  eval: {ranks: [0, 1, 2], bytes: 1MiB}\n",
                                " BROADCAST@eval", " ALL_REDUCE@pair BROADCAST@eval", " ALL_REDUCE@pair BROADCAST@eval"),
                    d);
  REQUIRE(spec);
  REQUIRE(spec->groups.size() == 2);
  CHECK(group_name(spec->groups[0].name) == "pair");
  CHECK(spec->groups[0].ranks == std::vector<int32_t>{1, 2});  // sorted
  CHECK(spec->groups[0].bytes == 4);                           // one fp32 scalar by default
  CHECK(spec->groups[1].bytes == 1 << 20);
  const Step& bc = spec->actions[0].back();
  CHECK(is_collective(bc.first.kind));
  CHECK(bc.first.kind == ActionKind::kBroadcast);
  CHECK(bc.first.stage == -1);
  CHECK(bc.first.microbatch == -1);
  CHECK(format_step(bc) == "BROADCAST@eval");
  CHECK(bc.loc.line == 11);
  CHECK(bc.loc.col == 21);
  CHECK(format_steps(spec->actions[1], " ") == "1RECV_F0 1F0 1SEND_F0 ALL_REDUCE@pair BROADCAST@eval");
  // world is every rank without a declaration; an undeclared name is no group.
  auto world = spec->collective_group(intern_group_name("world"));
  REQUIRE(world);
  CHECK(world->ranks == std::vector<int32_t>{0, 1, 2});
  CHECK(!spec->collective_group(intern_group_name("nope")));
}

TEST_CASE("malformed collectives and groups are located errors", "[spec][collective]") {
  const std::string head = "schedcheck: 1\nranks: 2\nschedule:\n  actions:\n    0: 0F0 0B0 ";
  auto first = [](const std::string& out) { return out.substr(0, out.find('\n')); };
  CHECK(first(errors_of(head + "ALLREDUCE@a\n")) ==
        "t.yaml:5:16: error: rank 0: 'ALLREDUCE@a': an action starts with its stage id, as in 0F3, or is a "
        "collective over a group: ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL or BARRIER, as in "
              "ALL_REDUCE@world");
  CHECK(first(errors_of(head + "BARRIER\n")) ==
        "t.yaml:5:23: error: rank 0: 'BARRIER': a collective names its group after '@', as in BARRIER@world");
  CHECK(first(errors_of(head + "BARRIER@\n")) ==
        "t.yaml:5:24: error: rank 0: 'BARRIER@': a group name starts with a letter or '_', as in BARRIER@world");
  CHECK(first(errors_of(head + "BARRIER@a.b\n")) ==
        "t.yaml:5:25: error: rank 0: 'BARRIER@a.b': unexpected '.b' after the group name (names hold letters, digits, "
        "'_' and '-')");
  CHECK(first(errors_of(head + "(BARRIER@world)BATCH\n")) ==
        "t.yaml:5:17: error: rank 0: '(BARRIER@world)BATCH': a BATCH group holds only SEND and RECV actions, not BARRIER");
  const std::string tail = "schedule:\n  actions:\n    0: 0F0 0B0\n";
  auto group_error = [&](const std::string& groups) {
    return first(errors_of("schedcheck: 1\nranks: 2\ngroups:\n" + groups + tail));
  };
  CHECK(group_error("  world: [0]\n") ==
        "t.yaml:4:3: error: 'world' is every rank and is not declared; name a group of your own for other ranks or bytes");
  CHECK(group_error("  2x: [0]\n") ==
        "t.yaml:4:3: error: group name '2x' must start with a letter or '_' and hold letters, digits, '_' and '-' (at "
        "most 64)");
  CHECK(group_error("  a: [0, 0]\n") == "t.yaml:4:10: error: rank 0 is listed twice in groups.a");
  CHECK(group_error("  a: [5]\n") == "t.yaml:4:7: error: rank 5 of groups.a is out of range: ranks is 2 (ids 0 to 1)");
  CHECK(group_error("  a: []\n") == "t.yaml:4:6: error: groups.a lists no ranks; give at least one, as in [0, 3]");
  CHECK(group_error("  a: {bytes: 4}\n") == "t.yaml:4:3: error: groups.a needs ranks, as in {ranks: [0, 3], bytes: 4}");
  CHECK(group_error("  a: {ranks: [1], bytez: 3}\n") == "t.yaml:4:19: error: unknown key 'bytez' in groups.a; did you mean 'bytes'?");
  CHECK(group_error("  a: [0]\n  a: [1]\n") == "t.yaml:5:3: error: duplicate group 'a' (first given at line 4)");
}

TEST_CASE("a collective over an undeclared group or on a rank outside its group is a structure finding", "[verify][collective]") {
  VerifyResult r = verify_text(three_ranks("groups:\n  pair: [1, 2]\n", " ALL_REDUCE@pair ALL_GATHER@nope", " ALL_REDUCE@pair",
                                           " ALL_REDUCE@pair"));
  CHECK(r.exit_code == 12);
  REQUIRE(r.findings.size() == 2);
  CHECK(r.findings[0].kind == FindingKind::kStructure);
  CHECK(r.findings[0].message ==
        "collectives over a group the spec does not declare (groups:; 'world' is every rank): ALL_GATHER@nope");
  CHECK(r.findings[1].message == "collectives on a rank outside their group: ALL_REDUCE@pair");
  CHECK(r.findings[1].ranks == std::vector<int32_t>{0});
  REQUIRE(r.findings[1].details.size() == 1);
  CHECK(r.findings[1].details[0] == "ALL_REDUCE@pair at t.yaml:10:21 runs on rank 0, but group pair holds ranks 1, 2");
}

TEST_CASE("an evaluation broadcast one rank skips is a hang naming that rank, and holds on every rank", "[verify][collective]") {
  // deepspeedai/DeepSpeed PR #1944: eval_batch ends with the loss broadcast over the pipeline group.
  VerifyResult skipped = verify_text(three_ranks("", " BROADCAST@world", "", " BROADCAST@world"));
  CHECK(skipped.exit_code == 10);
  REQUIRE(skipped.findings.size() == 2);
  const Finding& hang = skipped.findings[0];
  CHECK(hang.kind == FindingKind::kDeadlock);
  CHECK(hang.message.rfind("hang caused by rank 1: collectives diverge on communicator 'group world' at #1: rank 1 "
                           "issues nothing more (no collective left) where ranks 0, 2 issue broadcast 'BROADCAST@world' "
                           "(4 B); ranks 0, 2 wait forever",
                           0) == 0);
  // Located first at what makes rank 1 differ, its action list (line 9), then at the broadcast
  // the others wait in.
  REQUIRE(hang.ops.size() >= 2);
  CHECK(hang.ops[0] == "rank 1's action list");
  CHECK(hang.locations[0].line == 9);
  CHECK(hang.ops[1] == "BROADCAST@world");
  CHECK(skipped.findings[1].kind == FindingKind::kChannel);
  CHECK(skipped.findings[1].ops.front() == "rank 1's action list");
  CHECK(skipped.findings[1].ranks == std::vector<int32_t>{1});

  VerifyResult every = verify_text(three_ranks("", " BROADCAST@world", " BROADCAST@world", " BROADCAST@world"));
  CHECK(every.findings.empty());
  CHECK(every.exit_code == 0);

  // The bundled example is the same pattern.
  test::CliRun ex = test::run_schedcheck("verify '" + test::source_path("examples/eval-broadcast-skipped.yaml") + "'");
  CHECK(ex.exit_code == 10);
  CHECK(ex.out.find("hang caused by rank 1: collectives diverge on communicator 'group world'") != std::string::npos);
}

TEST_CASE("a collective one of two ranks skips names that rank, as at three ranks", "[verify][collective]") {
  // Two ranks are a tie by count; the rank that issues nothing more is the one that differs.
  const std::string text =
      "schedcheck: 1\nranks: 2\nforward_only: true\ncosts: {F: 1ms}\np2p: {latency: 10us, bandwidth: 1GB/s}\n"
      "schedule:\n  actions:\n    0: 0F0 0SEND_F0 BROADCAST@world BROADCAST@world\n"
      "    1: 1RECV_F0 1F0 BROADCAST@world\n";
  VerifyResult r = verify_text(text);
  CHECK(r.exit_code == 10);
  REQUIRE_FALSE(r.findings.empty());
  const Finding& hang = r.findings[0];
  INFO(hang.message);
  CHECK(hang.kind == FindingKind::kDeadlock);
  CHECK(hang.message.rfind("hang caused by rank 1: collectives diverge on communicator 'group world' at #2: rank 1 "
                           "issues nothing more (no collective left) where rank 0 issues broadcast",
                           0) == 0);
  REQUIRE_FALSE(hang.ranks.empty());
  CHECK(hang.ranks.front() == 1);
}

TEST_CASE("an all-to-all with per-rank sizes reads and prints back, and sizes that differ hang every member", "[verify][collective]") {
  // An MoE dispatch over an expert-parallel group of three: each rank's all_to_all_single
  // splits its buffer evenly, so every member must pass the same size. deepspeedai/DeepSpeed#6809:
  // one rank's capacity differed ([4,3,32] against [4,4,32]) and the all-to-all hung.
  Diagnostics d;
  auto spec = parse(three_ranks("groups:\n  ep: {ranks: [0, 1, 2], bytes: 4MiB}\n", " ALL_TO_ALL@ep", " ALL_TO_ALL@ep:3MiB",
                                " ALL_TO_ALL@ep:4MiB"),
                    d);
  REQUIRE(spec);
  CHECK(format_step(spec->actions[0].back()) == "ALL_TO_ALL@ep");
  CHECK(format_step(spec->actions[1].back()) == "ALL_TO_ALL@ep:3MiB");
  CHECK(collective_bytes(spec->actions[1].back()) == std::optional<int64_t>(3 << 20));
  CHECK_FALSE(collective_bytes(spec->actions[0].back()));
  VerifyResult r = verify(*spec, VerifyOptions{});
  CHECK(r.exit_code == 10);  // the divergence (sizes) and the hang it causes
  REQUIRE_FALSE(r.findings.empty());
  const Finding& hang = r.findings[0];
  INFO(hang.message);
  CHECK(hang.kind == FindingKind::kDeadlock);
  CHECK(hang.message.rfind("hang caused by rank 1: collectives diverge on communicator 'group ep' at #1: rank 1 issues "
                           "all-to-all 'ALL_TO_ALL@ep' (3 MiB) where ranks 0, 2 issue all-to-all 'ALL_TO_ALL@ep' (4 MiB)",
                           0) == 0);
  CHECK(hang.message.find("different kinds or sizes") != std::string::npos);

  // The same sizes hold.
  VerifyResult same = verify_text(three_ranks("groups:\n  ep: {ranks: [0, 1, 2], bytes: 4MiB}\n", " ALL_TO_ALL@ep",
                                              " ALL_TO_ALL@ep:4MiB", " ALL_TO_ALL@ep"));
  CHECK(same.exit_code == 0);
}

TEST_CASE("an expert-parallel rank with zero tokens that skips its all-to-all hangs the others and is named", "[verify][collective]") {
  // The dispatch and combine all-to-alls of one MoE layer; rank 2 received no tokens and
  // returns early, skipping both (a data-dependent branch around a collective).
  VerifyResult r = verify_text(three_ranks("groups:\n  ep: {ranks: [0, 1, 2], bytes: 4MiB}\n",
                                           " ALL_TO_ALL@ep ALL_TO_ALL@ep", " ALL_TO_ALL@ep:4MiB ALL_TO_ALL@ep", ""));
  CHECK(r.exit_code == 10);
  REQUIRE_FALSE(r.findings.empty());
  INFO(r.findings[0].message);
  CHECK(r.findings[0].message.rfind("hang caused by rank 2: collectives diverge on communicator 'group ep' at #1: rank 2 "
                                    "issues nothing more (no collective left)",
                                    0) == 0);
  CHECK(r.findings[0].ranks.front() == 2);
}

TEST_CASE("a collective's size is refused where it cannot be read", "[spec][collective]") {
  CHECK(errors_of(three_ranks("", " BARRIER@world:4MiB", "", "")).find("a barrier carries no data, so it takes no size") !=
        std::string::npos);
  CHECK(errors_of(three_ranks("", " ALL_TO_ALL@world:lots", "", ""))
            .find("the size after ':' is this rank's bytes of the collective, as in ALL_TO_ALL@ep:3MiB") != std::string::npos);
}

TEST_CASE("collectives in different orders on two groups are a cross-order finding", "[verify][collective]") {
  // Ranks 1 and 2 share groups a and b and enter them in opposite orders: NCCL can deadlock.
  VerifyResult r = verify_text(three_ranks("groups:\n  a: [1, 2]\n  b: [1, 2]\n", "", " ALL_REDUCE@a ALL_REDUCE@b",
                                           " ALL_REDUCE@b ALL_REDUCE@a"));
  CHECK(r.exit_code != 0);
  bool cross = false;
  for (const Finding& f : r.findings)
    cross = cross || f.message.find("enter communicators 'group a' and 'group b' in different orders") != std::string::npos;
  CHECK(cross);
}

TEST_CASE("a collective takes the ring time of its group on the p2p link and orders its rank's compute", "[verify][collective][timing]") {
  // 1 GB/s, 10 us latency. All-reduce over 2 ranks of 1 MB: 10 us + 2 · 1/2 · 1e6 B / 1e9 B/s = 1.01 ms
  // (ring model, Thakur et al. 2005). Rank 1 reaches it after its forward (1 ms + transfer), rank 2
  // after its own: both leave it together.
  const std::string text =
      "schedcheck: 1\nranks: 3\nforward_only: true\ncosts: {F: 1ms}\np2p: {latency: 10us, bandwidth: 1GB/s, "
      "message_bytes: 0}\ngroups:\n  pair: {ranks: [1, 2], bytes: 1MB}\nschedule:\n  actions:\n"
      "    0: 0F0 0SEND_F0\n    1: 1RECV_F0 1F0 1SEND_F0 ALL_REDUCE@pair\n    2: 2RECV_F0 2F0 ALL_REDUCE@pair\n";
  VerifyResult r = verify_text(text);
  REQUIRE(r.findings.empty());
  REQUIRE(r.timeline);
  const Program& p = r.program;
  std::vector<OpId> ar;
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id)
    if (p.ops[id].kind == OpKind::kCollective) ar.push_back(id);
  REQUIRE(ar.size() == 2);
  for (OpId id : ar) {
    CHECK(p.ops[id].collective == CollectiveKind::kAllReduce);
    CHECK(p.ops[id].bytes == 1000000);
    CHECK(p.ops[id].duration_s == Approx(1.01e-3).epsilon(1e-9));
    CHECK(p.label(id) == "ALL_REDUCE@pair");
  }
  // Both members end together, a duration after the later one (rank 2) enters.
  const OpTime& t1 = r.timeline->ops[ar[0]];
  const OpTime& t2 = r.timeline->ops[ar[1]];
  CHECK(t1.end_s == Approx(t2.end_s));
  // Rank 2's forward ends at 1 ms (rank 0's F) + 10 us (a 0-byte message) + 1 ms (rank 1's F)
  // + 10 us + 1 ms = 3.02 ms; the all-reduce ends 1.01 ms later.
  CHECK(t2.end_s == Approx(3.02e-3 + 1.01e-3).epsilon(1e-6));
  // A barrier moves no bytes: the latency alone.
  VerifyResult b = verify_text(three_ranks("", " BARRIER@world", " BARRIER@world", " BARRIER@world"));
  REQUIRE(b.findings.empty());
  for (const Op& o : b.program.ops)
    if (o.kind == OpKind::kCollective) {
      CHECK(o.collective == CollectiveKind::kBarrier);
      CHECK(o.bytes == 0);
      CHECK(o.duration_s == Approx(10e-6));
    }
}

TEST_CASE("a compute-only schedule with a collective is not lowered, with the reason", "[lower][collective]") {
  const std::string csv = test::write_temp("schedcheck-collective-lower", "c.csv", "0F0,0B0,BARRIER@world\n1F0,1B0,BARRIER@world\n");
  test::CliRun v = test::run_schedcheck("verify '" + csv + "'");
  CHECK(v.exit_code == 0);
  test::CliRun l = test::run_schedcheck("lower '" + csv + "'");
  CHECK(l.exit_code == 2);
  CHECK(l.out.find("cannot lower this schedule: holds a collective (BARRIER@world at " + csv +
                   ":1:9): write the schedule with its SEND/RECV actions") != std::string::npos);
}

}  // namespace sc
