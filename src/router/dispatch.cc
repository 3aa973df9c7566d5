#include "router/dispatch.h"

#include <algorithm>

#include <fmt/format.h>

namespace sc {

DispatchResult dispatch_worst_case(const RouterConfig& c, const DispatchSpec& d) {
  DispatchResult r;
  r.tokens = d.batch * d.seq_len;
  const int64_t m = c.experts / std::max(1, d.ep_size);
  r.experts_per_rank = m;
  const int64_t n = c.scope == CapacityScope::kSequence ? d.seq_len : r.tokens;
  const int64_t scopes = c.scope == CapacityScope::kSequence ? d.batch : 1;
  const int64_t senders = d.ep_size;  // every rank of the group sends its microbatch
  const int64_t reach = std::min<int64_t>(c.top_k, m);
  int64_t per_scope = 0;
  if (c.policy == RoutingPolicy::kTokenChoice && c.dropless) {
    per_scope = n * reach;
    r.formula = fmt::format("dropless: every token picks this rank's experts: {} tokens x min(top_k, {} experts)",
                            n, m);
  } else {
    r.capacity = expert_capacity(c, n);
    if (c.policy == RoutingPolicy::kExpertChoice) {
      per_scope = m * std::min(r.capacity, n);
      r.formula = fmt::format("expert choice: {} experts x min(capacity {}, {} tokens)", m, r.capacity, n);
    } else if (c.pad_to_capacity) {
      per_scope = m * r.capacity;
      r.formula = fmt::format("padded to capacity: {} experts x capacity {}", m, r.capacity);
    } else {
      per_scope = std::min(n * reach, m * std::min(r.capacity, n));
      r.formula = fmt::format("min({} tokens x min(top_k, {} experts), {} experts x min(capacity {}, {} tokens))", n,
                              m, m, r.capacity, n);
    }
  }
  r.worst_tokens_per_rank = per_scope * scopes * senders;
  if (scopes > 1) r.formula += fmt::format(", x {} sequences", scopes);
  if (senders > 1) r.formula += fmt::format(", x {} sending ranks", senders);
  r.buffer_bytes = r.worst_tokens_per_rank * d.hidden * d.dtype_bytes;
  r.over_limit = d.limit_bytes && r.buffer_bytes > *d.limit_bytes;
  return r;
}

}  // namespace sc
