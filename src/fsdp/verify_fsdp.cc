#include "fsdp/verify_fsdp.h"

#include <algorithm>
#include <string_view>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "check/pass_timer.h"
#include "check/passes.h"
#include "support/units.h"

namespace sc {
namespace {

/// Peak of live parameter bytes ("param", "ag-buffer") per rank along the timeline.
std::vector<int64_t> gathered_peak(const Program& p, const Timeline& t) {
  std::vector<std::vector<std::pair<double, int64_t>>> ev(p.num_ranks);
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id)
    for (const MemEffect* m = p.mem_begin(id); m != p.mem_end(id); ++m) {
      if (m->buffer < 0) continue;
      std::string_view kind = p.buffers[m->buffer].kind.c_str();
      if (kind != "param" && kind != "ag-buffer") continue;
      ev[p.ops[id].rank].push_back({m->at_end ? t.ops[id].end_s : t.ops[id].start_s, m->bytes});
    }
  std::vector<int64_t> peak(p.num_ranks, 0);
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    std::sort(ev[r].begin(), ev[r].end());  // frees (negative) first at equal times
    int64_t live = 0;
    for (auto& [time, d] : ev[r]) peak[r] = std::max(peak[r], live += d);
  }
  return peak;
}

/// Every rank runs the same program up to its rank (no overrides, one program for all) and the
/// lowering laid the ranks out in equal contiguous blocks of ops and buffers with the same
/// shape: then any rank's interleaving results are rank 0's, shifted by the block sizes (the
/// shard and replicate groups are rows and columns of one mesh, so a permutation of ranks maps
/// rank 0 to any other and preserves the program). Returns the ops and buffers per rank, or
/// nullopt when the layout does not hold.
std::optional<std::pair<int32_t, int32_t>> rank_blocks(const FsdpSpec& spec, const Program& p) {
  if (!spec.overrides.empty()) return std::nullopt;
  if (!spec.programs.empty() && !(spec.programs.size() == 1 && spec.programs.count(-1))) return std::nullopt;
  const int32_t R = p.num_ranks;
  if (R < 2 || p.ops.size() % R || p.buffers.size() % R) return std::nullopt;
  const int32_t K = static_cast<int32_t>(p.ops.size() / R), B = static_cast<int32_t>(p.buffers.size() / R);
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    const Op& o = p.ops[id];
    const Op& base = p.ops[id % K];
    if (o.rank != id / K || o.kind != base.kind || o.duration_s != base.duration_s || o.bytes != base.bytes ||
        o.seq() != base.seq() || p.deps_end(id) - p.deps_begin(id) != p.deps_end(id % K) - p.deps_begin(id % K) ||
        p.mem_end(id) - p.mem_begin(id) != p.mem_end(id % K) - p.mem_begin(id % K))
      return std::nullopt;
  }
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].rank != static_cast<int32_t>(b / B) || p.buffers[b].bytes != p.buffers[b % B].bytes)
      return std::nullopt;
  return std::make_pair(K, B);
}

/// The view of the parameter buffers ("param", "ag-buffer"), without static bytes.
MemoryView gathered_view(const Program& p) {
  MemoryView v;
  v.with_static = false;
  v.buffers.assign(p.buffers.size(), 0);
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    std::string_view kind = p.buffers[b].kind.c_str();
    v.buffers[b] = kind == "param" || kind == "ag-buffer";
  }
  return v;
}

