// Timed as-soon-as-possible prediction of a Program: op times, span, makespan, bubbles, memory.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/program.h"

namespace sc {

/// Predicted start and end of one op, in seconds from the first op's start.
struct OpTime {
  double start_s = 0;
  double end_s = 0;
};

/// A prediction. Definitions (issue "verify", docs/facts/pipeline-schedules.md):
/// span_s = max over ranks of (end of its last compute op - start of its first compute op);
/// makespan_s = last end - first start over all ops;
/// bubble_rate = 1 - (sum of busy time over ranks) / (ranks * span_s), busy = compute time;
/// idle_per_rank_s[r] = rank r's (last compute end - first compute start - busy).
/// With one stage per rank and equal work per stage this is the ZB paper's bubble rate
/// (span - m(T_F+T_B+T_W)) / span. Memory: live bytes per rank along the timeline (frees at a
/// time are applied before allocations at the same time), including static bytes.
struct Timeline {
  std::vector<OpTime> ops;
  double makespan_s = 0;
  double span_s = 0;
  double bubble_rate = 0;
  std::vector<double> busy_per_rank_s;
  std::vector<double> idle_per_rank_s;
  std::vector<double> first_start_per_rank_s;
  std::vector<double> last_end_per_rank_s;
  std::vector<int64_t> peak_bytes_per_rank;
  std::vector<double> peak_time_per_rank_s;
  /// Per rank, what PyTorch's caching allocator reserves: the sum over its pools (Buffer::pool)
  /// of each pool's own peak of live bytes (static bytes in the compute stream's pool). A pool
  /// keeps the blocks it has allocated, and no other stream reuses them, so each pool's reserve
  /// grows to its own peak whatever the others hold then
  /// (docs/facts/activation-memory.md#reserved-memory). A pool's live bytes here include the
  /// Program::reserve_holds of the pool (blocks kept but too small for what follows). Equal to
  /// peak_bytes_per_rank when every buffer is in one pool and no block is held; fragmentation a
  /// front-end does not state as a hold is not counted.
  std::vector<int64_t> reserved_bytes_per_rank;
  /// Per rank, (time, live bytes) after each change, in time order (for trace counters).
  std::vector<std::vector<std::pair<double, int64_t>>> memory_curve;
};

/// Simulates `program` following `order` (a completion order from execute(), which must have
/// completed). Rules: a compute op starts at max(end of the previous op on its stream, end of
/// each dep, plus the link time of `message_bytes` for a kTransfer dep) and lasts duration_s.
/// A P2P transfer occupies the streams of both ranks: under rendezvous it starts when both the
/// send and the recv are ready and both end latency + bytes / bandwidth later; under eager and
/// buffered the send runs from its ready time for the link time and the recv ends at
/// max(its ready time, the send's end). Markers take no time. A collective on a communicator
/// starts on every member at the latest ready time among them (each member's ready time also
/// waits for its previous collective on the communicator) and lasts its duration_s (set by the
/// front-end from its cost model); all members end together.
Timeline simulate(const Program& program, const std::vector<OpId>& order);

/// simulate() one op at a time, for a walk that produces the completion order itself (execute()
/// visits each op as it completes, so the order is read once, while its ops are in cache): call
/// visit(id) for every op of the order, in order, then finish(). The result equals simulate's
/// on the same order. `program` must outlive the walk.
class TimingWalk {
 public:
  explicit TimingWalk(const Program& program);
  /// Places `id` (and its rendezvous partner or collective instance, when first met) and adds
  /// it to the figures. Each op exactly once, in a completion order.
  void visit(OpId id);
  /// A hint that `id` will be visited soon: its time slot is asked for ahead (the slots are
  /// written in completion order, which moves between ranks).
  void prefetch(OpId id) const { __builtin_prefetch(&t_.ops[id], 1); }
  /// The timeline of the ops visited; the walk is spent.
  Timeline finish();

 private:
  double deps_ready(OpId id, double ready) const;
  double ready_of(OpId id);
  void place(OpId id, double start, double end);
  void account(OpId id);

  /// A memory change along the timeline (summarize's event).
  struct MemEvent {
    double time;
    int64_t delta;
    bool zero_time;
    uint8_t pool;
    bool reserve_only = false;  ///< a ReserveHold: counts toward its pool's reserve, not live bytes
  };
  friend Timeline timeline_of_times(const Program&, const std::vector<OpId>&, std::vector<OpTime>);

  const Program& p_;
  Timeline t_;
  bool busy_from_times_ = false;
  bool buffered_ = false;
  bool side_pools_ = false;
  std::vector<double> stream_end_;
  std::vector<uint8_t> placed_;
  std::vector<std::vector<double>> recv_end_;  ///< per channel: recv end times (buffered sends)
  std::vector<size_t> sends_placed_;
  std::vector<double> group_start_;
  std::vector<std::vector<MemEvent>> events_;  ///< per rank
  double first_ = 0, last_ = 0;
  bool any_ = false;
};

/// The figures and memory curve (as simulate defines them) of op times given from elsewhere,
/// e.g. measured on a GPU: `ops` holds one time per op of `program` in seconds (resized to
/// program.ops.size(), missing ops at 0, 0), `order` is a completion order of every op (as for
/// simulate; it orders memory events at an instant where only zero-time ops act). Busy time
/// of a compute op is its end - start here, not its duration_s. Never fails.
Timeline timeline_of_times(const Program& program, const std::vector<OpId>& order, std::vector<OpTime> ops);

}  // namespace sc
