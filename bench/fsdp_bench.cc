// FSDP verify at scale: a 128-unit model on 64 ranks, two steps, every pass (lowering,
// collective agreement, deadlock, residency, timing, worst-case memory, memory limit, figures).
// Run by hand: ./build/bench/fsdp_bench [units] [ranks]. Prints seconds per pass, ops and the
// process's peak resident set; figures go to the README.
// ./build/bench/fsdp_bench --every-rank [--big]: fsdp2 with every rank computed (no symmetry
// reduction), units x4 at 64 ranks and ranks x2 at 128 units (a fixed number of ops per rank),
// each shape in its own process, with the growth exponent of each pass between rows
// (log(t2 / t1) / log(ops2 / ops1); 1 = linear); --big goes up to 1024 ranks.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_util.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"

namespace {

/// Peak resident set of this process so far, in MiB (ru_maxrss is in KiB on Linux).
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

std::string spec_text(const std::string& implementation, int units, int ranks, int replicate) {
  std::string options = implementation == "fsdp1" ? "{limit_all_gathers: true, backward_prefetch: pre}"
                        : implementation == "zero3" ? "{prefetch_bucket_size: 200000000}"
                                                    : "{reshard_after_forward: true}";
  return fmt::format(
      "schedcheck: 1\nranks: {}\nmemory: {{limit_bytes: 80GiB}}\nfsdp:\n  implementation: {}\n"
      "  replicate_size: {}\n  dtypes: {{param: bf16, reduce: fp32}}\n  link: {{bandwidth: 450GB/s, latency: 10us}}\n"
      "  units:\n    - {{name: layer, repeat: {}, params: 200M, forward: 5ms, backward: 10ms, "
      "activation_bytes: 256MiB}}\n  options: {}\n",
      ranks, implementation, replicate, units, options);
}

/// Passes reported by the --every-rank series.
/// Names as verify's PassTimer records them ("buffer residency": the column read 0 while the
/// bench looked for "residency").
const char* const kPasses[] = {"lower", "deadlock", "buffer residency", "timing", "worst-case memory"};
const char* const kHeaders[] = {"lower", "deadlock", "residency", "timing", "worst-cas"};
constexpr int kNumPasses = sizeof(kPasses) / sizeof(kPasses[0]);

struct Row {
  double ops = 0;
  double seconds[kNumPasses + 1] = {};  ///< per pass, then the total
  double peak_rss_bytes = 0;
};

Row measure_every_rank(int units, int ranks) {
  Row row;
  sc::Diagnostics d;
  auto spec = sc::parse_fsdp_spec("bench.yaml", spec_text("fsdp2", units, ranks, 1), d);
  if (!spec) return row;
  auto t0 = std::chrono::steady_clock::now();
  sc::VerifyResult r = sc::verify_fsdp(*spec, false, false);
  row.seconds[kNumPasses] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& p : r.pass_times)
    for (int c = 0; c < kNumPasses; ++c)
      if (p.pass == kPasses[c]) row.seconds[c] += p.seconds;
  row.ops = static_cast<double>(r.program.ops.size());
  row.peak_rss_bytes = sc::bench::peak_rss_bytes();
  return row;
}

void every_rank_series(const char* title, const std::vector<std::pair<int, int>>& shapes) {
  std::printf("\n%s\n%-14s %9s", title, "units x ranks", "ops");
  for (const char* p : kHeaders) std::printf(" %9.9s", p);
  std::printf(" %9s %9s %6s\n", "total", "rss MiB", "B/op");
  std::vector<Row> rows;
  for (auto [units, ranks] : shapes) {
    const Row row = sc::bench::in_child<Row>([u = units, r = ranks] { return measure_every_rank(u, r); });
    rows.push_back(row);
    std::printf("%-14s %9.0f", fmt::format("{} x {}", units, ranks).c_str(), row.ops);
    for (double t : row.seconds) std::printf(" %9.3f", t);
    std::printf(" %9.0f %6.0f\n", row.peak_rss_bytes / (1 << 20), row.ops ? row.peak_rss_bytes / row.ops : 0);
    std::fflush(stdout);
  }
  for (size_t i = 1; i < rows.size(); ++i) {
    std::printf("%-14s %9s", "  exponent", fmt::format("x{:.2f}", rows[i].ops / rows[i - 1].ops).c_str());
    for (int c = 0; c <= kNumPasses; ++c) {
      const double e = sc::bench::growth_exponent(rows[i - 1].seconds[c], rows[i].seconds[c], rows[i - 1].ops, rows[i].ops);
      std::printf(" %9s", std::isnan(e) ? "-" : fmt::format("{:.2f}", e).c_str());
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--every-rank") == 0) {
    const bool big = argc > 2 && std::strcmp(argv[2], "--big") == 0;
    every_rank_series("fsdp2, every rank computed, units x4 at 64 ranks", {{32, 64}, {128, 64}});
    std::vector<std::pair<int, int>> by_ranks = {{128, 64}, {128, 128}, {128, 256}};
    if (big) by_ranks.insert(by_ranks.end(), {{128, 512}, {128, 1024}});
    every_rank_series("fsdp2, every rank computed, ranks x2 at 128 units", by_ranks);
    return 0;
  }
  const int units = argc > 1 ? std::stoi(argv[1]) : 128;
  const int ranks = argc > 2 ? std::stoi(argv[2]) : 64;
  std::printf("%-22s %8s %9s %9s %9s %9s %9s %9s %9s %9s\n", "case", "ops", "lower s", "deadlk s", "resid s", "timing s",
              "worst s", "figures s", "total s", "rss MiB");
  struct Case {
    const char* impl;
    int replicate;
    bool symmetry;  ///< false: the interleaving passes on every rank (as for divergent programs)
  };
  for (const Case& c : {Case{"fsdp2", 1, true}, Case{"fsdp1", 1, true}, Case{"zero3", 1, true}, Case{"fsdp2", 8, true},
                        Case{"fsdp2", 1, false}}) {
    sc::Diagnostics d;
    auto spec = sc::parse_fsdp_spec("bench.yaml", spec_text(c.impl, units, ranks, c.replicate), d);
    if (!spec) {
      d.print(std::cerr);
      return 2;
    }
    auto t0 = std::chrono::steady_clock::now();
    sc::VerifyResult r = sc::verify_fsdp(*spec, false, c.symmetry);
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto pass = [&](const char* name) {
      for (const auto& p : r.pass_times)
        if (p.pass == name) return p.seconds;
      return 0.0;
    };
    std::string name = fmt::format("{} {}u x {}r{}{}", c.impl, units, ranks, c.replicate > 1 ? " hsdp" : "",
                                   c.symmetry ? "" : " all");
    std::printf("%-22s %8zu %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.0f   %s\n", name.c_str(),
                r.program.ops.size(), pass("lower"), pass("deadlock"), pass("buffer residency"), pass("timing"),
                pass("worst-case memory"), pass("figures"), total, peak_rss_mib(), r.verdict().c_str());
  }
  return 0;
}
