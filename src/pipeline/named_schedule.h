// Resolving a named schedule of a spec (`schedule: {name: 1f1b}`) into action lists.
#pragma once

#include "spec/pipeline_spec.h"
#include "support/diagnostics.h"

namespace sc {

/// When spec.named is set, generates the schedule (src/pipeline/generators.h) for spec.ranks,
/// spec.microbatches and the requested chunks (or spec.stages / spec.ranks when the spec gives
/// stages), and fills actions, stages, stage_to_rank, placement and pipeline_starts. A declared
/// placement must equal the schedule's. Cost and memory values given once (the same for every
/// stage) are repeated for the schedule's stage count; per-stage lists must have one entry per
/// generated stage. A shape the schedule's reference rejects is an error at the `name` value.
/// Does nothing when spec.named is unset. Returns false after adding errors to `diags`.
bool resolve_named_schedule(PipelineSpec& spec, Diagnostics& diags);

}  // namespace sc
