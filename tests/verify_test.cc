// Verify end to end on the docs/facts/pipeline-schedules.md reference schedules and the docs/facts/p2p-semantics.md hang patterns.
#include <cmath>

#include "catch.h"
#include "pipeline/build_program.h"
#include "pipeline/generators.h"
#include "pipeline/lower_comms.h"
#include "check/execution.h"
#include "sim/timeline.h"
#include "check/pass_timer.h"

#include <algorithm>
#include <mutex>
#include "pipeline/verify_pipeline.h"
#include "fixtures.h"
#include "cli_util.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

namespace sc {
namespace {

using test::make_spec;
using test::step;

VerifyResult run(const PipelineSpec& s, std::optional<Semantics> sem = std::nullopt) {
  VerifyOptions o;
  o.semantics = sem;
  return verify(s, o);
}

double round4(double x) { return std::round(x * 1e4) / 1e4; }

int64_t max_of(const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

// docs/facts/pipeline-schedules.md reference values: unit costs, T_comm = 0, M_B = 2, M_W = 1, p = 4, m = 8.
TEST_CASE("reference schedules at p = 4, m = 8 give the published span, makespan, idle and peak", "[verify][facts]") {
  struct Row {
    const char* name;
    std::vector<std::vector<Step>> actions;
    double span, makespan, idle;
    int64_t peak;
  };
  std::vector<Row> rows = {
      {"gpipe", test::gpipe(4, 8), 33, 33, 9, 16},
      {"1f1b", test::one_f_one_b(4, 8), 33, 33, 9, 8},
      {"zb-h1", test::zb(4, 8, false), 27, 27, 3, 8},
      {"zb-h2", test::zb(4, 8, true), 24, 27, 0, 14},
  };
  for (auto& row : rows) {
    INFO(row.name);
    VerifyResult r = run(make_spec(row.name, 4, 8, row.actions));
    REQUIRE(r.findings.empty());
    REQUIRE(r.timeline);
    CHECK(r.timeline->span_s == Approx(row.span));
    CHECK(r.timeline->makespan_s == Approx(row.makespan));
    // docs/facts/pipeline-schedules.md lists the idle of the stage that sets the span (span - 24).
    CHECK(*std::max_element(r.timeline->idle_per_rank_s.begin(), r.timeline->idle_per_rank_s.end()) == Approx(row.idle));
    CHECK(r.timeline->peak_bytes_per_rank[0] == row.peak);
    CHECK(max_of(r.timeline->peak_bytes_per_rank) == row.peak);
    // One compute stream per rank: the worst case over all orders equals the timeline peak.
    CHECK(r.worst_case->bytes_per_rank == r.timeline->peak_bytes_per_rank);
  }
}

// ZB paper (arXiv 2401.10241) Table 5, 1.5B model, p = 8; costs from its appendix (docs/facts/pipeline-schedules.md).
TEST_CASE("ZB Table 5 bubble rates for the 1.5B model are reproduced to 4 decimals", "[verify][facts]") {
  struct Costs {
    int m;
    double f, b, w, comm;
    double one_f_one_b, h1, h2;
  };
  const Costs table[] = {
      {24, 18.522, 18.086, 9.337, 0.601, 0.2431, 0.1585, 0.1083},
      {32, 18.513, 18.086, 9.331, 0.626, 0.1985, 0.1242, 0.0837},
      {64, 18.546, 18.097, 9.321, 0.762, 0.1240, 0.0674, 0.0444},
  };
  for (const auto& c : table) {
    INFO("m = " << c.m);
    const double ms = 1e-3;
    auto bubble = [&](std::vector<std::vector<Step>> a) {
      VerifyResult r = run(make_spec("t5", 8, c.m, std::move(a), c.f * ms, c.b * ms, c.w * ms, c.comm * ms));
      REQUIRE(r.findings.empty());
      // ZB's bubble rate = (span - m (T_F + T_B + T_W)) / span; equal work per stage makes it
      // our 1 - busy / (ranks * span).
      double zb = (r.timeline->span_s - c.m * (c.f + c.b + c.w) * ms) / r.timeline->span_s;
      CHECK(round4(zb) == Approx(round4(r.timeline->bubble_rate)).margin(1e-12));
      return round4(r.timeline->bubble_rate);
    };
    CHECK(bubble(test::one_f_one_b(8, c.m)) == Approx(c.one_f_one_b).margin(1e-9));
    CHECK(bubble(test::zb(8, c.m, false)) == Approx(c.h1).margin(1e-9));
    CHECK(bubble(test::zb(8, c.m, true)) == Approx(c.h2).margin(1e-9));
  }
}

// docs/facts/p2p-semantics.md: PyTorch's _validate_schedule accepts this (it only counts actions per stage).
TEST_CASE("the schedule PyTorch's validator accepts is a deadlock with its wait-for cycle", "[verify][deadlock]") {
  PipelineSpec s = test::make_loop_spec("validator-accepts", 2, 4, 1, {});
  s.actions = {{step(ActionKind::kF, 0, 0), step(ActionKind::kB, 0, 0), step(ActionKind::kF, 2, 0), step(ActionKind::kB, 2, 0)},
               {step(ActionKind::kF, 1, 0), step(ActionKind::kF, 3, 0), step(ActionKind::kB, 3, 0), step(ActionKind::kB, 1, 0)}};
  VerifyResult r = run(s);
  REQUIRE(r.exit_code == 11);
  REQUIRE(r.findings.size() == 1);
  const Finding& f = r.findings[0];
  CHECK(f.kind == FindingKind::kDeadlock);
  // Rank 0 is stuck at 0B0 (needs 1B0, last on rank 1); rank 1 at 3F0 (needs 2F0, after 0B0).
  CHECK(f.ops == std::vector<std::string>{"0B0", "3F0"});
  CHECK(f.ranks == std::vector<int>{0, 1});
  CHECK(f.message.find("wait-for cycle 0B0@rank 0 -> 3F0@rank 1 -> 0B0@rank 0") != std::string::npos);
  CHECK(f.details[0].find("waits for 1B0 from rank 1") != std::string::npos);
  CHECK(f.details[1].find("waits for 2F0 from rank 0") != std::string::npos);
  CHECK(!r.timeline);
}

namespace {
// pytorch/pytorch#172668 (docs/facts/p2p-semantics.md): interleaved, p = 2, 4 stages (loop), m = 2; both ranks
// SEND before they RECV at the end. `parity` applies the fix: rank 0 drains its RECV first.
PipelineSpec issue_172668(bool parity) {
  PipelineSpec s = test::make_loop_spec("pytorch-172668", 2, 4, 2, {});
  using K = ActionKind;
  // Forward only part of the step matters for the hang; backward follows in reverse.
  std::vector<Step> r0 = {step(K::kF, 0, 0), step(K::kSendF, 0, 0), step(K::kF, 0, 1)};
  if (parity) {
    r0.push_back(step(K::kRecvF, 2, 0));
    r0.push_back(step(K::kSendF, 0, 1));
  } else {
    r0.push_back(step(K::kSendF, 0, 1));
    r0.push_back(step(K::kRecvF, 2, 0));
  }
  // The same exchange happens again one chunk later (2SEND_F0 against rank 1's 1SEND_F1).
  std::vector<Step> r0_tail = parity ? std::vector<Step>{step(K::kF, 2, 0), step(K::kRecvF, 2, 1), step(K::kSendF, 2, 0),
                                                         step(K::kF, 2, 1), step(K::kSendF, 2, 1)}
                                     : std::vector<Step>{step(K::kF, 2, 0), step(K::kSendF, 2, 0), step(K::kRecvF, 2, 1),
                                                         step(K::kF, 2, 1), step(K::kSendF, 2, 1)};
  r0.insert(r0.end(), r0_tail.begin(), r0_tail.end());
  std::vector<Step> r1 = {step(K::kRecvF, 1, 0), step(K::kF, 1, 0), step(K::kSendF, 1, 0), step(K::kRecvF, 1, 1),
                          step(K::kF, 1, 1), step(K::kSendF, 1, 1), step(K::kRecvF, 3, 0), step(K::kF, 3, 0),
                          step(K::kRecvF, 3, 1), step(K::kF, 3, 1)};
  // Backward: stage 3 -> 2 -> 1 -> 0 for both microbatches.
  std::vector<Step> b1 = {step(K::kB, 3, 0), step(K::kSendB, 3, 0), step(K::kB, 3, 1), step(K::kSendB, 3, 1),
                          step(K::kRecvB, 1, 0), step(K::kB, 1, 0), step(K::kSendB, 1, 0), step(K::kRecvB, 1, 1),
                          step(K::kB, 1, 1), step(K::kSendB, 1, 1)};
  std::vector<Step> b0 = {step(K::kRecvB, 2, 0), step(K::kB, 2, 0), step(K::kSendB, 2, 0), step(K::kRecvB, 2, 1),
                          step(K::kB, 2, 1), step(K::kSendB, 2, 1), step(K::kRecvB, 0, 0), step(K::kB, 0, 0),
                          step(K::kRecvB, 0, 1), step(K::kB, 0, 1)};
  if (parity)  // the backward exchanges drained the same way
    b0 = {step(K::kRecvB, 2, 0), step(K::kB, 2, 0), step(K::kRecvB, 2, 1), step(K::kSendB, 2, 0), step(K::kB, 2, 1),
          step(K::kRecvB, 0, 0), step(K::kSendB, 2, 1), step(K::kB, 0, 0), step(K::kRecvB, 0, 1), step(K::kB, 0, 1)};
  r0.insert(r0.end(), b0.begin(), b0.end());
  r1.insert(r1.end(), b1.begin(), b1.end());
  s.actions = {r0, r1};
  return s;
}
}  // namespace

TEST_CASE("the pytorch#172668 pattern deadlocks under rendezvous and passes under eager", "[verify][deadlock]") {
  PipelineSpec s = issue_172668(false);
  VerifyResult rv = run(s, Semantics{Semantics::kRendezvous, 0});
  REQUIRE(rv.exit_code == 11);
  REQUIRE(rv.findings.size() == 1);
  const Finding& f = rv.findings[0];
  CHECK(f.kind == FindingKind::kDeadlock);
  // Both ranks block in SEND; neither reaches its RECV.
  CHECK(f.ops == std::vector<std::string>{"0SEND_F1", "1SEND_F0"});
  CHECK(f.message.find("rendezvous") != std::string::npos);
  CHECK(f.details[0].find("waits for rank 1 to post 1RECV_F1") != std::string::npos);
  CHECK(f.details[1].find("waits for rank 0 to post 2RECV_F0") != std::string::npos);

  VerifyResult ev = run(s, Semantics{Semantics::kEager, 0});
  CHECK(ev.findings.empty());
  CHECK(ev.exit_code == 0);
  VerifyResult bv = run(s, Semantics{Semantics::kBuffered, 1});
  CHECK(bv.findings.empty());
}

TEST_CASE("the rank-parity fix of pytorch#172668 passes under rendezvous and eager", "[verify][deadlock]") {
  PipelineSpec s = issue_172668(true);
  for (auto sem : {Semantics{Semantics::kRendezvous, 0}, Semantics{Semantics::kEager, 0}}) {
    VerifyResult r = run(s, sem);
    INFO(format_semantics(sem));
    for (const auto& f : r.findings) {
      INFO(f.message);
      for (const auto& d : f.details) INFO(d);
      CHECK(false);
    }
    REQUIRE(r.timeline);
    CHECK(r.timeline->makespan_s > 0);
  }
}

TEST_CASE("the whole-rank blocking model delays compute behind a pending receive", "[verify][timing]") {
  using K = ActionKind;
  // Rank 0 posts 0RECV_B0 before computing 0F1. On its own comm stream the receive waits
  // while 0F1 runs; when a pending receive blocks the whole rank, 0F1 waits for it.
  PipelineSpec s = make_spec("blocking", 2, 2, {}, 1, 1, 1, 0, 1, 1);
  s.actions = {{step(K::kF, 0, 0), step(K::kSendF, 0, 0), step(K::kRecvB, 0, 0), step(K::kF, 0, 1),
                step(K::kB, 0, 0), step(K::kSendF, 0, 1), step(K::kRecvB, 0, 1), step(K::kB, 0, 1)},
               {step(K::kRecvF, 1, 0), step(K::kF, 1, 0), step(K::kB, 1, 0), step(K::kSendB, 1, 0),
                step(K::kRecvF, 1, 1), step(K::kF, 1, 1), step(K::kB, 1, 1), step(K::kSendB, 1, 1)}};
  VerifyOptions o;
  VerifyResult comm = verify(s, o);
  REQUIRE(comm.findings.empty());
  o.blocking = BlockingModel::kWholeRank;
  VerifyResult whole = verify(s, o);
  REQUIRE(whole.findings.empty());
  // Comm stream: 0F0 [0,1], 0F1 [1,2]; 1F0 [1,2], 1B0 [2,4], so 0B0 [4,6], 0F1 earlier.
  // Whole rank: 0F1 starts only after 0RECV_B0 completes at 4.
  const Program& pc = comm.program;
  const Program& pw = whole.program;
  auto start_of = [](const VerifyResult& r, const std::string& label) {
    for (OpId id = 0; id < static_cast<OpId>(r.program.ops.size()); ++id)
      if (r.program.label(id) == label) return r.timeline->ops[id].start_s;
    return -1.0;
  };
  CHECK(pc.streams.size() == 4);
  CHECK(pw.streams.size() == 2);
  CHECK(start_of(comm, "0F1") == Approx(1));
  CHECK(start_of(whole, "0F1") == Approx(4));
  CHECK(whole.timeline->makespan_s > comm.timeline->makespan_s);
}

TEST_CASE("releasing the action lists while building changes no verdict, figure or op", "[verify][memory]") {
  // keep_actions = false (what `schedcheck verify` runs) empties spec.actions once every op is
  // created; everything verify establishes must be what the kept run establishes.
  struct Case {
    const char* name;
    std::vector<std::vector<Step>> actions;
    std::optional<LowerPolicy> lower;
  };
  std::vector<Case> cases = {{"gpipe", test::gpipe(4, 8), std::nullopt},
                             {"1f1b", test::one_f_one_b(4, 8), std::nullopt},
                             {"zb-h1", test::zb(4, 8, false), std::nullopt},
                             {"1f1b lowered", test::one_f_one_b(4, 8), LowerPolicy::kPyTorch}};
  // And the deferred lowering policy.
  cases.push_back({"1f1b deferred", test::one_f_one_b(4, 8), LowerPolicy::kDeferred});
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const PipelineSpec spec = make_spec(c.name, 4, 8, c.actions);
    VerifyOptions keep, release;
    keep.lower = release.lower = c.lower;
    release.keep_actions = false;
    const VerifyResult a = verify(spec, keep), b = verify(spec, release);
    CHECK_FALSE(a.spec.actions.empty());
    CHECK(b.spec.actions.empty());
    REQUIRE(a.exit_code == b.exit_code);
    REQUIRE(a.findings.size() == b.findings.size());
    for (size_t i = 0; i < a.findings.size(); ++i) CHECK(a.findings[i].message == b.findings[i].message);
    REQUIRE(a.program.ops.size() == b.program.ops.size());
    for (OpId id = 0; id < static_cast<OpId>(a.program.ops.size()); ++id) CHECK(a.program.label(id) == b.program.label(id));
    CHECK(a.program.deps.size() == b.program.deps.size());
    CHECK(a.program.mem.size() == b.program.mem.size());
    REQUIRE(a.timeline.has_value() == b.timeline.has_value());
    if (a.timeline) {
      CHECK(a.timeline->span_s == b.timeline->span_s);
      CHECK(a.timeline->peak_bytes_per_rank == b.timeline->peak_bytes_per_rank);
    }
    REQUIRE(a.worst_case.has_value() == b.worst_case.has_value());
    if (a.worst_case) CHECK(a.worst_case->bytes_per_rank == b.worst_case->bytes_per_rank);
  }
}

}  // namespace sc

namespace sc {

TEST_CASE("the expected output of PyTorch's test_defer_recv_ops deadlocks under rendezvous and holds eager", "[verify][deadlock]") {
  // test/distributed/pipelining/test_schedule.py @ aee1d23, case simple_2_rank_2_stage_no_overlap.
  const std::string path = test::source_path("examples/deferred-receive-rendezvous-deadlock.yaml");
  test::CliRun r = test::run_schedcheck("verify '" + path + "' --format json", false);
  CHECK(r.exit_code == 11);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["kind"] == "deadlock");
  CHECK(j["findings"][0]["ops"] == nlohmann::json::array({"0SEND_F1", "1SEND_B0"}));
  test::CliRun eager = test::run_schedcheck("verify '" + path + "' --semantics eager");
  CHECK(eager.exit_code == 0);
}

}  // namespace sc

