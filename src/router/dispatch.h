// Expert-parallel dispatch memory: worst-case tokens each rank receives and its all-to-all buffer.
#pragma once

#include <cstdint>
#include <string>

#include "router/router_config.h"

namespace sc {

/// The worst case of one expert-parallel rank's share of the dispatch all-to-all.
struct DispatchResult {
  int64_t tokens = 0;            ///< tokens of the microbatch (batch * seq_len)
  int64_t experts_per_rank = 0;  ///< E / ep_size
  int64_t capacity = -1;         ///< per expert per scope; -1 when dropless
  int64_t worst_tokens_per_rank = 0;  ///< token copies one rank can receive
  int64_t buffer_bytes = 0;      ///< worst_tokens_per_rank * hidden * dtype_bytes
  bool over_limit = false;
  std::string formula;           ///< how the worst case was computed, for the report
};

/// Worst-case receive volume per expert-parallel rank for one microbatch of
/// dispatch.batch x dispatch.seq_len tokens (every rank holds that many and all send to one rank's
/// experts in the worst case, so the volume scales with ep_size). Per scope of n tokens one rank's
/// experts (m = E / ep_size of them) receive at most min(n * min(top_k, m), m * min(C, n)) token
/// copies with capacity C (a token reaches an expert at most once), and n * min(top_k, m) when
/// dropless (all tokens choose that rank's experts). With pad_to_capacity each expert's buffer is
/// m * C per scope whatever the routing. Expert choice: each expert takes min(C, n) tokens per scope.
DispatchResult dispatch_worst_case(const RouterConfig& c, const DispatchSpec& d);

}  // namespace sc
