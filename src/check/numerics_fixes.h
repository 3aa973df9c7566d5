// A reducing-collective configuration with a numerics finding, with the figures of the usual fixes.
#pragma once

#include <vector>

#include "ir/program.h"
#include "numerics/analysis.h"

namespace sc {

/// What the numerics pass established for one configuration that has a finding: its analysis
/// with the usual fixes (fp32 reduction, tree, NVLS, pre/post divide, sum then divide; each with
/// its figures and bytes sent per element) and the collectives that share the configuration.
/// The report reads it to show the fixes next to the finding; time is the collectives' simulated
/// time scaled by each fix's byte ratio (bandwidth-bound collectives).
struct NumericsFixes {
  numerics::Analysis analysis;
  std::vector<OpId> ops;
};

}  // namespace sc
