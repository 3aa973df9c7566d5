#include "check/verify.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "check/pass_timer.h"
#include "check/passes.h"
#include "support/concurrent.h"

namespace sc {
namespace {

void append(std::vector<Finding>& to, std::vector<Finding>&& from) {
  for (auto& f : from) to.push_back(std::move(f));
}

/// Copies each representative's worst case to its images, shifting buffer and op ids.
void copy_to_images(WorstCaseMemory& w, const std::vector<RankImage>& images) {
  for (size_t r = 0; r < images.size(); ++r) {
    const RankImage& im = images[r];
    if (im.of < 0) continue;
    w.bytes_per_rank[r] = w.bytes_per_rank[im.of];
    w.used_min_cut[r] = w.used_min_cut[im.of];
    w.live_buffers[r] = w.live_buffers[im.of];
    for (int32_t& b : w.live_buffers[r]) b += im.buffer_shift;
    w.running_ops[r] = w.running_ops[im.of];
    for (OpId& op : w.running_ops[r]) op += im.op_shift;
  }
}

/// When collectives diverge, the hangs are its consequence: one finding that leads with the
/// culprit ranks and the first divergent collective, naming every hung rank.
void explain_hangs(std::vector<Finding>& hangs, const std::vector<Finding>& divergence, const Program& p) {
  if (divergence.empty() || hangs.empty()) return;
  const Finding& d = divergence.front();
  Finding& h = hangs.front();
  // Every divergence names its culprits (two communicators may each miss a different rank).
  std::vector<int32_t> culprits;
  for (const Finding& each : divergence) culprits.insert(culprits.end(), each.ranks.begin(), each.ranks.end());
  std::sort(culprits.begin(), culprits.end());
  culprits.erase(std::unique(culprits.begin(), culprits.end()), culprits.end());
  std::string who = culprits.size() == 1 ? fmt::format("rank {}", culprits.front())
                                         : fmt::format("ranks {}", format_rank_ranges(culprits));
  std::vector<int32_t> hung;
  for (const Finding& f : hangs) hung.insert(hung.end(), f.ranks.begin(), f.ranks.end());
  std::sort(hung.begin(), hung.end());
  hung.erase(std::unique(hung.begin(), hung.end()), hung.end());
  h.message = fmt::format("hang caused by {}: {}; {} {} {} forever: {}", who, d.message, hung.size() == 1 ? "rank" : "ranks",
                          format_rank_ranges(hung), hung.size() == 1 ? "waits" : "wait", h.message);
  // Located first where the input makes each culprit differ (Program::rank_locs), as the
  // divergence is when its culprits stand apart from a majority (not in a tie), then where the
  // others hang.
  for (auto it = culprits.rbegin(); it != culprits.rend(); ++it) {
    const int32_t r = *it;
    if (r < 0 || r >= static_cast<int32_t>(p.rank_locs.size()) || !p.rank_locs[r].valid()) continue;
    const SourceLoc& at = p.rank_locs[r];
    const bool carried = std::any_of(divergence.begin(), divergence.end(), [&](const Finding& each) {
      return std::any_of(each.locations.begin(), each.locations.end(), [&](const SourceLoc& l) {
        return l.file == at.file && l.line == at.line && l.col == at.col;
      });
    });
    if (!carried) continue;
    h.locations.insert(h.locations.begin(), at);
    h.ops.insert(h.ops.begin(), r < static_cast<int32_t>(p.rank_loc_labels.size()) ? p.rank_loc_labels[r] : "");
  }
  h.ranks.clear();
  for (int32_t r : culprits) h.ranks.push_back(r);
  for (int32_t r : hung)
    if (std::find(culprits.begin(), culprits.end(), r) == culprits.end()) h.ranks.push_back(r);
  if (hangs.size() > 1)
    h.details.push_back(fmt::format("{} more ranks hang the same way; first shown above", hangs.size() - 1));
  hangs.resize(1);
}

/// Per representative rank, the ranks it stands for (itself first, then its images); empty for
/// an image.
std::vector<std::vector<int32_t>> rank_classes(const Program& p) {
  std::vector<std::vector<int32_t>> classes(p.num_ranks);
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    const int32_t of = r < static_cast<int32_t>(p.rank_images.size()) ? p.rank_images[r].of : -1;
    if (of < 0) classes[r].insert(classes[r].begin(), r);
    else classes[of].push_back(r);
  }
  for (auto& c : classes) std::sort(c.begin(), c.end());
  return classes;
}

/// A symmetry quotient's finding names the job ranks its built ranks stand for
/// (Program::rank_classes): its ranks become their classes' ranks, a leading "rank N " becomes
/// "ranks a-b: each " as group_by_rank writes one finding for many ranks, and "on rank N "
/// becomes "on ranks a-b ".
void name_job_ranks(Finding& f, const Program& p) {
  if (p.rank_classes.empty() || f.ranks.empty()) return;
  std::vector<int32_t> job;
  for (int32_t r : f.ranks) {
    if (r < 0 || r >= p.num_ranks) continue;
    const RankClass c = p.job_class(r);
    for (int32_t k = 0; k < c.count; ++k) job.push_back(c.first + k);
  }
  std::sort(job.begin(), job.end());
  job.erase(std::unique(job.begin(), job.end()), job.end());
  if (job.size() <= f.ranks.size()) return;
  if (f.ranks.size() == 1) {
    const std::string lead = fmt::format("rank {} ", f.ranks[0]);
    if (f.message.rfind(lead, 0) == 0) {
      f.message = fmt::format("ranks {}: each {}", format_rank_ranges(job), f.message.substr(lead.size()));
      f.details.insert(f.details.begin(), fmt::format("shown for rank {}; the others are the same", f.ranks[0]));
      f.ranks.assign(job.begin(), job.end());
      return;
    }
  }
  name_ranks(f, job);
}

}  // namespace

