// Tests of worst-case memory per rank: prefix scan, minimum cut, and a brute-force differential.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "catch.h"
#include "check/execution.h"
#include "graph/happens_before.h"
#include "graph/worst_case_memory.h"
#include "ir/program.h"
#include "pipeline/build_program.h"
#include "pipeline/generators.h"
#include "pipeline/lower_comms.h"
#include "sim/timeline.h"

namespace sc {
namespace {

/// One memory effect of an op under construction: `bytes` of `buffer`, at start or end.
struct Fx {
  int32_t buffer;
  int64_t bytes;
  bool at_end;
};

/// Builds small Programs by hand through the Program API.
struct Builder {
  Program p;

  explicit Builder(int32_t ranks, Semantics::Kind kind = Semantics::kRendezvous, int32_t depth = 0) {
    p.num_ranks = ranks;
    p.static_bytes_per_rank.assign(ranks, 0);
    p.semantics = Semantics{kind, depth};
  }
  int32_t stream(int32_t rank, const char* name = "compute") { return p.add_stream(rank, name); }
  int32_t buffer(int32_t rank, int64_t bytes) {
    p.buffers.push_back(Buffer{rank, -1, static_cast<int32_t>(p.buffers.size()), "act", bytes});
    return static_cast<int32_t>(p.buffers.size() - 1);
  }
  /// Allocates buffer `b` (its full size) at the op's start or end.
  Fx alloc(int32_t b, bool at_end = false) const { return Fx{b, p.buffers[b].bytes, at_end}; }
  /// Frees buffer `b` at the op's end or start.
  Fx free(int32_t b, bool at_end = true) const { return Fx{b, -p.buffers[b].bytes, at_end}; }

