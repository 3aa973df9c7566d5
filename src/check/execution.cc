#include "check/execution.h"
#include "support/huge_pages.h"

#include <algorithm>
#include <deque>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "support/units.h"

namespace sc {
namespace {

class Executor {
 public:
  Executor(const Program& p, TimingWalk* timing) : p_(p), timing_(timing) {}

  ExecutionResult run() {
    size_t n = p_.ops.size();
    reserve_huge(res_.done, n);
    res_.done.assign(n, 0);
    reserve_huge(res_.order, n);
    head_.assign(p_.streams.size(), 0);
    announced_.assign(p_.streams.size(), -1);
    queued_.assign(p_.streams.size(), 0);
    sent_.assign(p_.channels.size(), 0);
    received_.assign(p_.channels.size(), 0);
    reserve_huge(counted_, n);
    counted_.assign(n, 0);
    int32_t instances = 0;
    for (const Communicator& c : p_.comms) {
      instance_base_.push_back(instances);
      size_t longest = 0;
      for (const auto& seqs : c.ops) longest = std::max(longest, seqs.size());
      instances += static_cast<int32_t>(longest);
    }
    arrived_.assign(instances, 0);
    build_dependents();
    multi_channel_.assign(p_.groups.size(), 0);
    for (size_t g = 0; g < p_.groups.size(); ++g)
      for (OpId m : p_.groups[g])
        if (p_.ops[m].channel() != p_.ops[p_.groups[g].front()].channel()) multi_channel_[g] = 1;
    // Without a group on several channels every unit is one op, and a component is a message's
    // two ends: the plain rendezvous rule, which the walk then takes without building components
    // (a comms CSV's millions of plain sends and receives).
    atomic_ = atomic_ && std::find(multi_channel_.begin(), multi_channel_.end(), 1) != multi_channel_.end();
    for (size_t s = 0; s < p_.streams.size(); ++s) push(static_cast<int32_t>(s));
    while (!work_.empty()) {
      int32_t s = work_.front();
      work_.pop_front();
      queued_[s] = 0;
      advance(s);
    }
    res_.completed = res_.order.size() == n;
    if (!res_.completed) report_deadlock();
    return std::move(res_);
  }

 private:
  void build_dependents() {
    size_t n = p_.ops.size();
    reserve_huge(dep_start_, n + 1);
    dep_start_.assign(n + 1, 0);
    for (const Dep& d : p_.deps) ++dep_start_[d.src + 1];
    for (size_t i = 0; i < n; ++i) dep_start_[i + 1] += dep_start_[i];
    reserve_huge(dependents_, p_.deps.size());
    dependents_.resize(p_.deps.size());
    std::vector<uint32_t> fill(dep_start_.begin(), dep_start_.end() - 1);
    for (OpId id = 0; id < static_cast<OpId>(n); ++id)
      for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d) dependents_[fill[d->src]++] = id;
  }

  void push(int32_t s) {
    if (!queued_[s]) {
      queued_[s] = 1;
      work_.push_back(s);
    }
  }

  bool at_head(OpId id) const {
    const Stream& st = p_.streams[p_.ops[id].stream];
    size_t h = head_[p_.ops[id].stream];
    return h < st.ops.size() && st.ops[h] == id;
  }

  bool deps_done(OpId id) const {
    for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d)
      if (!res_.done[d->src]) return false;
    return true;
  }

  void complete(OpId id) {
    res_.done[id] = 1;
    res_.order.push_back(id);
    if (timing_) timing_->visit(id);
    const Op& op = p_.ops[id];
    if (op.group() < 0)
      ++head_[op.stream];
    else
      push(op.stream);  // advance() moves past the group once every member is done
    for (uint32_t k = dep_start_[id]; k < dep_start_[id + 1]; ++k) push(p_.ops[dependents_[k]].stream);
    if (op.kind == OpKind::kCollective && op.comm() >= 0) {
      // The rank's next collective on this communicator may now start.
      const Communicator& c = p_.comms[op.comm()];
      const auto& seqs = c.ops[c.member_index(op.rank)];
      if (op.seq() + 1 < static_cast<int32_t>(seqs.size())) push(p_.ops[seqs[op.seq() + 1]].stream);
    }
    if (op.kind == OpKind::kSend && op.channel() >= 0) {
      ++sent_[op.channel()];
      if (op.match() != kNoOp) push(p_.ops[op.match()].stream);
    } else if (op.kind == OpKind::kRecv && op.channel() >= 0) {
      ++received_[op.channel()];
      // A slot frees up on a buffered channel.
      const Channel& ch = p_.channels[op.channel()];
      if (!ch.sends.empty()) push(p_.ops[ch.sends.front()].stream);
    }
  }

