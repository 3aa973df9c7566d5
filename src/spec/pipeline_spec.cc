#include "spec/pipeline_spec.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace sc {

std::optional<CollectiveGroup> PipelineSpec::collective_group(int32_t name) const {
  for (const CollectiveGroup& g : groups)
    if (g.name == name) return g;
  if (name < 0 || group_name(name) != kWorldGroup) return std::nullopt;
  CollectiveGroup world;
  world.name = name;
  for (int32_t r = 0; r < ranks; ++r) world.ranks.push_back(r);
  world.loc = locs.file;
  return world;
}

bool PipelineSpec::has_comms() const {
  for (const auto& row : actions)
    for (const auto& st : row)
      if (is_p2p(st.first.kind)) return true;
  return false;
}

bool PipelineSpec::is_first_stage(int32_t s) const {
  return std::binary_search(pipeline_starts.begin(), pipeline_starts.end(), s);
}

bool PipelineSpec::is_last_stage(int32_t s) const {
  return s == stages - 1 || std::binary_search(pipeline_starts.begin(), pipeline_starts.end(), s + 1);
}

bool PipelineSpec::same_pipeline(int32_t a, int32_t b) const {
  if (a > b) std::swap(a, b);
  // The first pipeline start above a must lie above b.
  auto it = std::upper_bound(pipeline_starts.begin(), pipeline_starts.end(), a);
  return it == pipeline_starts.end() || *it > b;
}

void apply_unit_defaults(PipelineSpec& spec) {
  size_t n = static_cast<size_t>(spec.stages);
  spec.costs.f_s.assign(n, 1.0);
  spec.costs.i_s.assign(n, 1.0);
  spec.costs.w_s.assign(n, 1.0);
  spec.costs.b_s.assign(n, 2.0);
  spec.p2p = P2PSpec{};
  spec.memory.params_bytes.assign(n, 0);
  spec.memory.activation_bytes.assign(n, 1);
  spec.memory.weight_grad_bytes.assign(n, 1);
}

std::vector<int32_t> loop_placement(int32_t ranks, int32_t stages) {
  std::vector<int32_t> out(stages);
  for (int32_t s = 0; s < stages; ++s) out[s] = s % ranks;
  return out;
}

std::vector<int32_t> v_placement(int32_t ranks, int32_t stages) {
  if (stages != 2 * ranks) return {};
  std::vector<int32_t> out(stages);
  for (int32_t r = 0; r < ranks; ++r) {
    out[r] = r;
    out[2 * ranks - 1 - r] = r;
  }
  return out;
}

std::vector<int32_t> infer_placement(const std::vector<std::vector<Step>>& actions, int32_t stages) {
  // Per stage, (rank, actions naming the stage on it): ranks appear in increasing order.
  std::vector<std::vector<std::pair<int32_t, int64_t>>> counts(static_cast<size_t>(std::max(stages, 0)));
  auto visit = [&](const Action& a, int32_t rank) {
    if (a.stage < 0 || a.stage >= stages) return;
    auto& c = counts[a.stage];
    if (c.empty() || c.back().first != rank) c.emplace_back(rank, 0);
    ++c.back().second;
  };
  for (int32_t r = 0; r < static_cast<int32_t>(actions.size()); ++r)
    for (const auto& st : actions[r]) {
      visit(st.first, r);
      if (st.second) visit(*st.second, r);
    }
  std::vector<int32_t> out(counts.size(), -1);
  for (size_t s = 0; s < counts.size(); ++s) {
    int64_t best = 0;
    for (const auto& [rank, n] : counts[s])
      if (n > best) best = n, out[s] = rank;
  }
  return out;
}

std::string placement_name(const std::vector<int32_t>& stage_to_rank, int32_t ranks) {
  int32_t stages = static_cast<int32_t>(stage_to_rank.size());
  if (stage_to_rank == loop_placement(ranks, stages)) return "loop";
  if (stage_to_rank == v_placement(ranks, stages)) return "v";
  return "explicit";
}

bool PipelineSpec::forward_only_microbatch(int32_t mb) const {
  if (phases.empty()) return forward_only;
  for (const Phase& ph : phases)
    if (mb >= ph.first && mb < ph.first + ph.microbatches) return ph.forward_only;
  return forward_only;
}

int32_t PipelineSpec::trained_microbatches() const {
  if (phases.empty()) return forward_only ? 0 : microbatches;
  int32_t n = 0;
  for (const Phase& ph : phases)
    if (!ph.forward_only) n += ph.microbatches;
  return n;
}

bool PipelineSpec::trains() const {
  if (phases.empty()) return !forward_only;
  for (const Phase& ph : phases)
    if (!ph.forward_only) return true;
  return false;
}

}  // namespace sc
