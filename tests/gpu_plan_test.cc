// verify_gpu planning on the CPU: streams, events, transfers, buffer plan, replay against the
// prediction, comparison, order agreement, correctness check, reports and the `run` command.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "pipeline/verify_pipeline.h"
#include "cli_util.h"
#include "fixtures.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"
#include "pipeline/named_schedule.h"
#include "spec/yaml_spec.h"
#include "test_util.h"
#include "verify_gpu/compare.h"
#include "verify_gpu/plan.h"

namespace sc::gpu {
namespace {

PipelineSpec load(const std::string& rel) {
  Diagnostics diags;
  auto spec = load_yaml_spec(test::source_path(rel), diags);
  REQUIRE(spec);
  if (spec->named) REQUIRE(resolve_named_schedule(*spec, diags));
  REQUIRE(!diags.has_errors());
  return *spec;
}

std::vector<ItemTime> predicted_times(const GpuPlan& plan) {
  std::vector<ItemTime> t;
  for (const Item& it : plan.items) t.push_back({it.predicted_start_s, it.predicted_end_s});
  return t;
}

// Replays the plan on the ideal GPU and checks it reproduces the prediction exactly: every op's
// start and end, and every rank's pool high-water mark.
void require_replay_matches(const VerifyResult& r, const GpuPlan& plan) {
  ReplayResult rep = replay(plan);
  REQUIRE(rep.items.size() == plan.items.size());
  for (size_t i = 0; i < plan.num_ops; ++i) {
    INFO("op " << plan.items[i].label);
    CHECK(rep.items[i].start_s == Approx(r.timeline->ops[i].start_s).margin(1e-12));
    CHECK(rep.items[i].end_s == Approx(r.timeline->ops[i].end_s).margin(1e-12));
  }
  for (size_t i = plan.num_ops; i < plan.items.size(); ++i) {
    INFO("transfer " << plan.items[i].label);
    CHECK(rep.items[i].start_s == Approx(plan.items[i].predicted_start_s).margin(1e-12));
    CHECK(rep.items[i].end_s == Approx(plan.items[i].predicted_end_s).margin(1e-12));
  }
  CHECK(rep.peak_bytes_per_rank == r.timeline->peak_bytes_per_rank);
  CHECK(plan.expected_peak_bytes_per_rank == r.timeline->peak_bytes_per_rank);
  for (int64_t leaked : rep.leaked_bytes_per_rank) CHECK(leaked == 0);
}

int32_t item_of(const GpuPlan& plan, const std::string& label) {
  for (size_t i = 0; i < plan.items.size(); ++i)
    if (plan.items[i].label == label) return static_cast<int32_t>(i);
  FAIL("no item " << label);
  return -1;
}

TEST_CASE("ranks are spread over fewer GPUs in blocks or round robin", "[gpu-plan]") {
  CHECK(assign_devices(4, 1, DevicePolicy::kBlocked) == std::vector<int32_t>{0, 0, 0, 0});
  CHECK(assign_devices(5, 2, DevicePolicy::kBlocked) == std::vector<int32_t>{0, 0, 0, 1, 1});
  CHECK(assign_devices(5, 2, DevicePolicy::kRoundRobin) == std::vector<int32_t>{0, 1, 0, 1, 0});
  CHECK(assign_devices(2, 4, DevicePolicy::kBlocked) == std::vector<int32_t>{0, 1});
  CHECK(assign_devices(3, 0, DevicePolicy::kBlocked) == std::vector<int32_t>{0, 0, 0});
}

TEST_CASE("the 1F1B GPU example's plan replays to the predicted timeline and memory peak", "[gpu-plan]") {
  VerifyResult r = verify(load("examples/gpu-1f1b-p4-m8.yaml"), {});
  REQUIRE(r.findings.empty());
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  // One stream per IR stream (compute-only: one per rank), then transfer lanes.
  CHECK(plan->num_ops == r.program.ops.size());
  for (size_t s = 0; s < r.program.streams.size(); ++s) CHECK(plan->streams[s].ir_stream == static_cast<int32_t>(s));
  // Every cross-rank edge of a compute-only schedule is an implicit transfer: 2 (p - 1) m = 48.
  size_t transfers = plan->items.size() - plan->num_ops;
  CHECK(transfers == 48);
  // Transfers of one (src, dst) pair never overlap in the prediction: one lane each.
  CHECK(plan->streams.size() == r.program.streams.size() + 6);
  // Each item has a timing start and end event; buffers: one per activation and weight grad
  // (1F1B's B allocates none) plus the static parameters of each rank.
  CHECK(plan->events.size() == 2 * plan->items.size());
  CHECK(plan->buffers.size() == 4 * 8 + 4);
  CHECK(plan->send_staging_bytes[0] == 16 * 1024 * 1024);
  CHECK(plan->recv_staging_bytes[0] == 16 * 1024 * 1024);
  CHECK(plan->recv_staging_bytes[3] == 16 * 1024 * 1024);
  require_replay_matches(r, *plan);
  // Rank 0 holds 4 activations at its peak (1F1B: p - r in flight) plus its parameters.
  int64_t act = static_cast<int64_t>(std::llround(1.6 * (1 << 30)));
  CHECK(plan->expected_peak_bytes_per_rank[0] == 5'200'000'000 + 4 * act);
  CHECK(plan->max_live_buffers_per_rank[0] == 5);
  CHECK(plan->max_live_buffers_per_rank[3] == 2);
}

TEST_CASE("the ZB-H1 GPU example's plan replays to the predicted timeline and memory peak", "[gpu-plan]") {
  VerifyResult r = verify(load("examples/gpu-zbh1-p4-m8.yaml"), {});
  REQUIRE(r.findings.empty());
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  require_replay_matches(r, *plan);
  // ZB-H1 keeps weight-gradient inputs between I and W: one more buffer per (stage, mb).
  CHECK(plan->buffers.size() == 2 * 4 * 8 + 4);
  CHECK(std::count_if(plan->commands.begin(), plan->commands.end(),
                      [](const Command& c) { return c.kind == CmdKind::kSpin; }) == 3 * 4 * 8);
}

TEST_CASE("explicit sends and receives become copies held to the link time under rendezvous and eager", "[gpu-plan]") {
  for (const char* sem : {"rendezvous", "eager", "buffered:1"}) {
    INFO(sem);
    VerifyOptions opt;
    opt.semantics = parse_semantics(sem);
    opt.lower = LowerPolicy::kPyTorch;
    VerifyResult r = verify(load("examples/gpu-1f1b-p4-m8.yaml"), opt);
    REQUIRE(r.findings.empty());
    REQUIRE(r.program.explicit_comms);
    auto plan = make_plan(r.program, *r.timeline);
    REQUIRE(plan);
    // No implicit transfers: every item is an op; one stream per IR stream (compute + comm).
    CHECK(plan->items.size() == plan->num_ops);
    CHECK(plan->streams.size() == r.program.streams.size());
    size_t copies = 0;
    for (const Command& c : plan->commands)
      if (c.kind == CmdKind::kCopy) {
        ++copies;
        CHECK(c.bytes == 16 * 1024 * 1024);
        CHECK(c.duration_s == Approx(10e-6 + 16.0 * 1024 * 1024 / 450e9));
        CHECK(c.src_rank == r.program.ops[c.item].rank);
        CHECK(c.dst_rank == r.program.ops[c.item].peer());
      }
    CHECK(copies == 48);
    // A rendezvous send waits for its receive's ready point: one extra (untimed) event per P2P op.
    size_t untimed = std::count_if(plan->events.begin(), plan->events.end(), [](const PlanEvent& e) { return !e.timing; });
    CHECK(untimed == (std::string(sem) == "rendezvous" ? 96u : 0u));
    require_replay_matches(r, *plan);
  }
}

TEST_CASE("every wait in the command list follows a record of its event", "[gpu-plan]") {
  VerifyOptions opt;
  opt.lower = LowerPolicy::kDeferred;
  VerifyResult r = verify(load("examples/gpu-zbh1-p4-m8.yaml"), opt);
  REQUIRE(r.findings.empty());
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  std::set<int32_t> recorded;
  size_t waits = 0;
  for (const Command& c : plan->commands) {
    if (c.kind == CmdKind::kRecord) recorded.insert(c.event);
    if (c.kind == CmdKind::kWait) {
      ++waits;
      CHECK(recorded.count(c.event) == 1);
    }
  }
  CHECK(waits > 0);
  // Per stream, items start in their predicted order.
  std::vector<double> last(plan->streams.size(), -1);
  for (const Command& c : plan->commands)
    if (c.kind == CmdKind::kRecord && plan->events[c.event].timing && plan->events[c.event].is_start) {
      double t = plan->items[plan->events[c.event].item].predicted_start_s;
      CHECK(t >= last[c.stream]);
      last[c.stream] = t;
    }
  require_replay_matches(r, *plan);
}

TEST_CASE("overlapping implicit transfers of one rank pair get separate lanes", "[gpu-plan]") {
  using K = ActionKind;
  using test::step;
  // Rank 0 finishes F0 and F1 back to back (1 s each); each transfer takes 3 s, so they overlap.
  PipelineSpec s = test::make_loop_spec("lanes", 2, 2, 2, {});
  s.p2p.latency_s = 3;
  s.actions = {{step(K::kF, 0, 0), step(K::kF, 0, 1), step(K::kB, 0, 0), step(K::kB, 0, 1)},
               {step(K::kF, 1, 0), step(K::kF, 1, 1), step(K::kB, 1, 0), step(K::kB, 1, 1)}};
  VerifyResult r = verify(s, {});
  REQUIRE(r.findings.empty());
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  int32_t x0 = item_of(*plan, "xfer 0F0 -> 1F0");
  int32_t x1 = item_of(*plan, "xfer 0F1 -> 1F1");
  CHECK(plan->items[x0].predicted_start_s == 1);
  CHECK(plan->items[x0].predicted_end_s == 4);
  CHECK(plan->items[x1].predicted_start_s == 2);
  CHECK(plan->items[x0].stream != plan->items[x1].stream);
  CHECK(plan->streams[plan->items[x1].stream].name == "rank 0 -> 1 transfer #1");
  require_replay_matches(r, *plan);
}

TEST_CASE("a collective's members each wait for every member's ready point", "[gpu-plan]") {
  // Two ranks: compute (1 s on rank 0, 2 s on rank 1), then an all-reduce of 1 MiB that lasts
  // 0.5 s once both have arrived, then 1 s of compute; rank 1 also frees a buffer at the end.
  Program p;
  p.num_ranks = 2;
  p.rank_streams.resize(2);
  for (int32_t r = 0; r < 2; ++r) p.rank_streams[r].push_back(p.add_stream(r, "compute"));
  int32_t comm = p.add_communicator("replicate", {0, 1});
  p.buffers.push_back(Buffer{1, -1, -1, "grad", 4096, -1});
  p.static_bytes_per_rank = {0, 0};
  std::vector<OpId> ar(2);
  for (int32_t r = 0; r < 2; ++r) {
    Op c;
    c.rank = r;
    c.stream = p.rank_streams[r][0];
    c.duration_s = 1.0 + r;
    OpId c0 = p.add_op(c);
    if (r == 1) p.add_mem(c0, MemEffect{0, 4096, false});
    Op a;
    a.kind = OpKind::kCollective;
    a.collective = CollectiveKind::kAllReduce;
    a.rank = r;
    a.stream = c.stream;
    a.set_comm(comm);
    a.bytes = 1 << 20;
    a.duration_s = 0.5;
    ar[r] = p.add_op(a);
    Op d = c;
    d.duration_s = 1.0;
    OpId d0 = p.add_op(d);
    if (r == 1) p.add_mem(d0, MemEffect{0, -4096, true});
  }
  REQUIRE(p.instance(ar[0]) == std::vector<OpId>{ar[0], ar[1]});
  // The prediction: both members run [2, 2.5] (rank 0 waits for rank 1 to arrive).
  Timeline t;
  t.ops = {{0, 1}, {2, 2.5}, {2.5, 3.5}, {0, 2}, {2, 2.5}, {2.5, 3.5}};
  t.peak_bytes_per_rank = {0, 4096};
  auto plan = make_plan(p, t);
  REQUIRE(plan);
  size_t ready = std::count_if(plan->events.begin(), plan->events.end(), [](const PlanEvent& e) { return !e.timing; });
  CHECK(ready == 2);
  // Each member's traffic: (n - 1) / n of its bytes from the other member, held to 0.5 s.
  for (OpId id : ar) {
    auto copy = std::find_if(plan->commands.begin(), plan->commands.end(),
                             [&](const Command& c) { return c.kind == CmdKind::kCopy && c.item == id; });
    REQUIRE(copy != plan->commands.end());
    CHECK(copy->bytes == (1 << 19));
    CHECK(copy->duration_s == 0.5);
    CHECK(copy->src_rank == 1 - p.ops[id].rank);
    CHECK(copy->dst_rank == p.ops[id].rank);
  }
  ReplayResult rep = replay(*plan);
  for (size_t i = 0; i < 6; ++i) {
    CHECK(rep.items[i].start_s == t.ops[i].start_s);
    CHECK(rep.items[i].end_s == t.ops[i].end_s);
  }
  CHECK(rep.peak_bytes_per_rank == std::vector<int64_t>{0, 4096});
  CHECK(check_execution(*plan, rep.tickets, rep.leaked_bytes_per_rank).empty());
  // Rank 0's all-reduce must not begin before rank 1's first compute op ended.
  Tickets early = rep.tickets;
  early.begin_ticket[ar[0]] = early.end_ticket[3] - 1;
  auto problems = check_execution(*plan, early, rep.leaked_bytes_per_rank);
  CHECK(std::find(problems.begin(), problems.end(), p.label(ar[0]) + " began before " + p.label(3) + " ended") !=
        problems.end());
}

TEST_CASE("the FSDP GPU example's plan replays to the predicted timeline, collectives in communicator order", "[gpu-plan]") {
  Diagnostics diags;
  auto spec = load_fsdp_spec(test::source_path("examples/gpu-fsdp2-8layers.yaml"), diags);
  REQUIRE(spec);
  VerifyResult fr = verify_fsdp(*spec, false, /*use_symmetry=*/false);  // every rank, as `run` builds them
  REQUIRE(fr.findings.empty());
  REQUIRE(fr.program.num_ranks == 8);
  auto plan = make_plan(fr.program, *fr.timeline);
  REQUIRE(plan);
  const Program& p = fr.program;
  size_t collectives = std::count_if(p.ops.begin(), p.ops.end(),
                                     [](const Op& o) { return o.kind == OpKind::kCollective && o.comm() >= 0; });
  REQUIRE(collectives > 0);
  size_t ready = std::count_if(plan->events.begin(), plan->events.end(), [](const PlanEvent& e) { return !e.timing; });
  CHECK(ready == collectives);
  require_replay_matches(fr, *plan);
  ReplayResult rep = replay(*plan);
  CHECK(check_execution(*plan, rep.tickets, rep.leaked_bytes_per_rank).empty());
  // The 8 ranks' pools at their peaks fit one 141 GB GPU together.
  int64_t total = 0;
  for (int64_t b : plan->expected_peak_bytes_per_rank) total += b;
  CHECK(total < int64_t{120} << 30);
}

TEST_CASE("the pool's rounding raises the expected peak by at most one unit per live buffer", "[gpu-plan]") {
  VerifyResult r = verify(load("examples/gpu-1f1b-p4-m8.yaml"), {});
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  const int64_t unit = 2 * 1024 * 1024;
  for (int32_t rank = 0; rank < 4; ++rank) {
    int64_t exact = expected_peak_rounded(*plan, rank, 1);
    int64_t rounded = expected_peak_rounded(*plan, rank, unit);
    CHECK(exact == plan->expected_peak_bytes_per_rank[rank]);
    CHECK(rounded >= exact);
    CHECK(rounded - exact <= unit * plan->max_live_buffers_per_rank[rank]);
    CHECK(rounded % unit == 0);
  }
}

TEST_CASE("figures of the predicted items equal the timeline's makespan, span and idle", "[gpu-plan]") {
  VerifyResult r = verify(load("examples/gpu-zbh1-p4-m8.yaml"), {});
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  Figures f = figures_of(*plan, predicted_times(*plan), r.timeline->peak_bytes_per_rank);
  CHECK(f.makespan_s == Approx(r.timeline->makespan_s));
  CHECK(f.span_s == Approx(r.timeline->span_s));
  for (int32_t rank = 0; rank < 4; ++rank) {
    CHECK(f.idle_per_rank_s[rank] == Approx(r.timeline->idle_per_rank_s[rank]).margin(1e-12));
    CHECK(f.busy_per_rank_s[rank] == Approx(r.timeline->busy_per_rank_s[rank]));
    // Implicit transfers a rank sends run beside its next compute op: all of them overlap.
    CHECK(f.comm_per_rank_s[rank] > 0);
    CHECK(f.overlap_per_rank_s[rank] <= f.comm_per_rank_s[rank] + 1e-12);
  }
  // Rank 3 (last stage) sends every I backwards; its transfers lie under its following ops
  // except after the last one.
  CHECK(f.overlap_per_rank_s[3] > 0);
}

TEST_CASE("a replay with launch latency differs beyond a tight tolerance and agrees under a loose one", "[gpu-plan]") {
  VerifyResult r = verify(load("examples/gpu-1f1b-p4-m8.yaml"), {});
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  ReplayCosts costs;
  costs.launch_s = 50e-6;
  ReplayResult rep = replay(*plan, costs);
  auto pt = predicted_times(*plan);
  Figures pf = figures_of(*plan, pt, r.timeline->peak_bytes_per_rank);
  Figures mf = figures_of(*plan, rep.items, rep.peak_bytes_per_rank);
  CHECK(mf.makespan_s > pf.makespan_s);
  Tolerance tight;
  tight.time_rel = 0.001;
  Comparison c = compare(*plan, pf, mf, pt, rep.items, tight);
  CHECK_FALSE(c.within);
  CHECK(c.exit_code == kExitMeasurementDisagrees);
  auto mk = std::find_if(c.checks.begin(), c.checks.end(), [](const FigureCheck& f) { return f.name == "makespan"; });
  REQUIRE(mk != c.checks.end());
  CHECK_FALSE(mk->within);
  CHECK(mk->rel_error == Approx((mf.makespan_s - pf.makespan_s) / pf.makespan_s));
  CHECK(c.order_agreement == 1.0);
  Tolerance loose;
  Comparison ok = compare(*plan, pf, mf, pt, rep.items, loose);
  CHECK(ok.within);
  CHECK(ok.exit_code == 0);
}

TEST_CASE("peak memory may exceed the prediction by 1 percent plus one rounding unit per live buffer", "[gpu-plan]") {
  VerifyResult r = verify(load("examples/gpu-1f1b-p4-m8.yaml"), {});
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  auto pt = predicted_times(*plan);
  Figures pf = figures_of(*plan, pt, r.timeline->peak_bytes_per_rank);
  Tolerance tol;
  tol.rounding_bytes = 2 * 1024 * 1024;
  Figures mf = pf;
  mf.peak_bytes_per_rank[0] = pf.peak_bytes_per_rank[0] + tol.rounding_bytes * plan->max_live_buffers_per_rank[0];
  CHECK(compare(*plan, pf, mf, pt, pt, tol).within);
  mf.peak_bytes_per_rank[0] = static_cast<int64_t>(pf.peak_bytes_per_rank[0] * 1.02);
  Comparison c = compare(*plan, pf, mf, pt, pt, tol);
  CHECK_FALSE(c.within);
  auto bad = std::find_if(c.checks.begin(), c.checks.end(), [](const FigureCheck& f) { return !f.within; });
  REQUIRE(bad != c.checks.end());
  CHECK(bad->name == "peak_bytes");
  CHECK(bad->rank == 0);
}

TEST_CASE("op order agreement counts same-rank pairs whose measured order flips", "[gpu-plan]") {
  VerifyResult r = verify(load("examples/gpu-1f1b-p4-m8.yaml"), {});
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  auto pt = predicted_times(*plan);
  CHECK(order_agreement(*plan, pt, pt) == 1.0);
  // Swap the measured starts of rank 0's first two ops: one pair flips.
  auto mt = pt;
  const auto& s0 = r.program.streams[r.program.rank_streams[0].front()].ops;
  std::swap(mt[s0[0]].start_s, mt[s0[1]].start_s);
  std::vector<std::string> why;
  // 4 ranks x 16 ops: 4 x 120 pairs.
  CHECK(order_agreement(*plan, pt, mt, &why) == Approx(1.0 - 1.0 / 480));
  REQUIRE(why.size() == 1);
  CHECK(why[0] == r.program.label(s0[1]) + " before " + r.program.label(s0[0]));
  // Reversing a rank flips all of its pairs.
  auto rev = pt;
  for (OpId id : s0) rev[id].start_s = -pt[id].start_s;
  CHECK(order_agreement(*plan, pt, rev) == Approx(1.0 - 120.0 / 480));
}

TEST_CASE("the correctness check finds ops run twice, out of order, and leaked buffers", "[gpu-plan]") {
  VerifyOptions opt;
  opt.lower = LowerPolicy::kPyTorch;
  VerifyResult r = verify(load("examples/gpu-1f1b-p4-m8.yaml"), opt);
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  ReplayResult rep = replay(*plan);
  const Tickets& tk = rep.tickets;
  CHECK(check_execution(*plan, tk, rep.leaked_bytes_per_rank).empty());

  Tickets twice = tk;
  twice.runs[0] = 2;
  auto p1 = check_execution(*plan, twice, rep.leaked_bytes_per_rank);
  REQUIRE(p1.size() == 1);
  CHECK(p1[0] == "item " + plan->items[0].label + " ran 2 times");

  // Rank 1's first forward begins before the message carrying its input ended.
  int32_t f = item_of(*plan, "1F0");
  int32_t recv = item_of(*plan, "1RECV_F0");
  Tickets early = tk;
  early.begin_ticket[f] = early.end_ticket[recv] - 1;
  auto p2 = check_execution(*plan, early, rep.leaked_bytes_per_rank);
  CHECK(std::find(p2.begin(), p2.end(), "1F0 began before 1RECV_F0 ended") != p2.end());

  auto p3 = check_execution(*plan, tk, {0, 4096, 0, 0});
  REQUIRE(p3.size() == 1);
  CHECK(p3[0] == "rank 1: 4096 bytes still allocated from its pool after the run");
}

TEST_CASE("the measured JSON and the side-by-side trace carry both timelines", "[gpu-plan]") {
  VerifyResult r = verify(load("examples/gpu-1f1b-p4-m8.yaml"), {});
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  ReplayResult rep = replay(*plan);
  auto pt = predicted_times(*plan);
  Figures pf = figures_of(*plan, pt, r.timeline->peak_bytes_per_rank);
  Figures mf = figures_of(*plan, rep.items, rep.peak_bytes_per_rank);
  Tolerance tol;
  Comparison c = compare(*plan, pf, mf, pt, rep.items, tol);
  Measurement m;
  m.items = rep.items;
  m.makespan_per_repeat_s = {0.3, 0.1, 0.2};
  m.peak_bytes_per_rank = rep.peak_bytes_per_rank;
  m.calibration.pool_rounding_bytes = 512;
  auto j = nlohmann::json::parse(run_json_report(r, *plan, c, m, tol, 0));
  CHECK(j["verdict"] == "holds");
  REQUIRE(j.contains("timing"));
  REQUIRE(j.contains("memory"));
  const auto& mj = j["measured"];
  CHECK(mj["verdict"] == "agrees");
  CHECK(mj["makespan_median"] == 0.2);
  CHECK(mj["op_order_agreement"] == 1.0);
  CHECK(mj["calibration"]["pool_rounding_bytes"] == 512);
  CHECK(mj["correctness"]["ok"] == true);
  // makespan, span, idle x4, overlap x4, peak x4, op order.
  CHECK(mj["checks"].size() == 15);
  CHECK(mj["checks"][0]["figure"] == "makespan");
  CHECK(mj["checks"][0]["rel_error"] == 0.0);

  auto t = nlohmann::json::parse(side_by_side_trace(r, *plan, rep.items));
  size_t predicted = 0, measured = 0;
  bool named = false;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X") (e["pid"].get<int>() >= 100000 ? measured : predicted)++;
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "rank 2 measured") {
      named = true;
      CHECK(e["pid"] == 100002);
    }
    if (e["ph"] == "M" && e["name"] == "process_sort_index")
      CHECK(e["args"]["sort_index"] == (e["pid"].get<int>() >= 100000 ? 2 * (e["pid"].get<int>() - 100000) + 1 : 2 * e["pid"].get<int>()));
  }
  CHECK(named);
  CHECK(predicted == plan->num_ops);
  CHECK(measured == plan->items.size());
}

TEST_CASE("a batched P2P group's members run together on lanes and the stream moves on when all have ended", "[gpu-plan]") {
  // 1F1B on two ranks with the steady-state exchange batched on both sides (PyTorch's fix in
  // pytorch PR #126419): unbatched it deadlocks, so the plan must post both members together.
  const std::string text =
      "schedcheck: 1\nranks: 2\nmicrobatches: 2\ncosts: {F: 1ms, B: 2ms}\n"
      "p2p: {message_bytes: 1MiB, bandwidth: 1GB/s, latency: 10us, semantics: rendezvous}\n"
      "schedule:\n  actions:\n"
      "    0: \"0F0 0SEND_F0 0F1 (0SEND_F1;0RECV_B0)BATCH 0B0 0RECV_B1 0B1\"\n"
      "    1: \"1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH 1F1 1B1 1SEND_B1\"\n";
  Diagnostics d;
  auto spec = load_yaml_spec(test::write_temp("schedcheck-gpu-plan-test", "batched.yaml", text), d);
  REQUIRE(spec);
  REQUIRE_FALSE(d.has_errors());
  VerifyResult r = verify(*spec, {});
  REQUIRE(r.findings.empty());
  REQUIRE(r.program.groups.size() == 2);
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  // One lane per group's second member: 0RECV_B0 and 1RECV_F1 run beside their sends.
  CHECK(plan->streams.size() == r.program.streams.size() + 2);
  const int32_t send = item_of(*plan, "0SEND_F1"), recv = item_of(*plan, "0RECV_B0");
  CHECK(plan->items[send].stream == r.program.ops[send].stream);
  CHECK(plan->items[recv].stream >= static_cast<int32_t>(r.program.streams.size()));
  CHECK(plan->streams[plan->items[recv].stream].name.find("batch lane 1") != std::string::npos);
  // Both members start together, as predicted; the replay reproduces every op's times.
  CHECK(plan->items[send].predicted_start_s == plan->items[recv].predicted_start_s);
  require_replay_matches(r, *plan);
  ReplayResult rep = replay(*plan);
  CHECK(check_execution(*plan, rep.tickets, rep.leaked_bytes_per_rank).empty());
  // The op after a group begins only once every member has ended.
  const int32_t b0 = item_of(*plan, "0B0");
  CHECK(rep.items[b0].start_s >= rep.items[recv].end_s);
  CHECK(rep.items[b0].start_s >= rep.items[send].end_s);

  auto run = test::run_schedcheck("run " + test::write_temp("schedcheck-gpu-plan-test", "batched-run.yaml", text) +
                                  " --dry-run");
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("measurement agrees with the prediction") != std::string::npos);
  CHECK(run.out.find("every op ran once") != std::string::npos);
}

