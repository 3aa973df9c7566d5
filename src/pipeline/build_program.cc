#include "pipeline/build_program.h"
#include "support/huge_pages.h"

#include <algorithm>
#include <string_view>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "numerics/analysis.h"
#include "pipeline/action_key_map.h"

namespace sc {
namespace {

ActionKey key_of(ActionKind k, int32_t stage, int32_t mb) { return {k, stage, mb}; }

class Builder {
 public:
  Builder(const PipelineSpec& spec, BlockingModel blocking, std::vector<std::vector<Step>>* release)
      : spec_(spec), blocking_(blocking), release_(release) {}

  PipelineProgram run() {
    Program& p = out_.program;
    comp_ = spec_.composition ? &*spec_.composition : nullptr;
    dp_ = comp_ ? comp_->data_parallel() : 1;
    const int32_t world = spec_.ranks * dp_;
    p.num_ranks = world;
    p.explicit_comms = spec_.has_comms();
    p.blocking = blocking_;
    p.semantics = spec_.p2p.semantics;
    p.link = LinkModel{spec_.p2p.latency_s, spec_.p2p.bandwidth_bytes_per_s, spec_.p2p.message_bytes};
    p.static_bytes_per_rank.assign(world, 0);
    // Each pipeline rank's own action list (a CSV's row), for findings that blame the rank.
    if (!spec_.locs.rank_lists.empty()) {
      p.rank_locs.assign(world, SourceLoc{});
      p.rank_loc_labels.assign(world, "");
      for (int32_t r = 0; r < spec_.ranks && r < static_cast<int32_t>(spec_.locs.rank_lists.size()); ++r)
        for (int32_t d = 0; d < dp_; ++d) {
          p.rank_locs[r * dp_ + d] = spec_.locs.rank_lists[r];
          p.rank_loc_labels[r * dp_ + d] = fmt::format("rank {}'s action list", r);
        }
    }
    p.max_relative_error = spec_.max_relative_error;
    p.max_bias = spec_.max_bias;
    p.deterministic = spec_.deterministic;
    // Stages with an UNSHARD are FSDP-managed: their parameters live from UNSHARD to RESHARD.
    fsdp_stage_.assign(spec_.stages, 0);
    for (const auto& row : spec_.actions)
      for (const Step& st : row)
        if (st.first.kind == ActionKind::kUnshard && st.first.stage >= 0 && st.first.stage < spec_.stages)
          fsdp_stage_[st.first.stage] = 1;
    live_params_.assign(static_cast<size_t>(spec_.stages) * dp_, -1);
    live_gather_.assign(static_cast<size_t>(spec_.stages) * dp_, kNoOp);
    const bool sharded = comp_ && comp_->fsdp;
    for (int32_t s = 0; s < spec_.stages; ++s) {
      int32_t r = spec_.stage_to_rank[s];
      if (r < 0 || r >= spec_.ranks || s >= static_cast<int32_t>(spec_.memory.params_bytes.size())) continue;
      // FSDP-managed stages keep only their shard resident (composed specs) or nothing.
      const int64_t resident = !fsdp_stage_[s] ? spec_.memory.params_bytes[s]
                               : sharded        ? spec_.memory.params_bytes[s] / comp_->dp_shard
                                                : 0;
      const int64_t states = s < static_cast<int32_t>(spec_.memory.state_bytes.size()) ? spec_.memory.state_bytes[s] : 0;
      for (int32_t d = 0; d < dp_; ++d) p.static_bytes_per_rank[r * dp_ + d] += resident + states;
    }
    compute_stream_.resize(world);
    comm_stream_.resize(world);
    gather_stream_.resize(world);
    reduce_stream_.resize(world);
    for (int32_t g = 0; g < world; ++g) {
      compute_stream_[g] = p.add_stream(g, "compute");
      const bool own = blocking_ == BlockingModel::kCommStream;
      comm_stream_[g] = (p.explicit_comms && own) ? p.add_stream(g, "comm") : compute_stream_[g];
      // Without overlap_comm (DeepSpeed) the data-parallel collectives run on the compute stream.
      const bool overlap = !comp_ || comp_->overlap_comm;
      gather_stream_[g] = (sharded && own && overlap) ? p.add_stream(g, "all-gather") : compute_stream_[g];
      reduce_stream_[g] = (comp_ && own && overlap) ? p.add_stream(g, "reduce") : compute_stream_[g];
      // record_stream: frees take effect on their own lane, when the collectives queued at the
      // free have finished; nothing waits for them.
      if (sharded && comp_->record_stream) alloc_stream_.push_back(p.add_stream(g, "allocator"));
    }
    if (comp_) add_communicators();
    size_t total = 0;
    for (const auto& row : spec_.actions) total += row.size();
    reserve_huge(p.ops, total * dp_ + world);
    // Each replica's maps hold every pipeline rank's actions and buffers of that replica.
    index_.assign(dp_, ActionKeyMap<Placed>(spec_.stages, spec_.microbatches, total + 16));
    skip_recvs_.assign(dp_, {});
    keeps_ = !spec_.memory.kept_output_bytes.empty() || !spec_.memory.kept_input_grad_bytes.empty();
    buffers_.assign(dp_, ActionKeyMap<int32_t>(spec_.stages, spec_.microbatches, total + 16));
    // Pass 1: create ops (so lookups see every action, including later ones), rank by rank.
    for (int32_t g = 0; g < world; ++g) {
      cur_ = g % dp_;
      const int32_t r = g / dp_;
      last_backward_.clear();
      last_reshard_ = kNoOp;
      pending_init_ = kNoOp;
      // A rank's steps go to its compute and comm streams: room for all of them in each (only
      // what is written is touched), where growing by doubling copied each list about twice.
      for (int32_t s : {compute_stream_[g], comm_stream_[g]})
        p.streams[s].ops.reserve(p.streams[s].ops.size() + spec_.actions[r].size());
      for (size_t i = 0; i < spec_.actions[r].size(); ++i) create_op(g, r, static_cast<int32_t>(i));
      if (comp_) add_optimizer(g);
    }
    // About two deps per op, and memory effects on compute ops only (SEND/RECV are most ops
    // of a comms CSV and have none): reserving for every op cost 48 bytes an op.
    size_t computes = 0;
    for (const auto& row : spec_.actions)
      for (const Step& st : row) computes += is_compute(st.first.kind);
    // Every op is created: the wiring reads the ops, never the action lists.
    if (release_) std::vector<std::vector<Step>>().swap(*release_);
    reserve_huge(p.deps, total * dp_ * 2);
    reserve_huge(p.mem, computes * dp_ * 2 + 16);
    // At most two buffers a compute op (an activation, a weight gradient): room reserved is not
    // touched, where growing by doubling wrote about twice the final array.
    reserve_huge(p.buffers, p.buffers.size() + computes * dp_ * 2 + 16);
    // Pass 2: wire inputs and memory effects, op by op (deps of an op must be added together).
    wire_all();
    // The reservations are upper bounds (on the largest comms CSV a third of the deps and a
    // quarter of the buffers are used). Given back now, their slack and the parsed steps' freed
    // memory take the passes' arrays instead of fresh pages: verify's peak went from 673 MB to
    // 592 MB resident there, for 42 MB copied.
    p.deps.shrink_to_fit();
    p.mem.shrink_to_fit();
    p.buffers.shrink_to_fit();
    p.match_channels();
    if (comp_ && dp_ > 1) set_rank_images();
    return std::move(out_);
  }