  OpId compute(int32_t s, std::initializer_list<OpId> deps = {}, std::initializer_list<Fx> fx = {},
               std::initializer_list<OpId> transfer_deps = {}) {
    Op o;
    o.kind = OpKind::kCompute;
    return add(o, s, std::vector<OpId>(deps), std::vector<Fx>(fx), std::vector<OpId>(transfer_deps));
  }
  /// A send (to_rank given) or recv (from_rank given) appended to the channel's FIFO.
  OpId p2p(bool send, int32_t s, int32_t peer, std::initializer_list<OpId> deps = {},
           std::initializer_list<Fx> fx = {}) {
    return p2p_v(send, s, peer, std::vector<OpId>(deps), std::vector<Fx>(fx));
  }
  OpId p2p_v(bool send, int32_t s, int32_t peer, const std::vector<OpId>& deps, const std::vector<Fx>& fx) {
    const int32_t rank = p.streams[s].rank;
    Op o;
    o.kind = send ? OpKind::kSend : OpKind::kRecv;
    o.set_peer(peer);
    o.set_channel(send ? p.channel_for(rank, peer) : p.channel_for(peer, rank));
    o.bytes = 1;
    const OpId id = add(o, s, deps, fx, {});
    auto& ch = p.channels[o.channel()];
    (send ? ch.sends : ch.recvs).push_back(id);
    return id;
  }
  OpId add(Op o, int32_t s, const std::vector<OpId>& deps, const std::vector<Fx>& fx,
           const std::vector<OpId>& transfer_deps) {
    o.rank = p.streams[s].rank;
    o.stream = s;
    o.duration_s = o.kind == OpKind::kCompute ? 1.0 : 0.0;
    const OpId id = p.add_op(o);
    for (OpId d : deps) p.add_dep(id, Dep{d, DepKind::kLocal});
    for (OpId d : transfer_deps) p.add_dep(id, Dep{d, DepKind::kTransfer});
    for (const Fx& f : fx) p.add_mem(id, MemEffect{f.buffer, f.bytes, f.at_end});
    return id;
  }
  Program& done() {
    p.match_channels();
    REQUIRE(p.validate().empty());
    return p;
  }
};

/// The program as text, for failure messages.
std::string describe(const Program& p) {
  std::string s = fmt::format("ranks {} semantics {}\n", p.num_ranks, format_semantics(p.semantics));
  for (OpId i = 0; i < static_cast<OpId>(p.ops.size()); ++i) {
    const Op& o = p.ops[i];
    const char* kind = o.kind == OpKind::kSend ? "send" : o.kind == OpKind::kRecv ? "recv" : "compute";
    s += fmt::format("op {} rank {} stream {} {}", i, o.rank, o.stream, kind);
    if (o.match() != kNoOp) s += fmt::format(" match {}", o.match());
    for (const Dep* d = p.deps_begin(i); d != p.deps_end(i); ++d) s += fmt::format(" dep {}", d->src);
    for (const MemEffect* m = p.mem_begin(i); m != p.mem_end(i); ++m)
      s += fmt::format(" buf{}{:+}@{}", m->buffer, m->bytes, m->at_end ? "end" : "start");
    s += "\n";
  }
  return s;
}

using Ids = std::vector<int32_t>;

TEST_CASE("a single stream's worst case is its maximum prefix sum, by scan and by min cut", "[graph]") {
  Builder b(2);
  b.p.static_bytes_per_rank = {100, 7};
  const int32_t s = b.stream(0);
  b.stream(1);  // rank 1 has no effects
  const int32_t b0 = b.buffer(0, 10), b1 = b.buffer(0, 5), b2 = b.buffer(0, 3);
  b.compute(s, {}, {b.alloc(b0)});
  const OpId op1 = b.compute(s, {}, {b.alloc(b1), b.free(b0)});
  b.compute(s, {}, {b.alloc(b2), b.free(b1)});
  b.compute(s, {}, {b.free(b2)});
  const Program& p = b.done();

  const WorstCaseMemory scan = worst_case_memory(p);
  const WorstCaseMemory cut = worst_case_memory(p, /*force_min_cut=*/true);
  CHECK(scan.used_min_cut == std::vector<uint8_t>{0, 0});
  CHECK(cut.used_min_cut == std::vector<uint8_t>{1, 0});
  for (const WorstCaseMemory* w : {&scan, &cut}) {
    CHECK(w->bytes_per_rank == std::vector<int64_t>{115, 7});
    CHECK(w->live_buffers[0] == Ids{b0, b1});
    CHECK(w->running_ops[0] == std::vector<OpId>{op1});
    CHECK(w->live_buffers[1].empty());
    CHECK(w->running_ops[1].empty());
  }
}

TEST_CASE("a free at an op's end and the next allocation never overlap on one stream", "[graph]") {
  Builder b(1);
  const int32_t s = b.stream(0);
  const int32_t x = b.buffer(0, 4), y = b.buffer(0, 6);
  b.compute(s, {}, {b.alloc(x), b.free(x)});
  const OpId second = b.compute(s, {}, {b.alloc(y), b.free(y)});
  const Program& p = b.done();
  for (bool force : {false, true}) {
    const WorstCaseMemory w = worst_case_memory(p, force);
    CHECK(w.bytes_per_rank[0] == 6);
    CHECK(w.live_buffers[0] == Ids{y});
    CHECK(w.running_ops[0] == std::vector<OpId>{second});
  }
}

TEST_CASE("two independent streams may both be alive, an event dependency serialises them", "[graph]") {
  for (bool with_dep : {false, true}) {
    CAPTURE(with_dep);
    Builder b(1);
    const int32_t sa = b.stream(0, "compute"), sb = b.stream(0, "comm");
    const int32_t a = b.buffer(0, 5), c = b.buffer(0, 5);
    const OpId a_alloc = b.compute(sa, {}, {b.alloc(a)});
    const OpId a_free = b.compute(sa, {}, {b.free(a)});
    const OpId c_alloc = with_dep ? b.compute(sb, {a_free}, {b.alloc(c)}) : b.compute(sb, {}, {b.alloc(c)});
    b.compute(sb, {}, {b.free(c)});
    const Program& p = b.done();

    const WorstCaseMemory w = worst_case_memory(p);
    CHECK(w.used_min_cut[0] == 1);
    if (!with_dep) {
      CHECK(w.bytes_per_rank[0] == 10);
      CHECK(w.live_buffers[0] == Ids{a, c});
      CHECK(w.running_ops[0] == std::vector<OpId>{a_alloc, c_alloc});
    } else {
      CHECK(w.bytes_per_rank[0] == 5);
      // The smallest worst moment: a allocated, nothing else yet.
      CHECK(w.live_buffers[0] == Ids{a});
      CHECK(w.running_ops[0] == std::vector<OpId>{a_alloc});
    }
  }
}

TEST_CASE("order through another rank and a recv's matched send is honoured", "[graph]") {
  // Rank 1 holds A on one stream; rank 0 sends only after a transfer from A's op; rank 1
  // allocates B only after receiving that message. So B is never alive together with A.
  for (bool through_rank0 : {false, true}) {
    for (auto kind : {Semantics::kEager, Semantics::kRendezvous}) {
      CAPTURE(through_rank0, kind);
      Builder b(2, kind);
      const int32_t s0 = b.stream(0);
      const int32_t y = b.stream(1, "compute"), x = b.stream(1, "comm");
      const int32_t bufa = b.buffer(1, 5), bufb = b.buffer(1, 5);
      const OpId hold_a = b.compute(y, {}, {b.alloc(bufa), b.free(bufa)});
      const OpId w0 = through_rank0 ? b.compute(s0, {}, {}, {hold_a}) : b.compute(s0);
      b.p2p(true, s0, 1, {w0});
      const OpId recv = b.p2p(false, x, 0);
      b.compute(x, {recv}, {b.alloc(bufb), b.free(bufb)});
      const Program& p = b.done();
      const WorstCaseMemory w = worst_case_memory(p);
      CHECK(w.used_min_cut[1] == 1);
      CHECK(w.bytes_per_rank[1] == (through_rank0 ? 5 : 10));
      CHECK(w.live_buffers[1] == (through_rank0 ? Ids{bufa} : Ids{bufa, bufb}));
    }
  }
}

TEST_CASE("rendezvous orders what follows a send after its recv starts, eager does not", "[graph]") {
  // Rank 1 holds A on stream Y. Rank 0 posts its recv only after a transfer from A's op. Rank 1
  // sends on stream X, then allocates B. Under rendezvous the send cannot end before the recv
  // starts, so B follows A's free; under eager it may overlap A.
  for (auto kind : {Semantics::kEager, Semantics::kRendezvous}) {
    CAPTURE(kind);
    Builder b(2, kind);
    const int32_t s0 = b.stream(0);
    const int32_t y = b.stream(1, "compute"), x = b.stream(1, "comm");
    const int32_t bufa = b.buffer(1, 5), bufb = b.buffer(1, 5);
    const OpId hold_a = b.compute(y, {}, {b.alloc(bufa), b.free(bufa)});
    const OpId w0 = b.compute(s0, {}, {}, {hold_a});
    b.p2p(false, s0, 1, {w0});
    b.p2p(true, x, 0);
    const OpId hold_b = b.compute(x, {}, {b.alloc(bufb), b.free(bufb)});
    const Program& p = b.done();
    const WorstCaseMemory w = worst_case_memory(p);
    if (kind == Semantics::kEager) {
      CHECK(w.bytes_per_rank[1] == 10);
      CHECK(w.live_buffers[1] == Ids{bufa, bufb});
      CHECK(w.running_ops[1] == std::vector<OpId>{hold_a, hold_b});
    } else {
      CHECK(w.bytes_per_rank[1] == 5);
      CHECK(w.live_buffers[1] == Ids{bufa});
      CHECK(w.running_ops[1] == std::vector<OpId>{hold_a});
    }
  }
}

TEST_CASE("buffered:N orders a send's end after the recv N messages back has ended", "[graph]") {
  // Rank 0 holds A on stream Y and sends two messages on stream X, then allocates B. Rank 1
  // receives only after a transfer from A's op. buffered:1 lets the second send end only after
  // the first recv, so B follows A's free; buffered:2 and eager do not; rendezvous already
  // orders the first send's end after its recv's start.
  struct Case {
    Semantics::Kind kind;
    int32_t depth;
    int64_t bytes;
  };
  for (const Case c : {Case{Semantics::kEager, 0, 10}, Case{Semantics::kBuffered, 2, 10},
                       Case{Semantics::kBuffered, 1, 5}, Case{Semantics::kRendezvous, 0, 5}}) {
    CAPTURE(c.kind, c.depth);
    Builder b(2, c.kind, c.depth);
    const int32_t y = b.stream(0, "compute"), x = b.stream(0, "comm");
    const int32_t s1 = b.stream(1);
    const int32_t bufa = b.buffer(0, 5), bufb = b.buffer(0, 5);
    const OpId hold_a = b.compute(y, {}, {b.alloc(bufa), b.free(bufa)});
    b.p2p(true, x, 1);
    b.p2p(true, x, 1);
    b.compute(x, {}, {b.alloc(bufb), b.free(bufb)});
    b.compute(s1, {}, {}, {hold_a});
    b.p2p(false, s1, 0);
    b.p2p(false, s1, 0);
    const Program& p = b.done();
    const WorstCaseMemory w = worst_case_memory(p);
    CHECK(w.bytes_per_rank[0] == c.bytes);
    CHECK(w.live_buffers[0] == (c.bytes == 10 ? Ids{bufa, bufb} : Ids{bufa}));
  }
}

// ---- Brute force: every down-closed set of events, for tiny programs. ----

/// The order of the header's contract, written independently: preds[e] = events before e.
std::vector<std::vector<int>> brute_order(const Program& p) {
  const int n = static_cast<int>(p.ops.size());
  std::vector<std::vector<int>> preds(2 * n);
  for (const Stream& s : p.streams)
    for (size_t i = 1; i < s.ops.size(); ++i) preds[2 * s.ops[i]].push_back(2 * s.ops[i - 1] + 1);
  for (int i = 0; i < n; ++i) {
    preds[2 * i + 1].push_back(2 * i);
    for (const Dep* d = p.deps_begin(i); d != p.deps_end(i); ++d) preds[2 * i].push_back(2 * d->src + 1);
    const Op& o = p.ops[i];
    if (o.match() == kNoOp) continue;
    if (o.kind == OpKind::kRecv) preds[2 * i + 1].push_back(2 * o.match());
    if (o.kind == OpKind::kSend && p.semantics.kind == Semantics::kRendezvous) preds[2 * i + 1].push_back(2 * o.match());
  }
  // Collectives: an instance's members end after all of them start; a rank's collectives on a
  // communicator run one after another.
  for (const Communicator& c : p.comms) {
    for (const auto& seqs : c.ops)
      for (size_t k = 1; k < seqs.size(); ++k) preds[2 * seqs[k]].push_back(2 * seqs[k - 1] + 1);
    for (size_t k = 0; !c.ops.empty() && k < c.ops[0].size(); ++k)
      for (const auto& a : c.ops)
        for (const auto& b : c.ops)
          if (k < a.size() && k < b.size() && a[k] != b[k]) preds[2 * a[k] + 1].push_back(2 * b[k]);
  }
  if (p.semantics.kind == Semantics::kBuffered)
    for (const Channel& ch : p.channels)
      for (size_t k = p.semantics.buffer; k < ch.sends.size(); ++k)
        if (k - p.semantics.buffer < ch.recvs.size())
          preds[2 * ch.sends[k] + 1].push_back(2 * ch.recvs[k - p.semantics.buffer] + 1);
  return preds;
}

bool acyclic(const std::vector<std::vector<int>>& preds) {
  const int n = static_cast<int>(preds.size());
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<int>> succ(n);
  for (int e = 0; e < n; ++e)
    for (int q : preds[e]) succ[q].push_back(e), ++indeg[e];
  std::vector<int> ready;
  for (int e = 0; e < n; ++e)
    if (indeg[e] == 0) ready.push_back(e);
  int seen = 0;
  while (!ready.empty()) {
    const int e = ready.back();
    ready.pop_back();
    ++seen;
    for (int s : succ[e])
      if (--indeg[s] == 0) ready.push_back(s);
  }
  return seen == n;
}

/// Per rank: the maximum over down-closed sets, and every (live, running) witness at it.
struct BruteRank {
  int64_t bytes = 0;
  std::vector<std::pair<Ids, std::vector<OpId>>> witnesses;
};

std::vector<BruteRank> brute_force(const Program& p, const std::vector<std::vector<int>>& preds) {
  const int events = static_cast<int>(preds.size());
  std::vector<BruteRank> out(p.num_ranks);
  for (int r = 0; r < p.num_ranks; ++r) out[r].bytes = INT64_MIN;
  for (uint32_t set = 0; set < (1u << events); ++set) {
    bool closed = true;
    for (int e = 0; e < events && closed; ++e)
      if (set >> e & 1)
        for (int q : preds[e])
          if (!(set >> q & 1)) closed = false;
    if (!closed) continue;
    for (int r = 0; r < p.num_ranks; ++r) {
      std::vector<int64_t> net(p.buffers.size(), 0);
      int64_t total = p.static_bytes_per_rank[r];
      std::vector<OpId> running;
      for (int e = 0; e < events; ++e) {
        if (!(set >> e & 1) || p.ops[e / 2].rank != r) continue;
        if (e % 2 == 0 && !(set >> (e + 1) & 1)) running.push_back(e / 2);
        for (const MemEffect* m = p.mem_begin(e / 2); m != p.mem_end(e / 2); ++m)
          if (m->at_end == (e % 2 == 1)) {
            net[m->buffer] += m->bytes;
            total += m->bytes;
          }
      }
      Ids live;
      for (size_t k = 0; k < net.size(); ++k)
        if (net[k] > 0) live.push_back(static_cast<int32_t>(k));
      if (total > out[r].bytes) out[r] = BruteRank{total, {}};
      if (total == out[r].bytes) out[r].witnesses.emplace_back(live, running);
    }
  }
  return out;
}

/// A random tiny program: ranks x 2 streams, ops created in a global order, deps only to
/// earlier ops, P2P pairs with the send created first, alloc/free pairs per buffer.
Program random_program(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int ranks = pick(2, 3);
  const int kinds[3] = {Semantics::kEager, Semantics::kRendezvous, Semantics::kBuffered};
  Builder b(ranks, static_cast<Semantics::Kind>(kinds[pick(0, 2)]), 1);
  for (int r = 0; r < ranks; ++r) {
    b.p.static_bytes_per_rank[r] = pick(0, 3);
    b.stream(r, "compute");
    b.stream(r, "comm");
  }
  std::vector<int32_t> everyone(ranks);
  for (int r = 0; r < ranks; ++r) everyone[r] = r;
  const int32_t comm = b.p.add_communicator("world", everyone);
  const int num_ops = pick(3, 5);  // at most 10 events, plus one collective instance
  // Effects planned per op: each buffer is allocated by one op and maybe freed by a later one.
  std::vector<std::vector<Fx>> fx(num_ops);
  std::vector<int> op_rank(num_ops), op_stream(num_ops);
  for (int i = 0; i < num_ops; ++i) {
    op_rank[i] = pick(0, ranks - 1);
    op_stream[i] = 2 * op_rank[i] + pick(0, 1);
  }
  for (int i = 0; i < num_ops; ++i) {
    if (pick(0, 3) == 0) continue;
    const int32_t buf = b.buffer(op_rank[i], pick(1, 9));
    fx[i].push_back(Fx{buf, b.p.buffers[buf].bytes, pick(0, 3) == 0});
    std::vector<int> later;  // ops of the same rank from i on
    for (int j = i; j < num_ops; ++j)
      if (op_rank[j] == op_rank[i]) later.push_back(j);
    if (pick(0, 4) == 0) continue;  // never freed
    const int j = later[pick(0, static_cast<int>(later.size()) - 1)];
    const bool at_end = j == i ? true : pick(0, 2) != 0;
    fx[j].push_back(Fx{buf, -b.p.buffers[buf].bytes, at_end});
  }
  std::vector<int> pending_send;  // ops that are sends awaiting a recv (by index)
  bool collective_added = false;
  for (int i = 0; i < num_ops; ++i) {
    std::vector<OpId> deps;
    for (int k = pick(0, 2); k > 0 && i > 0; --k) deps.push_back(pick(0, i - 1));
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    const int roll = pick(0, 5);
    int send_from = -1;
    for (int s : pending_send)
      if (op_rank[s] != op_rank[i] && b.p.ops[s].peer() == op_rank[i]) send_from = s;
    Op o;
    if (roll == 5 && !collective_added) {
      // One collective instance: a member on each rank (this op's rank gets this op's effects).
      collective_added = true;
      for (int r = 0; r < ranks; ++r) {
        Op c;
        c.kind = OpKind::kCollective;
        c.set_comm(comm);
        b.add(c, r == op_rank[i] ? op_stream[i] : 2 * r + pick(0, 1), {},
              r == op_rank[i] ? fx[i] : std::vector<Fx>{}, r == op_rank[i] ? deps : std::vector<OpId>{});
      }
    } else if (roll == 0 && send_from >= 0) {
      b.p2p_v(false, op_stream[i], op_rank[send_from], deps, fx[i]);
      pending_send.erase(std::find(pending_send.begin(), pending_send.end(), send_from));
    } else if (roll == 1) {
      int peer = pick(0, ranks - 2);
      if (peer >= op_rank[i]) ++peer;
      b.p2p_v(true, op_stream[i], peer, deps, fx[i]);
      pending_send.push_back(i);
    } else {
      b.add(o, op_stream[i], {}, fx[i], deps);
    }
  }
  b.p.match_channels();
  return b.p;
}

TEST_CASE("min cut and prefix scan agree with brute force on 200 random tiny programs, collectives included", "[graph]") {
  std::mt19937 rng(20240611);
  int checked = 0, min_cut_ranks = 0, with_collective = 0;
  while (checked < 200) {
    Program p = random_program(rng);
    REQUIRE(p.validate().empty());
    const auto preds = brute_order(p);
    // Keep only programs that can run to completion: every P2P op matched, order acyclic.
    bool matched = true;
    for (const Op& o : p.ops)
      if ((o.kind == OpKind::kSend || o.kind == OpKind::kRecv) && o.match() == kNoOp) matched = false;
    if (!matched || !acyclic(preds)) continue;
    ++checked;
    with_collective += p.comms[0].ops[0].empty() ? 0 : 1;
    const std::vector<BruteRank> expect = brute_force(p, preds);
    for (bool force : {false, true}) {
      const WorstCaseMemory got = worst_case_memory(p, force);
      for (int r = 0; r < p.num_ranks; ++r) {
        INFO("program:\n" << describe(p) << "rank " << r << " force_min_cut " << force);
        min_cut_ranks += got.used_min_cut[r];
        REQUIRE(got.bytes_per_rank[r] == expect[r].bytes);
        const std::pair<Ids, std::vector<OpId>> witness{got.live_buffers[r], got.running_ops[r]};
        const auto& ws = expect[r].witnesses;
        REQUIRE(std::find(ws.begin(), ws.end(), witness) != ws.end());
      }
    }
  }
  CHECK(min_cut_ranks > 200);
  CHECK(with_collective > 20);
}

TEST_CASE("on a 1F1B shape the min cut equals the prefix scan on every rank", "[graph]") {
  const int ranks = 4, microbatches = 40;
  const int64_t act = 1000;
  Builder b(ranks);
  std::vector<int32_t> stream(ranks);
  for (int r = 0; r < ranks; ++r) {
    stream[r] = b.stream(r);
    b.p.static_bytes_per_rank[r] = 50 * (r + 1);
  }
  std::vector<std::vector<int32_t>> buf(ranks, std::vector<int32_t>(microbatches));
  for (int r = 0; r < ranks; ++r)
    for (int m = 0; m < microbatches; ++m) buf[r][m] = b.buffer(r, act);
  // Per rank: warm-up forwards, then one forward one backward, then the remaining backwards.
  std::vector<std::vector<char>> order(ranks);
  for (int r = 0; r < ranks; ++r) {
    const int warm = std::min(ranks - r - 1, microbatches);
    for (int k = 0; k < warm; ++k) order[r].push_back('F');
    for (int k = warm; k < microbatches; ++k) order[r].push_back('F'), order[r].push_back('B');
    for (int k = 0; k < warm; ++k) order[r].push_back('B');
  }
  // Create ops in a global order that respects the cross-rank deps.
  std::vector<std::vector<OpId>> fwd(ranks, std::vector<OpId>(microbatches, kNoOp)), bwd = fwd;
  std::vector<size_t> next(ranks, 0);
  std::vector<int> nf(ranks, 0), nb(ranks, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      if (next[r] == order[r].size()) continue;
      if (order[r][next[r]] == 'F') {
        const int m = nf[r];
        if (r > 0 && fwd[r - 1][m] == kNoOp) continue;
        fwd[r][m] = r > 0 ? b.compute(stream[r], {}, {b.alloc(buf[r][m])}, {fwd[r - 1][m]})
                          : b.compute(stream[r], {}, {b.alloc(buf[r][m])});
        ++nf[r];
      } else {
        const int m = nb[r];
        if (r + 1 < ranks && bwd[r + 1][m] == kNoOp) continue;
        bwd[r][m] = r + 1 < ranks ? b.compute(stream[r], {}, {b.free(buf[r][m])}, {bwd[r + 1][m]})
                                  : b.compute(stream[r], {}, {b.free(buf[r][m])});
        ++nb[r];
      }
      ++next[r];
      progress = true;
    }
  }
  const Program& p = b.done();
  REQUIRE(p.ops.size() == static_cast<size_t>(2 * ranks * microbatches));
  const WorstCaseMemory scan = worst_case_memory(p);
  const WorstCaseMemory cut = worst_case_memory(p, true);
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    CHECK(scan.used_min_cut[r] == 0);
    CHECK(cut.used_min_cut[r] == 1);
    CHECK(scan.bytes_per_rank[r] == 50 * (r + 1) + act * (ranks - r));
    CHECK(cut.bytes_per_rank[r] == scan.bytes_per_rank[r]);
    CHECK(cut.live_buffers[r] == scan.live_buffers[r]);
    CHECK(cut.running_ops[r] == scan.running_ops[r]);
    CHECK(scan.live_buffers[r].size() == static_cast<size_t>(ranks - r));
  }
}