TEST_CASE("the batched shape-exchange example's plan replays every op to its predicted times", "[gpu-plan]") {
  // Groups of 2 to 4 members whose partners stand in other groups: a member is ready for its
  // partner only at its group's launch, once every member's deps are done (1RECV_F1 waits, with
  // its group, for 1F0 before 0SEND_F1 may start).
  VerifyResult r = verify(load("examples/megatron-pp2-shape-exchange-parity.yaml"), {});
  REQUIRE(r.findings.empty());
  REQUIRE(r.program.groups.size() == 18);
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  std::set<int32_t> recorded;
  for (const Command& c : plan->commands) {
    if (c.kind == CmdKind::kRecord) recorded.insert(c.event);
    if (c.kind == CmdKind::kWait) CHECK(recorded.count(c.event) == 1);
  }
  require_replay_matches(r, *plan);
  ReplayResult rep = replay(*plan);
  CHECK(check_execution(*plan, rep.tickets, rep.leaked_bytes_per_rank).empty());
  const int32_t send = item_of(*plan, "0SEND_F1"), f0 = item_of(*plan, "1F0");
  CHECK(rep.items[send].start_s >= rep.items[f0].end_s);
  CHECK(rep.items[send].start_s == Approx(r.timeline->ops[send].start_s).margin(1e-12));
}

