// Findings: what a property pass reports, each with its counterexample.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "support/source.h"

namespace sc {

/// The property a finding violates (the JSON `kind` strings are kind_name()).
enum class FindingKind { kStructure, kCausality, kDeadlock, kChannel, kResidency, kMemory, kNumerics };

/// "structure", "causality", "deadlock", "channel", "residency", "memory", "numerics".
const char* kind_name(FindingKind k);

/// One violation. `message` is one line (lower-case, no final period); `ranks`, `ops` (labels
/// as the user wrote them, "0F3") and `locations` name the counterexample; `details` are further
/// lines for people: the wait-for cycle, each rank's trace to where it is stuck, live buffers.
struct Finding {
  FindingKind kind = FindingKind::kStructure;
  std::string message;
  std::vector<int> ranks;
  std::vector<std::string> ops;
  std::vector<SourceLoc> locations;
  std::vector<std::string> details;
};

/// "0-2, 4-7" for a sorted list of ranks.
std::string format_rank_ranges(const std::vector<int32_t>& ranks);

/// Makes a finding found on one rank stand for `ranks` (sorted): its ranks become `ranks` and
/// "on rank R " in its message becomes "on ranks 0-3, 5 ".
void name_ranks(Finding& f, const std::vector<int32_t>& ranks);

/// Findings that differ only in their leading "rank N " (one per rank, as the memory pass
/// reports them) become one finding naming every such rank ("ranks 0-7: each ...") with the
/// first rank's counterexample; the others pass through in order.
std::vector<Finding> group_by_rank(std::vector<Finding> findings);

/// Most findings kept per kind. Beyond it findings are counted, not kept: a schedule with a
/// million near-identical mistakes would otherwise take gigabytes to hold and report, and the
/// first hundred of a kind show the pattern.
inline constexpr size_t kMaxFindingsPerKind = 100;

/// Keeps the first `per_kind` findings of each kind, in order, and adds the number of the others
/// of each kind to `omitted[kind]`. The kinds present (hence exit_code_for) do not change.
void cap_findings(std::vector<Finding>& findings, std::map<FindingKind, int64_t>& omitted,
                  size_t per_kind = kMaxFindingsPerKind);

/// Exit code for a set of findings (DESIGN.md): 0 none; 11 deadlock; 12 structure, causality or
/// residency; 13 memory; 14 channel; 17 numerics; 10 when findings of several of these classes are present.
int exit_code_for(const std::vector<Finding>& findings);

}  // namespace sc
