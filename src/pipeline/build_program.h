// Lowering a pipeline schedule (action lists) into the Program IR.
#pragma once

#include <vector>

#include "check/finding.h"
#include "ir/program.h"
#include "spec/pipeline_spec.h"

namespace sc {

/// The Program of a pipeline schedule plus the causality findings met while wiring inputs.
struct PipelineProgram {
  Program program;
  std::vector<Finding> causality;
};

/// Builds the Program of `spec` (whose action lists passed the structure pass or not: duplicate
/// actions keep their first occurrence as the producer).
///
/// Streams: every rank has a "compute" stream; with explicit SEND/RECV actions and
/// BlockingModel::kCommStream, also a "comm" stream that runs them in order (a pending send
/// blocks later communication, not compute). With kWholeRank everything runs on "compute".
/// Ops: one per step; an OVERLAP_F_B step is one op lasting T_F + T_B of its parts (docs/facts/pipeline-schedules.md,
/// DualPipe: exact when F&B = F + B). UNSHARD, RESHARD and REDUCE_GRAD are zero-cost markers.
/// Inputs (docs/facts/pipeline-schedules.md, ZB paper): F(s) needs F(s-1); I/B(s) needs F(s) and I/B(s+1) (only F(s)
/// on the last stage); W(s) needs I(s); SEND_F(s) needs F(s); SEND_B(s) needs I/B(s).
///  - producer on the same rank: must come earlier in the rank's list, or be the first
///    sub-action of the same OVERLAP_F_B step when the input is the second's (PyTorch's runtime
///    performs the sub-actions in order), else a causality finding; no extra edge (the stream
///    orders them). An (I;W) step of one microbatch holds no weight-gradient inputs past its end.
///  - producer on another rank, compute-only schedule: a kTransfer dep (the link time of
///    p2p.message_bytes is paid in the simulation).
///  - producer on another rank, explicit schedule: the input must arrive through this rank's
///    RECV of (stage, microbatch) earlier in the list; a kLocal dep on that RECV; a missing or
///    late RECV is a causality finding (CUDA does not wait on an event recorded later).
/// P2P: SEND_F(s) goes to the rank of s+1, RECV_F(s) comes from the rank of s-1, SEND_B(s) to
/// the rank of s-1, RECV_B(s) from the rank of s+1, each on channel (src, dst), bytes =
/// p2p.message_bytes. A P2P action with no peer stage (SEND_F of the last stage, RECV_F of
/// stage 0, ...) is a causality finding and gets no channel.
/// Memory (spec.memory): F(s,j) allocates activation_bytes[s] at its start; I(s,j) frees it and
/// allocates weight_grad_bytes[s] at its end; W(s,j) frees that at its end; B(s,j) frees the
/// activation at its end. Static bytes per rank = the params_bytes of its stages.
PipelineProgram build_program(const PipelineSpec& spec, BlockingModel blocking);
/// The same, emptying spec.actions as soon as every op is created (before the wiring, which
/// reads only the ops): the action lists (44 bytes a step) and the wired program's deps and
/// memory effects are then never held at once, the peak of verify on large schedules.
PipelineProgram build_program_releasing_actions(PipelineSpec& spec, BlockingModel blocking);

}  // namespace sc
