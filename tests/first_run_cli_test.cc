// What a new user meets first: unknown names answered with the valid ones, the text timeline
// and DOT picture saying what they leave out, and a DualPipe CSV that verifies as written.
#include <algorithm>
#include <filesystem>
#include <string>

#include "catch.h"
#include "cli_util.h"
#include "test_util.h"

namespace sc {
namespace {

using test::run_schedcheck;

std::string temp(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / "schedcheck-first-run-test";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

}  // namespace

TEST_CASE("an unknown command names the commands, with the closest one", "[cli]") {
  auto r = run_schedcheck("verfy examples/llama7b-pp8-1f1b.yaml");
  CHECK(r.exit_code == 1);
  CHECK(r.out ==
        "schedcheck: error: unknown command 'verfy'; did you mean 'verify'? (commands: verify, lower, gen, compare, "
        "synth, run, numerics, diff, plan; schedcheck --help explains them)\n");
  auto far = run_schedcheck("frobnicate");
  CHECK(far.exit_code == 1);
  CHECK(far.out.find("unknown command 'frobnicate' (commands: verify, lower") != std::string::npos);
}

TEST_CASE("an unknown schedule name lists the schedules", "[cli]") {
  auto r = run_schedcheck("gen onef1b --ranks 2 --microbatches 4");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("unknown schedule 'onef1b' (schedules: gpipe, 1f1b, interleaved-1f1b,") != std::string::npos);
}

TEST_CASE("counts agree with their nouns", "[cli]") {
  std::string spec = temp("one.yaml");
  REQUIRE(run_schedcheck("gen 1f1b --ranks 1 --microbatches 1 --format yaml -o '" + spec + "'").exit_code == 0);
  CHECK(test::read_file(spec).rfind("# 1f1b for 1 rank, 1 microbatch (", 0) == 0);
  auto r = run_schedcheck("verify '" + spec + "'");
  CHECK(r.out.find(": 1 rank, 1 stage (explicit placement, declared), 1 microbatch, 2 ops;") != std::string::npos);
}

TEST_CASE("gen dualpipe --format csv keeps both pipelines and verifies as its YAML does", "[cli]") {
  std::string csv = temp("dualpipe.csv");
  REQUIRE(run_schedcheck("gen dualpipe --ranks 4 --microbatches 8 --format csv -o '" + csv + "'").exit_code == 0);
  CHECK(test::read_file(csv).rfind("# schedcheck: pipelines 0,4\n", 0) == 0);
  auto r = run_schedcheck("verify '" + csv + "'");
  INFO(r.out);
  CHECK(r.exit_code == 0);
  // A malformed pipelines line is an error at its line, not a silent single pipeline.
  std::string bad = temp("bad-pipelines.csv");
  std::string text = test::read_file(csv);
  test::write_file(bad, "# schedcheck: pipelines 4,0\n" + text.substr(text.find('\n') + 1));
  auto e = run_schedcheck("verify '" + bad + "'");
  CHECK(e.exit_code == 2);
  CHECK(e.out.find("bad-pipelines.csv:1:1: error: '# schedcheck: pipelines 4,0': the pipelines line lists the first "
                   "stage of each pipeline") != std::string::npos);
}

TEST_CASE("the text timeline gives a column to the op covering most of it, and says when it is omitted", "[cli]") {
  auto r = run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml");
  // Rank 0 is idle 381 ms of its 1.245 s: 21 of the 70 columns of 18 ms read idle, and the last
  // column, 17% of a column long, too.
  auto at = r.out.find("  rank 0 compute     ");
  REQUIRE(at != std::string::npos);
  std::string row = r.out.substr(at + 21, r.out.find('\n', at) - at - 21);
  CHECK(row.size() == 70);
  CHECK(std::count(row.begin(), row.end(), '.') == 22);
  CHECK(row.find("B0F") != std::string::npos);   // microbatch ids where they fit
  CHECK(row.find(".B-.") != std::string::npos);  // else the op's other columns continue it
  std::string spec = temp("p8m64-text.yaml");
  REQUIRE(run_schedcheck("gen 1f1b --ranks 8 --microbatches 64 --format yaml -o '" + spec + "'").exit_code == 0);
  auto aggregated = run_schedcheck("verify '" + spec + "' --timeline-ops 2000");
  CHECK(aggregated.out.find("\n  aggregated: the shortest op (1 s) is narrower than a column, so short ops may not show; "
                            "--svg FILE draws every op\n") != std::string::npos);
  auto omitted = run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml --timeline-ops 100");
  CHECK(omitted.out.find("\ntimeline: omitted, 256 ops is more than --timeline-ops 100 (raise it, or draw the "
                         "timeline with --svg FILE)\n") != std::string::npos);
}

TEST_CASE("the DOT picture of a large program says in the graph which ops it shows and why", "[cli]") {
  std::string spec = temp("p8m64.yaml"), dot = temp("big.dot");
  REQUIRE(run_schedcheck("gen 1f1b --ranks 8 --microbatches 64 --format yaml -o '" + spec + "'").exit_code == 0);
  REQUIRE(run_schedcheck("verify '" + spec + "' --dot '" + dot + "'").exit_code == 0);
  std::string text = test::read_file(dot);
  CHECK(text.find("label=\"32 of 1024 ops shown: a program above 400 ops is too large to draw whole, so each stream "
                  "shows its last 4 completed ops; --svg FILE draws the whole timeline\"") != std::string::npos);
}

}  // namespace sc
