// An as-soon-as-possible run of fixed per-stage op orders (one stage per rank), written apart
// from the simulator and the solver, for the exhaustive searches of the synthesis tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "solver/synth_bounds.h"

namespace sc::test {

/// One op of a stage's order: kind 0 F, 1 I (or B), 2 W; microbatch.
using Op = std::pair<int, int>;

struct Run {
  int64_t span = 0;
  int64_t peak = 0;  // max over stages of (largest live bytes + params)
};

/// As-soon-as-possible run of `orders` (one per stage) with the shape's per-stage costs (B's cost
/// in `i` for an unsplit backward) and link time; nullopt on a deadlock. Live bytes: F adds act at
/// its start, I adds wgrad - act at its end, W subtracts wgrad at its end; the peak of one rank is
/// its largest prefix sum (its ops run one at a time) plus its params.
inline std::optional<Run> run_orders(const ChainShape& sh, const std::vector<int64_t>& params,
                              const std::vector<const std::vector<Op>*>& orders) {
  const int32_t p = static_cast<int32_t>(orders.size());
  const int32_t m = sh.m;
  std::vector<std::vector<int64_t>> end(3 * p, std::vector<int64_t>(m, -1));
  auto e = [&](int k, int s, int j) -> int64_t& { return end[k * p + s][j]; };
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> clock(p, 0), first(p, -1);
  size_t total = 0, done = 0;
  for (auto* o : orders) total += o->size();
  bool progress = true;
  while (progress) {
    progress = false;
    for (int32_t s = 0; s < p; ++s) {
      while (next[s] < orders[s]->size()) {
        auto [k, j] = (*orders[s])[next[s]];
        int64_t t = clock[s];
        if (k == 0 && s > 0) {
          if (e(0, s - 1, j) < 0) break;
          t = std::max(t, e(0, s - 1, j) + sh.comm);
        } else if (k == 1) {
          if (e(0, s, j) < 0 || (s + 1 < p && e(1, s + 1, j) < 0)) break;
          t = std::max(t, e(0, s, j));
          if (s + 1 < p) t = std::max(t, e(1, s + 1, j) + sh.comm);
        } else if (k == 2) {
          if (e(1, s, j) < 0) break;
          t = std::max(t, e(1, s, j));
        }
        if (first[s] < 0) first[s] = t;
        int64_t dur = k == 0 ? sh.f[s] : k == 1 ? sh.i[s] : sh.w[s];
        e(k, s, j) = clock[s] = t + dur;
        ++next[s];
        ++done;
        progress = true;
      }
    }
  }
  if (done != total) return std::nullopt;
  Run r;
  for (int32_t s = 0; s < p; ++s) {
    r.span = std::max(r.span, clock[s] - first[s]);
    int64_t live = 0, peak = 0;
    for (auto [k, j] : *orders[s]) {
      live += k == 0 ? sh.act[s] : k == 1 ? sh.wgrad[s] - sh.act[s] : -sh.wgrad[s];
      peak = std::max(peak, live);
    }
    r.peak = std::max(r.peak, peak + params[s]);
  }
  return r;
}

}  // namespace sc::test
