#include "pipeline/build_program.h"

#include <unordered_map>

#include <fmt/format.h>

namespace sc {
namespace {

uint64_t key_of(ActionKind k, int32_t stage, int32_t mb) {
  // stage and microbatch ids are below 2^29 (check_spec_size bounds stages x microbatches).
  return (static_cast<uint64_t>(k) << 58) | (static_cast<uint64_t>(static_cast<uint32_t>(stage)) << 29) |
         static_cast<uint64_t>(static_cast<uint32_t>(mb + 1));
}

class Builder {
 public:
  Builder(const PipelineSpec& spec, BlockingModel blocking) : spec_(spec), blocking_(blocking) {}

  PipelineProgram run() {
    Program& p = out_.program;
    p.num_ranks = spec_.ranks;
    p.explicit_comms = spec_.has_comms();
    p.blocking = blocking_;
    p.semantics = spec_.p2p.semantics;
    p.link = LinkModel{spec_.p2p.latency_s, spec_.p2p.bandwidth_bytes_per_s, spec_.p2p.message_bytes};
    p.static_bytes_per_rank.assign(spec_.ranks, 0);
    // Stages with an UNSHARD are FSDP-managed: their parameters live from UNSHARD to RESHARD.
    fsdp_stage_.assign(spec_.stages, 0);
    for (const auto& row : spec_.actions)
      for (const Step& st : row)
        if (st.first.kind == ActionKind::kUnshard && st.first.stage >= 0 && st.first.stage < spec_.stages)
          fsdp_stage_[st.first.stage] = 1;
    live_params_.assign(spec_.stages, -1);
    for (int32_t s = 0; s < spec_.stages; ++s) {
      int32_t r = spec_.stage_to_rank[s];
      if (r >= 0 && r < spec_.ranks && s < static_cast<int32_t>(spec_.memory.params_bytes.size()) && !fsdp_stage_[s])
        p.static_bytes_per_rank[r] += spec_.memory.params_bytes[s];
    }
    compute_stream_.resize(spec_.ranks);
    comm_stream_.resize(spec_.ranks);
    for (int32_t r = 0; r < spec_.ranks; ++r) {
      compute_stream_[r] = p.add_stream(r, "compute");
      comm_stream_[r] = (p.explicit_comms && blocking_ == BlockingModel::kCommStream)
                            ? p.add_stream(r, "comm")
                            : compute_stream_[r];
    }
    size_t total = 0;
    for (const auto& row : spec_.actions) total += row.size();
    p.ops.reserve(total);
    index_.reserve(total * 2);
    // Pass 1: create ops (so lookups see every action, including later ones).
    for (int32_t r = 0; r < spec_.ranks; ++r)
      for (size_t i = 0; i < spec_.actions[r].size(); ++i) create_op(r, static_cast<int32_t>(i));
    p.deps.reserve(total * 2);
    p.mem.reserve(total * 2);
    // Pass 2: wire inputs and memory effects, op by op (deps of an op must be added together).
    wire_all();
    p.match_channels();
    return std::move(out_);
  }

 private:
  void create_op(int32_t rank, int32_t step_index) {
    const Step& st = spec_.actions[rank][step_index];
    Program& p = out_.program;
    Op op;
    op.rank = rank;
    op.step = step_index;
    op.loc = st.loc;
    op.actions[0] = st.first;
    op.num_actions = 1;
    ActionKind k = st.first.kind;
    if (st.second) {
      op.actions[1] = *st.second;
      op.num_actions = 2;
    }
    if (is_compute(k)) {
      op.kind = OpKind::kCompute;
      op.stream = compute_stream_[rank];
      op.duration_s = cost(st.first) + (st.second ? cost(*st.second) : 0.0);
    } else if (is_p2p(k)) {
      op.kind = is_send(k) ? OpKind::kSend : OpKind::kRecv;
      op.stream = comm_stream_[rank];
      op.bytes = spec_.p2p.message_bytes;
    } else {
      op.kind = OpKind::kMarker;
      op.stream = compute_stream_[rank];
    }
    OpId id = p.add_op(op);
    for (int part = 0; part < op.num_actions; ++part) {
      const Action& a = op.actions[part];
      index_.try_emplace(key_of(a.kind, a.stage, a.microbatch), id);
    }
  }

