// Lowering compute-only pipeline schedules to explicit SEND/RECV action lists.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "spec/action.h"

namespace sc {

/// Where RECVs go when communication is made explicit.
/// kPyTorch: exactly PyTorch's `_add_send_recv` (torch/distributed/pipelining/schedules.py):
///   ranks are visited round-robin in increasing order; a rank's next compute action is placed
///   once its input is available on the rank (the matching RECV, or the producer, already
///   placed there); after placing a compute action whose output crosses ranks, its SEND is
///   appended to the rank and the receiver's RECV is appended to the receiver's list at once.
/// kDeferred: each SEND right after its producer, each RECV as late as possible: just before its
///   consumer, but never after a communication op that comes later in one global order of all
///   transfers (a unit-time as-soon-as-possible simulation, ties broken by the rank-parity rule
///   of docs/facts/p2p-semantics.md, pytorch/pytorch#172668: the lower rank receives from a peer before it sends to
///   it). Every rank's communication then follows one global order, so the lists cannot
///   deadlock under any P2P semantics (lower_comms.cc gives the argument).
enum class LowerPolicy { kPyTorch, kDeferred };

/// Merges each I directly followed by the W of the same stage and microbatch into one B
/// (PyTorch's test `_merge_bw`), per rank. OVERLAP steps are kept as they are.
std::vector<std::vector<Step>> merge_bw(const std::vector<std::vector<Step>>& actions);

/// Adds SEND/RECV actions to compute-only action lists. `stage_to_rank` has one entry per
/// stage. A forward of stage s sends to stage s+1 when that stage lives on another rank; an I
/// or B of stage s sends to stage s-1 likewise (W and same-rank pairs send nothing). Inserted
/// actions carry the location of the compute action that caused them.
/// Returns nullopt with `*why` when the lists cannot be lowered (PyTorch's "malformed compute
/// schedule": no rank can make progress — the schedule deadlocks or violates causality; or a
/// list already holds SEND/RECV, or a collective, whose place among inserted SEND/RECV PyTorch's
/// lowering does not define). `pipeline_starts` (PipelineSpec::pipeline_starts) marks the
/// first stage of each independent pipeline: no data crosses from a pipeline's last stage to the
/// next pipeline's first.
/// What makes `actions` no input for lower_comms whatever the schedule's order (a SEND/RECV
/// already there, a collective, a stage the placement does not put on a rank), as lower_comms
/// words it; empty when none. An input problem, which `lower` and `verify --lower` both refuse
/// as one (exit 2); a schedule that cannot make progress is the lowering's own finding.
std::string lowering_input_problem(const std::vector<std::vector<Step>>& actions,
                                   const std::vector<int32_t>& stage_to_rank);

std::optional<std::vector<std::vector<Step>>> lower_comms(
    const std::vector<std::vector<Step>>& actions, const std::vector<int32_t>& stage_to_rank,
    LowerPolicy policy, std::string* why, const std::vector<int32_t>& pipeline_starts = {0});

}  // namespace sc