  // Tries to complete ops at the head of stream s, as many as possible.
  void advance(int32_t s) {
    const Stream& st = p_.streams[s];
    while (head_[s] < st.ops.size()) {
      OpId id = st.ops[head_[s]];
      // The walk moves between streams, a few ops at a time, too many for the hardware to see each
      // stream's run through the op array: ask for the stream's op after next now, and for its
      // time slot (TimingWalk::prefetch). On the largest comms CSV the deadlock walk went from
      // 0.32 s to 0.24 s.
      if (head_[s] + 2 < st.ops.size()) {
        __builtin_prefetch(&p_.ops[st.ops[head_[s] + 2]]);
        if (timing_) timing_->prefetch(st.ops[head_[s] + 2]);
      }
      const Op& op = p_.ops[id];
      if (op.group() >= 0) {
        if (!advance_group(s, op.group())) return;
        continue;
      }
      if (announced_[s] != static_cast<int64_t>(head_[s])) {
        announced_[s] = static_cast<int64_t>(head_[s]);
        // A rendezvous partner may be waiting for this op to be posted.
        if ((op.kind == OpKind::kSend || op.kind == OpKind::kRecv) && op.match() != kNoOp)
          push(p_.ops[op.match()].stream);
      }
      if (!deps_done(id)) return;
      if (op.kind == OpKind::kCollective && op.comm() >= 0) {
        if (!try_collective(id)) return;
      } else if (atomic_ && op.is_p2p()) {
        if (!try_component(id)) return;
      } else if (op.kind == OpKind::kSend) {
        if (!try_send(id)) return;
      } else if (op.kind == OpKind::kRecv) {
        if (!try_recv(id)) return;
      } else {
        complete(id);
      }
    }
  }

  // Every member's deps are done: the stream may launch the group.
  bool group_deps_done(int32_t g) const {
    for (OpId m : p_.groups[g])
      if (!deps_done(m)) return false;
    return true;
  }

  // A P2P op is posted: at the head of its stream with its deps done, or a not yet completed
  // member of a group that is at the head of its stream with every member's deps done.
  bool posted(OpId id) const {
    const Op& op = p_.ops[id];
    if (op.group() < 0) return at_head(id) && deps_done(id);
    const auto& members = p_.groups[op.group()];
    const Stream& st = p_.streams[op.stream];
    size_t h = head_[op.stream];
    return !res_.done[id] && h < st.ops.size() && st.ops[h] == members.front() && group_deps_done(op.group());
  }

  // A group at the head of stream s: once posted, every member tries to complete with its
  // partner; true (and the head moves past the group) when all have completed.
  bool advance_group(int32_t s, int32_t g) {
    const auto& members = p_.groups[g];
    if (!group_deps_done(g)) return false;
    if (announced_[s] != static_cast<int64_t>(head_[s])) {
      announced_[s] = static_cast<int64_t>(head_[s]);
      for (OpId m : members)  // rendezvous partners may be waiting for these to be posted
        if (p_.ops[m].match() != kNoOp) push(p_.ops[p_.ops[m].match()].stream);
    }
    if (atomic_)
      for (OpId m : members)
        if (!res_.done[m]) try_component(m);
    bool all = true;
    for (OpId m : members) {
      if (!atomic_ && !res_.done[m]) {
        if (p_.ops[m].kind == OpKind::kSend) try_send(m);
        else try_recv(m);
      }
      all = all && res_.done[m];
    }
    if (!all) return false;
    head_[s] += members.size();
    return true;
  }

