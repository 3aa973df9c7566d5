#include <nlohmann/json.hpp>

#include "report/numerics_report.h"
#include "report/report.h"
#include "support/version.h"

namespace sc {
namespace {

using nlohmann::json;

json loc_json(const SourceLoc& l) {
  if (!l.valid()) return nullptr;
  return json{{"file", source_name(l.file)}, {"line", l.line}, {"col", l.col}};
}

const char* blocking_name(BlockingModel b) {
  return b == BlockingModel::kCommStream ? "comm-stream" : "whole-rank";
}

}  // namespace

std::string json_report(const VerifyResult& r) {
  return json_report_value(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

json json_report_value(const VerifyResult& r) {
  json j;
  j["schema_version"] = kReportSchemaVersion;
  j["schedcheck_version"] = kToolVersion;
  j["verdict"] = r.verdict();
  j["exit_code"] = r.exit_code;
  j["semantics"] = {{"p2p", format_semantics(r.program.semantics)},
                    {"blocking", blocking_name(r.program.blocking)},
                    {"explicit_comms", r.program.explicit_comms},
                    {"p2p_matching", "fifo per (src rank, dst rank)"}};
  const PipelineSpec& s = r.spec;
  j["schedule"] = {{"name", s.name},
                   {"path", s.path},
                   {"ranks", s.ranks},
                   {"stages", s.stages},
                   {"microbatches", s.microbatches},
                   {"placement", s.placement},
                   {"placement_declared", s.placement_declared},
                   {"stage_to_rank", s.stage_to_rank},
                   {"forward_only", s.forward_only}};
  if (!s.phases.empty()) {
    nlohmann::json phases = nlohmann::json::array();
    for (const Phase& ph : s.phases)
      phases.push_back({{"name", ph.name}, {"first_microbatch", ph.first}, {"microbatches", ph.microbatches},
                        {"forward_only", ph.forward_only}});
    j["schedule"]["phases"] = phases;
  }
  if (const auto& m = s.composition) {
    j["mesh"] = {{"pp", s.ranks},
                 {"dp_replicate", m->dp_replicate},
                 {"dp_shard", m->dp_shard},
                 {"world_ranks", r.program.num_ranks},
                 {"fsdp", m->fsdp},
                 {"param_dtype", m->param_dtype},
                 {"reduce_dtype", m->reduce_dtype},
                 {"communicators", r.program.comms.size()},
                 {"ep", m->ep},
                 {"unshard_async_op", m->unshard_async_op},
                 {"record_stream", m->fsdp && m->record_stream}};
    if (m->moe) {
      std::vector<int32_t> layers;
      for (int32_t st = 0; st < s.stages; ++st) layers.push_back(m->moe->layers_of(st));
      j["mesh"]["moe"] = {{"layers_per_stage", layers},
                          {"dispatch_bytes", m->moe->dispatch_bytes},
                          {"combine_bytes", m->moe->combine_bytes >= 0 ? m->moe->combine_bytes : m->moe->dispatch_bytes},
                          {"router", m->moe->router}};
    }
  }
  if (!r.program.rank_classes.empty()) {
    // A symmetry quotient: every per-rank array below has one entry per class.
    json classes = json::array();
    for (const RankClass& c : r.program.rank_classes) classes.push_back({{"first", c.first}, {"ranks", c.count}});
    j["rank_classes"] = classes;
  }
  json findings = json::array();
  for (const Finding& f : r.findings) {
    json locs = json::array();
    for (const auto& l : f.locations) locs.push_back(loc_json(l));
    findings.push_back({{"kind", kind_name(f.kind)},
                        {"message", f.message},
                        {"ranks", f.ranks},
                        {"ops", f.ops},
                        {"locations", locs},
                        {"details", f.details}});
  }
  j["findings"] = findings;
  if (!r.numerics_fixes.empty()) j["numerics_fixes"] = numerics_fixes_json(r);  // the usual fixes per numerics finding
  if (!r.omitted_findings.empty()) {  // findings beyond kMaxFindingsPerKind of a kind: counted, not listed
    json omitted = json::object();
    for (const auto& [kind, n] : r.omitted_findings) omitted[kind_name(kind)] = n;
    j["omitted_findings"] = omitted;
  }
  if (r.timeline) {
    const Timeline& t = *r.timeline;
    j["timing"] = {{"units", "s"},
                   {"span", t.span_s},
                   {"makespan", t.makespan_s},
                   {"bubble_rate", t.bubble_rate},
                   {"bubble_rate_definition", "1 - sum(busy) / (ranks * span)"},
                   {"idle_per_rank", t.idle_per_rank_s},
                   {"busy_per_rank", t.busy_per_rank_s},
                   {"first_start_per_rank", t.first_start_per_rank_s},
                   {"last_end_per_rank", t.last_end_per_rank_s}};
  } else {
    j["timing"] = nullptr;
  }
  json mem;
  mem["units"] = "bytes";
  mem["limit_bytes"] = s.memory.limit_bytes ? json(*s.memory.limit_bytes) : json(nullptr);
  mem["static_bytes_per_rank"] = r.program.static_bytes_per_rank;
  mem["peak_bytes_per_rank"] = r.timeline ? json(r.timeline->peak_bytes_per_rank) : json(nullptr);
  mem["peak_time_per_rank"] = r.timeline ? json(r.timeline->peak_time_per_rank_s) : json(nullptr);
  mem["worst_case_bytes_per_rank"] = r.worst_case ? json(r.worst_case->bytes_per_rank) : json(nullptr);
  mem["reserved_bytes_per_rank"] = r.timeline ? json(r.timeline->reserved_bytes_per_rank) : json(nullptr);
  j["memory"] = mem;
  size_t messages = 0, transfers = 0;
  int64_t message_bytes = 0;
  for (const auto& ch : r.program.channels) {
    messages += ch.sends.size();
    for (OpId s : ch.sends) message_bytes += r.program.ops[s].bytes;
  }
  for (const auto& d : r.program.deps) transfers += d.kind == DepKind::kTransfer ? 1 : 0;
  // Implicit transfers carry link.message_bytes each (their cost in the timing pass).
  message_bytes += static_cast<int64_t>(transfers) * r.program.link.message_bytes;
  json passes = json::object();
  for (const auto& p : r.pass_times) passes[p.pass] = p.seconds;
  const double total = total_seconds(r.pass_times);  // wall time: concurrent passes count once
  double compute_s = 0;  // the work: every compute op's duration, summed over ranks
  for (const Op& op : r.program.ops)
    if (op.kind == OpKind::kCompute)  // a quotient's built rank counts once per job rank it stands for
      compute_s += op.duration_s * r.program.job_class(op.rank).count;
  j["stats"] = {{"ops", r.program.ops.size()},
                {"compute_s", compute_s},
                {"edges", r.edges},
                {"streams", r.program.streams.size()},
                {"messages", messages},
                {"message_bytes", message_bytes},  // explicit messages and implicit transfers
                {"implicit_transfers", transfers},
                {"seconds_per_pass", passes},
                {"seconds", total}};
  return j;
}

}  // namespace sc
