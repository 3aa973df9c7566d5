// Collectives in the Program IR: execution (instances join, hangs name the missing rank),
// the timeline (members start together), happens-before clocks and worst-case memory.
#include <string>
#include <vector>

#include "catch.h"
#include "check/execution.h"
#include "graph/happens_before.h"
#include "graph/worst_case_memory.h"
#include "ir/program.h"
#include "sim/timeline.h"

namespace sc {
namespace {

/// Ranks with a compute and a comm stream each, and one communicator over all of them.
struct Net {
  Program p;
  std::vector<int32_t> compute, comm;
  int32_t world = -1;

  explicit Net(int ranks) {
    p.num_ranks = ranks;
    p.static_bytes_per_rank.assign(ranks, 0);
    std::vector<int32_t> all;
    for (int r = 0; r < ranks; ++r) {
      compute.push_back(p.add_stream(r, "compute"));
      comm.push_back(p.add_stream(r, "comm"));
      all.push_back(r);
    }
    world = p.add_communicator("world", all);
  }
  OpId compute_op(int r, double seconds, std::vector<OpId> deps = {}, std::string name = "") {
    Op o;
    o.kind = OpKind::kCompute;
    o.rank = r;
    o.stream = compute[r];
    o.duration_s = seconds;
    if (!name.empty()) o.set_name(p.add_name(name));
    OpId id = p.add_op(o);
    for (OpId d : deps) p.add_dep(id, Dep{d, DepKind::kLocal});
    return id;
  }
  OpId collective(int r, int32_t comm_id, double seconds, std::vector<OpId> deps = {}, int32_t stream = -1,
                  std::string name = "") {
    Op o;
    o.kind = OpKind::kCollective;
    o.rank = r;
    o.stream = stream >= 0 ? stream : comm[r];
    o.set_comm(comm_id);
    o.duration_s = seconds;
    o.bytes = 1024;
    if (!name.empty()) o.set_name(p.add_name(name));
    OpId id = p.add_op(o);
    for (OpId d : deps) p.add_dep(id, Dep{d, DepKind::kLocal});
    return id;
  }
};

TEST_CASE("a collective starts when its last member is ready and all members end together", "[collective]") {
  Net n(2);
  OpId c0 = n.compute_op(0, 1.0);
  OpId c1 = n.compute_op(1, 3.0);
  OpId ag0 = n.collective(0, n.world, 2.0, {c0});
  OpId ag1 = n.collective(1, n.world, 2.0, {c1});
  OpId after0 = n.compute_op(0, 1.0, {ag0});
  REQUIRE(n.p.validate().empty());
  CHECK(n.p.ops[ag0].seq() == 0);
  CHECK(n.p.instance(ag0) == std::vector<OpId>{ag0, ag1});
  ExecutionResult ex = execute(n.p);
  REQUIRE(ex.completed);
  Timeline t = simulate(n.p, ex.order);
  // Rank 1 is ready at 3 s; the all-gather runs 3..5 on both ranks; rank 0's next op 5..6.
  CHECK(t.ops[ag0].start_s == 3.0);
  CHECK(t.ops[ag1].start_s == 3.0);
  CHECK(t.ops[ag0].end_s == 5.0);
  CHECK(t.ops[after0].start_s == 5.0);
  CHECK(t.makespan_s == 6.0);
}

TEST_CASE("a rank that issues one collective fewer hangs the others and is named", "[collective]") {
  Net n(3);
  for (int r = 0; r < 3; ++r) {
    n.collective(r, n.world, 1.0, {}, -1, "AG layer.0");
    if (r != 2) n.collective(r, n.world, 1.0, {}, -1, "AG layer.1");  // rank 2 skips layer.1
  }
  REQUIRE(n.p.validate().empty());
  ExecutionResult ex = execute(n.p);
  REQUIRE_FALSE(ex.completed);
  REQUIRE(ex.findings.size() >= 1);
  const Finding& f = ex.findings.front();
  CHECK(f.kind == FindingKind::kDeadlock);
  INFO(f.message);
  CHECK(f.message.find("AG layer.1") != std::string::npos);
  CHECK(f.message.find("waits in all-gather #2 on communicator 'world' for rank 2, which issues only 1 collective on that communicator")
        != std::string::npos);
}

TEST_CASE("reduce-scatters of different sizes on one communicator hang every member", "[collective]") {
  // Megatron-LM PR #2218: ranks issued reduce-scatters of different sizes on one communicator,
  // and the job hung; NCCL compares neither kinds nor counts across ranks.
  Net n(3);
  std::vector<OpId> rs;
  for (int r = 0; r < 3; ++r) {
    rs.push_back(n.collective(r, n.world, 1.0, {}, -1, "RS layer.0"));
    n.p.ops[rs.back()].collective = CollectiveKind::kReduceScatter;
    n.p.ops[rs.back()].bytes = r == 1 ? 3 << 20 : 4 << 20;
  }
  REQUIRE(n.p.validate().empty());
  ExecutionResult ex = execute(n.p);
  REQUIRE_FALSE(ex.completed);
  for (OpId id : rs) CHECK_FALSE(ex.done[id]);
  REQUIRE(ex.findings.size() == 3);  // each member waits in it for nothing that will come
  const Finding& f = ex.findings.front();
  CHECK(f.kind == FindingKind::kDeadlock);
  INFO(f.message);
  CHECK(f.message.find("which its members issue with different kinds or sizes (ranks 0, 2: reduce-scatter of 4 MiB; "
                       "rank 1: reduce-scatter of 3 MiB)") != std::string::npos);
  CHECK(f.message.find("Megatron-LM PR #2218") != std::string::npos);

  // The same sizes complete; so does a barrier, whose size means nothing.
  Net same(2), barrier(2);
  for (int r = 0; r < 2; ++r) same.collective(r, same.world, 1.0);
  for (int r = 0; r < 2; ++r) {
    OpId b = barrier.collective(r, barrier.world, 1.0);
    barrier.p.ops[b].collective = CollectiveKind::kBarrier;
    barrier.p.ops[b].bytes = r;
  }
  CHECK(execute(same.p).completed);
  CHECK(execute(barrier.p).completed);
}

TEST_CASE("two communicators entered in opposite orders on one stream deadlock with a cycle", "[collective]") {
  Net n(2);
  int32_t a = n.world;
  int32_t b = n.p.add_communicator("other", {0, 1});
  // Rank 0: A then B; rank 1: B then A, each on its single comm stream.
  n.collective(0, a, 1.0, {}, -1, "A0");
  n.collective(0, b, 1.0, {}, -1, "B0");
  n.collective(1, b, 1.0, {}, -1, "B1");
  n.collective(1, a, 1.0, {}, -1, "A1");
  REQUIRE(n.p.validate().empty());
  ExecutionResult ex = execute(n.p);
  REQUIRE_FALSE(ex.completed);
  REQUIRE(ex.cycle_closed);
  const Finding& f = ex.findings.front();
  INFO(f.message);
  CHECK(f.message.find("wait-for cycle") != std::string::npos);
  CHECK(f.message.find("A0") != std::string::npos);
  CHECK(f.message.find("B1") != std::string::npos);
  // On separate streams the same orders complete.
  Net m(2);
  int32_t b2 = m.p.add_communicator("other", {0, 1});
  m.collective(0, m.world, 1.0);
  m.collective(0, b2, 1.0, {}, m.compute[0]);
  m.collective(1, b2, 1.0, {}, m.compute[1]);
  m.collective(1, m.world, 1.0);
  CHECK(execute(m.p).completed);
}

TEST_CASE("one communicator's collectives run in issue order even on different streams", "[collective]") {
  Net n(2);
  // Each rank issues X on its comm stream, then Y on its compute stream; Y may not start before X ends.
  OpId x0 = n.collective(0, n.world, 2.0);
  OpId y0 = n.collective(0, n.world, 1.0, {}, n.compute[0]);
  n.collective(1, n.world, 2.0);
  n.collective(1, n.world, 1.0, {}, n.compute[1]);
  ExecutionResult ex = execute(n.p);
  REQUIRE(ex.completed);
  Timeline t = simulate(n.p, ex.order);
  CHECK(t.ops[x0].end_s == 2.0);
  CHECK(t.ops[y0].start_s == 2.0);
  HappensBefore hb(n.p);
  REQUIRE(hb.acyclic());
  RankClocks clocks(hb, 0);
  CHECK(clocks.op_before(x0, y0));
  CHECK_FALSE(clocks.op_before(y0, x0));
}

TEST_CASE("happens-before crosses ranks through a collective", "[collective]") {
  // Rank 0: compute a on its compute stream; independently its comm stream runs the collective
  // and then frees. Rank 1 joins the collective only after an event wait on... its own compute,
  // so a on rank 0 is NOT ordered before the collective; adding rank 0's dep orders it.
  Net n(2);
  OpId a = n.compute_op(0, 1.0);
  OpId c0 = n.collective(0, n.world, 1.0);
  OpId b1 = n.compute_op(1, 1.0);
  OpId c1 = n.collective(1, n.world, 1.0, {b1});
  OpId after = n.compute_op(0, 1.0, {c0});
  HappensBefore hb(n.p);
  REQUIRE(hb.acyclic());
  RankClocks r0(hb, 0);
  CHECK_FALSE(r0.op_before(a, c0));
  CHECK(r0.op_before(c0, after));
  RankClocks r1(hb, 1);
  CHECK(r1.op_before(b1, c1));
  // b1 (rank 1) happens before rank 0's op after the collective: rank 0's clock cannot see rank
  // 1's streams, but the start of `after` knows the collective ended, which needs b1's end.
  CHECK(r1.ordered(end_event(b1), start_event(after)));
}

TEST_CASE("worst-case memory over stream interleavings sees a gather that runs ahead", "[collective]") {
  // Rank 0 and 1 each gather two units on the comm stream (alloc at start) while compute uses
  // and frees them; without a wait from the comm stream on compute, both gathers can be live.
  for (bool limited : {false, true}) {
    Net n(2);
    std::vector<int32_t> bufs;
    for (int r = 0; r < 2; ++r) {
      int32_t u0 = static_cast<int32_t>(n.p.buffers.size());
      n.p.buffers.push_back(Buffer{r, -1, -1, "param", 100});
      n.p.buffers.push_back(Buffer{r, -1, -1, "param", 100});
      OpId g0 = n.collective(r, n.world, 1.0);
      n.p.add_mem(g0, MemEffect{u0, 100, false});
      OpId f0 = n.compute_op(r, 1.0, {g0});
      OpId free0 = n.compute_op(r, 0.0);
      n.p.add_mem(free0, MemEffect{u0, -100, false});
      OpId g1 = n.collective(r, n.world, 1.0, limited ? std::vector<OpId>{free0} : std::vector<OpId>{});
      n.p.add_mem(g1, MemEffect{u0 + 1, 100, false});
      OpId f1 = n.compute_op(r, 1.0, {g1});
      OpId free1 = n.compute_op(r, 0.0);
      n.p.add_mem(free1, MemEffect{u0 + 1, -100, false});
      (void)f0;
      (void)f1;
    }
    REQUIRE(n.p.validate().empty());
    REQUIRE(execute(n.p).completed);
    WorstCaseMemory w = worst_case_memory(n.p);
    CHECK(w.bytes_per_rank[0] == (limited ? 100 : 200));
    CHECK(w.used_min_cut[0] == 1);
  }
}

}  // namespace
}  // namespace sc