// ---- Fast paths against the minimum cut, at sizes brute force cannot reach. ----

/// A random program of `num_ops` ops on `ranks` ranks with `streams` streams each, created in
/// one global order that is also a topological order: deps (event waits on the same rank,
/// transfers from other ranks) point at earlier ops; each send is followed at once by its recv
/// on the peer, and a collective by its other members, so no semantics makes a cycle. Each op
/// may allocate a new buffer of its rank and free one its rank allocated earlier, at start or end.
/// `collectives_only`: no sends, recvs or transfers; collectives on the world and on a second
/// communicator over some of the ranks (as in FSDP and HSDP, where only collectives connect ranks).
Program random_multi_stream_program(std::mt19937& rng, int ranks, int streams, int num_ops,
                                    bool collectives_only = false) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const Semantics::Kind kinds[3] = {Semantics::kEager, Semantics::kRendezvous, Semantics::kBuffered};
  Builder b(ranks, kinds[pick(0, 2)], pick(1, 2));
  std::vector<std::vector<int32_t>> stream_of(ranks);
  for (int r = 0; r < ranks; ++r) {
    b.p.static_bytes_per_rank[r] = pick(0, 50);
    for (int k = 0; k < streams; ++k) stream_of[r].push_back(b.stream(r, k == 0 ? "compute" : "comm"));
  }
  std::vector<int32_t> everyone(ranks);
  for (int r = 0; r < ranks; ++r) everyone[r] = r;
  const int32_t world = b.p.add_communicator("world", everyone);
  std::vector<int32_t> some;
  for (int r = 0; r < ranks; ++r)
    if (r < 2 || pick(0, 1) == 0) some.push_back(r);
  const int32_t part = collectives_only ? b.p.add_communicator("part", some) : -1;
  std::vector<std::vector<OpId>> ops_of(ranks);
  std::vector<std::vector<int32_t>> unfreed(ranks);
  auto effects = [&](int r) {
    std::vector<Fx> fx;
    if (pick(0, 2) == 0) {
      const int32_t buf = b.buffer(r, pick(1, 20));
      fx.push_back(b.alloc(buf, pick(0, 2) == 0));
      unfreed[r].push_back(buf);
    } else if (!unfreed[r].empty() && pick(0, 1) == 0) {
      const int i = pick(0, static_cast<int>(unfreed[r].size()) - 1);
      fx.push_back(b.free(unfreed[r][i], pick(0, 2) != 0));
      unfreed[r].erase(unfreed[r].begin() + i);
    }
    return fx;
  };
  auto deps_of = [&](int r, std::vector<OpId>& local, std::vector<OpId>& transfer) {
    for (int k = pick(0, 2); k > 0; --k) {
      const int from = pick(0, ranks - 1);
      if (ops_of[from].empty()) continue;
      const OpId d = ops_of[from][pick(std::max(0, static_cast<int>(ops_of[from].size()) - 6),
                                       static_cast<int>(ops_of[from].size()) - 1)];
      if (from == r) local.push_back(d);
      else if (!collectives_only) transfer.push_back(d);
    }
    for (auto* v : {&local, &transfer}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
  };
  while (static_cast<int>(b.p.ops.size()) < num_ops) {
    const int r = pick(0, ranks - 1);
    const int roll = pick(0, 9);
    std::vector<OpId> local, transfer;
    deps_of(r, local, transfer);
    if (collectives_only && roll <= 2) {  // one instance on the second communicator
      for (int32_t m : b.p.comms[part].ranks) {
        Op c;
        c.kind = OpKind::kCollective;
        c.set_comm(part);
        ops_of[m].push_back(b.add(c, stream_of[m][pick(0, streams - 1)], m == r ? local : std::vector<OpId>{},
                                  effects(m), {}));
      }
    } else if (roll <= 1 && ranks > 1) {  // a send and its recv
      int peer = pick(0, ranks - 2);
      if (peer >= r) ++peer;
      const OpId send = b.p2p_v(true, stream_of[r][pick(0, streams - 1)], peer, local, effects(r));
      ops_of[r].push_back(send);
      const OpId recv = b.p2p_v(false, stream_of[peer][pick(0, streams - 1)], r, {}, effects(peer));
      ops_of[peer].push_back(recv);
    } else if (roll == 2) {  // one collective instance
      for (int m = 0; m < ranks; ++m) {
        Op c;
        c.kind = OpKind::kCollective;
        c.set_comm(world);
        ops_of[m].push_back(b.add(c, stream_of[m][pick(0, streams - 1)], m == r ? local : std::vector<OpId>{},
                                  effects(m), {}));
      }
    } else {
      ops_of[r].push_back(b.add(Op{}, stream_of[r][pick(0, streams - 1)], local, effects(r), transfer));
    }
  }
  b.p.match_channels();
  return b.p;
}

