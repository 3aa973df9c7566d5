// The numerics pass inside the one verify: reducing collectives carry their arithmetic from the
// front-end, and a spec's tolerances decide the verdict.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"
#include "report/numerics_report.h"
#include "test_util.h"

using namespace sc;

namespace {

VerifyResult verify_text(const std::string& name, const std::string& text) {
  Diagnostics d;
  auto spec = load_fsdp_spec(test::write_temp("schedcheck-numerics-pass-test", name, text), d);
  INFO(name);
  REQUIRE_FALSE(d.has_errors());
  REQUIRE(spec);
  return verify_fsdp(*spec);
}

std::string fsdp2_spec(const std::string& reduce) {
  return "schedcheck: 1\nranks: 1024\nnumerics: {max_relative_error: 1e-3, max_bias: 1e-3}\n"
         "fsdp:\n  implementation: fsdp2\n  shard_size: 1024\n"
         "  dtypes: {param: bf16, reduce: " + reduce + "}\n"
         "  link: {bandwidth: 450GB/s, latency: 10us}\n  iterations: 1\n"
         "  units:\n    - {name: layer, repeat: 2, params: 218M, forward: 3.6ms, backward: 7.2ms, activation_bytes: 432MiB}\n";
}

}  // namespace

TEST_CASE("an FSDP2 bf16 reduce over 1024 ranks fails a 1e-3 tolerance, fp32 holds", "[numerics]") {
  VerifyResult bf16 = verify_text("bf16.yaml", fsdp2_spec("bf16"));
  REQUIRE(bf16.exit_code == 17);
  const Finding& f = bf16.findings.at(0);
  CHECK(f.kind == FindingKind::kNumerics);
  CHECK(std::string(kind_name(f.kind)) == "numerics");
  CHECK(f.message.find("bf16 avg reduce_scatter over 1024 ranks") != std::string::npos);
  // The witness of docs/facts/numerics.md's stagnation: one large value and many half-ulp values; the ring
  // keeps 0.0009766 of the exact 0.004879 (a relative error of 0.80).
  CHECK(f.message.find("[1, 0.00390625 x 1023]") != std::string::npos);
  CHECK(f.message.find("0.7998") != std::string::npos);
  REQUIRE_FALSE(f.locations.empty());
  // The value that chose the reduce dtype: `reduce: bf16` on line 7, at its column.
  CHECK(f.locations[0].line == 7);
  CHECK(f.locations[0].col == static_cast<int>(std::string("  dtypes: {param: bf16, reduce: ").size()) + 1);
  // Every collective with this arithmetic is analysed once: one configuration, RS over 1024.
  VerifyResult fp32 = verify_text("fp32.yaml", fsdp2_spec("fp32"));
  CHECK(fp32.findings.empty());
  CHECK(fp32.exit_code == 0);
}

TEST_CASE("a bare fp8 reduce dtype is analysed as both fp8 formats, not skipped", "[numerics]") {
  // "fp8" names no format: the pass checks e4m3 and e5m2 (each worse than bf16 here: 3 and 2
  // mantissa bits) and reports each that fails, at the dtype that chose it.
  VerifyResult fp8 = verify_text("fp8.yaml", fsdp2_spec("fp8"));
  REQUIRE(fp8.exit_code == 17);
  bool e4m3 = false, e5m2 = false;
  for (const Finding& f : fp8.findings) {
    REQUIRE(f.kind == FindingKind::kNumerics);
    e4m3 |= f.message.find("fp8_e4m3") != std::string::npos;
    e5m2 |= f.message.find("fp8_e5m2") != std::string::npos;
    REQUIRE_FALSE(f.locations.empty());
    CHECK(f.locations[0].line == 7);
  }
  CHECK(e4m3);
  CHECK(e5m2);
}

TEST_CASE("a reduction carries the framework's arithmetic into the IR", "[numerics]") {
  VerifyResult r = verify_text("arith.yaml", fsdp2_spec("fp32"));
  const Program& p = r.program;
  REQUIRE(p.arithmetic.size() == 1);
  CHECK(std::string(p.arithmetic[0].op) == "avg");  // FSDP2 averages in the collective
  int reducing = 0;
  for (const Op& o : p.ops)
    if (o.kind == OpKind::kCollective && o.collective == CollectiveKind::kReduceScatter) {
      CHECK(o.arith() == 0);
      ++reducing;
    }
  // Every rank runs the same program: one rank is built for the 1024 (docs/facts/symmetry.md),
  // its reduce-scatters timed and analysed over the whole shard group.
  REQUIRE(p.rank_classes.size() == 1);
  CHECK(p.rank_classes[0].count == 1024);
  CHECK(reducing == 2);
  for (const Communicator& c : p.comms) CHECK(c.group_size() == 1024);
}

