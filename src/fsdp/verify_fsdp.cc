#include "fsdp/verify_fsdp.h"

#include <algorithm>
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

/// The label of an op without its "(it0 fwd)" suffix: what must agree across ranks.
std::string base_label(const Program& p, OpId id) {
  std::string l = p.label(id);
  size_t cut = l.find(" (");
  return cut == std::string::npos ? l : l.substr(0, cut);
}

/// What the k-th collective of a member is, for comparison and messages.
std::string identity(const Program& p, OpId id) {
  if (id == kNoOp) return "nothing more (no collective left)";
  const Op& o = p.ops[id];
  std::string dtype = o.dtype && *o.dtype ? fmt::format(" {}", o.dtype) : std::string();
  return fmt::format("{} '{}' ({}{})", collective_name(o.collective), base_label(p, id),
                     format_bytes(static_cast<double>(o.bytes)), dtype);
}

}  // namespace

namespace {

/// Cross-communicator order: two ranks that both belong to communicators A and B must enter
/// them in the same interleaving (issue order = op id order per rank, as the front-ends add
/// ops), else NCCL can deadlock when the collectives block (FACTS §3). For each B collective k
/// of a rank, the number of A collectives that rank issued before it must agree across the
/// shared ranks. One finding per pair of communicators.
void check_cross_order(const Program& p, std::vector<Finding>& out) {
  // Candidate pairs: communicators that share a rank; per rank its communicators.
  std::vector<std::vector<int32_t>> comms_of(p.num_ranks);
  for (size_t c = 0; c < p.comms.size(); ++c)
    for (int32_t r : p.comms[c].ranks)
      if (r >= 0 && r < p.num_ranks) comms_of[r].push_back(static_cast<int32_t>(c));
  std::set<std::pair<int32_t, int32_t>> pairs;
  for (const auto& cs : comms_of)
    for (size_t i = 0; i < cs.size(); ++i)
      for (size_t j = i + 1; j < cs.size(); ++j) pairs.insert({cs[i], cs[j]});
  for (auto [a, b] : pairs) {
    const Communicator& ca = p.comms[a];
    const Communicator& cb = p.comms[b];
    std::vector<int32_t> shared;
    std::set_intersection(ca.ranks.begin(), ca.ranks.end(), cb.ranks.begin(), cb.ranks.end(), std::back_inserter(shared));
    if (shared.size() < 2) continue;
    // Per shared rank: for each B collective, how many A collectives precede it.
    auto pattern = [&](int32_t r) {
      const auto& as = ca.ops[ca.member_index(r)];
      const auto& bs = cb.ops[cb.member_index(r)];
      std::vector<int32_t> before(bs.size());
      size_t i = 0;
      for (size_t k = 0; k < bs.size(); ++k) {
        while (i < as.size() && as[i] < bs[k]) ++i;
        before[k] = static_cast<int32_t>(i);
      }
      return before;
    };
    const std::vector<int32_t> first = pattern(shared.front());
    for (size_t m = 1; m < shared.size(); ++m) {
      const std::vector<int32_t> other = pattern(shared[m]);
      size_t n = std::min(first.size(), other.size());
      size_t k = 0;
      while (k < n && first[k] == other[k]) ++k;
      if (k == n) continue;
      const int32_t r0 = shared.front(), r1 = shared[m];
      OpId op0 = cb.ops[cb.member_index(r0)][k], op1 = cb.ops[cb.member_index(r1)][k];
      Finding f;
      f.kind = FindingKind::kChannel;
      f.ranks = {r0, r1};
      f.ops = {p.label(op0), p.label(op1)};
      f.locations = {p.ops[op0].loc, p.ops[op1].loc};
      f.message = fmt::format(
          "ranks {} and {} enter communicators '{}' and '{}' in different orders: rank {} issues {} #{} on '{}' after {} "
          "collectives on '{}', rank {} after {}",
          r0, r1, ca.name, cb.name, r0, collective_name(p.ops[op0].collective), k + 1, cb.name, first[k], ca.name, r1,
          other[k]);
      out.push_back(std::move(f));
      break;
    }
  }
}

}  // namespace

