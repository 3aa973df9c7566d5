// Residency pass: UNSHARD/RESHARD balance, compute only on unsharded stages, REDUCE_GRAD last.
#include <algorithm>

#include <fmt/format.h>

#include "pipeline/rules.h"

namespace sc {

std::vector<Finding> check_residency(const PipelineSpec& spec) {
  std::vector<Finding> out;
  auto add = [&](std::string msg, int rank, const Step* st) {
    Finding f;
    f.kind = FindingKind::kResidency;
    f.message = std::move(msg);
    f.ranks = {rank};
    if (st) {
      f.ops.push_back(format_step(*st));
      f.locations.push_back(st->loc);
    }
    out.push_back(std::move(f));
  };
  // PyTorch's runtime asserts the UNSHARD/RESHARD rules only for FSDP-wrapped stages
  // (`stage_uses_fsdp`; for any other stage both are no-ops). A composed spec with `fsdp:` wraps
  // every stage; otherwise a stage is FSDP-wrapped where its rank UNSHARDs it, the only reason to
  // write one (docs/frontends/pipeline.md#where-schedcheck-differs-from-pytorch).
  const bool all_fsdp = spec.composition && spec.composition->fsdp;
  for (int32_t r = 0; r < static_cast<int32_t>(spec.actions.size()); ++r) {
    const auto& row = spec.actions[r];
    // Only ranks that unshard or reduce something have rules here; skip the rest without
    // per-stage tables. REDUCE_GRAD's rules hold with or without FSDP (DDP reduces too).
    if (!all_fsdp && std::none_of(row.begin(), row.end(), [](const Step& st) {
          return st.first.kind == ActionKind::kUnshard || st.first.kind == ActionKind::kReduceGrad;
        }))
      continue;
    std::vector<int8_t> managed(spec.stages, all_fsdp ? 1 : 0), unsharded(spec.stages, 0), reduced(spec.stages, 0);
    std::vector<const Step*> last_unshard(spec.stages, nullptr);
    std::vector<int32_t> last_backward(spec.stages, -1);
    for (size_t i = 0; i < row.size(); ++i) {
      const Action& a = row[i].first;
      if (a.stage < 0 || a.stage >= spec.stages) continue;
      if (a.kind == ActionKind::kUnshard) managed[a.stage] = 1;
      auto mark_backward = [&](const Action& x) {
        if (x.stage >= 0 && x.stage < spec.stages &&
            (x.kind == ActionKind::kB || x.kind == ActionKind::kI || x.kind == ActionKind::kW))
          last_backward[x.stage] = static_cast<int32_t>(i);
      };
      mark_backward(a);
      if (row[i].second) mark_backward(*row[i].second);
    }
    size_t reported = out.size();
    for (size_t i = 0; i < row.size() && out.size() - reported < 16; ++i) {
      const Step& st = row[i];
      auto check_compute = [&](const Action& a) {
        if (!is_compute(a.kind) || a.stage < 0 || a.stage >= spec.stages || !managed[a.stage]) return;
        if (!unsharded[a.stage])
          add(fmt::format("{} on rank {} runs while stage {}'s parameters are sharded (no UNSHARD before it since "
                          "the last RESHARD)", format_action(a), r, a.stage), r, &st);
        if (reduced[a.stage] && (a.kind != ActionKind::kF))
          add(fmt::format("{} on rank {} runs after stage {}'s REDUCE_GRAD: its gradient misses the reduction",
                          format_action(a), r, a.stage), r, &st);
      };
      const Action& a = st.first;
      if (a.stage < 0 || a.stage >= spec.stages) continue;
      switch (a.kind) {
        case ActionKind::kUnshard:
          if (unsharded[a.stage])
            add(fmt::format("{} on rank {}: stage {} is already unsharded (UNSHARD twice without RESHARD)",
                            format_action(a), r, a.stage), r, &st);
          unsharded[a.stage] = 1;
          last_unshard[a.stage] = &st;
          break;
        case ActionKind::kReshard:
          if (!unsharded[a.stage])
            add(fmt::format("{} on rank {}: stage {} is not unsharded (RESHARD without UNSHARD)", format_action(a),
                            r, a.stage), r, &st);
          unsharded[a.stage] = 0;
          break;
        case ActionKind::kReduceGrad:
          if (reduced[a.stage])
            add(fmt::format("{} on rank {}: stage {}'s gradients are reduced twice", format_action(a), r, a.stage),
                r, &st);
          else if (last_backward[a.stage] > static_cast<int32_t>(i))
            add(fmt::format("{} on rank {} comes before stage {}'s last backward ({}): that gradient is not reduced",
                            format_action(a), r, a.stage, format_step(row[last_backward[a.stage]])), r, &st);
          reduced[a.stage] = 1;
          break;
        default:
          check_compute(a);
          if (st.second) check_compute(*st.second);
      }
    }
    for (int32_t s = 0; s < spec.stages; ++s)
      if (managed[s] && unsharded[s])
        add(fmt::format("stage {} on rank {} is still unsharded at the end of the step (UNSHARD never resharded)", s,
                        r), r, last_unshard[s]);
  }
  return out;
}

}  // namespace sc
