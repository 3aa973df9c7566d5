// The SMT cross-check engine: deadlock-freedom and worst-case memory of a Program in Z3.
#include "solver/smt_engine.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <z3++.h>

#include "solver/watchdog.h"

namespace sc {
namespace {

// One encoder per query family; the context is its first member, never copied or moved.
class SmtEncoder {
 public:
  SmtEncoder(const Program& p, const SmtOptions& o) : p_(p), opt_(o) {}
  SmtEncoder(const SmtEncoder&) = delete;
  SmtEncoder& operator=(const SmtEncoder&) = delete;

  // Returns false when Z3 answered unknown.
  bool deadlock(SmtVerdict& v);
  bool worst_case(SmtVerdict& v);

 private:
  z3::context ctx_;
  const Program& p_;
  const SmtOptions& opt_;
  Watchdog watchdog_{opt_.time_limit_s, [this] { ctx_.interrupt(); }};  // after ctx_: destroyed first

 public:
  bool out_of_time() const { return watchdog_.expired(); }

 private:

  void configure(z3::solver& s) {
    z3::params prm(ctx_);
    prm.set("random_seed", static_cast<unsigned>(opt_.seed));
    if (opt_.rlimit > 0) prm.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(opt_.rlimit, UINT32_MAX)));
    s.set(prm);
  }
  void configure(z3::optimize& s) {
    z3::params prm(ctx_);
    if (opt_.rlimit > 0) prm.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(opt_.rlimit, UINT32_MAX)));
    s.set(prm);
  }
  // For each op, the ops that must complete before it by stream order: the previous op on its
  // stream; for a member of a batched group, the op before the group and every member's
  // dependencies (the group is launched when all its inputs are ready); for the op after a
  // group, every member.
  std::vector<std::vector<OpId>> stream_prev() const {
    std::vector<std::vector<OpId>> prev(p_.ops.size());
    for (const auto& st : p_.streams)
      for (size_t i = 1; i < st.ops.size(); ++i) {
        const OpId cur = st.ops[i], before = st.ops[i - 1];
        const int32_t g = p_.ops[cur].group(), gb = p_.ops[before].group();
        if (gb >= 0 && gb != g) prev[cur] = p_.groups[gb];            // after a whole group
        else if (g < 0 || gb != g) prev[cur].push_back(before);       // plain stream order
      }
    for (const auto& members : p_.groups)
      for (OpId m : members) {
        if (m != members.front()) prev[m] = prev[members.front()];  // launched together
        for (OpId x : members)
          for (const Dep* d = p_.deps_begin(x); x != m && d != p_.deps_end(x); ++d) prev[m].push_back(d->src);
      }
    return prev;
  }
  // The rank's previous collective on the same communicator (kNoOp for the first).
  OpId comm_prev(OpId id) const {
    const Op& op = p_.ops[id];
    if (op.kind != OpKind::kCollective || op.comm() < 0 || op.seq() <= 0) return kNoOp;
    const Communicator& c = p_.comms[op.comm()];
    return c.ops[c.member_index(op.rank)][op.seq() - 1];
  }
  // For a send: the recv whose completion frees its buffer slot under buffered:N (kNoOp when
  // none is needed); `never` set when that recv does not exist.
  OpId buffer_recv(OpId send, bool* never) const {
    *never = false;
    const Op& op = p_.ops[send];
    if (p_.semantics.kind != Semantics::kBuffered || op.channel() < 0) return kNoOp;
    const Channel& ch = p_.channels[op.channel()];
    int64_t k = -1;
    for (size_t i = 0; i < ch.sends.size(); ++i)
      if (ch.sends[i] == send) k = static_cast<int64_t>(i);
    int64_t j = k - p_.semantics.buffer;
    if (j < 0) return kNoOp;
    if (j >= static_cast<int64_t>(ch.recvs.size())) {
      *never = true;
      return kNoOp;
    }
    return ch.recvs[j];
  }
};

