// Structure pass: counts and orders of actions per (stage, microbatch), ids, placement.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipeline/rules.h"

namespace sc {
namespace {

// Collects the examples of one kind of structure problem into one finding.
class Group {
 public:
  Group(std::string what, size_t max_examples) : what_(std::move(what)), max_(max_examples) {}

  void add(const std::string& example, int rank, const SourceLoc& loc) {
    ++count_;
    if (f_.ops.size() >= max_) return;
    f_.ops.push_back(example);
    f_.locations.push_back(loc);
    if (rank >= 0 && std::find(f_.ranks.begin(), f_.ranks.end(), rank) == f_.ranks.end()) f_.ranks.push_back(rank);
  }
  void detail(std::string line) {
    if (f_.details.size() < max_) f_.details.push_back(std::move(line));
  }

  void flush(std::vector<Finding>& out) {
    if (count_ == 0) return;
    f_.kind = FindingKind::kStructure;
    std::string examples;
    for (size_t i = 0; i < f_.ops.size(); ++i) examples += (i ? ", " : "") + f_.ops[i];
    if (count_ > f_.ops.size()) examples += fmt::format(", ... ({} in all)", count_);
    f_.message = fmt::format("{}: {}", what_, examples);
    out.push_back(std::move(f_));
  }

 private:
  std::string what_;
  size_t max_;
  size_t count_ = 0;
  Finding f_;
};

struct Counts {
  uint8_t f = 0, i = 0, w = 0, b = 0;
  uint8_t send_f = 0, recv_f = 0, send_b = 0, recv_b = 0;  ///< P2P actions seen (0 or 1)
};

uint8_t bump(uint8_t v) { return v == 255 ? v : static_cast<uint8_t>(v + 1); }

}  // namespace

std::vector<Finding> check_structure(const PipelineSpec& spec, size_t max_examples) {
  std::vector<Finding> out;
  const int32_t S = spec.stages, M = spec.microbatches;
  std::vector<Counts> counts(static_cast<size_t>(S) * static_cast<size_t>(M));
  Group dup("actions given more than once", max_examples);
  Group range("ids out of range", max_examples);
  Group both("microbatches with both a full backward B and a split backward I/W", max_examples);
  Group w_first("W before its I (the weight gradient needs the input gradient first)", max_examples);
  Group placement(spec.placement_declared ? "actions on a rank other than the declared placement's"
                                          : "actions on a rank other than their stage's (a stage lives on one rank)",
                  max_examples);
  Group backward_in_forward_only("backward actions of forward-only microbatches (forward_only: true, or a forward-only phase)", max_examples);
  Group undeclared("collectives over a group the spec does not declare (groups:; 'world' is every rank)", max_examples);
  Group outside("collectives on a rank outside their group", max_examples);
  // A collective names a group, not a stage: its group must exist and hold the rank. Each group
  // is resolved once (`world` lists every rank).
  std::map<int32_t, std::optional<CollectiveGroup>> groups;
  auto visit_collective = [&](const Step& st, int32_t rank) {
    auto [it, added] = groups.try_emplace(st.group);
    if (added) it->second = spec.collective_group(st.group);
    const std::optional<CollectiveGroup>& g = it->second;
    if (!g) {
      undeclared.add(format_step(st), rank, st.loc);
      return;
    }
    if (!std::binary_search(g->ranks.begin(), g->ranks.end(), rank)) {
      outside.add(format_step(st), rank, st.loc);
      outside.detail(fmt::format("{} at {} runs on rank {}, but group {} holds ranks {}", format_step(st),
                                 format_loc(st.loc), rank, group_name(st.group), fmt::join(g->ranks, ", ")));
    }
  };

  Group skip_elsewhere("SEND/RECV actions naming a stage of another pipeline (a skip connection stays within its pipeline)",
                       max_examples);
  // Skipping SEND/RECVs (`0SEND_F0>2`), once per (kind, stage, microbatch, other stage): rare,
  // so a set, beside the neighbour's table.
  std::set<std::tuple<int, int32_t, int32_t, int32_t>> skips;
  auto visit = [&](const Action& a, int32_t rank, const SourceLoc& loc, int32_t peer = -1) {
    // The action as written, made only for a finding (most actions have none).
    auto label = [&] {  // as written: a skip connection with its other stage (`0SEND_F0>2`)
      Step st{a, std::nullopt, loc};
      st.peer_stage = peer;
      return format_step(st);
    };
    if (a.stage < 0 || a.stage >= S || (takes_microbatch(a.kind) && (a.microbatch < 0 || a.microbatch >= M))) {
      range.add(label(), rank, loc);
      range.detail(fmt::format("{} at {}: stages are 0..{}, microbatches 0..{}", label(), format_loc(loc), S - 1, M - 1));
      return;
    }
    int32_t home = spec.stage_to_rank[a.stage];
    if (home != rank && home >= 0) {
      placement.add(label(), rank, loc);
      placement.detail(fmt::format("{} at {} runs on rank {}, but stage {} lives on rank {} ({} placement)",
                                   label(), format_loc(loc), rank, a.stage, home, spec.placement));
    }
    if (spec.forward_only_microbatch(a.microbatch) && (a.kind == ActionKind::kI || a.kind == ActionKind::kW || a.kind == ActionKind::kB ||
                              a.kind == ActionKind::kSendB || a.kind == ActionKind::kRecvB)) {
      backward_in_forward_only.add(label(), rank, loc);
      return;
    }
    if (is_p2p(a.kind) && peer >= 0) {
      if (peer >= S) {
        range.add(label(), rank, loc);
        range.detail(fmt::format("{} at {}: stages are 0..{}", label(), format_loc(loc), S - 1));
      } else if (!spec.same_pipeline(a.stage, peer)) {
        skip_elsewhere.add(label(), rank, loc);
      } else if (!skips.emplace(static_cast<int>(a.kind), a.stage, a.microbatch, peer).second) {
        dup.add(label(), rank, loc);
      }
      return;
    }
    if (is_p2p(a.kind)) {  // in range here: a table, not a hash set
      Counts& c = counts[static_cast<size_t>(a.stage) * M + a.microbatch];
      uint8_t* seen = a.kind == ActionKind::kSendF ? &c.send_f : a.kind == ActionKind::kRecvF ? &c.recv_f
                      : a.kind == ActionKind::kSendB ? &c.send_b : &c.recv_b;
      if (*seen) dup.add(label(), rank, loc);
      *seen = 1;
      return;
    }
    if (!is_compute(a.kind)) return;
    Counts& c = counts[static_cast<size_t>(a.stage) * M + a.microbatch];
    uint8_t* slot = a.kind == ActionKind::kF ? &c.f : a.kind == ActionKind::kI ? &c.i : a.kind == ActionKind::kW ? &c.w : &c.b;
    if (*slot >= 1) dup.add(label(), rank, loc);
    if (a.kind == ActionKind::kW && c.i == 0 && c.b == 0) w_first.add(label(), rank, loc);
    if ((a.kind == ActionKind::kB && (c.i || c.w)) || ((a.kind == ActionKind::kI || a.kind == ActionKind::kW) && c.b))
      both.add(label(), rank, loc);
    *slot = bump(*slot);
  };
  // W before I across ranks cannot be judged by list position; scan rank by rank, then re-check
  // the W's whose I lives on another rank below (they are placement findings anyway).
  for (int32_t r = 0; r < static_cast<int32_t>(spec.actions.size()); ++r)
    for (const Step& st : spec.actions[r]) {
      if (is_collective(st.first.kind)) {
        visit_collective(st, r);
        continue;
      }
      visit(st.first, r, st.loc, st.peer_stage);
      if (st.second) visit(*st.second, r, st.loc);
    }

  Group no_f("(stage, microbatch) pairs with no forward F", max_examples);
  Group no_b("(stage, microbatch) pairs with no backward (B, or I and W)", max_examples);
  Group no_w("I without its W (the weight gradient is never computed)", max_examples);
  Group no_i("W without its I", max_examples);
  // A missing action is located at the end of its stage's rank list (where it would go); on an
  // empty list, where the list is written (a CSV's blank row), else at the schedule.
  auto where_missing = [&](int32_t s) {
    int32_t r = spec.stage_to_rank[s];
    if (r >= 0 && r < static_cast<int32_t>(spec.actions.size()) && !spec.actions[r].empty())
      return spec.actions[r].back().loc;
    if (r >= 0 && r < static_cast<int32_t>(spec.locs.rank_lists.size()) && spec.locs.rank_lists[r].valid())
      return spec.locs.rank_lists[r];
    return spec.locs.schedule;
  };
  for (int32_t s = 0; s < S; ++s)
    for (int32_t m = 0; m < M; ++m) {
      const Counts& c = counts[static_cast<size_t>(s) * M + m];
      if (c.f == 0) no_f.add(format_action({ActionKind::kF, s, m}), spec.stage_to_rank[s], where_missing(s));
      if (spec.forward_only_microbatch(m)) continue;  // no backward is required
      if (c.b == 0 && c.i == 0 && c.w == 0)
        no_b.add(format_action({ActionKind::kB, s, m}), spec.stage_to_rank[s], where_missing(s));
      else if (c.b == 0 && c.i > 0 && c.w == 0)
        no_w.add(format_action({ActionKind::kW, s, m}), spec.stage_to_rank[s], where_missing(s));
      else if (c.b == 0 && c.w > 0 && c.i == 0)
        no_i.add(format_action({ActionKind::kI, s, m}), spec.stage_to_rank[s], where_missing(s));
    }
  range.flush(out);
  undeclared.flush(out);
  outside.flush(out);
  backward_in_forward_only.flush(out);
  placement.flush(out);
  skip_elsewhere.flush(out);
  dup.flush(out);
  both.flush(out);
  w_first.flush(out);
  no_f.flush(out);
  no_b.flush(out);
  no_i.flush(out);
  no_w.flush(out);
  return out;
}

}  // namespace sc
