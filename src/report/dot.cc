#include <algorithm>

#include <fmt/format.h>

#include "report/report.h"

namespace sc {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string dot_graph(const VerifyResult& r) {
  const Program& p = r.program;
  const ExecutionResult& e = r.execution;
  std::string out = "digraph schedule {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n";
  constexpr size_t kMaxOps = 400;
  constexpr size_t kTail = 4;  // ops drawn per stream of a larger program, before its stuck op
  // Which ops to draw: all for small programs; otherwise, per stream, the last few done ops
  // and the stuck op.
  std::vector<uint8_t> shown(p.ops.size(), 0);
  bool small = p.ops.size() <= kMaxOps;
  for (const Stream& st : p.streams) {
    size_t first_undone = st.ops.size();
    for (size_t i = 0; i < st.ops.size(); ++i)
      if (!e.done.empty() && !e.done[st.ops[i]]) {
        first_undone = i;
        break;
      }
    size_t from = small ? 0 : (first_undone > kTail ? first_undone - kTail : 0);
    size_t to = small ? st.ops.size() : std::min(st.ops.size(), first_undone + 1);
    for (size_t i = from; i < to; ++i) shown[st.ops[i]] = 1;
  }
  if (!small) {
    // Say what the picture leaves out, on the picture and for whoever reads the file.
    size_t count = static_cast<size_t>(std::count(shown.begin(), shown.end(), uint8_t{1}));
    std::string what = fmt::format(
        "{} of {} ops shown: a program above {} ops is too large to draw whole, so each stream shows its last {} "
        "completed ops{}; --svg FILE draws the whole timeline",
        count, p.ops.size(), kMaxOps, kTail, e.completed ? "" : " and the op it is stuck at");
    out += fmt::format("  // {}\n  label={};\n  labelloc=t;\n", what, quote(what));
  }
  for (size_t s = 0; s < p.streams.size(); ++s) {
    const Stream& st = p.streams[s];
    out += fmt::format("  subgraph cluster_{} {{\n    label={};\n", s, quote(p.stream_label(static_cast<int32_t>(s))));
    OpId prev = kNoOp;
    for (OpId id : st.ops) {
      if (!shown[id]) continue;
      bool stuck = !e.done.empty() && !e.done[id];
      // Two lines: the op and its location (a DOT "\n" escape between the quoted parts).
      std::string label = quote(p.label(id));
      label.pop_back();
      label += "\\n" + quote(format_loc(p.ops[id].loc)).substr(1);
      out += fmt::format("    op{} [label={}{}];\n", id, label,
                         stuck ? ", color=red, penwidth=2" : "");
      if (prev != kNoOp) out += fmt::format("    op{} -> op{};\n", prev, id);
      prev = id;
    }
    out += "  }\n";
  }
  // Cross-stream edges among shown ops: deps and messages.
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    if (!shown[id]) continue;
    for (const Dep* d = p.deps_begin(id); d != p.deps_end(id); ++d)
      if (shown[d->src]) out += fmt::format("  op{} -> op{} [style=dashed];\n", d->src, id);
    const Op& op = p.ops[id];
    if (op.kind == OpKind::kSend && op.match() != kNoOp && shown[op.match()])
      out += fmt::format("  op{} -> op{} [style=dotted, label=\"msg\"];\n", id, op.match());
  }
  // The wait-for cycle.
  for (size_t i = 0; i + 1 < e.cycle.size() || (e.cycle_closed && i < e.cycle.size()); ++i) {
    OpId a = e.cycle[i];
    OpId b = e.cycle[(i + 1) % e.cycle.size()];
    out += fmt::format("  op{} -> op{} [color=red, penwidth=2, label=\"waits for\"];\n", a, b);
  }
  out += "}\n";
  return out;
}

}  // namespace sc