bool SmtEncoder::deadlock(SmtVerdict& v) {
  size_t n = p_.ops.size();
  z3::expr_vector done(ctx_), t(ctx_);
  for (size_t o = 0; o < n; ++o) {
    done.push_back(ctx_.bool_const(fmt::format("done_{}", o).c_str()));
    t.push_back(ctx_.int_const(fmt::format("t_{}", o).c_str()));
  }
  z3::expr_vector rules(ctx_);
  auto after = [&](OpId a, OpId b) {  // b completes only after a
    rules.push_back(z3::implies(done[b], done[a] && t[a] < t[b]));
  };
  std::vector<std::vector<OpId>> prev = stream_prev();
  bool rendezvous = p_.semantics.kind == Semantics::kRendezvous;
  for (size_t o = 0; o < n; ++o) {
    OpId id = static_cast<OpId>(o);
    const Op& op = p_.ops[o];
    for (OpId b : prev[o]) after(b, id);
    for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d) after(d->src, id);
    if (op.kind == OpKind::kCollective && op.comm() >= 0) {
      // Every member of the instance completes at the same moment; one that never issues it
      // blocks the others forever.
      if (OpId cp = comm_prev(id); cp != kNoOp) after(cp, id);
      for (OpId m : p_.instance(id)) {
        if (m == kNoOp) rules.push_back(!done[o]);
        else if (m != id) rules.push_back(z3::implies(done[o], done[m] && t[m] == t[o]));
        // Members that disagree on the kind or the size never complete it (the graph engine's
        // instance_agrees, check/execution.cc).
        if (m != kNoOp && m != id &&
            (p_.ops[m].collective != op.collective ||
             (op.collective != CollectiveKind::kBarrier && op.collective != CollectiveKind::kCommInit &&
              p_.ops[m].bytes != op.bytes)))
          rules.push_back(!done[o]);
      }
    } else if (op.kind == OpKind::kRecv) {
      if (op.match() == kNoOp) rules.push_back(!done[o]);
      else if (rendezvous) rules.push_back(z3::implies(done[o], done[op.match()] && t[op.match()] == t[o]));
      else after(op.match(), id);
    } else if (op.kind == OpKind::kSend) {
      if (rendezvous) {
        if (op.match() == kNoOp) rules.push_back(!done[o]);
        else rules.push_back(z3::implies(done[o], done[op.match()] && t[op.match()] == t[o]));
      }
      bool never = false;
      OpId r = buffer_recv(id, &never);
      if (never) rules.push_back(!done[o]);
      else if (r != kNoOp) after(r, id);
    }
  }
  // Atomic groups (the default rendezvous): a batched group completes as one, all members at
  // the same moment; with each message's ends equal in time, a whole component of groups and
  // plain ops linked by messages completes together, as the graph engine's walk has it.
  // A group on one channel (all sends to one peer, or all receives from one) keeps the
  // channel's FIFO order and completes member by member.
  if (p_.semantics.atomic_groups())
    for (const auto& members : p_.groups)
      for (OpId m : members)
        if (m != members.front() && std::any_of(members.begin(), members.end(), [&](OpId x) {
              return p_.ops[x].channel() != p_.ops[members.front()].channel();
            })) {
          rules.push_back(done[m] == done[members.front()]);
          rules.push_back(z3::implies(done[m], t[m] == t[members.front()]));
        }
  z3::solver s(ctx_);
  configure(s);
  s.add(rules);
  z3::expr_vector all(ctx_);
  for (size_t o = 0; o < n; ++o) all.push_back(done[o]);
  z3::check_result res = s.check(all);
  if (res == z3::unknown) {
    v.message = "z3: " + s.reason_unknown();
    return false;
  }
  v.completes = res == z3::sat;
  if (v.completes) {
    v.completed_ops = static_cast<int64_t>(n);
    return true;
  }
  // The most ops any execution completes.
  z3::optimize opt(ctx_);
  configure(opt);
  opt.add(rules);
  z3::expr_vector ones(ctx_);
  for (size_t o = 0; o < n; ++o) ones.push_back(z3::ite(done[o], ctx_.int_val(1), ctx_.int_val(0)));
  z3::expr count = n ? z3::sum(ones) : ctx_.int_val(0);
  opt.maximize(count);
  if (opt.check() != z3::sat) {
    v.message = "z3: the optimiser gave no answer for the completed ops";
    return false;
  }
  v.completed_ops = opt.get_model().eval(count, true).get_numeral_int64();
  return true;
}

