#include "graph/happens_before.h"

#include <algorithm>

namespace sc {

HappensBefore::HappensBefore(const Program& p) : p_(p), num_ops_(static_cast<int32_t>(p.ops.size())) {
  pos_.assign(num_ops_, 0);
  for (const Stream& s : p.streams)
    for (size_t i = 0; i < s.ops.size(); ++i) pos_[s.ops[i]] = static_cast<int32_t>(i);
  int32_t instances = 0;
  for (size_t c = 0; c < p.comms.size(); ++c) {
    comm_base_.push_back(instances);
    size_t longest = 0;
    for (const auto& seqs : p.comms[c].ops) longest = std::max(longest, seqs.size());
    instances += static_cast<int32_t>(longest);
    join_comm_.insert(join_comm_.end(), longest, static_cast<int32_t>(c));
  }
  if (p.semantics.kind == Semantics::kBuffered && p.semantics.buffer >= 1) {
    slot_recv_.assign(num_ops_, kNoOp);
    const size_t depth = static_cast<size_t>(p.semantics.buffer);
    for (const Channel& ch : p.channels)
      for (size_t k = depth; k < ch.sends.size() && k - depth < ch.recvs.size(); ++k)
        slot_recv_[ch.sends[k]] = ch.recvs[k - depth];
  }
  num_events_ = 2 * num_ops_ + instances;

  // Kahn's algorithm over the predecessor rules, with successors in compressed rows.
  std::vector<int32_t> indegree(num_events_, 0);
  std::vector<uint32_t> first(static_cast<size_t>(num_events_) + 1, 0);
  for (int32_t e = 0; e < num_events_; ++e)
    for_each_pred(e, [&](int32_t pred) {
      ++indegree[e];
      ++first[pred + 1];
    });
  for (int32_t e = 0; e < num_events_; ++e) first[e + 1] += first[e];
  std::vector<int32_t> succ(first.back());
  std::vector<uint32_t> fill(first.begin(), first.end() - 1);
  for (int32_t e = 0; e < num_events_; ++e) for_each_pred(e, [&](int32_t pred) { succ[fill[pred]++] = e; });
  topo_.reserve(num_events_);
  for (int32_t e = 0; e < num_events_; ++e)
    if (indegree[e] == 0) topo_.push_back(e);
  for (size_t head = 0; head < topo_.size(); ++head) {
    const int32_t e = topo_[head];
    for (uint32_t k = first[e]; k < first[e + 1]; ++k)
      if (--indegree[succ[k]] == 0) topo_.push_back(succ[k]);
  }
  acyclic_ = static_cast<int32_t>(topo_.size()) == num_events_;
}

int32_t HappensBefore::join_event(OpId op) const {
  const Op& o = p_.ops[op];
  if (o.kind != OpKind::kCollective || o.comm < 0 || o.seq < 0) return -1;
  return 2 * num_ops_ + comm_base_[o.comm] + o.seq;
}

RankClocks::RankClocks(const HappensBefore& hb, int32_t rank) : hb_(hb), rank_(rank) {
  const Program& p = hb.program();
  if (rank >= 0 && rank < static_cast<int32_t>(p.rank_streams.size())) streams_ = p.rank_streams[rank];
  width_ = static_cast<int>(streams_.size());
  local_.assign(p.streams.size(), -1);
  for (int k = 0; k < width_; ++k) local_[streams_[k]] = k;
  c_.assign(static_cast<size_t>(hb.num_events()) * width_, 0);
  if (width_ == 0) return;
  const int32_t ops2 = 2 * static_cast<int32_t>(p.ops.size());
  for (int32_t e : hb.topological_order()) {
    int32_t* mine = c_.data() + static_cast<size_t>(e) * width_;
    hb.for_each_pred(e, [&](int32_t pred) {
      const int32_t* theirs = c_.data() + static_cast<size_t>(pred) * width_;
      for (int k = 0; k < width_; ++k) mine[k] = std::max(mine[k], theirs[k]);
    });
    if (e < ops2) {
      const OpId op = e >> 1;
      const int k = local_[p.ops[op].stream];
      if (k >= 0) mine[k] = std::max(mine[k], 2 * hb.position(op) + (e & 1) + 1);
    }
  }
}

int RankClocks::stream_index(int32_t stream) const {
  return stream >= 0 && stream < static_cast<int32_t>(local_.size()) ? local_[stream] : -1;
}

bool RankClocks::ordered(int32_t a, int32_t b) const {
  const Program& p = hb_.program();
  const OpId op = a >> 1;
  const int k = local_[p.ops[op].stream];
  if (k < 0) return false;
  return prefix(b, k) >= 2 * hb_.position(op) + (a & 1) + 1;
}

}  // namespace sc
