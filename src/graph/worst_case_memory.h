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
  std::vector<uint8_t> used_min_cut;  ///< per rank: 1 when solved by min cut, 0 by prefix scan
};

/// Computes WorstCaseMemory. Each op is a start event (its at-start effects) and an end event
/// (its at-end effects), ordered by HappensBefore's rules (graph/happens_before.h: stream order,
/// deps, P2P matching under the program's semantics, collectives joining their members and one
/// communicator's collectives in issue order).
/// A moment of an execution is a down-closed set of events, so the worst case for rank r is a
/// maximum-weight closure with weights = r's effects, solved exactly as a minimum s-t cut
/// (Picard 1976, "Maximal closure of a graph and applications to combinatorial problems";
/// Boost.Graph boykov_kolmogorov_max_flow) on the order projected on r's events by vector
/// clocks (r's events x r's streams edges, whatever the other ranks do).
/// Fast path, also exact: when all of a rank's memory effects lie on one stream they are
/// totally ordered, every closure meets them in a prefix, and the maximum prefix sum is the
/// answer. `force_min_cut` disables the fast path (tests compare the two).
/// Precondition: the order is acyclic (run it only on programs that execute to completion).
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