FsdpFigures compute_figures(const FsdpSpec& spec, const Program& p, const std::vector<FsdpOpInfo>& info,
                            const Timeline& t, std::vector<int64_t> gathered_worst_case) {
  FsdpFigures f;
  // Explicit programs have no optimizer step: the whole program is one step.
  const bool generated = spec.programs.empty();
  const int iters = generated ? std::max(spec.iterations, 1) : 1;
  double gathered = 0;  // what the all-gathers move (the linear weights in fp8 under a float8 all-gather)
  for (const auto& u : spec.units) {
    f.params_bytes += static_cast<double>(u.params_bytes);
    gathered += static_cast<double>(u.gather_bytes());
    f.largest_unit_params_bytes = std::max(f.largest_unit_params_bytes, u.params_bytes);
  }
  // Communication volume per rank and step.
  std::vector<std::vector<double>> volume(p.num_ranks, std::vector<double>(iters, 0.0));
  std::vector<double> comm_time(p.num_ranks, 0.0), exposed(p.num_ranks, 0.0);
  std::vector<std::vector<double>> unit_exposed(spec.units.size(), std::vector<double>(p.num_ranks, 0.0));
  std::vector<std::vector<double>> opt_end(p.num_ranks, std::vector<double>(iters, 0.0));
  std::vector<OpId> stream_prev(p.ops.size(), kNoOp);  // the op before each op on its stream
  for (const Stream& st : p.streams)
    for (size_t i = 1; i < st.ops.size(); ++i) stream_prev[st.ops[i]] = st.ops[i - 1];
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    const Op& o = p.ops[id];
    const FsdpOpInfo& in = info[id];
    int it = std::clamp<int>(in.iteration, 0, iters - 1);
    if (o.kind == OpKind::kCollective && o.comm() >= 0) {
      double n = static_cast<double>(p.comms[o.comm()].group_size());
      // A backward all-gather from a post-forward shard runs over the post-forward group.
      if (o.collective == CollectiveKind::kAllGather && in.backward && post_forward_group(spec) > 1)
        n = post_forward_group(spec);
      double share = n > 1 ? (n - 1) / n * static_cast<double>(o.bytes) : 0.0;
      volume[o.rank][it] += o.collective == CollectiveKind::kAllReduce ? 2 * share : share;
      comm_time[o.rank] += t.ops[id].end_s - t.ops[id].start_s;
      // A collective issued on the compute stream (DeepSpeed overlap_comm: false) hides behind
      // nothing: all of it is exposed.
      if (std::string_view(p.streams[o.stream].name) == "compute") {
        exposed[o.rank] += t.ops[id].end_s - t.ops[id].start_s;
        if (in.unit >= 0 && in.unit < static_cast<int32_t>(spec.units.size()))
          unit_exposed[in.unit][o.rank] += t.ops[id].end_s - t.ops[id].start_s;
      }
    }
    if (in.kind == FsdpOpKind::kOptimizer) opt_end[o.rank][it] = std::max(opt_end[o.rank][it], t.ops[id].end_s);
    if (in.kind == FsdpOpKind::kWait || in.kind == FsdpOpKind::kWaitReduce) {
      const OpId before = stream_prev[id];
      double free_at = before != kNoOp ? t.ops[before].end_s : 0.0;
      double wait = std::max(0.0, t.ops[id].start_s - free_at);
      exposed[o.rank] += wait;
      if (in.unit >= 0 && in.unit < static_cast<int32_t>(spec.units.size())) unit_exposed[in.unit][o.rank] += wait;
    }
  }
  for (int32_t r = 0; r < p.num_ranks; ++r)
    for (int it = 0; it < iters; ++it) f.comm_bytes_per_step = std::max(f.comm_bytes_per_step, volume[r][it]);
  const double n = spec.shard_size, rep = spec.replicate_size;
  const double ratio = static_cast<double>(spec.reduce_dtype.bytes) / spec.param_dtype.bytes;
  // The backward's all-gather: none when the forward keeps the parameters, over the shard group
  // after a full reshard, over the post-forward group of k ranks after an integer one.
  const int k = post_forward_group(spec);
  const double back_gather = k == 0 ? (n - 1) / n : k == 1 ? 0.0 : (k - 1.0) / k;
  if (generated)
    f.expected_comm_bytes_per_step =
      spec.microbatches * (n > 1 ? (n - 1) / n * (gathered + ratio * f.params_bytes) + back_gather * gathered : 0.0) +
      spec.microbatches * (rep > 1 ? 2 * (rep - 1) / rep * f.params_bytes * ratio / n : 0.0);
  f.most_exposed_rank = static_cast<int32_t>(std::max_element(exposed.begin(), exposed.end()) - exposed.begin());
  f.exposed_comm_s = exposed[f.most_exposed_rank];
  f.comm_time_s = comm_time[f.most_exposed_rank];
  f.overlap = f.comm_time_s > 0 ? std::clamp(1.0 - f.exposed_comm_s / f.comm_time_s, 0.0, 1.0) : 1.0;
  for (size_t u = 0; u < spec.units.size(); ++u) {
    auto it = std::max_element(unit_exposed[u].begin(), unit_exposed[u].end());
    f.exposure.push_back({spec.units[u].name, *it, static_cast<int32_t>(it - unit_exposed[u].begin())});
  }
  // Step times and per-step peaks.
  f.step_time_s.assign(iters, 0.0);
  std::vector<double> boundary(iters, 0.0);
  for (int it = 0; it < iters; ++it) {
    for (int32_t r = 0; r < p.num_ranks; ++r) boundary[it] = std::max(boundary[it], opt_end[r][it]);
    if (!generated) boundary[it] = t.makespan_s;
    f.step_time_s[it] = boundary[it] - (it ? boundary[it - 1] : 0.0);
  }
  f.peak_bytes_per_step.assign(iters, std::vector<int64_t>(p.num_ranks, 0));
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    int step = 0;
    for (auto& [time, live] : t.memory_curve[r]) {
      while (step + 1 < iters && time >= boundary[step] && boundary[step] > 0) ++step;
      f.peak_bytes_per_step[step][r] = std::max(f.peak_bytes_per_step[step][r], live);
    }
  }
  f.gathered_peak_bytes_per_rank = gathered_peak(p, t);
  f.gathered_worst_case_bytes_per_rank = std::move(gathered_worst_case);
  return f;
}

}  // namespace

