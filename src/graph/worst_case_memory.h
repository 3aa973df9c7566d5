// Worst-case memory per rank over every execution the happens-before order allows.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/program.h"

namespace sc {

/// The worst case for each rank: the largest live bytes (including static bytes) at any
/// moment of any execution consistent with the happens-before order, and a witness.
/// `live_buffers[r]` lists the Program::buffers indices live at the witnessing moment;
/// `running_ops[r]` the ops of rank r started and not finished there.
struct WorstCaseMemory {
  std::vector<int64_t> bytes_per_rank;
  std::vector<std::vector<int32_t>> live_buffers;
  std::vector<std::vector<OpId>> running_ops;
  /// Per rank: 1 when its effects lie on several streams (a maximum-closure problem: solved by
  /// the minimum cut, or by the chain scan when its effects turn out totally ordered) or when
  /// the minimum cut was forced; 0 when they lie on one stream or there are none.
  std::vector<uint8_t> used_min_cut;
  /// Per rank: 1 when the minimum cut actually ran, 0 when the prefix scan answered (or the
  /// rank has no effects or was not computed).
  std::vector<uint8_t> ran_min_cut;
};

/// Computes WorstCaseMemory. Each op is a start event (its at-start effects) and an end event
/// (its at-end effects), ordered by HappensBefore's rules (graph/happens_before.h: stream order,
/// deps, P2P matching under the program's semantics, collectives joining their members and one
/// communicator's collectives in issue order).
/// A moment of an execution is a down-closed set of events, so the worst case for rank r is a
/// maximum-weight closure with weights = r's effects, on the order projected on r's events
/// (RankProjector: r's events x r's streams, whatever the other ranks do).
/// Fast path, exact: when the rank's events of nonzero weight are totally ordered (one stream,
/// or several streams serialised by event waits, deps or other ranks), every closure meets
/// them in a prefix and the maximum prefix sum is the answer. Otherwise a minimum s-t cut
/// (Picard 1976, "Maximal closure of a graph and applications to combinatorial problems";
/// Boost.Graph boykov_kolmogorov_max_flow) on the rank's events. `force_min_cut` disables the
/// fast path (tests compare the two). Both return the smallest maximum closure as witness.
/// Cost: O(events) for the order; a rank whose effects all lie on one stream (every rank of a
/// PyTorch comms CSV: effects on compute, SEND/RECV on comm) costs one pass over that stream
/// and one search for the witness's clock (RankProjector::clock_of), without its projection;
/// any other rank O(its events x its streams) and the events its cross-rank searches visit
/// (RankProjector), plus the cut where one is needed; memory per rank is sized by the rank's
/// own events.
/// On a program that does not execute to completion the result is meaningless (events past a
/// wait-for cycle are left out of the order), but the passes terminate and read only valid
/// indices: verify runs it beside the deadlock pass and keeps it only when every op completes.
WorstCaseMemory worst_case_memory(const Program& program, bool force_min_cut = false);

/// Which memory a worst case counts: the effects of `buffers` (indexed like Program::buffers,
/// 1 = counted; empty = every buffer), plus the static bytes when `with_static`.
struct MemoryView {
  std::vector<uint8_t> buffers;
  bool with_static = true;
};

/// worst_case_memory for several views at once (one result per view, in order); each rank's
/// projected happens-before order is built once and shared by the views. `live_buffers` lists
/// only the view's buffers. `only_ranks`: compute these ranks only (the others stay empty with
/// 0 bytes); all when null.
std::vector<WorstCaseMemory> worst_case_memory_views(const Program& program, const std::vector<MemoryView>& views,
                                                     bool force_min_cut = false,
                                                     const std::vector<int32_t>* only_ranks = nullptr);

}  // namespace sc