TEST_CASE("the verify report shows the usual fixes next to a numerics finding, with bytes and time", "[numerics][report]") {
  VerifyResult bf16 = verify_text("fixes.yaml", fsdp2_spec("bf16"));
  REQUIRE(bf16.exit_code == 17);
  REQUIRE(bf16.numerics_fixes.size() == 1);  // one configuration: bf16 avg reduce_scatter over 1024
  const NumericsFixes& fx = bf16.numerics_fixes[0];
  CHECK(fx.ops.size() == 2);  // the built rank's reduce-scatter of both units; it stands for 1024
  // As configured: docs/facts/numerics.md's stagnation witness (one large value, the rest half an ulp) loses 0.7998.
  CHECK(fx.analysis.figures.worst.relative_error == Approx(0.7998).epsilon(1e-3));
  const numerics::Fix* fp32 = nullptr;
  for (const auto& f : fx.analysis.fixes)
    if (f.name == "fp32 reduction") fp32 = &f;
  REQUIRE(fp32 != nullptr);
  CHECK(fp32->bytes_ratio == 2);  // 4-byte elements instead of 2
  CHECK(fp32->figures.worst.relative_error < 1e-3);  // within the spec's tolerance
  std::optional<double> t = numerics_collective_time_s(fx, bf16);
  REQUIRE(t);
  CHECK(*t > 0);

  std::ostringstream text;
  write_fsdp_text_report(text, bf16);
  INFO(text.str());
  CHECK(text.str().find("\nnumerics fixes:\n  bf16 avg reduce_scatter over 1024 ranks") != std::string::npos);
  CHECK(text.str().find("2048 collective ops") != std::string::npos);
  CHECK(text.str().find("    fp32 reduction ") != std::string::npos);
  CHECK(text.str().find("(x2)") != std::string::npos);

  nlohmann::json j = nlohmann::json::parse(fsdp_json_report(bf16));
  REQUIRE(j["numerics_fixes"].size() == 1);
  const auto& row = j["numerics_fixes"][0];
  CHECK(row["config"]["dtype"] == "bf16");
  CHECK(row["config"]["collective"] == "reduce_scatter");
  CHECK(row["collective_ops"] == 2048);
  CHECK(row["collective_time_s"].get<double>() == Approx(*t));
  bool seen = false;
  for (const auto& f : row["fixes"])
    if (f["name"] == "fp32 reduction") {
      seen = true;
      CHECK(f["bytes_ratio"] == 2);
      CHECK(f["time_s"].get<double>() == Approx(2 * *t));
      CHECK(f["config"]["dtype"] == "fp32");
    }
  CHECK(seen);

  // A configuration that holds has no fixes to show.
  VerifyResult fp32r = verify_text("fixes-fp32.yaml", fsdp2_spec("fp32"));
  CHECK(fp32r.numerics_fixes.empty());
  CHECK_FALSE(nlohmann::json::parse(fsdp_json_report(fp32r)).contains("numerics_fixes"));
}

