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

struct Eval {
  int64_t span = 0;
  int64_t peak = 0;
};

// Unit-time as-soon-as-possible run of one stage per rank (F = I = W = 1, B = 2, no link cost),
// written here apart from the simulator; nullopt when the orders deadlock. Peak: per rank, the
// largest live bytes after an F start (activation `act` from F start to I/B end, `wg` from I end
// to W end).
std::optional<Eval> evaluate(const std::vector<std::vector<Step>>& orders, int32_t m, int64_t act, int64_t wg) {
  int32_t p = static_cast<int32_t>(orders.size());
  std::map<std::tuple<int, int, int>, int64_t> end;  // (kind, stage, mb) -> end
  auto key = [](const sc::Action& a) {
    int k = a.kind == ActionKind::kF ? 0 : a.kind == ActionKind::kW ? 2 : 1;
    return std::make_tuple(k, a.stage, a.microbatch);
  };
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> free_at(p, 0), first(p, -1);
  bool progress = true;
  size_t done = 0, total = 0;
  for (const auto& o : orders) total += o.size();
  while (progress) {
    progress = false;
    for (int32_t s = 0; s < p; ++s) {
      if (next[s] == orders[s].size()) continue;
      const sc::Action& a = orders[s][next[s]].first;
      std::vector<std::tuple<int, int, int>> deps;
      if (a.kind == ActionKind::kF) {
        if (s > 0) deps.push_back({0, s - 1, a.microbatch});
      } else if (a.kind == ActionKind::kW) {
        deps.push_back({1, s, a.microbatch});
      } else {
        deps.push_back({0, s, a.microbatch});
        if (s + 1 < p) deps.push_back({1, s + 1, a.microbatch});
      }
      int64_t t = free_at[s];
      bool ready = true;
      for (auto& d : deps) {
        auto it = end.find(d);
        if (it == end.end()) ready = false;
        else t = std::max(t, it->second);
      }
      if (!ready) continue;
      int64_t dur = a.kind == ActionKind::kB ? 2 : 1;
      if (first[s] < 0) first[s] = t;
      end[key(a)] = t + dur;
      free_at[s] = t + dur;
      ++next[s];
      ++done;
      progress = true;
    }
  }
  if (done != total) return std::nullopt;
  Eval e;
  for (int32_t s = 0; s < p; ++s) {
    e.span = std::max(e.span, free_at[s] - first[s]);
    int64_t live = 0;
    for (const auto& st : orders[s]) {
      ActionKind k = st.first.kind;
      live += k == ActionKind::kF ? act : k == ActionKind::kW ? -wg : k == ActionKind::kI ? wg - act : -act;
      e.peak = std::max(e.peak, live);
    }
  }
  (void)m;
  return e;
}

// The least span per memory limit over every combination of the given per-stage orders.
std::map<int64_t, int64_t> best_span_by_peak(int32_t p, int32_t m, bool split, bool monotone, int64_t act, int64_t wg) {
  std::vector<std::vector<std::vector<Step>>> per_stage;
  for (int32_t s = 0; s < p; ++s) per_stage.push_back(stage_orders(s, m, split, monotone));
  std::map<int64_t, int64_t> best;  // peak -> least span with exactly that peak
  std::vector<std::vector<Step>> cur(p);
  std::function<void(int32_t)> rec = [&](int32_t s) {
    if (s == p) {
      if (auto e = evaluate(cur, m, act, wg)) {
        auto it = best.find(e->peak);
        if (it == best.end() || e->span < it->second) best[e->peak] = e->span;
      }
      return;
    }
    for (const auto& o : per_stage[s]) {
      cur[s] = o;
      rec(s + 1);
    }
  };
  rec(0);
  return best;
}

std::optional<int64_t> optimum_at(const std::map<int64_t, int64_t>& by_peak, int64_t limit) {
  std::optional<int64_t> v;
  for (auto [peak, span] : by_peak)
    if (peak <= limit) v = v ? std::min(*v, span) : span;
  return v;
}

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

sc::SynthOptions pinned() {
  sc::SynthOptions o;
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
  // FACTS §1: optimal spans under a memory limit, p = 4, m = 8, unit costs, M_B = 2, M_W = 1.
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

TEST_CASE("synth never claims optimality when the resource limit stops it; it keeps the warm start", "[solver]") {
  sc::PipelineSpec spec = unit_spec(4, 8, true);
  sc::SynthOptions o = pinned();
  o.rlimit = 1;
  o.limit_bytes = 10;
  sc::SynthResult r = sc::synthesize(spec, o);
  CHECK(r.status == sc::SynthStatus::kFeasible);
  REQUIRE(r.has_schedule);
  CHECK(r.best_s >= 26);  // the optimum (FACTS §1); the warm starts reach 26 or 27
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
  CHECK(r.out.find("probe: span <= 26 s? unsat") != std::string::npos);
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
