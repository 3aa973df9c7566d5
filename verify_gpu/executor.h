// The GPU executor of a plan: runs it with CUDA (streams, events, spin kernels or cuBLAS GEMMs,
// device-to-device copies, one memory pool per rank) and measures it. Plain C++ interface: no
// CUDA header; without CUDA the executor reports that it was not built.
#pragma once

#include <string>

#include "compare.h"
#include "plan.h"
#include "support/expected.h"

namespace sc::gpu {

/// Options of one run. `device`: the CUDA device every rank runs on (ranks share it, one set of
/// streams and one memory pool per rank). `repeat`: timed runs (the median by makespan is
/// reported); `warmup`: untimed runs before them (the first run, which maps the pools' memory
/// and loads the kernels, is never timed). `kernels`: "spin" (a one-block kernel that spins on
/// the global nanosecond timer for the op's duration) or "gemm" (cuBLAS SGEMM-shaped bf16/fp32
/// GEMMs sized from the duration and the measured GEMM throughput). `watchdog_s`: a run not
/// finished after this many seconds is reported as a hang (the items that never ended) instead
/// of waited for.
struct ExecOptions {
  int32_t device = 0;
  int32_t repeat = 5;
  int32_t warmup = 2;
  std::string kernels = "spin";
  double watchdog_s = 60;
};

/// Why the executor could not produce a measurement.
enum class ExecFailure : uint8_t {
  kNotBuilt,   ///< schedcheck was built without CUDA
  kNoDevice,   ///< no CUDA driver or no GPU, no such device, or too little free memory on it for
               ///< the planned pools (sum of expected peaks + 2 MiB per live buffer + staging)
  kCuda,       ///< a CUDA, cuBLAS or allocation error (message has file:line and CUDA's text)
  kHang,       ///< the watchdog fired: the message lists the items that never ended
};

/// A failed execution: the reason and a message for people (lower-case, no final period).
struct ExecError {
  ExecFailure failure = ExecFailure::kCuda;
  std::string message;
};

/// The outcome of execute_plan: a measurement or an ExecError.
struct ExecOutcome {
  bool ok = false;
  Measurement measurement;
  ExecError error;
};

/// True when this build has the CUDA executor.
bool cuda_executor_built();

/// Executes `plan` on the GPU: an untimed correctness pass (tickets per item, checked with
/// check_execution), calibration, `warmup` untimed runs, `repeat` timed runs. Every run starts
/// with all streams held behind a gate kernel until every command is issued, so host issue
/// time does not show in the timeline. Measured item times are from cudaEventElapsedTime,
/// relative to the first op's start.
ExecOutcome execute_plan(const GpuPlan& plan, const ExecOptions& options);

}  // namespace sc::gpu
