#include "ir/program.h"

#include <cmath>

#include <fmt/format.h>

namespace sc {

double LinkModel::transfer_s(int64_t n) const {
  double t = latency_s;
  if (n > 0 && std::isfinite(bandwidth_bytes_per_s) && bandwidth_bytes_per_s > 0)
    t += static_cast<double>(n) / bandwidth_bytes_per_s;
  return t;
}

OpId Program::add_op(const Op& op) {
  OpId id = static_cast<OpId>(ops.size());
  Op o = op;
  o.dep_begin = o.dep_end = static_cast<uint32_t>(deps.size());
  o.mem_begin = o.mem_end = static_cast<uint32_t>(mem.size());
  ops.push_back(o);
  streams[o.stream].ops.push_back(id);
  return id;
}

void Program::add_dep(OpId dst, Dep dep) {
  deps.push_back(dep);
  ops[dst].dep_end = static_cast<uint32_t>(deps.size());
}

void Program::add_mem(OpId op, MemEffect effect) {
  mem.push_back(effect);
  ops[op].mem_end = static_cast<uint32_t>(mem.size());
}

int32_t Program::add_stream(int32_t rank, const char* name) {
  int32_t id = static_cast<int32_t>(streams.size());
  streams.push_back(Stream{rank, name, {}});
  if (static_cast<int32_t>(rank_streams.size()) <= rank) rank_streams.resize(rank + 1);
  rank_streams[rank].push_back(id);
  return id;
}

int32_t Program::channel_for(int32_t src, int32_t dst) {
  for (size_t i = 0; i < channels.size(); ++i)
    if (channels[i].src == src && channels[i].dst == dst) return static_cast<int32_t>(i);
  channels.push_back(Channel{src, dst, {}, {}});
  return static_cast<int32_t>(channels.size() - 1);
}

void Program::match_channels() {
  for (auto& op : ops)
    if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) op.match = kNoOp;
  for (const auto& ch : channels) {
    size_t n = std::min(ch.sends.size(), ch.recvs.size());
    for (size_t k = 0; k < n; ++k) {
      ops[ch.sends[k]].match = ch.recvs[k];
      ops[ch.recvs[k]].match = ch.sends[k];
    }
  }
}

std::string Program::label(OpId id) const {
  const Op& o = ops[id];
  if (o.num_actions == 2)
    return fmt::format("({};{})OVERLAP_F_B", format_action(o.actions[0]), format_action(o.actions[1]));
  if (o.num_actions == 1) return format_action(o.actions[0]);
  return fmt::format("op{}", id);
}

std::string Program::stream_label(int32_t stream) const {
  const Stream& s = streams[stream];
  return fmt::format("rank {} {}", s.rank, s.name);
}

std::string Program::validate() const {
  std::vector<int> seen(ops.size(), 0);
  for (size_t s = 0; s < streams.size(); ++s)
    for (OpId id : streams[s].ops) {
      if (id < 0 || id >= static_cast<OpId>(ops.size())) return fmt::format("stream {} names op {}", s, id);
      if (ops[id].stream != static_cast<int32_t>(s)) return fmt::format("op {} listed on stream {}", id, s);
      if (ops[id].rank != streams[s].rank) return fmt::format("op {} rank differs from its stream's", id);
      ++seen[id];
    }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (seen[i] != 1) return fmt::format("op {} is on {} streams", i, seen[i]);
    for (const Dep* d = deps_begin(i); d != deps_end(i); ++d)
      if (d->src < 0 || d->src >= static_cast<OpId>(ops.size())) return fmt::format("op {} has a bad dep", i);
    const Op& o = ops[i];
    if (o.match != kNoOp && ops[o.match].match != static_cast<OpId>(i)) return fmt::format("op {} match not symmetric", i);
  }
  for (const auto& ch : channels) {
    for (OpId s : ch.sends)
      if (ops[s].kind != OpKind::kSend || ops[s].rank != ch.src) return "channel send is not a send of its source";
    for (OpId r : ch.recvs)
      if (ops[r].kind != OpKind::kRecv || ops[r].rank != ch.dst) return "channel recv is not a recv of its destination";
  }
  return {};
}

}  // namespace sc
