// Lowering compute-only pipeline schedules to explicit SEND/RECV lists (PyTorch's and deferred).
#include "pipeline/lower_comms.h"

#include "pipeline/action_key_map.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace sc {

namespace {

using Key = ActionKey;
using KeyHash = ActionKeyHash;
template <typename T>
using KeyMap = ActionKeyMap<T>;

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

// A KeyMap for the actions of `actions` and the messages they cause (their stages are the
// placement's, checked by check_input; microbatches are the actions').
template <typename T>
KeyMap<T> key_map_for(const std::vector<std::vector<Step>>& actions, const Comms& comms) {
  int32_t microbatches = 0;
  size_t steps = 0;
  for (const auto& row : actions) {
    steps += row.size();
    for (const Step& st : row) {
      microbatches = std::max(microbatches, st.first.microbatch + 1);
      if (st.second) microbatches = std::max(microbatches, st.second->microbatch + 1);
    }
  }
  return KeyMap<T>(comms.num_stages(), microbatches, 3 * steps);
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
        if (is_collective(a[i].kind)) {
          if (why)
            *why = fmt::format("holds a collective ({} at {}): write the schedule with its SEND/RECV actions",
                               format_step(st), format_loc(st.loc));
          return false;
        }
        if (a[i].stage < 0 || a[i].stage >= static_cast<int32_t>(stage_to_rank.size())) {
          if (why)
            *why = fmt::format("{} names stage {}, but the placement has {} stages",
                               format_step(st), static_cast<int32_t>(a[i].stage), stage_to_rank.size());
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
  // PyTorch's per-rank `prev_actions`: the first rank that placed each key, and per rank the
  // keys it placed after another rank had (only in lists that repeat an action).
  KeyMap<int32_t> first = key_map_for<int32_t>(actions, comms);
  std::vector<std::unordered_set<Key, KeyHash>> again(ranks);
  auto insert = [&](size_t r, const Action& a) {
    const Key k = key_of(a);
    if (!first.try_emplace(k, static_cast<int32_t>(r)) && *first.find(k) != static_cast<int32_t>(r)) again[r].insert(k);
  };
  std::vector<size_t> head(ranks, 0);
  auto has = [&](size_t r, ActionKind k, int32_t stage, int32_t mb) {
    const Key key{k, stage, mb};
    const int32_t* f = first.find(key);
    return f && (*f == static_cast<int32_t>(r) || again[r].count(key) > 0);
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
        insert(r, a[i]);
        if (!comms.sends(a[i])) continue;
        Action send = Comms::send_of(a[i]);
        Action recv = Comms::recv_of(a[i]);
        size_t to = static_cast<size_t>(comms.stage_to_rank[recv.stage]);
        out[r].push_back(make_step(send, st.loc));
        insert(r, send);
        out[to].push_back(make_step(recv, st.loc));
        insert(to, recv);
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

// Unit-time duration of a step for the deferred placement's simulation: F, I, W 1; B 2.
double unit_duration(const Step& st) {
  Action a[2];
  double d = 0;
  for (int i = 0, n = parts(st, a); i < n; ++i) d += a[i].kind == ActionKind::kB ? 2.0 : 1.0;
  return d;
}

// As-soon-as-possible simulation of compute-only lists at unit costs (every cross-rank input
// available when its producer ends): the end time of every step, or nullopt when the steps wait
// for each other in a cycle. Inputs as in build_program (docs/facts/pipeline-schedules.md): F(s) needs F(s-1); I/B(s)
// needs F(s) and I/B(s+1); W(s) needs I(s); a missing producer is ignored (the structure pass
// reports it).
std::optional<std::vector<std::vector<double>>> simulate_unit(const std::vector<std::vector<Step>>& actions,
                                                               const Comms& comms, std::string* why) {
  struct Pos {
    int32_t rank;
    int32_t index;
  };
  KeyMap<Pos> where = key_map_for<Pos>(actions, comms);
  size_t total = 0;
  for (size_t r = 0; r < actions.size(); ++r)
    for (size_t i = 0; i < actions[r].size(); ++i) {
      Action a[2];
      for (int k = 0, n = parts(actions[r][i], a); k < n; ++k)
        where.try_emplace(key_of(a[k]), Pos{static_cast<int32_t>(r), static_cast<int32_t>(i)});
      ++total;
    }
  auto producers = [&](const Action& a, std::vector<Pos>& out) {
    auto add = [&](ActionKind k, int32_t stage) {
      if (const Pos* at = where.find(key_of({k, stage, a.microbatch}))) out.push_back(*at);
    };
    if (a.kind == ActionKind::kF && !comms.first(a.stage)) add(ActionKind::kF, a.stage - 1);
    if (a.kind == ActionKind::kI || a.kind == ActionKind::kB) {
      add(ActionKind::kF, a.stage);
      if (!comms.last(a.stage)) {
        add(ActionKind::kI, a.stage + 1);
        add(ActionKind::kB, a.stage + 1);
      }
    }
    if (a.kind == ActionKind::kW) add(ActionKind::kI, a.stage);
  };
  // Kahn's algorithm over steps: edges from the previous step of the rank and from producers.
  std::vector<std::vector<int32_t>> indegree(actions.size());
  std::vector<std::vector<std::vector<Pos>>> users(actions.size());
  for (size_t r = 0; r < actions.size(); ++r) {
    indegree[r].assign(actions[r].size(), 0);
    users[r].resize(actions[r].size());
  }
  std::vector<Pos> pro;
  for (size_t r = 0; r < actions.size(); ++r)
    for (size_t i = 0; i < actions[r].size(); ++i) {
      if (i > 0) ++indegree[r][i];
      pro.clear();
      Action a[2];
      for (int k = 0, n = parts(actions[r][i], a); k < n; ++k) producers(a[k], pro);
      for (const Pos& p : pro) {
        if (p.rank == static_cast<int32_t>(r) && p.index == static_cast<int32_t>(i)) continue;
        users[p.rank][p.index].push_back(Pos{static_cast<int32_t>(r), static_cast<int32_t>(i)});
        ++indegree[r][i];
      }
    }
  std::vector<std::vector<double>> end(actions.size());
  std::vector<std::vector<double>> ready(actions.size());
  for (size_t r = 0; r < actions.size(); ++r) {
    end[r].assign(actions[r].size(), 0.0);
    ready[r].assign(actions[r].size(), 0.0);
  }
  std::vector<Pos> queue;
  for (size_t r = 0; r < actions.size(); ++r)
    if (!actions[r].empty() && indegree[r][0] == 0) queue.push_back({static_cast<int32_t>(r), 0});
  size_t done = 0;
  auto release = [&](const Pos& u, double t) {
    ready[u.rank][u.index] = std::max(ready[u.rank][u.index], t);
    if (--indegree[u.rank][u.index] == 0) queue.push_back(u);
  };
  while (!queue.empty()) {
    Pos p = queue.back();
    queue.pop_back();
    ++done;
    double e = ready[p.rank][p.index] + unit_duration(actions[p.rank][p.index]);
    end[p.rank][p.index] = e;
    if (static_cast<size_t>(p.index) + 1 < actions[p.rank].size()) release({p.rank, p.index + 1}, e);
    for (const Pos& u : users[p.rank][p.index]) release(u, e);
  }
  if (done != total) {
    if (why) {
      *why = "malformed compute schedule: its steps wait for each other in a cycle (verify shows the cycle)";
    }
    return std::nullopt;
  }
  return end;
}

// The deferred placement. Each SEND goes right after its producer and each RECV as late as
// possible: just before its consumer, but never after a communication op that comes later in
// one global order of all transfers. That order is the unit-time as-soon-as-possible
// simulation's: transfers sorted by the time their producer ends, ties broken by rank parity
// (the higher rank's message first, so the lower rank drains its RECVs from a peer before it
// SENDs to it: docs/facts/p2p-semantics.md, the fix of pytorch/pytorch#172668).
//
// Why it cannot deadlock, under rendezvous, eager or buffered P2P and with a communication
// stream per rank or a whole rank blocking: every rank's communication ops form a subsequence of
// the one global order, so both ends of every channel agree on the message order (FIFO matching
// pairs the right messages), and by induction over the simulated time every op at time t
// completes: the transfer first in the order among those not done is at the head of both
// communication streams, its producer ended before it in the simulation (durations are
// positive), and everything placed before a RECV on its rank ran earlier in the simulation.
// Plain "RECV just before its consumer" hangs whenever two ranks consume in another order than
// their peers produce (interleaved ZB, DualPipeV), and a pairwise parity rule cannot see waits
// around a ring of three or more ranks (interleaved 1F1B at p >= 3); the global order covers
// both.
std::optional<std::vector<std::vector<Step>>> lower_deferred(const std::vector<std::vector<Step>>& actions,
                                                             const Comms& comms, std::string* why) {
  auto end = simulate_unit(actions, comms, why);
  if (!end) return std::nullopt;
  struct Msg {
    double time;
    int32_t src, step, part;
    Key key;
    int32_t dst;
  };
  std::vector<Msg> msgs;
  for (size_t r = 0; r < actions.size(); ++r)
    for (size_t i = 0; i < actions[r].size(); ++i) {
      Action a[2];
      for (int k = 0, n = parts(actions[r][i], a); k < n; ++k)
        if (comms.sends(a[k])) {
          Action s = Comms::send_of(a[k]);
          msgs.push_back({(*end)[r][i], static_cast<int32_t>(r), static_cast<int32_t>(i), k, Comms::message(s),
                          comms.peer(s)});
        }
    }
  std::sort(msgs.begin(), msgs.end(), [](const Msg& a, const Msg& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.src != b.src) return a.src > b.src;  // rank parity: the lower rank receives first
    if (a.step != b.step) return a.step < b.step;
    return a.part < b.part;
  });
  KeyMap<size_t> order = key_map_for<size_t>(actions, comms);  // message -> its place in the global order
  std::vector<std::vector<size_t>> recvs_of(actions.size());  // per rank, ascending
  for (size_t g = 0; g < msgs.size(); ++g) {
    order.try_emplace(msgs[g].key, g);
    recvs_of[msgs[g].dst].push_back(g);
  }
  auto recv_action = [](const Key& m) {
    bool fwd = m.kind == ActionKind::kSendF;
    return Action{fwd ? ActionKind::kRecvF : ActionKind::kRecvB, fwd ? m.stage + 1 : m.stage - 1, m.microbatch};
  };
  std::vector<std::vector<Step>> out(actions.size());
  for (size_t r = 0; r < actions.size(); ++r) {
    size_t next = 0;  // recvs_of[r][next] is the first RECV not placed yet
    auto recv_upto = [&](size_t g, bool inclusive, const SourceLoc& loc) {
      while (next < recvs_of[r].size() && (recvs_of[r][next] < g || (inclusive && recvs_of[r][next] == g)))
        out[r].push_back(make_step(recv_action(msgs[recvs_of[r][next++]].key), loc));
    };
    for (const Step& st : actions[r]) {
      Action a[2];
      int n = parts(st, a);
      for (int k = 0; k < n; ++k)
        if (comms.receives(a[k])) {
          if (const size_t* g = order.find(Comms::message(Comms::recv_for(a[k]))))
            recv_upto(*g, true, st.loc);  // else no producer: structure
        }
      out[r].push_back(st);
      for (int k = 0; k < n; ++k)
        if (comms.sends(a[k])) {
          Action s = Comms::send_of(a[k]);
          recv_upto(*order.find(Comms::message(s)), false, st.loc);
          out[r].push_back(make_step(s, st.loc));
        }
    }
  }
  return out;
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

std::string lowering_input_problem(const std::vector<std::vector<Step>>& actions,
                                   const std::vector<int32_t>& stage_to_rank) {
  std::string why;
  return check_input(actions, stage_to_rank, &why) ? std::string() : why;
}

std::optional<std::vector<std::vector<Step>>> lower_comms(
    const std::vector<std::vector<Step>>& actions, const std::vector<int32_t>& stage_to_rank,
    LowerPolicy policy, std::string* why, const std::vector<int32_t>& pipeline_starts) {
  if (!check_input(actions, stage_to_rank, why)) return std::nullopt;
  Comms comms{stage_to_rank, pipeline_starts};
  if (policy == LowerPolicy::kPyTorch) return lower_pytorch(actions, comms, why);
  return lower_deferred(actions, comms, why);
}

}  // namespace sc
