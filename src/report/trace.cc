#include <nlohmann/json.hpp>

#include "report/report.h"

namespace sc {

std::string chrome_trace(const VerifyResult& r) {
  using nlohmann::json;
  json events = json::array();
  const Program& p = r.program;
  for (int32_t rank = 0; rank < p.num_ranks; ++rank) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
    for (size_t k = 0; k < p.rank_streams[rank].size(); ++k) {
      int32_t s = p.rank_streams[rank][k];
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", k}, {"args", {{"name", p.streams[s].name}}}});
    }
  }
  if (r.timeline) {
    const Timeline& t = *r.timeline;
    auto tid_of = [&](const Op& op) {
      const auto& rs = p.rank_streams[op.rank];
      return static_cast<int>(std::find(rs.begin(), rs.end(), op.stream) - rs.begin());
    };
    constexpr double kUs = 1e6;
    for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
      const Op& op = p.ops[id];
      const char* cat = op.kind == OpKind::kCompute ? "compute"
                        : op.kind == OpKind::kSend  ? "send"
                        : op.kind == OpKind::kRecv  ? "recv"
                                                    : "marker";
      json args = {{"location", format_loc(op.loc)}, {"step", op.step}};
      if (op.num_actions >= 1 && takes_microbatch(op.actions[0].kind)) {
        args["stage"] = op.actions[0].stage;
        args["microbatch"] = op.actions[0].microbatch;
      }
      if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
        args["peer"] = op.peer;
        args["bytes"] = op.bytes;
      }
      events.push_back({{"ph", "X"}, {"name", p.label(id)}, {"cat", cat}, {"pid", op.rank}, {"tid", tid_of(op)},
                        {"ts", t.ops[id].start_s * kUs}, {"dur", (t.ops[id].end_s - t.ops[id].start_s) * kUs},
                        {"args", args}});
    }
    // Flows: send -> recv, and implicit transfers producer -> consumer.
    int64_t flow = 0;
    auto add_flow = [&](OpId from, OpId to, const char* name) {
      const Op& a = p.ops[from];
      const Op& b = p.ops[to];
      ++flow;
      events.push_back({{"ph", "s"}, {"name", name}, {"cat", "p2p"}, {"id", flow}, {"pid", a.rank}, {"tid", tid_of(a)},
                        {"ts", t.ops[from].end_s * kUs - 1e-3}});
      events.push_back({{"ph", "f"}, {"bp", "e"}, {"name", name}, {"cat", "p2p"}, {"id", flow}, {"pid", b.rank},
                        {"tid", tid_of(b)}, {"ts", t.ops[to].end_s * kUs}});
    };
    for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
      const Op& op = p.ops[id];
      if (op.kind == OpKind::kSend && op.match != kNoOp) add_flow(id, op.match, "message");
      for (const Dep* d = p.deps_begin(id); d != p.deps_end(id); ++d)
        if (d->kind == DepKind::kTransfer) add_flow(d->src, id, "transfer");
    }
    for (int32_t rank = 0; rank < p.num_ranks; ++rank)
      for (const auto& [time, bytes] : t.memory_curve[rank])
        events.push_back({{"ph", "C"}, {"name", "memory"}, {"pid", rank}, {"ts", time * kUs}, {"args", {{"bytes", bytes}}}});
  }
  json out = {{"traceEvents", events},
              {"displayTimeUnit", "ms"},
              {"distributedInfo", {{"backend", "schedcheck-prediction"}, {"world_size", p.num_ranks}}},
              {"otherData", {{"schedule", r.spec.name}, {"verdict", r.verdict()}, {"semantics", format_semantics(p.semantics)}}}};
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace sc
