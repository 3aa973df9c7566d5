// PyTorch's pipelining runtime passes that place FSDP actions in a compute-only schedule.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "spec/action.h"

namespace sc {

/// PyTorch's `_add_unshard_reshard(actions, max_active_stages)` (docs/facts/composed-runtime.md) on one rank's list:
/// walking its compute actions, at each let next_n be the next `max_active_stages` distinct
/// stages among the remaining compute actions (this one included); emit RESHARD for the active
/// stages not in next_n (ascending), UNSHARD for the stages in next_n not active (in the order
/// they come next), then the action; at the end RESHARD every active stage (ascending). Other
/// steps pass through. Each inserted step carries the location of the action it precedes (the
/// last step's for the final RESHARDs). O(steps x max_active_stages + steps x stages of the rank).
std::vector<Step> add_unshard_reshard(const std::vector<Step>& row, int32_t max_active_stages);

/// FSDP2 with `reshard_after_forward=True` inside a pipeline stage (torchtitan
/// `fsdp_reshard_after_forward = "always"` under PP; docs/facts/composed-runtime.md#reshard-after-forward-under-pp):
/// FSDP's own hooks gather a stage's parameters before each compute action that finds them
/// sharded, and its post-forward hook frees them after every forward, so each forward of a
/// microbatch gathers again; a backward leaves them gathered (the pipelining stage turns
/// reshard-after-backward off until the last backward). So: UNSHARD before a compute action of
/// a stage that is not gathered, RESHARD right after each plain F, and at the end RESHARD every
/// stage still gathered (ascending). An overlapped F;B pair keeps its stages gathered.
std::vector<Step> add_unshard_reshard_per_forward(const std::vector<Step>& row);

/// PyTorch's `_add_reduce_grad(actions, microbatches)` (docs/facts/composed-runtime.md): right after the
/// `microbatches`-th B or W of a stage, `<stage>REDUCE_GRAD` (an OVERLAP_F_B step counts its
/// backward part). Located at that action.
std::vector<Step> add_reduce_grad(const std::vector<Step>& row, int32_t microbatches);

/// True when `row` holds an action of one of `kinds`.
bool has_actions(const std::vector<Step>& row, std::initializer_list<ActionKind> kinds);

}  // namespace sc
