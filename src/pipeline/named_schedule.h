// Resolving a named schedule of a spec (`schedule: {name: 1f1b}`) into action lists.
#pragma once

#include <vector>

#include "spec/pipeline_spec.h"
#include "support/diagnostics.h"

namespace sc {

/// Peak memory of verify per (stage, microbatch) pair of a named schedule, bytes, in the worst
/// case of its lowering: measured 266 MB peak RSS for zb-h1 at 4,096 ranks x 48 microbatches
/// with its sends and receives lowered (`--lower pytorch`, 7 ops per pair, 1,353 bytes per pair;
/// 150 MB, 766 bytes per pair, with implicit transfers); see bench/README.md.
inline constexpr double kNamedBytesPerPair = 1400;
/// Memory one verify of a named schedule may take, bytes (4 GiB, as for FSDP specs).
inline constexpr double kNamedMemoryBudgetBytes = 4.0 * (int64_t{1} << 30);
/// Most (stage, microbatch) pairs a named schedule may have: the budget over the measured bytes
/// per pair (about 3.07 million).
inline constexpr double kMaxNamedPairs = kNamedMemoryBudgetBytes / kNamedBytesPerPair;

/// When spec.named is set, generates the schedule (src/pipeline/generators.h) for spec.ranks,
/// spec.microbatches and the requested chunks (or spec.stages / spec.ranks when the spec gives
/// stages), and fills actions, stages, stage_to_rank, placement and pipeline_starts. A declared
/// placement must equal the schedule's. Cost and memory values given once (the same for every
/// stage) are repeated for the schedule's stage count; per-stage lists must have one entry per
/// generated stage. A shape the schedule's reference rejects is an error at the `name` value.
/// A schedule with more than kMaxNamedPairs (stage, microbatch) pairs is an error at the `name` value, before
/// anything is generated. Does nothing when spec.named is unset. Returns false after adding
/// errors to `diags`.
bool resolve_named_schedule(PipelineSpec& spec, Diagnostics& diags);

/// Gives `v` `n` entries: unchanged when it has n already, or when `allow_empty` and it is
/// empty; else repeated from its one value when all its entries are equal. False (v unchanged)
/// when its entries differ: a per-stage list written for another stage count.
template <typename T>
bool resize_uniform(std::vector<T>& v, size_t n, bool allow_empty = false) {
  if (v.size() == n || (allow_empty && v.empty())) return true;
  if (v.empty()) return false;
  for (const T& x : v)
    if (x != v.front()) return false;
  v.assign(n, v.front());
  return true;
}

}  // namespace sc
