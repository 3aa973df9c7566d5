// The closed-form span bounds B1-B3 against exhaustive searches over every order (no symmetry
// breaking) and the solver's optimum, on random instances; hand-checked values; the Zero Bubble
// heuristic.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "fixtures.h"
#include "order_sim.h"
#include "pipeline/verify_pipeline.h"
#include "solver/synth.h"
#include "solver/synth_bounds.h"

namespace {

using sc::ChainShape;
using sc::ClosedFormBounds;

ChainShape uniform(int32_t p, int32_t m, int64_t f, int64_t i, int64_t w, int64_t comm, int64_t act, int64_t wg,
                   std::optional<int64_t> cap) {
  ChainShape s;
  s.m = m;
  s.f.assign(p, f);
  s.i.assign(p, i);
  s.w.assign(p, w);
  s.comm = comm;
  s.act.assign(p, act);
  s.wgrad.assign(p, wg);
  s.cap.assign(p, cap);
  return s;
}

using sc::test::Op;
using sc::test::run_orders;

// Every order of one stage's ops in which F(j) < I(j) < W(j) for each j (any microbatch order).
std::vector<std::vector<Op>> all_orders(int32_t m, bool split) {
  std::vector<std::vector<Op>> out;
  std::vector<int> state(m, 0);
  std::vector<Op> cur;
  const int kinds = split ? 3 : 2;
  std::function<void()> rec = [&] {
    if (static_cast<int32_t>(cur.size()) == kinds * m) {
      out.push_back(cur);
      return;
    }
    for (int32_t j = 0; j < m; ++j) {
      if (state[j] >= kinds) continue;
      cur.push_back({state[j]++, j});
      rec();
      cur.pop_back();
      --state[j];
    }
  };
  rec();
  return out;
}

// Every combination of per-stage orders: the least span per peak.
std::map<int64_t, int64_t> exhaustive(const ChainShape& sh, const std::vector<int64_t>& params, bool split) {
  const int32_t p = static_cast<int32_t>(sh.f.size());
  std::vector<std::vector<std::vector<Op>>> per_stage(p, all_orders(sh.m, split));
  return sc::test::least_span_by_peak(per_stage, [&](const std::vector<const std::vector<Op>*>& cur) {
    std::optional<std::pair<int64_t, int64_t>> out;
    if (auto r = run_orders(sh, params, cur)) out = std::make_pair(r->peak, r->span);
    return out;
  });
}

using sc::test::optimum_at;

struct Tally {
  int instances = 0, b1_tight = 0, b2_tight = 0, b3_tight = 0, any_tight = 0, infeasible = 0;
};

// Random per-stage costs, link time and memory; every limit from 0 to the largest peak; bounds
// checked against the exhaustive optimum. Returns how often each bound was tight.
Tally check_random(uint32_t seed, int32_t p, int32_t m, bool split, int rounds) {
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Tally t;
  for (int round = 0; round < rounds; ++round) {
    ChainShape sh;
    sh.m = m;
    std::vector<int64_t> params(p);
    for (int32_t s = 0; s < p; ++s) {
      sh.f.push_back(uni(1, 4));
      sh.i.push_back(uni(1, 4));
      sh.w.push_back(split ? uni(1, 3) : 0);
      sh.act.push_back(uni(1, 3));
      sh.wgrad.push_back(split ? uni(0, 3) : 0);  // M_W > M_B included
      params[s] = uni(0, 2);
    }
    sh.comm = uni(0, 2);
    auto by_peak = exhaustive(sh, params, split);
    REQUIRE_FALSE(by_peak.empty());
    int64_t top = by_peak.rbegin()->first;
    for (int64_t limit = 0; limit <= top + 1; ++limit) {
      ChainShape c = sh;
      c.cap.clear();
      for (int32_t s = 0; s < p; ++s) c.cap.push_back(limit - params[s]);
      ClosedFormBounds b = sc::closed_form_bounds(c);
      std::optional<int64_t> opt = optimum_at(by_peak, limit);
      INFO("seed " << seed << " round " << round << " p " << p << " m " << m << " limit " << limit << " comm "
                   << sh.comm << " f0 " << sh.f[0] << " i0 " << sh.i[0] << " w0 " << sh.w[0] << " act0 " << sh.act[0]
                   << " wg0 " << sh.wgrad[0]);
      if (!opt) {
        // An infeasible claim must be true; a feasible one with no schedule is merely weak.
        ++t.infeasible;
        continue;
      }
      REQUIRE(b.feasible);  // never "no schedule fits" when one does
      CHECK(b.b1 <= *opt);
      CHECK(b.b2 <= *opt);
      CHECK(b.b3 <= *opt);
      ++t.instances;
      t.b1_tight += b.b1 == *opt;
      t.b2_tight += b.b2 == *opt;
      t.b3_tight += b.b3 == *opt;
      t.any_tight += b.value() == *opt;
    }
  }
  return t;
}

}  // namespace

