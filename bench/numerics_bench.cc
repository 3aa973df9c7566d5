// Benchmark of the reduction numerics: the analysis per configuration, the numerics pass inside
// verify on composed programs of about 10^6 ops (distinct configurations analysed once), and the
// Z3 worst case for small N. Run by hand: ./build/bench/numerics_bench [--no-smt]
#include <chrono>
#include <cstring>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "fixtures.h"
#include "numerics/analysis.h"
#include "pipeline/verify_pipeline.h"
#include "solver/numerics_smt.h"

using namespace sc;
using numerics::Algorithm;
using numerics::DType;
using numerics::ReduceOp;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

numerics::ReductionConfig make(DType t, ReduceOp op, int n, Algorithm a,
                               numerics::CollectiveKind k = numerics::CollectiveKind::kAllReduce) {
  numerics::ReductionConfig c;
  c.dtype = t;
  c.op = op;
  c.ranks = n;
  c.algorithm = a;
  c.collective = k;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  bool smt = !(argc > 1 && std::strcmp(argv[1], "--no-smt") == 0);
  fmt::print("analysis of one configuration (samples 1024, fixes included; best of 3):\n");
  for (int n : {8, 64, 1024}) {
    auto c = make(DType::kBf16, ReduceOp::kAvg, n, Algorithm::kRing);
    double best = 1e9;
    int64_t work = 0;
    for (int rep = 0; rep < 3; ++rep) {
      auto t = std::chrono::steady_clock::now();
      auto a = numerics::analyze(c);
      best = std::min(best, seconds_since(t));
      work = a.reduced_elements;
    }
    fmt::print("  {:<55} {:8.3f} s  {:>11} element ops  {:5.1f} ns/op\n", numerics::describe(c), best, work,
               best / work * 1e9);
  }

  // The numerics pass inside verify on composed programs of about 10^6 ops (PP x FSDP2 over a
  // mesh, 1F1B): its time from verify's pass timer, next to the whole verify. Every reduce-scatter
  // and all-reduce carries its arithmetic; the pass keys them, analyses each distinct
  // configuration once (256 samples) and, for a configuration with a finding, its usual fixes.
  struct Shape {
    int pp, dp_replicate, dp_shard, m;
    const char* reduce;
  };
  fmt::print("numerics pass inside verify, composed programs (1F1B, FSDP2 over the shard group, tolerances 1e-3):\n");
  for (const Shape& sh : {Shape{8, 2, 64, 512, "bf16"}, Shape{8, 2, 64, 512, "fp32"}, Shape{2, 1, 1024, 256, "bf16"}}) {
    PipelineSpec spec = test::make_spec("composed", sh.pp, sh.m, test::one_f_one_b(sh.pp, sh.m));
    Composition comp;
    comp.dp_replicate = sh.dp_replicate;
    comp.dp_shard = sh.dp_shard;
    comp.fsdp = true;
    comp.reduce_dtype = sh.reduce;
    comp.reduce_dtype_bytes = std::string(sh.reduce) == "bf16" ? 2 : 4;
    comp.bandwidth_bytes_per_s = 450e9;
    comp.latency_s = 1e-5;
    spec.composition = comp;
    spec.memory.params_bytes.assign(sh.pp, 3'500'000'000LL);
    spec.memory.activation_bytes.assign(sh.pp, 1LL << 30);
    spec.max_relative_error = 1e-3;
    spec.max_bias = 1e-3;
    auto t0 = std::chrono::steady_clock::now();
    VerifyResult r = verify(spec, {});
    const double total_s = seconds_since(t0);
    double numerics_s = 0;
    for (const auto& pt : r.pass_times)
      if (pt.pass == "numerics") numerics_s = pt.seconds;
    int64_t reducing = 0;
    for (const Op& o : r.program.ops)
      if (o.kind == OpKind::kCollective && o.arith() >= 0) ++reducing;
    int numerics_findings = 0;
    for (const Finding& f : r.findings)
      if (f.kind == FindingKind::kNumerics) ++numerics_findings;
    fmt::print("  pp {} x replicate {} x shard {}, m {}, reduce {}: {} ops, {} reducing collectives, {} with fixes; "
               "numerics {:.3f} s of verify's {:.3f} s ({} numerics findings)\n",
               sh.pp, sh.dp_replicate, sh.dp_shard, sh.m, sh.reduce, r.program.ops.size(), reducing,
               r.numerics_fixes.size(), numerics_s, total_s, numerics_findings);
    std::fflush(stdout);
  }

  if (!smt) return 0;
  fmt::print("Z3 worst case (sum, 30 s limit each):\n");
  for (auto [t2, n, alg] : {std::tuple{DType::kBf16, 2, Algorithm::kRing}, std::tuple{DType::kBf16, 3, Algorithm::kRing},
                            std::tuple{DType::kBf16, 8, Algorithm::kRing}, std::tuple{DType::kFp16, 8, Algorithm::kRing},
                            std::tuple{DType::kBf16, 8, Algorithm::kTree}}) {
    auto c = make(t2, ReduceOp::kSum, n, alg);
    auto r = smt_worst_case(c);
    fmt::print("  {:<45} {:<12} rel. error {:.6g}  {} checks  {:6.2f} s  {}\n", numerics::describe(c),
               numerics::smt_status_name(r.status), r.relative_error, r.checks, r.seconds, r.detail);
  }
  return 0;
}
