// Untimed execution of a Program under its P2P semantics: completes, or deadlocks with a
// wait-for cycle and each rank's trace to where it is stuck.
#pragma once

#include <string>
#include <vector>

#include "check/finding.h"
#include "ir/program.h"
#include "sim/timeline.h"

namespace sc {

/// The result of running every stream as far as it can go.
/// `order` lists completed ops in a completion order that respects every constraint (stream
/// order, deps, P2P matching; a rendezvous pair appears send first, recv right after) — a
/// linear extension the timing simulation can follow. `done[id]` is 1 for completed ops.
/// When `completed` is false, `findings` holds one deadlock finding per independent hang.
struct ExecutionResult {
  bool completed = false;
  std::vector<OpId> order;
  std::vector<uint8_t> done;
  std::vector<Finding> findings;
  /// For the DOT picture: the ops of the first wait-for cycle (or chain), in wait order;
  /// `cycle_closed` is true for a cycle (the last waits for the first), false for a chain.
  std::vector<OpId> cycle;
  bool cycle_closed = false;
  /// One per stream that stopped before its end (empty when `completed`): the op it is stuck
  /// at, the op that op waits for (kNoOp when it waits for something no rank will ever do) and
  /// the reason in words ("waits for rank 1 to post 1RECV_F1 (rendezvous)"). Stream order.
  struct Stuck {
    int32_t stream = 0;
    OpId op = kNoOp;
    OpId waits_for = kNoOp;
    std::string why;
  };
  std::vector<Stuck> stuck;
};

/// Runs `program` with a worklist (each op is tried O(1 + notifications) times, so linear in
/// ops, deps and messages). The outcome is unique: enabling is monotone, so any maximal run
/// reaches the same set of completed ops. Semantics: kEager sends complete at once; kBuffered:N
/// sends complete while fewer than N messages of their channel are in flight; kRendezvous sends
/// complete together with their matched recv. A recv completes once its matched send has
/// (together, for rendezvous). An unmatched recv never completes; an unmatched send never
/// completes under rendezvous. A collective on a communicator completes together with every
/// member of its instance (the same sequence number on each member rank), once each is at the
/// head of its stream with its deps and its rank's previous collective on the communicator
/// done; when a member never issues that many collectives, the others hang there.
/// With `timing`, each op is also visited there as it completes (TimingWalk::visit, in the
/// order `order` lists): the timing of the run comes out of the same walk, where simulate()
/// would read the order and the ops a second time.
ExecutionResult execute(const Program& program, TimingWalk* timing = nullptr);

}  // namespace sc
