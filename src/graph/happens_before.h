// The happens-before order of a Program's events, and per-rank clocks that answer "must a happen
// before b?" for events of one rank in O(1): whole-program (RankClocks) or projected (RankProjector).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/program.h"

namespace sc {

/// Events: op i starts at event 2i and ends at event 2i + 1; collective instance j (the k-th
/// collective of every member of one communicator) has a join event 2 * ops + j.
inline int32_t start_event(OpId op) { return 2 * op; }
inline int32_t end_event(OpId op) { return 2 * op + 1; }

/// The order, as rules (worst_case_memory's contract; DESIGN.md "Program IR"):
/// start(x) after end of the previous op on x's stream, end of each dep's src, and end of x's
/// rank's previous collective on the same communicator (NCCL runs a communicator's collectives
/// one after another); end(x) after start(x); a recv ends after its matched send starts; under
/// rendezvous a send ends after its recv starts; under buffered:N the k-th send of a channel
/// ends after the (k-N)-th recv ends; a collective ends after its instance's join, which is
/// after the start of every member (a collective completes when all members have reached it).
class HappensBefore {
 public:
  /// Builds the order and a topological order of its events, walking the streams (see
  /// topological_walk). O(ops + deps + members) time in practice; memory O(ops) for the order
  /// and the stream positions, O(streams + instances) besides.
  explicit HappensBefore(const Program& program);

  /// False when the rules form a cycle (a program that cannot execute to completion).
  bool acyclic() const { return acyclic_; }
  /// Events (including joins) in a topological order; all events when acyclic().
  const std::vector<int32_t>& topological_order() const { return topo_; }
  int32_t num_events() const { return num_events_; }
  /// The join event of a collective op's instance, or -1 (not a collective on a communicator).
  int32_t join_event(OpId op) const;

  /// Calls f(pred) for each required predecessor event of `event`. With kCrossStream, leaves out
  /// the two that the stream order itself provides (the previous op's end before a start, the
  /// op's start before its end): a walk along the stream has passed both.
  template <bool kCrossStream = false, typename F>
  void for_each_pred(int32_t event, F&& f) const;

  const Program& program() const { return p_; }
  /// Position of `op` in its stream.
  int32_t position(OpId op) const { return pos_[op]; }

 private:
  const Program& p_;
  int32_t num_ops_ = 0;
  int32_t num_events_ = 0;
  std::vector<int32_t> pos_;          ///< per op: index in its stream
  std::vector<int32_t> comm_base_;    ///< per communicator: its first instance index
  std::vector<int32_t> join_comm_;    ///< per instance: its communicator
  std::vector<OpId> slot_recv_;       ///< buffered:N: the recv whose end frees a send's slot
  std::vector<int32_t> topo_;
  bool acyclic_ = false;
  void topological_walk(int32_t instances);
};

/// Vector clocks over the streams of one rank: for every event e (of any rank) and each stream
/// k of the rank, the length of the prefix of that stream's events (start0, end0, start1, ...)
/// that happen before or at e. Exact for the order above. Size: events x streams of the rank.
class RankClocks {
 public:
  /// Computes the clocks in one pass over the topological order: O(events x streams + members
  /// x streams). Precondition: hb.acyclic().
  RankClocks(const HappensBefore& hb, int32_t rank);

  int32_t rank() const { return rank_; }
  /// Streams of the rank (Program::streams indices), in Program::rank_streams order.
  const std::vector<int32_t>& streams() const { return streams_; }
  /// The prefix length of the rank's k-th stream below or at `event`.
  int32_t prefix(int32_t event, int k) const { return c_[static_cast<size_t>(event) * width_ + k]; }
  /// Index k of a stream of the rank, or -1.
  int stream_index(int32_t stream) const;
  /// True when event `a` (of this rank) happens before or at event `b` in every execution.
  bool ordered(int32_t a, int32_t b) const;
  /// True when op `a` (of this rank) ends before op `b` starts in every execution.
  bool op_before(OpId a, OpId b) const { return ordered(end_event(a), start_event(b)); }