 private:
  void create_op(int32_t rank, int32_t prank, int32_t step_index) {
    const Step& st = spec_.actions[prank][step_index];
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
    if (st.peer_stage >= 0 && is_p2p(k)) op.set_skip_stage(st.peer_stage);  // a skip connection
    if (comp_ && (k == ActionKind::kReduceGrad || (k == ActionKind::kUnshard && comp_->fsdp))) {
      lower_collective_marker(op, prank);
      return;
    }
    if (is_collective(k)) {
      lower_group_collective(op, st, prank);
      return;
    }
    // Lazy communicator creation. An unbatched P2P uses its rank pair's communicator, created
    // by both ranks before their first P2P with each other. A batched group (batch_isend_irecv,
    // inside ncclGroupStart) uses the whole pipeline group's communicator, created by every rank
    // of the pipeline together before the first batched group of each: ProcessGroupNCCL's
    // pointToPoint keys a batched P2P by the device ("treat it like a collective when selecting
    // communicator") and a single one by the rank pair (getKeySendRecv).
    // A group of one op (`(0SEND_F0)BATCH`) is batched too: batch_isend_irecv with one op still
    // runs inside ncclGroupStart and picks the group's communicator.
    if (spec_.p2p.lazy_comm_init && is_p2p(k) && pending_group_.empty()) {
      if (st.is_batched()) {
        init_pipeline_group_before(op);
      } else {
        init_pair_before(op, p2p_peer(op).rank);
      }
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
    // A SEND/RECV of several tensors: one op a tensor, consecutive ids in the order listed, each
    // its own message on the channel (the action's key finds the first).
    const int32_t tensors = op.is_p2p() ? std::max<int32_t>(1, st.tensors) : 1;
    if (op.is_p2p() && (tensors > 1 || st.tensor_names >= 0)) {
      const std::vector<std::string>& names = tensor_name_list(st.tensor_names);
      for (int32_t t = 0; t < tensors; ++t) {
        const OpId tid = t == 0 ? id : p.add_op(op);
        p.set_tensor(tid, BoundaryTensor{t, tensors, t < static_cast<int32_t>(names.size()) ? tensor_name(names[t]) : -1});
      }
    }
    // The host thread that created a communicator issues nothing until the creation completes.
    if (op.kind == OpKind::kCompute && pending_init_ != kNoOp) {
      if (p.ops[pending_init_].stream != op.stream) defer_dep(id, pending_init_);
      pending_init_ = kNoOp;
    }
    // A skipping receive is found by the compute it feeds through skip_recvs_ (its key is its
    // neighbour's); a skipping send by nothing.
    const bool skips = st.peer_stage >= 0 && op.is_p2p();
    if (skips && op.kind == OpKind::kRecv) skip_recvs_[cur_][key_of(op.actions[0])].push_back(placed(id));
    for (int part = 0; part < op.num_actions && !skips; ++part) {
      const Action& a = op.actions[part];
      index_[cur_].try_emplace(key_of(a.kind, a.stage, a.microbatch), placed(id));
      if (a.kind == ActionKind::kB || a.kind == ActionKind::kW || a.kind == ActionKind::kI)
        last_backward_[a.stage] = id;
    }
    if (op.kind == OpKind::kCompute && comp_ && comp_->moe) add_all_to_alls(id);
    if (k == ActionKind::kReshard && comp_ && comp_->fsdp) {
      last_reshard_ = id;
      if (comp_->record_stream) add_release(id, prank);
    }
    // Batched P2P groups: runs of steps joined by batched_with_next, and a BATCH group of one
    // op, which is a group too (its communicator under lazy creation, in the wire-up below).
    if (st.is_batched() || !pending_group_.empty())
      for (int32_t t = 0; t < tensors; ++t) pending_group_.push_back(id + t);
    if (!st.batched_with_next && !pending_group_.empty()) {
      p.add_group(std::move(pending_group_));
      pending_group_.clear();
    }
  }

  /// The Program::names index of tensor name `name`, added once.
  int32_t tensor_name(const std::string& name) {
    auto [it, added] = tensor_names_.try_emplace(name, -1);
    if (added) it->second = out_.program.add_name(name);
    return it->second;
  }

  /// The peer of a P2P op: forward data flows to a later stage, gradients to an earlier one,
  /// the neighbour s + 1 or s - 1 unless the op skips to another stage (Op::peer_stage), only
  /// within a pipeline. `rank` is the peer stage's global rank, -1 when there is none (the stage
  /// ends (`to_next`) or starts its pipeline, or the stage a skip names is out of range or in
  /// another pipeline: the structure pass reports those).
  struct Peer {
    bool to_next = false;
    int32_t rank = -1;
  };
  Peer p2p_peer(const Op& op) const {
    const Action& a = op.actions[0];
    const int32_t peer_stage = op.peer_stage();
    Peer peer;
    peer.to_next = peer_stage > a.stage;
    if (op.skips()) {
      if (peer_stage >= 0 && peer_stage < spec_.stages && spec_.same_pipeline(a.stage, peer_stage))
        peer.rank = rank_of_stage(peer_stage);
    } else if (!(peer.to_next ? spec_.is_last_stage(a.stage) : spec_.is_first_stage(a.stage))) {
      peer.rank = rank_of_stage(peer_stage);
    }
    return peer;
  }

  /// Creates, once per rank and peer, the pair communicator's init op on the rank's comm stream
  /// (labelled and located as the P2P that needs it).
  void init_pair_before(const Op& p2p, int32_t peer) {
    Program& p = out_.program;
    if (peer < 0 || peer == p2p.rank) return;
    const int32_t a = std::min(p2p.rank, peer), b = std::max(p2p.rank, peer);
    const uint64_t key = (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
    if (!inited_.insert(key ^ (static_cast<uint64_t>(p2p.rank == a) << 63)).second) return;
    auto [it, created] = pair_comm_.try_emplace(key, -1);
    if (created) it->second = p.add_communicator(fmt::format("p2p {}-{}", a, b), {a, b});
    add_comm_init(p2p, it->second, fmt::format("init p2p {}-{}", a, b));
  }

  /// Adds the creation of communicator `comm` on `user`'s rank, on its comm stream, labelled
  /// `label` and located as the op that needs it; it costs one link latency, and the next
  /// compute op waits for it (pending_init_). With `stream` given (a collective's own stream,
  /// which orders the rank's later ops itself) it goes there and nothing else waits for it.
  void add_comm_init(const Op& user, int32_t comm, std::string label, int32_t stream = -1) {
    Program& p = out_.program;
    Op op;
    op.kind = OpKind::kCollective;
    op.collective = CollectiveKind::kCommInit;
    op.set_comm(comm);
    op.rank = user.rank;
    op.step = user.step;
    op.loc = user.loc;
    op.stream = stream >= 0 ? stream : comm_stream_[user.rank];
    op.duration_s = spec_.p2p.latency_s;
    op.set_name(p.add_name(std::move(label)));
    const OpId id = p.add_op(op);
    if (stream < 0) pending_init_ = id;
  }

  /// Creates, once per rank, the communicator of the rank's whole pipeline group (its pipeline
  /// ranks with its data-parallel coordinates) on the rank's comm stream, labelled and located
  /// as the batched group that needs it. Every member must create it before any completes.
  void init_pipeline_group_before(const Op& p2p) {
    Program& p = out_.program;
    if (!group_inited_.insert(p2p.rank).second) return;
    auto [it, created] = pipeline_comm_.try_emplace(cur_, -1);
    if (created) {
      std::vector<int32_t> members;
      for (int32_t r = 0; r < spec_.ranks; ++r) members.push_back(r * dp_ + cur_);
      it->second = p.add_communicator(dp_ > 1 ? fmt::format("pipeline {}", cur_) : "pipeline", std::move(members));
    }
    add_comm_init(p2p, it->second, dp_ > 1 ? fmt::format("init pipeline group {}", cur_) : "init pipeline group");
  }

  /// A collective action (`ALL_REDUCE@eval`, ...): one kCollective op on the rank's compute
  /// stream (a synchronous c10d collective makes the current stream wait for it), over the
  /// group's communicator of this data-parallel replica, created once per (group, replica);
  /// with lazy communicator creation its init comes first on the same stream (every member
  /// joins it, as NCCL creates a group's communicator at its first collective). Time: the ring
  /// model on the spec's link (p2p latency and bandwidth): latency + f·(n−1)/n·bytes/bandwidth,
  /// f = 2 for all-reduce, 1 for all-gather and reduce-scatter (Thakur et al. 2005); a broadcast
  /// latency + bytes/bandwidth (pipelined); a barrier the latency alone; nothing on a group of
  /// one. A group the spec does not know, or one without the rank, gets no op (the structure
  /// pass reports it).
  void lower_group_collective(Op op, const Step& st, int32_t prank) {
    Program& p = out_.program;
    auto [known, added] = groups_.try_emplace(st.group);
    if (added) known->second = spec_.collective_group(st.group);  // resolved once per group
    const std::optional<CollectiveGroup>& g = known->second;
    if (!g || !std::binary_search(g->ranks.begin(), g->ranks.end(), prank)) return;
    auto [it, created] = group_comm_.try_emplace({st.group, cur_}, -1);
    if (created) {
      std::vector<int32_t> members;
      for (int32_t r : g->ranks) members.push_back(r * dp_ + cur_);
      const std::string& name = group_name(st.group);
      it->second = p.add_communicator(dp_ > 1 ? fmt::format("group {} dp{}", name, cur_) : fmt::format("group {}", name),
                                      std::move(members));
    }
    const int32_t comm = it->second;
    op.stream = compute_stream_[op.rank];
    if (spec_.p2p.lazy_comm_init && collective_inited_.insert({comm, op.rank}).second)
      add_comm_init(op, comm, fmt::format("init group {}", group_name(st.group)), op.stream);
    const ActionKind k = st.first.kind;
    const CollectiveKind kind = k == ActionKind::kAllReduce       ? CollectiveKind::kAllReduce
                                : k == ActionKind::kAllGather     ? CollectiveKind::kAllGather
                                : k == ActionKind::kReduceScatter ? CollectiveKind::kReduceScatter
                                : k == ActionKind::kBroadcast     ? CollectiveKind::kBroadcast
                                : k == ActionKind::kAllToAll      ? CollectiveKind::kAllToAll
                                                                  : CollectiveKind::kBarrier;
    const int32_t n = static_cast<int32_t>(g->ranks.size());
    const int64_t bytes = kind == CollectiveKind::kBarrier ? 0 : collective_bytes(st).value_or(g->bytes);
    const double share = kind == CollectiveKind::kBroadcast ? 1.0 : static_cast<double>(n - 1) / n;
    const double f = kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
    op.kind = OpKind::kCollective;
    op.collective = kind;
    op.set_comm(comm);
    op.set_arith(-1);
    op.bytes = bytes;
    const double bw = spec_.p2p.bandwidth_bytes_per_s;
    const double wire_s = bytes > 0 && std::isfinite(bw) && bw > 0 ? f * share * static_cast<double>(bytes) / bw : 0.0;
    op.duration_s = n <= 1 ? 0.0 : spec_.p2p.latency_s + wire_s;
    // Named without the step's size (`ALL_TO_ALL@ep`, not `ALL_TO_ALL@ep:3MiB`): the agreement
    // check compares names and sizes on their own, and a rank that states its group's size
    // issues the same collective as one that leaves it implicit.
    op.set_name(p.add_name(fmt::format("{}@{}", kind_token(k), group_name(st.group))));
    p.add_op(op);
  }

  // --- Composed specs (PipelineSpec::composition) ---

  /// Every data-parallel replica of a pipeline rank runs the same lists with the same
  /// communicators up to renumbering the replicas, and its ops and buffers were created in one
  /// contiguous block each: replica d > 0 of pipeline rank r is an image of replica 0.
  void set_rank_images() {
    Program& p = out_.program;
    const int32_t world = p.num_ranks;
    std::vector<int64_t> first_op(world, -1), ops(world, 0), first_buf(world, -1), bufs(world, 0);
    for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
      const int32_t g = p.ops[id].rank;
      if (first_op[g] < 0) first_op[g] = id;
      ++ops[g];
    }
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const int32_t g = p.buffers[b].rank;
      if (first_buf[g] < 0) first_buf[g] = static_cast<int64_t>(b);
      ++bufs[g];
    }
    std::vector<RankImage> images(world);
    for (int32_t g = 0; g < world; ++g) {
      const int32_t rep = g - g % dp_;
      if (rep == g) continue;
      if (ops[g] != ops[rep] || bufs[g] != bufs[rep] || first_op[g] < 0) return;  // not the same shape: compute all
      images[g] = RankImage{rep, static_cast<int32_t>(first_op[g] - first_op[rep]),
                            static_cast<int32_t>(bufs[g] ? first_buf[g] - first_buf[rep] : 0)};
    }
    p.rank_images = std::move(images);
  }