TEST_CASE("B3 at the Zero Bubble paper's 1.5B costs, p = 8, m = 24, limit 2p·M_B is 1,152,599 us", "[solver][bounds]") {
  // arXiv 2401.10241 appendix costs (examples/synth-zb-1.5b-p8-m24.yaml), in us: (m + p - 1)(T_F + T_I)
  // + 2(p - 1)c + T_W = 31 * 36,608 + 14 * 601 + 9,337 = 1,152,599, the heuristic's span there.
  ChainShape sh = uniform(8, 24, 18522, 18086, 9337, 601, 2, 1, 32);
  ClosedFormBounds b = sc::closed_form_bounds(sh);
  REQUIRE(b.feasible);
  CHECK(b.b3 == 1152599);
  CHECK(b.b3_at == "stage 7 seen from stage 0");
  CHECK(b.value() == 1152599);
  CHECK(b.source() == "B3 (stage 7 seen from stage 0)");
}

TEST_CASE("B1 proves 27 at p = 4, m = 8, limit 8 and 26 at limit 10 (docs/facts/pipeline-schedules.md optima)", "[solver][bounds]") {
  // D_0 = 4 T_F + 3 T_I = 7 (no link time); K = floor(8 / 2) = 4, so idle1_0 = 3 and
  // span >= 24 + 3. At limit 10, K = 5 and idle1_0 = 2.
  ClosedFormBounds b8 = sc::closed_form_bounds(uniform(4, 8, 1, 1, 1, 0, 2, 1, 8));
  CHECK(b8.b1 == 27);
  CHECK(b8.b1_at == "stage 0");
  CHECK(b8.value() == 27);
  ClosedFormBounds b10 = sc::closed_form_bounds(uniform(4, 8, 1, 1, 1, 0, 2, 1, 10));
  CHECK(b10.value() == 26);
  // Limit 14 (ZB-H2's memory): K = 7 >= D_0, so only the B3 chain remains: (8 + 3) * 2 + 1 = 23 < 24
  // (the work). The structural bound is the stronger one there.
  ClosedFormBounds b14 = sc::closed_form_bounds(uniform(4, 8, 1, 1, 1, 0, 2, 1, 14));
  CHECK(b14.b1 == 24);
  CHECK(b14.b3 == 23);
}

TEST_CASE("B2 at p = 4, m = 8, limit 6: stage 0 must run 10 I's and W's before its last F", "[solver][bounds]") {
  // m·M_B - nI - nW <= 6 gives nI + nW >= 10; the least is 7 F + 10 + idle1_0 (D_0 - 3 = 4)
  // + max(D_0 + 2, 1 + 16 - 10) = 7 + 10 + 4 + 9 = 30 (the optimum is 31).
  ClosedFormBounds b = sc::closed_form_bounds(uniform(4, 8, 1, 1, 1, 0, 2, 1, 6));
  REQUIRE(b.feasible);
  CHECK(b.b2 == 30);
  CHECK(b.b2_at == "stage 0");
  CHECK(b.b1 == 28);
}