TEST_CASE("in the batched examples no consumer of a group member starts before its group ends", "[gpu-plan]") {
  // NCCL completes a group call as a unit: an op on another stream that consumes one member
  // waits for every member. The prediction and the plan let it wait for its member only; in the
  // batched examples the two agree (verify_gpu/README.md, "Batched groups: the plan and NCCL").
  std::string eager = test::read_file(test::source_path("examples/batched-lazy-group-init-deadlock.yaml"));
  const auto at = eager.rfind("comm_init: lazy");
  REQUIRE(at != std::string::npos);
  eager.replace(at, 15, "comm_init: eager");
  const std::string eager_path = test::write_temp("schedcheck-gpu-plan-test", "batched-eager-consumers.yaml", eager);
  for (auto [path, consumers] : {std::pair{test::source_path("examples/megatron-pp2-shape-exchange-parity.yaml"), 22},
                                 std::pair{eager_path, 4}}) {
    INFO(path);
    Diagnostics d;
    auto spec = load_yaml_spec(path, d);
    REQUIRE(spec);
    VerifyResult r = verify(*spec, {});
    REQUIRE(r.findings.empty());
    const Program& p = r.program;
    int seen = 0;
    for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id)
      for (const Dep* dep = p.deps_begin(id); dep != p.deps_end(id); ++dep) {
        const int32_t g = p.ops[dep->src].group();
        if (g < 0 || p.ops[id].group() == g) continue;
        ++seen;
        double group_end = 0;
        for (OpId m : p.groups[g]) group_end = std::max(group_end, r.timeline->ops[m].end_s);
        INFO(p.label(id) << " consumes " << p.label(dep->src));
        CHECK(r.timeline->ops[id].start_s >= group_end);
      }
    CHECK(seen == consumers);
  }
}

