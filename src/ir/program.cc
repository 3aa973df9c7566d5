#include "ir/program.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

namespace sc {

// The IR's bytes per op (README, scaling): keep these from growing unnoticed.
static_assert(sizeof(MemEffect) == 16);
static_assert(sizeof(Dep) == 4);
static_assert(sizeof(Buffer) == 32);
static_assert(sizeof(Op) == 88);

namespace {
// Process-wide table of StaticName strings; entry 0 is "". Entries are written once, under the
// mutex, before the count that publishes them (a release store; readers load it with acquire).
struct StaticNameTable {
  std::mutex mu;
  std::array<const char*, 256> names{""};
  std::atomic<int> count{1};
};
StaticNameTable& static_names() {
  static StaticNameTable table;
  return table;
}
}  // namespace

StaticName::StaticName(const char* name) {
  if (name == nullptr || *name == '\0') return;
  StaticNameTable& t = static_names();
  // Without the lock, the same pointer as a published entry (a literal assigned again: the
  // common case, about once per op while a program is built).
  const int published = t.count.load(std::memory_order_acquire);
  for (int i = 1; i < published; ++i)
    if (t.names[i] == name) {
      id_ = static_cast<uint8_t>(i);
      return;
    }
  std::lock_guard<std::mutex> lock(t.mu);
  const int n = t.count.load(std::memory_order_relaxed);
  for (int i = 1; i < n; ++i)
    if (t.names[i] == name || std::strcmp(t.names[i], name) == 0) {
      id_ = static_cast<uint8_t>(i);
      return;
    }
  if (n == 256) throw std::length_error("more than 255 distinct static names");
  t.names[n] = name;
  t.count.store(n + 1, std::memory_order_release);
  id_ = static_cast<uint8_t>(n);
}

// Read without the lock: an id is only ever handed out after its entry was written, and the
// entry never changes.
StaticName::operator const char*() const { return static_names().names[id_]; }

double LinkModel::transfer_s(int64_t n) const {
  double t = latency_s;
  if (n > 0 && std::isfinite(bandwidth_bytes_per_s) && bandwidth_bytes_per_s > 0)
    t += static_cast<double>(n) / bandwidth_bytes_per_s;
  return t;
}

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllGather: return "all-gather";
    case CollectiveKind::kReduceScatter: return "reduce-scatter";
    case CollectiveKind::kAllReduce: return "all-reduce";
    case CollectiveKind::kCommInit: return "communicator init";
    case CollectiveKind::kAllToAll: return "all-to-all";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "?";
}

int32_t Communicator::member_index(int32_t rank) const {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
  return it != ranks.end() && *it == rank ? static_cast<int32_t>(it - ranks.begin()) : -1;
}

int64_t Program::job_ranks() const {
  if (rank_classes.empty()) return num_ranks;
  int64_t n = 0;
  for (const RankClass& c : rank_classes) n += c.count;
  return n;
}

RankClass Program::job_class(int32_t r) const {
  if (r >= 0 && r < static_cast<int32_t>(rank_classes.size())) return rank_classes[r];
  return RankClass{r, 1};
}

