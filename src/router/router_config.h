// The MoE router model: routing policy, capacity and drop rules, and the bound a check covers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/source.h"

namespace sc {

/// Who chooses: each token its top-k experts, or each expert its top-C tokens (Zhou et al. 2022).
enum class RoutingPolicy { kTokenChoice, kExpertChoice };

/// Which tokens an over-full expert keeps. kPosition: the first C in fill order. kProbs: the C
/// with the highest score for that expert (Megatron `probs`, DeepSpeed, DeepSeek-V2). kPriority:
/// the C whose best score over all experts is highest (batch-prioritized routing, V-MoE).
/// kRandom: C chosen by a random draw per token (DeepSpeed random token selection, `use_rts`).
enum class DropPolicy { kPosition, kProbs, kPriority, kRandom };

/// The tokens that share one expert's capacity: one sequence, the microbatch, or the
/// expert-parallel group (at a check's bound the group holds the bound's batch).
enum class CapacityScope { kSequence, kMicrobatch, kEpGroup };

/// How the tokens of a scope are flattened to fill capacity: position-major (t, then b: Megatron's
/// [s, b, h] layout) or batch-major (b, then t: DeepSpeed, HF NLLB).
enum class FillOrder { kPositionMajor, kBatchMajor };

/// How equal scores are ordered: the lower expert index (and the earlier token in fill order)
/// first, or no promised order (then determinism fails wherever a tie decides a token's fate).
enum class TieBreak { kLowerIndex, kUnspecified };

/// One router configuration (training, or serving when it differs).
struct RouterConfig {
  int32_t experts = 0;
  int32_t top_k = 1;
  RoutingPolicy policy = RoutingPolicy::kTokenChoice;
  bool dropless = false;         ///< no capacity: nothing is dropped (token choice only)
  double capacity_factor = 1.0;  ///< used when !dropless; > 0
  int32_t min_capacity = 0;      ///< capacity is at least this (DeepSpeed `min_capacity`)
  DropPolicy drop_policy = DropPolicy::kPosition;
  CapacityScope scope = CapacityScope::kMicrobatch;
  FillOrder fill_order = FillOrder::kPositionMajor;
  TieBreak tie_break = TieBreak::kLowerIndex;
  bool pad_to_capacity = false;  ///< every expert's buffer is padded to capacity (Megatron)
};

/// Capacity per expert per scope for `tokens` tokens in the scope (docs/facts/moe-router.md, Megatron):
/// ceil(tokens * top_k / E * capacity_factor), at least min_capacity. Dropless configurations have
/// no capacity; callers check `dropless` first.
inline int64_t expert_capacity(const RouterConfig& c, int64_t tokens) {
  double x = static_cast<double>(tokens) * c.top_k / c.experts * c.capacity_factor;
  auto cap = static_cast<int64_t>(std::ceil(x - 1e-9 * std::max(1.0, x)));
  return std::max<int64_t>(cap, c.min_capacity);
}

/// The number of tokens sharing one capacity at a batch of `batch` sequences of `seq_len`.
inline int64_t scope_tokens(const RouterConfig& c, int64_t batch, int64_t seq_len) {
  return c.scope == CapacityScope::kSequence ? seq_len : batch * seq_len;
}

inline const char* policy_name(RoutingPolicy p) {
  return p == RoutingPolicy::kTokenChoice ? "token_choice" : "expert_choice";
}
inline const char* drop_policy_name(DropPolicy p) {
  switch (p) {
    case DropPolicy::kPosition: return "position";
    case DropPolicy::kProbs: return "probs";
    case DropPolicy::kPriority: return "priority";
    case DropPolicy::kRandom: return "random";
  }
  return "?";
}
inline const char* scope_name(CapacityScope s) {
  switch (s) {
    case CapacityScope::kSequence: return "sequence";
    case CapacityScope::kMicrobatch: return "microbatch";
    case CapacityScope::kEpGroup: return "ep_group";
  }
  return "?";
}
inline const char* fill_order_name(FillOrder f) {
  return f == FillOrder::kPositionMajor ? "position_major" : "batch_major";
}
inline const char* tie_break_name(TieBreak t) {
  return t == TieBreak::kLowerIndex ? "lower_index" : "unspecified";
}

/// Expert-parallel dispatch: the all-to-all that sends each routed token to its expert's rank.
struct DispatchSpec {
  bool given = false;
  int32_t ep_size = 1;          ///< expert-parallel ranks; experts % ep_size == 0
  int64_t hidden = 0;           ///< hidden size (elements per token)
  int32_t dtype_bytes = 2;      ///< bytes per element
  std::string dtype = "bf16";
  int64_t batch = 0;            ///< sequences per microbatch on one rank (default: the bound's)
  int64_t seq_len = 0;          ///< tokens per sequence (default: the bound's)
  std::optional<int64_t> limit_bytes;  ///< receive-buffer limit per rank
};

/// Where the spec's router keys were written, for findings.
struct RouterLocs {
  SourceLoc file, router, policy, capacity, drop_policy, scope, fill_order, tie_break, inference, bound,
      dispatch, limit;
};

/// A `router:` spec: the training configuration, the serving one (a copy of training unless the
/// spec's `inference:` changes keys), the bound of the proofs and the dispatch model.
struct RouterSpec {
  std::string name;
  std::string preset;  ///< "", "megatron" or "deepspeed": which framework keys were mapped
  RouterConfig train;
  RouterConfig inference;
  bool inference_given = false;
  int32_t batch = 2;    ///< bound: sequences
  int32_t seq_len = 4;  ///< bound: tokens per sequence
  DispatchSpec dispatch;
  /// Properties to check (`check:`; names as in the report: prefix_causality, batch_independence,
  /// train_inference, drop_free, deterministic); empty means all. Dispatch memory is checked
  /// whenever `dispatch:` is given.
  std::vector<std::string> checks;
  RouterLocs locs;
};

}  // namespace sc
