// Closed-form lower bounds on the span of a pipeline schedule under a memory limit (one stage per
// rank), and the Zero Bubble paper's schedule heuristic; both used by synthesis, neither needs Z3.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sc {

/// One pipeline of p stages, stage s alone on its rank, in whole time units and bytes.
/// Shapes: every vector has p entries, indexed by stage in pipeline order (stage 0 runs the first
/// F). With a full backward, `i` holds B's cost and `w`, `wgrad` are all 0.
/// Memory model (verify's and synthesis'): F allocates act[s] at its start; I frees act[s] and
/// allocates wgrad[s] at its end; W frees wgrad[s] at its end; `cap[s]` = limit - params of the
/// rank, or nullopt when there is no limit.
struct ChainShape {
  int32_t m = 0;                          ///< microbatches
  std::vector<int64_t> f, i, w;           ///< per-op durations, time units (> 0 for f, i)
  int64_t comm = 0;                       ///< P2P time between adjacent stages, time units
  std::vector<int64_t> act, wgrad;        ///< M_B and M_W per stage, bytes (>= 0)
  std::vector<std::optional<int64_t>> cap;  ///< bytes for activations and gradients per stage
};

/// The three memory-aware bounds and where each is attained.
/// Every value is a lower bound on the span of every schedule within the limit (and so on the
/// makespan); none assumes the microbatch order per stage that the solver's symmetry breaking
/// imposes, so they bound verify's model too.
struct ClosedFormBounds {
  bool feasible = true;        ///< false: no schedule fits the limit (proven by B1 or B2)
  int32_t infeasible_stage = -1;
  std::string why;             ///< for an infeasible limit: the stage and the reason
  int64_t b1 = 0, b2 = 0, b3 = 0;  ///< the largest value of each over the stages
  std::string b1_at, b2_at, b3_at;  ///< "stage 3", "stage 0 seen from stage 7"
  /// max(b1, b2, b3)
  int64_t value() const;
  /// "B3 (stage 0 seen from stage 7)": the bound that gives value().
  std::string source() const;
};

/// Computes B1, B2 and B3 of `shape` (issue 14; derivations in synth_bounds.cc). O(p·m² + p²).
/// Errors: none; a shape with m < 1 or empty vectors gives feasible bounds of 0.
ClosedFormBounds closed_form_bounds(const ChainShape& shape);

/// The Zero Bubble paper's heuristic (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024,
/// §3.1 "Heuristic algorithm"), for one stage per rank with a split backward:
///  1. warm-up: as many F's as memory allows before the first I, unless another F would delay the
///     first I (`allow_bubble_before_first_i` accepts a bubble there instead);
///  2. steady state: one F and one I in turn, with W's filling bubbles larger than T_W, a smaller
///     bubble also filled (`fill_small_bubbles`) when leaving it would make it the largest
///     accumulated bubble of any stage, and W's run to free memory when the limit is reached;
///  3. stage s always has started at least one more F than stage s + 1; when the difference is
///     two, `prioritise_i` lets stage s skip an F if that adds no bubble;
///  4. the remaining W's at the end.
/// The paper grid-searches the three switches; zb_heuristic_orders runs all eight.
/// Returns each stage's op order as (kind, microbatch) with kind 'F', 'I' or 'W', or nullopt when
/// the limit cannot hold the warm-up of one microbatch. Times are the shape's units.
struct ZbOrder {
  std::vector<std::vector<std::pair<char, int32_t>>> stages;
  int64_t span = 0;  ///< the heuristic's own estimate (verify judges the result)
  std::string name;  ///< "zb heuristic (…switches…)"
};
std::optional<ZbOrder> zb_heuristic(const ChainShape& shape, bool allow_bubble_before_first_i, bool prioritise_i,
                                    bool fill_small_bubbles);

}  // namespace sc