// The closure constraints "x_a <= x_b" form a network matrix, so the linear relaxation with
// 0 <= x <= 1 has an integral optimum (total unimodularity; Picard 1976): the maximum over real
// x is the maximum over sets, and Z3's simplex finds it without a Boolean search.
bool SmtEncoder::worst_case(SmtVerdict& v) {
  size_t n = p_.ops.size();
  z3::expr_vector st(ctx_), en(ctx_);
  z3::expr zero = ctx_.real_val(0), one = ctx_.real_val(1);
  z3::expr_vector closed(ctx_);
  for (size_t o = 0; o < n; ++o) {
    st.push_back(ctx_.real_const(fmt::format("s_{}", o).c_str()));
    en.push_back(ctx_.real_const(fmt::format("e_{}", o).c_str()));
    closed.push_back(zero <= en[o] && en[o] <= st[o] && st[o] <= one);
  }
  // A moment is a set of events closed under "happens before": x_later <= x_earlier.
  std::vector<std::vector<OpId>> prev = stream_prev();
  bool rendezvous = p_.semantics.kind == Semantics::kRendezvous;
  auto hb = [&](const z3::expr& earlier, const z3::expr& later) { closed.push_back(later <= earlier); };
  for (size_t o = 0; o < n; ++o) {
    OpId id = static_cast<OpId>(o);
    const Op& op = p_.ops[o];
    for (OpId b : prev[o]) hb(en[b], st[o]);
    for (const Dep* d = p_.deps_begin(id); d != p_.deps_end(id); ++d) hb(en[d->src], st[o]);
    if (op.kind == OpKind::kCollective && op.comm() >= 0) {
      // A collective ends only after every member has started; a member starts after the
      // rank's previous collective on the communicator.
      if (OpId cp = comm_prev(id); cp != kNoOp) hb(en[cp], st[o]);
      for (OpId m : p_.instance(id))
        if (m != kNoOp && m != id) hb(st[m], en[o]);
    }
    if (op.kind == OpKind::kRecv && op.match() != kNoOp) hb(st[op.match()], en[o]);
    if (op.kind == OpKind::kSend) {
      if (rendezvous && op.match() != kNoOp) hb(st[op.match()], en[o]);
      bool never = false;
      OpId r = buffer_recv(id, &never);
      if (r != kNoOp) hb(en[r], en[o]);
    }
  }
  v.worst_case_bytes_per_rank.assign(p_.num_ranks, 0);
  for (int32_t rank = 0; rank < p_.num_ranks; ++rank) {
    z3::expr_vector terms(ctx_);
    for (size_t o = 0; o < n; ++o) {
      if (p_.ops[o].rank != rank) continue;
      for (const MemEffect* m = p_.mem_begin(static_cast<OpId>(o)); m != p_.mem_end(static_cast<OpId>(o)); ++m)
        if (m->bytes != 0) terms.push_back((m->at_end ? en[o] : st[o]) * ctx_.real_val(static_cast<int64_t>(m->bytes)));
    }
    int64_t static_bytes = rank < static_cast<int32_t>(p_.static_bytes_per_rank.size()) ? p_.static_bytes_per_rank[rank] : 0;
    if (terms.empty()) {
      v.worst_case_bytes_per_rank[rank] = static_bytes;
      continue;
    }
    z3::optimize opt(ctx_);
    configure(opt);
    opt.add(closed);
    z3::expr live = z3::sum(terms);
    opt.maximize(live);
    if (opt.check() != z3::sat) {
      v.message = fmt::format("z3: the optimiser gave no answer for rank {}", rank);
      return false;
    }
    z3::expr best = opt.get_model().eval(live, true);
    int64_t num = 0, den = 1;
    if (!best.is_numeral_i64(num) && !(best.numerator().is_numeral_i64(num) && best.denominator().is_numeral_i64(den))) {
      v.message = fmt::format("z3: the worst case of rank {} is not a whole number of bytes", rank);
      return false;
    }
    if (den != 1) {
      v.message = fmt::format("z3: the worst case of rank {} is fractional (not a closure)", rank);
      return false;
    }
    v.worst_case_bytes_per_rank[rank] = static_bytes + num;
  }
  return true;
}

}  // namespace

