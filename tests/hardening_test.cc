// Reproductions of an adversarial campaign on the solvers, budgets, CI formats and front-end
// detection: each once gave a verdict after a cut-off search, a silent choice or a blow-up; each
// now gives an inconclusive exit, a located error or the right answer.
#include <filesystem>
#include <string>

#include "catch.h"
#include "cli_util.h"
#include "report/ci_report.h"
#include "spec/yaml_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using sc::test::run_schedcheck;
using sc::test::write_temp;

constexpr const char* kDir = "schedcheck-hardening";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a cut-off SMT search is inconclusive, never a verdict", "[cli][solver][hardening]") {
  // 10 ms cuts Z3 off mid-search: it once answered "deadlock-free" (exit 70, DISAGREES) for a
  // schedule that deadlocks. The answer is either exit 5 or the deadlock both engines find.
  auto r = run_schedcheck("verify examples/interleaved-rendezvous-deadlock.yaml --engine smt --time-limit 10ms");
  INFO(r.out);
  CHECK(r.exit_code != 70);
  CHECK_FALSE(has(r.out, "DISAGREES"));
  CHECK_FALSE(has(r.out, "smt engine: deadlock-free"));
  if (r.exit_code == 5) CHECK(has(r.out, "smt engine: inconclusive after"));
  else CHECK(has(r.out, "smt engine: deadlock: at most"));
}

TEST_CASE("a time limit too long for the clock is no limit, not an expired one", "[cli][solver][hardening]") {
  // 1e10 s overflowed the deadline's nanosecond count into the past: the search was cut at once.
  auto r = run_schedcheck("verify examples/interleaved-rendezvous-deadlock.yaml --engine smt --time-limit 1e10s");
  INFO(r.out);
  CHECK(has(r.out, "smt engine: deadlock: at most"));
  CHECK(has(r.out, "agrees with the graph engine"));
  auto s = run_schedcheck("synth examples/synth-p4-m8.yaml --time-limit 1e10s");
  INFO(s.out);
  CHECK(s.exit_code == 0);
  CHECK_FALSE(has(s.out, "ran out"));
}

TEST_CASE("router proofs have a default time limit, stated in --help", "[cli][router][hardening]") {
  auto r = run_schedcheck("verify --help");
  CHECK(has(r.out, "60s unless given"));
}

TEST_CASE("a budget given twice and a rate above 100% are refused", "[cli][budget][hardening]") {
  auto twice = run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml --budget bubble_rate=5% --budget bubble_rate=10%");
  CHECK(twice.exit_code == 1);
  CHECK(has(twice.out, "--budget bubble_rate is given twice ('5%' and '10%'); give it once"));
  auto rate = run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml --budget bubble_rate=200%");
  CHECK(rate.exit_code == 1);
  CHECK(has(rate.out, "a rate is at most 1 (100%), got '200%'"));
  // Two different budgets are fine.
  auto two = run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml --budget bubble_rate=90% --budget messages=100000");
  CHECK(two.exit_code == 0);
}

TEST_CASE("numerics refuses a negative or absurd solver timeout", "[cli][numerics][hardening]") {
  for (const char* t : {"-1", "0", "1e10"}) {
    auto r = run_schedcheck(std::string("numerics --dtype bf16 --ranks 8 --smt --smt-timeout ") + t);
    INFO(t);
    CHECK(r.exit_code == 2);
    CHECK(has(r.out, "--smt-timeout must be a number of seconds in (0, 4000000]"));
  }
}

TEST_CASE("GitHub annotations show control characters escaped", "[ci][hardening]") {
  // ESC and \x01 from spec text reached the CI log raw.
  CHECK(sc::github_escape("a\x1b[31mb\x01", false) == "a\\x1b[31mb\\x01");
  CHECK(sc::github_escape("t\x7f", true) == "t\\x7f");
}

TEST_CASE("front-end detection reads top-level keys without parsing", "[spec][hardening]") {
  using sc::yaml_util::declares_key;
  CHECK(declares_key("# c\nschedcheck: 1\nrouter:\n  experts: 8\n", "router"));
  CHECK(declares_key("\"router\": {experts: 8}\n", "router"));
  CHECK(declares_key("router:\r\n  experts: 8\r\n", "router"));
  CHECK_FALSE(declares_key("schedcheck: 1\nmodel:\n  router: 1\n", "router"));  // nested
  CHECK_FALSE(declares_key("routers: 1\nrouter_x: 2\n", "router"));
  CHECK_FALSE(declares_key("desc: |\n  router: inside a block scalar\n", "router"));
  CHECK(declares_key("{router: {experts: 8}}\n", "router"));  // flow style: parsed
  CHECK_FALSE(declares_key("{model: {router: 1}}\n", "router"));
  CHECK(declares_key("router:\n  - [broken\n", "router"));  // broken YAML: the line decides
  CHECK_FALSE(declares_key(std::string("router:\0", 8), "router"));
}

TEST_CASE("a YAML file past the input cap is refused before any front-end reads it", "[cli][hardening]") {
  // A sparse 300 MiB file: router detection once read it whole.
  const std::string path = write_temp(kDir, "huge.yaml", "");
  fs::resize_file(path, uint64_t{300} << 20);
  auto r = run_schedcheck("verify '" + path + "'");
  INFO(r.out.substr(0, 400));
  CHECK(r.exit_code == 2);
  CHECK(has(r.out, "larger than 256 MiB"));
  fs::remove(path);
}

TEST_CASE("a named schedule is bounded in memory before it is generated", "[cli][spec][hardening]") {
  // 94 bytes that named 65,536 ranks x 48 microbatches of zb-h1 (2.3 GiB with implicit transfers,
  // about 4.3 GiB lowered): past the 4 GiB budget at the measured 1,400 bytes per pair.
  const std::string path = write_temp(kDir, "named-huge.yaml",
                                      "schedcheck: 1\nranks: 65536\nmicrobatches: 48\nschedule: {name: zb-h1}\n");
  auto r = run_schedcheck("verify '" + path + "'");
  CHECK(r.exit_code == 2);
  CHECK(has(r.out, "named-huge.yaml:4:18: error: zb-h1 at 65536 stages x 48 microbatches is 3.15e+06 (stage, "
                   "microbatch) pairs, more than the 3.07e+06 schedcheck checks at once"));
}

TEST_CASE("numerics bounds ranks x samples before it runs", "[cli][numerics][hardening]") {
  // --ranks 100000 ran 59 s; the emulation is linear in ranks x samples.
  auto r = run_schedcheck("numerics --dtype bf16 --ranks 100000 --samples 1024");
  CHECK(r.exit_code == 2);
  CHECK(has(r.out, "--ranks 100000 x --samples 1024 is 1.02e+08 element reductions per distribution, more than the "
                   "16777216 (about 30 s) one run takes; give fewer --samples (at most 167)"));
}
