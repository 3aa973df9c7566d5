// The plain (non-solver) MoE router: routes one concrete batch, to replay solver witnesses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "router/router_config.h"

namespace sc {

/// Token (b, t) of a batch of `batch` sequences of `seq_len` tokens has index b * seq_len + t.
struct RouterInput {
  int32_t batch = 0;
  int32_t seq_len = 0;
  std::vector<double> scores;  ///< [token][expert], tokens * experts router scores (logits)
  std::vector<double> draws;   ///< [token], the random draw of each token (DropPolicy::kRandom)
};

/// How ties are ordered in one run: the lower index first (TieBreak::kLowerIndex), or the higher
/// (one of the orders an unspecified tie break allows).
enum class TieOrder { kLowFirst, kHighFirst };

/// One token's fate per expert: not routed to it, routed and kept, or routed and dropped.
enum class Fate : uint8_t { kNone = 0, kKept = 1, kDropped = 2 };

/// The decisions of one run: fates[token * experts + e].
struct RouterDecisions {
  int32_t experts = 0;
  std::vector<Fate> fates;
  Fate fate(int32_t token, int32_t e) const { return fates[static_cast<size_t>(token) * experts + e]; }
  /// True when token `token` has the same fate for every expert in both.
  bool same_token(const RouterDecisions& o, int32_t token) const;
  /// "e2 kept, e5 dropped" (or "dropped by every expert" for expert choice, "no expert").
  std::string describe(int32_t token) const;
};

/// Position of token (b, t) in the order tokens fill capacity within their scope.
int64_t fill_rank(const RouterConfig& c, int32_t batch, int32_t seq_len, int32_t b, int32_t t);
/// The scope (capacity group) token (b, t) belongs to.
int32_t scope_of(const RouterConfig& c, int32_t b);

/// Routes `in` under `c`. Token choice: each token takes its top_k experts by score (ties by
/// `ties`); an expert keeps at most expert_capacity() of the tokens of each scope, chosen by the
/// drop policy (ties in fill order, by `ties`). Expert choice: each expert takes the
/// expert_capacity() tokens of each scope with the highest score for it. Gate weights are functions
/// of a token's own scores and its kept experts, so equal fates with equal own scores mean equal
/// gates. Precondition: in.scores has batch * seq_len * c.experts entries (draws one per token when
/// the policy is random).
RouterDecisions route(const RouterConfig& c, const RouterInput& in, TieOrder ties = TieOrder::kLowFirst);

/// Routes token `token` of `in` alone, as batch-1 incremental decoding does (a one-token batch).
RouterDecisions route_alone(const RouterConfig& c, const RouterInput& in, int32_t token,
                            TieOrder ties = TieOrder::kLowFirst);

}  // namespace sc