TEST_CASE("the per-rank projection gives the same clocks as whole-program vector clocks", "[graph]") {
  std::mt19937 rng(77);
  int joins_only = 0;
  for (int round = 0; round < 120; ++round) {
    // Odd rounds: only collectives connect ranks (the projector's join order, no searches).
    const Program p = random_multi_stream_program(rng, 2 + round / 2 % 4, 1 + round % 3, 40 + 5 * (round / 2), round % 2 == 1);
    REQUIRE(p.validate().empty());
    HappensBefore hb(p);
    REQUIRE(hb.acyclic());
    // The searches, and the fallback to the whole-program pass (budget 0).
    for (double budget : {0.5, 0.0}) {
      RankProjector projector(hb, budget);
      for (int32_t r = 0; r < p.num_ranks; ++r) {
        const RankClocks clocks(hb, r);
        const RankOrder order = projector.project(r);
        REQUIRE(order.streams() == clocks.streams());
        for (int32_t i = 0; i < order.size(); ++i)
          for (int k = 0; k < order.width(); ++k) {
            INFO("program:\n" << describe(p) << "rank " << r << " event " << order.events()[i] << " stream " << k);
            REQUIRE(order.prefix(i, k) == clocks.prefix(order.events()[i], k));
          }
        // One event's clock without the projection (the worst case's one-stream path).
        if (budget > 0)
          for (int32_t i = 0; i < order.size(); ++i) {
            const int32_t e = order.events()[i];
            const std::vector<int32_t> one = projector.clock_of(r, e);
            REQUIRE(static_cast<int>(one.size()) == order.width());
            for (int k = 0; k < order.width(); ++k) {
              INFO("program:\n" << describe(p) << "rank " << r << " event " << e << " stream " << k);
              REQUIRE(one[k] == clocks.prefix(e, k));
            }
          }
      }
      CHECK(projector.fallbacks() == (budget > 0 ? 0 : p.num_ranks));
      joins_only += projector.joins_only();
    }
  }
  CHECK(joins_only > 100);  // most odd rounds, with both budgets
}

