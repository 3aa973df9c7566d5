#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "report/numerics_report.h"
#include "report/report.h"
#include "support/units.h"

namespace sc {
namespace {

char kind_char(const Program& p, OpId id) {
  const Op& op = p.ops[id];
  if (op.kind == OpKind::kSend) return 's';
  if (op.kind == OpKind::kRecv) return 'r';
  if (op.kind != OpKind::kCompute) return '|';
  if (op.num_actions == 2) return 'X';
  return kind_token(op.actions[0].kind)[0];
}

// The op of `ids` (one stream, in order) that covers most of each column [c, c+1) x unit, or
// kNoOp where none covers more than half of it (so a column that is mostly idle reads idle).
std::vector<OpId> column_owners(const std::vector<OpId>& ids, const Timeline& t, double unit, size_t width) {
  std::vector<OpId> owner(width, kNoOp);
  std::vector<double> best(width, 0.0);
  for (OpId id : ids) {
    const OpTime& ot = t.ops[id];
    if (ot.end_s <= ot.start_s) continue;
    size_t a = static_cast<size_t>(std::floor(ot.start_s / unit + 1e-9));
    size_t b = static_cast<size_t>(std::ceil(ot.end_s / unit - 1e-9));
    for (size_t c = a; c < b && c < width; ++c) {
      double cover = std::min(ot.end_s, (c + 1) * unit) - std::max(ot.start_s, c * unit);
      if (cover > best[c]) {
        best[c] = cover;
        owner[c] = id;
      }
    }
  }
  for (size_t c = 0; c < width; ++c)
    if (best[c] <= unit / 2 * (1 + 1e-9)) owner[c] = kNoOp;
  return owner;
}

// One row: each op's kind letter, followed by its microbatch where the op's columns leave room,
// then '-' for the op's other columns.
std::string timeline_row(const Program& p, const std::vector<OpId>& owner) {
  std::string row(owner.size(), '.');
  for (size_t c = 0; c < owner.size();) {
    if (owner[c] == kNoOp) {
      ++c;
      continue;
    }
    size_t e = c;
    while (e < owner.size() && owner[e] == owner[c]) ++e;
    const Op& op = p.ops[owner[c]];
    std::fill(row.begin() + static_cast<std::ptrdiff_t>(c), row.begin() + static_cast<std::ptrdiff_t>(e), '-');
    row[c] = kind_char(p, owner[c]);
    if (op.kind == OpKind::kCompute && op.num_actions == 1 && takes_microbatch(op.actions[0].kind)) {
      std::string mb = std::to_string(op.actions[0].microbatch);
      if (mb.size() + 1 <= e - c) row.replace(c + 1, mb.size(), mb);
    }
    c = e;
  }
  return row;
}

void write_timeline(std::ostream& os, const VerifyResult& r) {
  constexpr size_t kMaxColumns = 120;
  const Program& p = r.program;
  const Timeline& t = *r.timeline;
  if (t.makespan_s <= 0) return;
  // The shortest compute op gets 3 columns (room for "F12"), or 2, or 1, as the width allows;
  // beyond 120 columns, a column holds several ops and the timeline says it is aggregated.
  double shortest = t.makespan_s;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kCompute && op.duration_s > 0) shortest = std::min(shortest, op.duration_s);
  size_t per_op = 3;
  // Clamped before the cast: a cost ratio of 1e20 would not fit size_t (undefined behaviour).
  auto columns = [&](double unit) {
    double n = std::ceil(t.makespan_s / unit - 1e-9);
    return n > static_cast<double>(kMaxColumns) ? kMaxColumns + 1 : static_cast<size_t>(std::max(n, 0.0));
  };
  while (per_op > 1 && columns(shortest / per_op) > kMaxColumns) --per_op;
  double unit = shortest / per_op;
  size_t width = columns(unit);
  bool aggregated = width > kMaxColumns;
  if (aggregated) {
    width = kMaxColumns;
    unit = t.makespan_s / width;
  }
  os << fmt::format("\ntimeline (1 column = {}; a column shows the op covering most of it, with its microbatch where it "
                    "fits; F I W B forward/backward, X overlapped F;B, s/r send/recv, - the op continues, . idle):\n",
                    format_duration(unit));
  if (aggregated)
    os << fmt::format("  aggregated: the shortest op ({}) is narrower than a column, so short ops may not show; --svg FILE "
                      "draws every op\n",
                      format_duration(shortest));
  for (size_t s = 0; s < p.streams.size(); ++s)
    os << fmt::format("  {:<18} {}\n", p.stream_label(static_cast<int32_t>(s)),
                      timeline_row(p, column_owners(p.streams[s].ops, t, unit, width)));
}

}  // namespace

