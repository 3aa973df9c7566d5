#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

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

void write_timeline(std::ostream& os, const VerifyResult& r) {
  const Program& p = r.program;
  const Timeline& t = *r.timeline;
  if (t.makespan_s <= 0) return;
  // One column per smallest compute duration, at most 120 columns.
  double unit = t.makespan_s;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kCompute && op.duration_s > 0) unit = std::min(unit, op.duration_s);
  size_t width = static_cast<size_t>(std::ceil(t.makespan_s / unit - 1e-9));
  if (width > 120) {
    width = 120;
    unit = t.makespan_s / width;
  }
  os << fmt::format("\ntimeline (1 column = {}; F I W B forward/backward, X overlapped F;B, s/r send/recv, . idle):\n",
                    format_duration(unit));
  for (size_t s = 0; s < p.streams.size(); ++s) {
    std::string row(width, '.');
    for (OpId id : p.streams[s].ops) {
      const OpTime& ot = t.ops[id];
      if (ot.end_s <= ot.start_s) continue;
      size_t a = static_cast<size_t>(std::floor(ot.start_s / unit + 1e-9));
      size_t b = static_cast<size_t>(std::ceil(ot.end_s / unit - 1e-9));
      for (size_t c = a; c < b && c < width; ++c) row[c] = kind_char(p, id);
    }
    os << fmt::format("  {:<18} {}\n", p.stream_label(static_cast<int32_t>(s)), row);
  }
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

void write_text_report(std::ostream& os, const VerifyResult& r, size_t timeline_max_ops) {
  const PipelineSpec& s = r.spec;
  const Program& p = r.program;
  os << verdict_line(s.path, r.findings, r.exit_code);
  os << fmt::format("  schedule {}: {} ranks, {} stages ({} placement{}), {} microbatches, {} ops; p2p {}{}, {}\n",
                    s.name, s.ranks, s.stages, s.placement, s.placement_declared ? ", declared" : "", s.microbatches,
                    p.ops.size(), format_semantics(p.semantics),
                    p.explicit_comms ? "" : " (compute only: transfers implicit)",
                    p.blocking == BlockingModel::kCommStream ? "in-order comm stream per rank" : "whole rank blocks");
  if (const auto& m = s.composition)
    os << fmt::format("  mesh: pp {} x dp_replicate {} x dp_shard {} = {} ranks (rank = (pp·dp_replicate + replicate)·dp_shard + "
                      "shard); {}; {} communicators\n",
                      s.ranks, m->dp_replicate, m->dp_shard, p.num_ranks,
                      m->fsdp ? fmt::format("FSDP over each shard group ({} params, {} reduce)", m->param_dtype, m->reduce_dtype)
                              : std::string("data parallel without sharding"),
                      p.comms.size());
  if (s.forward_only) os << "  forward only: no backward; each activation is freed when its forward ends\n";

  write_findings(os, r.findings);

  if (!r.timeline) {
    os << "\ntiming and memory: not predicted (the schedule does not run to completion)\n";
    return;
  }
  const Timeline& t = *r.timeline;
  os << fmt::format("\ntiming: span {}, makespan {}, bubble rate {:.4f} (1 - busy / (ranks x span))\n",
                    format_duration(t.span_s), format_duration(t.makespan_s), t.bubble_rate);
  std::string limit = s.memory.limit_bytes ? format_bytes(static_cast<double>(*s.memory.limit_bytes)) : "none";
  os << fmt::format("memory limit per rank: {}\n", limit);
  os << fmt::format("  {:<5} {:>12} {:>12} {:>12} {:>12} {:>14} {:>14}\n", "rank", "start", "end", "busy", "idle",
                    "peak memory", "worst case");
  for (int32_t rank = 0; rank < p.num_ranks; ++rank) {
    int64_t peak = t.peak_bytes_per_rank[rank];
    int64_t wc = r.worst_case ? r.worst_case->bytes_per_rank[rank] : 0;
    bool over = s.memory.limit_bytes && std::max(peak, wc) > *s.memory.limit_bytes;
    os << fmt::format("  {:<5} {:>12} {:>12} {:>12} {:>12} {:>14} {:>14}{}\n", rank,
                      format_duration(t.first_start_per_rank_s[rank]), format_duration(t.last_end_per_rank_s[rank]),
                      format_duration(t.busy_per_rank_s[rank]), format_duration(t.idle_per_rank_s[rank]),
                      format_bytes(static_cast<double>(peak)), format_bytes(static_cast<double>(wc)),
                      over ? "  over limit" : "");
  }
  if (p.ops.size() <= timeline_max_ops) write_timeline(os, r);
}

}  // namespace sc