TEST_CASE("numerics.deterministic makes an order-dependent reduction a finding with both fold orders", "[numerics]") {
  // NVIDIA/nccl#1055: the ring's start and the channel count change a sum bitwise. bf16 avg over
  // 8 ranks of [1, 2^-8 x 7]: the ring from rank 0 meets the 1 first and loses each half-ulp
  // term (1/8 = 0.125), the ring from rank 1 adds the seven small terms first (0.1289...);
  // exactly (1 + 7/256) / 8 = 0.12841796875.
  const std::string spec = "schedcheck: 1\nranks: 8\nnumerics: {deterministic: true}\n"
                           "fsdp:\n  implementation: fsdp2\n  shard_size: 8\n"
                           "  dtypes: {param: bf16, reduce: bf16}\n"
                           "  link: {bandwidth: 450GB/s, latency: 10us}\n  iterations: 1\n"
                           "  units:\n    - {name: layer, params: 218M, forward: 3.6ms, backward: 7.2ms, activation_bytes: 432MiB}\n";
  VerifyResult r = verify_text("deterministic.yaml", spec);
  REQUIRE(r.exit_code == 17);
  REQUIRE(r.findings.size() == 1);
  const Finding& f = r.findings[0];
  CHECK(f.kind == FindingKind::kNumerics);
  CHECK(f.message ==
        "bf16 avg reduce_scatter over 8 ranks, ring, 1 channel: the result depends on the fold order NCCL picks: "
        "ring from rank 0 gives 0.125, ring from rank 1 gives 0.12890625 (exact 0.1284179688) on input "
        "[1, 0.00390625 x 7] (one large, rest half an ulp), so its bits are not reproducible across ring starts, "
        "channel counts or algorithms (numerics.deterministic)");
  // Without the key the same spec holds (the order dependence stays a figure).
  std::string plain = spec;
  plain.replace(plain.find("numerics: {deterministic: true}\n"), std::string("numerics: {deterministic: true}\n").size(), "");
  VerifyResult held = verify_text("not-deterministic.yaml", plain);
  CHECK(held.findings.empty());
  // max does not depend on the order: nothing to find even when asked.
  numerics::ReductionConfig c;
  c.dtype = numerics::DType::kBf16;
  c.ranks = 8;
  c.op = numerics::ReduceOp::kMax;
  numerics::Tolerances tol;
  tol.deterministic = true;
  numerics::AnalysisOptions opt;
  opt.samples = 64;
  opt.fixes = false;
  for (const auto& n : numerics::numerics_findings(numerics::analyze(c, opt), tol)) CHECK(n.check != "deterministic");
  // A value that is not a boolean is a located error.
  Diagnostics d;
  std::string bad = spec;
  bad.replace(bad.find("true}"), 4, "maybe");
  load_fsdp_spec(test::write_temp("schedcheck-numerics-pass-test", "bad.yaml", bad), d);
  REQUIRE(d.has_errors());
  CHECK(d.all()[0].message == "numerics.deterministic must be true or false, got 'maybe'");
  CHECK(d.all()[0].loc.line == 3);
}

TEST_CASE("FSDP2's gradient_divide_factor reduces as _get_gradient_divide_factors computes it", "[numerics]") {
  // torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py @ 010ae4a: bf16/fp32 use avg when the
  // factor is the shard group's size, else premul_sum(1/factor); fp16 sums between a pre-divide
  // (1, doubled while factor % p == 0 and factor / p > p) and factor / p.
  using numerics::DType;
  using numerics::ReduceOp;
  const auto same = numerics::fsdp2_gradient_divide(DType::kBf16, 8, 8);
  CHECK(same.op == ReduceOp::kAvg);
  const auto premul = numerics::fsdp2_gradient_divide(DType::kFp32, 8, 1024);
  CHECK(premul.op == ReduceOp::kPremulSum);
  CHECK(premul.premul_factor == 1.0 / 1024);
  const auto fp16 = numerics::fsdp2_gradient_divide(DType::kFp16, 8, 1000);
  CHECK(fp16.op == ReduceOp::kSum);
  CHECK(fp16.pre_divide == 16);  // 1, 2, 4, 8 divide 1000 with 1000 / p > p; then 16, which does not divide it
  CHECK(fp16.post_divide == 62.5);
  // In a spec: fsdp.options.gradient_divide_factor sets the reduce-scatter's arithmetic, and a
  // numerics finding about it points at the value.
  const std::string spec = "schedcheck: 1\nranks: 8\nnumerics: {deterministic: true}\n"
                           "fsdp:\n  implementation: fsdp2\n  shard_size: 8\n"
                           "  dtypes: {param: bf16, reduce: bf16}\n"
                           "  link: {bandwidth: 450GB/s, latency: 10us}\n  iterations: 1\n"
                           "  options: {gradient_divide_factor: 3}\n"
                           "  units:\n    - {name: layer, params: 218M, forward: 3.6ms, backward: 7.2ms, activation_bytes: 432MiB}\n";
  VerifyResult r = verify_text("divide-factor.yaml", spec);
  bool premul_seen = false;
  for (const CollectiveArithmetic& a : r.program.arithmetic)
    if (std::string(a.op) == "premul_sum") {
      premul_seen = true;
      CHECK(a.premul_factor == 1.0 / 3);
    }
  CHECK(premul_seen);
  REQUIRE(r.exit_code == 17);
  const Finding& f = r.findings.at(0);
  CHECK(f.message.rfind("bf16 premul_sum (factor 0.3333333333) reduce_scatter over 8 ranks", 0) == 0);
  REQUIRE_FALSE(f.locations.empty());
  CHECK(f.locations[0].line == 10);
  CHECK(f.locations[0].col == static_cast<int>(std::string("  options: {gradient_divide_factor: ").size()) + 1);
  // Only FSDP2 has the option.
  std::string fsdp1 = spec;
  fsdp1.replace(fsdp1.find("implementation: fsdp2"), std::string("implementation: fsdp2").size(), "implementation: fsdp1");
  Diagnostics d;
  load_fsdp_spec(test::write_temp("schedcheck-numerics-pass-test", "fsdp1-factor.yaml", fsdp1), d);
  REQUIRE(d.has_errors());
  CHECK(d.all()[0].message == "gradient_divide_factor is an fsdp2 option; this spec uses fsdp1");
}