std::vector<Finding> check_collectives(const Program& p) {
  std::vector<Finding> out;
  for (const Communicator& c : p.comms) {
    if (c.ranks.size() < 2) continue;
    size_t longest = 0;
    for (const auto& s : c.ops) longest = std::max(longest, s.size());
    for (size_t k = 0; k < longest; ++k) {
      // Group members by what they issue at k.
      std::map<std::string, std::vector<int32_t>> by;
      std::map<std::string, OpId> example;
      for (size_t m = 0; m < c.ranks.size(); ++m) {
        OpId id = k < c.ops[m].size() ? c.ops[m][k] : kNoOp;
        std::string key = identity(p, id);
        by[key].push_back(c.ranks[m]);
        example.emplace(key, id);
      }
      if (by.size() == 1) continue;
      // The majority is taken as intended; every other group is a culprit (a tie names all).
      auto majority = std::max_element(by.begin(), by.end(), [](const auto& a, const auto& b) {
        return a.second.size() < b.second.size();
      });
      size_t ties = std::count_if(by.begin(), by.end(), [&](const auto& g) { return g.second.size() == majority->second.size(); });
      Finding f;
      f.kind = FindingKind::kChannel;
      std::vector<std::string> parts;
      for (const auto& [key, ranks] : by) {
        if (ties == 1 && key == majority->first) continue;
        for (int32_t r : ranks) f.ranks.push_back(r);
        parts.push_back(fmt::format("rank{} {} issue{} {}", ranks.size() == 1 ? "" : "s", format_rank_ranges(ranks),
                                    ranks.size() == 1 ? "s" : "", key));
        OpId id = example[key];
        if (id != kNoOp) {
          f.ops.push_back(p.label(id));
          f.locations.push_back(p.ops[id].loc);
        }
      }
      std::string msg = fmt::format("collectives diverge on communicator '{}' at #{}: ", c.name, k + 1);
      for (size_t i = 0; i < parts.size(); ++i) msg += (i ? "; " : "") + parts[i];
      if (ties == 1)
        msg += fmt::format(" where rank{} {} issue{} {}", majority->second.size() == 1 ? "" : "s",
                           format_rank_ranges(majority->second), majority->second.size() == 1 ? "s" : "", majority->first);
      f.message = msg;
      for (size_t m = 0; m < c.ranks.size(); ++m)
        f.details.push_back(fmt::format("rank {} issues {} collectives on '{}'", c.ranks[m], c.ops[m].size(), c.name));
      if (f.details.size() > 16) {
        f.details.resize(16);
        f.details.push_back("...");
      }
      out.push_back(std::move(f));
      break;  // the first divergence per communicator; later ones follow from it
    }
  }
  check_cross_order(p, out);
  return out;
}

namespace {

/// Peak of live parameter bytes ("param", "ag-buffer") per rank along the timeline.
std::vector<int64_t> gathered_peak(const Program& p, const Timeline& t) {
  std::vector<std::vector<std::pair<double, int64_t>>> ev(p.num_ranks);
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id)
    for (const MemEffect* m = p.mem_begin(id); m != p.mem_end(id); ++m) {
      if (m->buffer < 0) continue;
      std::string_view kind = p.buffers[m->buffer].kind;
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
        o.seq != base.seq || o.dep_end - o.dep_begin != base.dep_end - base.dep_begin ||
        o.mem_end - o.mem_begin != base.mem_end - base.mem_begin)
      return std::nullopt;
  }
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].rank != static_cast<int32_t>(b / B) || p.buffers[b].bytes != p.buffers[b % B].bytes)
      return std::nullopt;
  return std::make_pair(K, B);
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

/// Findings that differ only in their leading "rank N " (one per rank, as the memory pass
/// reports) become one finding naming every such rank: "ranks 0-7: each ..." with the first rank's
/// counterexample. Others pass through in order.
std::vector<Finding> group_by_rank(std::vector<Finding> findings) {
  std::vector<Finding> out;
  std::vector<std::string> keys;
  std::vector<std::vector<int32_t>> ranks;
  for (Finding& f : findings) {
    std::string key = f.message;
    if (f.ranks.size() == 1 && key.rfind(fmt::format("rank {} ", f.ranks[0]), 0) == 0)
      key = key.substr(fmt::format("rank {} ", f.ranks[0]).size());
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it != keys.end() && f.ranks.size() == 1) {
      ranks[it - keys.begin()].push_back(f.ranks[0]);
      continue;
    }
    keys.push_back(key);
    ranks.push_back(std::vector<int32_t>(f.ranks.begin(), f.ranks.end()));
    out.push_back(std::move(f));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (ranks[i].size() < 2) continue;
    out[i].message = fmt::format("ranks {}: each {}", format_rank_ranges(ranks[i]), keys[i]);
    out[i].ranks.assign(ranks[i].begin(), ranks[i].end());
    out[i].details.insert(out[i].details.begin(), fmt::format("shown for rank {}; the others are the same", ranks[i][0]));
  }
  return out;
}

