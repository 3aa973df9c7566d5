#include "sim/timeline.h"
#include "support/huge_pages.h"

#include <algorithm>
#include <array>
#include <limits>

namespace sc {

TimingWalk::TimingWalk(const Program& p) : p_(p) {
  const size_t n = p.ops.size();
  reserve_huge(t_.ops, n);
  t_.ops.assign(n, OpTime{});
  stream_end_.assign(p.streams.size(), 0.0);
  placed_.assign(n, 0);
  // Per channel: end times of recvs in order (buffered sends wait for slot k - N to free).
  // Only buffered channels read them.
  buffered_ = p.semantics.kind == Semantics::kBuffered;
  recv_end_.resize(p.channels.size());
  sends_placed_.assign(p.channels.size(), 0);
  group_start_.assign(p.groups.size(), -1.0);
  const int32_t R = p.num_ranks;
  t_.busy_per_rank_s.assign(R, 0.0);
  t_.idle_per_rank_s.assign(R, 0.0);
  t_.first_start_per_rank_s.assign(R, std::numeric_limits<double>::infinity());
  t_.last_end_per_rank_s.assign(R, 0.0);
  events_.resize(R);
  // Only FSDP2's programs allocate outside the compute pool: others skip the buffer lookup.
  side_pools_ = std::any_of(p.buffers.begin(), p.buffers.end(), [](const Buffer& b) { return b.pool != kPoolCompute; });
  first_ = std::numeric_limits<double>::infinity();
}

double TimingWalk::deps_ready(OpId id, double r) const {
  for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d) {
    double e = t_.ops[d->src].end_s;
    if (d->kind == DepKind::kTransfer) e += p_.link.transfer_s(p_.link.message_bytes);
    r = std::max(r, e);
  }
  return r;
}

// A batched group is launched when its stream is free and every member's inputs are ready;
// all members are ready then, and the stream is free again when the last member ends.
double TimingWalk::ready_of(OpId id) {
  const Op& op = p_.ops[id];
  if (op.group() < 0) return deps_ready(id, stream_end_[op.stream]);
  double& g = group_start_[op.group()];
  if (g < 0) {
    g = stream_end_[op.stream];
    for (OpId m : p_.groups[op.group()]) g = deps_ready(m, g);
  }
  return g;
}

void TimingWalk::place(OpId id, double start, double end) {
  t_.ops[id] = OpTime{start, end};
  const Op& op = p_.ops[id];
  if (op.group() >= 0) {
    ready_of(id);  // fixes the group's start before its stream end moves
    stream_end_[op.stream] = std::max(stream_end_[op.stream], end);
  } else {
    stream_end_[op.stream] = end;
  }
  placed_[id] = 1;
}

