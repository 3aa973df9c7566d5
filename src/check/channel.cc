// Channel pass: FIFO-matched messages carry the same logical message; counts agree.
#include <algorithm>

#include <fmt/format.h>

#include "check/passes.h"

namespace sc {
namespace {

// The logical message of a P2P op: (forward?, source stage, destination stage, microbatch),
// and which of its action's tensors it carries (index, and name when named).
struct Message {
  bool forward = true;
  int32_t src_stage = 0, dst_stage = 0, microbatch = 0;
  BoundaryTensor tensor;
};

// Two messages agree when they are the same boundary's same tensor: the same position, and the
// same name where both sides name it (a count on one side names nothing).
bool same(const Program& p, const Message& a, const Message& b) {
  if (a.forward != b.forward || a.src_stage != b.src_stage || a.dst_stage != b.dst_stage ||
      a.microbatch != b.microbatch || a.tensor.index != b.tensor.index)
    return false;
  if (a.tensor.name < 0 || b.tensor.name < 0) return true;
  return p.names[a.tensor.name] == p.names[b.tensor.name];
}

Message message_of(const Program& p, OpId id) {
  const Action& a = p.ops[id].actions[0];
  Message m;
  m.microbatch = a.microbatch;
  const int32_t peer = p.ops[id].peer_stage();  // the neighbour, or the stage a skip names
  switch (a.kind) {
    case ActionKind::kSendF: m = {true, a.stage, peer, a.microbatch, {}}; break;
    case ActionKind::kRecvF: m = {true, peer, a.stage, a.microbatch, {}}; break;
    case ActionKind::kSendB: m = {false, a.stage, peer, a.microbatch, {}}; break;
    case ActionKind::kRecvB: m = {false, peer, a.stage, a.microbatch, {}}; break;
    default: break;
  }
  m.tensor = p.tensor_of(id);
  return m;
}

// "activations of microbatch 0 from stage 0 to stage 1", then for one of several tensors
// ", tensor [2] of 3" or ", tensor 'mask' ([1] of 2)".
std::string describe(const Program& p, const Message& m) {
  std::string out = fmt::format("{} of microbatch {} from stage {} to stage {}", m.forward ? "activations" : "gradients",
                                m.microbatch, m.src_stage, m.dst_stage);
  const BoundaryTensor& t = m.tensor;
  if (t.name >= 0 && t.name < static_cast<int32_t>(p.names.size()))
    out += fmt::format(", tensor '{}' ([{}] of {})", p.names[t.name], t.index, t.count);
  else if (t.count > 1)
    out += fmt::format(", tensor [{}] of {}", t.index, t.count);
  return out;
}

}  // namespace

std::vector<Finding> check_channels(const Program& p) {
  std::vector<Finding> out;
  for (const Channel& ch : p.channels) {
    // "rank 0 -> rank 1", with the communicator where the rank pair has more than one.
    const std::string name =
        ch.comm >= 0 && ch.comm < static_cast<int32_t>(p.comms.size())
            ? fmt::format("rank {} -> rank {} on communicator '{}'", ch.src, ch.dst, p.comms[ch.comm].name)
            : fmt::format("rank {} -> rank {}", ch.src, ch.dst);
    size_t n = std::min(ch.sends.size(), ch.recvs.size());
    size_t mismatches = 0;
    Finding f;
    f.kind = FindingKind::kChannel;
    for (size_t k = 0; k < n; ++k) {
      const Op& s = p.ops[ch.sends[k]];
      const Op& r = p.ops[ch.recvs[k]];
      Message ms = message_of(p, ch.sends[k]), mr = message_of(p, ch.recvs[k]);
      if (same(p, ms, mr) && s.bytes == r.bytes) continue;
      if (mismatches++ == 0) {
        f.message = fmt::format("channel {}: message {} is sent as {} ({}) but received as {} ({})", name, k,
                                p.label(ch.sends[k]), describe(p, ms), p.label(ch.recvs[k]), describe(p, mr));
        f.ranks = {ch.src, ch.dst};
      }
      if (f.ops.size() < 16) {
        f.ops.push_back(p.label(ch.sends[k]));
        f.locations.push_back(s.loc);
        f.ops.push_back(p.label(ch.recvs[k]));
        f.locations.push_back(r.loc);
        f.details.push_back(fmt::format("message {}: {} ({}) pairs with {} ({})", k, p.label(ch.sends[k]),
                                        format_loc(s.loc), p.label(ch.recvs[k]), format_loc(r.loc)));
      }
    }
    if (mismatches > 0) {
      if (mismatches > 1) f.message += fmt::format(" ({} mismatched messages on this channel)", mismatches);
      f.details.push_back("NCCL pairs sends and receives per peer in call order, without tags: the k-th send meets the k-th receive");
      out.push_back(std::move(f));
    }
    if (ch.sends.size() != ch.recvs.size()) {
      Finding c;
      c.kind = FindingKind::kChannel;
      c.ranks = {ch.src, ch.dst};
      bool more_recvs = ch.recvs.size() > ch.sends.size();
      const std::vector<OpId>& extra = more_recvs ? ch.recvs : ch.sends;
      c.message = fmt::format("channel {}: {} sends but {} receives; {} unmatched {}", name, ch.sends.size(),
                              ch.recvs.size(), extra.size() - n,
                              more_recvs ? "receive(s) wait forever" : "send(s) are never received");
      for (size_t k = n; k < extra.size() && c.ops.size() < 8; ++k) {
        c.ops.push_back(p.label(extra[k]));
        c.locations.push_back(p.ops[extra[k]].loc);
        // Which message is left over, where one action carries several tensors or skips stages.
        if (p.tensor_of(extra[k]).count > 1 || p.tensor_of(extra[k]).name >= 0 || p.ops[extra[k]].skips())
          c.details.push_back(fmt::format("message {}: {} ({}) carries {} and has no matching {}", k, p.label(extra[k]),
                                          format_loc(p.ops[extra[k]].loc), describe(p, message_of(p, extra[k])),
                                          more_recvs ? "send" : "receive"));
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace sc
