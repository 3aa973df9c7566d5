#include "plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include <fmt/format.h>

namespace sc::gpu {

std::vector<int32_t> assign_devices(int32_t ranks, int32_t gpus, DevicePolicy policy) {
  std::vector<int32_t> d(std::max(ranks, 0), 0);
  if (gpus < 1) gpus = 1;
  int32_t per = (ranks + gpus - 1) / gpus;
  for (int32_t r = 0; r < ranks; ++r) d[r] = policy == DevicePolicy::kRoundRobin ? r % gpus : std::min(r / std::max(per, 1), gpus - 1);
  return d;
}

namespace {

// A unit of host commands on one stream. Steps are issued in a topological order of `succ`
// (stream order and record-before-wait), smallest key first: the key follows the predicted
// time, memory effects before other work at the same instant, frees before allocations.
struct Step {
  double time = 0;
  int phase = 1;        // 0: memory effect, 1: other work
  int64_t delta = 0;    // memory effects: bytes (negative frees sort first)
  int32_t seq = 0;
  std::vector<Command> cmds;
  std::vector<int32_t> succ;
  int32_t indeg = 0;
  auto key() const { return std::make_tuple(time, phase, delta, seq); }
};

class Builder {
 public:
  Builder(const Program& p, const Timeline& t, const PlanOptions& o) : p_(p), t_(t), o_(o) {}

  Expected<GpuPlan> build() {
    const size_t n = p_.ops.size();
    if (t_.ops.size() != n) return Error{"the prediction does not cover every op (the program did not complete)"};
    plan_.num_ranks = p_.num_ranks;
    plan_.num_ops = n;
    plan_.device_of_rank = assign_devices(p_.num_ranks, o_.gpus, o_.policy);
    for (size_t s = 0; s < p_.streams.size(); ++s)
      plan_.streams.push_back({p_.streams[s].rank, static_cast<int32_t>(s), -1, p_.stream_label(static_cast<int32_t>(s))});
    plan_.send_staging_bytes.assign(p_.num_ranks, 0);
    plan_.recv_staging_bytes.assign(p_.num_ranks, 0);

    // Items: one per op, then one per implicit transfer.
    for (OpId id = 0; id < static_cast<OpId>(n); ++id) {
      const Op& op = p_.ops[id];
      Item it;
      it.op = id;
      it.stream = member_stream(id);
      it.rank = op.rank;
      it.cls = op.kind == OpKind::kCompute ? ItemClass::kCompute
               : op.kind == OpKind::kMarker ? ItemClass::kMarker
                                            : ItemClass::kComm;
      it.predicted_start_s = t_.ops[id].start_s;
      it.predicted_end_s = t_.ops[id].end_s;
      it.label = p_.label(id);
      add_item(std::move(it));
    }
    if (auto e = add_transfers(); !e.empty()) return Error{e};

    // Steps per op, in each stream's order.
    arrive_.assign(n, -1);
    body_.assign(n, -1);
    ready_event_.assign(n, -1);
    for (OpId id = 0; id < static_cast<OpId>(n); ++id) {
      const Op& op = p_.ops[id];
      if (op.kind != OpKind::kCompute && op.kind != OpKind::kMarker && op.kind != OpKind::kSend &&
          op.kind != OpKind::kRecv && op.kind != OpKind::kCollective)
        return Error{fmt::format("op {}: unknown op kind", p_.label(id))};
      if (needs_ready_event(id)) ready_event_[id] = add_event(false, -1, false);
    }
    launch_event_.assign(p_.groups.size(), -1);
    join_.assign(p_.groups.size(), -1);
    for (size_t g = 0; g < p_.groups.size(); ++g) launch_event_[g] = add_event(false, -1, false);
    for (const Stream& s : p_.streams)
      for (OpId id : s.ops) {
        arrive_[id] = new_step(t_.ops[id].start_s, 1, 0, op_stream(id));
        body_[id] = new_step(t_.ops[id].start_s, 1, 0, plan_.items[id].stream);
      }
    for (size_t g = 0; g < p_.groups.size(); ++g) {
      const auto& members = p_.groups[g];
      double end = 0;
      for (OpId m : members) {
        end = std::max(end, t_.ops[m].end_s);
        if (!mem_effects_empty(m)) return Error{fmt::format("op {}: a batched P2P op with memory effects", p_.label(m))};
      }
      join_[g] = new_step(end, 1, 0, op_stream(members.front()));
    }
    for (Transfer& tr : transfers_)
      tr.step = new_step(plan_.items[tr.item].predicted_start_s, 1, 0, plan_.items[tr.item].stream);
    for (OpId id = 0; id < static_cast<OpId>(n); ++id)
      if (auto e = fill_op(id); !e.empty()) return Error{e};
    for (Transfer& tr : transfers_) fill_transfer(tr);
    if (auto e = add_memory(); !e.empty()) return Error{e};
    add_stream_order();
    add_hb();
    if (!issue()) return Error{"the plan's steps form a cycle (an op waits for a later op of its own stream)"};
    account();
    return std::move(plan_);
  }