  double cost(const Action& a) const {
    const Costs& c = spec_.costs;
    size_t s = static_cast<size_t>(a.stage);
    auto at = [&](const std::vector<double>& v) { return s < v.size() ? v[s] : 0.0; };
    switch (a.kind) {
      case ActionKind::kF: return at(c.f_s);
      case ActionKind::kI: return at(c.i_s);
      case ActionKind::kW: return at(c.w_s);
      case ActionKind::kB: return at(c.b_s);
      default: return 0.0;
    }
  }

  OpId find(ActionKind k, int32_t stage, int32_t mb) const {
    auto it = index_.find(key_of(k, stage, mb));
    return it == index_.end() ? kNoOp : it->second;
  }

  int32_t rank_of_stage(int32_t stage) const {
    if (stage < 0 || stage >= spec_.stages) return -1;
    return spec_.stage_to_rank[stage];
  }

  void causality(OpId consumer, std::string message, std::vector<int> ranks, OpId other = kNoOp) {
    const Program& p = out_.program;
    Finding f;
    f.kind = FindingKind::kCausality;
    f.message = std::move(message);
    f.ranks = std::move(ranks);
    f.ops.push_back(p.label(consumer));
    f.locations.push_back(p.ops[consumer].loc);
    if (other != kNoOp) {
      f.ops.push_back(p.label(other));
      f.locations.push_back(p.ops[other].loc);
    }
    out_.causality.push_back(std::move(f));
  }

  // The producers of a compute action's input (one or two), each an action that must run first.
  std::vector<Action> inputs_of(const Action& a) const {
    std::vector<Action> in;
    switch (a.kind) {
      case ActionKind::kF:
        if (!spec_.is_first_stage(a.stage)) in.push_back({ActionKind::kF, a.stage - 1, a.microbatch});
        break;
      case ActionKind::kI:
      case ActionKind::kB:
        in.push_back({ActionKind::kF, a.stage, a.microbatch});
        if (!spec_.is_last_stage(a.stage)) in.push_back({ActionKind::kB, a.stage + 1, a.microbatch});  // I or B
        break;
      case ActionKind::kW:
        in.push_back({ActionKind::kI, a.stage, a.microbatch});
        break;
      default: break;
    }
    return in;
  }

  // Finds the op producing `need` (for a backward input: the I or B of that stage).
  OpId producer(const Action& need) const {
    if (need.kind == ActionKind::kB) {
      OpId b = find(ActionKind::kB, need.stage, need.microbatch);
      return b != kNoOp ? b : find(ActionKind::kI, need.stage, need.microbatch);
    }
    if (need.kind == ActionKind::kI) {  // W's input: the I (or a B, which structure reports)
      return find(ActionKind::kI, need.stage, need.microbatch);
    }
    return find(need.kind, need.stage, need.microbatch);
  }

  void wire_all() {
    Program& p = out_.program;
    for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
      // Deps must be appended while `id` is the op whose range ends the deps array.
      p.ops[id].dep_begin = p.ops[id].dep_end = static_cast<uint32_t>(p.deps.size());
      p.ops[id].mem_begin = p.ops[id].mem_end = static_cast<uint32_t>(p.mem.size());
      p.ops[id].use_begin = p.ops[id].use_end = static_cast<uint32_t>(p.uses.size());
      const Op op = p.ops[id];
      if (op.kind == OpKind::kCompute) {
        for (int part = 0; part < op.num_actions; ++part) wire_compute(id, op.actions[part]);
        for (int part = 0; part < op.num_actions; ++part) add_memory(id, op.actions[part]);
        for (int part = 0; part < op.num_actions; ++part) use_params(id, op.actions[part]);
      } else if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
        wire_p2p(id, op.actions[0]);
      } else if (op.kind == OpKind::kMarker) {
        gather_or_free(id, op.actions[0]);
      }
    }
  }