TEST_CASE("schedcheck run --dry-run plans and replays a schedule without a GPU", "[gpu-plan][cli]") {
  auto run = test::run_schedcheck("run examples/gpu-zbh1-p4-m8.yaml --dry-run");
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("measurement agrees with the prediction") != std::string::npos);
  CHECK(run.out.find("op order agreement: 1.0000") != std::string::npos);
  CHECK(run.out.find("every op ran once") != std::string::npos);
  auto fsdp = test::run_schedcheck("run examples/gpu-fsdp2-8layers.yaml --dry-run");
  CHECK(fsdp.exit_code == 0);
  CHECK(fsdp.out.find("measurement agrees with the prediction") != std::string::npos);
  auto js = test::run_schedcheck("run examples/gpu-1f1b-p4-m8.yaml --dry-run --format json --lower pytorch", false);
  CHECK(js.exit_code == 0);
  auto j = nlohmann::json::parse(js.out);
  CHECK(j["measured"]["verdict"] == "agrees");
  CHECK(j["semantics"]["explicit_comms"] == true);
}

// What `schedcheck run PATH --dry-run --format json` gave: its exit code and, when run accepted
// the spec (planned and replayed it: the JSON has a `measured` object), the predicted and the
// replayed makespan in seconds and the correctness pass's problems.
struct DryRun {
  int exit_code = -1;
  bool replayed = false;
  double predicted_s = -1, replayed_s = -2;
  std::vector<std::string> problems;
};

