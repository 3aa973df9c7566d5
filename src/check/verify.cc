#include "check/verify.h"

#include <algorithm>

#include <fmt/format.h>

#include "check/pass_timer.h"
#include "check/passes.h"

namespace sc {
namespace {

void append(std::vector<Finding>& to, std::vector<Finding>&& from) {
  for (auto& f : from) to.push_back(std::move(f));
}

/// Copies rank 0's worst case to every rank, shifting buffer and op ids by the block sizes.
void replicate_rank0(WorstCaseMemory& w, int32_t ranks, int32_t ops_per_rank, int32_t buffers_per_rank) {
  for (int32_t r = 1; r < ranks; ++r) {
    w.bytes_per_rank[r] = w.bytes_per_rank[0];
    w.used_min_cut[r] = w.used_min_cut[0];
    w.live_buffers[r] = w.live_buffers[0];
    for (int32_t& b : w.live_buffers[r]) b += r * buffers_per_rank;
    w.running_ops[r] = w.running_ops[0];
    for (OpId& op : w.running_ops[r]) op += r * ops_per_rank;
  }
}

/// When collectives diverge, the hangs are its consequence: one finding that leads with the
/// culprit ranks and the first divergent collective, naming every hung rank.
void explain_hangs(std::vector<Finding>& hangs, const std::vector<Finding>& divergence) {
  if (divergence.empty() || hangs.empty()) return;
  const Finding& d = divergence.front();
  Finding& h = hangs.front();
  std::vector<int32_t> culprits(d.ranks.begin(), d.ranks.end());
  std::string who = culprits.size() == 1 ? fmt::format("rank {}", culprits.front())
                                         : fmt::format("ranks {}", format_rank_ranges(culprits));
  std::vector<int32_t> hung;
  for (const Finding& f : hangs) hung.insert(hung.end(), f.ranks.begin(), f.ranks.end());
  std::sort(hung.begin(), hung.end());
  hung.erase(std::unique(hung.begin(), hung.end()), hung.end());
  h.message = fmt::format("hang caused by {}: {}; {} {} {} forever: {}", who, d.message, hung.size() == 1 ? "rank" : "ranks",
                          format_rank_ranges(hung), hung.size() == 1 ? "waits" : "wait", h.message);
  h.ranks.clear();
  for (int32_t r : culprits) h.ranks.push_back(r);
  for (int32_t r : hung)
    if (std::find(culprits.begin(), culprits.end(), r) == culprits.end()) h.ranks.push_back(r);
  if (hangs.size() > 1)
    h.details.push_back(fmt::format("{} more ranks hang the same way; first shown above", hangs.size() - 1));
  hangs.resize(1);
}

/// Every rank, for a finding found on rank 0 of a symmetric program.
std::vector<int32_t> all_ranks(int32_t n) {
  std::vector<int32_t> all(n);
  for (int32_t k = 0; k < n; ++k) all[k] = k;
  return all;
}

}  // namespace

ProgramResult verify_program(Program program, std::vector<Finding> front_end, const ProgramVerifyOptions& options,
                             std::vector<PassTime> pass_times) {
  ProgramResult r;
  r.program = std::move(program);
  r.findings = std::move(front_end);
  r.pass_times = std::move(pass_times);
  PassTimer timer(r.pass_times);
  const Program& p = r.program;

  bool has_collectives = false;
  for (const Communicator& c : p.comms) has_collectives |= c.ranks.size() >= 2;
  std::vector<Finding> divergence;
  if (has_collectives) divergence = timer.run("collectives", [&] { return check_collectives(p); });

  r.execution = timer.run("deadlock", [&] { return execute(p); });
  std::vector<Finding> hangs = r.execution.findings;
  if (p.channels.empty() && !p.comms.empty()) {  // no P2P messages: the P2P semantics play no part
    // "deadlock under rendezvous semantics: wait-for cycle ..." -> "wait-for cycle ..."
    const std::string sem = fmt::format(" under {} semantics", format_semantics(p.semantics));
    for (Finding& h : hangs) {
      if (auto pos = h.message.find(sem); pos != std::string::npos) h.message.erase(pos, sem.size());
      if (h.message.rfind("deadlock: ", 0) == 0) h.message.erase(0, 10);
    }
  }
  explain_hangs(hangs, divergence);
  append(r.findings, std::move(hangs));
  append(r.findings, std::move(divergence));
  if (!p.channels.empty()) append(r.findings, timer.run("channel", [&] { return check_channels(p); }));

  for (const auto& s : p.streams) r.edges += s.ops.empty() ? 0 : s.ops.size() - 1;
  r.edges += p.deps.size();
  for (const auto& op : p.ops)
    if (op.kind == OpKind::kSend && op.match != kNoOp) ++r.edges;

  if (r.execution.completed) {
    // Symmetric programs: the per-rank interleaving passes run on rank 0 and hold for every rank.
    const std::optional<RankSymmetry> sym = p.num_ranks > 1 ? p.symmetry : std::nullopt;
    const std::vector<int32_t> rank0{0};
    const std::vector<int32_t>* only = sym ? &rank0 : nullptr;
    if (!p.uses.empty())
      timer.run("buffer residency", [&] {
        for (auto& f : check_buffer_residency(p, 8, only)) {
          if (sym) name_ranks(f, all_ranks(p.num_ranks));  // the same violation on every rank
          r.findings.push_back(std::move(f));
        }
      });
    r.timeline = timer.run("timing", [&] { return simulate(p, r.execution.order); });
    timer.run("worst-case memory", [&] {
      std::vector<MemoryView> views{MemoryView{}};
      views.insert(views.end(), options.extra_views.begin(), options.extra_views.end());
      std::vector<WorstCaseMemory> worst = worst_case_memory_views(p, views, options.force_min_cut, only);
      if (sym)
        for (auto& w : worst) replicate_rank0(w, p.num_ranks, sym->ops_per_rank, sym->buffers_per_rank);
      r.worst_case = std::move(worst[0]);
      r.extra_worst_case.assign(std::make_move_iterator(worst.begin() + 1), std::make_move_iterator(worst.end()));
    });
    if (p.memory_limit_bytes)
      append(r.findings, timer.run("memory", [&] {
               return group_by_rank(check_memory(p, &*r.timeline, &*r.worst_case, *p.memory_limit_bytes));
             }));
  }
  r.exit_code = exit_code_for(r.findings);
  return r;
}

}  // namespace sc
