// Collective agreement pass: every member of a communicator issues the same collectives in the
// same order, and ranks sharing two communicators enter them in the same interleaving.
#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>

#include "check/passes.h"
#include "support/units.h"

namespace sc {
namespace {

/// The label of an op without its "(it0 fwd)" suffix: what must agree across ranks.
std::string base_label(const Program& p, OpId id) {
  std::string l = p.label(id);
  size_t cut = l.find(" (");
  return cut == std::string::npos ? l : l.substr(0, cut);
}

/// What the k-th collective of a member is, for comparison and messages.
std::string identity(const Program& p, OpId id) {
  if (id == kNoOp) return "nothing more (no collective left)";
  const Op& o = p.ops[id];
  std::string dtype = *o.dtype.c_str() ? fmt::format(" {}", o.dtype.c_str()) : std::string();
  return fmt::format("{} '{}' ({}{})", collective_name(o.collective), base_label(p, id),
                     format_bytes(static_cast<double>(o.bytes)), dtype);
}

}  // namespace

namespace {

/// Cross-communicator order: two ranks that both belong to communicators A and B must enter
/// them in the same interleaving (issue order = op id order per rank, as the front-ends add
/// ops), else NCCL can deadlock when the collectives block (docs/facts/fsdp-zero.md). For each B collective k
/// of a rank, the number of A collectives that rank issued before it must agree across the
/// shared ranks. One finding per pair of communicators.
void check_cross_order(const Program& p, std::vector<Finding>& out) {
  // Candidate pairs: communicators that share a rank; per rank its communicators.
  std::vector<std::vector<int32_t>> comms_of(p.num_ranks);
  for (size_t c = 0; c < p.comms.size(); ++c)
    for (int32_t r : p.comms[c].ranks)
      if (r >= 0 && r < p.num_ranks) comms_of[r].push_back(static_cast<int32_t>(c));
  std::set<std::pair<int32_t, int32_t>> pairs;
  for (const auto& cs : comms_of)
    for (size_t i = 0; i < cs.size(); ++i)
      for (size_t j = i + 1; j < cs.size(); ++j) pairs.insert({cs[i], cs[j]});
  for (auto [a, b] : pairs) {
    const Communicator& ca = p.comms[a];
    const Communicator& cb = p.comms[b];
    std::vector<int32_t> shared;
    std::set_intersection(ca.ranks.begin(), ca.ranks.end(), cb.ranks.begin(), cb.ranks.end(), std::back_inserter(shared));
    if (shared.size() < 2) continue;
    // Per shared rank: for each B collective, how many A collectives precede it.
    auto pattern = [&](int32_t r) {
      const auto& as = ca.ops[ca.member_index(r)];
      const auto& bs = cb.ops[cb.member_index(r)];
      std::vector<int32_t> before(bs.size());
      size_t i = 0;
      for (size_t k = 0; k < bs.size(); ++k) {
        while (i < as.size() && as[i] < bs[k]) ++i;
        before[k] = static_cast<int32_t>(i);
      }
      return before;
    };
    const std::vector<int32_t> first = pattern(shared.front());
    for (size_t m = 1; m < shared.size(); ++m) {
      const std::vector<int32_t> other = pattern(shared[m]);
      size_t n = std::min(first.size(), other.size());
      size_t k = 0;
      while (k < n && first[k] == other[k]) ++k;
      if (k == n) continue;
      const int32_t r0 = shared.front(), r1 = shared[m];
      OpId op0 = cb.ops[cb.member_index(r0)][k], op1 = cb.ops[cb.member_index(r1)][k];
      Finding f;
      f.kind = FindingKind::kChannel;
      f.ranks = {r0, r1};
      f.ops = {p.label(op0), p.label(op1)};
      f.locations = {p.ops[op0].loc, p.ops[op1].loc};
      f.message = fmt::format(
          "ranks {} and {} enter communicators '{}' and '{}' in different orders: rank {} issues {} #{} on '{}' after {} "
          "collectives on '{}', rank {} after {}",
          r0, r1, ca.name, cb.name, r0, collective_name(p.ops[op0].collective), k + 1, cb.name, first[k], ca.name, r1,
          other[k]);
      out.push_back(std::move(f));
      break;
    }
  }
}

}  // namespace

std::vector<Finding> check_collectives(const Program& p) {
  std::vector<Finding> out;
  for (const Communicator& c : p.comms) {
    if (c.ranks.size() < 2) continue;
    size_t longest = 0;
    for (const auto& s : c.ops) longest = std::max(longest, s.size());
    for (size_t k = 0; k < longest; ++k) {
      // Group members by what they issue at k.
      std::map<std::string, std::vector<int32_t>> by;
      std::map<std::string, OpId> example;
      for (size_t m = 0; m < c.ranks.size(); ++m) {
        OpId id = k < c.ops[m].size() ? c.ops[m][k] : kNoOp;
        std::string key = identity(p, id);
        by[key].push_back(c.ranks[m]);
        example.emplace(key, id);
      }
      if (by.size() == 1) continue;
      // The majority is taken as intended; every other group is a culprit (a tie names all).
      auto majority = std::max_element(by.begin(), by.end(), [](const auto& a, const auto& b) {
        return a.second.size() < b.second.size();
      });
      size_t ties = std::count_if(by.begin(), by.end(), [&](const auto& g) { return g.second.size() == majority->second.size(); });
      // Two sides of equal size, one of which issues nothing more: the side that stops is the
      // one that differs, as it is at any larger size where the others are the majority (two
      // ranks, one skipping the evaluation broadcast, name the skipping rank as four would).
      const std::string none = identity(p, kNoOp);
      if (ties == 2 && by.size() == 2 && by.count(none)) {
        majority = by.begin()->first == none ? std::next(by.begin()) : by.begin();
        ties = 1;
      }
      Finding f;
      f.kind = FindingKind::kChannel;
      std::vector<std::string> parts;
      for (const auto& [key, ranks] : by) {
        if (ties == 1 && key == majority->first) continue;
        for (int32_t r : ranks) f.ranks.push_back(r);
        parts.push_back(fmt::format("rank{} {} issue{} {}", ranks.size() == 1 ? "" : "s", format_rank_ranges(ranks),
                                    ranks.size() == 1 ? "s" : "", key));
        OpId id = example[key];
        if (id != kNoOp) {
          f.ops.push_back(p.label(id));
          f.locations.push_back(p.ops[id].loc);
        }
      }
      // Culprits that issue nothing more have no op of their own: locate the collective the
      // others wait in, and say where each culprit's last collective on the communicator (the
      // end of what its list issues there) stands.
      if (f.locations.empty() && ties == 1 && example[majority->first] != kNoOp) {
        f.ops.push_back(p.label(example[majority->first]));
        f.locations.push_back(p.ops[example[majority->first]].loc);
        for (const auto& [key, ranks] : by) {
          if (key != none) continue;
          for (int32_t r : ranks) {
            const auto& mine = c.ops[c.member_index(r)];
            if (mine.empty()) continue;
            f.details.push_back(fmt::format("rank {} issues its last collective on '{}', {}, at {}", r, c.name,
                                            p.label(mine.back()), format_loc(p.ops[mine.back()].loc)));
          }
        }
      }
      // The culprits' own programs first (an override, an action list): the line that makes
      // each differ, where the input says so.
      {
        std::vector<SourceLoc> at;
        std::vector<std::string> what;
        for (int32_t r : f.ranks)
          if (r < static_cast<int32_t>(p.rank_locs.size()) && p.rank_locs[r].valid()) {
            at.push_back(p.rank_locs[r]);
            what.push_back(r < static_cast<int32_t>(p.rank_loc_labels.size()) ? p.rank_loc_labels[r] : "");
          }
        if (ties == 1 && !at.empty()) {
          f.locations.insert(f.locations.begin(), at.begin(), at.end());
          f.ops.insert(f.ops.begin(), what.begin(), what.end());
        }
      }
      std::string msg = fmt::format("collectives diverge on communicator '{}' at #{}: ", c.name, k + 1);
      for (size_t i = 0; i < parts.size(); ++i) msg += (i ? "; " : "") + parts[i];
      if (ties == 1)
        msg += fmt::format(" where rank{} {} issue{} {}", majority->second.size() == 1 ? "" : "s",
                           format_rank_ranges(majority->second), majority->second.size() == 1 ? "s" : "", majority->first);
      f.message = msg;
      for (size_t m = 0; m < c.ranks.size(); ++m)
        f.details.push_back(fmt::format("rank {} issues {} collectives on '{}'", c.ranks[m], c.ops[m].size(), c.name));
      if (f.details.size() > 16) {
        f.details.resize(16);
        f.details.push_back("...");
      }
      out.push_back(std::move(f));
      break;  // the first divergence per communicator; later ones follow from it
    }
  }
  check_cross_order(p, out);
  return out;
}

}  // namespace sc
