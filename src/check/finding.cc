#include "check/finding.h"

#include <algorithm>

#include <fmt/format.h>

namespace sc {

const char* kind_name(FindingKind k) {
  switch (k) {
    case FindingKind::kStructure: return "structure";
    case FindingKind::kCausality: return "causality";
    case FindingKind::kDeadlock: return "deadlock";
    case FindingKind::kChannel: return "channel";
    case FindingKind::kResidency: return "residency";
    case FindingKind::kMemory: return "memory";
    case FindingKind::kNumerics: return "numerics";
  }
  return "?";
}

void cap_findings(std::vector<Finding>& findings, std::map<FindingKind, int64_t>& omitted, size_t per_kind) {
  std::map<FindingKind, size_t> kept;
  size_t out = 0;
  for (size_t i = 0; i < findings.size(); ++i) {
    if (kept[findings[i].kind]++ >= per_kind) {
      ++omitted[findings[i].kind];
      continue;
    }
    if (out != i) findings[out] = std::move(findings[i]);
    ++out;
  }
  findings.resize(out);
}

int exit_code_for(const std::vector<Finding>& findings) {
  int code = 0;
  for (const auto& f : findings) {
    int c = 0;
    switch (f.kind) {
      case FindingKind::kDeadlock: c = 11; break;
      case FindingKind::kStructure:
      case FindingKind::kCausality:
      case FindingKind::kResidency: c = 12; break;
      case FindingKind::kMemory: c = 13; break;
      case FindingKind::kChannel: c = 14; break;
      case FindingKind::kNumerics: c = 17; break;
    }
    if (code == 0) code = c;
    else if (code != c) code = 10;
  }
  return code;
}

std::string format_rank_ranges(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

void name_ranks(Finding& f, const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return;
  const std::string one = fmt::format("on rank {} ", f.ranks.empty() ? ranks.front() : f.ranks.front());
  if (size_t pos = f.message.find(one); pos != std::string::npos)
    f.message.replace(pos, one.size(), fmt::format("on ranks {} ", format_rank_ranges(ranks)));
  f.ranks.assign(ranks.begin(), ranks.end());
}

/// Findings that differ only in their leading "rank N " (one per rank, as the memory pass
/// reports) become one finding naming every such rank: "ranks 0-7: each ..." with the first rank's
/// counterexample. Others pass through in order.
std::vector<Finding> group_by_rank(std::vector<Finding> findings) {
  std::vector<Finding> out;
  std::vector<std::string> keys;
  std::vector<std::vector<int32_t>> ranks;
  for (Finding& f : findings) {
    std::string key = f.message;
    if (f.ranks.size() == 1 && key.rfind(fmt::format("rank {} ", f.ranks[0]), 0) == 0)
      key = key.substr(fmt::format("rank {} ", f.ranks[0]).size());
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it != keys.end() && f.ranks.size() == 1) {
      ranks[it - keys.begin()].push_back(f.ranks[0]);
      continue;
    }
    keys.push_back(key);
    ranks.push_back(std::vector<int32_t>(f.ranks.begin(), f.ranks.end()));
    out.push_back(std::move(f));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (ranks[i].size() < 2) continue;
    out[i].message = fmt::format("ranks {}: each {}", format_rank_ranges(ranks[i]), keys[i]);
    out[i].ranks.assign(ranks[i].begin(), ranks[i].end());
    out[i].details.insert(out[i].details.begin(), fmt::format("shown for rank {}; the others are the same", ranks[i][0]));
  }
  return out;
}

}  // namespace sc
