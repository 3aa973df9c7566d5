// Lowering compute-only pipeline schedules to explicit SEND/RECV lists (PyTorch's and deferred).
#include "pipeline/lower_comms.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace sc {

namespace {

// An action as a hashable key (kind, stage, microbatch), for sets of placed actions and for
// message identities.
struct Key {
  ActionKind kind;
  int32_t stage;
  int32_t microbatch;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = static_cast<uint64_t>(k.kind);
    h = h * 0x9E3779B97F4A7C15ull + static_cast<uint32_t>(k.stage);
    h = h * 0x9E3779B97F4A7C15ull + static_cast<uint32_t>(k.microbatch);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
Key key_of(const Action& a) { return {a.kind, a.stage, a.microbatch}; }

// The communication a compute action causes, given the placement.
struct Comms {
  const std::vector<int32_t>& stage_to_rank;
  const std::vector<int32_t>& pipeline_starts;  // ascending, starts with 0
  int32_t num_stages() const { return static_cast<int32_t>(stage_to_rank.size()); }
  bool first(int32_t s) const { return std::binary_search(pipeline_starts.begin(), pipeline_starts.end(), s); }
  bool last(int32_t s) const { return s == num_stages() - 1 || first(s + 1); }

  // PyTorch's `_has_comms`: F of a non-last stage whose next stage is on another rank; I or B of
  // a non-first stage whose previous stage is on another rank. W never sends.
  bool sends(const Action& a) const {
    if (a.kind == ActionKind::kF)
      return !last(a.stage) && stage_to_rank[a.stage + 1] != stage_to_rank[a.stage];
    if (a.kind == ActionKind::kI || a.kind == ActionKind::kB)
      return !first(a.stage) && stage_to_rank[a.stage - 1] != stage_to_rank[a.stage];
    return false;
  }
  // The mirror image: the action needs a RECV on its own rank before it can run.
  bool receives(const Action& a) const {
    if (a.kind == ActionKind::kF)
      return !first(a.stage) && stage_to_rank[a.stage - 1] != stage_to_rank[a.stage];
    if (a.kind == ActionKind::kI || a.kind == ActionKind::kB)
      return !last(a.stage) && stage_to_rank[a.stage + 1] != stage_to_rank[a.stage];
    return false;
  }
  // PyTorch's `_get_comms`: the SEND on the producer's rank and the RECV on the consumer's.
  static Action send_of(const Action& a) {
    return {a.kind == ActionKind::kF ? ActionKind::kSendF : ActionKind::kSendB, a.stage, a.microbatch};
  }
  static Action recv_of(const Action& a) {
    if (a.kind == ActionKind::kF) return {ActionKind::kRecvF, a.stage + 1, a.microbatch};
    return {ActionKind::kRecvB, a.stage - 1, a.microbatch};
  }
  // The RECV the consumer `a` needs before it runs.
  static Action recv_for(const Action& a) {
    return {a.kind == ActionKind::kF ? ActionKind::kRecvF : ActionKind::kRecvB, a.stage, a.microbatch};
  }
  // The rank a SEND goes to, and the rank a RECV comes from.
  int32_t peer(const Action& p2p) const {
    switch (p2p.kind) {
      case ActionKind::kSendF: return stage_to_rank[p2p.stage + 1];
      case ActionKind::kRecvF: return stage_to_rank[p2p.stage - 1];
      case ActionKind::kSendB: return stage_to_rank[p2p.stage - 1];
      case ActionKind::kRecvB: return stage_to_rank[p2p.stage + 1];
      default: return -1;
    }
  }
  // The identity of the message a SEND or RECV carries, the same on both ends:
  // (direction, producer stage, microbatch), packed as the producer's SEND.
  static Key message(const Action& p2p) {
    switch (p2p.kind) {
      case ActionKind::kRecvF: return key_of({ActionKind::kSendF, p2p.stage - 1, p2p.microbatch});
      case ActionKind::kRecvB: return key_of({ActionKind::kSendB, p2p.stage + 1, p2p.microbatch});
      default: return key_of(p2p);
    }
  }
};

// The parts of a step: one action, or the forward then the backward of an overlapped pair.
int parts(const Step& s, Action out[2]) {
  out[0] = s.first;
  if (!s.second) return 1;
  out[1] = *s.second;
  return 2;
}

// Checks what both policies need: no SEND/RECV yet, every stage placed on a known rank.
bool check_input(const std::vector<std::vector<Step>>& actions,
                 const std::vector<int32_t>& stage_to_rank, std::string* why) {
  int32_t ranks = static_cast<int32_t>(actions.size());
  for (const auto& row : actions)
    for (const auto& st : row) {
      Action a[2];
      for (int i = 0, n = parts(st, a); i < n; ++i) {
        if (is_p2p(a[i].kind)) {
          if (why) *why = "already has explicit communication";
          return false;
        }
        if (a[i].stage < 0 || a[i].stage >= static_cast<int32_t>(stage_to_rank.size())) {
          if (why)
            *why = fmt::format("{} names stage {}, but the placement has {} stages",
                               format_step(st), a[i].stage, stage_to_rank.size());
          return false;
        }
      }
    }
  for (size_t s = 0; s < stage_to_rank.size(); ++s)
    if (stage_to_rank[s] < 0 || stage_to_rank[s] >= ranks) {
      if (why)
        *why = fmt::format("the placement puts stage {} on rank {}, but there are {} ranks", s,
                           stage_to_rank[s], ranks);
      return false;
    }
  return true;
}

Step make_step(const Action& a, const SourceLoc& loc) { return Step{a, std::nullopt, loc}; }

// PyTorch's `_add_send_recv`, step for step (see lower_comms.h). Inserted SENDs and RECVs carry
// the location of the compute action that produced the message.
std::optional<std::vector<std::vector<Step>>> lower_pytorch(
    const std::vector<std::vector<Step>>& actions, const Comms& comms, std::string* why) {
  size_t ranks = actions.size();
  std::vector<std::vector<Step>> out(ranks);
  std::vector<std::unordered_set<Key, KeyHash>> prev(ranks);
  std::vector<size_t> head(ranks, 0);
  auto has = [&](size_t r, ActionKind k, int32_t stage, int32_t mb) {
    return prev[r].count(key_of({k, stage, mb})) > 0;
  };
  // PyTorch's `_ready_to_schedule`: our own RECVs are placed by the sender, so a consumer waits
  // until its RECV (or its producer, on the same rank) is already in the list.
  auto ready = [&](size_t r, const Action& a) {
    if (a.kind == ActionKind::kF && !comms.first(a.stage))
      return has(r, ActionKind::kRecvF, a.stage, a.microbatch) ||
             has(r, ActionKind::kF, a.stage - 1, a.microbatch);
    if ((a.kind == ActionKind::kI || a.kind == ActionKind::kB) && !comms.last(a.stage))
      return has(r, ActionKind::kRecvB, a.stage, a.microbatch) ||
             has(r, ActionKind::kI, a.stage + 1, a.microbatch) ||
             has(r, ActionKind::kB, a.stage + 1, a.microbatch);
    return true;
  };
  size_t remaining = 0;
  for (const auto& row : actions) remaining += row.size();
  while (remaining > 0) {
    bool progress = false;
    for (size_t r = 0; r < ranks; ++r) {
      if (head[r] >= actions[r].size()) continue;
      const Step& st = actions[r][head[r]];
      Action a[2];
      int n = parts(st, a);
      bool all_ready = true;
      for (int i = 0; i < n; ++i) all_ready = all_ready && ready(r, a[i]);
      if (!all_ready) continue;
      out[r].push_back(st);
      for (int i = 0; i < n; ++i) {
        prev[r].insert(key_of(a[i]));
        if (!comms.sends(a[i])) continue;
        Action send = Comms::send_of(a[i]);
        Action recv = Comms::recv_of(a[i]);
        size_t to = static_cast<size_t>(comms.stage_to_rank[recv.stage]);
        out[r].push_back(make_step(send, st.loc));
        prev[r].insert(key_of(send));
        out[to].push_back(make_step(recv, st.loc));
        prev[to].insert(key_of(recv));
      }
      ++head[r];
      --remaining;
      progress = true;
    }
    if (!progress) {
      if (why) {
        std::string waits;
        size_t shown = 0;
        for (size_t r = 0; r < ranks; ++r) {
          if (head[r] >= actions[r].size()) continue;
          if (shown == 8) {
            waits += ", ...";
            break;
          }
          waits += fmt::format("{}rank {} waits at {} ({})", shown ? ", " : "", r,
                               format_step(actions[r][head[r]]), format_loc(actions[r][head[r]].loc));
          ++shown;
        }
        *why = "malformed compute schedule: no rank can make progress; " + waits;
      }
      return std::nullopt;
    }
  }
  return out;
}

// The plain deferred placement: on each rank, the SENDs a step produces right after it (an
// overlapped pair: the forward part's first), and each RECV as late as possible: just before its
// consumer, but never after the RECV of a message its peer sends later on the same channel.
// NCCL matches per peer in call order, so a RECV placed by its consumer alone would pair with the
// wrong message whenever a rank consumes in another order than its peer produces (the
// interleaved ZB and DualPipeV schedules do); pulling the earlier-sent RECVs up keeps every
// channel FIFO-consistent and, as RECVs only move up, keeps causality. A SEND carries the
// location of its producer, a RECV that of its consumer (or of the consumer that pulled it up).
std::vector<std::vector<Step>> place_deferred(const std::vector<std::vector<Step>>& actions,
                                              const Comms& comms) {
  size_t ranks = actions.size();
  // Send order per channel (src, dst): each message's index on its channel.
  std::unordered_map<Key, size_t, KeyHash> send_index;
  std::vector<std::unordered_map<int32_t, std::vector<Key>>> sent(ranks);  // [dst][src] -> messages
  for (size_t r = 0; r < ranks; ++r)
    for (const Step& st : actions[r]) {
      Action a[2];
      for (int i = 0, n = parts(st, a); i < n; ++i) {
        if (!comms.sends(a[i])) continue;
        Action s = Comms::send_of(a[i]);
        auto& list = sent[comms.peer(s)][static_cast<int32_t>(r)];
        send_index.emplace(Comms::message(s), list.size());
        list.push_back(Comms::message(s));
      }
    }
  std::vector<std::vector<Step>> out(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    std::unordered_map<int32_t, size_t> posted;        // per source rank: prefix of its sends received
    std::unordered_set<Key, KeyHash> done;              // messages whose RECV is placed
    auto post_recv = [&](const Action& recv, const SourceLoc& loc) {
      Key m = Comms::message(recv);
      if (done.count(m)) return;
      int32_t src = comms.peer(recv);
      auto idx = send_index.find(m);
      auto& order = sent[r][src];
      if (idx != send_index.end()) {
        // First the RECVs of everything the peer sends on this channel before m.
        for (size_t& k = posted[src]; k < idx->second; ++k) {
          const Key& early = order[k];
          if (done.insert(early).second)
            out[r].push_back(make_step(Action{early.kind == ActionKind::kSendF ? ActionKind::kRecvF : ActionKind::kRecvB,
                                              early.kind == ActionKind::kSendF ? early.stage + 1 : early.stage - 1,
                                              early.microbatch},
                                       loc));
        }
      }
      done.insert(m);
      out[r].push_back(make_step(recv, loc));
    };
    for (const Step& st : actions[r]) {
      Action a[2];
      int n = parts(st, a);
      for (int i = 0; i < n; ++i)
        if (comms.receives(a[i])) post_recv(Comms::recv_for(a[i]), st.loc);
      out[r].push_back(st);
      for (int i = 0; i < n; ++i)
        if (comms.sends(a[i])) out[r].push_back(make_step(Comms::send_of(a[i]), st.loc));
    }
  }
  return out;
}

// The rank-parity rule (FACTS §2, pytorch/pytorch#172668), applied to the plain deferred lists.
//
// The hang it prevents: with rendezvous P2P (NCCL for large messages) a SEND completes only
// together with its RECV. In interleaved p = 2 the plain lists end rank 0 with
// `0SEND_F1, 2RECV_F0` and rank 1 with `1SEND_F0, 1RECV_F1`: both ranks block in SEND, neither
// reaches its RECV. Ordering by rank parity breaks the symmetry: for each pair of ranks
// lo < hi, when lo is about to SEND a message M to hi, it first posts every RECV from hi whose
// matching SEND hi issues before hi's RECV of M. Then, walking both lists, hi can always reach
// the RECV of M: every SEND hi does on the way to it has its RECV already posted on lo.
//
// Why this is safe:
// - Causality: a RECV depends only on its matching SEND; it only ever moves up, so it stays
//   before its consumer, and no compute step moves. Among lo's RECVs from hi, those moved have
//   their SENDs earlier on hi than those not moved and keep their relative order, so a channel
//   whose two ends agreed on the message order still agrees (FIFO matching is unchanged).
// - Under rendezvous the rule changes only lists that hang: if hi issues S_h before its RECV of
//   M while lo posts R_h only after its SEND of M, then SEND M waits for hi's RECV of M, which
//   waits for S_h, which waits for R_h, which waits for SEND M. So a list that completes has
//   nothing to move, and in one that hangs the move removes exactly this cycle. Under eager
//   semantics, with two ranks whose channels agree on the message order, a moved R_h waits only
//   for steps hi takes on its way to RECV M, which need nothing lo does after SEND M.
// - Limits: the placement keeps each channel FIFO-consistent (place_deferred), and the rule
//   keeps it so; with more than two ranks a wait through a third rank is left to the deadlock
//   check.
//
// The rule only moves lo's RECVs from hi and only reads the relative order of hi's SENDs to lo
// and RECVs from lo, which no other pair's rule changes; so pairs are independent and one pass
// over each rank's list applies the rule for all its higher peers at once (linear but for
// hashing).
std::vector<std::vector<Step>> apply_rank_parity(std::vector<std::vector<Step>> lists,
                                                 const Comms& comms) {
  size_t ranks = lists.size();
  // For each rank h and each message h receives from a lower rank, the number of SENDs h issues
  // to that rank before the RECV (occurrences counted in order, so repeated messages match
  // k-th to k-th); and the order of h's SENDs to each lower rank.
  struct PeerView {
    std::unordered_map<Key, std::vector<size_t>, KeyHash> sends_before_recv;  // message -> counts
    std::vector<Key> sends;  // messages, in order
  };
  // view[h][l]: rank h's list as seen from lower rank l.
  std::vector<std::unordered_map<int32_t, PeerView>> view(ranks);
  for (size_t h = 0; h < ranks; ++h) {
    for (const Step& st : lists[h]) {
      if (!is_p2p(st.first.kind)) continue;
      int32_t l = comms.peer(st.first);
      if (l < 0 || static_cast<size_t>(l) >= h) continue;
      PeerView& pv = view[h][l];
      if (is_send(st.first.kind))
        pv.sends.push_back(Comms::message(st.first));
      else
        pv.sends_before_recv[Comms::message(st.first)].push_back(pv.sends.size());
    }
  }

  for (size_t lo = 0; lo < ranks; ++lo) {
    const std::vector<Step>& in = lists[lo];
    // Where each RECV from a higher peer sits in lo's list, per message, in order.
    std::unordered_map<Key, std::vector<size_t>, KeyHash> recv_at;
    for (size_t i = 0; i < in.size(); ++i) {
      const Action& a = in[i].first;
      if (is_p2p(a.kind) && !is_send(a.kind) && static_cast<size_t>(comms.peer(a)) > lo)
        recv_at[Comms::message(a)].push_back(i);
    }
    std::unordered_map<Key, size_t, KeyHash> recv_used;   // occurrences taken by drains so far
    std::unordered_map<Key, size_t, KeyHash> send_count;  // occurrences of a message sent so far
    std::unordered_map<int32_t, size_t> drained;      // per peer: prefix of its SENDs handled
    std::vector<char> emitted(in.size(), 0);
    std::vector<Step> out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (emitted[i]) continue;
      const Action& a = in[i].first;
      int32_t hi = is_p2p(a.kind) ? comms.peer(a) : -1;
      if (is_send(a.kind) && hi >= 0 && static_cast<size_t>(hi) > lo) {
        Key m = Comms::message(a);
        size_t occurrence = send_count[m]++;
        auto pv_it = view[hi].find(static_cast<int32_t>(lo));
        if (pv_it != view[hi].end()) {
          const PeerView& pv = pv_it->second;
          auto need_it = pv.sends_before_recv.find(m);
          if (need_it != pv.sends_before_recv.end() && occurrence < need_it->second.size()) {
            size_t need = need_it->second[occurrence];
            size_t& done = drained[hi];
            std::vector<size_t> post;
            for (; done < need; ++done) {
              const Key& sent = pv.sends[done];
              auto at = recv_at.find(sent);
              if (at == recv_at.end()) continue;  // lo never receives it: a channel finding later
              size_t& used = recv_used[sent];
              if (used >= at->second.size()) continue;
              size_t j = at->second[used++];
              if (j > i && !emitted[j]) post.push_back(j);
            }
            std::sort(post.begin(), post.end());  // keep lo's own order of the moved RECVs
            for (size_t j : post) {
              out.push_back(in[j]);
              emitted[j] = 1;
            }
          }
        }
      }
      out.push_back(in[i]);
      emitted[i] = 1;
    }
    lists[lo] = std::move(out);
  }
  return lists;
}

}  // namespace