  /// The communicators of the mesh: per (pipeline rank, replicate index) its shard group, per
  /// (pipeline rank, shard index) its replicate group (or, without FSDP, per pipeline rank its
  /// data-parallel group), per replica the tied-embedding pair.
  void add_communicators() {
    Program& p = out_.program;
    const int32_t R = comp_->dp_replicate, S = comp_->dp_shard;
    shard_comm_.assign(static_cast<size_t>(spec_.ranks) * R, -1);
    replicate_comm_.assign(static_cast<size_t>(spec_.ranks) * S, -1);
    for (int32_t r = 0; r < spec_.ranks; ++r) {
      if (comp_->fsdp) {
        for (int32_t rep = 0; rep < R; ++rep) {
          std::vector<int32_t> members;
          for (int32_t k = 0; k < S; ++k) members.push_back((r * R + rep) * S + k);
          shard_comm_[r * R + rep] = p.add_communicator(fmt::format("shard pp{} dp_replicate{}", r, rep), members);
        }
        if (R > 1)
          for (int32_t k = 0; k < S; ++k) {
            std::vector<int32_t> members;
            for (int32_t rep = 0; rep < R; ++rep) members.push_back((r * R + rep) * S + k);
            replicate_comm_[r * S + k] = p.add_communicator(fmt::format("replicate pp{} dp_shard{}", r, k), members);
          }
      } else if (dp_ > 1) {  // DDP: one data-parallel group per pipeline rank
        std::vector<int32_t> members;
        for (int32_t d = 0; d < dp_; ++d) members.push_back(r * dp_ + d);
        const int32_t c = p.add_communicator(fmt::format("dp pp{}", r), members);
        for (int32_t k = 0; k < S; ++k) replicate_comm_[r * S + k] = c;
      }
    }
    tied_comm_.assign(dp_, -1);
    const int32_t first = spec_.stage_to_rank.empty() ? -1 : spec_.stage_to_rank.front();
    const int32_t last = spec_.stage_to_rank.empty() ? -1 : spec_.stage_to_rank.back();
    if (comp_->tied_embedding_bytes > 0 && first >= 0 && last >= 0 && first != last)
      for (int32_t d = 0; d < dp_; ++d)
        tied_comm_[d] = p.add_communicator(fmt::format("embedding dp{}", d), {first * dp_ + d, last * dp_ + d});
  }

  /// Ring collective time over n ranks (Thakur et al. 2005): latency + f·(n-1)/n·bytes/bandwidth,
  /// f = 2 for all-reduce, 1 otherwise. Seconds.
  double ring_s(CollectiveKind k, int64_t bytes, int32_t n) const {
    if (n <= 1) return 0.0;
    const double f = k == CollectiveKind::kAllReduce ? 2.0 : 1.0;
    return comp_->latency_s + f * (n - 1) / n * static_cast<double>(bytes) / comp_->bandwidth_bytes_per_s;
  }

  static const char* dtype_name(const std::string& d) {
    for (const char* name : {"fp32", "bf16", "fp16", "fp8"})
      if (d == name) return name;
    return "";
  }