/// Fast path and forced minimum cut on one program: the same bytes and the same witness (both
/// return the smallest maximum closure). Returns the ranks answered by the chain scan although
/// their effects lie on several streams.
int compare_with_min_cut(const Program& p) {
  const WorstCaseMemory fast = worst_case_memory(p);
  const WorstCaseMemory cut = worst_case_memory(p, true);
  int chains = 0;
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    INFO("program:\n" << describe(p) << "rank " << r);
    REQUIRE(fast.bytes_per_rank[r] == cut.bytes_per_rank[r]);
    REQUIRE(fast.live_buffers[r] == cut.live_buffers[r]);
    REQUIRE(fast.running_ops[r] == cut.running_ops[r]);
    chains += fast.used_min_cut[r] && !fast.ran_min_cut[r];
  }
  return chains;
}

TEST_CASE("the fast paths equal the minimum cut on 300 random multi-stream programs", "[graph]") {
  std::mt19937 rng(4242);
  int chains = 0;
  for (int round = 0; round < 300; ++round) {
    const int streams = 1 + round % 3;
    const Program p = random_multi_stream_program(rng, 2 + round % 3, streams, 10 + round % 50, round % 4 == 3);
    REQUIRE(p.validate().empty());
    REQUIRE(HappensBefore(p).acyclic());
    chains += compare_with_min_cut(p);
  }
  CHECK(chains > 10);  // several-stream ranks that the chain scan answered
}

