// The executor of a build without CUDA: reports that it was not built.
#include "executor.h"

namespace sc::gpu {

bool cuda_executor_built() { return false; }

ExecOutcome execute_plan(const GpuPlan&, const ExecOptions&) {
  ExecOutcome o;
  o.error = {ExecFailure::kNotBuilt,
             "schedcheck was built without CUDA; rebuild with -DWITH_CUDA=ON on a machine with the CUDA toolkit"};
  return o;
}

}  // namespace sc::gpu
