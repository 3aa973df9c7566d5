#include "pipeline/verify_pipeline.h"

#include <utility>

#include <fmt/format.h>

#include "check/pass_timer.h"
#include "pipeline/build_program.h"
#include "pipeline/fsdp_actions.h"
#include "pipeline/rules.h"

namespace sc {
namespace {

void append(std::vector<Finding>& to, std::vector<Finding>&& from) {
  for (auto& f : from) to.push_back(std::move(f));
}

}  // namespace

VerifyResult verify(const PipelineSpec& spec, const VerifyOptions& options) {
  return verify(PipelineSpec(spec), options);
}

VerifyResult verify(PipelineSpec&& spec_in, const VerifyOptions& options) {
  VerifyResult r;
  PassTimer timer(r.pass_times);
  r.spec = std::move(spec_in);
  if (options.semantics) r.spec.p2p.semantics = *options.semantics;

  // Composed specs: FSDP and gradient reductions as PyTorch's pipelining runtime places them
  // (docs/facts/composed-runtime.md: _add_unshard_reshard, then _add_reduce_grad, before SEND/RECV are added).
  // Each kind is added only where the user placed none of it; a forward-only step reduces nothing.
  if (const auto& comp = r.spec.composition) {
    timer.run("place fsdp", [&] {
      for (auto& row : r.spec.actions) {
        if (comp->fsdp && !has_actions(row, {ActionKind::kUnshard, ActionKind::kReshard}))
          row = comp->reshard_after_forward ? add_unshard_reshard_per_forward(row)
                                            : add_unshard_reshard(row, comp->max_active_stages);
        if (r.spec.trains() && !has_actions(row, {ActionKind::kReduceGrad}))
          row = add_reduce_grad(row, r.spec.trained_microbatches());
      }
    });
  }

  if (options.lower && !r.spec.has_comms()) {
    std::string why;
    auto lowered = timer.run("lower", [&] {
      return lower_comms(r.spec.actions, r.spec.stage_to_rank, *options.lower, &why, r.spec.pipeline_starts);
    });
    if (lowered) {
      r.spec.actions = std::move(*lowered);
      // PyTorch's runtime posts every SEND/RECV action through its own batch_isend_irecv, a
      // group of one op (docs/facts/p2p-semantics.md#groups-of-one), while its CSV writes the
      // plain token. Only lazy creation tells the two apart (the group's communicator); elsewhere
      // a group of one is the same program as the plain op, so it is not built there.
      if (*options.lower == LowerPolicy::kPyTorch && r.spec.p2p.lazy_comm_init)
        for (auto& row : r.spec.actions)
          for (Step& st : row)
            if (is_p2p(st.first.kind)) st.in_batch = true;
    } else {
      Finding f;
      f.kind = FindingKind::kStructure;
      f.message = fmt::format("cannot add SEND/RECV to this schedule: {}", why);
      f.locations.push_back(r.spec.locs.schedule);
      r.findings.push_back(std::move(f));
    }
  }

  std::vector<Finding> front_end;
  append(front_end, std::move(r.findings));
  append(front_end, timer.run("structure", [&] { return check_structure(r.spec); }));
  append(front_end, timer.run("residency", [&] { return check_residency(r.spec); }));
  const BlockingModel blocking = options.blocking.value_or(r.spec.p2p.blocking);
  PipelineProgram built = timer.run("build", [&] {
    return options.keep_actions ? build_program(r.spec, blocking) : build_program_releasing_actions(r.spec, blocking);
  });
  append(front_end, std::move(built.causality));
  built.program.memory_limit_bytes = r.spec.memory.limit_bytes;
  ProgramVerifyOptions popt;
  popt.force_min_cut = options.force_min_cut;
  std::vector<PassTime> times = std::move(r.pass_times);
  static_cast<ProgramResult&>(r) = verify_program(std::move(built.program), std::move(front_end), popt, std::move(times));
  return r;
}
}  // namespace sc