TEST_CASE("effects on two streams serialised through another rank are scanned, not cut", "[graph]") {
  // Rank 0 allocates x_i on its compute stream and sends to rank 1, which sends back to rank
  // 0's comm stream; there an op frees x_i and holds y_i, and the next compute op waits for it.
  // Only the round trip through rank 1 orders x_i's allocation before y_i's, so the effects are
  // a chain only in the projected order.
  for (bool round_trip : {false, true}) {
    CAPTURE(round_trip);
    Builder b(2, Semantics::kEager);
    const int32_t compute = b.stream(0, "compute"), comm = b.stream(0, "comm");
    const int32_t s1 = b.stream(1);
    const int steps = 6;
    OpId previous = kNoOp;
    for (int i = 0; i < steps; ++i) {
      const int32_t x = b.buffer(0, 10 + i), y = b.buffer(0, 100);
      const OpId alloc_x = previous == kNoOp ? b.compute(compute, {}, {b.alloc(x)})
                                             : b.compute(compute, {previous}, {b.alloc(x)});
      b.p2p(true, compute, 1, {alloc_x});
      const OpId there = b.p2p(false, s1, 0);
      const OpId work = b.compute(s1, {there});
      b.p2p(true, s1, 0, {work});
      const OpId back = round_trip ? b.p2p(false, comm, 1) : kNoOp;
      std::vector<OpId> wait = round_trip ? std::vector<OpId>{back} : std::vector<OpId>{};
      previous = b.add(Op{}, comm, wait, {b.free(x), b.alloc(y), b.free(y, true)}, {});
      if (!round_trip) b.p2p(false, comm, 1);
    }
    const Program& p = b.done();
    REQUIRE(HappensBefore(p).acyclic());
    compare_with_min_cut(p);
    const WorstCaseMemory w = worst_case_memory(p);
    CHECK(w.used_min_cut[0] == 1);
    CHECK(w.ran_min_cut[0] == (round_trip ? 0 : 1));
    // y_i's op frees x_i at its end and x_{i+1} waits for that op, so the worst is the last x
    // with its y (15 + 100 bytes) either way; only how it is found differs.
    CHECK(w.bytes_per_rank[0] == 115);
    CHECK(w.live_buffers[0].size() == 2);
  }
}