  // Under atomic groups, the group an op completes as one with: its batched group when the
  // group's members use more than one channel (sends and receives, or several peers: NCCL's
  // rounds may put any member behind any other), else -1. The members of a group on one channel
  // (all sends to one peer, or all receives from one) keep that channel's FIFO order and need
  // nothing else: each is a unit of its own.
  int32_t atomic_group(OpId o) const {
    int32_t g = p_.ops[o].group();
    return g >= 0 && multi_channel_[g] ? g : -1;
  }
  // A unit's key: an atomic group g as -2 - g, any other op as its id.
  int64_t unit_key(OpId o) const { return atomic_group(o) >= 0 ? -2 - int64_t{atomic_group(o)} : o; }
  // The key of the call an op was posted in: its batched group (as -2 - g), or itself.
  int64_t call_key(OpId o) const { return p_.ops[o].group() >= 0 ? -2 - int64_t{p_.ops[o].group()} : o; }

  // The ops of the unit `id` completes with under atomic groups: its atomic group, or itself.
  const OpId* unit_begin(const OpId& id) const {
    int32_t g = atomic_group(id);
    return g < 0 ? &id : p_.groups[g].data();
  }
  const OpId* unit_end(const OpId& id) const {
    int32_t g = atomic_group(id);
    return g < 0 ? &id + 1 : p_.groups[g].data() + p_.groups[g].size();
  }

  // Under atomic groups, what keeps the component of `id` (its unit, the units of their
  // messages' partners, and so on) from completing: the first member whose partner does not
  // exist or is not posted, in breadth-first order from `id`. `member` is that member, `partner`
  // its partner (kNoOp when it has none); both kNoOp when every unit is posted. `ops` (when
  // given) receives every op of the component found so far, each unit's ops together.
  struct Blocker {
    OpId member = kNoOp;
    OpId partner = kNoOp;
  };
  Blocker component(OpId id, std::vector<OpId>* ops) const {
    seen_units_.clear();
    std::vector<OpId> frontier{id};
    seen_units_.insert(unit_key(id));
    for (size_t i = 0; i < frontier.size(); ++i) {
      const OpId cur = frontier[i];  // a copy: unit_begin may point at it, and frontier grows below
      for (const OpId* m = unit_begin(cur); m != unit_end(cur); ++m) {
        if (ops) ops->push_back(*m);
        OpId partner = p_.ops[*m].match();
        if (partner == kNoOp || res_.done[partner] || !posted(partner)) return {*m, partner};
        if (!seen_units_.insert(unit_key(partner)).second) continue;
        frontier.push_back(partner);
      }
    }
    return {};
  }

  // ", joined through rank 0's batch group 0SEND_F0, 0SEND_F0>2 (f.yaml:26:10)": the batch groups
  // of other ranks that link `id`'s unit to `blocker`'s, in the order component() met them (its
  // `path`); "" when they meet directly.
  std::string joined_through(OpId id, OpId blocker, const std::vector<OpId>& path) const {
    std::string out;
    std::vector<int64_t> listed{unit_key(id), unit_key(blocker)};
    for (OpId o : path) {
      const int64_t key = unit_key(o);
      if (std::find(listed.begin(), listed.end(), key) != listed.end() || atomic_group(o) < 0) continue;
      listed.push_back(key);
      std::string members;
      for (const OpId* m = unit_begin(o); m != unit_end(o); ++m) members += (members.empty() ? "" : ", ") + p_.label(*m);
      out += fmt::format("{}rank {}'s batch group {} ({})", out.empty() ? ", joined through " : " and ", p_.ops[o].rank,
                         members, format_loc(p_.ops[*unit_begin(o)].loc));
    }
    return out;
  }

  // Atomic groups: the unit of `id` (posted) completes, with every unit its messages connect it
  // to, once all of them are posted; each message completes send first, recv right after.
  bool try_component(OpId id) {
    std::vector<OpId> ops;
    if (component(id, &ops).member != kNoOp) return false;
    for (OpId o : ops) {
      if (res_.done[o] || p_.ops[o].kind != OpKind::kSend) continue;
      OpId r = p_.ops[o].match();
      push(p_.ops[r].stream);
      complete(o);
      complete(r);
    }
    return true;
  }