namespace sc {

// verify_program runs the timing and worst-case memory passes at once on a program of
// kConcurrentPassOps ops or more (check/verify.h): the results must be those of one after the
// other, and the run's seconds count the two once.
TEST_CASE("timing and worst-case memory give the same results run at once as one after the other", "[verify]") {
  GenOptions g;
  g.name = "1f1b";
  g.ranks = 8;
  g.microbatches = 8192;  // 2 ops (F, B) per stage and microbatch: 131,072 ops
  auto gen = generate(g);
  REQUIRE(gen);
  PipelineSpec spec = to_pipeline_spec(*gen);
  auto run = [&](bool concurrent) {
    PipelineProgram built = build_program(spec, BlockingModel::kCommStream);
    ProgramVerifyOptions o;
    o.concurrent_passes = concurrent;
    return verify_program(std::move(built.program), {}, o);
  };
  ProgramResult serial = run(false), concurrent = run(true);
  REQUIRE(serial.program.ops.size() >= kConcurrentPassOps);
  REQUIRE(serial.timeline);
  REQUIRE(concurrent.timeline);
  REQUIRE(serial.worst_case);
  REQUIRE(concurrent.worst_case);
  CHECK(concurrent.exit_code == serial.exit_code);
  CHECK(concurrent.findings.size() == serial.findings.size());
  CHECK(concurrent.timeline->span_s == serial.timeline->span_s);
  CHECK(concurrent.timeline->peak_bytes_per_rank == serial.timeline->peak_bytes_per_rank);
  bool same_times = concurrent.timeline->ops.size() == serial.timeline->ops.size();
  for (size_t i = 0; same_times && i < serial.timeline->ops.size(); ++i)
    same_times = concurrent.timeline->ops[i].start_s == serial.timeline->ops[i].start_s &&
                 concurrent.timeline->ops[i].end_s == serial.timeline->ops[i].end_s;
  CHECK(same_times);
  CHECK(concurrent.worst_case->bytes_per_rank == serial.worst_case->bytes_per_rank);
  CHECK(concurrent.worst_case->live_buffers == serial.worst_case->live_buffers);

  // The pass list: worst-case memory marked as run beside the deadlock and timing walk (its two
  // passes) only when it was.
  auto memory_pass = [](const ProgramResult& r) {
    for (const PassTime& t : r.pass_times)
      if (t.pass == "worst-case memory") return t;
    FAIL("no worst-case memory pass");
    return PassTime{};
  };
  CHECK(memory_pass(serial).beside == 0);
  CHECK(memory_pass(concurrent).beside == 2);
}

TEST_CASE("the deadlock walk's timing equals simulate() on its completion order", "[verify]") {
  // execute() visits each op of its order as it completes (TimingWalk); simulate() reads the
  // order afterwards. Rendezvous pairs and buffered slots are where the two could part.
  for (const char* name : {"1f1b", "interleaved-1f1b", "zb-h1"}) {
    GenOptions g;
    g.name = name;
    g.ranks = 4;
    g.microbatches = 8;
    auto gen = generate(g);
    REQUIRE(gen);
    PipelineSpec spec = to_pipeline_spec(*gen);
    std::string why;
    auto lowered = lower_comms(spec.actions, spec.stage_to_rank, LowerPolicy::kDeferred, &why);  // deadlock-free
    REQUIRE(lowered);
    spec.actions = std::move(*lowered);
    for (Semantics sem : {Semantics{Semantics::kEager, 0}, Semantics{Semantics::kBuffered, 1}, Semantics{Semantics::kRendezvous, 0}}) {
      spec.p2p.semantics = sem;
      Program p = build_program(spec, BlockingModel::kCommStream).program;
      TimingWalk walk(p);
      ExecutionResult e = execute(p, &walk);
      INFO(name << " " << format_semantics(sem));
      REQUIRE(e.completed);
      Timeline fused = walk.finish(), separate = simulate(p, e.order);
      REQUIRE(fused.ops.size() == separate.ops.size());
      bool same = true;
      for (size_t i = 0; i < fused.ops.size(); ++i)
        same = same && fused.ops[i].start_s == separate.ops[i].start_s && fused.ops[i].end_s == separate.ops[i].end_s;
      CHECK(same);
      CHECK(fused.span_s == separate.span_s);
      CHECK(fused.span_s > 0);
      CHECK(fused.bubble_rate == separate.bubble_rate);
      CHECK(fused.peak_bytes_per_rank == separate.peak_bytes_per_rank);
      CHECK(fused.memory_curve == separate.memory_curve);
    }
  }
}

TEST_CASE("a run's seconds count passes that ran at once as the longest of them", "[verify]") {
  CHECK(total_seconds({}) == 0);
  CHECK(total_seconds({{"a", 1.0}, {"b", 2.0}}) == 3.0);
  // The worst case beside the deadlock walk's two passes: the first thread is the longer.
  CHECK(total_seconds({{"deadlock", 0.5}, {"timing", 0.25}, {"worst-case memory", 0.5, 2}, {"memory", 0.125}}) ==
        0.5 + 0.25 + 0.125);
  // The second thread (worst case, then channel) is the longer.
  CHECK(total_seconds({{"collectives", 1.0}, {"deadlock", 0.5}, {"timing", 0.25}, {"worst-case memory", 0.5, 2},
                       {"channel", 0.5, PassTime::kContinuesThread}, {"memory", 0.125}}) == 1.0 + 1.0 + 0.125);
  CHECK(total_seconds({{"timing", 0.75}, {"worst-case memory", 0.25, 1}}) == 0.75);
}

}  // namespace sc

