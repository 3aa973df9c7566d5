#include "check/verify.h"

#include <fmt/format.h>

#include "check/pass_timer.h"
#include "check/passes.h"
#include "pipeline/build_program.h"

namespace sc {
namespace {

void append(std::vector<Finding>& to, std::vector<Finding>&& from) {
  for (auto& f : from) to.push_back(std::move(f));
}

}  // namespace

VerifyResult verify(const PipelineSpec& spec_in, const VerifyOptions& options) {
  VerifyResult r;
  PassTimer timer(r.pass_times);
  r.spec = spec_in;
  if (options.semantics) r.spec.p2p.semantics = *options.semantics;

  if (options.lower && !r.spec.has_comms()) {
    std::string why;
    auto lowered = timer.run("lower", [&] {
      return lower_comms(r.spec.actions, r.spec.stage_to_rank, *options.lower, &why, r.spec.pipeline_starts);
    });
    if (lowered) {
      r.spec.actions = std::move(*lowered);
    } else {
      Finding f;
      f.kind = FindingKind::kStructure;
      f.message = fmt::format("cannot add SEND/RECV to this schedule: {}", why);
      f.locations.push_back(r.spec.locs.schedule);
      r.findings.push_back(std::move(f));
    }
  }

  append(r.findings, timer.run("structure", [&] { return check_structure(r.spec); }));
  append(r.findings, timer.run("residency", [&] { return check_residency(r.spec); }));
  PipelineProgram built = timer.run("build", [&] { return build_program(r.spec, options.blocking); });
  r.program = std::move(built.program);
  append(r.findings, std::move(built.causality));

  r.execution = timer.run("deadlock", [&] { return execute(r.program); });
  for (const auto& f : r.execution.findings) r.findings.push_back(f);
  append(r.findings, timer.run("channel", [&] { return check_channels(r.program); }));

  for (const auto& s : r.program.streams) r.edges += s.ops.empty() ? 0 : s.ops.size() - 1;
  r.edges += r.program.deps.size();
  for (const auto& op : r.program.ops)
    if (op.kind == OpKind::kSend && op.match != kNoOp) ++r.edges;

  if (r.execution.completed) {
    if (!r.program.uses.empty())
      append(r.findings, timer.run("buffer residency", [&] { return check_buffer_residency(r.program); }));
    r.timeline = timer.run("timing", [&] { return simulate(r.program, r.execution.order); });
    r.worst_case = timer.run("worst-case memory", [&] { return worst_case_memory(r.program, options.force_min_cut); });
    if (r.spec.memory.limit_bytes)
      append(r.findings, timer.run("memory", [&] {
               return check_memory(r.program, &*r.timeline, &*r.worst_case, *r.spec.memory.limit_bytes);
             }));
  }
  r.exit_code = exit_code_for(r.findings);
  return r;
}

}  // namespace sc