 private:
  const HappensBefore& hb_;
  int32_t rank_;
  int width_ = 0;
  std::vector<int32_t> streams_;
  std::vector<int32_t> local_;   ///< per global stream: its index k on this rank, or -1
  std::vector<int32_t> c_;
};

/// The order restricted to one rank's op events, with a clock per event over the rank's streams
/// (as RankClocks, but stored for the rank's own events only). Built by RankProjector.
class RankOrder {
 public:
  int32_t rank() const { return rank_; }
  /// Streams of the rank (Program::streams indices), in Program::rank_streams order.
  const std::vector<int32_t>& streams() const { return streams_; }
  int width() const { return static_cast<int>(streams_.size()); }
  /// The rank's op events in a topological order; "local index" below is a position here.
  const std::vector<int32_t>& events() const { return events_; }
  int32_t size() const { return static_cast<int32_t>(events_.size()); }
  /// Index k of a stream of the rank, or -1.
  int stream_index(int32_t stream) const;
  /// The local index of an event of the rank.
  int32_t local(int32_t event) const;
  /// The prefix length of the rank's k-th stream below or at the event with local index `i`
  /// (its events counted start0, end0, start1, ...; the event itself included).
  int32_t prefix(int32_t i, int k) const { return clocks_[static_cast<size_t>(i) * streams_.size() + k]; }
  /// The event at position j (0-based, start0 end0 start1 ...) of the rank's k-th stream.
  int32_t stream_event(int k, int32_t j) const;
  /// Number of events on the rank's k-th stream (2 x its ops).
  int32_t stream_length(int k) const { return static_cast<int32_t>(2 * stream_ops_[k]->size()); }
  /// True when event `a` happens before or at event `b` in every execution (both of the rank).
  bool ordered(int32_t a, int32_t b) const;

 private:
  friend class RankProjector;
  const HappensBefore* hb_ = nullptr;
  int32_t rank_ = 0;
  std::vector<int32_t> streams_;
  std::vector<const std::vector<OpId>*> stream_ops_;
  std::vector<std::vector<int32_t>> local_at_;  ///< per stream k, per position: local index
  std::vector<int32_t> events_;
  std::vector<int32_t> clocks_;                 ///< events_.size() x width
};

/// Projects the order on one rank at a time in time linear in the rank's events and the events
/// searched through other ranks, instead of RankClocks' pass over the whole program per rank.
/// Memory: per program O(events) once (topological positions, a visit stamp, events grouped
/// by rank); per rank O(its events x its streams).
///
/// How: the rank's events are visited in topological order; an event's clock is the maximum of
/// its predecessors' clocks. Predecessors on the rank are already known. For predecessors on
/// other ranks (a matched send, a collective's join, a transfer dep) the rank's events below
/// them are found by a backward search in decreasing topological position that stops at the
/// rank's events (their clocks cover what lies below) and prunes every event whose topological
/// position is below T = min over the rank's streams k of the position of the first event of k
/// not yet known to be below: such an event cannot lie above an unknown event of the rank,
/// since each stream is a chain of the topological order. Exact for any program; the search
/// stays local when the topological order is roughly a time order (Kahn's, here) and each
/// cross-rank edge comes from few ranks (P2P). A collective's join has every member's start
/// as a predecessor, so on programs with collectives over many ranks each search is as wide as
/// the group; once one rank's searches have visited more than events x its streams / 2, the
/// rank falls back to RankClocks' whole-program pass (so a rank never costs much more than
/// O(events x streams), the cost before this class; see the constructor).
/// When collectives are the only cross-rank edges (FSDP, ZeRO-3) there are no searches: the
/// rank's events below a member's start on another rank m can only come through joins that
/// m's own order puts below that start, and of each communicator the latest such join covers
/// the earlier ones (a member's collectives on one communicator are serialised). So each join
/// gets, once per program, its predecessor joins (the latest per communicator below each
/// member's start, deduplicated: O(collective ops x communicators per rank)), and per rank a
/// join's clock is the maximum of its predecessors' and of the rank's own member start:
/// O(the rank's events x its streams + joins x their predecessors x its streams) per rank.
class RankProjector {
 public:
  /// O(events); what only project() needs (events grouped by rank, the join order) is built on
  /// its first call. Precondition: hb.acyclic(). `budget_per_event`: a rank falls back to the
  /// whole-program pass once its searches have visited budget_per_event x events x its streams
  /// (plus 4096 when positive); 0 makes every rank take the fallback (tests compare the two).
  explicit RankProjector(const HappensBefore& hb, double budget_per_event = 0.5);
  /// The order on `rank`'s events.
  RankOrder project(int32_t rank);
  /// The clock of one event of `rank` without projecting the rank: for each of the rank's
  /// streams k (Program::rank_streams order), the prefix length of k's events (start0, end0,
  /// start1, ...) below or at `event`, as RankOrder::prefix gives it. One backward search from
  /// `event` with the class's pruning (every event of any rank at or above the topological
  /// position of the first event of the rank not yet known to be below), so it costs the events
  /// between that position and `event`, not the rank's events: the worst case calls it once per
  /// rank whose memory effects lie on one stream (the witness moment), instead of projecting.
  std::vector<int32_t> clock_of(int32_t rank, int32_t event);
  /// Events visited by the cross-rank searches so far (for benchmarks).
  int64_t searched() const { return searched_; }
  /// Ranks that fell back to the whole-program pass so far.
  int32_t fallbacks() const { return fallbacks_; }
  /// True when only collectives connect ranks, so projections use the join order (known once
  /// project() has been called).
  bool joins_only() const { return joins_only_; }

