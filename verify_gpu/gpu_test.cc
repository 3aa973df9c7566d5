// GPU tests of the executor (label gpu; registered with -DSCHEDCHECK_GPU_TESTS=ON): the examples
// run within tolerance, kernels last their cost, copies are held to the link time, the pool's
// high-water mark is the planned peak, the correctness pass holds, and the watchdog fires.
#include <algorithm>
#include <cmath>

#include "catch.h"
#include "pipeline/verify_pipeline.h"
#include "fixtures.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"
#include "pipeline/named_schedule.h"
#include "spec/yaml_spec.h"
#include "test_util.h"
#include "verify_gpu/compare.h"
#include "verify_gpu/executor.h"
#include "verify_gpu/plan.h"

namespace sc::gpu {
namespace {

PipelineSpec load(const std::string& rel) {
  Diagnostics diags;
  auto spec = load_yaml_spec(test::source_path(rel), diags);
  REQUIRE(spec);
  if (spec->named) REQUIRE(resolve_named_schedule(*spec, diags));
  return *spec;
}

struct Ran {
  VerifyResult r;
  GpuPlan plan;
  Measurement m;
  Comparison c;
};

Ran run_result(VerifyResult r, ExecOptions eo = {}) {
  Ran x;
  x.r = std::move(r);
  REQUIRE(x.r.findings.empty());
  auto plan = make_plan(x.r.program, *x.r.timeline);
  REQUIRE(plan);
  x.plan = std::move(*plan);
  eo.repeat = 3;
  eo.warmup = 1;
  ExecOutcome out = execute_plan(x.plan, eo);
  INFO(out.error.message);
  REQUIRE(out.ok);
  x.m = std::move(out.measurement);
  std::vector<ItemTime> pt;
  for (const Item& it : x.plan.items) pt.push_back({it.predicted_start_s, it.predicted_end_s});
  Tolerance tol;
  // At least 2 MiB (the pool's mapping granularity) in case a 1-byte allocation under-reports it.
  tol.rounding_bytes = std::max<int64_t>(x.m.calibration.pool_rounding_bytes, 2 << 20);
  x.c = compare(x.plan, figures_of(x.plan, pt, x.r.timeline->peak_bytes_per_rank),
                figures_of(x.plan, x.m.items, x.m.peak_bytes_per_rank), pt, x.m.items, tol);
  return x;
}

Ran run_spec(const PipelineSpec& spec, const VerifyOptions& vo = {}) { return run_result(verify(spec, vo)); }

void require_agrees(const Ran& x) {
  for (const auto& p : x.m.correctness_problems) FAIL_CHECK(p);
  for (const auto& f : x.c.checks) {
    INFO(f.name << " rank " << f.rank << ": predicted " << f.predicted << ", measured " << f.measured);
    CHECK(f.within);
  }
}

TEST_CASE("the executor is built with CUDA", "[gpu]") {
  REQUIRE(cuda_executor_built());
}

TEST_CASE("a spin kernel lasts its op's cost", "[gpu]") {
  using K = ActionKind;
  using test::step;
  // One rank, one 20 ms forward and a 30 ms backward: two kernels back to back.
  PipelineSpec s = test::make_spec("spin", 1, 1, {{step(K::kF, 0, 0), step(K::kB, 0, 0)}}, 0.020, 0.015, 0.015);
  Ran x = run_spec(s);
  const auto& t = x.m.items;
  CHECK(t[0].end_s - t[0].start_s == Approx(0.020).epsilon(0.01));
  CHECK(t[1].end_s - t[1].start_s == Approx(0.030).epsilon(0.01));
  CHECK(x.m.calibration.launch_latency_s > 0);
  CHECK(x.m.calibration.launch_latency_s < 50e-6);
  CHECK(x.m.calibration.copy_bandwidth_bytes_per_s > 1e11);
  require_agrees(x);
}

TEST_CASE("the 1F1B example runs within 5 percent and its pool peak is the planned one", "[gpu]") {
  Ran x = run_spec(load("examples/gpu-1f1b-p4-m8.yaml"));
  require_agrees(x);
  // The pool's peak is the planned one, up to its rounding (at most 2 MiB, the granularity of
  // its physical mappings, per live buffer).
  for (int32_t r = 0; r < x.plan.num_ranks; ++r) {
    int64_t exact = x.plan.expected_peak_bytes_per_rank[r];
    int64_t unit = std::max<int64_t>(x.m.calibration.pool_rounding_bytes, 2 << 20);
    INFO("rank " << r << ": measured " << x.m.peak_bytes_per_rank[r] << ", planned " << exact << ", rounding "
                 << x.m.calibration.pool_rounding_bytes);
    CHECK(x.m.peak_bytes_per_rank[r] >= exact);
    CHECK(x.m.peak_bytes_per_rank[r] <= exact + unit * x.plan.max_live_buffers_per_rank[r]);
  }
  CHECK(x.c.order_agreement == 1.0);
}

TEST_CASE("the ZB-H1 example runs within 5 percent", "[gpu]") {
  Ran x = run_spec(load("examples/gpu-zbh1-p4-m8.yaml"));
  require_agrees(x);
}

TEST_CASE("the FSDP example (8 ranks, collectives as copies) runs within 5 percent", "[gpu]") {
  Diagnostics diags;
  auto spec = load_fsdp_spec(test::source_path("examples/gpu-fsdp2-8layers.yaml"), diags);
  REQUIRE(spec);
  Ran x = run_result(verify_fsdp(*spec, false, /*use_symmetry=*/false));  // every rank, as `run` builds them
  require_agrees(x);
}

TEST_CASE("the batched P2P example (Megatron's parity-ordered groups) runs within 5 percent", "[gpu]") {
  // Members of a group on batch lanes, launched together once every member's deps are done;
  // a rendezvous partner waits for the group's launch (the correctness pass checks it).
  Ran x = run_spec(load("examples/megatron-pp2-shape-exchange-parity.yaml"));
  REQUIRE_FALSE(x.r.program.groups.empty());
  CHECK(x.m.correctness_problems.empty());
  require_agrees(x);
}

TEST_CASE("explicit rendezvous sends are copies held to the link time", "[gpu]") {
  VerifyOptions vo;
  vo.lower = LowerPolicy::kPyTorch;
  Ran x = run_spec(load("examples/gpu-1f1b-p4-m8.yaml"), vo);
  require_agrees(x);
  double link = x.r.program.link.transfer_s(16 << 20);
  for (size_t i = 0; i < x.plan.num_ops; ++i)
    if (x.r.program.ops[i].kind == OpKind::kSend) {
      double d = x.m.items[i].end_s - x.m.items[i].start_s;
      CHECK(d >= link * 0.98);
      CHECK(d <= link + 30e-6);
    }
}

TEST_CASE("the watchdog reports a run that does not finish in time", "[gpu]") {
  using K = ActionKind;
  using test::step;
  PipelineSpec s = test::make_spec("long", 1, 1, {{step(K::kF, 0, 0), step(K::kB, 0, 0)}}, 3.0, 0.001, 0.001);
  VerifyResult r = verify(s, {});
  auto plan = make_plan(r.program, *r.timeline);
  REQUIRE(plan);
  ExecOptions eo;
  eo.watchdog_s = 1;
  ExecOutcome out = execute_plan(*plan, eo);
  CHECK_FALSE(out.ok);
  CHECK(out.error.failure == ExecFailure::kHang);
  CHECK(out.error.message.find("0F0") != std::string::npos);
}

}  // namespace
}  // namespace sc::gpu
