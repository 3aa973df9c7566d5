// Benchmark: how verify's passes grow on PyTorch schedule CSVs, with their growth exponents.
//
// Cases, each shape in its own child process (so its peak resident set is its own):
//  - "comms": the CSV `schedcheck gen NAME --ranks p --microbatches m --comms pytorch --format
//    csv` writes (generate, lower_comms with LowerPolicy::kPyTorch, write_csv_schedule: the
//    same calls), written to a file, read back with spec_from_csv and verified with every pass.
//  - "lower": the compute-only CSV (gen without --comms), verified with `--lower pytorch`.
// Series: m x4 at fixed p (growth in ops at fixed ranks) and p x2 at fixed m (ranks doubling at
// a fixed number of ops per rank). The exponent between two rows is
// log(t2 / t1) / log(ops2 / ops1); 1 is linear.
// Usage: pipeline_scaling_bench [--quick | --big | --one NAME comms|lower P M]
//   --quick: small shapes (seconds); default: p = 64 up to m = 8192 (about a minute);
//   --big: also interleaved-zb p = 64 m = 8192 (7.3 M ops);
//   --one: a single shape (schedule NAME, comms CSV or compute-only + --lower pytorch).
// Prints wall seconds per pass, peak RSS and bytes per op (peak RSS / ops). Figures: README.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_util.h"
#include "pipeline/verify_pipeline.h"
#include "pipeline/generators.h"
#include "pipeline/lower_comms.h"
#include "spec/csv_schedule.h"
#include "support/diagnostics.h"

namespace {

/// The passes reported, in order; "read" is spec_from_csv, "verify" every pass of verify().
const char* const kColumns[] = {"read", "lower", "build", "deadlock", "timing", "worst-case memory", "verify"};
constexpr int kNumColumns = sizeof(kColumns) / sizeof(kColumns[0]);

/// One measured shape, as the child sends it to the parent.
struct Row {
  double ops = 0;
  double seconds[kNumColumns] = {};
  double peak_rss_bytes = 0;
  int ok = 0;
};

struct Shape {
  const char* schedule;
  bool comms;  ///< true: comms CSV; false: compute-only CSV verified with --lower pytorch
  int p, m;
};

/// Generates the CSV as `schedcheck gen` does; empty on failure (printed).
std::string gen_csv(const Shape& s) {
  std::string why;
  std::optional<sc::Generated> g = sc::generate(sc::GenOptions{s.schedule, s.p, s.m, {}, {}, false}, &why);
  if (!g) {
    fmt::print(stderr, "gen {}: {}\n", s.schedule, why);
    return {};
  }
  std::vector<std::vector<sc::Step>> actions = std::move(g->actions);
  if (s.comms) {
    auto lowered = sc::lower_comms(actions, g->stage_to_rank, sc::LowerPolicy::kPyTorch, &why, g->pipeline_starts);
    if (!lowered) {
      fmt::print(stderr, "gen --comms pytorch: {}\n", why);
      return {};
    }
    actions = std::move(*lowered);
  }
  return sc::write_csv_schedule(actions);
}

/// Measures one shape (in the child).
Row measure(const Shape& s) {
  Row row;
  std::string text = gen_csv(s);
  if (text.empty()) return row;
  char path[] = "/tmp/schedcheck_bench_XXXXXX.csv";
  const int fd = mkstemps(path, 4);
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) return row;
  close(fd);
  std::string().swap(text);

  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  sc::Diagnostics diags;
  std::optional<sc::PipelineSpec> spec = sc::spec_from_csv(path, diags, std::nullopt);
  row.seconds[0] = std::chrono::duration<double>(Clock::now() - t0).count();
  unlink(path);
  if (!spec) return row;
  sc::VerifyOptions options;
  if (!s.comms) options.lower = sc::LowerPolicy::kPyTorch;
  options.keep_actions = false;  // as `schedcheck verify` runs it
  t0 = Clock::now();
  sc::VerifyResult r = sc::verify(std::move(*spec), options);
  row.seconds[kNumColumns - 1] = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const sc::PassTime& pt : r.pass_times)
    for (int c = 1; c + 1 < kNumColumns; ++c)
      if (pt.pass == kColumns[c]) row.seconds[c] += pt.seconds;
  row.ops = static_cast<double>(r.program.ops.size());
  row.peak_rss_bytes = sc::bench::peak_rss_bytes();
  row.ok = r.findings.empty() && r.worst_case ? 1 : 0;
  return row;
}