void TimingWalk::visit(OpId id) {
  if (placed_[id]) {  // placed with its rendezvous partner or its collective's instance
    account(id);
    return;
  }
  const Program& p = p_;
  const Op& op = p.ops[id];
  double ready = ready_of(id);
  switch (op.kind) {
    case OpKind::kCollective:
      if (op.comm() >= 0) {
        // Every member starts when the last is ready (its stream, deps, its previous
        // collective on the communicator) and all end together.
        std::vector<OpId> members = p.instance(id);
        double start = 0, length = 0;
        for (OpId m : members) {
          if (m == kNoOp) continue;
          double r = ready_of(m);
          const Op& mo = p.ops[m];
          if (mo.seq() > 0) {
            const Communicator& c = p.comms[mo.comm()];
            r = std::max(r, t_.ops[c.ops[c.member_index(mo.rank)][mo.seq() - 1]].end_s);
          }
          start = std::max(start, r);
          length = std::max(length, mo.duration_s);
        }
        for (OpId m : members)
          if (m != kNoOp) place(m, start, start + length);
        break;
      }
      [[fallthrough]];
    case OpKind::kCompute:
    case OpKind::kMarker:
      place(id, ready, ready + op.duration_s);
      break;
    case OpKind::kSend: {
      double d = p.link.transfer_s(op.bytes);
      if (p.semantics.kind == Semantics::kRendezvous && op.match() != kNoOp) {
        double start = std::max(ready, ready_of(op.match()));
        place(id, start, start + d);
        place(op.match(), start, start + d);
        if (buffered_ && op.channel() >= 0) recv_end_[op.channel()].push_back(start + d);
      } else {
        double start = ready;
        if (buffered_ && op.channel() >= 0) {
          size_t k = sends_placed_[op.channel()];
          size_t nbuf = static_cast<size_t>(p.semantics.buffer);
          if (k >= nbuf && k - nbuf < recv_end_[op.channel()].size())
            start = std::max(start, recv_end_[op.channel()][k - nbuf]);
        }
        place(id, start, start + d);
      }
      if (op.channel() >= 0) ++sends_placed_[op.channel()];
      break;
    }
    case OpKind::kRecv: {
      // Eager or buffered (rendezvous recvs are placed with their send).
      double end = ready;
      if (op.match() != kNoOp) end = std::max(end, t_.ops[op.match()].end_s);
      place(id, ready, end);
      if (buffered_ && op.channel() >= 0) recv_end_[op.channel()].push_back(end);
      break;
    }
  }
  account(id);
}

Timeline simulate(const Program& p, const std::vector<OpId>& order) {
  TimingWalk walk(p);
  for (OpId id : order) walk.visit(id);
  return walk.finish();
}

Timeline timeline_of_times(const Program& p, const std::vector<OpId>& order, std::vector<OpTime> ops) {
  TimingWalk walk(p);
  walk.busy_from_times_ = true;
  walk.t_.ops = std::move(ops);
  walk.t_.ops.resize(p.ops.size());
  for (OpId id : order) walk.account(id);
  return walk.finish();
}

// The figures and the memory events of one op of the completion order, its times known.
// Busy time of a compute op: its duration_s (the prediction) or, with `busy_from_times_`,
// end - start. Memory along the timeline: frees before allocations at the same instant, except
// at an instant where only zero-time ops act: there they act in completion order (start before
// end), since a zero-time op's alloc and the free of the op after it share the instant (with
// all costs zero, frees first would predict a peak of 0 B); so the events are kept in the
// order the ops are accounted, and finish() sorts them stably.
void TimingWalk::account(OpId id) {
  const Op& op = p_.ops[id];
  const OpTime ot = t_.ops[id];
  any_ = true;
  first_ = std::min(first_, ot.start_s);
  last_ = std::max(last_, ot.end_s);
  if (op.kind == OpKind::kCompute) {
    t_.busy_per_rank_s[op.rank] += busy_from_times_ ? ot.end_s - ot.start_s : op.duration_s;
    t_.first_start_per_rank_s[op.rank] = std::min(t_.first_start_per_rank_s[op.rank], ot.start_s);
    t_.last_end_per_rank_s[op.rank] = std::max(t_.last_end_per_rank_s[op.rank], ot.end_s);
  }
  const MemEffect* m0 = p_.mem_begin(id);
  const MemEffect* m1 = p_.mem_end(id);
  if (m0 == m1) return;
  const bool zero = ot.end_s == ot.start_s;
  for (bool at_end : {false, true})
    for (const MemEffect* m = m0; m != m1; ++m)
      if (m->at_end == at_end) {
        const uint8_t pool = side_pools_ && m->buffer >= 0 ? p_.buffers[m->buffer].pool : uint8_t{kPoolCompute};
        events_[op.rank].push_back({at_end ? ot.end_s : ot.start_s, m->bytes, zero, pool});
      }
}