std::string verdict_line(const std::string& path, const std::vector<Finding>& findings, int exit_code) {
  if (findings.empty()) return fmt::format("{}: holds (exit 0)\n", path);
  std::vector<std::string> kinds;
  for (const Finding& f : findings)
    if (std::find(kinds.begin(), kinds.end(), kind_name(f.kind)) == kinds.end()) kinds.push_back(kind_name(f.kind));
  std::string kind_list;
  for (const auto& k : kinds) kind_list += (kind_list.empty() ? "" : ", ") + k;
  return fmt::format("{}: VIOLATED: {} ({} finding{}, exit {})\n", path, kind_list, findings.size(),
                     findings.size() == 1 ? "" : "s", exit_code);
}

void write_findings(std::ostream& os, const std::vector<Finding>& findings) {
  if (findings.empty()) return;
  os << "\nfindings:\n";
  for (size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    os << fmt::format("  [{}] {}: {}\n", i + 1, kind_name(f.kind), f.message);
    for (size_t k = 0; k < f.ops.size() && k < f.locations.size(); ++k)
      if (f.locations[k].valid()) os << fmt::format("      {}: {}\n", format_loc(f.locations[k]), f.ops[k]);
    for (const auto& d : f.details) os << fmt::format("      {}\n", d);
  }
}

std::vector<std::string> rank_rows(const VerifyResult& r) {
  std::vector<std::string> rows;
  if (!r.timeline) return rows;
  const Timeline& t = *r.timeline;
  const auto& limit = r.spec.memory.limit_bytes;
  rows.resize(static_cast<size_t>(r.program.num_ranks));
  for (int32_t rank = 0; rank < r.program.num_ranks; ++rank) {
    const int64_t peak = t.peak_bytes_per_rank[rank];
    const int64_t wc = r.worst_case ? r.worst_case->bytes_per_rank[rank] : 0;
    const bool over = limit && std::max(peak, wc) > *limit;
    rows[static_cast<size_t>(rank)] =
        fmt::format(" {:>12} {:>12} {:>12} {:>12} {:>14} {:>14}{}", format_duration(t.first_start_per_rank_s[rank]),
                    format_duration(t.last_end_per_rank_s[rank]), format_duration(t.busy_per_rank_s[rank]),
                    format_duration(t.idle_per_rank_s[rank]), format_bytes(static_cast<double>(peak)),
                    format_bytes(static_cast<double>(wc)), over ? "  over limit" : "");
  }
  return rows;
}

std::vector<JobRankRun> fold_job_rows(const Program& p, const std::vector<std::string>& rows) {
  std::vector<JobRankRun> out;
  for (const RankRun& run : fold_identical_rows(rows)) {
    const RankClass a = p.job_class(run.first), b = p.job_class(run.last);
    out.push_back(JobRankRun{RankRun{a.first, b.first + b.count - 1}, run.first});
  }
  return out;
}

std::string alike_suffix(const RankRun& run) {
  return run.count() > 1 ? fmt::format("  ({} ranks alike)", run.count()) : std::string();
}

