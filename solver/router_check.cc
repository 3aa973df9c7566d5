// Z3 encodings of the router properties: two copies of the router over symbolic scores
// (noninterference queries, DESIGN "Router token flows"), each witness replayed through route().
#include "solver/router_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <z3++.h>

#include "router/dispatch.h"
#include "solver/watchdog.h"

namespace sc {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One symbolic router input: scores [token][expert] and a random draw per token.
struct SymInput {
  std::vector<z3::expr> scores;
  std::vector<z3::expr> draws;
};

// Symbolic decisions: sel (routed to the expert) and keep (routed and within capacity).
struct SymDecisions {
  std::vector<z3::expr> sel, keep;
};

enum class Outcome { kSat, kUnsat, kUnknown };

class RouterEncoder {
 public:
  RouterEncoder(const RouterSpec& spec, const RouterCheckOptions& opt)
      : watchdog_(opt.time_limit_s, [this] { ctx_.interrupt(); }),
        solver_(ctx_),
        experts_(spec.train.experts),
        tokens_(spec.batch * spec.seq_len) {
    rlimit_ = static_cast<unsigned>(std::min<uint64_t>(opt.rlimit, 4'000'000'000u));
    plain_rlimit_ = static_cast<unsigned>(std::min<uint64_t>(opt.plain_witness_rlimit, 4'000'000'000u));
    plain_witness_ = opt.plain_witness;
    z3::params p(ctx_);
    p.set("rlimit", rlimit_);
    p.set("random_seed", opt.seed);
    solver_.set(p);
    max_score_ = std::max(9, 2 * tokens_ * (experts_ + 1));
  }
  RouterEncoder(const RouterEncoder&) = delete;
  RouterEncoder& operator=(const RouterEncoder&) = delete;

  // Fresh scores in [0, max_score_] and draws in [0, max_score_].
  SymInput input(const std::string& tag) {
    SymInput in;
    for (int32_t i = 0; i < tokens_; ++i) {
      for (int32_t e = 0; e < experts_; ++e) {
        in.scores.push_back(ctx_.int_const(fmt::format("{}_s{}_{}", tag, i, e).c_str()));
        bound(in.scores.back());
      }
      in.draws.push_back(ctx_.int_const(fmt::format("{}_d{}", tag, i).c_str()));
      bound(in.draws.back());
    }
    return in;
  }
  // The same scores with fresh draws.
  SymInput with_fresh_draws(const SymInput& in, const std::string& tag) {
    SymInput out = in;
    for (int32_t i = 0; i < tokens_; ++i) {
      out.draws[static_cast<size_t>(i)] = ctx_.int_const(fmt::format("{}_d{}", tag, i).c_str());
      bound(out.draws[static_cast<size_t>(i)]);
    }
    return out;
  }
  // Token `token` of `in` as a one-token input.
  SymInput alone(const SymInput& in, int32_t token) const {
    SymInput out;
    for (int32_t e = 0; e < experts_; ++e) out.scores.push_back(in.scores[idx(token, e)]);
    out.draws.push_back(in.draws[static_cast<size_t>(token)]);
    return out;
  }

  SymDecisions encode(const RouterConfig& c, int32_t batch, int32_t seq_len, const SymInput& in, TieOrder ties);

  z3::expr differ(const SymDecisions& a, int32_t ia, const SymDecisions& b, int32_t ib) {
    z3::expr_vector v(ctx_);
    for (int32_t e = 0; e < experts_; ++e) {
      v.push_back(a.sel[idx(ia, e)] != b.sel[idx(ib, e)]);
      v.push_back(a.keep[idx(ia, e)] != b.keep[idx(ib, e)]);
    }
    return z3::mk_or(v);
  }
  z3::expr dropped(const RouterConfig& c, const SymDecisions& d, int32_t i) {
    z3::expr_vector v(ctx_);
    if (c.policy == RoutingPolicy::kExpertChoice) {
      for (int32_t e = 0; e < experts_; ++e) v.push_back(!d.keep[idx(i, e)]);
      return z3::mk_and(v);
    }
    for (int32_t e = 0; e < experts_; ++e) v.push_back(d.sel[idx(i, e)] && !d.keep[idx(i, e)]);
    return z3::mk_or(v);
  }
  z3::expr agree(const SymInput& a, const SymInput& b, int32_t token) {
    z3::expr_vector v(ctx_);
    for (int32_t e = 0; e < experts_; ++e) v.push_back(a.scores[idx(token, e)] == b.scores[idx(token, e)]);
    v.push_back(a.draws[static_cast<size_t>(token)] == b.draws[static_cast<size_t>(token)]);
    return z3::mk_and(v);
  }
  z3::expr any(const std::vector<z3::expr>& xs) {
    z3::expr_vector v(ctx_);
    for (const auto& x : xs) v.push_back(x);
    return z3::mk_or(v);
  }

  // Every input's scores are pairwise different.
  void add_distinct(const std::vector<const SymInput*>& inputs) {
    for (const SymInput* in : inputs) {
      z3::expr_vector v(ctx_);
      for (const auto& x : in->scores) v.push_back(x);
      solver_.add(z3::distinct(v));
    }
  }
  bool plain_witness() const { return plain_witness_; }
  // Switches to the smaller budget of the optional plain-witness queries and back.
  void use_plain_rlimit(bool on) { solver_.set("rlimit", on ? plain_rlimit_ : rlimit_); }
  void push() { solver_.push(); }
  void pop(unsigned n = 1) { solver_.pop(n); }
  void add(const z3::expr& e) { solver_.add(e); }
  Outcome check() {
    z3::check_result r = solver_.check();
    // Once the deadline has passed, an answer may come from an interrupted search: not a proof.
    if (watchdog_.expired()) return Outcome::kUnknown;
    if (r == z3::sat) {
      model_ = solver_.get_model();
      return Outcome::kSat;
    }
    return r == z3::unsat ? Outcome::kUnsat : Outcome::kUnknown;
  }
  std::string reason_unknown() { return solver_.reason_unknown(); }

  // After a satisfiable check: looks for a model where each input's scores are all different (no
  // tie decides anything, so the witness reads plainly); keeps the first model when there is none.
  void prefer_distinct(const std::vector<const SymInput*>& inputs) {
    if (!plain_witness_) return;
    solver_.push();
    add_distinct(inputs);
    solver_.set("rlimit", plain_rlimit_);
    check();  // on failure the model stays the previous one
    solver_.set("rlimit", rlimit_);
    solver_.pop();
  }

  // Values in the last satisfying model.
  bool value(const z3::expr& e) const { return model_->eval(e, true).is_true(); }
  RouterInput value(const SymInput& in, int32_t batch, int32_t seq_len) const {
    RouterInput out;
    out.batch = batch;
    out.seq_len = seq_len;
    for (const auto& s : in.scores) out.scores.push_back(static_cast<double>(model_->eval(s, true).get_numeral_int64()));
    for (const auto& d : in.draws) out.draws.push_back(static_cast<double>(model_->eval(d, true).get_numeral_int64()));
    return out;
  }
  std::vector<Fate> fates(const SymDecisions& d, int32_t i) const {
    std::vector<Fate> out;
    for (int32_t e = 0; e < experts_; ++e) {
      bool s = value(d.sel[idx(i, e)]), k = value(d.keep[idx(i, e)]);
      out.push_back(!s ? Fate::kNone : k ? Fate::kKept : Fate::kDropped);
    }
    return out;
  }

 private:
  size_t idx(int32_t token, int32_t e) const { return static_cast<size_t>(token) * experts_ + e; }
  void bound(const z3::expr& x) {
    solver_.add(x >= 0);
    solver_.add(x <= max_score_);
  }
  // At most k of `bs` are true (k < 0: false).
  z3::expr at_most(const std::vector<z3::expr>& bs, int64_t k) {
    if (k < 0) return ctx_.bool_val(false);
    if (static_cast<int64_t>(bs.size()) <= k) return ctx_.bool_val(true);
    z3::expr_vector v(ctx_);
    for (const auto& b : bs) v.push_back(b);
    return z3::atmost(v, static_cast<unsigned>(k));
  }

  z3::context ctx_;  // first member: everything below refers to it
  Watchdog watchdog_;  // interrupts ctx_ at the time limit; destroyed before it
  z3::solver solver_;
  std::optional<z3::model> model_;
  int32_t experts_;
  int32_t tokens_;
  int max_score_ = 0;
  unsigned rlimit_ = 0;
  unsigned plain_rlimit_ = 0;
  bool plain_witness_ = true;
};

SymDecisions RouterEncoder::encode(const RouterConfig& c, int32_t batch, int32_t seq_len, const SymInput& in,
                                   TieOrder ties) {
  const int32_t n = batch * seq_len, E = experts_;
  const bool low = ties == TieOrder::kLowFirst;
  auto rank = [&](int32_t i) { return fill_rank(c, batch, seq_len, i / seq_len, i % seq_len); };
  auto scope = [&](int32_t i) { return scope_of(c, i / seq_len); };
  const int64_t cap = expert_capacity(c, scope_tokens(c, batch, seq_len));
  auto s = [&](int32_t i, int32_t e) { return in.scores[idx(i, e)]; };
  std::vector<z3::expr> best;
  if (c.policy == RoutingPolicy::kTokenChoice && c.drop_policy == DropPolicy::kPriority)
    for (int32_t i = 0; i < n; ++i) {
      z3::expr m = s(i, 0);
      for (int32_t e = 1; e < E; ++e) m = z3::ite(s(i, e) > m, s(i, e), m);
      best.push_back(m);
    }
  auto key = [&](int32_t i, int32_t e) -> z3::expr {
    if (c.policy == RoutingPolicy::kExpertChoice || c.drop_policy == DropPolicy::kProbs) return s(i, e);
    if (c.drop_policy == DropPolicy::kPriority) return best[static_cast<size_t>(i)];
    return in.draws[static_cast<size_t>(i)];
  };
  // j goes before i in expert e's queue (score-based policies): higher key first, ties in fill order.
  auto ahead = [&](int32_t j, int32_t i, int32_t e) -> z3::expr {
    bool pref = low ? rank(j) < rank(i) : rank(j) > rank(i);
    return pref ? key(j, e) >= key(i, e) : key(j, e) > key(i, e);
  };
  SymDecisions d;
  if (c.policy == RoutingPolicy::kExpertChoice) {
    for (int32_t i = 0; i < n; ++i)
      for (int32_t e = 0; e < E; ++e) {
        std::vector<z3::expr> bs;
        for (int32_t j = 0; j < n; ++j)
          if (j != i && scope(j) == scope(i)) bs.push_back(ahead(j, i, e));
        z3::expr k = at_most(bs, cap - 1);
        d.sel.push_back(k);
        d.keep.push_back(k);
      }
    return d;
  }
  for (int32_t i = 0; i < n; ++i)
    for (int32_t e = 0; e < E; ++e) {
      std::vector<z3::expr> bs;
      for (int32_t x = 0; x < E; ++x) {
        if (x == e) continue;
        bool pref = low ? x < e : x > e;
        bs.push_back(pref ? s(i, x) >= s(i, e) : s(i, x) > s(i, e));
      }
      d.sel.push_back(at_most(bs, c.top_k - 1));
    }
  for (int32_t i = 0; i < n; ++i)
    for (int32_t e = 0; e < E; ++e) {
      if (c.dropless) {
        d.keep.push_back(d.sel[idx(i, e)]);
        continue;
      }
      std::vector<z3::expr> bs;
      for (int32_t j = 0; j < n; ++j) {
        if (j == i || scope(j) != scope(i)) continue;
        if (c.drop_policy == DropPolicy::kPosition) {
          if (rank(j) < rank(i)) bs.push_back(d.sel[idx(j, e)]);
        } else {
          bs.push_back(d.sel[idx(j, e)] && ahead(j, i, e));
        }
      }
      d.keep.push_back(d.sel[idx(i, e)] && at_most(bs, cap - 1));
    }
  return d;
}

RouterDecisions to_decisions(int32_t experts, const std::vector<Fate>& f) {
  RouterDecisions d;
  d.experts = experts;
  d.fates = f;
  return d;
}

// Fills a witness from the encoder's model: inputs, the flipping token, the causes, and the plain
// router's replay (b_alone: input b's token is routed alone, as batch-1 decoding does).
RouterWitness make_witness(const RouterEncoder& enc, const RouterSpec& spec, const SymInput& sa, const SymInput& sb,
                           const SymDecisions& da, const SymDecisions& db, int32_t token, int32_t db_index,
                           const RouterConfig& ca, TieOrder ta, const RouterConfig& cb, TieOrder tb, bool b_alone) {
  const int32_t E = spec.train.experts, n = spec.batch * spec.seq_len;
  RouterWitness w;
  w.a = enc.value(sa, spec.batch, spec.seq_len);
  w.b = enc.value(sb, spec.batch, spec.seq_len);
  w.token = token;
  for (int32_t i = 0; i < n; ++i) {
    bool same = w.a.draws[static_cast<size_t>(i)] == w.b.draws[static_cast<size_t>(i)];
    for (int32_t e = 0; e < E; ++e)
      same = same && w.a.scores[static_cast<size_t>(i) * E + e] == w.b.scores[static_cast<size_t>(i) * E + e];
    // Draws only matter under random token selection; elsewhere they are not part of the input.
    bool draw_only = true;
    for (int32_t e = 0; e < E; ++e)
      draw_only = draw_only && w.a.scores[static_cast<size_t>(i) * E + e] == w.b.scores[static_cast<size_t>(i) * E + e];
    bool random = ca.drop_policy == DropPolicy::kRandom || cb.drop_policy == DropPolicy::kRandom;
    if (!same && (random || !draw_only)) w.causes.push_back(i);
  }
  if (ca.drop_policy != DropPolicy::kRandom && cb.drop_policy != DropPolicy::kRandom) {
    w.a.draws.clear();
    w.b.draws.clear();
  }
  w.fate_a = route(ca, w.a, ta);
  w.fate_b = b_alone ? route_alone(cb, w.b, token, tb) : route(cb, w.b, tb);
  w.fate_b_token = b_alone ? 0 : token;
  RouterDecisions ma = to_decisions(E, enc.fates(da, token)), mb = to_decisions(E, enc.fates(db, db_index));
  bool match_a = true, match_b = true, flip = false;
  for (int32_t e = 0; e < E; ++e) {
    match_a = match_a && ma.fate(0, e) == w.fate_a.fate(token, e);
    match_b = match_b && mb.fate(0, e) == w.fate_b.fate(w.fate_b_token, e);
    flip = flip || w.fate_a.fate(token, e) != w.fate_b.fate(w.fate_b_token, e);
  }
  w.replayed = match_a && match_b && flip;
  return w;
}

std::string cause_list(const std::vector<int32_t>& causes, int32_t token, int32_t seq_len) {
  std::vector<std::string> parts;
  for (int32_t c : causes) {
    std::string rel;
    if (c / seq_len == token / seq_len)
      rel = c % seq_len > token % seq_len ? "a later token of its sequence" : "an earlier token of its sequence";
    else
      rel = c % seq_len > token % seq_len ? "a later position of another sequence" : "another sequence";
    parts.push_back(fmt::format("{} ({})", token_name(c, seq_len), rel));
  }
  return parts.empty() ? "nothing else" : fmt::format("{}", fmt::join(parts, ", "));
}

// Two inputs of the same router: b agrees with a on the tokens marked in `agree`, by using a's
// variables there (shared terms, so the solver need not prove the copies equal token by token).
struct Pair {
  SymInput b;
  SymDecisions db;
};

// Is there a pair of inputs agreeing on `agree` where some token of `targets` changes fate? On
// sat, `*out` holds the second input and its decisions for the encoder's model. With `distinct`,
// asks for all scores of each input to differ (a plainer witness). `polish` marks a query that
// only improves a witness: it runs under the smaller witness budget.
Outcome pair_query(RouterEncoder& enc, const RouterSpec& spec, const SymInput& a, const SymDecisions& da,
                   const SymInput& b, const std::vector<char>& agree, const std::vector<int32_t>& targets,
                   bool distinct, bool polish, std::optional<Pair>* out) {
  if (distinct && !enc.plain_witness()) return Outcome::kUnknown;
  Pair p;
  p.b = b;
  for (size_t i = 0; i < agree.size(); ++i)
    if (agree[i]) {
      for (int32_t e = 0; e < spec.train.experts; ++e)
        p.b.scores[i * spec.train.experts + e] = a.scores[i * spec.train.experts + e];
      p.b.draws[i] = a.draws[i];
    }
  p.db = enc.encode(spec.train, spec.batch, spec.seq_len, p.b, TieOrder::kLowFirst);
  std::vector<z3::expr> flips;
  for (int32_t t : targets) flips.push_back(enc.differ(da, t, p.db, t));
  enc.push();
  enc.add(enc.any(flips));
  if (distinct) enc.add_distinct({&a, &p.b});
  if (polish) enc.use_plain_rlimit(true);
  Outcome o = enc.check();
  if (polish) enc.use_plain_rlimit(false);
  enc.pop();
  if (o == Outcome::kSat) *out = std::move(p);
  return o;
}

// After a satisfiable pair query: greedily lets each token of `candidates` agree while the query
// stays satisfiable, so the tokens left differing are the cause; then prefers a model without tied
// scores. `*pair` and the encoder's model stay those of the last satisfiable query.
void minimize(RouterEncoder& enc, const RouterSpec& spec, const SymInput& a, const SymDecisions& da,
              const SymInput& b, std::vector<char>& agree, const std::vector<int32_t>& targets,
              const std::vector<int32_t>& candidates, std::optional<Pair>* pair, int32_t* queries) {
  for (int32_t j : candidates) {
    agree[static_cast<size_t>(j)] = 1;
    ++*queries;
    std::optional<Pair> next;
    if (pair_query(enc, spec, a, da, b, agree, targets, false, true, &next) == Outcome::kSat)
      *pair = std::move(next);
    else
      agree[static_cast<size_t>(j)] = 0;
  }
  // The model after a failed check is still the last satisfying one, and *pair matches it.
  ++*queries;
  std::optional<Pair> plain;
  if (pair_query(enc, spec, a, da, b, agree, targets, true, true, &plain) == Outcome::kSat) *pair = std::move(plain);
}

// One two-copy query of a noninterference property: inputs A and B agree on the tokens marked
// in `agree`; the decisions of `targets` must not differ. `free` are the tokens a witness may be
// minimised over; `agreed` says in words what the inputs share.
struct AgreementCase {
  std::vector<char> agree;
  std::vector<int32_t> targets, free;
  std::string agreed;
};

// Runs the cases in order on the training configuration. The first satisfiable one becomes the
// violation: its witness minimised, the first target whose fate flips named, and `violation`
// (given that token and its causes) as the message. Otherwise the property holds with
// `holds`, or is inconclusive when a query came back unknown.
template <typename MakeCase, typename Violation>
void run_agreement_cases(const RouterSpec& spec, const RouterCheckOptions& opt, size_t count, MakeCase make_case,
                         Violation violation, const std::string& holds, PropertyResult& r) {
  const int32_t T = spec.seq_len;
  RouterEncoder enc(spec, opt);
  SymInput a = enc.input("a"), b = enc.input("b");
  SymDecisions da = enc.encode(spec.train, spec.batch, T, a, TieOrder::kLowFirst);
  bool unknown = false;
  for (size_t k = 0; k < count; ++k) {
    AgreementCase q = make_case(k);
    ++r.queries;
    std::optional<Pair> pair;
    Outcome o = pair_query(enc, spec, a, da, b, q.agree, q.targets, false, false, &pair);
    if (o == Outcome::kUnknown) unknown = true;
    if (o != Outcome::kSat) continue;
    minimize(enc, spec, a, da, b, q.agree, q.targets, opt.minimize_witness ? q.free : std::vector<int32_t>{}, &pair,
             &r.queries);
    int32_t target = q.targets.front();
    for (int32_t t : q.targets)
      if (enc.value(enc.differ(da, t, pair->db, t))) {
        target = t;
        break;
      }
    RouterWitness w = make_witness(enc, spec, a, pair->b, da, pair->db, target, target, spec.train,
                                   TieOrder::kLowFirst, spec.train, TieOrder::kLowFirst, false);
    std::string causes = cause_list(w.causes, target, T);
    w.explanation = fmt::format("inputs A and B agree on {}; token {} changes fate because of {}", q.agreed,
                                token_name(target, T), causes);
    r.status = PropertyStatus::kViolated;
    r.message = violation(q, target, causes);
    r.witness = std::move(w);
    return;
  }
  if (unknown) {
    r.status = PropertyStatus::kInconclusive;
    r.message = fmt::format("the solver gave up ({}); not proven", enc.reason_unknown());
  } else {
    r.message = holds;
  }
}

PropertyResult prefix_causality(const RouterSpec& spec, const RouterCheckOptions& opt) {
  PropertyResult r;
  r.name = "prefix_causality";
  r.kind = "causality";
  r.loc = spec.locs.drop_policy.valid() ? spec.locs.drop_policy : spec.locs.router;
  if (spec.train.policy == RoutingPolicy::kExpertChoice && spec.locs.policy.valid()) r.loc = spec.locs.policy;
  const int32_t B = spec.batch, T = spec.seq_len, n = B * T;
  // Case k: token (k % B, k / B) against inputs that agree on every position <= its own.
  auto make_case = [&](size_t k) {
    const int32_t t = static_cast<int32_t>(k) / B, bb = static_cast<int32_t>(k) % B;
    AgreementCase q;
    q.agree.assign(static_cast<size_t>(n), 0);
    q.targets = {bb * T + t};
    for (int32_t i = 0; i < n; ++i) {
      if (i % T <= t) q.agree[static_cast<size_t>(i)] = 1;
      else q.free.push_back(i);
    }
    q.agreed = fmt::format("every token at positions <= {}", t);
    return q;
  };
  run_agreement_cases(
      spec, opt, static_cast<size_t>(n), make_case,
      [&](const AgreementCase&, int32_t target, const std::string& causes) {
        return fmt::format("token {}'s routing depends on later tokens: {}", token_name(target, T), causes);
      },
      "no token's experts, gates or drop status depend on a later position", r);
  return r;
}

PropertyResult batch_independence(const RouterSpec& spec, const RouterCheckOptions& opt) {
  PropertyResult r;
  r.name = "batch_independence";
  r.kind = "causality";
  r.loc = spec.locs.scope.valid() ? spec.locs.scope : spec.locs.router;
  const int32_t B = spec.batch, T = spec.seq_len, n = B * T;
  if (B == 1) {
    r.message = "the bound has one sequence (raise bound.batch to compare sequences)";
    return r;
  }
  // Case bb: the tokens of sequence bb against inputs that agree on all of that sequence.
  auto make_case = [&](size_t k) {
    const int32_t bb = static_cast<int32_t>(k);
    AgreementCase q;
    q.agree.assign(static_cast<size_t>(n), 0);
    for (int32_t i = 0; i < n; ++i) {
      if (i / T == bb) {
        q.agree[static_cast<size_t>(i)] = 1;
        q.targets.push_back(i);
      } else {
        q.free.push_back(i);
      }
    }
    q.agreed = fmt::format("all of sequence {}", bb);
    return q;
  };
  run_agreement_cases(
      spec, opt, static_cast<size_t>(B), make_case,
      [&](const AgreementCase& q, int32_t target, const std::string& causes) {
        return fmt::format("sequence {}'s routing depends on other sequences: token {} flips with {}",
                           q.targets.front() / T, token_name(target, T), causes);
      },
      "no sequence's routing depends on another sequence", r);
  return r;
}

PropertyResult train_inference(const RouterSpec& spec, const RouterCheckOptions& opt) {
  PropertyResult r;
  r.name = "train_inference";
  r.kind = "causality";
  r.loc = spec.locs.inference.valid() ? spec.locs.inference
          : spec.locs.capacity.valid() ? spec.locs.capacity
                                       : spec.locs.router;
  const int32_t B = spec.batch, T = spec.seq_len, n = B * T;
  RouterEncoder enc(spec, opt);
  SymInput a = enc.input("a");
  SymInput serve = enc.with_fresh_draws(a, "serve");
  SymDecisions dt = enc.encode(spec.train, B, T, a, TieOrder::kLowFirst);
  std::vector<SymDecisions> di;
  std::vector<z3::expr> flips;
  for (int32_t i = 0; i < n; ++i) {
    di.push_back(enc.encode(spec.inference, 1, 1, enc.alone(serve, i), TieOrder::kLowFirst));
    flips.push_back(enc.differ(dt, i, di.back(), 0));
  }
  enc.add(enc.any(flips));
  ++r.queries;
  Outcome o = enc.check();
  if (o == Outcome::kUnknown) {
    r.status = PropertyStatus::kInconclusive;
    r.message = fmt::format("the solver gave up ({}); not proven", enc.reason_unknown());
    return r;
  }
  if (o == Outcome::kUnsat) {
    r.message = "training and batch-1 decoding route and drop every token the same way";
    return r;
  }
  r.queries += 1;
  enc.prefer_distinct({&a});
  int32_t target = 0;
  for (int32_t i = 0; i < n; ++i)
    if (enc.value(flips[static_cast<size_t>(i)])) {
      target = i;
      break;
    }
  RouterWitness w = make_witness(enc, spec, a, a, dt, di[static_cast<size_t>(target)], target, 0, spec.train,
                                 TieOrder::kLowFirst, spec.inference, TieOrder::kLowFirst, true);
  w.a_label = "training";
  w.b_label = "decoding";
  w.causes.clear();
  w.explanation = fmt::format(
      "in training token {} shares capacity with the other tokens of its {}; batch-1 decoding routes it alone",
      token_name(target, T), scope_name(spec.train.scope));
  r.status = PropertyStatus::kViolated;
  r.message = fmt::format("token {} is routed differently in training ({}) and in batch-1 decoding ({})",
                          token_name(target, T), w.fate_a.describe(target), w.fate_b.describe(0));
  r.witness = std::move(w);
  return r;
}

PropertyResult drop_free(const RouterSpec& spec, const RouterCheckOptions& opt) {
  PropertyResult r;
  r.name = "drop_free";
  r.kind = "drop";
  r.loc = spec.locs.capacity.valid() ? spec.locs.capacity : spec.locs.router;
  const RouterConfig& c = spec.train;
  const int32_t B = spec.batch, T = spec.seq_len, n = B * T;
  if (c.policy == RoutingPolicy::kTokenChoice && c.dropless) {
    r.message = "dropless: experts have no capacity, nothing is dropped";
    return r;
  }
  RouterEncoder enc(spec, opt);
  SymInput a = enc.input("a");
  SymDecisions d = enc.encode(c, B, T, a, TieOrder::kLowFirst);
  std::vector<z3::expr> drops;
  for (int32_t i = 0; i < n; ++i) drops.push_back(enc.dropped(c, d, i));
  enc.add(enc.any(drops));
  ++r.queries;
  Outcome o = enc.check();
  const int64_t scope_n = scope_tokens(c, B, T), cap = expert_capacity(c, scope_n);
  if (o == Outcome::kUnknown) {
    r.status = PropertyStatus::kInconclusive;
    r.message = fmt::format("the solver gave up ({}); not proven", enc.reason_unknown());
    return r;
  }
  if (o == Outcome::kUnsat) {
    r.message = fmt::format("capacity {} per expert covers the {} tokens of a {}", cap, scope_n, scope_name(c.scope));
    return r;
  }
  r.queries += 1;
  enc.prefer_distinct({&a});
  int32_t target = 0;
  for (int32_t i = 0; i < n; ++i)
    if (enc.value(drops[static_cast<size_t>(i)])) {
      target = i;
      break;
    }
  RouterWitness w = make_witness(enc, spec, a, a, d, d, target, target, c, TieOrder::kLowFirst, c,
                                 TieOrder::kLowFirst, false);
  // One input: the "flip" is the drop itself; the replay must show it dropped.
  bool shown = false;
  for (int32_t e = 0; e < c.experts; ++e) shown = shown || w.fate_a.fate(target, e) == Fate::kDropped;
  if (c.policy == RoutingPolicy::kExpertChoice) {
    shown = true;
    for (int32_t e = 0; e < c.experts; ++e) shown = shown && w.fate_a.fate(target, e) == Fate::kNone;
  }
  RouterDecisions model = to_decisions(c.experts, enc.fates(d, target));
  bool match = true;
  for (int32_t e = 0; e < c.experts; ++e) match = match && model.fate(0, e) == w.fate_a.fate(target, e);
  w.replayed = shown && match;
  w.a_label = w.b_label = "A";
  w.explanation = fmt::format("capacity is {} per expert per {} of {} tokens; docs/facts/moe-router.md: nothing is dropped only when "
                              "capacity >= tokens in scope",
                              cap, scope_name(c.scope), scope_n);
  r.status = PropertyStatus::kViolated;
  r.message = fmt::format("token {} can be dropped ({})", token_name(target, T), w.fate_a.describe(target));
  r.witness = std::move(w);
  return r;
}

PropertyResult deterministic(const RouterSpec& spec, const RouterCheckOptions& opt) {
  PropertyResult r;
  r.name = "deterministic";
  r.kind = "determinism";
  const RouterConfig& c = spec.train;
  const bool random = c.policy == RoutingPolicy::kTokenChoice && !c.dropless && c.drop_policy == DropPolicy::kRandom;
  const bool ties = c.tie_break == TieBreak::kUnspecified;
  r.loc = ties && spec.locs.tie_break.valid() ? spec.locs.tie_break
          : spec.locs.drop_policy.valid()    ? spec.locs.drop_policy
                                             : spec.locs.router;
  if (!random && !ties) {
    r.message = "no random draw decides a token, and ties go to the lower index";
    return r;
  }
  const int32_t B = spec.batch, T = spec.seq_len, n = B * T;
  const TieOrder tb = ties ? TieOrder::kHighFirst : TieOrder::kLowFirst;
  RouterEncoder enc(spec, opt);
  SymInput a = enc.input("a");
  SymInput b = random ? enc.with_fresh_draws(a, "b") : a;
  SymDecisions da = enc.encode(c, B, T, a, TieOrder::kLowFirst);
  SymDecisions db = enc.encode(c, B, T, b, tb);
  std::vector<z3::expr> flips;
  for (int32_t i = 0; i < n; ++i) flips.push_back(enc.differ(da, i, db, i));
  enc.add(enc.any(flips));
  ++r.queries;
  Outcome o = enc.check();
  if (o == Outcome::kUnknown) {
    r.status = PropertyStatus::kInconclusive;
    r.message = fmt::format("the solver gave up ({}); not proven", enc.reason_unknown());
    return r;
  }
  if (o == Outcome::kUnsat) {
    r.message = fmt::format("{} never change{} a token's fate",
                            random && ties ? "random draws and tie orders" : random ? "random draws" : "tie orders",
                            random && ties ? "" : "s");
    return r;
  }
  r.queries += 1;
  enc.prefer_distinct({&a});
  int32_t target = 0;
  for (int32_t i = 0; i < n; ++i)
    if (enc.value(flips[static_cast<size_t>(i)])) {
      target = i;
      break;
    }
  RouterWitness w = make_witness(enc, spec, a, b, da, db, target, target, c, TieOrder::kLowFirst, c, tb, false);
  w.a_label = ties ? "run 1 (ties low first)" : "run 1";
  w.b_label = ties ? "run 2 (ties high first)" : "run 2";
  std::string source = random && ties ? "a random draw or the tie order" : random ? "a random draw" : "the tie order";
  w.explanation = fmt::format("the same scores give token {} two fates: {} decides", token_name(target, T), source);
  r.status = PropertyStatus::kViolated;
  r.message = fmt::format("token {}'s fate is decided by {}", token_name(target, T), source);
  r.witness = std::move(w);
  return r;
}

bool wanted(const RouterSpec& spec, const RouterCheckOptions& opt, const std::string& name) {
  const std::vector<std::string>& only = opt.only.empty() ? spec.checks : opt.only;
  return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

}  // namespace

RouterReport check_router(const RouterSpec& spec, const RouterCheckOptions& opt) {
  auto t0 = Clock::now();
  RouterReport report;
  report.spec = spec;
  using Fn = PropertyResult (*)(const RouterSpec&, const RouterCheckOptions&);
  const std::pair<const char*, Fn> props[] = {{"prefix_causality", prefix_causality},
                                              {"batch_independence", batch_independence},
                                              {"train_inference", train_inference},
                                              {"drop_free", drop_free},
                                              {"deterministic", deterministic}};
  const bool limited = opt.time_limit_s > 0 && std::isfinite(opt.time_limit_s);
  for (const auto& [name, fn] : props) {
    if (!wanted(spec, opt, name)) continue;
    auto t = Clock::now();
    PropertyResult r;
    RouterCheckOptions left = opt;  // the time limit covers every property together
    if (limited) left.time_limit_s = opt.time_limit_s - since(t0);
    if (limited && left.time_limit_s <= 0) {
      r.name = name;
      r.status = PropertyStatus::kInconclusive;
      r.message = fmt::format("not checked: the time limit of {} s ran out before this property; not proven",
                              opt.time_limit_s);
      r.seconds = 0;
      report.properties.push_back(std::move(r));
      continue;
    }
    try {
      r = fn(spec, left);
    } catch (const z3::exception& e) {
      r = PropertyResult{};
      r.name = name;
      r.status = PropertyStatus::kInconclusive;
      r.message = fmt::format("the solver failed ({}); not proven", e.msg());
    }
    if (limited && r.status == PropertyStatus::kInconclusive && since(t0) >= opt.time_limit_s)
      r.message = fmt::format("the time limit of {} s ran out; not proven", opt.time_limit_s);
    r.seconds = since(t);
    report.properties.push_back(std::move(r));
  }
  if (spec.dispatch.given) report.dispatch = dispatch_worst_case(spec.train, spec.dispatch);
  report.exit_code = router_exit_code(report.properties, report.dispatch);
  report.seconds = since(t0);
  return report;
}

}  // namespace sc
