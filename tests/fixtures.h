// Test fixtures: the docs/facts/pipeline-schedules.md per-stage op orders (one stage per rank) as PipelineSpecs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spec/pipeline_spec.h"

namespace sc::test {

inline Step step(ActionKind k, int32_t stage, int32_t mb) { return Step{Action{k, stage, mb}, std::nullopt, {}}; }

/// A spec with p ranks = p stages (loop placement), m microbatches, the given per-stage orders,
/// costs F, I, W (B = I + W), link latency, activation and weight-grad bytes.
inline PipelineSpec make_spec(const std::string& name, int32_t p, int32_t m, std::vector<std::vector<Step>> actions,
                              double f = 1, double i = 1, double w = 1, double latency = 0, int64_t act = 2,
                              int64_t wgrad = 1) {
  PipelineSpec s;
  s.name = name;
  s.path = name;
  s.ranks = p;
  s.stages = p;
  s.microbatches = m;
  s.stage_to_rank = loop_placement(p, p);
  s.placement = "loop";
  s.placement_declared = true;
  s.costs.f_s.assign(p, f);
  s.costs.i_s.assign(p, i);
  s.costs.w_s.assign(p, w);
  s.costs.b_s.assign(p, i + w);
  s.p2p.latency_s = latency;
  s.memory.params_bytes.assign(p, 0);
  s.memory.activation_bytes.assign(p, act);
  s.memory.weight_grad_bytes.assign(p, wgrad);
  s.actions = std::move(actions);
  return s;
}

/// A spec with `stages` stages in loop placement over `ranks` ranks, unit costs (F = I = W = 1,
/// B = 2), activation and weight-grad bytes 1.
inline PipelineSpec make_loop_spec(const std::string& name, int32_t ranks, int32_t stages, int32_t m,
                                   std::vector<std::vector<Step>> actions) {
  PipelineSpec s = make_spec(name, ranks, m, std::move(actions), 1, 1, 1, 0, 1, 1);
  s.stages = stages;
  s.stage_to_rank = loop_placement(ranks, stages);
  s.costs.f_s.assign(stages, 1);
  s.costs.i_s.assign(stages, 1);
  s.costs.w_s.assign(stages, 1);
  s.costs.b_s.assign(stages, 2);
  s.memory.params_bytes.assign(stages, 0);
  s.memory.activation_bytes.assign(stages, 1);
  s.memory.weight_grad_bytes.assign(stages, 1);
  return s;
}

/// GPipe: all forwards, then all backwards (B) in microbatch order.
inline std::vector<std::vector<Step>> gpipe(int32_t p, int32_t m) {
  std::vector<std::vector<Step>> a(p);
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t j = 0; j < m; ++j) a[s].push_back(step(ActionKind::kF, s, j));
    for (int32_t j = 0; j < m; ++j) a[s].push_back(step(ActionKind::kB, s, j));
  }
  return a;
}

/// 1F1B (docs/facts/pipeline-schedules.md): min(p-s-1, m) F's; then repeat { F if any left, B }.
inline std::vector<std::vector<Step>> one_f_one_b(int32_t p, int32_t m) {
  std::vector<std::vector<Step>> a(p);
  for (int32_t s = 0; s < p; ++s) {
    int32_t f = 0, b = 0;
    for (; f < std::min(p - s - 1, m); ++f) a[s].push_back(step(ActionKind::kF, s, f));
    while (b < m) {
      if (f < m) a[s].push_back(step(ActionKind::kF, s, f++));
      a[s].push_back(step(ActionKind::kB, s, b++));
    }
  }
  return a;
}

/// ZB-H1 (lag = s) and ZB-H2 (lag = 2s), docs/facts/pipeline-schedules.md: warm-up F's; then for j: I_j; if j >= lag
/// then W_{j-lag}; then the next F if any left; finally the remaining W's in order.
inline std::vector<std::vector<Step>> zb(int32_t p, int32_t m, bool h2) {
  std::vector<std::vector<Step>> a(p);
  for (int32_t s = 0; s < p; ++s) {
    int32_t warm = h2 ? std::min(2 * (p - s) - 1, m) : std::min(p - s, m);
    int32_t lag = h2 ? 2 * s : s;
    int32_t f = 0, w = 0;
    for (; f < warm; ++f) a[s].push_back(step(ActionKind::kF, s, f));
    for (int32_t j = 0; j < m; ++j) {
      a[s].push_back(step(ActionKind::kI, s, j));
      if (j >= lag) a[s].push_back(step(ActionKind::kW, s, w++));
      if (f < m) a[s].push_back(step(ActionKind::kF, s, f++));
    }
    while (w < m) a[s].push_back(step(ActionKind::kW, s, w++));
  }
  return a;
}

/// Exhaustive search helper: every combination of one order per stage (`per_stage[s]` lists
/// stage s's candidate orders) is run by `run`, which returns (peak bytes, span) or nullopt on a
/// deadlock. Returns the least span seen for each exact peak.
template <class Order, class Run>
std::map<int64_t, int64_t> least_span_by_peak(const std::vector<std::vector<Order>>& per_stage, Run run) {
  const size_t p = per_stage.size();
  std::map<int64_t, int64_t> best;
  std::vector<const Order*> cur(p);
  std::function<void(size_t)> rec = [&](size_t s) {
    if (s == p) {
      if (std::optional<std::pair<int64_t, int64_t>> r = run(cur)) {
        auto it = best.find(r->first);
        if (it == best.end() || r->second < it->second) best[r->first] = r->second;
      }
      return;
    }
    for (const auto& o : per_stage[s]) {
      cur[s] = &o;
      rec(s + 1);
    }
  };
  rec(0);
  return best;
}

/// The least span over every peak <= `limit` in a least_span_by_peak map; nullopt when none fits.
inline std::optional<int64_t> optimum_at(const std::map<int64_t, int64_t>& by_peak, int64_t limit) {
  std::optional<int64_t> v;
  for (auto [peak, span] : by_peak)
    if (peak <= limit) v = v ? std::min(*v, span) : span;
  return v;
}

}  // namespace sc::test
