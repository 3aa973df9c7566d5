#include "check/finding.h"

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
  }
  return "?";
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

}  // namespace sc
