// Benchmark of the reduction numerics: the analysis per configuration, a numerics pass over the
// reducing collectives of a 10^6-op composed program (distinct configurations analysed once), and
// the Z3 worst case for small N. Run by hand: ./build/bench/numerics_bench [--no-smt]
#include <chrono>
#include <cstring>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "numerics/analysis.h"
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

  // A composed program: 10^6 ops of which every tenth is a reducing collective drawn from a few
  // configurations (FSDP reduce-scatters per unit over the shard group, HSDP all-reduces over the
  // replicas, a data-parallel all-reduce). The pass keys each collective's arithmetic and analyses
  // each distinct configuration once, without fixes (a report asks for them per finding).
  const int64_t ops = 1'000'000;
  std::vector<numerics::ReductionConfig> shapes = {
      make(DType::kBf16, ReduceOp::kAvg, 64, Algorithm::kRing, numerics::CollectiveKind::kReduceScatter),
      make(DType::kFp32, ReduceOp::kAvg, 64, Algorithm::kRing, numerics::CollectiveKind::kReduceScatter),
      make(DType::kBf16, ReduceOp::kAvg, 16, Algorithm::kRing),
      make(DType::kBf16, ReduceOp::kSum, 1024, Algorithm::kRing),
  };
  std::vector<numerics::LocatedReduction> collectives;
  for (int64_t i = 0; i < ops; i += 10)
    collectives.push_back({shapes[(i / 10) % shapes.size()], SourceLoc{}, fmt::format("op{}", i)});
  numerics::AnalysisOptions pass;
  pass.samples = 256;
  pass.random_trials = 8;
  pass.fixes = false;
  auto t = std::chrono::steady_clock::now();
  auto check = numerics::check_reductions(collectives, numerics::Tolerances{}, pass);
  double pass_s = seconds_since(t);
  int64_t work = 0;
  for (const auto& a : check.analyses) work += a.reduced_elements;
  fmt::print("numerics pass (check_reductions) over a {}-op program ({} reducing collectives, {} distinct "
             "configurations): {:.3f} s ({} element ops; {} findings)\n",
             ops, collectives.size(), check.analyses.size(), pass_s, work, check.findings.size());

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
