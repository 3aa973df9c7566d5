#include "router/plain_router.h"

#include <fmt/format.h>

namespace sc {

bool RouterDecisions::same_token(const RouterDecisions& o, int32_t token) const {
  for (int32_t e = 0; e < experts; ++e)
    if (fate(token, e) != o.fate(token, e)) return false;
  return true;
}

std::string RouterDecisions::describe(int32_t token) const {
  std::string out;
  for (int32_t e = 0; e < experts; ++e) {
    Fate f = fate(token, e);
    if (f == Fate::kNone) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("e{} {}", e, f == Fate::kKept ? "kept" : "dropped");
  }
  return out.empty() ? "no expert (dropped)" : out;
}

int64_t fill_rank(const RouterConfig& c, int32_t batch, int32_t seq_len, int32_t b, int32_t t) {
  if (c.scope == CapacityScope::kSequence) return t;
  return c.fill_order == FillOrder::kPositionMajor ? int64_t{t} * batch + b : int64_t{b} * seq_len + t;
}

int32_t scope_of(const RouterConfig& c, int32_t b) { return c.scope == CapacityScope::kSequence ? b : 0; }

namespace {

// The key an expert ranks competing tokens by (higher goes first), for score-based policies.
double rank_key(const RouterConfig& c, const RouterInput& in, int32_t token, int32_t e) {
  const double* s = &in.scores[static_cast<size_t>(token) * c.experts];
  if (c.policy == RoutingPolicy::kExpertChoice) return s[e];
  switch (c.drop_policy) {
    case DropPolicy::kProbs: return s[e];
    case DropPolicy::kPriority: {
      double m = s[0];
      for (int32_t x = 1; x < c.experts; ++x) m = std::max(m, s[x]);
      return m;
    }
    case DropPolicy::kRandom: return in.draws[static_cast<size_t>(token)];
    case DropPolicy::kPosition: break;
  }
  return 0;
}

}  // namespace

RouterDecisions route(const RouterConfig& c, const RouterInput& in, TieOrder ties) {
  const int32_t n = in.batch * in.seq_len, E = c.experts;
  const bool low = ties == TieOrder::kLowFirst;
  RouterDecisions d;
  d.experts = E;
  d.fates.assign(static_cast<size_t>(n) * E, Fate::kNone);
  auto score = [&](int32_t i, int32_t e) { return in.scores[static_cast<size_t>(i) * E + e]; };
  auto rank = [&](int32_t i) { return fill_rank(c, in.batch, in.seq_len, i / in.seq_len, i % in.seq_len); };
  auto scope = [&](int32_t i) { return scope_of(c, i / in.seq_len); };
  const int64_t cap = expert_capacity(c, scope_tokens(c, in.batch, in.seq_len));
  // j goes before i in expert e's queue.
  auto ahead = [&](int32_t j, int32_t i, int32_t e) {
    if (c.policy == RoutingPolicy::kTokenChoice && c.drop_policy == DropPolicy::kPosition) return rank(j) < rank(i);
    double kj = rank_key(c, in, j, e), ki = rank_key(c, in, i, e);
    if (kj != ki) return kj > ki;
    return low ? rank(j) < rank(i) : rank(j) > rank(i);
  };

  if (c.policy == RoutingPolicy::kExpertChoice) {
    for (int32_t i = 0; i < n; ++i)
      for (int32_t e = 0; e < E; ++e) {
        int64_t before = 0;
        for (int32_t j = 0; j < n; ++j)
          if (j != i && scope(j) == scope(i) && ahead(j, i, e)) ++before;
        if (before < cap) d.fates[static_cast<size_t>(i) * E + e] = Fate::kKept;
      }
    return d;
  }
  std::vector<char> sel(static_cast<size_t>(n) * E, 0);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t e = 0; e < E; ++e) {
      int32_t better = 0;
      for (int32_t x = 0; x < E; ++x) {
        if (x == e) continue;
        double sx = score(i, x), se = score(i, e);
        if (sx > se || (sx == se && (low ? x < e : x > e))) ++better;
      }
      sel[static_cast<size_t>(i) * E + e] = better < c.top_k;
    }
  for (int32_t i = 0; i < n; ++i)
    for (int32_t e = 0; e < E; ++e) {
      if (!sel[static_cast<size_t>(i) * E + e]) continue;
      bool kept = true;
      if (!c.dropless) {
        int64_t before = 0;
        for (int32_t j = 0; j < n; ++j)
          if (j != i && scope(j) == scope(i) && sel[static_cast<size_t>(j) * E + e] && ahead(j, i, e)) ++before;
        kept = before < cap;
      }
      d.fates[static_cast<size_t>(i) * E + e] = kept ? Fate::kKept : Fate::kDropped;
    }
  return d;
}

RouterDecisions route_alone(const RouterConfig& c, const RouterInput& in, int32_t token, TieOrder ties) {
  RouterInput one;
  one.batch = 1;
  one.seq_len = 1;
  one.scores.assign(in.scores.begin() + static_cast<ptrdiff_t>(token) * c.experts,
                    in.scores.begin() + static_cast<ptrdiff_t>(token + 1) * c.experts);
  if (!in.draws.empty()) one.draws = {in.draws[static_cast<size_t>(token)]};
  else one.draws = {0.0};
  return route(c, one, ties);
}

}  // namespace sc
