#include "pipeline/fsdp_actions.h"

#include <algorithm>
#include <map>

namespace sc {
namespace {

/// The stage a compute step works on (the backward's for an overlapped pair: both parts are
/// compute on the same rank; PyTorch looks at the action's stage index, the forward's).
int32_t stage_of(const Step& s) { return s.first.stage; }

Step marker(ActionKind k, int32_t stage, const SourceLoc& loc) {
  Step s;
  s.first = Action{k, stage, -1};
  s.loc = loc;
  return s;
}

}  // namespace

std::vector<Step> add_unshard_reshard(const std::vector<Step>& row, int32_t max_active_stages) {
  const size_t n = row.size();
  const size_t k = static_cast<size_t>(std::max(1, max_active_stages));
  // Backward sweep: stages ordered by their next occurrence from position i on; keep the
  // first k at every compute position.
  std::vector<int32_t> order;                 // distinct stages, nearest next use first
  std::vector<std::vector<int32_t>> next(n);  // per compute position: next_n
  for (size_t i = n; i-- > 0;) {
    if (!is_compute(row[i].first.kind)) continue;
    const int32_t s = stage_of(row[i]);
    auto it = std::find(order.begin(), order.end(), s);
    if (it != order.end()) order.erase(it);
    order.insert(order.begin(), s);
    next[i].assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(k, order.size())));
  }
  std::vector<Step> out;
  out.reserve(n + 8);
  std::vector<int32_t> active;  // ascending
  for (size_t i = 0; i < n; ++i) {
    const Step& st = row[i];
    if (is_compute(st.first.kind)) {
      const auto& want = next[i];
      std::vector<int32_t> keep;
      for (int32_t s : active) {
        if (std::find(want.begin(), want.end(), s) == want.end())
          out.push_back(marker(ActionKind::kReshard, s, st.loc));
        else
          keep.push_back(s);
      }
      active = std::move(keep);
      for (int32_t s : want)
        if (!std::binary_search(active.begin(), active.end(), s)) {
          out.push_back(marker(ActionKind::kUnshard, s, st.loc));
          active.insert(std::upper_bound(active.begin(), active.end(), s), s);
        }
    }
    out.push_back(st);
  }
  const SourceLoc end = n ? row.back().loc : SourceLoc{};
  for (int32_t s : active) out.push_back(marker(ActionKind::kReshard, s, end));
  return out;
}

std::vector<Step> add_unshard_reshard_per_forward(const std::vector<Step>& row) {
  std::vector<Step> out;
  out.reserve(row.size() * 2 + 8);
  std::vector<int32_t> active;  // ascending
  auto gather = [&](int32_t s, const SourceLoc& loc) {
    if (std::binary_search(active.begin(), active.end(), s)) return;
    out.push_back(marker(ActionKind::kUnshard, s, loc));
    active.insert(std::upper_bound(active.begin(), active.end(), s), s);
  };
  for (const Step& st : row) {
    if (!is_compute(st.first.kind)) {
      out.push_back(st);
      continue;
    }
    gather(stage_of(st), st.loc);
    if (st.second) gather(st.second->stage, st.loc);
    out.push_back(st);
    if (st.first.kind == ActionKind::kF && !st.second) {
      out.push_back(marker(ActionKind::kReshard, st.first.stage, st.loc));
      active.erase(std::lower_bound(active.begin(), active.end(), st.first.stage));
    }
  }
  const SourceLoc end = row.empty() ? SourceLoc{} : row.back().loc;
  for (int32_t s : active) out.push_back(marker(ActionKind::kReshard, s, end));
  return out;
}

std::vector<Step> add_reduce_grad(const std::vector<Step>& row, int32_t microbatches) {
  std::vector<Step> out;
  out.reserve(row.size() + 4);
  std::map<int32_t, int32_t> done;  // per stage: B or W actions seen
  for (const Step& st : row) {
    out.push_back(st);
    const Action& back = st.second ? *st.second : st.first;
    if (back.kind != ActionKind::kB && back.kind != ActionKind::kW) continue;
    if (++done[back.stage] == microbatches) out.push_back(marker(ActionKind::kReduceGrad, back.stage, st.loc));
  }
  return out;
}

bool has_actions(const std::vector<Step>& row, std::initializer_list<ActionKind> kinds) {
  return std::any_of(row.begin(), row.end(), [&](const Step& s) {
    return std::find(kinds.begin(), kinds.end(), s.first.kind) != kinds.end();
  });
}

}  // namespace sc
