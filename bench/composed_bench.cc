// Benchmark: the one verify on composed programs (pipeline x FSDP x HSDP on a mesh), growing to
// over 10^6 ops. Prints, per shape: world ranks, ops, seconds per pass and in all, the verdict,
// and the growth exponent of the total time in the number of ops between consecutive shapes.
// Usage: composed_bench [--quick]
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "fixtures.h"
#include "pipeline/verify_pipeline.h"

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  struct Shape {
    int pp, dp_replicate, dp_shard, m;
  };
  std::vector<Shape> shapes = {{8, 2, 8, 256}, {8, 2, 8, 1024}, {8, 2, 8, 4096}};
  if (quick) shapes.resize(2);
  fmt::print("{:>3} {:>4} {:>4} {:>6} {:>6} {:>9} {:>9}  {:<8} {}\n", "pp", "rep", "shd", "m", "ranks", "ops", "total",
             "verdict", "passes (s)");
  double last_ops = 0, last_s = 0;
  for (const Shape& sh : shapes) {
    sc::PipelineSpec spec = sc::test::make_spec("composed", sh.pp, sh.m, sc::test::one_f_one_b(sh.pp, sh.m));
    sc::Composition c;
    c.dp_replicate = sh.dp_replicate;
    c.dp_shard = sh.dp_shard;
    c.fsdp = true;
    c.bandwidth_bytes_per_s = 450e9;
    c.latency_s = 1e-5;
    spec.composition = c;
    spec.memory.params_bytes.assign(sh.pp, 3'500'000'000LL);
    spec.memory.activation_bytes.assign(sh.pp, 1LL << 30);
    auto t0 = std::chrono::steady_clock::now();
    sc::VerifyResult r = sc::verify(spec, {});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string passes;
    for (const auto& pt : r.pass_times) passes += fmt::format("{} {:.3f}  ", pt.pass, pt.seconds);
    const double ops = static_cast<double>(r.program.ops.size());
    std::string exponent =
        last_ops > 0 ? fmt::format("  exponent {:.2f}", std::log(s / last_s) / std::log(ops / last_ops)) : "";
    fmt::print("{:>3} {:>4} {:>4} {:>6} {:>6} {:>9} {:>8.3f}s  {:<8} {}{}\n", sh.pp, sh.dp_replicate, sh.dp_shard, sh.m,
               r.program.num_ranks, r.program.ops.size(), s, r.verdict(), passes, exponent);
    std::fflush(stdout);
    last_ops = ops;
    last_s = s;
  }
  return 0;
}