DryRun dry_run(const std::string& path, const std::string& extra = "") {
  auto run = test::run_schedcheck("run '" + path + "' --dry-run --format json" + extra, false);
  DryRun d;
  d.exit_code = run.exit_code;
  auto j = nlohmann::json::parse(run.out, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("measured")) return d;
  d.replayed = true;
  for (const auto& c : j["measured"]["checks"])
    if (c["figure"] == "makespan" && c["predicted"].is_number() && c["measured"].is_number()) {
      d.predicted_s = c["predicted"].get<double>();
      d.replayed_s = c["measured"].get<double>();
    }
  for (const auto& p : j["measured"]["correctness"]["problems"]) d.problems.push_back(p.get<std::string>());
  return d;
}

// Exact to the nanosecond (the replay adds the same durations as the simulation; only the
// order of additions may differ).
void require_exact(const DryRun& d, const std::string& what) {
  INFO(what);
  REQUIRE(d.replayed);
  CHECK(d.exit_code == 0);
  CHECK(d.predicted_s > 0);
  CHECK(std::abs(d.replayed_s - d.predicted_s) < 1e-9);
  std::string problems;
  for (const auto& p : d.problems) problems += p + "\n";
  INFO(problems);
  CHECK(d.problems.empty());
}

TEST_CASE("the dry run of batched P2P groups reproduces the prediction exactly", "[gpu-plan][cli][dry-run]") {
  // Megatron's parity-ordered shape exchange: groups of 2 to 4 members on both ranks, partners in
  // other groups. Before the group's ready points were recorded at its launch, the replay started
  // 0SEND_F1 before 1F0 ended (29.073 ms replayed for 30.801 ms predicted, exit 20).
  DryRun parity = dry_run(test::source_path("examples/megatron-pp2-shape-exchange-parity.yaml"));
  require_exact(parity, "megatron-pp2-shape-exchange-parity");
  CHECK(parity.predicted_s == Approx(30.801e-3).margin(0.5e-6));
  // Under eager and buffered sends the groups are timed by the same rules (29.073 ms: no send
  // waits for its receive to be posted).
  for (const char* sem : {"eager", "buffered:1"}) {
    DryRun d = dry_run(test::source_path("examples/megatron-pp2-shape-exchange-parity.yaml"),
                       std::string(" --semantics ") + sem);
    require_exact(d, std::string("megatron-pp2-shape-exchange-parity --semantics ") + sem);
    CHECK(d.predicted_s == Approx(29.073e-3).margin(0.5e-6));
  }
  // The lazy-creation deadlock with its fix (communicators created eagerly): ranks 1 and 2 batch
  // two sends to one peer and two receives from one peer.
  std::string lazy = test::read_file(test::source_path("examples/batched-lazy-group-init-deadlock.yaml"));
  const auto at = lazy.rfind("comm_init: lazy");  // the spec line, not its comment
  REQUIRE(at != std::string::npos);
  lazy.replace(at, 15, "comm_init: eager");
  require_exact(dry_run(test::write_temp("schedcheck-gpu-plan-test", "batched-eager.yaml", lazy)),
                "batched-lazy-group-init-deadlock with comm_init: eager");
  // The text report says so too: no figure differs and every op ran once.
  auto text = test::run_schedcheck("run examples/megatron-pp2-shape-exchange-parity.yaml --dry-run");
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("DIFFERS") == std::string::npos);
  CHECK(text.out.find("every op ran once") != std::string::npos);
}

