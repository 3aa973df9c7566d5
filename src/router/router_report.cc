// Text and JSON reports of the router checks.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "router/router_result.h"
#include "support/units.h"
#include "support/version.h"

namespace sc {
namespace {

using nlohmann::json;

json loc_json(const SourceLoc& l) {
  if (!l.valid()) return nullptr;
  return json{{"file", source_name(l.file)}, {"line", l.line}, {"col", l.col}};
}

std::string score_text(double v) { return fmt::format("{:g}", v); }

std::string row_text(const RouterInput& in, int32_t experts, int32_t token, bool draws) {
  std::string out;
  for (int32_t e = 0; e < experts; ++e)
    out += fmt::format("{:>4}", score_text(in.scores[static_cast<size_t>(token) * experts + e]));
  if (draws) out += fmt::format("  draw {:>3}", score_text(in.draws[static_cast<size_t>(token)]));
  return out;
}

bool same_row(const RouterInput& a, const RouterInput& b, int32_t experts, int32_t token, bool draws) {
  for (int32_t e = 0; e < experts; ++e)
    if (a.scores[static_cast<size_t>(token) * experts + e] != b.scores[static_cast<size_t>(token) * experts + e])
      return false;
  return !draws || a.draws[static_cast<size_t>(token)] == b.draws[static_cast<size_t>(token)];
}

std::string config_text(const RouterConfig& c, int32_t batch, int32_t seq_len) {
  std::string out = fmt::format("{}, top-{} of {} experts", policy_name(c.policy), c.top_k, c.experts);
  if (c.policy == RoutingPolicy::kTokenChoice && c.dropless) {
    out += ", dropless";
  } else {
    int64_t n = scope_tokens(c, batch, seq_len);
    out += fmt::format(", capacity factor {:g} -> {} per expert per {} ({} tokens)", c.capacity_factor,
                       expert_capacity(c, n), scope_name(c.scope), n);
    if (c.policy == RoutingPolicy::kTokenChoice)
      out += fmt::format(", drop by {}, fill {}", drop_policy_name(c.drop_policy), fill_order_name(c.fill_order));
  }
  out += fmt::format(", ties {}", tie_break_name(c.tie_break));
  return out;
}

json config_json(const RouterConfig& c) {
  json j = {{"experts", c.experts},
            {"top_k", c.top_k},
            {"policy", policy_name(c.policy)},
            {"dropless", c.dropless},
            {"capacity_factor", c.dropless ? json(nullptr) : json(c.capacity_factor)},
            {"min_capacity", c.min_capacity},
            {"drop_policy", drop_policy_name(c.drop_policy)},
            {"capacity_scope", scope_name(c.scope)},
            {"fill_order", fill_order_name(c.fill_order)},
            {"tie_break", tie_break_name(c.tie_break)},
            {"pad_to_capacity", c.pad_to_capacity}};
  return j;
}

std::string title(const std::string& name) {
  if (name == "prefix_causality") return "prefix causality";
  if (name == "batch_independence") return "batch independence";
  if (name == "train_inference") return "train/inference";
  if (name == "drop_free") return "drop-freedom";
  if (name == "deterministic") return "determinism";
  return name;
}

json input_json(const RouterInput& in, int32_t experts) {
  json rows = json::array();
  for (int32_t i = 0; i < in.batch * in.seq_len; ++i) {
    std::vector<double> r(in.scores.begin() + static_cast<ptrdiff_t>(i) * experts,
                          in.scores.begin() + static_cast<ptrdiff_t>(i + 1) * experts);
    rows.push_back(r);
  }
  json j = {{"scores", rows}};
  if (!in.draws.empty()) j["draws"] = in.draws;
  return j;
}

json fate_json(const RouterDecisions& d, int32_t token) {
  json kept = json::array(), dropped = json::array();
  for (int32_t e = 0; e < d.experts; ++e) {
    if (d.fate(token, e) == Fate::kKept) kept.push_back(e);
    if (d.fate(token, e) == Fate::kDropped) dropped.push_back(e);
  }
  return {{"kept", kept}, {"dropped", dropped}};
}

}  // namespace

const char* status_name(PropertyStatus s) {
  switch (s) {
    case PropertyStatus::kHolds: return "holds";
    case PropertyStatus::kViolated: return "violated";
    case PropertyStatus::kInconclusive: return "inconclusive";
  }
  return "?";
}

std::string token_name(int32_t token, int32_t seq_len) {
  return fmt::format("({},{})", token / seq_len, token % seq_len);
}

std::string RouterReport::verdict() const {
  if (exit_code == kRouterExitHolds) return "holds";
  if (exit_code == kRouterExitInconclusive) return "inconclusive";
  return "violated";
}

int router_exit_code(const std::vector<PropertyResult>& props, const std::optional<DispatchResult>& dispatch) {
  int code = 0;
  bool unknown = false;
  auto add = [&](int c) {
    if (code == 0) code = c;
    else if (code != c) code = kRouterExitSeveral;
  };
  for (const auto& p : props) {
    if (p.status == PropertyStatus::kInconclusive) unknown = true;
    if (p.status != PropertyStatus::kViolated) continue;
    add(p.kind == "causality" ? kRouterExitCausality : p.kind == "drop" ? kRouterExitDrop : kRouterExitDeterminism);
  }
  if (dispatch && dispatch->over_limit) add(kRouterExitMemory);
  if (code == 0 && unknown) return kRouterExitInconclusive;
  return code;
}

std::string router_text_report(const std::string& path, const RouterReport& r) {
  const RouterSpec& s = r.spec;
  const int32_t E = s.train.experts;
  std::vector<const PropertyResult*> violated;
  std::vector<std::string> kinds;
  for (const auto& p : r.properties)
    if (p.status == PropertyStatus::kViolated) {
      violated.push_back(&p);
      if (std::find(kinds.begin(), kinds.end(), p.kind) == kinds.end()) kinds.push_back(p.kind);
    }
  if (r.dispatch && r.dispatch->over_limit) kinds.push_back("memory");
  size_t nfind = violated.size() + (r.dispatch && r.dispatch->over_limit ? 1 : 0);
  std::string out;
  if (r.exit_code == 0)
    out += fmt::format("{}: holds (exit 0)\n", path);
  else if (r.exit_code == kRouterExitInconclusive)
    out += fmt::format("{}: INCONCLUSIVE: the solver gave up on a query; nothing is claimed for it (exit 5)\n", path);
  else
    out += fmt::format("{}: VIOLATED: {} ({} finding{}, exit {})\n", path, fmt::join(kinds, ", "), nfind,
                       nfind == 1 ? "" : "s", r.exit_code);
  out += fmt::format("  router {}{}: {}\n", s.name, s.preset.empty() ? "" : fmt::format(" ({} preset)", s.preset),
                     config_text(s.train, s.batch, s.seq_len));
  if (s.inference_given)
    out += fmt::format("  serving (batch-1 decoding, one token per step): {}\n", config_text(s.inference, 1, 1));
  out += fmt::format("  bound: batch {} x seq_len {} = {} tokens (every score assignment at this bound; larger "
                     "bounds are not covered)\n",
                     s.batch, s.seq_len, s.batch * s.seq_len);
  out += "\nproperties:\n";
  for (const auto& p : r.properties)
    out += fmt::format("  {:<20} {:<12} {} quer{}, {:.2f} s{}\n", title(p.name), status_name(p.status), p.queries,
                       p.queries == 1 ? "y" : "ies", p.seconds,
                       p.status == PropertyStatus::kViolated ? "" : "; " + p.message);
  if (r.dispatch) {
    const DispatchResult& d = *r.dispatch;
    out += fmt::format("  {:<20} {:<12} worst case {} token copies per EP rank = {} ({} x {} x {} B){}\n",
                       "dispatch memory", d.over_limit ? "violated" : "holds", d.worst_tokens_per_rank,
                       format_bytes(static_cast<double>(d.buffer_bytes)), d.worst_tokens_per_rank, s.dispatch.hidden,
                       s.dispatch.dtype_bytes,
                       s.dispatch.limit_bytes ? fmt::format(" against a limit of {}",
                                                            format_bytes(static_cast<double>(*s.dispatch.limit_bytes)))
                                              : "");
    out += fmt::format("  {:<20} {:<12} {}\n", "", "", d.formula);
  }
  if (nfind == 0) return out;
  out += "\nfindings:\n";
  int n = 0;
  for (const PropertyResult* p : violated) {
    out += fmt::format("  [{}] {} ({}): {}\n", ++n, p->kind, p->name, p->message);
    if (p->loc.valid()) out += fmt::format("      {}: the setting responsible\n", format_loc(p->loc));
    if (!p->witness) continue;
    const RouterWitness& w = *p->witness;
    const bool one = w.a_label == w.b_label;  // one input, one run: the finding is the drop itself
    bool draws = !w.a.draws.empty() && s.train.drop_policy == DropPolicy::kRandom;
    bool two = w.a_label != w.b_label && (w.a.scores != w.b.scores || w.a.draws != w.b.draws);
    out += fmt::format("      witness (router scores; only their order matters){}:\n",
                       two ? fmt::format(", inputs {} and {}", w.a_label, w.b_label) : "");
    std::string head = "";
    for (int32_t e = 0; e < E; ++e) head += fmt::format("{:>4}", fmt::format("e{}", e));
    if (draws) head += "  draw    ";
    out += fmt::format("        {:<9}{}{}\n", "token", head, two ? fmt::format("   | {}", w.b_label) : "");
    for (int32_t i = 0; i < w.a.batch * w.a.seq_len; ++i) {
      std::string mark = i == w.token ? (one ? "   <- dropped" : "   <- flips") : "";
      if (std::find(w.causes.begin(), w.causes.end(), i) != w.causes.end()) mark = "   <- cause";
      std::string b = !two ? "" : same_row(w.a, w.b, E, i, draws) ? "   | same" : "   |" + row_text(w.b, E, i, draws);
      out += fmt::format("        {:<9}{}{}{}\n", token_name(i, s.seq_len), row_text(w.a, E, i, draws), b, mark);
    }
    out += fmt::format("      token {} in {}: {}\n", token_name(w.token, s.seq_len), w.a_label,
                       w.fate_a.describe(w.token));
    if (!one)
      out += fmt::format("      token {} in {}: {}\n", token_name(w.token, s.seq_len), w.b_label,
                         w.fate_b.describe(w.fate_b_token));
    if (!w.explanation.empty()) out += fmt::format("      {}\n", w.explanation);
    out += fmt::format("      replayed through the plain router: {}\n",
                       !w.replayed ? "DISAGREES with the solver (please report)" : one ? "same drop" : "same flip");
  }
  if (r.dispatch && r.dispatch->over_limit)
    out += fmt::format("  [{}] memory (dispatch): the dispatch receive buffer can reach {} on one EP rank, over the "
                       "{} limit\n      {}: limit_bytes\n",
                       ++n, format_bytes(static_cast<double>(r.dispatch->buffer_bytes)),
                       format_bytes(static_cast<double>(*s.dispatch.limit_bytes)), format_loc(s.locs.limit));
  return out;
}

std::string router_json_report(const std::string& path, const RouterReport& r) {
  return router_json_value(path, r).dump(2) + "\n";
}

json router_json_value(const std::string& path, const RouterReport& r) {
  const RouterSpec& s = r.spec;
  json j;
  j["schema_version"] = kReportSchemaVersion;
  j["schedcheck_version"] = kToolVersion;
  j["verdict"] = r.verdict();
  j["exit_code"] = r.exit_code;
  j["router"] = {{"name", s.name}, {"path", path}, {"preset", s.preset}, {"train", config_json(s.train)},
                 {"inference", config_json(s.inference)}, {"inference_differs", s.inference_given}};
  j["bound"] = {{"batch", s.batch}, {"seq_len", s.seq_len}, {"tokens", s.batch * s.seq_len}};
  json props = json::object();
  json findings = json::array();
  for (const auto& p : r.properties) {
    props[p.name] = {{"result", status_name(p.status)}, {"queries", p.queries}, {"seconds", p.seconds},
                     {"message", p.message}};
    if (p.status != PropertyStatus::kViolated) continue;
    json f = {{"kind", p.kind}, {"property", p.name}, {"message", p.message}, {"ranks", json::array()},
              {"ops", json::array()}, {"locations", json::array()}};
    if (p.loc.valid()) f["locations"].push_back(loc_json(p.loc));
    if (p.witness) {
      const RouterWitness& w = *p.witness;
      json tok = {{"index", w.token}, {"batch", w.token / s.seq_len}, {"position", w.token % s.seq_len}};
      json causes = json::array();
      for (int32_t c : w.causes) causes.push_back({{"batch", c / s.seq_len}, {"position", c % s.seq_len}});
      f["witness"] = {{"token", tok},
                      {"causes", causes},
                      {"inputs", {{w.a_label, input_json(w.a, s.train.experts)},
                                  {w.b_label, input_json(w.b, s.train.experts)}}},
                      {"fates", {{w.a_label, fate_json(w.fate_a, w.token)},
                                 {w.b_label, fate_json(w.fate_b, w.fate_b_token)}}},
                      {"replayed", w.replayed},
                      {"explanation", w.explanation}};
    }
    findings.push_back(f);
  }
  if (r.dispatch) {
    const DispatchResult& d = *r.dispatch;
    json dj = {{"units", "bytes"},
               {"ep_size", s.dispatch.ep_size},
               {"tokens", d.tokens},
               {"experts_per_rank", d.experts_per_rank},
               {"capacity", d.capacity < 0 ? json(nullptr) : json(d.capacity)},
               {"worst_tokens_per_rank", d.worst_tokens_per_rank},
               {"buffer_bytes_per_rank", d.buffer_bytes},
               {"limit_bytes", s.dispatch.limit_bytes ? json(*s.dispatch.limit_bytes) : json(nullptr)},
               {"formula", d.formula}};
    j["dispatch"] = dj;
    j["memory"] = {{"worst_case_bytes_per_rank", std::vector<int64_t>(s.dispatch.ep_size, d.buffer_bytes)},
                   {"limit_bytes", dj["limit_bytes"]}};
    if (d.over_limit) {
      json f = {{"kind", "memory"}, {"property", "dispatch_memory"},
                {"message", fmt::format("dispatch receive buffer can reach {} bytes per EP rank, over the limit of "
                                        "{} bytes", d.buffer_bytes, *s.dispatch.limit_bytes)},
                {"ranks", json::array()}, {"ops", json::array()}, {"locations", json::array()}};
      if (s.locs.limit.valid()) f["locations"].push_back(loc_json(s.locs.limit));
      findings.push_back(f);
    }
  } else {
    j["dispatch"] = nullptr;
  }
  j["properties"] = props;
  j["findings"] = findings;
  j["semantics"] = {{"scores", "integers compared by order (order-invariant routing: no loss of generality)"},
                    {"inference", "batch-1 incremental decoding: each token routed alone"}};
  j["stats"] = {{"seconds", r.seconds}};
  return j;
}

}  // namespace sc