OpId Program::add_op(const Op& op) {
  OpId id = static_cast<OpId>(ops.size());
  Op o = op;
  o.dep_end = static_cast<uint32_t>(deps.size());
  o.mem_end = static_cast<uint32_t>(mem.size());
  o.use_end = static_cast<uint32_t>(uses.size());
  if (o.kind == OpKind::kCollective && o.comm() >= 0) {
    Communicator& c = comms[o.comm()];
    int32_t m = c.member_index(o.rank);
    if (m >= 0) {
      o.set_seq(static_cast<int32_t>(c.ops[m].size()));
      c.ops[m].push_back(id);
    }
  }
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

void Program::add_use(OpId op, int32_t buffer) {
  uses.push_back(buffer);
  ops[op].use_end = static_cast<uint32_t>(uses.size());
}

int32_t Program::add_communicator(std::string name, std::vector<int32_t> members) {
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  Communicator c;
  c.name = std::move(name);
  c.ops.resize(members.size());
  c.ranks = std::move(members);
  comms.push_back(std::move(c));
  return static_cast<int32_t>(comms.size() - 1);
}

int32_t Program::add_group(std::vector<OpId> members) {
  const int32_t g = static_cast<int32_t>(groups.size());
  for (OpId m : members) ops[m].set_group(g);
  groups.push_back(std::move(members));
  return g;
}

int32_t Program::add_name(std::string label) {
  names.push_back(std::move(label));
  return static_cast<int32_t>(names.size() - 1);
}

std::vector<OpId> Program::instance(OpId id) const {
  const Op& o = ops[id];
  std::vector<OpId> out;
  if (o.kind != OpKind::kCollective || o.comm() < 0 || o.seq() < 0) return out;
  const Communicator& c = comms[o.comm()];
  out.reserve(c.ranks.size());
  for (const auto& seqs : c.ops) out.push_back(o.seq() < static_cast<int32_t>(seqs.size()) ? seqs[o.seq()] : kNoOp);
  return out;
}

int32_t Program::add_stream(int32_t rank, const char* name) {
  int32_t id = static_cast<int32_t>(streams.size());
  streams.push_back(Stream{rank, name, {}});
  if (static_cast<int32_t>(rank_streams.size()) <= rank) rank_streams.resize(rank + 1);
  rank_streams[rank].push_back(id);
  return id;
}

int32_t Program::channel_for(int32_t src, int32_t dst, int32_t comm) {
  auto key = [](int32_t s, int32_t d) { return (static_cast<uint64_t>(static_cast<uint32_t>(s)) << 32) | static_cast<uint32_t>(d); };
  if (channel_index.size() + comm_channel_index.size() != channels.size()) {  // made or copied without the index
    channel_index.clear();
    comm_channel_index.clear();
    for (size_t i = 0; i < channels.size(); ++i) {
      const Channel& c = channels[i];
      if (c.comm < 0) channel_index.try_emplace(key(c.src, c.dst), static_cast<int32_t>(i));
      else comm_channel_index.try_emplace({c.src, c.dst, c.comm}, static_cast<int32_t>(i));
    }
  }
  const int32_t next = static_cast<int32_t>(channels.size());
  int32_t found = next;
  if (comm < 0) found = channel_index.try_emplace(key(src, dst), next).first->second;
  else found = comm_channel_index.try_emplace({src, dst, comm}, next).first->second;
  if (found == next) channels.push_back(Channel{src, dst, {}, {}, comm < 0 ? -1 : comm});
  return found;
}

void Program::match_channels() {
  for (auto& op : ops)
    if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) op.set_match(kNoOp);
  for (const auto& ch : channels) {
    size_t n = std::min(ch.sends.size(), ch.recvs.size());
    for (size_t k = 0; k < n; ++k) {
      ops[ch.sends[k]].set_match(ch.recvs[k]);
      ops[ch.recvs[k]].set_match(ch.sends[k]);
    }
  }
}

void Program::set_tensor(OpId id, BoundaryTensor t) {
  if (id < 0) return;
  if (static_cast<size_t>(id) >= tensors.size()) tensors.resize(static_cast<size_t>(id) + 1);
  tensors[id] = t;
}

namespace {
// The kind of the action at a P2P message's other end (SEND_F <-> RECV_F, SEND_B <-> RECV_B).
ActionKind partner_kind(ActionKind k) {
  switch (k) {
    case ActionKind::kSendF: return ActionKind::kRecvF;
    case ActionKind::kRecvF: return ActionKind::kSendF;
    case ActionKind::kSendB: return ActionKind::kRecvB;
    default: return ActionKind::kSendB;
  }
}
}  // namespace

bool Op::skips() const {
  return num_actions == 1 && sc::is_p2p(actions[0].kind) && actions[1].kind == partner_kind(actions[0].kind) &&
         actions[1].microbatch == actions[0].microbatch;
}

int32_t Op::peer_stage() const {
  if (num_actions != 1 || !sc::is_p2p(actions[0].kind)) return -1;
  return skips() ? actions[1].stage : neighbour_stage(actions[0]);
}

void Op::set_skip_stage(int32_t stage) {
  actions[1] = Action{partner_kind(actions[0].kind), stage, actions[0].microbatch};
}