TEST_CASE("on a 1F1B shape with comm streams the fast path equals the minimum cut", "[graph]") {
  // Activations on the compute stream, P2P ops on a comm stream with no effects: the scan
  // applies on every rank and its witness (running comm ops included) is the cut's.
  const int ranks = 4, microbatches = 12;
  Builder b(ranks, Semantics::kEager);
  std::vector<int32_t> compute(ranks), comm(ranks);
  for (int r = 0; r < ranks; ++r) {
    compute[r] = b.stream(r, "compute");
    comm[r] = b.stream(r, "comm");
  }
  std::vector<std::vector<OpId>> fwd_send(ranks, std::vector<OpId>(microbatches, kNoOp)), bwd_send = fwd_send;
  std::vector<std::vector<int32_t>> act(ranks);
  for (int r = 0; r < ranks; ++r)
    for (int m = 0; m < microbatches; ++m) act[r].push_back(b.buffer(r, 1000));
  // Ranks advance in lock step: each round, every rank does its next 1F1B step.
  std::vector<std::vector<std::pair<char, int>>> order(ranks);
  for (int r = 0; r < ranks; ++r) {
    const int warm = std::min(ranks - r - 1, microbatches);
    int f = 0, k = 0;
    for (; f < warm; ++f) order[r].emplace_back('F', f);
    while (f < microbatches) order[r].emplace_back('F', f++), order[r].emplace_back('B', k++);
    while (k < microbatches) order[r].emplace_back('B', k++);
  }
  std::vector<size_t> next(ranks, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      if (next[r] == order[r].size()) continue;
      const auto [kind, m] = order[r][next[r]];
      if (kind == 'F') {
        if (r > 0 && fwd_send[r - 1][m] == kNoOp) continue;
        std::vector<OpId> in;
        if (r > 0) in.push_back(b.p2p(false, comm[r], r - 1));
        const OpId f = b.add(Op{}, compute[r], in, {b.alloc(act[r][m])}, {});
        fwd_send[r][m] = r + 1 < ranks ? b.p2p(true, comm[r], r + 1, {f}) : f;
      } else {
        if (r + 1 < ranks && bwd_send[r + 1][m] == kNoOp) continue;
        std::vector<OpId> in;
        if (r + 1 < ranks) in.push_back(b.p2p(false, comm[r], r + 1));
        const OpId bw = b.add(Op{}, compute[r], in, {b.free(act[r][m])}, {});
        bwd_send[r][m] = r > 0 ? b.p2p(true, comm[r], r - 1, {bw}) : bw;
      }
      ++next[r];
      progress = true;
    }
  }
  const Program& p = b.done();
  REQUIRE(HappensBefore(p).acyclic());
  compare_with_min_cut(p);
  const WorstCaseMemory w = worst_case_memory(p);
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    CHECK(w.used_min_cut[r] == 0);
    CHECK(w.bytes_per_rank[r] == 1000 * (ranks - r));
  }
}