  OpId add_collective(Op op, CollectiveKind kind, int32_t comm, int64_t bytes, const char* dtype, std::string label,
                      int32_t arith = -1) {
    Program& p = out_.program;
    op.set_arith(arith);
    op.kind = OpKind::kCollective;
    op.collective = kind;
    op.set_comm(comm);
    op.bytes = bytes;
    op.dtype = dtype;
    op.duration_s = ring_s(kind, bytes, static_cast<int32_t>(p.comms[comm].ranks.size()));
    op.set_name(p.add_name(std::move(label)));
    return p.add_op(op);
  }

  /// UNSHARD: an all-gather of the stage's parameters over the shard group, on the all-gather
  /// stream. REDUCE_GRAD: a reduce-scatter over the shard group (FSDP), then an all-reduce over
  /// the replicate or data-parallel group, then the tied-embedding all-reduce, on the reduce
  /// stream, after the stage's last backward on this rank.
  void lower_collective_marker(Op op, int32_t prank) {
    Program& p = out_.program;
    const Action a = op.actions[0];
    const int32_t R = comp_->dp_replicate, S = comp_->dp_shard;
    const int32_t rep = (op.rank % dp_) / S, shard = op.rank % S;
    const size_t s = static_cast<size_t>(a.stage);
    const int64_t params = s < spec_.memory.params_bytes.size() ? spec_.memory.params_bytes[s] : 0;
    if (a.kind == ActionKind::kUnshard) {
      op.stream = gather_stream_[op.rank];
      // unshard_async_op: issued from the compute stream, so NCCL's stream first waits for the
      // compute work issued before it (ProcessGroupNCCL syncs its stream with the current one).
      const std::vector<OpId>& compute = p.streams[compute_stream_[op.rank]].ops;
      const OpId before = comp_->unshard_async_op && !compute.empty() ? compute.back() : kNoOp;
      OpId id = add_collective(op, CollectiveKind::kAllGather, shard_comm_[prank * R + rep], params,
                               dtype_name(comp_->param_dtype), fmt::format("AG stage {}", a.stage));
      if (before != kNoOp && op.stream != compute_stream_[op.rank]) defer_dep(id, before);
      // The host issues an UNSHARD only after the RESHARDs listed before it, and FSDP2's
      // all-gather stream waits for the free it reuses: a gather never runs ahead of them, so
      // max_active_stages bounds the gathered stages.
      if (last_reshard_ != kNoOp && last_reshard_ != before && op.stream != p.ops[last_reshard_].stream)
        defer_dep(id, last_reshard_);
      index_[cur_].try_emplace(key_of(a.kind, a.stage, a.microbatch), placed(id));
      return;
    }
    op.stream = reduce_stream_[op.rank];
    const int64_t grads = static_cast<int64_t>(static_cast<double>(params) / comp_->param_dtype_bytes * comp_->reduce_dtype_bytes);
    const char* rdtype = dtype_name(comp_->reduce_dtype);
    // The arithmetic of each reduction (docs/facts/numerics.md): FSDP2 averages in the collective (fp16 and
    // FSDP1 sum with FSDP1's divide factors); DDP divides each gradient by the group size
    // before summing; the tied-embedding all-reduce sums.
    auto arith = [&](const char* kind, int n) -> int32_t {
      CollectiveArithmetic a;
      a.where = comp_->reduce_loc.valid() ? comp_->reduce_loc : comp_->loc;
      if (std::string_view(kind) == "fsdp") {
        const auto c = numerics::fsdp_reduce_scatter(
            numerics::parse_dtype(comp_->reduce_dtype).value_or(numerics::DType::kFp32), n, comp_->fsdp2);
        a.op = numerics::op_name(c.op);
        a.pre_divide = c.pre_divide;
        a.post_divide = c.post_divide;
      } else if (std::string_view(kind) == "ddp") {
        a.pre_divide = n;
      }
      const std::string key = fmt::format("{}/{}", kind, n);
      auto [it, inserted] = arith_index_.try_emplace(key, static_cast<int32_t>(p.arithmetic.size()));
      if (inserted) p.arithmetic.push_back(a);
      return it->second;
    };
    OpId first = kNoOp;
    auto after_backward = [&](OpId id) {
      if (first != kNoOp) return;
      first = id;
      auto it = last_backward_.find(a.stage);
      if (it == last_backward_.end() || p.ops[it->second].stream == op.stream) return;
      // Overlapped reduction: starts with the last backward (wire_all copies its inputs).
      if (comp_->overlap_grad_reduce) {
        with_backward_.emplace(id, it->second);
      } else {
        defer_dep(id, it->second);
      }
    };
    if (comp_->fsdp)
      after_backward(add_collective(op, CollectiveKind::kReduceScatter, shard_comm_[prank * R + rep], grads, rdtype,
                                    fmt::format("RS stage {}", a.stage), arith("fsdp", S)));
    if (replicate_comm_[prank * S + shard] >= 0) {
      const int64_t b = comp_->fsdp ? grads / S : grads;
      const int32_t n = static_cast<int32_t>(p.comms[replicate_comm_[prank * S + shard]].ranks.size());
      const bool rs = !comp_->fsdp && comp_->reduce_scatter_only;
      after_backward(add_collective(op, rs ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                                    replicate_comm_[prank * S + shard], b, rdtype,
                                    fmt::format("{} stage {}", rs ? "RS" : "AR", a.stage),
                                    arith(comp_->fsdp ? "fsdp" : "ddp", n)));
    }
    const int32_t last_stage = spec_.stages - 1;
    if (tied_comm_[cur_] >= 0 && (a.stage == 0 || a.stage == last_stage)) {
      const int64_t b = static_cast<int64_t>(static_cast<double>(comp_->tied_embedding_bytes) / comp_->param_dtype_bytes *
                                             comp_->reduce_dtype_bytes);
      after_backward(
          add_collective(op, CollectiveKind::kAllReduce, tied_comm_[cur_], b, rdtype, "AR tied embedding", arith("sum", 2)));
    }
    if (first == kNoOp) {  // nothing to reduce (one replica, no FSDP): keep the marker
      op.kind = OpKind::kMarker;
      op.stream = compute_stream_[op.rank];
      p.add_op(op);
    }
  }

  /// record_stream (Composition::record_stream): the free of RESHARD `reshard` takes effect on
  /// the rank's allocator lane, after the RESHARD and after the last collective this rank had
  /// queued on the stage's shard communicator when it issued the free (its NCCL stream's work at
  /// the time of the free: the caching allocator reuses a block recorded on a stream only once
  /// an event recorded there at the free has completed; pytorch#147168). Created right after the
  /// RESHARD, in the rank's block of ops, so replicas stay images of each other.
  void add_release(OpId reshard, int32_t prank) {
    Program& p = out_.program;
    const Op& rs = p.ops[reshard];
    const int32_t stage = rs.actions[0].stage;
    if (stage < 0 || stage >= spec_.stages) return;
    const int32_t R = comp_->dp_replicate;
    const int32_t rep = (rs.rank % dp_) / comp_->dp_shard;
    const Communicator& c = p.comms[shard_comm_[prank * R + rep]];
    const int32_t member = c.member_index(rs.rank);
    const OpId queued = member >= 0 && !c.ops[member].empty() ? c.ops[member].back() : kNoOp;
    Op op;
    op.kind = OpKind::kMarker;
    op.rank = rs.rank;
    op.step = rs.step;
    op.loc = rs.loc;
    op.stream = alloc_stream_[rs.rank];
    op.set_name(p.add_name(fmt::format("release stage {} (record_stream)", stage)));
    const OpId id = p.add_op(op);
    defer_dep(id, reshard);
    if (queued != kNoOp) defer_dep(id, queued);
    release_of_[reshard] = id;
  }