 private:
  struct Transfer {
    int32_t item;
    OpId src, dst;
    int32_t step = -1;
  };

  int32_t op_stream(OpId id) const { return p_.ops[id].stream; }

  // The plan stream of an op's body. A batched P2P group's members run concurrently (one NCCL
  // group call): the first on its IR stream, member k > 0 on lane k of that stream, created on
  // first use ("rank 0 comm batch lane 1").
  int32_t member_stream(OpId id) {
    const Op& op = p_.ops[id];
    if (op.group() < 0) return op.stream;
    const auto& members = p_.groups[op.group()];
    int32_t k = static_cast<int32_t>(std::find(members.begin(), members.end(), id) - members.begin());
    if (k == 0) return op.stream;
    auto [it, fresh] = group_lane_.try_emplace({op.stream, k}, -1);
    if (fresh) {
      it->second = static_cast<int32_t>(plan_.streams.size());
      plan_.streams.push_back({op.rank, -1, -1, fmt::format("{} batch lane {}", p_.stream_label(op.stream), k)});
    }
    return it->second;
  }

  // The step that records an op's ready event: its arrival, or for a member of a batched group
  // the arrival of the group's last member (the group's launch).
  int32_t ready_step(OpId id) const {
    const int32_t g = p_.ops[id].group();
    return g < 0 ? arrive_[id] : arrive_[p_.groups[g].back()];
  }

  bool mem_effects_empty(OpId id) const { return p_.mem_begin(id) == p_.mem_end(id); }

  int32_t add_event(bool timing, int32_t item, bool is_start) {
    plan_.events.push_back({timing, item, is_start});
    return static_cast<int32_t>(plan_.events.size() - 1);
  }

  void add_item(Item it) {
    int32_t idx = static_cast<int32_t>(plan_.items.size());
    it.start_event = add_event(true, idx, true);
    it.end_event = add_event(true, idx, false);
    plan_.items.push_back(std::move(it));
  }

  int32_t new_step(double time, int phase, int64_t delta, int32_t stream) {
    Step s;
    s.time = time;
    s.phase = phase;
    s.delta = delta;
    s.seq = static_cast<int32_t>(steps_.size());
    steps_.push_back(std::move(s));
    step_stream_.push_back(stream);
    return static_cast<int32_t>(steps_.size() - 1);
  }

  void edge(int32_t from, int32_t to) {
    if (from < 0 || to < 0 || from == to) return;
    steps_[from].succ.push_back(to);
    ++steps_[to].indeg;
  }

  bool rendezvous_pair(OpId id) const {
    const Op& op = p_.ops[id];
    return (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) && op.match() != kNoOp &&
           p_.semantics.kind == Semantics::kRendezvous;
  }

  bool needs_ready_event(OpId id) const {
    return rendezvous_pair(id) || (p_.ops[id].kind == OpKind::kCollective && p_.ops[id].comm() >= 0);
  }

  // Implicit transfers: one item per kTransfer dep, on lanes per (src rank, dst rank).
  std::string add_transfers() {
    double link = p_.link.transfer_s(p_.link.message_bytes);
    std::vector<Transfer> all;
    for (OpId id = 0; id < static_cast<OpId>(p_.ops.size()); ++id)
      for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d)
        if (d->kind == DepKind::kTransfer) all.push_back({-1, d->src, id});
    std::stable_sort(all.begin(), all.end(), [&](const Transfer& a, const Transfer& b) {
      return t_.ops[a.src].end_s < t_.ops[b.src].end_s;
    });
    std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, double>>> lanes;  // stream, busy until
    for (Transfer& tr : all) {
      int32_t a = p_.ops[tr.src].rank, b = p_.ops[tr.dst].rank;
      double start = t_.ops[tr.src].end_s, end = start + link;
      auto& ls = lanes[{a, b}];
      int32_t stream = -1;
      for (auto& [s, until] : ls)
        if (until <= start) {
          stream = s;
          until = end;
          break;
        }
      if (stream < 0) {
        stream = static_cast<int32_t>(plan_.streams.size());
        plan_.streams.push_back({a, -1, b, fmt::format("rank {} -> {} transfer #{}", a, b, ls.size())});
        ls.push_back({stream, end});
      }
      Item it;
      it.transfer_src = tr.src;
      it.transfer_dst = tr.dst;
      it.stream = stream;
      it.rank = a;
      it.cls = ItemClass::kComm;
      it.predicted_start_s = start;
      it.predicted_end_s = end;
      it.label = fmt::format("xfer {} -> {}", p_.label(tr.src), p_.label(tr.dst));
      tr.item = static_cast<int32_t>(plan_.items.size());
      add_item(std::move(it));
      plan_.send_staging_bytes[a] = std::max(plan_.send_staging_bytes[a], p_.link.message_bytes);
      plan_.recv_staging_bytes[b] = std::max(plan_.recv_staging_bytes[b], p_.link.message_bytes);
    }
    transfers_ = std::move(all);
    for (size_t k = 0; k < transfers_.size(); ++k) transfer_of_dep_[{transfers_[k].src, transfers_[k].dst}].push_back(k);
    return "";
  }

