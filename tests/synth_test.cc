// Synthesis: optimal spans against an exhaustive search over every order, and verify on the output.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "pipeline/verify_pipeline.h"
#include "fixtures.h"
#include "order_sim.h"
#include "solver/synth.h"

namespace {

using sc::ActionKind;
using sc::Step;
using sc::test::step;

// Every order of one stage's ops in which F(j) < I(j) < W(j) (or F(j) < B(j)); with `monotone`
// also F, I, W each in microbatch order.
std::vector<std::vector<Step>> stage_orders(int32_t stage, int32_t m, bool split, bool monotone) {
  std::vector<std::vector<Step>> out;
  std::vector<int> state(m, 0);  // 0 none, 1 F done, 2 I/B done, 3 W done
  std::vector<Step> cur;
  int kinds = split ? 3 : 2;
  std::function<void()> rec = [&] {
    if (static_cast<int32_t>(cur.size()) == kinds * m) {
      out.push_back(cur);
      return;
    }
    for (int32_t j = 0; j < m; ++j) {
      if (state[j] >= kinds) continue;
      // Monotone: the next op of this kind must be the lowest microbatch still waiting for it.
      if (monotone && j > 0 && state[j - 1] <= state[j]) continue;
      ActionKind k = state[j] == 0 ? ActionKind::kF : state[j] == 1 ? (split ? ActionKind::kI : ActionKind::kB) : ActionKind::kW;
      cur.push_back(step(k, stage, j));
      ++state[j];
      rec();
      --state[j];
      cur.pop_back();
    }
  };
  rec();
  return out;
}

// The least span per memory limit over every combination of the given per-stage orders.
std::map<int64_t, int64_t> best_span_by_peak(int32_t p, int32_t m, bool split, bool monotone, int64_t act, int64_t wg) {
  std::vector<std::vector<std::vector<Step>>> per_stage;
  for (int32_t s = 0; s < p; ++s) per_stage.push_back(stage_orders(s, m, split, monotone));
  return sc::test::least_span_by_peak(per_stage, [&](const std::vector<const std::vector<Step>*>& cur) {
    // Unit costs (F = I = W = 1, B = 2), no link time, no params.
    sc::ChainShape sh;
    sh.m = m;
    sh.f.assign(p, 1);
    sh.i.assign(p, split ? 1 : 2);
    sh.w.assign(p, split ? 1 : 0);
    sh.act.assign(p, act);
    sh.wgrad.assign(p, split ? wg : 0);
    std::vector<std::vector<sc::test::Op>> ops;
    for (const auto* o : cur) {
      ops.emplace_back();
      for (const Step& st : *o)
        ops.back().push_back({st.first.kind == ActionKind::kF ? 0 : st.first.kind == ActionKind::kW ? 2 : 1, st.first.microbatch});
    }
    std::vector<const std::vector<sc::test::Op>*> ptrs;
    for (const auto& o : ops) ptrs.push_back(&o);
    std::optional<std::pair<int64_t, int64_t>> out;
    if (auto r = sc::test::run_orders(sh, std::vector<int64_t>(p, 0), ptrs)) out = std::make_pair(r->peak, r->span);
    return out;
  });
}

using sc::test::optimum_at;

sc::PipelineSpec unit_spec(int32_t p, int32_t m, bool split) {
  sc::PipelineSpec s = sc::test::make_spec("synth", p, m, std::vector<std::vector<Step>>(p));
  if (!split) {
    s.costs.i_s.assign(p, 0);
    s.costs.w_s.assign(p, 0);
    s.costs.b_s.assign(p, 2);
  }
  s.actions.clear();
  return s;
}

// The solver's own proofs: the closed-form bounds (tested in synth_bounds_test.cc) are off.
sc::SynthOptions pinned() {
  sc::SynthOptions o;
  o.closed_form_bounds = false;
  o.seed = 7;
  o.rlimit = 50'000'000;
  o.time_limit_s = 60;
  return o;
}

// Runs synthesize for every limit in [lo, hi] and compares with the exhaustive search; every
// schedule it returns must pass verify with the span it claims.
void compare_with_exhaustive(int32_t p, int32_t m, bool split, int64_t lo, int64_t hi, bool monotone = true) {
  auto by_peak = best_span_by_peak(p, m, split, monotone, 2, 1);
  for (int64_t limit = lo; limit <= hi; ++limit) {
    INFO("p = " << p << ", m = " << m << (split ? ", I/W" : ", B") << ", limit " << limit);
    sc::SynthOptions o = pinned();
    o.limit_bytes = limit;
    sc::PipelineSpec spec = unit_spec(p, m, split);
    sc::SynthResult r = sc::synthesize(spec, o);
    std::optional<int64_t> want = optimum_at(by_peak, limit);
    if (!want) {
      CHECK(r.status == sc::SynthStatus::kInfeasible);
      CHECK_FALSE(r.core.empty());
      continue;
    }
    REQUIRE(r.status == sc::SynthStatus::kOptimal);
    CHECK(r.best_s == Approx(static_cast<double>(*want)));
    CHECK(r.lower_bound_s == Approx(static_cast<double>(*want)));
    REQUIRE(r.has_schedule);
    spec.actions = r.actions;
    spec.memory.limit_bytes = limit;
    sc::VerifyResult v = sc::verify(spec, sc::VerifyOptions{});
    CHECK(v.findings.empty());
    REQUIRE(v.timeline);
    CHECK(v.timeline->span_s == Approx(static_cast<double>(*want)));
  }
}

}  // namespace