  /// MoE layers (Composition::moe): after compute op `compute`, per MoE layer of each of its
  /// actions' stages, two all-to-alls over the rank's EP group on the compute stream (the
  /// experts need their tokens): dispatch then combine after an F, the combine's gradient then
  /// the dispatch's after an I or B. Each pair holds a receive buffer of dispatch_bytes from the
  /// start of its first to the end of its second. The action's consumers read the last
  /// all-to-all. Time: ring_s with f = 1, latency + (n-1)/n · bytes / bandwidth (a rank keeps
  /// 1/n of its buffer; docs/facts/cost-formulas.md#communication-volume-and-time AllToAll within a node).
  void add_all_to_alls(OpId compute) {
    Program& p = out_.program;
    const Op c = p.ops[compute];
    const MoeSpec& m = *comp_->moe;
    const int64_t combine = m.combine_bytes >= 0 ? m.combine_bytes : m.dispatch_bytes;
    const int32_t ep = comp_->ep, S = comp_->dp_shard;
    const int32_t g = c.rank, shard = g % S, base = g - shard;  // base: shard 0 of this replica group
    const int32_t group = shard / ep;
    auto [it, created] = ep_comm_.try_emplace(base + group * ep, -1);
    if (created) {
      std::vector<int32_t> members;
      for (int32_t j = 0; j < ep; ++j) members.push_back(base + group * ep + j);
      it->second = p.add_communicator(fmt::format("ep pp{} ranks {}-{}", g / dp_, members.front(), members.back()), members);
    }
    const int32_t comm = it->second;
    OpId last = kNoOp;
    for (int part = 0; part < c.num_actions; ++part) {
      const Action& a = c.actions[part];
      if (a.kind != ActionKind::kF && a.kind != ActionKind::kI && a.kind != ActionKind::kB) continue;
      const bool fwd = a.kind == ActionKind::kF;
      const std::string what = format_action(a);
      for (int32_t l = 0; l < m.layers_of(a.stage); ++l) {
        OpId first = kNoOp;
        for (int k = 0; k < 2; ++k) {
          const bool dispatch = fwd == (k == 0);
          Op op;
          op.rank = g;
          op.step = c.step;
          op.loc = m.loc;
          op.stream = compute_stream_[g];
          last = add_collective(op, CollectiveKind::kAllToAll, comm, dispatch ? m.dispatch_bytes : combine,
                                dtype_name(comp_->param_dtype),
                                fmt::format("A2A {}{} L{} {}", fwd ? "" : "grad ", dispatch ? "dispatch" : "combine", l, what));
          if (k == 0) first = last;
          else a2a_pair_[last] = first;
        }
      }
    }
    if (last == kNoOp) return;
    for (int part = 0; part < c.num_actions; ++part) {
      const Action& a = c.actions[part];
      if (a.kind == ActionKind::kF || a.kind == ActionKind::kI || a.kind == ActionKind::kB)
        index_[cur_].assign(key_of(a.kind, a.stage, a.microbatch), placed(last));
    }
  }

  /// The optimizer step of global rank g: on its compute stream after its last reduction.
  void add_optimizer(int32_t g) {
    Program& p = out_.program;
    const Stream& rs = p.streams[reduce_stream_[g]];
    if (rs.ops.empty() && comp_->optimizer_s <= 0) return;
    Op op;
    op.kind = OpKind::kCompute;
    op.rank = g;
    op.stream = compute_stream_[g];
    op.duration_s = comp_->optimizer_s;
    op.loc = comp_->loc;
    op.set_name(p.add_name("optimizer step"));
    OpId last_reduce = rs.ops.empty() ? kNoOp : rs.ops.back();
    OpId id = p.add_op(op);
    optimizer_ops_.insert(id);
    if (last_reduce != kNoOp && reduce_stream_[g] != compute_stream_[g]) defer_dep(id, last_reduce);
  }

  /// Records a dependency of `dst` (already created) on `src`, added when `dst` is wired.
  void defer_dep(OpId dst, OpId src) {
    deferred_.emplace_back(dst, src);
  }

  double cost(const Action& a) const {
    const Costs& c = spec_.costs;
    size_t s = static_cast<size_t>(a.stage);
    auto at = [&](const std::vector<double>& v) { return s < v.size() ? v[s] : 0.0; };
    // I and B of a recomputing stage first rerun its forward (costs.R, F's time by default).
    const double again = recompute(a.stage) == Recompute::kNone ? 0.0 : s < c.r_s.size() ? c.r_s[s] : at(c.f_s);
    switch (a.kind) {
      case ActionKind::kF: return at(c.f_s);
      case ActionKind::kI: return at(c.i_s) + again;
      case ActionKind::kW: return at(c.w_s);
      case ActionKind::kB: return at(c.b_s) + again;
      default: return 0.0;
    }
  }

  /// An op of the action index with what wiring reads of it, copied when it is indexed: the
  /// index is read in (stage, microbatch) order, where the ops themselves lie far apart (on the
  /// largest comms CSV, reading the producer's rank from the op array took most of the wiring).
  struct Placed {
    OpId id = kNoOp;
    int32_t rank = -1;
    int32_t stream = -1;
    int32_t step = -1;
  };
  Placed placed(OpId id) const {
    const Op& op = out_.program.ops[id];
    return Placed{id, op.rank, op.stream, op.step};
  }

  /// The op of action (k, stage, mb) in the current replica; id kNoOp when there is none.
  Placed find(ActionKind k, int32_t stage, int32_t mb) const {
    const Placed* at = index_[cur_].find(key_of(k, stage, mb));
    return at ? *at : Placed{};
  }

  int32_t rank_of_stage(int32_t stage) const {
    if (stage < 0 || stage >= spec_.stages) return -1;
    const int32_t r = spec_.stage_to_rank[stage];
    return r < 0 ? r : r * dp_ + cur_;
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
  /// At most two inputs, held inline (this runs once per compute action).
  struct Inputs {
    Action a[2];
    int n = 0;
    void push_back(const Action& x) { a[n++] = x; }
    const Action* begin() const { return a; }
    const Action* end() const { return a + n; }
  };
  Inputs inputs_of(const Action& a) const {
    Inputs in;
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
  Placed producer(const Action& need) const {
    if (need.kind == ActionKind::kB) {
      const Placed b = find(ActionKind::kB, need.stage, need.microbatch);
      return b.id != kNoOp ? b : find(ActionKind::kI, need.stage, need.microbatch);
    }
    if (need.kind == ActionKind::kI) {  // W's input: the I (or a B, which structure reports)
      return find(ActionKind::kI, need.stage, need.microbatch);
    }
    return find(need.kind, need.stage, need.microbatch);
  }

  void wire_all() {
    Program& p = out_.program;
    // The deferred deps grouped by op (compressed rows, each op's in the order recorded).
    std::vector<uint32_t> first(p.ops.size() + 1, 0);
    for (const auto& [dst, src] : deferred_) ++first[dst + 1];
    for (size_t i = 0; i + 1 < first.size(); ++i) first[i + 1] += first[i];
    std::vector<OpId> extra(deferred_.size());
    {
      std::vector<uint32_t> fill(first.begin(), first.end() - 1);
      for (const auto& [dst, src] : deferred_) extra[fill[dst]++] = src;
      std::vector<std::pair<OpId, OpId>>().swap(deferred_);
    }
    for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
      // Deps must be appended while `id` is the op whose range ends the deps array (its range
      // starts where op id - 1's, wired just before, ends).
      p.ops[id].dep_end = static_cast<uint32_t>(p.deps.size());
      p.ops[id].mem_end = static_cast<uint32_t>(p.mem.size());
      p.ops[id].use_end = static_cast<uint32_t>(p.uses.size());
      const Op op = p.ops[id];
      cur_ = op.rank % dp_;
      for (uint32_t k = first[id]; k < first[id + 1]; ++k) p.add_dep(id, Dep{extra[k], DepKind::kLocal});
      if (auto w = with_backward_.find(id); w != with_backward_.end()) start_with(id, w->second);
      if (op.kind == OpKind::kCompute) {
        for (int part = 0; part < op.num_actions; ++part) wire_compute(id, op.actions[part], part);
        if (op.num_actions == 2 && op.actions[0].kind == ActionKind::kI && op.actions[1].kind == ActionKind::kW &&
            op.actions[0].stage == op.actions[1].stage && op.actions[0].microbatch == op.actions[1].microbatch) {
          // (I;W) of one microbatch in one step: W consumes at the step's end what I produces
          // there, so the weight-gradient inputs are never held past the step.
          add_memory(id, op.actions[0], /*with_wgrad=*/false);
        } else {
          for (int part = 0; part < op.num_actions; ++part) add_memory(id, op.actions[part]);
        }
        for (int part = 0; part < op.num_actions; ++part) {
          use_params(id, op.actions[part]);
          accumulate_grads(id, op.actions[part]);
          if (keeps_) keep_until_step_end(id, op.actions[part]);
        }
        if (keeps_ && optimizer_ops_.count(id)) release_step_end(id);
      } else if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
        wire_p2p(id, op.actions[0]);
      } else if (op.kind == OpKind::kCollective && op.collective == CollectiveKind::kAllToAll) {
        wire_all_to_all(id);
      } else if (op.kind == OpKind::kCollective && op.actions[0].kind == ActionKind::kReduceGrad) {
        release_grads(id, op.actions[0]);
      } else if (op.kind == OpKind::kMarker && op.num_actions == 0) {
        if (auto it = pending_free_.find(id); it != pending_free_.end()) p.add_mem(id, it->second);
      } else if (op.kind == OpKind::kMarker || (op.kind == OpKind::kCollective && op.actions[0].kind == ActionKind::kUnshard &&
                                                 op.num_actions == 1)) {
        gather_or_free(id, op.actions[0]);
      }
    }
  }