  // The item and step whose end a dep (src -> dst) waits for: the op, or the transfer between.
  std::pair<int32_t, int32_t> dep_source(const Dep& d, OpId dst) {
    if (d.kind != DepKind::kTransfer) return {d.src, body_[d.src]};
    auto& v = transfer_of_dep_[{d.src, dst}];
    size_t k = v[used_[{d.src, dst}]++ % v.size()];
    return {transfers_[k].item, transfers_[k].step};
  }

  Command cmd(CmdKind k, int32_t stream) {
    Command c;
    c.kind = k;
    c.stream = stream;
    return c;
  }
  Command wait(int32_t stream, int32_t event) {
    Command c = cmd(CmdKind::kWait, stream);
    c.event = event;
    return c;
  }
  Command record(int32_t stream, int32_t event) {
    Command c = cmd(CmdKind::kRecord, stream);
    c.event = event;
    return c;
  }

  // The member's previous collective on the same communicator, or kNoOp.
  OpId previous_collective(OpId id) const {
    const Op& op = p_.ops[id];
    if (op.kind != OpKind::kCollective || op.comm() < 0 || op.seq() <= 0) return kNoOp;
    const Communicator& c = p_.comms[op.comm()];
    int32_t m = c.member_index(op.rank);
    if (m < 0 || op.seq() > static_cast<int32_t>(c.ops[m].size())) return kNoOp;
    return c.ops[m][op.seq() - 1];
  }

  // The collective's hold time: the smallest predicted duration over its instance (the member
  // that arrives last waits for nobody), and its per-rank traffic bytes.
  double collective_hold(OpId id) const {
    double hold = t_.ops[id].end_s - t_.ops[id].start_s;
    if (p_.ops[id].comm() >= 0)
      for (OpId m : p_.instance(id))
        if (m != kNoOp) hold = std::min(hold, t_.ops[m].end_s - t_.ops[m].start_s);
    return std::max(hold, 0.0);
  }

  std::string fill_op(OpId id) {
    const Op& op = p_.ops[id];
    const Item& it = plan_.items[id];
    int32_t s = op.stream;
    // Arrive: wait for every dep, then mark the ready point partners wait for.
    for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d) {
      auto [src_item, src_step] = dep_source(*d, id);
      steps_[arrive_[id]].cmds.push_back(wait(s, plan_.items[src_item].end_event));
      edge(src_step, arrive_[id]);
    }
    // A communicator runs its collectives one after another (NCCL): a member's collective
    // also waits for its previous one on the communicator when that ran on another stream.
    if (OpId prev = previous_collective(id); prev != kNoOp && p_.ops[prev].stream != s) {
      steps_[arrive_[id]].cmds.push_back(wait(s, plan_.items[prev].end_event));
      edge(body_[prev], arrive_[id]);
    }
    // The ready point partners wait for. A batched group's members are all ready at the group's
    // launch, when the last member has arrived (every member's deps are done, the timeline's
    // group start): their ready events are recorded there, after the last member's waits.
    if (op.group() < 0) {
      if (ready_event_[id] >= 0) steps_[arrive_[id]].cmds.push_back(record(s, ready_event_[id]));
    } else if (id == p_.groups[op.group()].back()) {
      for (OpId m : p_.groups[op.group()])
        if (ready_event_[m] >= 0) steps_[arrive_[id]].cmds.push_back(record(s, ready_event_[m]));
    }
    edge(arrive_[id], body_[id]);