TEST_CASE("the exhaustive search agrees that microbatch order per stage loses nothing at p = 2, m = 2", "[solver]") {
  // Symmetry breaking is sound here: every order (not only monotone ones) reaches the same optima.
  auto all = best_span_by_peak(2, 2, true, false, 2, 1);
  auto mono = best_span_by_peak(2, 2, true, true, 2, 1);
  for (int64_t limit = 1; limit <= 6; ++limit) CHECK(optimum_at(all, limit) == optimum_at(mono, limit));
}

TEST_CASE("synth finds the optimal span at p = 2, m = 3 for every memory limit, as an exhaustive search does", "[solver]") {
  compare_with_exhaustive(2, 3, true, 1, 7);
}

TEST_CASE("synth finds the optimal span at p = 3, m = 3 for every memory limit, as an exhaustive search does", "[solver]") {
  compare_with_exhaustive(3, 3, true, 1, 9);
}

TEST_CASE("synth with a full backward B finds the optimal span at p = 3, m = 4, as an exhaustive search does", "[solver]") {
  compare_with_exhaustive(3, 4, false, 1, 9);
}

TEST_CASE("synth proves span 27 optimal at p = 4, m = 8 with limit 8 (ZB-H1 is optimal there)", "[solver]") {
  // docs/facts/pipeline-schedules.md: optimal spans under a memory limit, p = 4, m = 8, unit costs, M_B = 2, M_W = 1.
  sc::PipelineSpec spec = unit_spec(4, 8, true);
  sc::SynthOptions o = pinned();
  o.limit_bytes = 8;
  sc::SynthResult r = sc::synthesize(spec, o);
  REQUIRE(r.status == sc::SynthStatus::kOptimal);
  CHECK(r.best_s == Approx(27));
  CHECK(r.warm_start_s == Approx(27));  // ZB-H1 (or a schedule equal to it)
  CHECK(r.structural_lower_bound_s == Approx(24));
  REQUIRE_FALSE(r.probes.empty());
  CHECK(r.probes.back().answer == "unsat");
  CHECK(r.probes.back().bound_s == Approx(26));
  CHECK(r.order_booleans > 0);
}

TEST_CASE("synth reports infeasible with the memory limit in the core when one activation does not fit", "[solver]") {
  sc::PipelineSpec spec = unit_spec(3, 4, true);
  sc::SynthOptions o = pinned();
  o.limit_bytes = 1;
  sc::SynthResult r = sc::synthesize(spec, o);
  CHECK(r.status == sc::SynthStatus::kInfeasible);
  CHECK_FALSE(r.has_schedule);
  REQUIRE_FALSE(r.core.empty());
  CHECK(r.core.front().rfind("memory.limit_bytes (rank ", 0) == 0);
}

TEST_CASE("synth never claims optimality when the resource limit stops it, it keeps the warm start", "[solver]") {
  sc::PipelineSpec spec = unit_spec(4, 8, true);
  sc::SynthOptions o = pinned();
  o.rlimit = 1;
  o.limit_bytes = 10;
  sc::SynthResult r = sc::synthesize(spec, o);
  CHECK(r.status == sc::SynthStatus::kFeasible);
  REQUIRE(r.has_schedule);
  CHECK(r.best_s >= 26);  // the optimum (docs/facts/pipeline-schedules.md); the warm starts reach 26 or 27
  CHECK(r.best_s <= 27);
  CHECK(r.lower_bound_s == Approx(24));
  CHECK(r.probes.back().answer == "unknown");
}

TEST_CASE("synth minimises the makespan when asked and verify confirms it", "[solver]") {
  sc::PipelineSpec spec = unit_spec(3, 3, true);
  sc::SynthOptions o = pinned();
  o.objective = sc::SynthObjective::kMakespan;
  o.limit_bytes = 6;
  sc::SynthResult r = sc::synthesize(spec, o);
  REQUIRE(r.status == sc::SynthStatus::kOptimal);
  spec.actions = r.actions;
  spec.memory.limit_bytes = 6;
  sc::VerifyResult v = sc::verify(spec, sc::VerifyOptions{});
  REQUIRE(v.timeline);
  CHECK(v.findings.empty());
  CHECK(v.timeline->makespan_s <= r.best_s + 1e-9);
  // The last rank starts after two forwards and has 9 s of work.
  CHECK(r.best_s >= 2 + 9);
}

using sc::test::CliRun;
using sc::test::run_schedcheck;

TEST_CASE("synth on the bundled example prints optimal span 27 and writes a spec that verify accepts", "[solver]") {
  std::string out = (std::filesystem::temp_directory_path() / "schedcheck_synth_p4m8.yaml").string();
  CliRun r = run_schedcheck("synth examples/synth-p4-m8.yaml --seed 3 --rlimit 50000000 -o " + out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("optimal span 27 s: no schedule within the limit does better (proven)") != std::string::npos);
  // B1 proves it (D_0 = 7 against 4 F's before the first I): no solver probe is needed.
  CHECK(r.out.find("memory-aware lower bound: 27 s (B1 (stage 0))") != std::string::npos);
  CHECK(r.out.find("probe:") == std::string::npos);
  CliRun v = run_schedcheck("verify " + out + " --engine smt");
  CHECK(v.exit_code == 0);
  CHECK(v.out.find("agrees with the graph engine") != std::string::npos);
  std::filesystem::remove(out);
}

TEST_CASE("synth exits 13 with the core when no order fits the limit, and the JSON names the status", "[solver]") {
  CliRun r = run_schedcheck("synth examples/synth-p4-m8.yaml --memory-limit 1 --format json --rlimit 50000000");
  CHECK(r.exit_code == 13);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["status"] == "infeasible");
  REQUIRE(j["core"].size() >= 1);
  CHECK(j["core"][0].get<std::string>().rfind("memory.limit_bytes (rank ", 0) == 0);
  CHECK(j["best"].is_null());
}