void write_text_report(std::ostream& os, const VerifyResult& r, size_t timeline_max_ops) {
  const PipelineSpec& s = r.spec;
  const Program& p = r.program;
  os << verdict_line(s.path, r.findings, r.exit_code);
  os << fmt::format("  schedule {}: {}, {} ({} placement{}), {}, {}; p2p {}{}, {}\n", s.name,
                    format_count(s.ranks, "rank"), format_count(s.stages, "stage"), s.placement,
                    s.placement_declared ? ", declared" : "", format_count(s.microbatches, "microbatch", "microbatches"),
                    format_count(static_cast<int64_t>(p.ops.size()), "op"), format_semantics(p.semantics),
                    p.explicit_comms ? "" : " (compute only: transfers implicit)",
                    p.blocking == BlockingModel::kCommStream ? "in-order comm stream per rank" : "whole rank blocks");
  if (const auto& m = s.composition)
    os << fmt::format("  mesh: pp {} x dp_replicate {} x dp_shard {} = {} ranks (rank = (pp·dp_replicate + replicate)·dp_shard + "
                      "shard); {}{}{}; {}\n",
                      s.ranks, m->dp_replicate, m->dp_shard, p.num_ranks,
                      m->fsdp ? fmt::format("FSDP over each shard group ({} params, {} reduce)", m->param_dtype, m->reduce_dtype)
                              : std::string("data parallel without sharding"),
                      m->fsdp && m->record_stream ? ", frees after record_stream" : "",
                      m->ep > 1 ? fmt::format("; EP {} over the shard ranks", m->ep) : std::string(),
                      format_count(static_cast<int64_t>(p.comms.size()), "communicator"));
  if (!s.phases.empty()) {
    std::string list;
    for (const Phase& ph : s.phases)
      list += fmt::format("{}{} (microbatches {}-{}{})", list.empty() ? "" : ", ", ph.name.empty() ? "unnamed" : ph.name,
                          ph.first, ph.first + ph.microbatches - 1, ph.forward_only ? ", forward only" : "");
    os << "  phases: " << list << "\n";
  } else if (s.forward_only) {
    os << "  forward only: no backward; each activation is freed when its forward ends\n";
  }

  write_findings(os, r.findings);
  write_numerics_fixes(os, r);
  for (const auto& [kind, n] : r.omitted_findings)
    os << fmt::format("  ... and {} more {} finding{} not shown (at most {} of a kind are kept)\n", n, kind_name(kind),
                      n == 1 ? "" : "s", kMaxFindingsPerKind);

  if (!r.timeline) {
    os << "\ntiming and memory: not predicted (the schedule does not run to completion)\n";
    return;
  }
  const Timeline& t = *r.timeline;
  os << fmt::format("\ntiming: span {}, makespan {}, bubble rate {:.4f} (1 - busy / (ranks x span))\n",
                    format_duration(t.span_s), format_duration(t.makespan_s), t.bubble_rate);
  std::string limit = s.memory.limit_bytes ? format_bytes(static_cast<double>(*s.memory.limit_bytes)) : "none";
  os << fmt::format("memory limit per rank: {}\n", limit);
  // One row per run of consecutive ranks with identical figures (replicas fold into one line).
  const std::vector<std::string> rows = rank_rows(r);
  const std::vector<JobRankRun> runs = fold_job_rows(p, rows);
  const int width = static_cast<int64_t>(runs.size()) < p.job_ranks() ? 11 : 5;
  os << fmt::format("  {:<{}} {:>12} {:>12} {:>12} {:>12} {:>14} {:>14}\n", "rank", width, "start", "end", "busy",
                    "idle", "peak memory", "worst case");
  for (const JobRankRun& run : runs)
    os << fmt::format("  {:<{}}{}{}\n", run.ranks.label(), width, rows[static_cast<size_t>(run.row)],
                      alike_suffix(run.ranks));
  // The timeline has a row per stream, idle or not: a program of many idle ranks is as large as
  // one of many ops, so both count against the limit.
  if (p.ops.size() <= timeline_max_ops && p.streams.size() <= timeline_max_ops) write_timeline(os, r);
  else if (timeline_max_ops > 0)
    os << fmt::format("\ntimeline: omitted, {} is more than --timeline-ops {} (raise it, or draw the timeline with "
                      "--svg FILE)\n",
                      p.ops.size() > timeline_max_ops ? fmt::format("{} ops", p.ops.size())
                                                      : fmt::format("{} streams (a row each)", p.streams.size()),
                      timeline_max_ops);
}

}  // namespace sc