  void wire_compute(OpId id, const Action& a) {
    Program& p = out_.program;
    const Op& op = p.ops[id];
    for (const Action& need : inputs_of(a)) {
      OpId src = producer(need);
      if (src == kNoOp) continue;  // missing action: reported by the structure pass
      const Op& so = p.ops[src];
      std::string what = format_action(a);
      if (so.rank == op.rank) {
        if (src == id) {
          causality(id, fmt::format("{} runs together with its own input {} in one overlapped step",
                                    what, p.label(src)), {op.rank});
        } else if (so.step > op.step) {
          causality(id, fmt::format("{} on rank {} runs before its input {}, which comes later in the "
                                    "same rank's list", what, op.rank, p.label(src)), {op.rank}, src);
        } else if (so.stream != op.stream) {
          p.add_dep(id, Dep{src, DepKind::kLocal});
        }
        continue;
      }
      if (!p.explicit_comms) {
        p.add_dep(id, Dep{src, DepKind::kTransfer});
        continue;
      }
      // Explicit communication: the input must arrive through this rank's RECV.
      ActionKind rk = a.kind == ActionKind::kF ? ActionKind::kRecvF : ActionKind::kRecvB;
      OpId recv = find(rk, a.stage, a.microbatch);
      std::string recv_name = format_action(Action{rk, a.stage, a.microbatch});
      if (recv == kNoOp || p.ops[recv].rank != op.rank) {
        causality(id, fmt::format("{} on rank {} needs {} from rank {}, but rank {} never receives it "
                                  "(no {})", what, op.rank, p.label(src), so.rank, op.rank, recv_name),
                  {op.rank, so.rank}, src);
      } else if (p.ops[recv].step > op.step) {
        causality(id, fmt::format("{} on rank {} runs before {} delivers its input from rank {}", what,
                                  op.rank, recv_name, so.rank), {op.rank}, recv);
      } else {
        p.add_dep(id, Dep{recv, DepKind::kLocal});
      }
    }
  }

  void wire_p2p(OpId id, const Action& a) {
    Program& p = out_.program;
    Op& op = p.ops[id];
    bool forward = a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF;
    bool send = is_send(a.kind);
    // The peer stage: forward data flows s -> s+1, gradients s -> s-1.
    int32_t peer_stage = forward ? (send ? a.stage + 1 : a.stage - 1) : (send ? a.stage - 1 : a.stage + 1);
    // Data flows only within a pipeline: toward the next stage (forward) or the previous one.
    bool to_next = peer_stage > a.stage;
    bool no_peer = to_next ? spec_.is_last_stage(a.stage) : spec_.is_first_stage(a.stage);
    int32_t peer = no_peer ? -1 : rank_of_stage(peer_stage);
    if (peer < 0) {
      causality(id, fmt::format("{} on rank {} has no peer: stage {} {} no {} stage", format_action(a), op.rank,
                                a.stage, to_next ? "is the last of its pipeline, with" : "is the first of its pipeline, with",
                                to_next ? "next" : "previous"), {op.rank});
      return;
    }
    op.peer = peer;
    int32_t ch = send ? p.channel_for(op.rank, peer) : p.channel_for(peer, op.rank);
    op.channel = ch;
    if (send) {
      p.channels[ch].sends.push_back(id);
      // The data sent must exist: SEND_F(s) after F(s), SEND_B(s) after I(s) or B(s).
      Action need = forward ? Action{ActionKind::kF, a.stage, a.microbatch}
                            : Action{ActionKind::kB, a.stage, a.microbatch};
      OpId src = producer(need);
      if (src == kNoOp || p.ops[src].rank != op.rank) {
        causality(id, fmt::format("{} on rank {} sends data that rank {} never computes (no {})",
                                  format_action(a), op.rank, op.rank,
                                  format_action(forward ? need : Action{ActionKind::kI, a.stage, a.microbatch})),
                  {op.rank});
      } else if (p.ops[src].step > op.step) {
        causality(id, fmt::format("{} on rank {} sends before {} computes the data", format_action(a),
                                  op.rank, p.label(src)), {op.rank}, src);
      } else if (p.ops[src].stream != op.stream) {
        p.add_dep(id, Dep{src, DepKind::kLocal});
      }
    } else {
      p.channels[ch].recvs.push_back(id);
    }
  }