void run_series(const char* title, const std::vector<Shape>& shapes) {
  fmt::print("\n{}\n{:<20} {:>4} {:>5} {:>9}", title, "schedule", "p", "m", "ops");
  for (const char* c : kColumns) fmt::print(" {:>9.9}", c);
  fmt::print(" {:>9} {:>6}\n", "rss MiB", "B/op");
  std::vector<Row> rows;
  for (const Shape& s : shapes) {
    const Row row = sc::bench::in_child<Row>([&] { return measure(s); });
    rows.push_back(row);
    fmt::print("{:<20} {:>4} {:>5} {:>9.0f}", std::string(s.schedule) + (s.comms ? " comms" : " +lower"), s.p, s.m,
               row.ops);
    for (double t : row.seconds) fmt::print(" {:>9.3f}", t);
    fmt::print(" {:>9.0f} {:>6.0f}{}\n", row.peak_rss_bytes / (1 << 20), row.ops ? row.peak_rss_bytes / row.ops : 0,
               row.ok ? "" : "  FAILED");
    std::fflush(stdout);
  }
  for (size_t i = 1; i < rows.size(); ++i) {
    fmt::print("{:<20} {:>4} {:>5} {:>9}", "  exponent", "", "", fmt::format("x{:.2f}", rows[i].ops / rows[i - 1].ops));
    for (int c = 0; c < kNumColumns; ++c) {
      const double e = sc::bench::growth_exponent(rows[i - 1].seconds[c], rows[i].seconds[c], rows[i - 1].ops, rows[i].ops);
      fmt::print(" {:>9}", std::isnan(e) ? std::string("-") : fmt::format("{:.2f}", e));
    }
    const double e = sc::bench::growth_exponent(rows[i - 1].peak_rss_bytes, rows[i].peak_rss_bytes, rows[i - 1].ops, rows[i].ops);
    fmt::print(" {:>9}\n", std::isnan(e) ? std::string("-") : fmt::format("{:.2f}", e));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--one") == 0) {
    const Shape one{argv[2], std::strcmp(argv[3], "comms") == 0, std::atoi(argv[4]), std::atoi(argv[5])};
    run_series("one shape", {one});
    return 0;
  }
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool big = argc > 1 && std::strcmp(argv[1], "--big") == 0;
  const int p = quick ? 16 : 64;
  const std::vector<int> ms = quick ? std::vector<int>{128, 512} : std::vector<int>{512, 2048, 8192};
  const int m_fixed = quick ? 128 : 2048;
  const std::vector<int> ps = quick ? std::vector<int>{8, 16} : std::vector<int>{16, 32, 64};
  for (bool comms : {true, false}) {
    std::vector<Shape> by_m, by_p;
    for (int m : ms) by_m.push_back({"1f1b", comms, p, m});
    for (int q : ps) by_p.push_back({"1f1b", comms, q, m_fixed});
    const char* kind = comms ? "comms CSV" : "compute-only CSV + --lower pytorch";
    run_series(fmt::format("1f1b, {}, m x4 at p = {} (exponent in ops at fixed ranks)", kind, p).c_str(), by_m);
    run_series(fmt::format("1f1b, {}, p x2 at m = {} (exponent when ranks double)", kind, m_fixed).c_str(), by_p);
  }
  std::vector<Shape> zb;
  for (int m : ms)
    if (big || m < 8192) zb.push_back({"interleaved-zb", true, p, m});
  run_series(fmt::format("interleaved-zb, comms CSV, m x4 at p = {}", p).c_str(), zb);
  return 0;
}