  // The rank's previous collective on the same communicator, or kNoOp.
  OpId comm_prev(OpId id) const {
    const Op& op = p_.ops[id];
    if (op.seq() <= 0) return kNoOp;
    const Communicator& c = p_.comms[op.comm()];
    return c.ops[c.member_index(op.rank)][op.seq() - 1];
  }

  // A member is ready: at the head of its stream, deps done, its previous collective on the
  // communicator done.
  bool member_ready(OpId m) const {
    if (!at_head(m) || !deps_done(m)) return false;
    OpId prev = comm_prev(m);
    return prev == kNoOp || res_.done[prev];
  }

  // A collective completes, with every member of its instance, once all are ready. Readiness
  // is monotone, so each member is counted once when it becomes ready and the last one to
  // arrive completes the instance: O(members) per instance.
  bool try_collective(OpId id) {
    if (!member_ready(id)) return false;
    const Op& op = p_.ops[id];
    if (!counted_[id]) {
      counted_[id] = 1;
      ++arrived_[instance_base_[op.comm()] + op.seq()];
    }
    const Communicator& c = p_.comms[op.comm()];
    if (arrived_[instance_base_[op.comm()] + op.seq()] < static_cast<int32_t>(c.ranks.size())) return false;
    if (!instance_agrees(id)) return false;  // every member waits in it forever
    for (const auto& seqs : c.ops) {
      OpId m = seqs[op.seq()];
      complete(m);
      if (m != id) push(p_.ops[m].stream);
    }
    return true;
  }

  // The members of a collective's instance issue the same kind with the same size (a barrier
  // and a communicator's creation carry no data: their sizes are not compared). NCCL checks
  // neither: each rank runs the algorithm its own call describes, so a ring step waits for data
  // its neighbour never sends (or sends more than the receiver takes), and the collective hangs
  // or corrupts memory. Megatron-LM PR #2218 (reduce-scatters of different sizes on one
  // communicator) and deepspeedai/DeepSpeed#6809 (an all-to-all whose capacity differs by rank)
  // hung. A member that never issues the collective is not this case.
  bool instance_agrees(OpId id) const {
    const Op& op = p_.ops[id];
    for (OpId m : p_.instance(id)) {
      if (m == kNoOp || m == id) continue;
      const Op& o = p_.ops[m];
      if (o.collective != op.collective) return false;
      if (op.collective != CollectiveKind::kBarrier && op.collective != CollectiveKind::kCommInit && o.bytes != op.bytes)
        return false;
    }
    return true;
  }

  bool try_send(OpId id) {
    const Op& op = p_.ops[id];
    switch (p_.semantics.kind) {
      case Semantics::kEager:
        complete(id);
        return true;
      case Semantics::kBuffered:
        if (op.channel() >= 0 && sent_[op.channel()] - received_[op.channel()] >= p_.semantics.buffer) return false;
        complete(id);
        return true;
      case Semantics::kRendezvous: {
        if (op.match() == kNoOp || !posted(op.match())) return false;
        OpId r = op.match();
        complete(id);
        complete(r);
        return true;
      }
    }
    return false;
  }

  bool try_recv(OpId id) {
    const Op& op = p_.ops[id];
    if (op.match() == kNoOp) return false;
    if (p_.semantics.kind == Semantics::kRendezvous) {
      OpId s = op.match();
      if (!posted(s)) return false;
      complete(s);
      complete(id);
      return true;
    }
    if (!res_.done[op.match()]) return false;
    complete(id);
    return true;
  }

  // What a stuck op waits for: another op, or nothing that will ever come (kNoOp + reason).
  struct Wait {
    OpId target = kNoOp;
    std::string why;
  };