  /// Overlapped gradient reduction `id` starts when backward `bw` (wired before it: created
  /// earlier) can start: after bw's inputs and bw's predecessor on its stream.
  void start_with(OpId id, OpId bw) {
    Program& p = out_.program;
    for (const Dep* d = p.deps_begin(bw); d != p.deps_end(bw); ++d)
      if (d->src != kNoOp && p.ops[d->src].stream != p.ops[id].stream) p.add_dep(id, *d);
    const std::vector<OpId>& lane = p.streams[p.ops[bw].stream].ops;
    for (size_t k = lane.size(); k-- > 1;)
      if (lane[k] == bw) {
        p.add_dep(id, Dep{lane[k - 1], DepKind::kLocal});
        break;
      }
  }

  /// The receive buffer of an all-to-all pair: allocated at the start of the first, freed at
  /// the end of the second (buffers are made while wiring, rank by rank, like the others).
  void wire_all_to_all(OpId id) {
    Program& p = out_.program;
    const Op& op = p.ops[id];
    if (auto it = a2a_pair_.find(id); it != a2a_pair_.end()) {
      const auto b = a2a_buffer_.find(it->second);
      if (b != a2a_buffer_.end()) p.add_mem(id, MemEffect{b->second, -p.buffers[b->second].bytes, true});
      return;
    }
    const int64_t bytes = op.bytes;
    if (bytes <= 0) return;
    Buffer b{op.rank, -1, -1, "a2a", bytes};
    b.name = p.add_name(fmt::format("receive of {}", p.names[op.name()]));
    const int32_t buf = static_cast<int32_t>(p.buffers.size());
    p.buffers.push_back(b);
    a2a_buffer_[id] = buf;
    p.add_mem(id, MemEffect{buf, bytes, false});
  }