TEST_CASE("run --dry-run reproduces the predicted makespan of every example and reference spec it accepts",
          "[gpu-plan][cli][dry-run]") {
  std::vector<std::string> files;
  for (const char* dir : {"examples", "specs/reference"})
    for (const auto& e : std::filesystem::recursive_directory_iterator(test::source_path(dir)))
      if (e.is_regular_file() && e.path().extension() != ".md")
        files.push_back(std::filesystem::relative(e.path(), SCHEDCHECK_SOURCE_DIR).string());
  std::sort(files.begin(), files.end());
  std::set<std::string> accepted;
  for (const auto& f : files) {
    DryRun d = dry_run(test::source_path(f));
    INFO(f << ": exit " << d.exit_code);
    if (!d.replayed) {
      // Refused: not a front-end run executes (2), lazy communicator creation (2), or verify's
      // findings (10-14). Never a disagreement (20) or an internal error (70).
      CHECK((d.exit_code == 2 || (d.exit_code >= 10 && d.exit_code <= 14)));
      continue;
    }
    accepted.insert(f);
    require_exact(d, f);
  }
  // The batched and GPU examples and the reference pipelines are among those run accepts.
  for (const char* f : {"examples/megatron-pp2-shape-exchange-parity.yaml", "examples/gpu-1f1b-p4-m8.yaml",
                        "examples/gpu-zbh1-p4-m8.yaml", "examples/gpu-fsdp2-8layers.yaml",
                        "specs/reference/p4-m8-1f1b.yaml", "specs/reference/zb-table5-1.5b-m24.yaml"}) {
    INFO(f);
    CHECK(accepted.count(f) == 1);
  }
}