 private:
  /// Raises `mine` (the rank's clock of one event) with the rank's events below `sources`.
  void search(const RankOrder& order, const std::vector<int32_t>& sources, int32_t* mine);
  /// The backward search of search() and clock_of(): from `sources` in decreasing topological
  /// position, pruned below T = min over the rank's `streams` of the position of the first event
  /// not yet in `clock` (recomputed after each event of the rank). `found(e)` returns -1 for an
  /// event of another rank or a join (searched through), else raises `clock` and returns 0 to
  /// stop there or 1 to search on through it.
  template <typename Found>
  void search_down(const std::vector<int32_t>& streams, const int32_t* clock, const std::vector<int32_t>& sources,
                   Found&& found);
  /// Groups the events by rank and builds the join order, once (project()'s first call).
  void prepare_projection();
  /// When only collectives connect ranks: the order between joins (see the class comment).
  void build_join_order();
  /// The clocks of `order` (events and streams set) from the joins' clocks, without searches.
  void project_with_joins(RankOrder& order);

  const HappensBefore& hb_;
  double budget_per_event_;
  std::vector<int32_t> topo_pos_;     ///< per event: its position in hb.topological_order()
  std::vector<uint32_t> rank_first_;  ///< per rank: its range in rank_events_
  std::vector<int32_t> rank_events_;  ///< op events grouped by rank, topological order inside
  std::vector<uint32_t> seen_;        ///< per event: generation_ when visited by the search
  uint32_t generation_ = 0;
  std::vector<std::pair<int32_t, int32_t>> heap_;  ///< (topological position, event)
  std::vector<int32_t> cross_;
  int64_t searched_ = 0;
  bool prepared_ = false;
  int32_t fallbacks_ = 0;
  // Programs whose ranks meet only in collectives (joins_only_):
  bool joins_only_ = false;
  std::vector<int32_t> joins_;            ///< join events in topological order
  std::vector<int32_t> join_comm_;        ///< per instance: its communicator
  std::vector<int32_t> join_seq_;         ///< per instance: its position on the communicator
  std::vector<uint32_t> join_pred_first_; ///< per instance: its range in join_preds_
  std::vector<int32_t> join_preds_;       ///< instances whose joins lie below a member's start
  std::vector<int32_t> join_clocks_;      ///< per instance x the projected rank's streams
};

template <bool kCrossStream, typename F>
void HappensBefore::for_each_pred(int32_t e, F&& f) const {
  if (e >= 2 * num_ops_) {  // a join: every member's start
    const int32_t j = e - 2 * num_ops_;
    const int32_t c = join_comm_[j];
    const int32_t k = j - comm_base_[c];
    for (const auto& seqs : p_.comms[c].ops)
      if (k < static_cast<int32_t>(seqs.size())) f(start_event(seqs[k]));
    return;
  }
  const OpId x = e >> 1;
  const Op& o = p_.ops[x];
  if ((e & 1) == 0) {
    if (!kCrossStream && pos_[x] > 0) f(end_event(p_.streams[o.stream].ops[pos_[x] - 1]));
    for (const Dep* d = p_.deps_begin(x); d != p_.deps_end(x); ++d) f(end_event(d->src));
    if (o.kind == OpKind::kCollective && o.comm() >= 0 && o.seq() > 0) {
      const Communicator& c = p_.comms[o.comm()];
      f(end_event(c.ops[c.member_index(o.rank)][o.seq() - 1]));
    }
    return;
  }
  if (!kCrossStream) f(start_event(x));
  if (o.match() != kNoOp &&
      (o.kind == OpKind::kRecv || (o.kind == OpKind::kSend && p_.semantics.kind == Semantics::kRendezvous)))
    f(start_event(o.match()));
  if (!slot_recv_.empty() && slot_recv_[x] != kNoOp) f(end_event(slot_recv_[x]));
  const int32_t join = join_event(x);
  if (join >= 0) f(join);
}

}  // namespace sc
