// The property passes of verify, one function per pass (each in its own .cc file). They read only
// the Program IR: none knows which front-end built the program.
#pragma once

#include <vector>

#include "check/finding.h"
#include "check/numerics_fixes.h"
#include "graph/worst_case_memory.h"
#include "ir/program.h"
#include "sim/timeline.h"

namespace sc {

/// Channel identity (docs/facts/p2p-semantics.md, NVIDIA/Megatron-LM#1450): on every channel the k-th send and the
/// k-th recv carry the same logical message (kind, source stage, destination stage,
/// microbatch, bytes; for one of several tensors of an action, its position and name: Program::tensors);
/// and the numbers of sends and recvs agree (DeepSpeed PR #5518: a receiver
/// expecting more messages than the sender sends hangs).
std::vector<Finding> check_channels(const Program& program);

/// The residency findings of a program: for each op and each buffer it uses, the buffer's
/// allocation must happen before the op starts and its free after the op ends in every
/// execution (the order projected on each rank, RankProjector), else a finding with an
/// interleaving; a use of a buffer never allocated is a finding too; zero-byte buffers are
/// skipped. `only_ranks`: check these ranks only (all when null). Precondition: the program
/// executes to completion.
std::vector<Finding> check_buffer_residency(const Program& program, size_t max_findings = 8,
                                            const std::vector<int32_t>* only_ranks = nullptr);

/// Memory against the limit: per rank, the timeline peak and the worst case (either may be
/// absent) compared with `limit_bytes`; the finding names the witnessing moment and live buffers.
std::vector<Finding> check_memory(const Program& program, const Timeline* timeline,
                                  const WorstCaseMemory* worst, int64_t limit_bytes);

/// Collective agreement (docs/facts/fsdp-zero.md), one finding per communicator that diverges: the k-th
/// collective of every member must have the same identity (kind, bytes, dtype, label without
/// its "(...)" suffix); the majority is taken as intended and the others named as culprits. And
/// cross-communicator order: ranks sharing two communicators must interleave their collectives
/// on them the same way (one finding per pair of communicators).
std::vector<Finding> check_collectives(const Program& program);

/// Numerics (docs/facts/numerics.md): every reducing collective with its arithmetic (Op::arith) is emulated
/// bit-exactly (src/numerics) once per distinct configuration (element type, op, algorithm,
/// channels, divide factors, communicator size): worst relative error over the adversarial
/// family, systematic bias over gradient-like inputs, underflow, overflow and avg's rounded 1/N,
/// against Program::max_relative_error / max_bias or the documented defaults
/// (numerics::Tolerances). One finding per violated rule, located at the key that chose the
/// arithmetic, with the figures and a witness input.
/// Each configuration with a finding also comes back with the usual fixes (numerics::Analysis::
/// fixes) and the collectives that use it, for the report to show side by side.
struct NumericsPassResult {
  std::vector<Finding> findings;
  std::vector<NumericsFixes> fixes;   ///< one per configuration with a finding, in finding order
};
NumericsPassResult check_numerics(const Program& program);

}  // namespace sc