    std::vector<Command>& body = steps_[body_[id]].cmds;
    const int32_t stream = s;
    s = it.stream;  // the body's stream: a batch lane for a group member after the first
    auto wait_step = [&](OpId other, int32_t event, int32_t step) {
      body.push_back(wait(s, event));
      edge(step, body_[id]);
      (void)other;
    };
    if (op.group() >= 0) {
      // The group is launched once every member has arrived (the last arrival records the
      // launch); members on lanes start from the launch, and the IR stream moves past the group
      // (its join) only when every member has ended.
      const int32_t g = op.group();
      const auto& members = p_.groups[g];
      if (id == members.back()) steps_[arrive_[id]].cmds.push_back(record(stream, launch_event_[g]));
      if (s != stream) {
        wait_step(members.back(), launch_event_[g], arrive_[members.back()]);
        steps_[join_[g]].cmds.push_back(wait(stream, it.end_event));
        edge(body_[id], join_[g]);
      }
    }
    switch (op.kind) {
      case OpKind::kCompute: {
        body.push_back(record(s, it.start_event));
        Command c = cmd(CmdKind::kSpin, s);
        c.item = id;
        c.duration_s = op.duration_s;
        body.push_back(c);
        body.push_back(record(s, it.end_event));
        break;
      }
      case OpKind::kMarker:
        body.push_back(record(s, it.start_event));
        body.push_back(record(s, it.end_event));
        break;
      case OpKind::kSend: {
        if (rendezvous_pair(id)) {
          wait_step(op.match(), ready_event_[op.match()], ready_step(op.match()));
        } else if (p_.semantics.kind == Semantics::kBuffered && op.channel() >= 0) {
          // The k-th send waits for the (k - N)-th receive of its channel to end.
          const Channel& ch = p_.channels[op.channel()];
          auto pos = std::find(ch.sends.begin(), ch.sends.end(), id) - ch.sends.begin();
          int64_t k = pos - static_cast<int64_t>(p_.semantics.buffer);
          if (k >= 0 && k < static_cast<int64_t>(ch.recvs.size()))
            wait_step(ch.recvs[k], plan_.items[ch.recvs[k]].end_event, body_[ch.recvs[k]]);
        }
        body.push_back(record(s, it.start_event));
        Command c = cmd(CmdKind::kCopy, s);
        c.item = id;
        c.src_rank = op.rank;
        c.dst_rank = op.peer();
        c.bytes = op.bytes;
        c.duration_s = p_.link.transfer_s(op.bytes);
        body.push_back(c);
        body.push_back(record(s, it.end_event));
        if (op.peer() >= 0 && op.peer() < p_.num_ranks) {
          plan_.send_staging_bytes[op.rank] = std::max(plan_.send_staging_bytes[op.rank], op.bytes);
          plan_.recv_staging_bytes[op.peer()] = std::max(plan_.recv_staging_bytes[op.peer()], op.bytes);
        }
        break;
      }
      case OpKind::kRecv: {
        if (rendezvous_pair(id)) wait_step(op.match(), ready_event_[op.match()], ready_step(op.match()));
        body.push_back(record(s, it.start_event));
        if (op.match() != kNoOp) wait_step(op.match(), plan_.items[op.match()].end_event, body_[op.match()]);
        body.push_back(record(s, it.end_event));
        break;
      }
      case OpKind::kCollective: {
        std::vector<OpId> members = op.comm() >= 0 ? p_.instance(id) : std::vector<OpId>{};
        for (OpId m : members)
          if (m != kNoOp && m != id) wait_step(m, ready_event_[m], ready_step(m));
        body.push_back(record(s, it.start_event));
        // Ranks sharing a GPU: the collective's traffic as one copy from the next member's send
        // buffer into this rank's receive buffer ((n-1)/n of the bytes, a ring's share).
        int64_t n = std::max<int64_t>(1, static_cast<int64_t>(members.size()));
        int32_t next = op.rank;
        if (op.comm() >= 0) {
          const auto& rk = p_.comms[op.comm()].ranks;
          if (!rk.empty()) {
            auto pos = std::find(rk.begin(), rk.end(), op.rank) - rk.begin();
            next = rk[(pos + 1) % rk.size()];
          }
        }
        Command c = cmd(CmdKind::kCopy, s);
        c.item = id;
        c.src_rank = next;
        c.dst_rank = op.rank;
        c.bytes = op.bytes * (n - 1) / n;
        c.duration_s = collective_hold(id);
        body.push_back(c);
        body.push_back(record(s, it.end_event));
        plan_.send_staging_bytes[next] = std::max(plan_.send_staging_bytes[next], c.bytes);
        plan_.recv_staging_bytes[op.rank] = std::max(plan_.recv_staging_bytes[op.rank], c.bytes);
        break;
      }
    }
    return "";
  }

  void fill_transfer(Transfer& tr) {
    const Item& it = plan_.items[tr.item];
    int32_t s = it.stream;
    Step& st = steps_[tr.step];
    st.cmds.push_back(wait(s, plan_.items[tr.src].end_event));
    st.cmds.push_back(record(s, it.start_event));
    Command c = cmd(CmdKind::kCopy, s);
    c.item = tr.item;
    c.src_rank = p_.ops[tr.src].rank;
    c.dst_rank = p_.ops[tr.dst].rank;
    c.bytes = p_.link.message_bytes;
    c.duration_s = it.predicted_end_s - it.predicted_start_s;
    st.cmds.push_back(c);
    st.cmds.push_back(record(s, it.end_event));
    edge(body_[tr.src], tr.step);  // the consumer's arrive step waits on it (dep_source)
  }