#include "check/passes.h"
#include "fsdp/verify_fsdp.h"

namespace sc {
namespace {

TEST_CASE("collective agreement names the culprit, cross-communicator order must agree", "[collective]") {
  Net n(3);
  int32_t other = n.p.add_communicator("other", {0, 1, 2});
  // Ranks 0 and 1: world then other; rank 2: other then world, on different streams (no
  // deadlock in this program, but NCCL may hang when the collectives block).
  for (int r = 0; r < 3; ++r) {
    if (r < 2) {
      n.collective(r, n.world, 1.0, {}, -1, "W");
      n.collective(r, other, 1.0, {}, n.compute[r], "O");
    } else {
      n.collective(r, other, 1.0, {}, n.compute[r], "O");
      n.collective(r, n.world, 1.0, {}, -1, "W");
    }
  }
  REQUIRE(n.p.validate().empty());
  std::vector<Finding> f = check_collectives(n.p);
  REQUIRE(f.size() == 1);
  INFO(f[0].message);
  CHECK(f[0].kind == FindingKind::kChannel);
  CHECK(f[0].message == "ranks 0 and 2 enter communicators 'world' and 'other' in different orders: rank 0 issues "
                        "all-gather #1 on 'other' after 1 collectives on 'world', rank 2 after 0");
  // Same kinds and sizes but a different unit on rank 1: a divergence naming rank 1.
  Net m(3);
  for (int r = 0; r < 3; ++r) m.collective(r, m.world, 1.0, {}, -1, r == 1 ? "AG b (it0)" : "AG a (it0)");
  std::vector<Finding> g = check_collectives(m.p);
  REQUIRE(g.size() == 1);
  CHECK(g[0].ranks == std::vector<int>{1});
  CHECK(g[0].message.find("at #1: rank 1 issues all-gather 'AG b' (1 KiB) where ranks 0, 2 issue all-gather 'AG a'") !=
        std::string::npos);
}

}  // namespace
}  // namespace sc