TEST_CASE("on every named schedule lowered to SEND/RECV the fast path equals the minimum cut", "[graph]") {
  // Real multi-stream programs: a comm stream per rank under each P2P semantics, and each
  // policy's SEND/RECV placement; every rank's bytes and witness (running comm ops included).
  int programs = 0;
  for (const std::string& name : schedule_names()) {
    std::string why;
    const std::optional<Generated> g = generate(GenOptions{name, 4, 8, {}, {}, false}, &why);
    REQUIRE(g);
    for (LowerPolicy policy : {LowerPolicy::kPyTorch, LowerPolicy::kDeferred}) {
      auto lowered = lower_comms(g->actions, g->stage_to_rank, policy, &why, g->pipeline_starts);
      if (!lowered) continue;  // PyTorch's placement is malformed on some schedules (docs/facts/p2p-semantics.md)
      PipelineSpec spec = to_pipeline_spec(*g);
      spec.pipeline_starts = g->pipeline_starts;
      spec.actions = std::move(*lowered);
      for (auto kind : {Semantics::kEager, Semantics::kRendezvous}) {
        spec.p2p.semantics = Semantics{kind, 0};
        Program p = build_program(spec, BlockingModel::kCommStream).program;
        if (!HappensBefore(p).acyclic()) continue;  // a deadlock: no worst case to compare
        CAPTURE(name, static_cast<int>(policy), static_cast<int>(kind));
        compare_with_min_cut(p);
        ++programs;
      }
    }
  }
  CHECK(programs >= 20);
}

}  // namespace
TEST_CASE("reserved memory is each caching-allocator pool at its own peak, summed", "[sim]") {
  // Rank 0: A (compute stream, 0-1 s) holds a 4 GiB buffer of the compute pool; B (a side stream,
  // 1-2 s, after A) holds 3 GiB of the reduce-scatter pool. Live bytes peak at 4 GiB, but the
  // side pool keeps its 3 GiB block once freed and the compute pool its 4 GiB, so PyTorch's
  // caching allocator has reserved 7 GiB (docs/facts/activation-memory.md#reserved-memory).
  constexpr int64_t kGiB = int64_t{1} << 30;
  Builder b(1);
  b.p.static_bytes_per_rank = {kGiB};
  const int32_t compute = b.stream(0), side = b.stream(0, "reduce_scatter");
  const int32_t x = b.buffer(0, 4 * kGiB), y = b.buffer(0, 3 * kGiB);
  b.p.buffers[y].pool = kPoolReduceScatter;
  const OpId a = b.compute(compute, {}, {b.alloc(x), b.free(x)});
  b.compute(side, {a}, {b.alloc(y), b.free(y)});
  const Program& p = b.done();
  const ExecutionResult ex = execute(p);
  REQUIRE(ex.completed);
  const Timeline t = simulate(p, ex.order);
  CHECK(t.peak_bytes_per_rank == std::vector<int64_t>{5 * kGiB});
  CHECK(t.reserved_bytes_per_rank == std::vector<int64_t>{8 * kGiB});

  // The same buffers in one pool: the allocator reuses A's block for B, reserved = peak.
  Program one = p;
  one.buffers[y].pool = kPoolCompute;
  CHECK(simulate(one, ex.order).reserved_bytes_per_rank == std::vector<int64_t>{5 * kGiB});

  // A pool index past the known pools is refused by validate().
  one.buffers[y].pool = kNumMemPools;
  CHECK(one.validate() == fmt::format("buffer {} names pool {}", y, int{kNumMemPools}));
}

TEST_CASE("a reserve hold raises its pool's reserve and never the live peak", "[sim]") {
  // Rank 0, one stream: A (0-1 s) holds a 6 GiB transient, then B (1-2 s) two 4 GiB buffers.
  // A block of 2 GiB that A frees is held (too small for B's, the loss region of
  // docs/facts/activation-memory.md#the-loss-region) from A's end to B's end: B's 8 GiB are
  // live over 1 GiB static (peak 9 GiB, as without the hold), and the compute pool reserves
  // 9 + 2 = 11 GiB. A hold while the pool is below its peak leaves the reserve alone.
  constexpr int64_t kGiB = int64_t{1} << 30;
  Builder b(1);
  b.p.static_bytes_per_rank = {kGiB};
  const int32_t s = b.stream(0);
  const int32_t x = b.buffer(0, 6 * kGiB), y = b.buffer(0, 8 * kGiB);
  const OpId a = b.compute(s, {}, {b.alloc(x), b.free(x)});
  const OpId c = b.compute(s, {a}, {b.alloc(y), b.free(y)});
  Program p = b.done();
  p.reserve_holds.push_back(ReserveHold{0, 2 * kGiB, a, c, true, true, kPoolCompute});
  REQUIRE(p.validate().empty());
  const ExecutionResult ex = execute(p);
  REQUIRE(ex.completed);
  const Timeline t = simulate(p, ex.order);
  CHECK(t.peak_bytes_per_rank == std::vector<int64_t>{9 * kGiB});
  CHECK(t.reserved_bytes_per_rank == std::vector<int64_t>{11 * kGiB});
  // Held during A only (A's start to A's end): A's 7 GiB live + 2 GiB held < B's 9 GiB.
  Program early = p;
  early.reserve_holds[0] = ReserveHold{0, 2 * kGiB, a, a, false, true, kPoolCompute};
  CHECK(simulate(early, ex.order).reserved_bytes_per_rank == std::vector<int64_t>{9 * kGiB});
  // A hold naming an op of another rank, or no op, is refused.
  early.reserve_holds[0].to = kNoOp;
  CHECK(early.validate() == "reserve hold 0 names a bad pool, size or op");
}

}  // namespace sc
