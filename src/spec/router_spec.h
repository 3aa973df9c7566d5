// Loading `router:` specs (MoE router token flows) from YAML, with located diagnostics.
#pragma once

#include <optional>
#include <string>

#include "router/router_config.h"
#include "support/diagnostics.h"

namespace sc {

/// Largest bound the solver queries accept: sequences, tokens per sequence, tokens in all, experts.
inline constexpr int32_t kMaxRouterBatch = 8;
inline constexpr int32_t kMaxRouterSeqLen = 64;
inline constexpr int32_t kMaxRouterTokens = 64;
inline constexpr int32_t kMaxRouterExperts = 256;
/// Largest tokens x experts^2 at the bound (the size of the top-k encoding).
inline constexpr int64_t kMaxRouterExpertPairs = int64_t{1} << 20;

/// True when `path` is a YAML file whose top level has a `router:` key (also when the YAML is
/// broken but a line starts with `router:`, so its errors come from the router loader).
bool is_router_spec(const std::string& path);

/// Loads a router spec (see README "MoE router checks"): core keys, or a `megatron:` or
/// `deepspeed:` block of the framework's own keys mapped to the core ones. Unknown keys (with
/// "did you mean"), wrong types, out-of-range numbers and contradictory keys are errors with
/// file:line:col in `diags`; all are collected before returning nullopt.
std::optional<RouterSpec> load_router_spec(const std::string& path, Diagnostics& diags);

/// Same, from text already in memory; `name` is used in locations.
std::optional<RouterSpec> parse_router_spec(const std::string& name, const std::string& text, Diagnostics& diags);

}  // namespace sc
