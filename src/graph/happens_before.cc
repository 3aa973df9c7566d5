// The happens-before order (Kahn), whole-program rank clocks, and the per-rank projection.
#include "graph/happens_before.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>

namespace sc {

HappensBefore::HappensBefore(const Program& p) : p_(p), num_ops_(static_cast<int32_t>(p.ops.size())) {
  pos_.assign(num_ops_, 0);
  for (const Stream& s : p.streams)
    for (size_t i = 0; i < s.ops.size(); ++i) pos_[s.ops[i]] = static_cast<int32_t>(i);
  int32_t instances = 0;
  for (size_t c = 0; c < p.comms.size(); ++c) {
    comm_base_.push_back(instances);
    size_t longest = 0;
    for (const auto& seqs : p.comms[c].ops) longest = std::max(longest, seqs.size());
    instances += static_cast<int32_t>(longest);
    join_comm_.insert(join_comm_.end(), longest, static_cast<int32_t>(c));
  }
  if (p.semantics.kind == Semantics::kBuffered && p.semantics.buffer >= 1) {
    slot_recv_.assign(num_ops_, kNoOp);
    const size_t depth = static_cast<size_t>(p.semantics.buffer);
    for (const Channel& ch : p.channels)
      for (size_t k = depth; k < ch.sends.size() && k - depth < ch.recvs.size(); ++k)
        slot_recv_[ch.sends[k]] = ch.recvs[k - depth];
  }
  num_events_ = 2 * num_ops_ + instances;
  topological_walk(instances);
}

// A topological order without successor lists: each stream emits its events (start0, end0,
// start1, ...) in order, so an op event is done once its stream's cursor has passed it, and a
// stream whose next event has a pred not yet done waits on that pred (on the pred's stream, in a
// heap keyed by the pred's position there, or on a join's list). A join is done when its
// members' starts are, counted down as they are emitted. Each emitted event wakes its waiters.
// O(events + preds x wakes + waits x log), and O(streams + instances) memory besides topo_.
// Emits exactly the events Kahn's algorithm would: those whose ancestors are all emitted, so
// the program is acyclic iff every event is emitted.
void HappensBefore::topological_walk(int32_t instances) {
  const Program& p = p_;
  const size_t num_streams = p.streams.size();
  std::vector<int32_t> cursor(num_streams, 0);  // per stream: events emitted (2 per op)
  std::vector<int32_t> pending(static_cast<size_t>(instances), 0);
  for (size_t c = 0; c < p.comms.size(); ++c)
    for (const auto& seqs : p.comms[c].ops)
      for (size_t k = 0; k < seqs.size(); ++k) ++pending[comm_base_[c] + k];
  // Streams waiting on an op event of stream t: (position in t, waiting stream), a min-heap.
  using Wait = std::pair<int32_t, int32_t>;
  std::vector<std::vector<Wait>> on_stream(num_streams);
  std::vector<int32_t> join_head(static_cast<size_t>(instances), -1);  // streams waiting on a join
  std::vector<int32_t> join_next(num_streams, -1);
  std::vector<int32_t> runnable;
  runnable.reserve(num_streams);
  for (size_t s = 0; s < num_streams; ++s) runnable.push_back(static_cast<int32_t>(s));
  topo_.clear();
  topo_.reserve(num_events_);

  auto done = [&](int32_t e) {
    if (e >= 2 * num_ops_) return pending[e - 2 * num_ops_] == 0;
    const OpId x = e >> 1;
    return cursor[p.ops[x].stream] > 2 * pos_[x] + (e & 1);
  };
  auto emit_join = [&](int32_t j) {
    topo_.push_back(2 * num_ops_ + j);
    for (int32_t s = join_head[j]; s >= 0;) {
      const int32_t next = join_next[s];
      join_next[s] = -1;
      runnable.push_back(s);
      s = next;
    }
    join_head[j] = -1;
  };
  while (!runnable.empty()) {
    const int32_t s = runnable.back();
    runnable.pop_back();
    const std::vector<OpId>& ops = p.streams[s].ops;
    const int32_t total = 2 * static_cast<int32_t>(ops.size());
    while (cursor[s] < total) {
      // As the deadlock walk (execution.cc): the stream's op after next is asked for ahead.
      if (cursor[s] / 2 + 2 < total / 2) __builtin_prefetch(&p.ops[ops[cursor[s] / 2 + 2]]);
      const int32_t e = (cursor[s] & 1) == 0 ? start_event(ops[cursor[s] / 2]) : end_event(ops[cursor[s] / 2]);
      // The first pred not done; the stream order's own preds are done (the cursor passed them).
      int32_t blocker = -1;
      for_each_pred</*kCrossStream=*/true>(e, [&](int32_t pred) {
        if (blocker < 0 && !done(pred)) blocker = pred;
      });
      if (blocker >= 2 * num_ops_) {
        const int32_t j = blocker - 2 * num_ops_;
        join_next[s] = join_head[j];
        join_head[j] = s;
        break;
      }
      if (blocker >= 0) {
        const OpId b = blocker >> 1;
        std::vector<Wait>& heap = on_stream[p.ops[b].stream];
        heap.emplace_back(2 * pos_[b] + (blocker & 1), s);
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
        break;
      }
      topo_.push_back(e);
      ++cursor[s];
      std::vector<Wait>& heap = on_stream[s];
      while (!heap.empty() && heap.front().first < cursor[s]) {
        runnable.push_back(heap.front().second);
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        heap.pop_back();
      }
      if ((e & 1) == 0) {
        const int32_t join = join_event(e >> 1);
        if (join >= 0 && --pending[join - 2 * num_ops_] == 0) emit_join(join - 2 * num_ops_);
      }
    }
  }
  acyclic_ = static_cast<int32_t>(topo_.size()) == num_events_;
}

int32_t HappensBefore::join_event(OpId op) const {
  const Op& o = p_.ops[op];
  if (o.kind != OpKind::kCollective || o.comm() < 0 || o.seq() < 0) return -1;
  return 2 * num_ops_ + comm_base_[o.comm()] + o.seq();
}

RankClocks::RankClocks(const HappensBefore& hb, int32_t rank) : hb_(hb), rank_(rank) {
  const Program& p = hb.program();
  if (rank >= 0 && rank < static_cast<int32_t>(p.rank_streams.size())) streams_ = p.rank_streams[rank];
  width_ = static_cast<int>(streams_.size());
  local_.assign(p.streams.size(), -1);
  for (int k = 0; k < width_; ++k) local_[streams_[k]] = k;
  c_.assign(static_cast<size_t>(hb.num_events()) * width_, 0);
  if (width_ == 0) return;
  const int32_t ops2 = 2 * static_cast<int32_t>(p.ops.size());
  for (int32_t e : hb.topological_order()) {
    int32_t* mine = c_.data() + static_cast<size_t>(e) * width_;
    hb.for_each_pred(e, [&](int32_t pred) {
      const int32_t* theirs = c_.data() + static_cast<size_t>(pred) * width_;
      for (int k = 0; k < width_; ++k) mine[k] = std::max(mine[k], theirs[k]);
    });
    if (e < ops2) {
      const OpId op = e >> 1;
      const int k = local_[p.ops[op].stream];
      if (k >= 0) mine[k] = std::max(mine[k], 2 * hb.position(op) + (e & 1) + 1);
    }
  }
}

int RankClocks::stream_index(int32_t stream) const {
  return stream >= 0 && stream < static_cast<int32_t>(local_.size()) ? local_[stream] : -1;
}

bool RankClocks::ordered(int32_t a, int32_t b) const {
  const Program& p = hb_.program();
  const OpId op = a >> 1;
  const int k = local_[p.ops[op].stream];
  if (k < 0) return false;
  return prefix(b, k) >= 2 * hb_.position(op) + (a & 1) + 1;
}

int RankOrder::stream_index(int32_t stream) const {
  for (size_t k = 0; k < streams_.size(); ++k)
    if (streams_[k] == stream) return static_cast<int>(k);
  return -1;
}

int32_t RankOrder::local(int32_t event) const {
  const OpId op = event >> 1;
  const int k = stream_index(hb_->program().ops[op].stream);
  assert(k >= 0);
  return local_at_[k][2 * hb_->position(op) + (event & 1)];
}

int32_t RankOrder::stream_event(int k, int32_t j) const {
  const OpId op = (*stream_ops_[k])[j / 2];
  return (j & 1) == 0 ? start_event(op) : end_event(op);
}

bool RankOrder::ordered(int32_t a, int32_t b) const {
  const OpId op = a >> 1;
  const int k = stream_index(hb_->program().ops[op].stream);
  return k >= 0 && prefix(local(b), k) >= 2 * hb_->position(op) + (a & 1) + 1;
}

RankProjector::RankProjector(const HappensBefore& hb, double budget_per_event)
    : hb_(hb), budget_per_event_(budget_per_event) {
  const std::vector<int32_t>& topo = hb.topological_order();
  topo_pos_.assign(hb.num_events(), 0);
  for (size_t i = 0; i < topo.size(); ++i) topo_pos_[topo[i]] = static_cast<int32_t>(i);
  seen_.assign(hb.num_events(), 0);
}

void RankProjector::prepare_projection() {
  if (prepared_) return;
  prepared_ = true;
  const Program& p = hb_.program();
  const std::vector<int32_t>& topo = hb_.topological_order();
  const int32_t ops2 = 2 * static_cast<int32_t>(p.ops.size());
  const int32_t ranks = std::max<int32_t>(p.num_ranks, static_cast<int32_t>(p.rank_streams.size()));
  rank_first_.assign(static_cast<size_t>(ranks) + 1, 0);
  for (int32_t e : topo)
    if (e < ops2 && p.ops[e >> 1].rank >= 0 && p.ops[e >> 1].rank < ranks) ++rank_first_[p.ops[e >> 1].rank + 1];
  for (int32_t r = 0; r < ranks; ++r) rank_first_[r + 1] += rank_first_[r];
  rank_events_.resize(rank_first_.back());
  std::vector<uint32_t> fill(rank_first_.begin(), rank_first_.end() - 1);
  for (int32_t e : topo)
    if (e < ops2 && p.ops[e >> 1].rank >= 0 && p.ops[e >> 1].rank < ranks) rank_events_[fill[p.ops[e >> 1].rank]++] = e;
  build_join_order();
}

void RankProjector::build_join_order() {
  const Program& p = hb_.program();
  const int32_t ops2 = 2 * static_cast<int32_t>(p.ops.size());
  const int32_t instances = hb_.num_events() - ops2;
  if (instances <= 0) return;
  for (int32_t e = 0; e < ops2; ++e) {  // only joins may connect ranks
    bool cross = false;
    hb_.for_each_pred(e, [&](int32_t q) { cross |= q < ops2 && p.ops[q >> 1].rank != p.ops[e >> 1].rank; });
    if (cross) return;
  }
  join_comm_.assign(instances, -1);
  join_seq_.assign(instances, -1);
  for (OpId x = 0; x < static_cast<OpId>(p.ops.size()); ++x)
    if (const int32_t j = hb_.join_event(x); j >= 0) {
      join_comm_[j - ops2] = p.ops[x].comm();
      join_seq_[j - ops2] = p.ops[x].seq();
    }
  const int32_t ranks = static_cast<int32_t>(rank_first_.size()) - 1;
  std::vector<std::vector<int32_t>> rank_comms(ranks);
  for (int32_t c = 0; c < static_cast<int32_t>(p.comms.size()); ++c)
    for (int32_t r : p.comms[c].ranks)
      if (r >= 0 && r < ranks) rank_comms[r].push_back(c);
  std::vector<int32_t> slot(ops2, -1);  // op event -> its index in its rank's slice of rank_events_
  for (int32_t r = 0; r < ranks; ++r)
    for (uint32_t i = rank_first_[r]; i < rank_first_[r + 1]; ++i) slot[rank_events_[i]] = static_cast<int32_t>(i - rank_first_[r]);
  // Per rank, along its own order: the latest collective (seq) per communicator ended below each
  // event. At a member start those latest joins become predecessors of the member's join.
  std::vector<std::pair<int32_t, int32_t>> pairs;  // (join instance, predecessor join instance)
  std::vector<int32_t> latest;
  for (int32_t r = 0; r < ranks; ++r) {
    const std::vector<int32_t>& mine = rank_comms[r];
    const int width = static_cast<int>(mine.size());
    if (width == 0) continue;
    std::vector<int32_t> member(width);
    for (int c = 0; c < width; ++c) member[c] = p.comms[mine[c]].member_index(r);
    const uint32_t first = rank_first_[r], n = rank_first_[r + 1] - first;
    latest.assign(static_cast<size_t>(n) * width, -1);
    for (uint32_t i = 0; i < n; ++i) {
      const int32_t e = rank_events_[first + i];
      int32_t* row = latest.data() + static_cast<size_t>(i) * width;
      hb_.for_each_pred(e, [&](int32_t q) {
        if (q >= ops2) return;
        const int32_t* theirs = latest.data() + static_cast<size_t>(slot[q]) * width;
        for (int c = 0; c < width; ++c) row[c] = std::max(row[c], theirs[c]);
      });
      const Op& o = p.ops[e >> 1];
      const int32_t join = hb_.join_event(e >> 1);
      if (join < 0) continue;
      const int ci = static_cast<int>(std::find(mine.begin(), mine.end(), o.comm()) - mine.begin());
      if ((e & 1) == 1) {
        row[ci] = std::max(row[ci], o.seq());
        continue;
      }
      for (int c = 0; c < width; ++c)
        if (row[c] >= 0) pairs.emplace_back(join - ops2, hb_.join_event(p.comms[mine[c]].ops[member[c]][row[c]]) - ops2);
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  join_pred_first_.assign(static_cast<size_t>(instances) + 1, 0);
  for (const auto& [j, pred] : pairs) ++join_pred_first_[j + 1];
  for (int32_t j = 0; j < instances; ++j) join_pred_first_[j + 1] += join_pred_first_[j];
  join_preds_.reserve(pairs.size());
  for (const auto& [j, pred] : pairs) join_preds_.push_back(pred);
  for (int32_t e : hb_.topological_order())
    if (e >= ops2) joins_.push_back(e);
  joins_only_ = true;
}

void RankProjector::project_with_joins(RankOrder& order) {
  const Program& p = hb_.program();
  const int width = order.width();
  const int32_t ops2 = 2 * static_cast<int32_t>(p.ops.size());
  join_clocks_.assign(static_cast<size_t>(hb_.num_events() - ops2) * width, 0);
  auto raise = [width](int32_t* mine, const int32_t* theirs) {
    for (int k = 0; k < width; ++k) mine[k] = std::max(mine[k], theirs[k]);
  };
  size_t next_join = 0;
  for (int32_t i = 0; i < order.size(); ++i) {
    const int32_t e = order.events_[i];
    // The joins below e in topological order: each is the maximum of its predecessor joins and
    // of the rank's own member start.
    for (; next_join < joins_.size() && topo_pos_[joins_[next_join]] < topo_pos_[e]; ++next_join) {
      const int32_t j = joins_[next_join] - ops2;
      int32_t* out = join_clocks_.data() + static_cast<size_t>(j) * width;
      for (uint32_t k = join_pred_first_[j]; k < join_pred_first_[j + 1]; ++k)
        raise(out, join_clocks_.data() + static_cast<size_t>(join_preds_[k]) * width);
      const Communicator& c = p.comms[join_comm_[j]];
      const int32_t m = c.member_index(order.rank());
      if (m >= 0 && join_seq_[j] < static_cast<int32_t>(c.ops[m].size()))
        raise(out, order.clocks_.data() + static_cast<size_t>(order.local(start_event(c.ops[m][join_seq_[j]]))) * width);
    }
    int32_t* mine = order.clocks_.data() + static_cast<size_t>(i) * width;
    hb_.for_each_pred(e, [&](int32_t q) {
      raise(mine, q < ops2 ? order.clocks_.data() + static_cast<size_t>(order.local(q)) * width
                           : join_clocks_.data() + static_cast<size_t>(q - ops2) * width);
    });
    const int own = order.stream_index(p.ops[e >> 1].stream);
    mine[own] = std::max(mine[own], 2 * hb_.position(e >> 1) + (e & 1) + 1);
  }
}

RankOrder RankProjector::project(int32_t rank) {
  prepare_projection();
  const Program& p = hb_.program();
  RankOrder order;
  order.hb_ = &hb_;
  order.rank_ = rank;
  if (rank >= 0 && rank < static_cast<int32_t>(p.rank_streams.size())) order.streams_ = p.rank_streams[rank];
  const int width = order.width();
  for (int32_t s : order.streams_) {
    order.stream_ops_.push_back(&p.streams[s].ops);
    order.local_at_.emplace_back(2 * p.streams[s].ops.size(), -1);
  }
  if (rank < 0 || static_cast<size_t>(rank) + 1 >= rank_first_.size()) return order;
  order.events_.assign(rank_events_.begin() + rank_first_[rank], rank_events_.begin() + rank_first_[rank + 1]);
  const int32_t n = order.size();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t e = order.events_[i];
    const int k = order.stream_index(p.ops[e >> 1].stream);
    order.local_at_[k][2 * hb_.position(e >> 1) + (e & 1)] = i;
  }
  order.clocks_.assign(static_cast<size_t>(n) * width, 0);
  if (joins_only_ && budget_per_event_ > 0) {
    project_with_joins(order);
    return order;
  }
  const int32_t ops2 = 2 * static_cast<int32_t>(p.ops.size());
  // Past this many searched events the whole-program pass is cheaper (see the header).
  const int64_t budget =
      budget_per_event_ > 0
          ? static_cast<int64_t>(budget_per_event_ * static_cast<double>(hb_.num_events()) * std::max(width, 1)) + 4096
          : -1;
  const int64_t searched_before = searched_;
  for (int32_t i = 0; i < n; ++i) {
    if (searched_ - searched_before > budget) {
      const RankClocks whole(hb_, rank);
      for (int32_t j = 0; j < n; ++j)
        for (int k = 0; k < width; ++k) order.clocks_[static_cast<size_t>(j) * width + k] = whole.prefix(order.events_[j], k);
      ++fallbacks_;
      return order;
    }
    const int32_t e = order.events_[i];
    int32_t* mine = order.clocks_.data() + static_cast<size_t>(i) * width;
    cross_.clear();
    hb_.for_each_pred(e, [&](int32_t pred) {
      if (pred < ops2 && p.ops[pred >> 1].rank == rank) {
        const int32_t* theirs = order.clocks_.data() + static_cast<size_t>(order.local(pred)) * width;
        for (int k = 0; k < width; ++k) mine[k] = std::max(mine[k], theirs[k]);
      } else {
        cross_.push_back(pred);
      }
    });
    const OpId op = e >> 1;
    const int own = order.stream_index(p.ops[op].stream);
    mine[own] = std::max(mine[own], 2 * hb_.position(op) + (e & 1) + 1);
    if (!cross_.empty()) search(order, cross_, mine);
  }
  return order;
}

template <typename Found>
void RankProjector::search_down(const std::vector<int32_t>& streams, const int32_t* clock,
                                const std::vector<int32_t>& sources, Found&& found) {
  const Program& p = hb_.program();
  // T: below it no event can lie above an event of the rank not yet in `clock`.
  auto threshold = [&] {
    int32_t t = std::numeric_limits<int32_t>::max();
    for (size_t k = 0; k < streams.size(); ++k) {
      const std::vector<OpId>& ops = p.streams[streams[k]].ops;
      if (clock[k] < static_cast<int32_t>(2 * ops.size())) {
        const OpId op = ops[clock[k] / 2];
        t = std::min(t, topo_pos_[(clock[k] & 1) == 0 ? start_event(op) : end_event(op)]);
      }
    }
    return t;
  };
  int32_t t = threshold();
  if (++generation_ == 0) {  // wrapped: clear the stamps
    std::fill(seen_.begin(), seen_.end(), 0);
    generation_ = 1;
  }
  heap_.clear();
  auto visit = [&](int32_t e) {
    if (seen_[e] == generation_) return;
    seen_[e] = generation_;
    if (topo_pos_[e] < t) return;
    heap_.emplace_back(topo_pos_[e], e);
    std::push_heap(heap_.begin(), heap_.end());
  };
  for (int32_t e : sources) visit(e);
  while (!heap_.empty()) {
    const auto [pos, e] = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end());
    heap_.pop_back();
    if (pos < t) break;
    ++searched_;
    const int verdict = found(e);
    if (verdict >= 0) t = threshold();
    if (verdict != 0) hb_.for_each_pred(e, visit);
  }
}

std::vector<int32_t> RankProjector::clock_of(int32_t rank, int32_t event) {
  const Program& p = hb_.program();
  std::vector<int32_t> streams;
  if (rank >= 0 && rank < static_cast<int32_t>(p.rank_streams.size())) streams = p.rank_streams[rank];
  std::vector<int32_t> clock(streams.size(), 0);
  const int32_t ops2 = 2 * static_cast<int32_t>(p.ops.size());
  // Raises the clock with an event of the rank (then 1: search on through it, its clock is not
  // known here); -1 for events of other ranks and joins.
  auto note = [&](int32_t e) {
    if (e >= ops2 || p.ops[e >> 1].rank != rank) return -1;
    const auto k = std::find(streams.begin(), streams.end(), p.ops[e >> 1].stream) - streams.begin();
    if (k == static_cast<std::ptrdiff_t>(streams.size())) return -1;
    clock[k] = std::max(clock[k], 2 * hb_.position(e >> 1) + (e & 1) + 1);
    return 1;
  };
  if (note(event) < 0) return clock;
  // Every event of the rank below `event` lies at or above T while unknown, and so does every
  // path from it up to `event` (positions grow along paths): the search finds them all.
  std::vector<int32_t> preds;
  hb_.for_each_pred(event, [&](int32_t q) { preds.push_back(q); });
  search_down(streams, clock.data(), preds, note);
  return clock;
}

void RankProjector::search(const RankOrder& order, const std::vector<int32_t>& sources, int32_t* mine) {
  const Program& p = hb_.program();
  const int width = order.width();
  const int32_t ops2 = 2 * static_cast<int32_t>(p.ops.size());
  // An event of the rank: its clock covers what lies below it, so the search stops there.
  search_down(order.streams(), mine, sources, [&](int32_t e) {
    if (e >= ops2 || p.ops[e >> 1].rank != order.rank()) return -1;
    const int32_t* theirs = order.clocks_.data() + static_cast<size_t>(order.local(e)) * width;
    for (int k = 0; k < width; ++k) mine[k] = std::max(mine[k], theirs[k]);
    return 0;
  });
}

}  // namespace sc