std::vector<std::vector<Step>> merge_bw(const std::vector<std::vector<Step>>& actions) {
  std::vector<std::vector<Step>> out(actions.size());
  for (size_t r = 0; r < actions.size(); ++r) {
    const std::vector<Step>& row = actions[r];
    for (size_t i = 0; i < row.size(); ++i) {
      const Step& st = row[i];
      if (!st.second && st.first.kind == ActionKind::kI && i + 1 < row.size()) {
        const Step& next = row[i + 1];
        if (!next.second && next.first.kind == ActionKind::kW && next.first.stage == st.first.stage &&
            next.first.microbatch == st.first.microbatch) {
          out[r].push_back(Step{{ActionKind::kB, st.first.stage, st.first.microbatch}, std::nullopt, st.loc});
          ++i;
          continue;
        }
      }
      out[r].push_back(st);
    }
  }
  return out;
}

std::optional<std::vector<std::vector<Step>>> lower_comms(
    const std::vector<std::vector<Step>>& actions, const std::vector<int32_t>& stage_to_rank,
    LowerPolicy policy, std::string* why, const std::vector<int32_t>& pipeline_starts) {
  if (!check_input(actions, stage_to_rank, why)) return std::nullopt;
  Comms comms{stage_to_rank, pipeline_starts};
  if (policy == LowerPolicy::kPyTorch) return lower_pytorch(actions, comms, why);
  return apply_rank_parity(place_deferred(actions, comms), comms);
}

}  // namespace sc