SmtVerdict smt_check(const Program& program, const SmtOptions& options) {
  SmtVerdict v;
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  bool out_of_time = false;
  try {
    SmtEncoder enc(program, options);
    // An answer given after the deadline is discarded: Z3 interrupted mid-search can return an
    // answer of a search it never finished, and a cut-off search is inconclusive, not a verdict.
    const bool deadlock_ok = enc.deadlock(v) && !enc.out_of_time();
    if (!deadlock_ok) {
      v.inconclusive = true;
      if (v.message.empty()) v.message = "z3: interrupted";
    } else if (v.completes && (!enc.worst_case(v) || enc.out_of_time())) {
      v.inconclusive = true;
      v.deadlock_established = true;
      if (v.message.empty()) v.message = "z3: interrupted";
    }
    out_of_time = enc.out_of_time();
  } catch (const z3::exception& e) {
    // An interrupt from the watchdog can surface as an exception ("canceled") from any Z3 call,
    // not only as an unknown answer: the deadline is then the reason, whatever Z3 says.
    v.inconclusive = true;
    v.message = fmt::format("z3: {}", e.msg());
    out_of_time = options.time_limit_s > 0 && elapsed() >= options.time_limit_s;
  }
  if (v.inconclusive && out_of_time)
    v.message = fmt::format("the time limit of {} s ran out ({})", options.time_limit_s, v.message);
  v.seconds = elapsed();
  return v;
}

int apply_smt_engine(VerifyResult& r, std::string* note, const SmtOptions& options) {
  SmtVerdict v = smt_check(r.program, options);
  r.pass_times.push_back({"smt", v.seconds});
  auto per_rank = [](const std::vector<int64_t>& b) {
    std::string s;
    for (int64_t x : b) s += (s.empty() ? "" : " ") + std::to_string(x);
    return s;
  };
  if (v.inconclusive) {
    std::string established =
        v.deadlock_established
            ? fmt::format("established: {}; not established: the worst-case memory",
                          v.completes ? "deadlock-free" : "a deadlock")
            : std::string("nothing established by the smt engine; the graph engine's verdict above stands unconfirmed");
    if (note) *note = fmt::format("smt engine: inconclusive after {:.3f} s: {}; {}", v.seconds, v.message, established);
    return 5;
  }
  int64_t graph_done = 0;
  for (uint8_t d : r.execution.done) graph_done += d;
  bool agree = v.completes == r.execution.completed && v.completed_ops == graph_done;
  if (agree && v.completes && r.worst_case) agree = v.worst_case_bytes_per_rank == r.worst_case->bytes_per_rank;
  std::string what = v.completes ? fmt::format("deadlock-free; worst-case bytes per rank {}", per_rank(v.worst_case_bytes_per_rank))
                                 : fmt::format("deadlock: at most {} of {} ops complete", v.completed_ops, r.program.ops.size());
  if (note)
    *note = fmt::format("smt engine: {} ({:.3f} s); {}", what, v.seconds,
                        agree ? "agrees with the graph engine" : "DISAGREES with the graph engine");
  if (!agree) return 70;
  if (v.completes && r.worst_case) r.worst_case->bytes_per_rank = v.worst_case_bytes_per_rank;
  return r.exit_code;
}

}  // namespace sc