namespace sc {
namespace {
std::mutex g_seen_mu;
std::vector<std::string> g_seen_passes;
void note_pass(const char* pass) {
  std::lock_guard<std::mutex> lock(g_seen_mu);
  g_seen_passes.emplace_back(pass);
}
}  // namespace

// The command line shows the pass running now on its progress line (cli.cc sets the observer).
TEST_CASE("the pass observer hears each pass as it starts", "[verify]") {
  GenOptions g;
  g.name = "1f1b";
  g.ranks = 4;
  g.microbatches = 8;
  auto gen = generate(g);
  REQUIRE(gen);
  PipelineSpec spec = to_pipeline_spec(*gen);
  g_seen_passes.clear();
  set_pass_observer(note_pass);
  VerifyResult r = verify(spec, {});
  set_pass_observer(nullptr);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> timed;
  for (const PassTime& t : r.pass_times) timed.push_back(t.pass);
  CHECK(g_seen_passes == timed);  // one call per timed pass, in the same order (small: no second thread)
  CHECK(std::find(g_seen_passes.begin(), g_seen_passes.end(), "deadlock") != g_seen_passes.end());
  const size_t before = g_seen_passes.size();
  verify(spec, {});  // unset: nobody hears
  CHECK(g_seen_passes.size() == before);
}

}  // namespace sc