  // Memory effects: a step per effect, before the op's body (at start) or after it (at end);
  // each positive effect is a new PlanBuffer, each negative one frees the oldest live buffer of
  // its IR buffer. Static bytes per rank: allocated first, freed last (with unfreed buffers).
  std::string add_memory() {
    std::vector<std::vector<int32_t>> live(p_.buffers.size());
    std::vector<size_t> live_head(p_.buffers.size(), 0);
    mem_before_.assign(p_.ops.size(), {});
    mem_after_.assign(p_.ops.size(), {});
    // Effects are applied in predicted time order per op; within an op, allocations at start
    // and frees at end follow the IR's order. Process ops in order of their predicted start so
    // the "oldest live" rule follows the timeline.
    std::vector<OpId> by_time(p_.ops.size());
    for (size_t i = 0; i < by_time.size(); ++i) by_time[i] = static_cast<OpId>(i);
    std::stable_sort(by_time.begin(), by_time.end(),
                     [&](OpId a, OpId b) { return t_.ops[a].start_s < t_.ops[b].start_s; });
    struct Pending {
      OpId op;
      const MemEffect* m;
    };
    std::vector<Pending> effects;
    for (OpId id : by_time)
      for (const MemEffect* m = p_.mem_begin(id); m != p_.mem_end(id); ++m) effects.push_back({id, m});
    std::stable_sort(effects.begin(), effects.end(), [&](const Pending& a, const Pending& b) {
      double ta = a.m->at_end ? t_.ops[a.op].end_s : t_.ops[a.op].start_s;
      double tb = b.m->at_end ? t_.ops[b.op].end_s : t_.ops[b.op].start_s;
      if (ta != tb) return ta < tb;
      return a.m->bytes < b.m->bytes;
    });
    for (const Pending& e : effects) {
      const Op& op = p_.ops[e.op];
      double time = e.m->at_end ? t_.ops[e.op].end_s : t_.ops[e.op].start_s;
      if (e.m->bytes == 0) continue;
      if (e.m->buffer < 0 || e.m->buffer >= static_cast<int32_t>(p_.buffers.size()))
        return fmt::format("op {}: memory effect on an unknown buffer", p_.label(e.op));
      int32_t step = new_step(time, 0, e.m->bytes, op.stream);
      Command c = cmd(e.m->bytes > 0 ? CmdKind::kAlloc : CmdKind::kFree, op.stream);
      if (e.m->bytes > 0) {
        plan_.buffers.push_back({op.rank, e.m->buffer, e.m->bytes});
        c.buffer = static_cast<int32_t>(plan_.buffers.size() - 1);
        live[e.m->buffer].push_back(c.buffer);
      } else {
        auto& l = live[e.m->buffer];
        size_t& h = live_head[e.m->buffer];
        if (h >= l.size())
          return fmt::format("op {} frees buffer {} which is not allocated", p_.label(e.op), e.m->buffer);
        c.buffer = l[h++];
      }
      steps_[step].cmds.push_back(c);
      (e.m->at_end ? mem_after_ : mem_before_)[e.op].push_back(step);
    }
    // Static bytes and leftovers, per rank, on the rank's first stream.
    static_alloc_.assign(p_.num_ranks, -1);
    final_.assign(p_.num_ranks, -1);
    for (int32_t r = 0; r < p_.num_ranks; ++r) {
      if (p_.rank_streams[r].empty()) continue;
      int32_t s = p_.rank_streams[r].front();
      int64_t st = r < static_cast<int32_t>(p_.static_bytes_per_rank.size()) ? p_.static_bytes_per_rank[r] : 0;
      double inf = std::numeric_limits<double>::infinity();
      final_[r] = new_step(inf, 1, 0, s);
      if (st > 0) {
        plan_.buffers.push_back({r, -1, st});
        int32_t b = static_cast<int32_t>(plan_.buffers.size() - 1);
        static_alloc_[r] = new_step(-inf, 0, st, s);
        Command a = cmd(CmdKind::kAlloc, s);
        a.buffer = b;
        steps_[static_alloc_[r]].cmds.push_back(a);
        static_free_.push_back({r, b});
      }
    }
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      for (size_t k = live_head[b]; k < live[b].size(); ++k) static_free_.push_back({plan_.buffers[live[b][k]].rank, live[b][k]});
    return "";
  }