TEST_CASE("results that come out as inf or NaN are an overflow finding, never left out of the verdict",
          "[numerics]") {
  // premul_sum by 1e300 in bf16: NCCL's scalar bf16(1e300) is inf, so every typical gradient
  // becomes inf. The bias figures leave such elements out, which once left error 0, "0 samples
  // (1024 left out)", no finding and exit 0.
  numerics::ReductionConfig c;
  c.dtype = numerics::DType::kBf16;
  c.op = numerics::ReduceOp::kPremulSum;
  c.premul_factor = 1e300;
  c.ranks = 8;
  c.collective = numerics::CollectiveKind::kReduceScatter;
  numerics::AnalysisOptions opt;
  opt.samples = 64;
  opt.fixes = false;
  const numerics::Analysis a = numerics::analyze(c, opt);
  REQUIRE_FALSE(a.figures.biases.empty());
  CHECK(a.figures.biases[0].nonfinite == 64);
  CHECK(a.figures.biases[0].nonfinite_stage == "pre-multiply");
  const auto found = numerics::numerics_findings(a, numerics::Tolerances{});
  const auto it = std::find_if(found.begin(), found.end(), [](const numerics::NumericsFinding& n) {
    return n.check == "overflow" && n.message.find("inf or NaN") != std::string::npos;
  });
  REQUIRE(it != found.end());
  CHECK(it->message ==
        "bf16 premul_sum (factor 1e+300) reduce_scatter over 8 ranks, ring, 1 channel: 64 of 64 consensus gradients "
        "come out as inf or NaN (first lost in the pre-multiply, where NCCL's scalar 1e+300 becomes inf in the "
        "element type)");
  // A factor that fits makes no such finding.
  c.premul_factor = 0.125;
  for (const auto& n : numerics::numerics_findings(numerics::analyze(c, opt), numerics::Tolerances{}))
    CHECK(n.message.find("inf or NaN") == std::string::npos);
  // From a spec: FSDP2's gradient_divide_factor 1e-300 multiplies by 1e300 (premul_sum in bf16).
  const std::string spec = "schedcheck: 1\nranks: 8\n"
                           "fsdp:\n  implementation: fsdp2\n  shard_size: 8\n"
                           "  dtypes: {param: bf16, reduce: bf16}\n"
                           "  link: {bandwidth: 450GB/s, latency: 10us}\n  iterations: 1\n"
                           "  options: {gradient_divide_factor: 1e-300}\n"
                           "  units:\n    - {name: layer, params: 218M, forward: 3.6ms, backward: 7.2ms, activation_bytes: 432MiB}\n";
  VerifyResult r = verify_text("divide-factor-tiny.yaml", spec);
  CHECK(r.exit_code == 17);
  bool overflow_seen = false;
  for (const Finding& f : r.findings)
    if (f.message.find("come out as inf or NaN") != std::string::npos) {
      overflow_seen = true;
      REQUIRE_FALSE(f.locations.empty());
      CHECK(f.locations[0].line == 9);
    }
  CHECK(overflow_seen);
}