Timeline TimingWalk::finish() {
  const Program& p = p_;
  Timeline& t = t_;
  const int32_t R = p.num_ranks;
  auto& evs = events_;
  for (const ReserveHold& h : p.reserve_holds) {
    const OpTime& a = t.ops[h.from];
    const OpTime& b = t.ops[h.to];
    evs[h.rank].push_back({h.from_end ? a.end_s : a.start_s, h.bytes, a.end_s == a.start_s, h.pool, true});
    evs[h.rank].push_back({h.to_end ? b.end_s : b.start_s, -h.bytes, b.end_s == b.start_s, h.pool, true});
  }
  if (!any_) first_ = 0;
  t.makespan_s = last_ - first_;
  double busy = 0;
  for (int32_t r = 0; r < R; ++r) {
    if (t.first_start_per_rank_s[r] == std::numeric_limits<double>::infinity()) {
      t.first_start_per_rank_s[r] = 0;
      continue;
    }
    double s = t.last_end_per_rank_s[r] - t.first_start_per_rank_s[r];
    t.span_s = std::max(t.span_s, s);
    t.idle_per_rank_s[r] = s - t.busy_per_rank_s[r];
    busy += t.busy_per_rank_s[r];
  }
  // Busy time never exceeds ranks x span; the sum's rounding can, by an ulp, which printed "-0.0000".
  t.bubble_rate = (t.span_s > 0 && R > 0) ? std::max(0.0, 1.0 - busy / (R * t.span_s)) : 0.0;

  t.peak_bytes_per_rank.assign(R, 0);
  t.peak_time_per_rank_s.assign(R, 0.0);
  t.memory_curve.assign(R, {});
  t.reserved_bytes_per_rank.assign(R, 0);
  for (int32_t r = 0; r < R; ++r) {
    auto& e = evs[r];
    auto earlier = [](const MemEvent& a, const MemEvent& b) { return a.time < b.time; };
    // Usually already in time order (a rank's effects on one stream, in execution order): then
    // the O(n) check replaces the O(n log n) sort.
    if (!std::is_sorted(e.begin(), e.end(), earlier)) std::stable_sort(e.begin(), e.end(), earlier);
    for (size_t i = 0; i < e.size();) {
      size_t j = i;
      bool all_zero = true;
      for (; j < e.size() && e[j].time == e[i].time; ++j) all_zero = all_zero && e[j].zero_time;
      auto frees_first = [](const MemEvent& a, const MemEvent& b) { return a.delta < b.delta; };
      // Frees (negative) first; most instants hold one event, and a stable_sort call allocates.
      if (!all_zero && j - i > 1 && !std::is_sorted(e.begin() + i, e.begin() + j, frees_first))
        std::stable_sort(e.begin() + i, e.begin() + j, frees_first);
      i = j;
    }
    int64_t live = r < static_cast<int32_t>(p.static_bytes_per_rank.size()) ? p.static_bytes_per_rank[r] : 0;
    t.peak_bytes_per_rank[r] = live;
    t.memory_curve[r].push_back({0.0, live});
    std::array<int64_t, kNumMemPools> pool_live{}, pool_peak{};
    pool_live[kPoolCompute] = pool_peak[kPoolCompute] = live;
    for (const MemEvent& ev : e) {
      int64_t& pl = pool_live[ev.pool];
      pl += ev.delta;
      pool_peak[ev.pool] = std::max(pool_peak[ev.pool], pl);
      if (ev.reserve_only) continue;
      live += ev.delta;
      if (!t.memory_curve[r].empty() && t.memory_curve[r].back().first == ev.time)
        t.memory_curve[r].back().second = live;
      else
        t.memory_curve[r].push_back({ev.time, live});
      if (live > t.peak_bytes_per_rank[r]) {
        t.peak_bytes_per_rank[r] = live;
        t.peak_time_per_rank_s[r] = ev.time;
      }
    }
    for (int64_t b : pool_peak) t.reserved_bytes_per_rank[r] += b;
  }
  return std::move(t_);
}

}  // namespace sc