  // Stream order: per stream, each op's [arrive, allocs at start, body, effects at end]; the
  // static allocation first; the final step waits for the last item of every stream of the rank.
  void add_stream_order() {
    std::vector<int32_t> last_item(plan_.streams.size(), -1);
    std::vector<int32_t> last_step(plan_.streams.size(), -1);
    for (int32_t r = 0; r < p_.num_ranks; ++r)
      if (static_alloc_[r] >= 0) last_step[p_.rank_streams[r].front()] = static_alloc_[r];
    for (const Stream& s : p_.streams)
      for (OpId id : s.ops) {
        int32_t st = op_stream(id);
        if (p_.ops[id].group() >= 0) {
          // A batched group (no memory effects): every member's arrival, the first member's
          // body, the join; the other members' bodies on their lanes.
          const auto& members = p_.groups[p_.ops[id].group()];
          if (id != members.front()) continue;
          int32_t prev = last_step[st];
          for (OpId m : members) {
            edge(prev, arrive_[m]);
            prev = arrive_[m];
          }
          edge(prev, body_[id]);
          edge(body_[id], join_[p_.ops[id].group()]);
          last_step[st] = join_[p_.ops[id].group()];
          last_item[st] = id;
          for (size_t k = 1; k < members.size(); ++k) {
            int32_t lane = plan_.items[members[k]].stream;
            edge(last_step[lane], body_[members[k]]);
            last_step[lane] = body_[members[k]];
            last_item[lane] = members[k];
          }
          continue;
        }
        edge(last_step[st], arrive_[id]);
        int32_t prev = arrive_[id];
        for (int32_t m : mem_before_[id]) {
          edge(prev, m);
          prev = m;
        }
        edge(prev, body_[id]);
        prev = body_[id];
        for (int32_t m : mem_after_[id]) {
          edge(prev, m);
          prev = m;
        }
        last_step[st] = prev;
        last_item[st] = id;
      }
    // Transfer lanes: in predicted order (transfers_ is sorted by start).
    for (const Transfer& tr : transfers_) {
      int32_t st = plan_.items[tr.item].stream;
      edge(last_step[st], tr.step);
      last_step[st] = tr.step;
      last_item[st] = tr.item;
    }
    for (size_t st = 0; st < plan_.streams.size(); ++st) {
      int32_t r = plan_.streams[st].rank;
      if (final_[r] < 0) continue;
      int32_t fs = step_stream_[final_[r]];
      if (last_step[st] >= 0) edge(last_step[st], final_[r]);
      if (static_cast<int32_t>(st) != fs && last_item[st] >= 0)
        steps_[final_[r]].cmds.push_back(wait(fs, plan_.items[last_item[st]].end_event));
    }
    for (auto [r, b] : static_free_) {
      if (final_[r] < 0) continue;
      Command f = cmd(CmdKind::kFree, step_stream_[final_[r]]);
      f.buffer = b;
      steps_[final_[r]].cmds.push_back(f);
    }
  }