/// The view of the parameter buffers ("param", "ag-buffer"), without static bytes.
MemoryView gathered_view(const Program& p) {
  MemoryView v;
  v.with_static = false;
  v.buffers.assign(p.buffers.size(), 0);
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    std::string_view kind = p.buffers[b].kind;
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
  for (const auto& u : spec.units) {
    f.params_bytes += static_cast<double>(u.params_bytes);
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
    if (o.kind == OpKind::kCollective && o.comm >= 0) {
      double n = static_cast<double>(p.comms[o.comm].ranks.size());
      double share = n > 1 ? (n - 1) / n * static_cast<double>(o.bytes) : 0.0;
      volume[o.rank][it] += o.collective == CollectiveKind::kAllReduce ? 2 * share : share;
      comm_time[o.rank] += t.ops[id].end_s - t.ops[id].start_s;
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
  const double gathers = spec.reshard_after_forward == 0 ? 1.0 : 2.0;
  if (generated)
    f.expected_comm_bytes_per_step =
      spec.microbatches * (n > 1 ? (n - 1) / n * f.params_bytes * (gathers + ratio) : 0.0) +
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

}  // namespace

FsdpVerifyResult verify_fsdp(const FsdpSpec& spec, bool force_min_cut, bool use_symmetry) {
  FsdpVerifyResult r;
  r.spec = spec;
  VerifyResult& v = r.base;
  PassTimer timer(v.pass_times);
  v.spec.name = spec.name;
  v.spec.path = source_name(spec.locs.file.file);
  v.spec.ranks = spec.ranks;
  v.spec.memory.limit_bytes = spec.limit_bytes;
  FsdpProgram lowered;
  timer.run("lower", [&] { lowered = lower_fsdp(spec); });
  v.program = std::move(lowered.program);
  r.info = std::move(lowered.info);
  for (auto& f : group_by_rank(std::move(lowered.findings))) v.findings.push_back(std::move(f));

  std::vector<Finding> divergence;
  timer.run("collectives", [&] { divergence = check_collectives(v.program); });
  timer.run("deadlock", [&] { v.execution = execute(v.program); });
  std::vector<Finding> hangs = v.execution.findings;
  if (v.program.channels.empty()) {  // no point-to-point messages: the P2P semantics play no part
    // "deadlock under rendezvous semantics: wait-for cycle ..." -> "wait-for cycle ..."
    const std::string sem = fmt::format(" under {} semantics", format_semantics(v.program.semantics));
    for (Finding& h : hangs) {
      if (auto pos = h.message.find(sem); pos != std::string::npos) h.message.erase(pos, sem.size());
      if (h.message.rfind("deadlock: ", 0) == 0) h.message.erase(0, 10);
    }
  }
  explain_hangs(hangs, divergence);
  for (auto& f : hangs) v.findings.push_back(std::move(f));
  for (auto& f : divergence) v.findings.push_back(std::move(f));
  for (const auto& s : v.program.streams) v.edges += s.ops.empty() ? 0 : s.ops.size() - 1;
  v.edges += v.program.deps.size();

  if (v.execution.completed) {
    // Symmetric programs: the interleaving passes run on rank 0 and hold for every rank.
    const auto blocks = use_symmetry ? rank_blocks(spec, v.program) : std::nullopt;
    const std::vector<int32_t> rank0{0};
    const std::vector<int32_t>* only = blocks ? &rank0 : nullptr;
    timer.run("residency", [&] {
      for (auto& f : check_buffer_residency(v.program, 8, only)) {
        if (blocks) {  // the same violation on every rank
          std::vector<int32_t> all(v.program.num_ranks);
          for (int32_t k = 0; k < v.program.num_ranks; ++k) all[k] = k;
          name_ranks(f, all);
        }
        v.findings.push_back(std::move(f));
      }
    });
    timer.run("timing", [&] { v.timeline = simulate(v.program, v.execution.order); });
    std::vector<WorstCaseMemory> worst;
    timer.run("worst-case memory", [&] {
      worst = worst_case_memory_views(v.program, {MemoryView{}, gathered_view(v.program)}, force_min_cut, only);
      if (blocks)
        for (auto& w : worst) replicate_rank0(w, v.program.num_ranks, blocks->first, blocks->second);
      v.worst_case = std::move(worst[0]);
    });
    if (spec.limit_bytes)
      timer.run("memory", [&] {
        for (auto& f : group_by_rank(check_memory(v.program, &*v.timeline, &*v.worst_case, *spec.limit_bytes)))
          v.findings.push_back(std::move(f));
      });
    timer.run("figures", [&] {
      r.figures = compute_figures(spec, v.program, r.info, *v.timeline, std::move(worst[1].bytes_per_rank));
    });
  }
  v.exit_code = exit_code_for(v.findings);
  return r;
}

}  // namespace sc
