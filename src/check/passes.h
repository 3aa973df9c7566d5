// The property passes of verify, one function per pass (each in its own .cc file).
#pragma once

#include <vector>

#include "check/finding.h"
#include "graph/worst_case_memory.h"
#include "ir/program.h"
#include "sim/timeline.h"
#include "spec/pipeline_spec.h"

namespace sc {

/// Structure (a strict superset of PyTorch's `_validate_schedule`): every (stage, microbatch)
/// gets exactly one F and exactly one backward (a B, or an I and a W); no action twice; ids in
/// range; no microbatch with both B and I/W; W after I; every action on the rank its stage lives
/// on (a declared placement, or the one read off the lists, contradicted); P2P actions at most
/// once per (kind, stage, microbatch). Findings group up to `max_examples` examples each.
std::vector<Finding> check_structure(const PipelineSpec& spec, size_t max_examples = 8);

/// Channel identity (FACTS §2, NVIDIA/Megatron-LM#1450): on every channel the k-th send and the
/// k-th recv carry the same logical message (kind, source stage, destination stage,
/// microbatch, bytes); and the numbers of sends and recvs agree (DeepSpeed PR #5518: a receiver
/// expecting more messages than the sender sends hangs).
std::vector<Finding> check_channels(const Program& program);

/// UNSHARD/RESHARD balance and residency, for stages whose rank's list names UNSHARD: a stage's
/// compute while its parameters are not unsharded, an UNSHARD of an unsharded stage, a RESHARD of
/// a sharded one, an UNSHARD never resharded by the end of the step; REDUCE_GRAD at most once
/// and after the stage's last backward.
std::vector<Finding> check_residency(const PipelineSpec& spec);

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

}  // namespace sc