  void add_hb() {
    auto ebb = [&](int32_t a, int32_t b) { plan_.hb.push_back({a, b, HbEdge::kEndBeforeBegin}); };
    // Stream order by units: an op, or a batched group whose members run together. Every op
    // of a unit ends before any op of the next begins.
    std::vector<std::vector<int32_t>> prev_unit(p_.ops.size());
    for (const Stream& s : p_.streams) {
      std::vector<int32_t> last;
      for (size_t k = 0; k < s.ops.size();) {
        const int32_t g = p_.ops[s.ops[k]].group();
        std::vector<int32_t> unit = g >= 0 ? p_.groups[g] : std::vector<int32_t>{s.ops[k]};
        for (int32_t u : unit) {
          for (int32_t a : last) ebb(a, u);
          prev_unit[u] = last;
        }
        k += unit.size();
        last = std::move(unit);
      }
    }
    std::map<int32_t, int32_t> lane_prev;
    for (const Transfer& tr : transfers_) {
      int32_t st = plan_.items[tr.item].stream;
      if (auto it = lane_prev.find(st); it != lane_prev.end()) ebb(it->second, tr.item);
      lane_prev[st] = tr.item;
      ebb(tr.src, tr.item);
      ebb(tr.item, tr.dst);
    }
    // Everything an op's arrival waits for: its stream predecessor, its local deps and its
    // previous collective on the communicator.
    // A batched group arrives when every member's local deps are done.
    auto arrival_preds = [&](OpId id) {
      std::vector<int32_t> v = prev_unit[id];
      if (OpId pc = previous_collective(id); pc != kNoOp) v.push_back(pc);
      const int32_t g = p_.ops[id].group();
      for (OpId m : g >= 0 ? p_.groups[g] : std::vector<OpId>{id})
        for (const Dep* d = p_.deps_begin(m); d != p_.deps_end(m); ++d)
          if (d->kind == DepKind::kLocal) v.push_back(d->src);
      return v;
    };
    for (OpId id = 0; id < static_cast<OpId>(p_.ops.size()); ++id) {
      const Op& op = p_.ops[id];
      for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d)
        if (d->kind == DepKind::kLocal) ebb(d->src, id);
      if (op.kind == OpKind::kSend && op.match() != kNoOp) {
        plan_.hb.push_back({id, op.match(), HbEdge::kEndBeforeEnd});
        if (rendezvous_pair(id)) {
          for (int32_t a : arrival_preds(op.match())) ebb(a, id);
          for (int32_t a : arrival_preds(id)) ebb(a, op.match());
        }
      }
      if (OpId pc = previous_collective(id); pc != kNoOp) ebb(pc, id);
      if (op.kind == OpKind::kCollective && op.comm() >= 0)
        for (OpId m : p_.instance(id))
          if (m != kNoOp && m != id)
            for (int32_t a : arrival_preds(m)) ebb(a, id);
    }
  }

  // Kahn's algorithm over the steps, smallest key first. False when some step never became
  // ready (a cycle).
  bool issue() {
    size_t issued = 0;
    using Key = std::tuple<double, int, int64_t, int32_t>;
    std::priority_queue<std::pair<Key, int32_t>, std::vector<std::pair<Key, int32_t>>, std::greater<>> ready;
    for (size_t i = 0; i < steps_.size(); ++i)
      if (steps_[i].indeg == 0) ready.push({steps_[i].key(), static_cast<int32_t>(i)});
    while (!ready.empty()) {
      int32_t i = ready.top().second;
      ready.pop();
      ++issued;
      for (const Command& c : steps_[i].cmds) plan_.commands.push_back(c);
      for (int32_t j : steps_[i].succ)
        if (--steps_[j].indeg == 0) ready.push({steps_[j].key(), j});
    }
    return issued == steps_.size();
  }

  void account() {
    plan_.expected_peak_bytes_per_rank.assign(p_.num_ranks, 0);
    plan_.max_live_buffers_per_rank.assign(p_.num_ranks, 0);
    for (int32_t r = 0; r < p_.num_ranks; ++r) plan_.expected_peak_bytes_per_rank[r] = expected_peak_rounded(plan_, r, 1);
    std::vector<int32_t> live(p_.num_ranks, 0);
    for (const Command& c : plan_.commands) {
      if (c.kind != CmdKind::kAlloc && c.kind != CmdKind::kFree) continue;
      int32_t r = plan_.buffers[c.buffer].rank;
      live[r] += c.kind == CmdKind::kAlloc ? 1 : -1;
      plan_.max_live_buffers_per_rank[r] = std::max(plan_.max_live_buffers_per_rank[r], live[r]);
    }
  }

  const Program& p_;
  const Timeline& t_;
  PlanOptions o_;
  GpuPlan plan_;
  std::vector<Step> steps_;
  std::vector<int32_t> step_stream_;
  std::vector<int32_t> arrive_, body_, ready_event_;
  std::vector<int32_t> launch_event_, join_;            ///< per batched group
  std::map<std::pair<int32_t, int32_t>, int32_t> group_lane_;  ///< (IR stream, member) -> plan stream
  std::vector<Transfer> transfers_;
  std::map<std::pair<OpId, OpId>, std::vector<size_t>> transfer_of_dep_;
  std::map<std::pair<OpId, OpId>, size_t> used_;
  std::vector<std::vector<int32_t>> mem_before_, mem_after_;
  std::vector<int32_t> static_alloc_, final_;
  std::vector<std::pair<int32_t, int32_t>> static_free_;
};

}  // namespace

Expected<GpuPlan> make_plan(const Program& program, const Timeline& timeline, const PlanOptions& options) {
  Builder b(program, timeline, options);
  return b.build();
}

int64_t expected_peak_rounded(const GpuPlan& plan, int32_t rank, int64_t rounding_bytes) {
  rounding_bytes = std::max<int64_t>(rounding_bytes, 1);
  int64_t live = 0, peak = 0;
  for (const Command& c : plan.commands) {
    if (c.kind != CmdKind::kAlloc && c.kind != CmdKind::kFree) continue;
    const PlanBuffer& b = plan.buffers[c.buffer];
    if (b.rank != rank) continue;
    int64_t rounded = (b.bytes + rounding_bytes - 1) / rounding_bytes * rounding_bytes;
    live += c.kind == CmdKind::kAlloc ? rounded : -rounded;
    peak = std::max(peak, live);
  }
  return peak;
}

