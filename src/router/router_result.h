// Results of the router checks: per-property verdicts, witnesses and dispatch memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "router/dispatch.h"
#include "router/plain_router.h"
#include "router/router_config.h"

namespace sc {

/// Router exit codes (README "MoE router checks"); they extend DESIGN's table: 12 causality
/// (prefix causality, batch independence, train/inference equivalence), 13 dispatch memory over
/// its limit, 15 tokens can be dropped, 16 nondeterministic routing, 10 several kinds,
/// 5 inconclusive (the solver gave up; never reported as proven).
inline constexpr int kRouterExitHolds = 0;
inline constexpr int kRouterExitInconclusive = 5;
inline constexpr int kRouterExitSeveral = 10;
inline constexpr int kRouterExitCausality = 12;
inline constexpr int kRouterExitMemory = 13;
inline constexpr int kRouterExitDrop = 15;
inline constexpr int kRouterExitDeterminism = 16;

enum class PropertyStatus { kHolds, kViolated, kInconclusive };
const char* status_name(PropertyStatus s);

/// A counterexample a person can read: two inputs (or one, with two ways to route it), the token
/// whose fate flips, and the tokens whose inputs differ (the cause).
struct RouterWitness {
  RouterInput a, b;          ///< b equals a for one-input properties (drop-freedom, train/inference)
  std::string a_label = "A", b_label = "B";
  int32_t token = -1;        ///< index b * seq_len + t of the token whose fate flips
  std::vector<int32_t> causes;  ///< tokens whose scores or draws differ between a and b
  RouterDecisions fate_a, fate_b;  ///< the plain router's decisions on a and b (one token each for
                                   ///< a one-token inference run)
  int32_t fate_b_token = -1;       ///< the token's index in fate_b
  bool replayed = false;           ///< the plain router shows the same flip as the solver's model
  std::string explanation;         ///< one sentence: who caused the flip
};

/// One property's result.
struct PropertyResult {
  std::string name;     ///< prefix_causality, batch_independence, train_inference, drop_free, deterministic
  std::string kind;     ///< finding kind when violated: causality, drop, determinism
  PropertyStatus status = PropertyStatus::kHolds;
  std::string message;  ///< what was shown (or why it holds without a query)
  int32_t queries = 0;  ///< solver checks run
  double seconds = 0;
  std::optional<RouterWitness> witness;
  SourceLoc loc;        ///< the spec key most to blame
};

/// Everything `schedcheck verify router.yaml` reports.
struct RouterReport {
  RouterSpec spec;
  std::vector<PropertyResult> properties;
  std::optional<DispatchResult> dispatch;
  int exit_code = 0;
  double seconds = 0;
  std::string verdict() const;  ///< holds, violated or inconclusive
};

/// Combines the properties' results into the exit code (a violation wins over inconclusive).
int router_exit_code(const std::vector<PropertyResult>& props, const std::optional<DispatchResult>& dispatch);

/// Text report for people: verdict line, configuration, bound, one line per property, findings
/// with witness tables.
std::string router_text_report(const std::string& path, const RouterReport& r);

/// One JSON object: verdict, exit_code, router, bound, properties, findings, dispatch, stats.
std::string router_json_report(const std::string& path, const RouterReport& r);
/// The same report as a JSON value (for renderers that add to it or read it).
nlohmann::json router_json_value(const std::string& path, const RouterReport& r);

/// "(b, t)" for token index `token` at `seq_len` tokens per sequence.
std::string token_name(int32_t token, int32_t seq_len);

}  // namespace sc