namespace {
std::atomic<PassObserver> g_pass_observer{nullptr};
}  // namespace

void set_pass_observer(PassObserver observer) { g_pass_observer.store(observer); }
PassObserver pass_observer() { return g_pass_observer.load(std::memory_order_relaxed); }

double total_seconds(const std::vector<PassTime>& passes) {
  double total = 0;
  for (size_t i = 0; i < passes.size(); ++i) {
    const PassTime& p = passes[i];
    if (p.beside <= 0) {
      total += p.seconds;
      continue;
    }
    double first = 0;  // the first thread's passes, already counted
    for (size_t k = 1; k <= static_cast<size_t>(p.beside) && k <= i; ++k) first += passes[i - k].seconds;
    double second = p.seconds;
    while (i + 1 < passes.size() && passes[i + 1].beside == PassTime::kContinuesThread) second += passes[++i].seconds;
    total += std::max(0.0, second - first);
  }
  return total;
}

ProgramResult verify_program(Program program, std::vector<Finding> front_end, const ProgramVerifyOptions& options,
                             std::vector<PassTime> pass_times) {
  ProgramResult r;
  r.program = std::move(program);
  r.findings = std::move(front_end);
  cap_findings(r.findings, r.omitted_findings);
  r.pass_times = std::move(pass_times);
  PassTimer timer(r.pass_times);
  const Program& p = r.program;

  bool has_collectives = false;
  for (const Communicator& c : p.comms) has_collectives |= c.ranks.size() >= 2;
  std::vector<Finding> divergence;
  if (has_collectives) divergence = timer.run("collectives", [&] { return check_collectives(p); });

  // The deadlock walk also times the run (TimingWalk: each op is placed as it completes). The
  // worst case of memory and the channel check read only the program: on a large one they run
  // beside that walk on a second thread; the worst case is kept only when every op completes (on
  // a deadlocked program it means nothing, worst_case_memory_views).
  const bool concurrent = options.concurrent_passes && p.ops.size() >= kConcurrentPassOps;
  // Per representative rank, the ranks it stands for (images of another rank: the per-rank
  // interleaving passes run on the representatives and hold for their images).
  const std::vector<std::vector<int32_t>> classes = rank_classes(p);
  std::vector<int32_t> reps;
  for (int32_t k = 0; k < p.num_ranks; ++k)
    if (!classes[k].empty()) reps.push_back(k);
  const bool images = static_cast<int32_t>(reps.size()) < p.num_ranks;
  const std::vector<int32_t>* only = images ? &reps : nullptr;
  std::vector<WorstCaseMemory> worst;
  auto worst_case_pass = [&](PassTimer& t) {
    t.run("worst-case memory", [&] {
      std::vector<MemoryView> views{MemoryView{}};
      views.insert(views.end(), options.extra_views.begin(), options.extra_views.end());
      worst = worst_case_memory_views(p, views, options.force_min_cut, only);
    });
  };
  std::vector<Finding> channel;
  std::vector<PassTime> walk_time, memory_time;
  run_concurrently(
      concurrent,
      [&] {
        PassTimer t(walk_time);
        TimingWalk walk(p);
        r.execution = t.run("deadlock", [&] { return execute(p, &walk); });
        if (r.execution.completed) r.timeline = t.run("timing", [&] { return walk.finish(); });
      },
      [&] {
        if (!concurrent) return;
        PassTimer t(memory_time);
        worst_case_pass(t);
        if (!p.channels.empty()) channel = t.run("channel", [&] { return check_channels(p); });
      });
  r.pass_times.insert(r.pass_times.end(), walk_time.begin(), walk_time.end());
  for (size_t k = 0; k < memory_time.size(); ++k) {
    memory_time[k].beside = k == 0 ? static_cast<int32_t>(walk_time.size()) : PassTime::kContinuesThread;
    r.pass_times.push_back(std::move(memory_time[k]));
  }
  if (!concurrent && r.execution.completed) worst_case_pass(timer);
  if (!concurrent && !p.channels.empty()) channel = timer.run("channel", [&] { return check_channels(p); });
  if (r.execution.completed) {
    if (images)
      for (auto& w : worst) copy_to_images(w, p.rank_images);
    r.worst_case = std::move(worst[0]);
    r.extra_worst_case.assign(std::make_move_iterator(worst.begin() + 1), std::make_move_iterator(worst.end()));
  }
  std::vector<Finding> hangs = r.execution.findings;
  if (p.channels.empty() && !p.comms.empty()) {  // no P2P messages: the P2P semantics play no part
    // "deadlock under rendezvous semantics: wait-for cycle ..." -> "wait-for cycle ..."
    const std::string sem = fmt::format(" under {} semantics", format_semantics(p.semantics));
    for (Finding& h : hangs) {
      if (auto pos = h.message.find(sem); pos != std::string::npos) h.message.erase(pos, sem.size());
      if (h.message.rfind("deadlock: ", 0) == 0) h.message.erase(0, 10);
    }
  }
  explain_hangs(hangs, divergence, p);
  append(r.findings, std::move(hangs));
  append(r.findings, std::move(divergence));
  append(r.findings, std::move(channel));
  if (!p.arithmetic.empty()) {
    NumericsPassResult numerics = timer.run("numerics", [&] { return check_numerics(p); });
    append(r.findings, std::move(numerics.findings));
    r.numerics_fixes = std::move(numerics.fixes);
  }

  for (const auto& s : p.streams) r.edges += s.ops.empty() ? 0 : s.ops.size() - 1;
  r.edges += p.deps.size();
  // Matched sends: FIFO per channel (Program::match_channels), so the smaller of the channel's
  // send and recv counts; counted per channel, not by a scan of every op.
  for (const Channel& ch : p.channels) r.edges += std::min(ch.sends.size(), ch.recvs.size());

  if (r.execution.completed) {
    if (!p.uses.empty())
      timer.run("buffer residency", [&] {
        for (auto& f : check_buffer_residency(p, 8, only)) {
          if (images && f.ranks.size() == 1 && f.ranks[0] >= 0 && f.ranks[0] < p.num_ranks &&
              classes[f.ranks[0]].size() > 1)
            name_ranks(f, classes[f.ranks[0]]);  // the same violation on every image
          r.findings.push_back(std::move(f));
        }
      });
    if (p.memory_limit_bytes)
      append(r.findings, timer.run("memory", [&] {
               return group_by_rank(check_memory(p, &*r.timeline, &*r.worst_case, *p.memory_limit_bytes));
             }));
  }
  for (Finding& f : r.findings) name_job_ranks(f, p);
  cap_findings(r.findings, r.omitted_findings);
  r.exit_code = exit_code_for(r.findings);
  return r;
}

}  // namespace sc