ReplayResult replay(const GpuPlan& plan, const ReplayCosts& costs) {
  ReplayResult r;
  std::vector<double> clock(plan.streams.size(), 0.0);
  std::vector<double> ev(plan.events.size(), -1.0);
  // Causal depth: a record is deeper than everything before it on its stream and than every
  // record its stream waited for, so (time, depth) orders simultaneous points causally.
  std::vector<int64_t> depth(plan.streams.size(), 0), ev_depth(plan.events.size(), 0);
  std::vector<int64_t> live(plan.num_ranks, 0);
  r.peak_bytes_per_rank.assign(plan.num_ranks, 0);
  for (const Command& c : plan.commands) {
    double& t = clock[c.stream];
    switch (c.kind) {
      case CmdKind::kWait:
        if (ev[c.event] >= 0) {  // never recorded: no wait (CUDA's rule)
          t = std::max(t, ev[c.event]);
          depth[c.stream] = std::max(depth[c.stream], ev_depth[c.event]);
        }
        break;
      case CmdKind::kRecord:
        ev[c.event] = t;
        ev_depth[c.event] = ++depth[c.stream];
        break;
      case CmdKind::kAlloc:
      case CmdKind::kFree: {
        const PlanBuffer& b = plan.buffers[c.buffer];
        live[b.rank] += c.kind == CmdKind::kAlloc ? b.bytes : -b.bytes;
        r.peak_bytes_per_rank[b.rank] = std::max(r.peak_bytes_per_rank[b.rank], live[b.rank]);
        break;
      }
      case CmdKind::kSpin:
        t += costs.launch_s + c.duration_s;
        ++depth[c.stream];
        break;
      case CmdKind::kCopy: {
        ++depth[c.stream];
        double copy = costs.copy_bandwidth_bytes_per_s > 0 ? c.bytes / costs.copy_bandwidth_bytes_per_s : 0.0;
        t += costs.launch_s + std::max(copy, c.duration_s);
        break;
      }
    }
  }
  r.leaked_bytes_per_rank = live;
  r.items.assign(plan.items.size(), {});
  double first = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < plan.items.size(); ++i) {
    r.items[i] = {ev[plan.items[i].start_event], ev[plan.items[i].end_event]};
    if (i < plan.num_ops) first = std::min(first, r.items[i].start_s);
  }
  if (first == std::numeric_limits<double>::infinity()) first = 0;
  for (auto& it : r.items) {
    it.start_s -= first;
    it.end_s -= first;
  }
  // Tickets: every start and end in (time, causal depth) order.
  std::vector<std::tuple<double, int64_t, size_t, int>> pts;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    pts.push_back({r.items[i].start_s, ev_depth[plan.items[i].start_event], i, 1});
    pts.push_back({r.items[i].end_s, ev_depth[plan.items[i].end_event], i, 0});
  }
  std::sort(pts.begin(), pts.end());
  r.tickets.begin_ticket.assign(plan.items.size(), -1);
  r.tickets.end_ticket.assign(plan.items.size(), -1);
  r.tickets.runs.assign(plan.items.size(), 0);
  for (size_t k = 0; k < pts.size(); ++k) {
    auto [time, d, i, begin] = pts[k];
    if (begin) {
      r.tickets.begin_ticket[i] = static_cast<int64_t>(k);
      ++r.tickets.runs[i];
    } else {
      r.tickets.end_ticket[i] = static_cast<int64_t>(k);
    }
  }
  return r;
}

std::vector<std::string> check_execution(const GpuPlan& plan, const Tickets& tk,
                                         const std::vector<int64_t>& leaked_bytes_per_rank) {
  std::vector<std::string> problems;
  size_t n = plan.items.size();
  if (tk.runs.size() != n || tk.begin_ticket.size() != n || tk.end_ticket.size() != n) {
    problems.push_back(fmt::format("ticket arrays have {} entries, the plan {} items", tk.runs.size(), n));
    return problems;
  }
  for (size_t i = 0; i < n; ++i) {
    if (tk.runs[i] != 1) problems.push_back(fmt::format("item {} ran {} times", plan.items[i].label, tk.runs[i]));
    else if (tk.begin_ticket[i] >= tk.end_ticket[i])
      problems.push_back(fmt::format("item {} ended before it began", plan.items[i].label));
  }
  for (const HbEdge& e : plan.hb) {
    if (tk.runs[e.before] != 1 || tk.runs[e.after] != 1) continue;
    bool ok = e.kind == HbEdge::kEndBeforeBegin ? tk.end_ticket[e.before] < tk.begin_ticket[e.after]
                                                : tk.end_ticket[e.before] < tk.end_ticket[e.after];
    if (!ok)
      problems.push_back(fmt::format("{} {} before {} ended", plan.items[e.after].label,
                                     e.kind == HbEdge::kEndBeforeBegin ? "began" : "ended", plan.items[e.before].label));
  }
  for (size_t r = 0; r < leaked_bytes_per_rank.size(); ++r)
    if (leaked_bytes_per_rank[r] != 0)
      problems.push_back(fmt::format("rank {}: {} bytes still allocated from its pool after the run", r, leaked_bytes_per_rank[r]));
  return problems;
}

}  // namespace sc::gpu