TEST_CASE("the closed forms prove infeasible limits with the stage and reason", "[solver][bounds]") {
  ClosedFormBounds one = sc::closed_form_bounds(uniform(3, 4, 1, 1, 1, 0, 2, 1, 1));
  CHECK_FALSE(one.feasible);
  CHECK(one.infeasible_stage == 0);
  CHECK(one.why.find("does not fit") != std::string::npos);
  // M_W = M_B: an I frees nothing, so at the last F 4·2 - 2·nW <= 3 needs nW >= 3 W's (and as
  // many I's) before it: feasible, with B2 = 3 F + 3 I + 3 W + idle1 + max(D + 2, 1 + 1 + 1).
  ClosedFormBounds two = sc::closed_form_bounds(uniform(2, 4, 1, 1, 1, 0, 2, 2, 3));
  REQUIRE(two.feasible);
  CHECK(two.b2 == 3 + 3 + 3 + 2 + 5);
  // One byte left and activations of 2: not even the first F fits.
  ClosedFormBounds three = sc::closed_form_bounds(uniform(2, 4, 1, 1, 1, 0, 2, 0, 1));
  CHECK_FALSE(three.feasible);
}

TEST_CASE("B1, B2 and B3 never exceed the exhaustive optimum over every order (random instances)", "[solver][bounds]") {
  // Hundreds of instances (each shape x every memory limit from 0 to the largest peak):
  // p = 2 and 3 with m = 2 (split I/W), p = 2 with m = 3 (full B). Every order of each stage is
  // tried, with no microbatch-order symmetry breaking, so the optimum is the true one.
  Tally a = check_random(11, 2, 2, true, 40);
  Tally b = check_random(12, 3, 2, true, 6);
  Tally c = check_random(13, 2, 3, false, 40);
  int n = a.instances + b.instances + c.instances;
  CHECK(n >= 300);
  int tight = a.any_tight + b.any_tight + c.any_tight;
  // How often the bounds are tight is reported, not asserted beyond "sometimes".
  WARN("closed-form bounds on " << n << " instances: tight " << tight << " (B1 " << a.b1_tight + b.b1_tight + c.b1_tight
                                << ", B2 " << a.b2_tight + b.b2_tight + c.b2_tight << ", B3 "
                                << a.b3_tight + b.b3_tight + c.b3_tight << "); limits with no schedule "
                                << a.infeasible + b.infeasible + c.infeasible);
  CHECK(tight > 0);
}

TEST_CASE("the closed forms never exceed the solver's optimum on random p <= 4, m <= 6 instances", "[solver][bounds]") {
  // The solver (closed forms off) proves each optimum; the bounds must not pass it. Larger shapes
  // than the exhaustive search reaches.
  std::mt19937 rng(21);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0, tight = 0;
  for (int round = 0; round < 40; ++round) {
    int32_t p = uni(2, 4), m = uni(2, 6);
    sc::PipelineSpec spec = sc::test::make_spec("bounds", p, m, std::vector<std::vector<sc::Step>>(p));
    spec.actions.clear();
    ChainShape sh;
    sh.m = m;
    for (int32_t s = 0; s < p; ++s) {
      spec.costs.f_s[s] = uni(1, 3);
      spec.costs.i_s[s] = uni(1, 3);
      spec.costs.w_s[s] = uni(1, 2);
      spec.costs.b_s[s] = spec.costs.i_s[s] + spec.costs.w_s[s];  // named warm starts run B
      spec.memory.activation_bytes[s] = uni(1, 3);
      spec.memory.weight_grad_bytes[s] = uni(0, 2);
      spec.memory.params_bytes[s] = 0;
      sh.f.push_back(static_cast<int64_t>(spec.costs.f_s[s]));
      sh.i.push_back(static_cast<int64_t>(spec.costs.i_s[s]));
      sh.w.push_back(static_cast<int64_t>(spec.costs.w_s[s]));
      sh.act.push_back(spec.memory.activation_bytes[s]);
      sh.wgrad.push_back(spec.memory.weight_grad_bytes[s]);
    }
    int64_t limit = uni(3, 3 * m);
    sh.cap.assign(p, limit);
    ClosedFormBounds b = sc::closed_form_bounds(sh);
    sc::SynthOptions o;
    o.seed = 5;
    o.time_limit_s = 20;
    o.limit_bytes = limit;
    o.closed_form_bounds = false;
    sc::SynthResult r = sc::synthesize(spec, o);
    INFO("round " << round << " p " << p << " m " << m << " limit " << limit << " b1 " << b.b1 << " b2 " << b.b2 << " b3 " << b.b3
                  << " unit " << r.time_unit_s << " split " << r.split_backward << " f " << sh.f[0] << "," << sh.f[1]
                  << " i " << sh.i[0] << "," << sh.i[1] << " w " << sh.w[0] << "," << sh.w[1] << " act " << sh.act[0] << ","
                  << sh.act[1] << " wg " << sh.wgrad[0] << "," << sh.wgrad[1]);
    if (r.status == sc::SynthStatus::kInfeasible) continue;  // a feasible claim there is only weak
    if (r.status != sc::SynthStatus::kOptimal) continue;  // unproven: nothing to compare
    REQUIRE(b.feasible);
    CHECK(static_cast<double>(b.value()) <= r.best_s + 1e-9);
    ++checked;
    tight += static_cast<double>(b.value()) == r.best_s;
  }
  CHECK(checked >= 30);
  WARN("closed forms against the solver: " << checked << " optima, tight on " << tight);
}

