// The pipeline front-end's own rules: what an action list must satisfy before it is a program.
#pragma once

#include <vector>

#include "check/finding.h"
#include "spec/pipeline_spec.h"

namespace sc {

/// Structure (a strict superset of PyTorch's `_validate_schedule`): every (stage, microbatch)
/// gets exactly one F and exactly one backward (a B, or an I and a W); no action twice; ids in
/// range; no microbatch with both B and I/W; W after I; every action on the rank its stage lives
/// on (a declared placement, or the one read off the lists, contradicted); P2P actions at most
/// once per (kind, stage, microbatch) and, for a skip connection (`0SEND_F0>2`), per other
/// stage, which must be in range and in the same pipeline; a collective (ALL_REDUCE@g, ...) over a group the spec
/// declares (or `world`) that holds its rank. Findings group up to `max_examples` examples each.
std::vector<Finding> check_structure(const PipelineSpec& spec, size_t max_examples = 8);

/// UNSHARD/RESHARD balance and residency, for stages whose rank's list names UNSHARD: a stage's
/// compute while its parameters are not unsharded, an UNSHARD of an unsharded stage, a RESHARD of
/// a sharded one, an UNSHARD never resharded by the end of the step; REDUCE_GRAD at most once
/// and after the stage's last backward.
std::vector<Finding> check_residency(const PipelineSpec& spec);

}  // namespace sc