std::string Program::label(OpId id) const {
  const Op& o = ops[id];
  if (o.name() >= 0 && o.name() < static_cast<int32_t>(names.size())) return names[o.name()];
  // A skipping P2P names its other stage as the spec writes it: "0SEND_F0>2", "2RECV_F0<0".
  const std::string peer =
      o.skips() ? fmt::format("{}{}", o.kind == OpKind::kSend ? '>' : '<', o.actions[1].stage) : std::string();
  if (o.is_p2p() && id < static_cast<OpId>(tensors.size()) && (tensors[id].count > 1 || tensors[id].name >= 0)) {
    const BoundaryTensor& t = tensors[id];
    if (t.name >= 0 && t.name < static_cast<int32_t>(names.size()))
      return fmt::format("{}[{}]{}", format_action(o.actions[0]), names[t.name], peer);
    return fmt::format("{}[{}]{}", format_action(o.actions[0]), t.index, peer);
  }
  if (o.is_p2p()) return format_action(o.actions[0]) + peer;
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
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].pool >= kNumMemPools) return fmt::format("buffer {} names pool {}", b, int{buffers[b].pool});
  for (size_t h = 0; h < reserve_holds.size(); ++h) {
    const ReserveHold& r = reserve_holds[h];
    const auto op_of_rank = [&](OpId id) { return id >= 0 && id < static_cast<OpId>(ops.size()) && ops[id].rank == r.rank; };
    if (r.pool >= kNumMemPools || r.bytes < 0 || !op_of_rank(r.from) || !op_of_rank(r.to))
      return fmt::format("reserve hold {} names a bad pool, size or op", h);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (seen[i] != 1) return fmt::format("op {} is on {} streams", i, seen[i]);
    // Each op's ranges start where the previous op's end.
    const Op* before = i > 0 ? &ops[i - 1] : nullptr;
    if (ops[i].dep_end < (before ? before->dep_end : 0) || ops[i].dep_end > deps.size() ||
        ops[i].mem_end < (before ? before->mem_end : 0) || ops[i].mem_end > mem.size() ||
        ops[i].use_end < (before ? before->use_end : 0) || ops[i].use_end > uses.size())
      return fmt::format("op {} has its deps, memory effects or uses out of op order", i);
    for (const Dep* d = deps_begin(i); d != deps_end(i); ++d)
      if (d->src < 0 || d->src >= static_cast<OpId>(ops.size())) return fmt::format("op {} has a bad dep", i);
    const Op& o = ops[i];
    if (o.match() != kNoOp && ops[o.match()].match() != static_cast<OpId>(i)) return fmt::format("op {} match not symmetric", i);
    for (const int32_t* u = uses_begin(i); u != uses_end(i); ++u)
      if (*u < 0 || *u >= static_cast<int32_t>(buffers.size())) return fmt::format("op {} uses a bad buffer", i);
    if (o.kind == OpKind::kCollective && o.comm() >= 0) {
      if (o.comm() >= static_cast<int32_t>(comms.size())) return fmt::format("op {} names a bad communicator", i);
      int32_t m = comms[o.comm()].member_index(o.rank);
      if (m < 0) return fmt::format("op {} is on a communicator without its rank", i);
      const auto& seqs = comms[o.comm()].ops[m];
      if (o.seq() < 0 || o.seq() >= static_cast<int32_t>(seqs.size()) || seqs[o.seq()] != static_cast<OpId>(i))
        return fmt::format("op {} has a bad sequence number", i);
    }
  }
  std::vector<int32_t> pos(ops.size(), 0);
  for (const Stream& st : streams)
    for (size_t i = 0; i < st.ops.size(); ++i) pos[st.ops[i]] = static_cast<int32_t>(i);
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& m = groups[g];
    if (m.empty()) return fmt::format("group {} is empty", g);
    for (size_t k = 0; k < m.size(); ++k) {
      const Op& o = ops[m[k]];
      if (o.group() != static_cast<int32_t>(g)) return fmt::format("op {} is in group {} but names another", m[k], g);
      if (o.kind != OpKind::kSend && o.kind != OpKind::kRecv) return fmt::format("group {} holds a non-P2P op", g);
      if (o.stream != ops[m[0]].stream || pos[m[k]] != pos[m[0]] + static_cast<int32_t>(k))
        return fmt::format("group {} is not consecutive on one stream", g);
    }
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