VerifyResult verify_fsdp(const FsdpSpec& spec, bool force_min_cut, bool use_symmetry) {
  VerifyResult v;
  auto extras = std::make_shared<FsdpExtras>();
  extras->spec = spec;
  PassTimer timer(v.pass_times);
  v.spec.name = spec.name;
  v.spec.path = source_name(spec.locs.file.file);
  v.spec.ranks = spec.ranks;
  v.spec.memory.limit_bytes = spec.limit_bytes;
  FsdpProgram lowered;
  timer.run("lower", [&] { lowered = lower_fsdp(spec, use_symmetry); });
  v.program = std::move(lowered.program);
  extras->info = std::move(lowered.info);
  for (auto& f : group_by_rank(std::move(lowered.findings))) v.findings.push_back(std::move(f));

  if (use_symmetry && v.program.rank_classes.empty())
    if (auto blocks = rank_blocks(spec, v.program)) {
      v.program.rank_images.assign(v.program.num_ranks, RankImage{});
      for (int32_t r = 1; r < v.program.num_ranks; ++r)
        v.program.rank_images[r] = RankImage{0, r * blocks->first, r * blocks->second};
    }
  v.program.memory_limit_bytes = spec.limit_bytes;
  v.program.max_relative_error = spec.max_relative_error;
  v.program.max_bias = spec.max_bias;
  v.program.deterministic = spec.deterministic;
  ProgramVerifyOptions popt;
  popt.force_min_cut = force_min_cut;
  popt.extra_views.push_back(gathered_view(v.program));
  std::vector<Finding> front_end = std::move(v.findings);
  std::vector<PassTime> times = std::move(v.pass_times);
  static_cast<ProgramResult&>(v) = verify_program(std::move(v.program), std::move(front_end), popt, std::move(times));
  if (v.execution.completed) {
    PassTimer figures_timer(v.pass_times);
    figures_timer.run("figures", [&] {
      extras->figures =
          compute_figures(spec, v.program, extras->info, *v.timeline, std::move(v.extra_worst_case[0].bytes_per_rank));
    });
  }
  v.extras = std::move(extras);
  return v;
}
}  // namespace sc
