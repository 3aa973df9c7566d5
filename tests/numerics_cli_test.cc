// Golden command-line tests of `schedcheck numerics`, and the Z3 worst case (solver/numerics_smt).
// SCHEDCHECK_UPDATE_GOLDEN=1 rewrites tests/golden/numerics-*.txt (review a regeneration like code).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "numerics/analysis.h"
#include "solver/numerics_smt.h"
#include "test_util.h"

namespace {

void check_numerics_golden(const std::string& name, const std::string& actual) {
  std::string path = sc::test::source_path("tests/golden/" + name);
  if (std::getenv("SCHEDCHECK_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << actual;
    WARN("rewrote " << path);
    return;
  }
  REQUIRE(std::filesystem::exists(path));
  CHECK(sc::test::read_file(path) == actual);
}

}  // namespace

TEST_CASE("numerics reports a bf16 avg over 1024 ranks as violated, with fixes side by side", "[numerics][cli]") {
  auto r = sc::test::run_schedcheck("numerics --dtype bf16 --op avg --ranks 1024 --algorithm ring --samples 256 "
                                    "--max-relative-error 1e-3 --max-bias 1e-3");
  CHECK(r.exit_code == 17);
  check_numerics_golden("numerics-bf16-avg-1024.txt", r.out);
}

TEST_CASE("numerics with an fp32 reduction over 1024 ranks holds at 1e-3", "[numerics][cli]") {
  auto r = sc::test::run_schedcheck("numerics --dtype fp32 --op avg --ranks 1024 --samples 256 --no-fixes "
                                    "--max-relative-error 1e-3 --max-bias 1e-3");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("verdict: holds\n") != std::string::npos);
}

TEST_CASE("numerics --format json has the stable keys and the findings with witnesses", "[numerics][cli]") {
  auto r = sc::test::run_schedcheck("numerics --dtype fp16 --op avg --ranks 1024 --samples 128 --format json", false);
  CHECK(r.exit_code == 17);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["verdict"] == "violated");
  CHECK(j["exit_code"] == 17);
  CHECK(j["config"]["dtype"] == "fp16");
  CHECK(j["config"]["nccl_scalar"] == 0.0009765625);
  CHECK(j["tolerances"]["defaults"] == true);
  CHECK(j["figures"]["bias"].size() == 3);
  CHECK(j["figures"]["bias"][0]["samples"] == 128);
  CHECK(j["figures"]["underflow"]["input"] == 3.0517578125e-05);
  CHECK(j["figures"]["underflow"]["stage"] == "pre-multiply");
  bool underflow = false;
  for (const auto& f : j["findings"]) {
    CHECK(f["kind"] == "numerics");
    if (f["check"] == "underflow") {
      underflow = true;
      CHECK(f["witness"] == "[3.051757812e-05 x 1024]");
    }
  }
  CHECK(underflow);
  REQUIRE(j["fixes"].size() == 5);
  CHECK(j["fixes"][0]["name"] == "fp32 reduction");
  CHECK(j["fixes"][0]["bytes_ratio"] == 2.0);
  CHECK(j["fixes"][0]["figures"]["underflow"]["found"] == false);
  CHECK(j["proof"].is_null());
}

TEST_CASE("numerics refuses bad values with exit 2 and bad options with exit 1", "[numerics][cli]") {
  auto r = sc::test::run_schedcheck("numerics --dtype bf61 --op mean --ranks 0");
  CHECK(r.exit_code == 2);
  CHECK(r.out == "schedcheck: error: --dtype: unknown dtype 'bf61' (did you mean 'bf16'?) (expected fp32, bf16, fp16, "
                 "fp8_e4m3, fp8_e5m2)\n"
                 "schedcheck: the collective's configuration has errors; nothing was analysed\n");
  r = sc::test::run_schedcheck("numerics --ranks 0");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("ranks must be at least 1 (got 0)") != std::string::npos);
  r = sc::test::run_schedcheck("numerics --algorithm ring --accum fp32");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("ring has no accumulation type") != std::string::npos);
  r = sc::test::run_schedcheck("numerics --ranks eight");
  CHECK(r.exit_code == 1);
  r = sc::test::run_schedcheck("numerics --format xml");
  CHECK(r.exit_code == 1);
}

TEST_CASE("Z3 proves the worst case of a two-rank bf16 sum and replays the witness", "[numerics][solver]") {
  sc::numerics::ReductionConfig c;
  c.dtype = sc::numerics::DType::kBf16;
  c.ranks = 2;
  sc::NumericsSmtOptions opt;
  opt.window_binades = 9;
  opt.timeout_ms = 600'000;
  opt.rlimit = 200'000'000;
  auto r = sc::smt_worst_case(c, opt);
  REQUIRE(r.status == sc::numerics::SmtStatus::kProven);
  CHECK(r.relative_error == Approx(1.0 / 257).epsilon(1e-12));  // 2^-8 / (1 + 2^-8): a tie lost to even
  REQUIRE(r.witness.size() == 2);
  CHECK(sc::numerics::reduce_element(c, r.witness) == r.computed);
}

// Slow: 77 s wall inside `ctest -j2` on a loaded 2-core machine (README); the checks run on every core.
TEST_CASE("Z3 proves that nothing is worse than the tie family for an eight-rank bf16 ring sum", "[numerics][solver]") {
  sc::numerics::ReductionConfig c;
  c.dtype = sc::numerics::DType::kBf16;
  c.ranks = 8;
  sc::NumericsSmtOptions opt;
  opt.timeout_ms = 1'200'000;
  opt.rlimit = 0;  // bounded by the time limit instead: the step checks vary with load, and an exhausted rlimit
                   // would only make the answer inconclusive, never wrong
  auto r = sc::smt_worst_case(c, opt);
  INFO(r.detail);
  REQUIRE(r.status == sc::numerics::SmtStatus::kProven);
  CHECK(r.checks == 6 * 7);  // six step checks per addition, the search not needed
  // docs/facts/numerics.md: bf16 1 + 2^-8 = 1 (a tie that rounds to even), so 1 followed by seven 2^-8 sums to 1
  // while the exact sum is 263/256: relative error 7/263 = (N - 1) / (2^8 + N - 1).
  CHECK(r.relative_error == 7.0 / 263);
  REQUIRE(r.witness.size() == 8);
  CHECK(r.witness.front() == 1);
  CHECK(r.computed == 1);
  CHECK(r.exact == 263.0 / 256);
  CHECK(sc::numerics::reduce_element(c, r.witness) == 1);
  CHECK(r.detail.find("induction") != std::string::npos);
}

TEST_CASE("Z3 on an eight-rank bf16 ring sum never claims a proof it did not finish", "[numerics][solver]") {
  sc::numerics::ReductionConfig c;
  c.dtype = sc::numerics::DType::kBf16;
  c.ranks = 8;
  sc::NumericsSmtOptions opt;
  opt.rlimit = 2'000'000;
  opt.timeout_ms = 600'000;
  auto r = sc::smt_worst_case(c, opt);
  // With this little effort the proof cannot finish; the best input known is the tie family's.
  CHECK(r.status != sc::numerics::SmtStatus::kProven);
  CHECK(r.relative_error == Approx(7.0 / 263).epsilon(1e-12));
  REQUIRE(r.witness.size() == 8);
  CHECK(r.witness.front() == 1);
  CHECK(sc::numerics::reduce_element(c, r.witness) == 1);
  c.op = sc::numerics::ReduceOp::kAvg;
  CHECK(sc::smt_worst_case(c, opt).status == sc::numerics::SmtStatus::kUnsupported);
}