  Wait wait_of(OpId id) const {
    const Op& op = p_.ops[id];
    if (op.group() >= 0)  // a group is launched only when every member's inputs are ready
      for (OpId m : p_.groups[op.group()])
        for (const Dep* d = p_.deps_begin(m); m != id && d != p_.deps_end(m); ++d)
          if (!res_.done[d->src])
            return {d->src, fmt::format("waits with its batch group: {} needs {} first", p_.label(m), p_.label(d->src))};
    for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d)
      if (!res_.done[d->src]) {
        const Op& src = p_.ops[d->src];
        return {d->src, src.rank == op.rank
                            ? fmt::format("waits for {} on its {} stream", p_.label(d->src),
                                          p_.streams[src.stream].name)
                            : fmt::format("waits for {} from rank {}", p_.label(d->src), src.rank)};
      }
    if (op.kind == OpKind::kCollective && op.comm() >= 0) {
      const Communicator& c = p_.comms[op.comm()];
      std::string what = fmt::format("{} #{} on communicator '{}'", collective_name(op.collective), op.seq() + 1, c.name);
      OpId prev = comm_prev(id);
      if (prev != kNoOp && !res_.done[prev])
        return {prev, fmt::format("waits for its earlier collective {} on communicator '{}' (one at a time)",
                                  p_.label(prev), c.name)};
      std::vector<OpId> members = p_.instance(id);
      for (size_t k = 0; k < members.size(); ++k) {
        if (members[k] != kNoOp) continue;
        return {kNoOp, fmt::format("waits in {} for rank {}, which issues only {} on that communicator", what,
                                   c.ranks[k], format_count(static_cast<int64_t>(c.ops[k].size()), "collective"))};
      }
      for (OpId m : members)
        if (m != id && !member_ready(m))
          return {m, fmt::format("waits in {} for rank {} to reach {}", what, p_.ops[m].rank, p_.label(m))};
      if (!instance_agrees(id)) {
        // Ranks grouped by what they issue: "ranks 0, 2: reduce-scatter of 4 MiB; rank 1: ...".
        std::vector<std::pair<std::string, std::vector<int32_t>>> by;
        for (OpId m : members) {
          std::string what = fmt::format("{} of {}", collective_name(p_.ops[m].collective),
                                         format_bytes(static_cast<double>(p_.ops[m].bytes)));
          auto it = std::find_if(by.begin(), by.end(), [&](const auto& b) { return b.first == what; });
          if (it == by.end()) by.push_back({what, {p_.ops[m].rank}});
          else it->second.push_back(p_.ops[m].rank);
        }
        std::string sizes;
        for (const auto& [what, ranks] : by)
          sizes += fmt::format("{}{} {}: {}", sizes.empty() ? "" : "; ", ranks.size() == 1 ? "rank" : "ranks",
                               format_rank_ranges(ranks), what);
        return {kNoOp, fmt::format("waits in {}, which its members issue with different kinds or sizes ({}): NCCL "
                                   "checks neither, each rank runs the steps of its own call and waits for data the "
                                   "others never send (Megatron-LM PR #2218, deepspeedai/DeepSpeed#6809)",
                                   what, sizes)};
      }
      return {kNoOp, fmt::format("waits in {}", what)};
    }
    if (atomic_ && op.is_p2p() && op.match() != kNoOp) {
      std::vector<OpId> path;
      Blocker b = component(id, &path);
      if (b.member != kNoOp && unit_key(b.member) != unit_key(id)) {
        const Op& m = p_.ops[b.member];
        std::string why = fmt::format(
            "completes only together with {} on rank {}{} (NCCL completes a batch group as one: NVIDIA/nccl#1279), "
            "which {}",
            p_.label(b.member), m.rank, joined_through(id, b.member, path),
            b.partner == kNoOp ? fmt::format("waits for a message rank {} never sends or receives", m.peer())
                               : fmt::format("waits for rank {} to post {}", p_.ops[b.partner].rank, p_.label(b.partner)));
        // Point the wait-for edge away from this stream: at the partner, or when the partner
        // stands behind this op on its own stream, at the member that waits for it.
        OpId target = b.partner == kNoOp ? kNoOp
                      : p_.ops[b.partner].stream == op.stream ? b.member : b.partner;
        return {target, why};
      }
      if (b.member != kNoOp && b.member != id && b.partner != kNoOp)
        return {b.partner, fmt::format("waits with its batch group, which completes as one (NVIDIA/nccl#1279): "
                                       "{} waits for rank {} to post {}",
                                       p_.label(b.member), p_.ops[b.partner].rank, p_.label(b.partner))};
      if (b.member != kNoOp && b.member != id)
        return {kNoOp, fmt::format("waits with its batch group, which completes as one (NVIDIA/nccl#1279): {} waits "
                                   "for a message rank {} never sends or receives",
                                   p_.label(b.member), p_.ops[b.member].peer())};
    }
    if (op.kind == OpKind::kRecv) {
      if (op.match() == kNoOp)
        return {kNoOp, op.peer() >= 0 ? fmt::format("waits for a message rank {} never sends", op.peer())
                                    : std::string("waits for a message no rank sends")};
      return {op.match(), fmt::format("waits for {} on rank {} to send", p_.label(op.match()), op.peer())};
    }
    if (op.kind == OpKind::kSend) {
      if (op.match() == kNoOp)
        return {kNoOp, op.peer() >= 0 ? fmt::format("waits for a receive rank {} never posts", op.peer())
                                    : op.skips() ? fmt::format("waits for a receive no rank posts (stage {} is out of range or "
                                                               "in another pipeline)", op.peer_stage())
                                                 : std::string("waits for a receive no rank posts (its stage has no next or previous stage)")};
      if (p_.semantics.kind == Semantics::kBuffered) {
        const Channel& ch = p_.channels[op.channel()];
        OpId oldest = static_cast<int64_t>(ch.recvs.size()) > received_[op.channel()] ? ch.recvs[received_[op.channel()]] : kNoOp;
        if (oldest == kNoOp) return {kNoOp, "waits for a free buffer slot that never frees"};
        return {oldest, fmt::format("waits for a free buffer slot: rank {} has not received {} yet",
                                    op.peer(), p_.label(oldest))};
      }
      return {op.match(), fmt::format("waits for rank {} to post {} (rendezvous)", op.peer(), p_.label(op.match()))};
    }
    return {kNoOp, "waits"};
  }

  // The op stream s is stuck at: its head, or for a group the first member not completed.
  OpId head_op(int32_t s) const {
    const Stream& st = p_.streams[s];
    if (head_[s] >= st.ops.size()) return kNoOp;
    OpId h = st.ops[head_[s]];
    if (p_.ops[h].group() >= 0)
      for (OpId m : p_.groups[p_.ops[h].group()])
        if (!res_.done[m]) return m;
    return h;
  }

  std::string describe_stream(int32_t s) const {
    const Stream& st = p_.streams[s];
    bool several = p_.rank_streams[st.rank].size() > 1;
    return several ? fmt::format("rank {} ({} stream)", st.rank, st.name) : fmt::format("rank {}", st.rank);
  }

  // Last few completed ops of stream s, then the stuck op.
  std::string trace(int32_t s) const {
    const Stream& st = p_.streams[s];
    size_t h = head_[s];
    size_t from = h > 6 ? h - 6 : 0;
    std::string out = fmt::format("{} trace: ", describe_stream(s));
    if (from > 0) out += fmt::format("... ({} ops done) ", from);
    for (size_t i = from; i < h; ++i) out += p_.label(st.ops[i]) + " ";
    OpId stuck = head_op(s);
    out += fmt::format("[stuck at {} {}]", p_.label(stuck), format_loc(p_.ops[stuck].loc));
    return out;
  }

  void report_deadlock() {
    // Wait-for graph between stuck stream heads: each follows its first unmet wait.
    size_t ns = p_.streams.size();
    std::vector<int32_t> next(ns, -1);
    std::vector<Wait> waits(ns);
    std::vector<int32_t> stuck;
    for (size_t s = 0; s < ns; ++s) {
      OpId h = head_op(static_cast<int32_t>(s));
      if (h == kNoOp) continue;
      stuck.push_back(static_cast<int32_t>(s));
      waits[s] = wait_of(h);
      if (waits[s].target != kNoOp) next[s] = p_.ops[waits[s].target].stream;
      res_.stuck.push_back({static_cast<int32_t>(s), h, waits[s].target, waits[s].why});
    }
    std::vector<int> color(ns, 0);  // 0 unseen, 1 on current walk, 2 finished
    std::vector<uint8_t> in_report(ns, 0);
    for (int32_t start : stuck) {
      if (color[start]) continue;
      std::vector<int32_t> walk;
      int32_t s = start;
      while (s >= 0 && color[s] == 0) {
        color[s] = 1;
        walk.push_back(s);
        s = next[s];
      }
      std::vector<int32_t> members;
      bool cycle = false;
      if (s >= 0 && color[s] == 1) {  // a new cycle: from s to the end of the walk
        cycle = true;
        auto it = std::find(walk.begin(), walk.end(), s);
        members.assign(it, walk.end());
      } else if (s < 0) {  // a chain ending at an op that waits for something never coming
        members = walk;
      }
      for (int32_t w : walk) color[w] = 2;
      if (members.empty()) continue;  // joins a hang already reported
      for (int32_t m : members) in_report[m] = 1;
      res_.findings.push_back(make_finding(members, cycle, waits));
      if (res_.cycle.empty()) {
        for (int32_t m : members) res_.cycle.push_back(head_op(m));
        res_.cycle_closed = cycle;
      }
    }
    // Streams blocked behind a reported hang.
    std::vector<std::string> also;
    for (int32_t s : stuck)
      if (!in_report[s])
        also.push_back(fmt::format("also stuck: {} at {} ({}), {}", describe_stream(s), p_.label(head_op(s)),
                                   format_loc(p_.ops[head_op(s)].loc), waits[s].why));
    if (!res_.findings.empty()) {
      auto& d = res_.findings.front().details;
      d.insert(d.end(), also.begin(), also.end());
    }
  }

  // Where the unit of P2P op `id` and its partners' units group the messages of one rank pair
  // differently (one side in one group, the other in separate calls or other groups): one line
  // per peer naming both sides' call sites. NCCL calls such a pattern undefined (NVIDIA/nccl#1279).
  std::vector<std::string> grouping_notes(OpId id, std::set<std::vector<OpId>>& seen) const {
    std::vector<std::string> out;
    if (id == kNoOp || !p_.ops[id].is_p2p()) return out;
    // A plain op whose partner is in a group: told from the group's side, which lists more.
    if (p_.ops[id].group() < 0 && p_.ops[id].match() != kNoOp && p_.ops[p_.ops[id].match()].group() >= 0)
      id = p_.ops[id].match();
    const int32_t g = p_.ops[id].group();
    const OpId* call_begin = g < 0 ? &id : p_.groups[g].data();
    const OpId* call_end = g < 0 ? &id + 1 : p_.groups[g].data() + p_.groups[g].size();
    std::vector<int32_t> peers;
    for (const OpId* m = call_begin; m != call_end; ++m)
      if (std::find(peers.begin(), peers.end(), p_.ops[*m].peer()) == peers.end()) peers.push_back(p_.ops[*m].peer());
    const int32_t rank = p_.ops[id].rank;
    auto calls = [&](const std::vector<OpId>& ops, const std::vector<int64_t>& units) {
      std::string what;
      for (size_t i = 0; i < ops.size(); ++i)
        what += fmt::format("{}{} ({})", i ? ", " : "", p_.label(ops[i]), format_loc(p_.ops[ops[i]].loc));
      if (units.size() == 1) return fmt::format("{} in {}", what, units.front() < 0 ? "one batch group" : "one plain call");
      return fmt::format("{} in {} separate calls", what, units.size());
    };
    for (int32_t peer : peers) {
      std::vector<OpId> mine, theirs;
      std::vector<int64_t> my_units{call_key(id)}, their_units;
      for (const OpId* m = call_begin; m != call_end; ++m) {
        if (p_.ops[*m].peer() != peer || p_.ops[*m].match() == kNoOp) continue;
        mine.push_back(*m);
        OpId q = p_.ops[*m].match();
        if (std::find(their_units.begin(), their_units.end(), call_key(q)) == their_units.end())
          their_units.push_back(call_key(q));
      }
      if (mine.empty()) continue;
      // Every message of the pair in the partners' calls, in their order.
      for (int64_t u : their_units) {
        if (u >= 0) {
          theirs.push_back(static_cast<OpId>(u));
          continue;
        }
        for (OpId q : p_.groups[-2 - u])
          if (p_.ops[q].peer() == rank) theirs.push_back(q);
      }
      if (their_units.size() == 1 && theirs.size() == mine.size()) continue;
      std::vector<OpId> key(mine);
      key.insert(key.end(), theirs.begin(), theirs.end());
      for (size_t i = 0, n = key.size(); i < n; ++i)
        if (p_.ops[key[i]].match() != kNoOp) key.push_back(p_.ops[key[i]].match());
      std::sort(key.begin(), key.end());
      key.erase(std::unique(key.begin(), key.end()), key.end());
      if (!seen.insert(std::move(key)).second) continue;
      out.push_back(fmt::format(
          "rank {} posts {}, while rank {} posts {}: ranks that group the same messages differently are undefined "
          "in NCCL (NVIDIA/nccl#1279), and under the default semantics a batch group completes as one",
          rank, calls(mine, my_units), peer, calls(theirs, their_units)));
    }
    return out;
  }

  Finding make_finding(const std::vector<int32_t>& members, bool cycle, const std::vector<Wait>& waits) const {
    Finding f;
    f.kind = FindingKind::kDeadlock;
    std::string sem = format_semantics(p_.semantics);
    std::string path;
    for (int32_t m : members) {
      OpId h = head_op(m);
      int rank = p_.ops[h].rank;
      if (std::find(f.ranks.begin(), f.ranks.end(), rank) == f.ranks.end()) f.ranks.push_back(rank);
      f.ops.push_back(p_.label(h));
      f.locations.push_back(p_.ops[h].loc);
      path += fmt::format("{}@{} -> ", p_.label(h), describe_stream(m));
    }
    if (cycle) {
      path += fmt::format("{}@{}", p_.label(head_op(members.front())), describe_stream(members.front()));
      f.message = fmt::format("deadlock under {} semantics: wait-for cycle {}", sem, path);
    } else {
      path.resize(path.size() - 4);
      f.message = fmt::format("hang under {} semantics: {} {}", sem, path, waits[members.back()].why);
    }
    for (int32_t m : members) {
      OpId h = head_op(m);
      f.details.push_back(fmt::format("{} is stuck at {} ({}): {}", describe_stream(m), p_.label(h),
                                      format_loc(p_.ops[h].loc), waits[m].why));
    }
    if (p_.semantics.kind == Semantics::kRendezvous) {
      std::set<std::vector<OpId>> seen;  // each mismatch once, from the first side met
      for (int32_t m : members)
        for (std::string& n : grouping_notes(head_op(m), seen)) f.details.push_back(std::move(n));
    }
    for (int32_t m : members) f.details.push_back(trace(m));
    return f;
  }

  const Program& p_;
  TimingWalk* timing_;
  bool atomic_ = p_.semantics.atomic_groups();
  mutable std::unordered_set<int64_t> seen_units_;  ///< component(): units met (unit_key)
  std::vector<uint8_t> multi_channel_;  ///< per group: its members use more than one channel
  ExecutionResult res_;
  std::vector<size_t> head_;
  std::vector<int64_t> announced_;
  std::vector<uint8_t> queued_;
  std::deque<int32_t> work_;
  std::vector<int64_t> sent_, received_;
  std::vector<uint8_t> counted_;         ///< per op: a collective counted as arrived
  std::vector<int32_t> instance_base_;   ///< per communicator: its first instance's index
  std::vector<int32_t> arrived_;         ///< per instance: members ready
  std::vector<uint32_t> dep_start_;
  std::vector<OpId> dependents_;
};

}  // namespace

ExecutionResult execute(const Program& program, TimingWalk* timing) { return Executor(program, timing).run(); }

}  // namespace sc