  /// Wires the inputs of part `part` of compute op `id`. The parts of an OVERLAP_F_B step run in
  /// order (PyTorch's runtime performs its sub-actions one after the other), so the second may
  /// take the first's output; the first cannot take the second's.
  void wire_compute(OpId id, const Action& a, int part) {
    Program& p = out_.program;
    const Op& op = p.ops[id];
    for (const Action& need : inputs_of(a)) {
      const Placed so = producer(need);
      const OpId src = so.id;
      if (src == kNoOp) continue;  // missing action: reported by the structure pass
      auto what = [&] { return format_action(a); };  // formatted only on the error paths below
      if (so.rank == op.rank) {
        if (src == id) {
          if (part == 1 && op.actions[0] == need) continue;  // the step's first sub-action, done before
          causality(id, fmt::format("{} runs before its input {}, the second sub-action of the same overlapped step "
                                    "(the sub-actions run in the order written)",
                                    what(), format_action(need)), {op.rank});
        } else if (so.step > op.step) {
          causality(id, fmt::format("{} on rank {} runs before its input {}, which comes later in the "
                                    "same rank's list", what(), op.rank, p.label(src)), {op.rank}, src);
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
      const Placed placed_recv = find(rk, a.stage, a.microbatch);
      const OpId recv = placed_recv.id;
      auto recv_name = [&] { return format_action(Action{rk, a.stage, a.microbatch}); };
      if (recv == kNoOp || placed_recv.rank != op.rank) {
        causality(id, fmt::format("{} on rank {} needs {} from rank {}, but rank {} never receives it "
                                  "(no {})", what(), op.rank, p.label(src), so.rank, op.rank, recv_name()),
                  {op.rank, so.rank}, src);
      } else if (placed_recv.step > op.step) {
        causality(id, fmt::format("{} on rank {} runs before {} delivers its input from rank {}", what(),
                                  op.rank, recv_name(), so.rank), {op.rank}, recv);
      } else {
        // Every tensor of the receive (consecutive ops from its first).
        const int32_t n = p.tensor_of(recv).count;
        for (int32_t t = 0; t < n; ++t) p.add_dep(id, Dep{recv + t, DepKind::kLocal});
      }
    }
    if (!skip_recvs_[cur_].empty()) wire_skip_inputs(id, a);
  }

  /// The skip connections into compute action `a` of op `id`: an F waits for every skipping
  /// RECV_F of its (stage, microbatch) on its rank (`2RECV_F0<0`), an I or B for every skipping
  /// RECV_B; one listed after the compute is a causality finding.
  void wire_skip_inputs(OpId id, const Action& a) {
    Program& p = out_.program;
    const Op& op = p.ops[id];
    if (a.kind != ActionKind::kF && a.kind != ActionKind::kI && a.kind != ActionKind::kB) return;
    const ActionKind rk = a.kind == ActionKind::kF ? ActionKind::kRecvF : ActionKind::kRecvB;
    const auto it = skip_recvs_[cur_].find(key_of(Action{rk, a.stage, a.microbatch}));
    if (it == skip_recvs_[cur_].end()) return;
    for (const Placed& recv : it->second) {
      if (recv.rank != op.rank) continue;  // on another rank: a placement finding
      if (recv.step > op.step) {
        causality(id, fmt::format("{} on rank {} runs before {} delivers its skip-connection {}", format_action(a),
                                  op.rank, p.label(recv.id), a.kind == ActionKind::kF ? "input" : "gradient"),
                  {op.rank}, recv.id);
        continue;
      }
      const int32_t n = p.tensor_of(recv.id).count;
      for (int32_t t = 0; t < n; ++t) p.add_dep(id, Dep{recv.id + t, DepKind::kLocal});
    }
  }

  void wire_p2p(OpId id, const Action& a) {
    Program& p = out_.program;
    Op& op = p.ops[id];
    const bool forward = a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF;
    const bool send = is_send(a.kind);
    const auto [to_next, peer] = p2p_peer(op);
    if (peer < 0 && op.skips()) return;  // out of range or in another pipeline: a structure finding
    if (peer < 0) {
      causality(id, fmt::format("{} on rank {} has no peer: stage {} {} no {} stage", p.label(id), op.rank,
                                a.stage, to_next ? "is the last of its pipeline, with" : "is the first of its pipeline, with",
                                to_next ? "next" : "previous"), {op.rank});
      return;
    }
    op.set_peer(peer);
    // Lazy creation tells the communicators apart: a batched member travels on its pipeline
    // group's communicator, so it never pairs with a plain SEND/RECV of the same two ranks.
    int32_t comm = -1;
    if (spec_.p2p.lazy_comm_init && op.group() >= 0)
      if (auto it = pipeline_comm_.find(cur_); it != pipeline_comm_.end()) comm = it->second;
    int32_t ch = send ? p.channel_for(op.rank, peer, comm) : p.channel_for(peer, op.rank, comm);
    op.set_channel(ch);
    if (send) {
      p.channels[ch].sends.push_back(id);
      // The data sent must exist: SEND_F(s) after F(s), SEND_B(s) after I(s) or B(s).
      Action need = forward ? Action{ActionKind::kF, a.stage, a.microbatch}
                            : Action{ActionKind::kB, a.stage, a.microbatch};
      const Placed so = producer(need);
      const OpId src = so.id;
      if (src == kNoOp || so.rank != op.rank) {
        causality(id, fmt::format("{} on rank {} sends data that rank {} never computes (no {})",
                                  p.label(id), op.rank, op.rank,
                                  format_action(forward ? need : Action{ActionKind::kI, a.stage, a.microbatch})),
                  {op.rank});
      } else if (so.step > op.step) {
        causality(id, fmt::format("{} on rank {} sends before {} computes the data", p.label(id),
                                  op.rank, p.label(src)), {op.rank}, src);
      } else if (so.stream != op.stream) {
        p.add_dep(id, Dep{src, DepKind::kLocal});
      }
    } else {
      p.channels[ch].recvs.push_back(id);
    }
  }

  /// The memory effects of compute action `a` of op `id`; without `with_wgrad` an I allocates no
  /// weight-gradient inputs (its W runs in the same step).
  void add_memory(OpId id, const Action& a, bool with_wgrad = true) {
    Program& p = out_.program;
    const MemorySpec& m = spec_.memory;
    size_t s = static_cast<size_t>(a.stage);
    int64_t act = s < m.activation_bytes.size() ? m.activation_bytes[s] : 0;
    int64_t wg = s < m.weight_grad_bytes.size() ? m.weight_grad_bytes[s] : 0;
    int32_t rank = p.ops[id].rank;
    const bool fwd_only = spec_.forward_only_microbatch(a.microbatch);
    if (recompute(a.stage) != Recompute::kNone && !fwd_only &&
        (a.kind == ActionKind::kF || a.kind == ActionKind::kI || a.kind == ActionKind::kB)) {
      // Only `kept` bytes stay from F to I/B; the rest lives during F and again from the start
      // of the I/B (recomputed) to its end.
      const int64_t kept = std::clamp<int64_t>(
          s < m.retained_bytes.size() ? m.retained_bytes[s] : spec_.p2p.message_bytes, 0, act);
      const int64_t tmp = act - kept;
      const bool fwd = a.kind == ActionKind::kF;
      p.add_mem(id, MemEffect{buffer(rank, "act", a, kept), fwd ? kept : -kept, !fwd});
      p.add_mem(id, MemEffect{buffer(rank, fwd ? "act-tmp" : "recomputed", a, tmp), tmp, false});
      p.add_mem(id, MemEffect{buffer(rank, fwd ? "act-tmp" : "recomputed", a, tmp), -tmp, true});
      if (a.kind == ActionKind::kI && with_wgrad) p.add_mem(id, MemEffect{buffer(rank, "wgrad", a, wg), wg, true});
      return;
    }
    switch (a.kind) {
      case ActionKind::kF:
        p.add_mem(id, MemEffect{buffer(rank, "act", a, act), act, false});
        if (fwd_only) p.add_mem(id, MemEffect{buffer(rank, "act", a, act), -act, true});
        break;
      case ActionKind::kI:
        p.add_mem(id, MemEffect{buffer(rank, "act", a, act), -act, true});
        if (with_wgrad) p.add_mem(id, MemEffect{buffer(rank, "wgrad", a, wg), wg, true});
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

  /// What the pipelining runtime holds from compute action `a` of op `id` until the step's end
  /// (MemorySpec::kept_output_bytes after an F, kept_input_grad_bytes after an I or B),
  /// allocated at the op's end and freed by release_step_end.
  void keep_until_step_end(OpId id, const Action& a) {
    const MemorySpec& m = spec_.memory;
    const size_t s = static_cast<size_t>(a.stage);
    const bool fwd = a.kind == ActionKind::kF;
    if (!fwd && a.kind != ActionKind::kI && a.kind != ActionKind::kB) return;
    if (fwd && spec_.forward_only_microbatch(a.microbatch)) return;
    const std::vector<int64_t>& v = fwd ? m.kept_output_bytes : m.kept_input_grad_bytes;
    const int64_t bytes = s < v.size() ? v[s] : 0;
    if (bytes <= 0) return;
    Program& p = out_.program;
    const int32_t rank = p.ops[id].rank;
    const int32_t buf = buffer(rank, fwd ? "output" : "input-grad", a, bytes);
    p.add_mem(id, MemEffect{buf, bytes, true});
    kept_[rank].emplace_back(buf, bytes);
  }

  /// Frees, at the start of optimizer op `id`, what keep_until_step_end kept on its rank.
  void release_step_end(OpId id) {
    Program& p = out_.program;
    auto it = kept_.find(p.ops[id].rank);
    if (it == kept_.end()) return;
    for (const auto& [buf, bytes] : it->second) p.add_mem(id, MemEffect{buf, -bytes, false});
    kept_.erase(it);
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
    const size_t slot = static_cast<size_t>(cur_) * spec_.stages + s;
    int32_t& live = live_params_[slot];
    if (a.kind == ActionKind::kUnshard) live_gather_[slot] = id;
    if (bytes <= 0) return;  // nothing to gather: the residency pass still checks the order
    if (a.kind == ActionKind::kUnshard && live < 0) {
      live = static_cast<int32_t>(p.buffers.size());
      Buffer b{p.ops[id].rank, a.stage, -1, "param", bytes};
      b.name = p.add_name(fmt::format("param stage {} #{}{}", a.stage, gathers_[slot]++,
                                      comp_ && comp_->record_stream ? " (record_stream)" : ""));
      p.buffers.push_back(b);
      p.add_mem(id, MemEffect{live, bytes, false});
    } else if (a.kind == ActionKind::kReshard && live >= 0) {
      if (auto r = release_of_.find(id); r != release_of_.end())
        pending_free_[r->second] = MemEffect{live, -bytes, false};  // freed on the allocator lane
      else
        p.add_mem(id, MemEffect{live, -bytes, false});
      live = -1;
    }
  }

  /// Composition::accumulate_unsharded_grads: the first backward (B, I or W) of an FSDP-managed
  /// stage on this replica allocates the stage's unsharded gradients in the reduce dtype, at its
  /// start (the backward's own transients are live beside the units' gradients it has already
  /// produced); they live until the stage's REDUCE_GRAD (release_grads).
  void accumulate_grads(OpId id, const Action& a) {
    if (!comp_ || !comp_->fsdp || !comp_->accumulate_unsharded_grads) return;
    if (a.kind != ActionKind::kB && a.kind != ActionKind::kI && a.kind != ActionKind::kW) return;
    if (a.stage < 0 || a.stage >= spec_.stages || !fsdp_stage_[a.stage]) return;
    const size_t s = static_cast<size_t>(a.stage);
    const size_t slot = static_cast<size_t>(cur_) * spec_.stages + s;
    if (live_grads_.empty()) live_grads_.assign(static_cast<size_t>(spec_.stages) * dp_, -1);
    if (live_grads_[slot] >= 0) return;
    const int64_t params = s < spec_.memory.params_bytes.size() ? spec_.memory.params_bytes[s] : 0;
    const int64_t bytes =
        static_cast<int64_t>(static_cast<double>(params) / comp_->param_dtype_bytes * comp_->reduce_dtype_bytes);
    if (bytes <= 0) return;
    Program& p = out_.program;
    live_grads_[slot] = static_cast<int32_t>(p.buffers.size());
    Buffer b{p.ops[id].rank, a.stage, -1, "grad", bytes};
    b.name = p.add_name(fmt::format("unsharded grads stage {}", a.stage));
    p.buffers.push_back(b);
    p.add_mem(id, MemEffect{live_grads_[slot], bytes, false});
  }

  /// The stage's first reduction of REDUCE_GRAD frees the unsharded gradients when it ends (FSDP2
  /// copies them into the reduce-scatter input, which lives until the collective completes).
  void release_grads(OpId id, const Action& a) {
    if (live_grads_.empty() || a.stage < 0 || a.stage >= spec_.stages) return;
    const size_t slot = static_cast<size_t>(cur_) * spec_.stages + a.stage;
    int32_t& live = live_grads_[slot];
    if (live < 0) return;
    Program& p = out_.program;
    p.add_mem(id, MemEffect{live, -p.buffers[live].bytes, true});
    live = -1;
  }

  /// A compute action of an FSDP-managed stage reads its live unsharded parameters.
  void use_params(OpId id, const Action& a) {
    if (a.stage < 0 || a.stage >= spec_.stages || !fsdp_stage_[a.stage]) return;
    const size_t slot = static_cast<size_t>(cur_) * spec_.stages + a.stage;
    if (live_params_[slot] >= 0) out_.program.add_use(id, live_params_[slot]);
    // A gather on another stream (composed specs): the compute waits for the all-gather.
    const OpId g = live_gather_[slot];
    Program& p = out_.program;
    if (g != kNoOp && p.ops[g].stream != p.ops[id].stream && !has_dep(id, g)) p.add_dep(id, Dep{g, DepKind::kLocal});
  }

  Recompute recompute(int32_t stage) const {
    const auto& r = spec_.memory.recompute;
    return stage >= 0 && static_cast<size_t>(stage) < r.size() ? r[stage] : Recompute::kNone;
  }

  /// The buffer of (kind, stage, microbatch) on this replica; kind is one of the static strings
  /// "act", "act-tmp", "recomputed", "wgrad", "output", "input-grad".
  int32_t buffer(int32_t rank, const char* kind, const Action& a, int64_t bytes) {
    const std::string_view kv = kind;
    const ActionKind slot = kv == "act" ? ActionKind::kF : kv == "act-tmp" ? ActionKind::kI
                            : kv == "recomputed" ? ActionKind::kB : kv == "output" ? ActionKind::kSendF
                            : kv == "input-grad" ? ActionKind::kSendB : ActionKind::kW;
    const ActionKey k = key_of(slot, a.stage, a.microbatch);
    const auto next = static_cast<int32_t>(out_.program.buffers.size());
    if (!buffers_[cur_].try_emplace(k, next)) return *buffers_[cur_].find(k);
    out_.program.buffers.push_back(Buffer{rank, a.stage, a.microbatch, kind, bytes});
    return next;
  }

  bool has_dep(OpId id, OpId src) const {
    const Program& p = out_.program;
    for (const Dep* d = p.deps_begin(id); d != p.deps_end(id); ++d)
      if (d->src == src) return true;
    return false;
  }

  const PipelineSpec& spec_;
  BlockingModel blocking_;
  std::vector<std::vector<Step>>* release_ = nullptr;  ///< &spec_.actions to empty after pass 1, or null
  PipelineProgram out_;
  const Composition* comp_ = nullptr;   ///< composed specs only
  int32_t dp_ = 1;                      ///< data-parallel replicas of every pipeline rank
  int32_t cur_ = 0;                     ///< the replica being built or wired
  std::vector<int32_t> compute_stream_, comm_stream_, gather_stream_, reduce_stream_;  ///< per global rank
  std::vector<int32_t> alloc_stream_;   ///< per global rank, with record_stream only
  OpId last_reshard_ = kNoOp;           ///< the latest RESHARD of the rank being created
  std::unordered_map<OpId, OpId> release_of_;        ///< record_stream: RESHARD -> its release op
  std::unordered_map<OpId, MemEffect> pending_free_; ///< record_stream: release op -> the free it applies
  std::unordered_map<int32_t, int32_t> ep_comm_;     ///< MoE: first rank of an EP group -> its communicator
  std::unordered_map<OpId, OpId> a2a_pair_;          ///< MoE: second all-to-all of a pair -> the first
  std::unordered_map<OpId, int32_t> a2a_buffer_;     ///< MoE: first all-to-all of a pair -> its receive buffer
  std::vector<ActionKeyMap<Placed>> index_;     ///< per replica: action -> op
  std::unordered_set<OpId> optimizer_ops_;       ///< each rank's optimizer step (the step's end)
  bool keeps_ = false;                           ///< the spec keeps buffers until the step's end (MemorySpec::kept_*)
  /// Per rank: buffers held until the step's end (keep_until_step_end), with their bytes.
  std::unordered_map<int32_t, std::vector<std::pair<int32_t, int64_t>>> kept_;
  /// Per replica: the skipping receives (`2RECV_F0<0`) of each (RECV kind, stage, microbatch).
  std::vector<std::unordered_map<ActionKey, std::vector<Placed>, ActionKeyHash>> skip_recvs_;
  std::vector<ActionKeyMap<int32_t>> buffers_;  ///< per replica: (kind slot, stage, mb) -> buffer
  std::vector<uint8_t> fsdp_stage_;     ///< per stage: 1 when some rank UNSHARDs it
  std::vector<int32_t> live_params_;    ///< per (replica, stage): its live "param" buffer, or -1
  std::vector<OpId> live_gather_;       ///< per (replica, stage): its last UNSHARD op
  std::vector<int32_t> live_grads_;     ///< per (replica, stage): its live unsharded "grad" buffer, or -1
  std::unordered_map<size_t, int> gathers_;  ///< per (replica, stage): UNSHARDs so far
  std::unordered_map<int32_t, OpId> last_backward_;  ///< per stage: its latest I/B/W op on the rank being created
  std::vector<OpId> pending_group_;     ///< a batched group being created
  std::unordered_map<std::string, int32_t> tensor_names_;  ///< tensor name -> Program::names index
  std::vector<std::pair<OpId, OpId>> deferred_;  ///< (dst, src): deps recorded at creation, added when wired
  /// Overlapped reductions and the backward each starts with (Composition::overlap_grad_reduce).
  std::unordered_map<OpId, OpId> with_backward_;
  std::vector<int32_t> shard_comm_, replicate_comm_, tied_comm_;
  std::map<std::string, int32_t> arith_index_;  ///< Program::arithmetic per (reduction, group size)
  std::unordered_map<uint64_t, int32_t> pair_comm_;  ///< lazy init: the communicator of a rank pair
  std::unordered_set<uint64_t> inited_;              ///< lazy init: (pair, side) already created
  std::unordered_map<int32_t, int32_t> pipeline_comm_;  ///< lazy init: per replica, its pipeline group's communicator
  std::map<int32_t, std::optional<CollectiveGroup>> groups_;    ///< collective groups by name, as resolved
  std::map<std::pair<int32_t, int32_t>, int32_t> group_comm_;  ///< (group name, replica) -> its collective communicator
  std::set<std::pair<int32_t, int32_t>> collective_inited_;    ///< lazy init: (communicator, rank) already created
  std::unordered_set<int32_t> group_inited_;            ///< lazy init: ranks that created their pipeline group's
  OpId pending_init_ = kNoOp;                        ///< the last init op not yet waited for by compute
};

}  // namespace

PipelineProgram build_program(const PipelineSpec& spec, BlockingModel blocking) {
  return Builder(spec, blocking, nullptr).run();
}

PipelineProgram build_program_releasing_actions(PipelineSpec& spec, BlockingModel blocking) {
  return Builder(spec, blocking, &spec.actions).run();
}

}  // namespace sc