TEST_CASE("the Zero Bubble heuristic reaches the B3 bound at the paper's 1.5B row, limit 2p·M_B", "[solver][bounds]") {
  // Table 5 of the paper: bubble rate 0.0433 at p = 8, m = 24; B3 proves it optimal.
  ChainShape sh = uniform(8, 24, 18522, 18086, 9337, 601, 2, 1, 32);
  int64_t best = INT64_MAX;
  for (bool a : {true, false})
    for (bool b : {true, false})
      for (bool c : {true, false})
        if (auto z = sc::zb_heuristic(sh, a, b, c)) best = std::min(best, z->span);
  CHECK(best == 1152599);
  double work = 24.0 * (18522 + 18086 + 9337);
  CHECK((best - work) / best == Approx(0.0433).margin(5e-5));
}

TEST_CASE("synth proves the Zero Bubble heuristic optimal at the paper's 1.5B row in well under a second", "[solver][bounds]") {
  sc::test::CliRun r = sc::test::run_schedcheck(
      "synth examples/synth-zb-1.5b-p8-m24.yaml --format json --time-limit 60s");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["status"] == "optimal");
  CHECK(j["best"].get<double>() == Approx(1.152599).epsilon(1e-9));
  CHECK(j["closed_form_source"] == "B3 (stage 7 seen from stage 0)");
  CHECK(j["verify"]["timing"]["bubble_rate"].get<double>() == Approx(0.0433).margin(5e-5));
}

TEST_CASE("synth needs no schedule key: the p = 8, m = 16 example is proven optimal by B1", "[solver][bounds]") {
  // examples/synth/p8-m16.yaml has no `schedule:`. Limit 20, M_B = 2: K = 10 forwards before stage
  // 0's first I, D_0 = 8 + 7 = 15, so idle1_0 = 5 and span >= 48 + 5 = 53.
  sc::test::CliRun r = sc::test::run_schedcheck("synth examples/synth/p8-m16.yaml --format json", false);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["status"] == "optimal");
  CHECK(j["best"].get<double>() == 53);
  CHECK(j["closed_form_lower_bound"].get<double>() == 53);
  CHECK(j["closed_form_source"] == "B1 (stage 0)");
  // verify, which checks a given schedule, says what is missing and which commands find one.
  sc::test::CliRun v = sc::test::run_schedcheck("verify examples/synth/p8-m16.yaml");
  CHECK(v.exit_code == 2);
  CHECK(v.out.find("missing required key 'schedule'") != std::string::npos);
  CHECK(v.out.find("schedcheck synth") != std::string::npos);
}