TEST_CASE("schedcheck run refuses deadlocks and spec errors, and needs a GPU otherwise", "[gpu-plan][cli]") {
  auto dead = test::run_schedcheck("run examples/interleaved-rendezvous-deadlock.yaml");
  CHECK(dead.exit_code == 11);
  CHECK(dead.out.find("wait-for cycle") != std::string::npos);
  CHECK(dead.out.find("refusing to run a schedule that verify does not prove deadlock-free") != std::string::npos);
  auto mem = test::run_schedcheck("run examples/gpipe-over-memory-limit.yaml");
  CHECK(mem.exit_code == 13);
  CHECK(mem.out.find("--force runs it anyway") != std::string::npos);
  auto bad = test::run_schedcheck("run no-such-spec.yaml");
  CHECK(bad.exit_code == 2);
  auto usage = test::run_schedcheck("run examples/gpu-1f1b-p4-m8.yaml --tolerance five");
  CHECK(usage.exit_code == 1);
  // Without CUDA (or without a GPU, as on the build machines) it stops with exit 69.
  auto run = test::run_schedcheck("run examples/gpu-1f1b-p4-m8.yaml");
  if (run.out.find("built without CUDA") != std::string::npos) {
    CHECK(run.exit_code == 69);
    CHECK(run.out.find("rebuild with -DWITH_CUDA=ON") != std::string::npos);
  } else if (run.exit_code == 69) {
    CHECK(run.out.find("no CUDA") != std::string::npos);
  } else {
    CHECK((run.exit_code == 0 || run.exit_code == 20));  // a GPU is present: it ran
  }
}

}  // namespace
}  // namespace sc::gpu
