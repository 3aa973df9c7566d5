#include "pipeline/named_schedule.h"

#include <algorithm>

#include <fmt/format.h>

#include "pipeline/generators.h"

namespace sc {
bool resolve_named_schedule(PipelineSpec& spec, Diagnostics& diags) {
  if (!spec.named) return true;
  const ScheduleRequest& req = *spec.named;
  GenOptions opt;
  opt.name = req.name;
  opt.ranks = spec.ranks;
  opt.microbatches = spec.microbatches;
  opt.chunks = req.chunks;
  opt.megatron = req.megatron;
  if (spec.locs.stages.valid()) opt.stages = spec.stages;
  // A few bytes of spec can name billions of ops: bound the program before generating it.
  const double stages = static_cast<double>(spec.locs.stages.valid() ? spec.stages
                                                                      : int64_t{spec.ranks} * req.chunks.value_or(1));
  const double pairs = stages * spec.microbatches;
  if (pairs > kMaxNamedPairs) {
    diags.error(req.loc, fmt::format("{} at {:.0f} stages x {} microbatches is {:.3g} (stage, microbatch) pairs, more "
                                     "than the {:.3g} schedcheck checks at once (about {:.0f} bytes each with their "
                                     "sends and receives, {:.0f} GiB in all); model fewer ranks or microbatches",
                                     req.name, stages, spec.microbatches, pairs, kMaxNamedPairs, kNamedBytesPerPair,
                                     kNamedMemoryBudgetBytes / double(int64_t{1} << 30)));
    return false;
  }
  std::string why;
  std::optional<Generated> g = generate(opt, &why);
  if (!g) {
    diags.error(req.loc, why);
    return false;
  }
  // A declared "loop" or "v" names a rule; the loader could only apply it for its default stage
  // count, so compare names then; an explicit list must match entry for entry.
  bool same_placement = spec.placement == "explicit" ? spec.stage_to_rank == g->stage_to_rank
                                                     : spec.placement == g->placement;
  if (spec.placement_declared && !same_placement) {
    diags.error(spec.locs.placement, fmt::format("{} places its {} stages '{}', which the declared placement "
                                                 "contradicts", req.name, g->stages, g->placement));
    return false;
  }
  size_t n = static_cast<size_t>(g->stages);
  bool ok = resize_uniform(spec.costs.f_s, n) && resize_uniform(spec.costs.i_s, n) &&
            resize_uniform(spec.costs.w_s, n) && resize_uniform(spec.costs.b_s, n) &&
            resize_uniform(spec.memory.params_bytes, n) && resize_uniform(spec.memory.activation_bytes, n) &&
            resize_uniform(spec.memory.weight_grad_bytes, n) && (spec.memory.state_bytes.empty() || resize_uniform(spec.memory.state_bytes, n));
  if (!ok) {
    diags.error(req.loc, fmt::format("{} has {} stages, but a per-stage list of costs or memory in the spec has "
                                     "another length", req.name, g->stages));
    return false;
  }
  spec.stages = g->stages;
  spec.microbatches = g->microbatches;
  spec.stage_to_rank = g->stage_to_rank;
  spec.placement = g->placement;
  spec.placement_declared = true;
  spec.pipeline_starts = g->pipeline_starts;
  spec.actions = std::move(g->actions);
  for (auto& row : spec.actions)
    for (auto& st : row) st.loc = req.loc;
  return true;
}

}  // namespace sc
