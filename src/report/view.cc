#include "report/view.h"

#include <algorithm>
#include <cmath>

namespace sc {

int64_t to_ns(double seconds) { return std::llround(seconds * 1e9); }

TimelineView timeline_view(const ProgramResult& r) {
  const Program& p = r.program;
  TimelineView v;
  size_t n = p.ops.size();
  v.complete = r.timeline.has_value();
  if (r.timeline) {
    v.timeline = *r.timeline;
    v.ran.assign(n, 1);
  } else {
    // The executed prefix: every op in `order` completed, so its deps and partners did too.
    v.timeline = simulate(p, r.execution.order);
    v.ran.assign(n, 0);
    for (OpId id : r.execution.order) v.ran[id] = 1;
  }
  v.start_ns.assign(n, 0);
  v.end_ns.assign(n, 0);
  for (size_t id = 0; id < n; ++id) {
    if (!v.ran[id]) continue;
    v.start_ns[id] = to_ns(v.timeline.ops[id].start_s);
    v.end_ns[id] = std::max(v.start_ns[id], to_ns(v.timeline.ops[id].end_s));
    v.end_ns_total = std::max(v.end_ns_total, v.end_ns[id]);
  }
  for (OpId id = 0; id < static_cast<OpId>(n); ++id) {
    if (!v.ran[id]) continue;
    const Op& op = p.ops[id];
    if (op.kind == OpKind::kSend && op.match() != kNoOp && v.ran[op.match()])
      v.arrows.push_back({id, op.match(), Arrow::Kind::kMessage});
    for (const Dep* d = p.deps_begin(id); d != p.deps_end(id); ++d)
      if (d->kind == DepKind::kTransfer && v.ran[d->src]) v.arrows.push_back({d->src, id, Arrow::Kind::kTransfer});
  }
  return v;
}

int64_t stop_ns(const ProgramResult& r, const TimelineView& v, int32_t stream) {
  int64_t t = 0;
  for (OpId id : r.program.streams[stream].ops)
    if (v.ran[id]) t = std::max(t, v.end_ns[id]);
  return t;
}

}  // namespace sc
