// Reports that fold identical ranks: consecutive ranks whose figures are identical (data-parallel
// replicas, images of each other) print as one row, so a report of thousands of ranks reads in
// one screen; a rank that differs keeps its own row.
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "cli_util.h"
#include "config/lower_job.h"
#include "config/readers.h"
#include "config/verify_job.h"
#include "support/units.h"
#include "test_util.h"

using namespace sc;

namespace {

int count_lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("consecutive identical rows fold into runs, and a differing rank keeps its own", "[report][fold]") {
  const std::vector<std::string> rows = {"a", "a", "a", "b", "a", "a", "c"};
  const std::vector<RankRun> runs = fold_identical_rows(rows);
  REQUIRE(runs.size() == 4);
  CHECK(runs[0].label() == "0-2");
  CHECK(runs[0].count() == 3);
  CHECK(runs[1].label() == "3");
  CHECK(runs[2].label() == "4-5");  // like rank 0's row, but not next to it: its own run
  CHECK(runs[3].label() == "6");
  CHECK(fold_identical_rows({}).empty());
}

TEST_CASE("a pipeline report folds its data-parallel replicas into one row per pipeline rank", "[report][fold]") {
  // The published 32B GPT run: PP 1, DP 48 (specs/reference/published/megatron-gpt-32b-h100x384.sh).
  const auto r = test::run_schedcheck("verify specs/reference/published/megatron-gpt-32b-h100x384.sh --gpus 384 --hardware h100");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("\n  0-47 ") != std::string::npos);
  CHECK(r.out.find("(48 ranks alike)") != std::string::npos);
  CHECK(r.out.find("\n  1  ") == std::string::npos);
  CHECK(count_lines(r.out) < 40);
}

TEST_CASE("an FSDP report folds its identical ranks and shows every rank", "[report][fold]") {
  const auto r = test::run_schedcheck("verify examples/fsdp2-llama3-8b.yaml");
  INFO(r.out);
  // Every rank appears in exactly one row's range: the rows' counts add up to the ranks.
  std::istringstream in(r.out);
  std::string line;
  bool table = false;
  int covered = 0;
  while (std::getline(in, line)) {
    if (line.find("per rank (limit") == 0) {
      table = true;
      std::getline(in, line);  // the header
      continue;
    }
    if (!table) continue;
    if (line.empty()) break;
    const size_t at = line.find("ranks alike)");
    if (at == std::string::npos) {
      ++covered;
    } else {
      const size_t open = line.rfind('(', at);
      covered += std::stoi(line.substr(open + 1));
    }
  }
  const size_t ranks_at = r.out.find(" ranks (shard ");
  REQUIRE(ranks_at != std::string::npos);
  const size_t start = r.out.rfind(' ', ranks_at - 1) + 1;
  CHECK(covered == std::stoi(r.out.substr(start, ranks_at - start)));
  CHECK(r.out.find("  ...\n") == std::string::npos);  // nothing elided
}

TEST_CASE("the size check's estimate of a config's program is its built size", "[config][fold]") {
  // The estimate decides whether a config is refused as too large; it used to be up to 3x high
  // (426k estimated against 145k built for Meta's 405B layout at 16,384 GPUs).
  struct Case {
    const char* file;
    int32_t gpus;
  };
  const Case cases[] = {
      {"specs/reference/published/megatron-gpt-70b-h100x768.sh", 768},        // DDP / ZeRO-1, PP 2
      {"specs/reference/published/megatron-gpt-177b-h100x2304.sh", 2304},      // PP 6
      {"specs/reference/published/llama3-paper-405b-h100x8192.toml", 8192},    // FSDP, interleaved, PP 16
      {"examples/torchtitan-llama3-8b-pp2.toml", 0},                           // FSDP, interleaved, PP 2
      {"examples/megatron-mixtral-8x7b.sh", 0},                                // MoE, PP 4
      // FSDP without a pipeline on 16,384 GPUs: one rank built for all (docs/facts/symmetry.md).
      {"specs/reference/published/torchtitan-llama3-70b-a100x64-fsdp.toml", 16384},
  };
  for (const Case& c : cases) {
    const std::string path = test::source_path(c.file);
    config::JobContext ctx;
    ctx.gpus = c.gpus;
    ctx.hardware = "h100";
    Diagnostics d;
    config::TrainingJob job;
    const bool read = config::is_torchtitan_config(path) ? config::read_torchtitan(path, ctx, &job, d)
                                                          : config::read_megatron(path, ctx, &job, d);
    INFO(c.file);
    REQUIRE(read);
    config::VerifiedJob v;
    REQUIRE(config::verify_job(job, ctx, false, &v, d));
    const double built = static_cast<double>(v.result.program.ops.size());
    CHECK(v.lowered.costs.estimated_ops == Approx(built).epsilon(0.10));
  }
}

TEST_CASE("an FSDP config on 16,384 GPUs is verified on one built rank and its report names them all in one row",
          "[config][fold][symmetry]") {
  // torchtitan's 70B FSDP config (TP 1) on 16,384 H100s: 16,384 FSDP ranks, which the size limit
  // refused when every rank was built; every rank runs the same program, so one is built
  // (docs/facts/symmetry.md).
  const auto r = test::run_schedcheck(
      "verify specs/reference/published/torchtitan-llama3-70b-a100x64-fsdp.toml --gpus 16384 --hardware h100");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("one rank is built for the 16384 ranks") != std::string::npos);
  CHECK(r.out.find("\n      0-16383 ") != std::string::npos);
  CHECK(r.out.find("(16384 ranks alike)") != std::string::npos);
  CHECK(count_lines(r.out) < 40);
}

TEST_CASE("Meta's Llama 3 405B layout on 16,384 GPUs prints a report of one screen", "[config][fold]") {
  // TP 8, PP 16, DP 128 (FSDP), interleaved: 2,048 modelled ranks, one row per pipeline rank.
  const auto r = test::run_schedcheck("verify specs/reference/published/llama3-paper-405b-h100x16384.toml");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("\n  0-127 ") != std::string::npos);
  CHECK(r.out.find("\n  1920-2047 ") != std::string::npos);
  CHECK(count_lines(r.out) <= 150);
}