  void add_memory(OpId id, const Action& a) {
    Program& p = out_.program;
    const MemorySpec& m = spec_.memory;
    size_t s = static_cast<size_t>(a.stage);
    int64_t act = s < m.activation_bytes.size() ? m.activation_bytes[s] : 0;
    int64_t wg = s < m.weight_grad_bytes.size() ? m.weight_grad_bytes[s] : 0;
    int32_t rank = p.ops[id].rank;
    switch (a.kind) {
      case ActionKind::kF:
        p.add_mem(id, MemEffect{buffer(rank, "act", a, act), act, false});
        break;
      case ActionKind::kI:
        p.add_mem(id, MemEffect{buffer(rank, "act", a, act), -act, true});
        p.add_mem(id, MemEffect{buffer(rank, "wgrad", a, wg), wg, true});
        break;
      case ActionKind::kW:
        p.add_mem(id, MemEffect{buffer(rank, "wgrad", a, wg), -wg, true});
        break;
      case ActionKind::kB:
        p.add_mem(id, MemEffect{buffer(rank, "act", a, act), -act, true});
        break;
      default: break;
    }
  }

  /// UNSHARD allocates a new instance of the stage's unsharded parameters (params_bytes, at
  /// the marker's start); RESHARD frees the live one. Ops are wired rank by rank in list order,
  /// so `live_params_` follows each rank's list. Double UNSHARDs and RESHARDs of sharded
  /// parameters are the residency pass's findings; here they add no effect.
  void gather_or_free(OpId id, const Action& a) {
    Program& p = out_.program;
    if (a.stage < 0 || a.stage >= spec_.stages) return;
    const size_t s = static_cast<size_t>(a.stage);
    const int64_t bytes = s < spec_.memory.params_bytes.size() ? spec_.memory.params_bytes[s] : 0;
    int32_t& live = live_params_[s];
    if (bytes <= 0) return;  // nothing to gather: the residency pass still checks the order
    if (a.kind == ActionKind::kUnshard && live < 0) {
      live = static_cast<int32_t>(p.buffers.size());
      Buffer b{p.ops[id].rank, a.stage, -1, "param", bytes};
      b.name = p.add_name(fmt::format("param stage {} #{}", a.stage, gathers_[a.stage]++));
      p.buffers.push_back(b);
      p.add_mem(id, MemEffect{live, bytes, false});
    } else if (a.kind == ActionKind::kReshard && live >= 0) {
      p.add_mem(id, MemEffect{live, -bytes, false});
      live = -1;
    }
  }

  /// A compute action of an FSDP-managed stage reads its live unsharded parameters.
  void use_params(OpId id, const Action& a) {
    if (a.stage < 0 || a.stage >= spec_.stages || !fsdp_stage_[a.stage]) return;
    if (live_params_[a.stage] >= 0) out_.program.add_use(id, live_params_[a.stage]);
  }

  int32_t buffer(int32_t rank, const char* kind, const Action& a, int64_t bytes) {
    uint64_t k = key_of(kind[0] == 'a' ? ActionKind::kF : ActionKind::kW, a.stage, a.microbatch);
    auto [it, inserted] = buffers_.try_emplace(k, static_cast<int32_t>(out_.program.buffers.size()));
    if (inserted) out_.program.buffers.push_back(Buffer{rank, a.stage, a.microbatch, kind, bytes});
    return it->second;
  }

  const PipelineSpec& spec_;
  BlockingModel blocking_;
  PipelineProgram out_;
  std::vector<int32_t> compute_stream_, comm_stream_;
  std::unordered_map<uint64_t, OpId> index_;
  std::unordered_map<uint64_t, int32_t> buffers_;
  std::vector<uint8_t> fsdp_stage_;     ///< per stage: 1 when some rank UNSHARDs it
  std::vector<int32_t> live_params_;    ///< per stage: its live "param" buffer, or -1
  std::unordered_map<int32_t, int> gathers_;  ///< per stage: UNSHARDs so far
};

}  // namespace

PipelineProgram build_program(const PipelineSpec& spec, BlockingModel blocking) {
  return Builder(spec, blocking).run();
}

}  // namespace sc
