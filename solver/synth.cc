// Schedule synthesis with Z3: start times, order booleans, pseudo-boolean memory, bound tightening.
#include "solver/synth.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <z3++.h>

#include "solver/synth_bounds.h"
#include "solver/watchdog.h"

#include "pipeline/verify_pipeline.h"
#include "pipeline/generators.h"

namespace sc {

const char* synth_status_name(SynthStatus s) {
  switch (s) {
    case SynthStatus::kOptimal: return "optimal";
    case SynthStatus::kFeasible: return "feasible";
    case SynthStatus::kInfeasible: return "infeasible";
    case SynthStatus::kUnknown: return "unknown";
  }
  return "unknown";
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Op kinds of the encoding: forward, backward for inputs (or the full backward B), and W.
enum Kind { kF = 0, kBk = 1, kW = 2 };

struct SOp {
  Kind kind;
  int32_t stage;
  int32_t mb;
  int32_t rank;
  int64_t dur;  // time units
};

// The smallest power of ten (up to 1e6 units per second... down to 1 us) that makes every
// duration whole, so the encoding is exact for decimal costs.
double pick_time_unit(const std::vector<double>& values) {
  for (double unit : {1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6}) {
    bool whole = true;
    for (double v : values) {
      double q = v / unit;
      if (std::fabs(q - std::round(q)) > 1e-6 * std::max(1.0, std::fabs(q))) whole = false;
    }
    if (whole) return unit;
  }
  return 1e-6;
}

// The encoding of one spec. The context is the first member and is never copied or moved.
class Encoder {
 public:
  Encoder(const PipelineSpec& spec, const SynthOptions& opt) : solver_(ctx_), spec_(spec), opt_(opt) {}
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  SynthResult run();

 private:
  z3::context ctx_;
  z3::solver solver_;
  const PipelineSpec& spec_;
  const SynthOptions& opt_;
  // The hard wall-clock limit: interrupts Z3 (whose own timeout can overrun by seconds); declared
  // after ctx_, destroyed before it.
  Watchdog watchdog_{opt_.time_limit_s, [this] { ctx_.interrupt(); }};

  bool split_ = true;
  bool solver_off_ = false;  ///< too many order booleans: warm starts and solver-free bounds only
  double unit_s_ = 1;
  int32_t kinds_ = 3;
  std::vector<SOp> ops_;
  std::vector<int32_t> index_;  // (kind, stage, mb) -> op
  std::vector<std::vector<int32_t>> rank_ops_;
  std::vector<std::vector<uint64_t>> before_;  // static precedence closure, bitsets
  std::vector<int64_t> est_;                   // earliest start (longest path), units
  std::vector<z3::expr> start_;
  std::vector<int64_t> fixed_start_;           // -1 when free
  std::vector<z3::expr> rank_start_;
  std::vector<z3::expr> objective_terms_;      // each must be <= objective
  z3::expr objective_{ctx_};
  std::vector<z3::expr> memory_lits_;
  std::vector<std::string> memory_keys_;
  std::vector<z3::expr> order_bools_;
  std::map<std::pair<int32_t, int32_t>, int32_t> pair_var_;
  int64_t constraints_ = 0;
  int64_t limit_ = -1;

  int32_t id(Kind k, int32_t s, int32_t j) const {
    return index_[(static_cast<size_t>(k) * spec_.stages + s) * spec_.microbatches + j];
  }
  bool precedes(int32_t a, int32_t b) const { return (before_[b][a / 64] >> (a % 64)) & 1; }
  int64_t comm_units(int32_t from_stage, int32_t to_stage) const;
  /// Calls f(pred, delay) for each input of op `o` (ZB dependencies, docs/facts/pipeline-schedules.md): F after the
  /// previous stage's F + T_comm; I/B after its own F and the next stage's I/B + T_comm; W after I.
  template <typename F>
  void for_each_input(int32_t o, F f) const {
    const SOp& op = ops_[o];
    if (op.kind == kF) {
      if (!spec_.is_first_stage(op.stage)) f(id(kF, op.stage - 1, op.mb), comm_units(op.stage - 1, op.stage));
    } else if (op.kind == kBk) {
      if (!spec_.is_last_stage(op.stage)) f(id(kBk, op.stage + 1, op.mb), comm_units(op.stage + 1, op.stage));
      f(id(kF, op.stage, op.mb), int64_t{0});
    } else {
      f(id(kBk, op.stage, op.mb), int64_t{0});
    }
  }
  z3::expr end(int32_t o) { return start_[o] + ctx_.int_val(static_cast<int64_t>(ops_[o].dur)); }
  void add(const z3::expr& e) {
    solver_.add(e);
    ++constraints_;
  }
  // The literal "a runs (and ends) before b starts"; constant when the order is fixed.
  z3::expr before(int32_t a, int32_t b);

  std::string build(SynthResult& out);
  void compute_static_order();
  void add_memory_constraints();
  void add_objective();
  void add_cuts();
  int64_t structural_lower_bound() const;
  std::optional<ChainShape> chain_shape() const;
  std::vector<std::vector<Step>> zb_actions(const ZbOrder& z) const;
  std::vector<std::vector<Step>> extract(const z3::model& m, int64_t* value);
  std::optional<std::vector<std::vector<Step>>> greedy(int32_t max_live, bool forward_first, bool fit_w, int32_t max_pending_w);
  int64_t value_of(const std::vector<std::vector<Step>>& actions, bool* fits, double* value_s);
};

int64_t Encoder::comm_units(int32_t from_stage, int32_t to_stage) const {
  if (spec_.stage_to_rank[from_stage] == spec_.stage_to_rank[to_stage]) return 0;
  double t = spec_.p2p.latency_s;
  if (spec_.p2p.message_bytes > 0 && std::isfinite(spec_.p2p.bandwidth_bytes_per_s))
    t += static_cast<double>(spec_.p2p.message_bytes) / spec_.p2p.bandwidth_bytes_per_s;
  return static_cast<int64_t>(std::llround(t / unit_s_));
}

z3::expr Encoder::before(int32_t a, int32_t b) {
  if (a == b) return ctx_.bool_val(false);
  if (precedes(a, b)) return ctx_.bool_val(true);
  if (precedes(b, a)) return ctx_.bool_val(false);
  int32_t lo = std::min(a, b), hi = std::max(a, b);
  auto it = pair_var_.find({lo, hi});
  z3::expr v = order_bools_[it->second];  // v: lo before hi
  return a == lo ? v : !v;
}

void Encoder::compute_static_order() {
  size_t n = ops_.size(), words = (n + 63) / 64;
  // Predecessors: dependencies and the symmetry-breaking chains.
  std::vector<std::vector<std::pair<int32_t, int64_t>>> preds(n);  // (op, extra delay)
  const int32_t S = spec_.stages, M = spec_.microbatches;
  for (int32_t s = 0; s < S; ++s)
    for (int32_t j = 0; j < M; ++j) {
      for (int32_t k = 0; k < kinds_; ++k) {
        int32_t o = id(static_cast<Kind>(k), s, j);
        for_each_input(o, [&](int32_t pred, int64_t delay) { preds[o].push_back({pred, delay}); });
      }
      if (j > 0)
        for (int32_t k = 0; k < kinds_; ++k)
          preds[id(static_cast<Kind>(k), s, j)].push_back({id(static_cast<Kind>(k), s, j - 1), 0});
    }
  // Topological order: by (mb, kind, stage) is not always one (backward runs stages downwards),
  // so use Kahn's algorithm.
  std::vector<std::vector<int32_t>> succ(n);
  std::vector<int32_t> indeg(n, 0);
  for (size_t o = 0; o < n; ++o)
    for (auto [p, d] : preds[o]) {
      succ[p].push_back(static_cast<int32_t>(o));
      ++indeg[o];
    }
  std::vector<int32_t> topo;
  for (size_t o = 0; o < n; ++o)
    if (indeg[o] == 0) topo.push_back(static_cast<int32_t>(o));
  for (size_t i = 0; i < topo.size(); ++i)
    for (int32_t s2 : succ[topo[i]])
      if (--indeg[s2] == 0) topo.push_back(s2);
  before_.assign(n, std::vector<uint64_t>(words, 0));
  est_.assign(n, 0);
  for (int32_t o : topo)
    for (auto [p, d] : preds[o]) {
      for (size_t w = 0; w < words; ++w) before_[o][w] |= before_[p][w];
      before_[o][p / 64] |= uint64_t{1} << (p % 64);
      est_[o] = std::max(est_[o], est_[p] + ops_[p].dur + d);
    }
  // Constraints: every predecessor edge (durations are positive, so the closure is implied).
  for (size_t o = 0; o < n; ++o)
    for (auto [p, d] : preds[o]) add(start_[o] >= end(p) + ctx_.int_val(static_cast<int64_t>(d)));
}

// Memory per rank at every F start: bytes of every F started at or before it, minus the
// activations of every I/B ended before it, plus the weight gradients of those I's, minus those of
// every W ended before it (verify's model: frees at a moment apply before allocations).
void Encoder::add_memory_constraints() {
  if (limit_ < 0) return;
  const auto& act = spec_.memory.activation_bytes;
  const auto& wg = spec_.memory.weight_grad_bytes;
  bool wgrad_grows = false;
  for (int32_t s = 0; s < spec_.stages; ++s)
    if (split_ && wg[s] > act[s]) wgrad_grows = true;
  // A common divisor keeps the coefficients small.
  int64_t g = 0;
  for (int32_t s = 0; s < spec_.stages; ++s) {
    g = std::gcd(g, act[s]);
    if (split_) g = std::gcd(g, wg[s]);
  }
  if (g <= 0) g = 1;
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    int64_t static_bytes = 0;
    for (int32_t s = 0; s < spec_.stages; ++s)
      if (spec_.stage_to_rank[s] == r) static_bytes += spec_.memory.params_bytes[s];
    z3::expr lit = ctx_.bool_const(fmt::format("memory_limit_rank_{}", r).c_str());
    memory_lits_.push_back(lit);
    memory_keys_.push_back(fmt::format("memory.limit_bytes (rank {})", r));
    int64_t cap = limit_ - static_bytes;
    if (cap < 0) {
      add(z3::implies(lit, ctx_.bool_val(false)));
      continue;
    }
    int64_t cap_units = cap / g;
    for (int32_t at : rank_ops_[r]) {
      bool at_f = ops_[at].kind == kF;
      bool at_i = split_ && ops_[at].kind == kBk && wgrad_grows;
      if (!at_f && !at_i) continue;
      int64_t constant = 0;
      z3::expr_vector terms(ctx_);
      auto add_term = [&](const z3::expr& cond, int64_t coeff) {
        if (coeff == 0) return;
        if (cond.is_true()) constant += coeff;
        else if (!cond.is_false()) terms.push_back(z3::ite(cond, ctx_.int_val(coeff), ctx_.int_val(0)));
      };
      for (int32_t x : rank_ops_[r]) {
        const SOp& op = ops_[x];
        int64_t a = act[op.stage] / g, w = split_ ? wg[op.stage] / g : 0;
        if (op.kind == kF) {
          // Live from its start: started at or before `at` (at an I end: not started after it).
          z3::expr c = at_f ? (x == at ? ctx_.bool_val(true) : before(x, at)) : !before(at, x);
          add_term(c, a);
        } else if (op.kind == kBk) {
          z3::expr c = at_f ? before(x, at) : (x == at ? ctx_.bool_val(true) : before(x, at));
          add_term(c, w - a);
        } else {
          z3::expr c = at_f ? before(x, at) : (x == at ? ctx_.bool_val(false) : before(x, at));
          add_term(c, -w);
        }
      }
      if (terms.empty()) {
        if (constant > cap_units) add(z3::implies(lit, ctx_.bool_val(false)));
      } else {
        add(z3::implies(lit, z3::sum(terms) <= ctx_.int_val(cap_units - constant)));
      }
    }
  }
}

void Encoder::add_objective() {
  objective_ = ctx_.int_const("objective");
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    if (rank_ops_[r].empty()) continue;
    // Ops of the rank with no static successor on it end last; ops with no static predecessor
    // on it start first.
    z3::expr first = ctx_.int_const(fmt::format("rank_start_{}", r).c_str());
    std::vector<int32_t> roots;
    for (int32_t a : rank_ops_[r]) {
      bool root = true, leaf = true;
      for (int32_t b : rank_ops_[r]) {
        if (b == a) continue;
        if (precedes(b, a)) root = false;
        if (precedes(a, b)) leaf = false;
      }
      if (root) roots.push_back(a);
      if (leaf) {
        if (opt_.objective == SynthObjective::kSpan) add(end(a) - first <= objective_);
        else add(end(a) <= objective_);
      }
    }
    for (int32_t a : roots) add(first <= start_[a]);
    rank_start_.push_back(first);
  }
}

// Redundant constraints that let the solver prove bounds the order booleans alone leave open
// (each follows from the disjunctive constraints; none removes a schedule):
//  - energetic cuts: an op x on rank r starts no earlier than the rank's start plus the work of
//    every op ordered before it, and the rank's last end is no earlier than x's end plus the work
//    of every op ordered after it. For a chain (one stage per rank), an I or W also has the
//    warm-up idle time idle1_s before it (B1 in synth_bounds.cc: only K = floor(L / M_B) F's fit
//    before the first I, which starts at least D_s after the rank's start);
//  - transitivity: [a before b] implies [a before c] for each static successor c of b on the rank.
void Encoder::add_cuts() {
  const std::optional<ChainShape> chain = chain_shape();
  std::vector<int64_t> idle1(spec_.stages, 0);
  if (chain) {
    const int32_t p = spec_.stages;
    for (int32_t s = 0; s < p; ++s) {
      int64_t d = 0;
      for (int32_t t = s; t < p; ++t) d += chain->f[t];
      for (int32_t t = s + 1; t < p; ++t) d += chain->i[t];
      d += 2 * (p - 1 - s) * chain->comm;
      int64_t k = chain->m;
      if (chain->cap[s] && chain->act[s] > 0) k = std::min<int64_t>(k, std::max<int64_t>(0, *chain->cap[s]) / chain->act[s]);
      idle1[s] = std::max<int64_t>(0, d - k * chain->f[s]);
    }
  }
  int32_t rank_index = 0;
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    const auto& ro = rank_ops_[r];
    if (ro.empty()) continue;
    const z3::expr& first = rank_start_[rank_index++];
    for (int32_t x : ro) {
      int64_t before_const = 0, after_const = 0;
      z3::expr_vector before_terms(ctx_), after_terms(ctx_);
      for (int32_t y : ro) {
        if (y == x) continue;
        const int64_t d = ops_[y].dur;
        if (precedes(y, x)) before_const += d;
        else if (precedes(x, y)) after_const += d;
        else {
          z3::expr v = before(y, x);
          before_terms.push_back(z3::ite(v, ctx_.int_val(d), ctx_.int_val(0)));
          after_terms.push_back(z3::ite(v, ctx_.int_val(0), ctx_.int_val(d)));
        }
      }
      z3::expr lhs = before_terms.empty() ? ctx_.int_val(before_const) : z3::sum(before_terms) + ctx_.int_val(before_const);
      add(start_[x] - first >= lhs);
      // The idle time comes from the memory limit: under the rank's limit literal, so an
      // infeasible limit still shows in the unsat core.
      const int64_t idle = ops_[x].kind != kF ? idle1[ops_[x].stage] : 0;
      if (idle > 0 && static_cast<size_t>(r) < memory_lits_.size())
        add(z3::implies(memory_lits_[r], start_[x] - first >= lhs + ctx_.int_val(idle)));
      else if (idle > 0)
        add(start_[x] - first >= lhs + ctx_.int_val(idle));
      z3::expr tail = after_terms.empty() ? ctx_.int_val(after_const) : z3::sum(after_terms) + ctx_.int_val(after_const);
      if (opt_.objective == SynthObjective::kSpan) add(end(x) + tail - first <= objective_);
      else add(end(x) + tail <= objective_);
    }
    // Immediate static successors on the rank.
    for (int32_t b : ro) {
      std::vector<int32_t> succ;
      for (int32_t c : ro) {
        if (c == b || !precedes(b, c)) continue;
        bool immediate = true;
        for (int32_t d : ro)
          if (d != b && d != c && precedes(b, d) && precedes(d, c)) immediate = false;
        if (immediate) succ.push_back(c);
      }
      for (int32_t a : ro) {
        if (a == b || precedes(a, b) || precedes(b, a)) continue;
        for (int32_t c : succ)
          if (!precedes(a, c) && !precedes(c, a)) add(z3::implies(before(a, b), before(a, c)));
      }
    }
  }
}

int64_t Encoder::structural_lower_bound() const {
  int64_t lb = 0;
  // Work per rank.
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    int64_t w = 0;
    for (int32_t o : rank_ops_[r]) w += ops_[o].dur;
    lb = std::max(lb, w);
  }
  // The critical path: for the span, from a rank's earliest possible first start to each of
  // its ops' earliest end; for the makespan, from time 0.
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    int64_t first = INT64_MAX;
    for (int32_t o : rank_ops_[r]) first = std::min(first, est_[o]);
    for (int32_t o : rank_ops_[r]) {
      int64_t e = est_[o] + ops_[o].dur;
      lb = std::max(lb, opt_.objective == SynthObjective::kSpan ? e - first : e);
    }
  }
  return lb;
}

// The spec as one chain of stages, each alone on its rank, in time units; nullopt for other
// placements (interleaved, V, several pipelines), where the closed forms do not apply.
std::optional<ChainShape> Encoder::chain_shape() const {
  const int32_t S = spec_.stages;
  if (S != spec_.ranks) return std::nullopt;
  std::vector<bool> seen(spec_.ranks, false);
  for (int32_t s = 0; s < S; ++s) {
    int32_t r = spec_.stage_to_rank[s];
    if (r < 0 || r >= spec_.ranks || seen[r]) return std::nullopt;
    seen[r] = true;
    if (spec_.is_first_stage(s) != (s == 0) || spec_.is_last_stage(s) != (s == S - 1)) return std::nullopt;
  }
  ChainShape sh;
  sh.m = spec_.microbatches;
  sh.comm = S > 1 ? comm_units(0, 1) : 0;
  for (int32_t s = 0; s < S; ++s) {
    sh.f.push_back(ops_[id(kF, s, 0)].dur);
    sh.i.push_back(ops_[id(kBk, s, 0)].dur);
    sh.w.push_back(split_ ? ops_[id(kW, s, 0)].dur : 0);
    sh.act.push_back(spec_.memory.activation_bytes[s]);
    sh.wgrad.push_back(split_ ? spec_.memory.weight_grad_bytes[s] : 0);
    if (limit_ >= 0) sh.cap.push_back(limit_ - spec_.memory.params_bytes[s]);
    else sh.cap.push_back(std::nullopt);
  }
  return sh;
}

std::vector<std::vector<Step>> Encoder::zb_actions(const ZbOrder& z) const {
  std::vector<std::vector<Step>> actions(spec_.ranks);
  for (size_t s = 0; s < z.stages.size(); ++s)
    for (auto [kind, mb] : z.stages[s]) {
      Step st;
      ActionKind k = kind == 'F' ? ActionKind::kF : kind == 'I' ? ActionKind::kI : ActionKind::kW;
      st.first = Action{k, static_cast<int32_t>(s), mb};
      st.loc = spec_.locs.schedule;
      actions[spec_.stage_to_rank[s]].push_back(st);
    }
  return actions;
}

std::string Encoder::build(SynthResult& out) {
  const int32_t S = spec_.stages, M = spec_.microbatches;
  if (S < 1 || M < 1 || spec_.ranks < 1) return "the spec has no stages or microbatches";
  if (static_cast<int64_t>(S) * M > 4096) return fmt::format("{} stages x {} microbatches is too large to synthesise", S, M);
  split_ = false;
  for (int32_t s = 0; s < S; ++s)
    if (spec_.costs.i_s[s] > 0 || spec_.costs.w_s[s] > 0) split_ = true;
  kinds_ = split_ ? 3 : 2;
  std::vector<double> values;
  for (int32_t s = 0; s < S; ++s) {
    values.push_back(spec_.costs.f_s[s]);
    values.push_back(split_ ? spec_.costs.i_s[s] : spec_.costs.b_s[s]);
    if (split_) values.push_back(spec_.costs.w_s[s]);
  }
  double comm = spec_.p2p.latency_s;
  if (spec_.p2p.message_bytes > 0 && std::isfinite(spec_.p2p.bandwidth_bytes_per_s))
    comm += static_cast<double>(spec_.p2p.message_bytes) / spec_.p2p.bandwidth_bytes_per_s;
  values.push_back(comm);
  for (double v : values)
    if (v < 0 || !std::isfinite(v)) return "costs must be finite and not negative";
  unit_s_ = pick_time_unit(values);
  out.time_unit_s = unit_s_;
  out.split_backward = split_;
  index_.assign(static_cast<size_t>(kinds_) * S * M, -1);
  rank_ops_.assign(spec_.ranks, {});
  for (int32_t k = 0; k < kinds_; ++k)
    for (int32_t s = 0; s < S; ++s)
      for (int32_t j = 0; j < M; ++j) {
        double c = k == kF ? spec_.costs.f_s[s] : k == kW ? spec_.costs.w_s[s] : split_ ? spec_.costs.i_s[s] : spec_.costs.b_s[s];
        int64_t d = std::llround(c / unit_s_);
        if (d <= 0) return fmt::format("stage {} has a zero {} cost; synthesis needs positive costs", s, k == kF ? "F" : k == kW ? "W" : split_ ? "I" : "B");
        int32_t o = static_cast<int32_t>(ops_.size());
        ops_.push_back({static_cast<Kind>(k), s, j, spec_.stage_to_rank[s], d});
        index_[(static_cast<size_t>(k) * S + s) * M + j] = o;
        rank_ops_[spec_.stage_to_rank[s]].push_back(o);
        start_.push_back(ctx_.int_const(fmt::format("t_{}{}{}", s, "FIW"[split_ ? k : (k == kBk ? 1 : 0)], j).c_str()));
      }
  z3::params p(ctx_);
  p.set("random_seed", static_cast<unsigned>(opt_.seed));
  if (opt_.rlimit > 0) p.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(opt_.rlimit, UINT32_MAX)));
  solver_.set(p);

  for (size_t o = 0; o < ops_.size(); ++o) add(start_[o] >= 0);
  compute_static_order();
  // Each rank root whose ancestors are all rank roots starts at its earliest time, as the
  // as-soon-as-possible timeline of verify starts it; so verify's span never exceeds ours.
  for (int32_t r = 0; r < spec_.ranks; ++r)
    for (int32_t a : rank_ops_[r]) {
      bool root = true;
      for (int32_t b : rank_ops_[r])
        if (b != a && precedes(b, a)) root = false;
      if (!root) continue;
      bool chain = true;
      for (size_t x = 0; x < ops_.size(); ++x) {
        if (!precedes(static_cast<int32_t>(x), a)) continue;
        for (int32_t y : rank_ops_[ops_[x].rank])
          if (y != static_cast<int32_t>(x) && precedes(y, static_cast<int32_t>(x))) chain = false;
      }
      if (chain) add(start_[a] == ctx_.int_val(static_cast<int64_t>(est_[a])));
    }
  // Order booleans for each pair of one rank's ops the precedence leaves open. Past
  // kMaxOrderBooleans the encoding would take gigabytes before the first check (32 ranks x 2
  // stages x 64 microbatches x 3 kinds: 2.3 million pairs, 8.6 GB and minutes of construction):
  // the search then keeps its warm starts and the bounds that need no solver.
  int64_t open_pairs = 0;
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    const auto& ro = rank_ops_[r];
    for (size_t x = 0; x < ro.size(); ++x)
      for (size_t y = x + 1; y < ro.size(); ++y)
        if (!precedes(ro[x], ro[y]) && !precedes(ro[y], ro[x])) ++open_pairs;
  }
  if (open_pairs > kMaxOrderBooleans) {
    solver_off_ = true;
    out.message = fmt::format("{} open op pairs is more than the solver takes ({}): the best warm start is "
                              "reported with the bounds that need no solver",
                              open_pairs, kMaxOrderBooleans);
    out.order_booleans = open_pairs;
    out.variables = static_cast<int64_t>(ops_.size());
    return "";
  }
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    const auto& ro = rank_ops_[r];
    for (size_t x = 0; x < ro.size(); ++x)
      for (size_t y = x + 1; y < ro.size(); ++y) {
        int32_t a = std::min(ro[x], ro[y]), b = std::max(ro[x], ro[y]);
        if (precedes(a, b) || precedes(b, a)) continue;
        z3::expr v = ctx_.bool_const(fmt::format("o_{}_{}", a, b).c_str());
        pair_var_[{a, b}] = static_cast<int32_t>(order_bools_.size());
        order_bools_.push_back(v);
        add(z3::implies(v, end(a) <= start_[b]));
        add(z3::implies(!v, end(b) <= start_[a]));
      }
  }
  add_memory_constraints();
  add_objective();
  if (opt_.cuts) add_cuts();
  out.order_booleans = static_cast<int64_t>(order_bools_.size());
  out.variables = static_cast<int64_t>(ops_.size() + order_bools_.size() + rank_start_.size() + 1);
  return "";
}

std::vector<std::vector<Step>> Encoder::extract(const z3::model& m, int64_t* value) {
  std::vector<int64_t> t(ops_.size());
  for (size_t o = 0; o < ops_.size(); ++o) t[o] = m.eval(start_[o], true).get_numeral_int64();
  std::vector<std::vector<Step>> actions(spec_.ranks);
  int64_t best = 0, global_first = INT64_MAX;
  for (size_t o = 0; o < ops_.size(); ++o) global_first = std::min(global_first, t[o]);
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    std::vector<int32_t> ro = rank_ops_[r];
    std::sort(ro.begin(), ro.end(), [&](int32_t a, int32_t b) { return t[a] != t[b] ? t[a] < t[b] : a < b; });
    int64_t first = INT64_MAX, last = 0;
    for (int32_t o : ro) {
      const SOp& op = ops_[o];
      ActionKind k = op.kind == kF ? ActionKind::kF : op.kind == kW ? ActionKind::kW : split_ ? ActionKind::kI : ActionKind::kB;
      Step st;
      st.first = Action{k, op.stage, op.mb};
      st.loc = spec_.locs.schedule;
      actions[r].push_back(st);
      first = std::min(first, t[o]);
      last = std::max(last, t[o] + op.dur);
    }
    if (ro.empty()) continue;
    best = std::max(best, opt_.objective == SynthObjective::kSpan ? last - first : last - global_first);
  }
  *value = best;
  return actions;
}

// A list schedule in the spirit of the ZB paper's heuristic: each rank, when free, runs a ready
// I (B), else a ready F when memory and the warm-up cap `max_live` (live activations per stage)
// allow, else a pending W; `forward_first` prefers a ready F over a ready I; `fit_w` runs a W only
// where it ends before the rank's next I (B) can start at the earliest (it fills a bubble), but
// always once a stage has `max_pending_w` W's waiting (the steady F, I, W rhythm). Times are the
// encoding's; verify judges the result. nullopt when it gets stuck (the limit is too tight).
std::optional<std::vector<std::vector<Step>>> Encoder::greedy(int32_t max_live, bool forward_first, bool fit_w, int32_t max_pending_w) {
  const int32_t S = spec_.stages, M = spec_.microbatches;
  std::vector<int64_t> end_t(ops_.size(), -1), free_at(spec_.ranks, 0), live(spec_.ranks, 0);
  std::vector<int32_t> nf(S, 0), nb(S, 0), nw(S, 0);
  std::vector<std::vector<Step>> actions(spec_.ranks);
  std::vector<int64_t> static_bytes(spec_.ranks, 0);
  for (int32_t st = 0; st < S; ++st) static_bytes[spec_.stage_to_rank[st]] += spec_.memory.params_bytes[st];
  size_t placed = 0;
  auto ready_time = [&](int32_t o) -> int64_t {  // -1 while a predecessor is unplaced
    int64_t t = 0;
    for_each_input(o, [&](int32_t pred, int64_t delay) {
      if (t < 0) return;
      if (end_t[pred] < 0) t = -1;
      else t = std::max(t, end_t[pred] + delay);
    });
    return t;
  };
  // Event order: always place the op that can start earliest over all ranks (ties: priority,
  // then rank), so no later placement could have offered this rank an earlier op.
  int64_t now = 0;
  // Earliest start of an unplaced op given what is placed (unplaced ops start at `now` or later).
  // Memoised per placement step (`generation`): without it the recursion walks every path of
  // the dependency graph, exponential in its depth (32 stages x 64 microbatches did not end).
  std::vector<int64_t> memo(ops_.size(), 0);
  std::vector<uint32_t> memo_at(ops_.size(), 0);
  uint32_t generation = 0;
  std::function<int64_t(int32_t)> earliest = [&](int32_t o) -> int64_t {
    if (memo_at[o] == generation) return memo[o];
    int64_t t = now;
    for_each_input(o, [&](int32_t pred, int64_t delay) {
      int64_t e = end_t[pred] >= 0 ? end_t[pred] : earliest(pred) + ops_[pred].dur;
      t = std::max(t, e + delay);
    });
    memo_at[o] = generation;
    memo[o] = t;
    return t;
  };
  bool relax_w = false;
  while (placed < ops_.size()) {
    ++generation;  // what was placed last changes every earliest start
    int32_t best = -1, best_r = -1;
    int64_t best_t = INT64_MAX;
    int best_rank = 9;
    for (int32_t r = 0; r < spec_.ranks; ++r)
      for (int32_t st = 0; st < S; ++st) {
        if (spec_.stage_to_rank[st] != r) continue;
        auto offer = [&](int32_t o, int prio) {
          int64_t t = ready_time(o);
          if (t < 0) return;
          t = std::max(t, free_at[r]);
          if (t < best_t || (t == best_t && prio < best_rank)) {
            best = o;
            best_r = r;
            best_t = t;
            best_rank = prio;
          }
        };
        if (nb[st] < M) offer(id(kBk, st, nb[st]), forward_first ? 1 : 0);
        if (nf[st] < M && nf[st] - nb[st] < max_live) {
          int64_t need = live[r] + spec_.memory.activation_bytes[st] + static_bytes[r];
          if (limit_ < 0 || need <= limit_) offer(id(kF, st, nf[st]), forward_first ? 0 : 1);
        }
        if (split_ && nw[st] < nb[st]) {
          int32_t w = id(kW, st, nw[st]);
          bool fits = true;
          if (fit_w && !relax_w) {
            int64_t t = std::max(free_at[r], end_t[id(kBk, st, nw[st])]);
            for (int32_t st2 = 0; st2 < S; ++st2)
              if (spec_.stage_to_rank[st2] == r && nb[st2] < M && t + ops_[w].dur > earliest(id(kBk, st2, nb[st2])))
                fits = false;
          }
          if (fits || nb[st] - nw[st] >= max_pending_w) offer(w, nb[st] - nw[st] >= max_pending_w ? -1 : 2);
        }
      }
    if (best < 0 && fit_w && !relax_w) {
      relax_w = true;  // nothing else can run: a W that does not fit a bubble is still progress
      continue;
    }
    relax_w = false;
    if (best < 0) return std::nullopt;
    now = best_t;
    const int32_t r = best_r;
    const SOp& op = ops_[best];
    end_t[best] = best_t + op.dur;
    free_at[r] = end_t[best];
    int64_t a = spec_.memory.activation_bytes[op.stage], w = split_ ? spec_.memory.weight_grad_bytes[op.stage] : 0;
    if (op.kind == kF) {
      live[r] += a;
      ++nf[op.stage];
    } else if (op.kind == kBk) {
      live[r] += w - a;
      ++nb[op.stage];
    } else {
      live[r] -= w;
      ++nw[op.stage];
    }
    ActionKind k = op.kind == kF ? ActionKind::kF : op.kind == kW ? ActionKind::kW : split_ ? ActionKind::kI : ActionKind::kB;
    Step step;
    step.first = Action{k, op.stage, op.mb};
    step.loc = spec_.locs.schedule;
    actions[r].push_back(step);
    ++placed;
  }
  return actions;
}

// Runs verify on `actions`; returns the objective in units (rounded up) and whether the
// schedule holds every property, the memory limit included.
int64_t Encoder::value_of(const std::vector<std::vector<Step>>& actions, bool* fits, double* value_s) {
  PipelineSpec s = spec_;
  s.actions = actions;
  s.named.reset();
  s.memory.limit_bytes = limit_ >= 0 ? std::optional<int64_t>(limit_) : std::nullopt;
  VerifyResult r = verify(s, VerifyOptions{});
  *fits = r.exit_code == 0 && r.timeline.has_value();
  if (!r.timeline) return INT64_MAX;
  double v = opt_.objective == SynthObjective::kSpan ? r.timeline->span_s : r.timeline->makespan_s;
  *value_s = v;
  return static_cast<int64_t>(std::ceil(v / unit_s_ - 1e-6));
}

SynthResult Encoder::run() {
  SynthResult out;
  auto t0 = Clock::now();
  limit_ = opt_.limit_bytes ? *opt_.limit_bytes : spec_.memory.limit_bytes.value_or(-1);
  if (std::string why = build(out); !why.empty()) {
    out.message = why;
    return out;
  }
  int64_t lb = structural_lower_bound();
  out.structural_lower_bound_s = static_cast<double>(lb) * unit_s_;
  int64_t ub = INT64_MAX;
  const std::optional<ChainShape> chain = chain_shape();
  if (chain && opt_.closed_form_bounds) {
    ClosedFormBounds cf = closed_form_bounds(*chain);
    if (!cf.feasible) {
      // Proven by B1 or B2 alone (synth_bounds.cc): no order of any kind fits.
      out.status = SynthStatus::kInfeasible;
      out.core.push_back(fmt::format("memory.limit_bytes (rank {})", spec_.stage_to_rank[cf.infeasible_stage]));
      out.message = cf.why;
      out.closed_form_source = "B1/B2 memory";
      out.constraints = constraints_;
      return out;
    }
    out.closed_form_lower_bound_s = static_cast<double>(cf.value()) * unit_s_;
    out.closed_form_source = cf.source();
    lb = std::max(lb, cf.value());
  }
  auto progress = [&](const std::string& line) {
    if (opt_.on_progress) opt_.on_progress(line);
  };
  const char* what = opt_.objective == SynthObjective::kSpan ? "span" : "makespan";

  // Warm start: the best named schedule of this shape that fits, and the spec's own actions.
  auto consider = [&](const std::vector<std::vector<Step>>& actions, const std::string& name) {
    if (watchdog_.expired()) return;  // the warm start is bounded by the time limit too
    // Only schedules of the encoding's op kinds: with a full backward, no I or W (their costs
    // are not the model's); overlapped pairs are not modelled.
    for (const auto& row : actions)
      for (const auto& st : row) {
        if (st.is_overlap()) return;
        ActionKind k = st.first.kind;
        if (!is_compute(k) || (!split_ && (k == ActionKind::kI || k == ActionKind::kW))) return;
      }
    bool fits = false;
    double v_s = 0;
    int64_t v = value_of(actions, &fits, &v_s);
    if (fits && v < ub) {
      ub = v;
      out.actions = actions;
      out.has_schedule = true;
      out.best_s = static_cast<double>(v) * unit_s_;
      out.source = name;
      out.warm_start = name;
      out.warm_start_s = v_s;
      progress(fmt::format("warm start {}: {} {:.6g} s (bound {:.6g} s)", name, what, v_s, static_cast<double>(lb) * unit_s_));
    }
  };
  if (opt_.warm_start) {
    if (!spec_.actions.empty()) consider(spec_.actions, spec_.named ? spec_.named->name : spec_.name);
    for (const auto& name : schedule_names()) {
      GenOptions g_opt{name, spec_.ranks, spec_.microbatches, spec_.stages, std::nullopt, false};
      std::optional<Generated> g = generate(g_opt);
      if (!g || g->stage_to_rank != spec_.stage_to_rank || g->pipeline_starts != spec_.pipeline_starts ||
          g->microbatches != spec_.microbatches)
        continue;
      consider(g->actions, name);
    }
    // The Zero Bubble paper's heuristic, all eight switch settings (its grid search).
    if (chain && split_)
      for (bool bubble : {true, false})
        for (bool prio : {true, false})
          for (bool fill : {true, false})
            if (watchdog_.expired()) break;  // each is a full simulation: none past the limit
            else if (auto z = zb_heuristic(*chain, bubble, prio, fill)) consider(zb_actions(*z), z->name);
    for (bool fit_w : {false, true})
      for (int32_t pending : {1, 2, 3, spec_.microbatches + 1})
        for (bool forward_first : {false, true})
          for (int32_t cap = 1; cap <= 2 * spec_.stages + 1 && cap <= spec_.microbatches; ++cap) {
            if (!fit_w && pending <= spec_.microbatches) continue;
            if (watchdog_.expired()) break;
            if (auto g = greedy(cap, forward_first, fit_w, pending))
              consider(*g, fmt::format("greedy (warm-up cap {}{}{})", cap,
                                       fit_w ? fmt::format(", W in bubbles or after {} pending", pending) : "",
                                       forward_first ? ", forward first" : ""));
          }
  }

  if (solver_off_) {
    out.lower_bound_s = static_cast<double>(std::min(lb, ub)) * unit_s_;
    out.constraints = constraints_;
    out.status = !out.has_schedule ? SynthStatus::kUnknown : ub <= lb ? SynthStatus::kOptimal : SynthStatus::kFeasible;
    if (out.status == SynthStatus::kOptimal) out.message.clear();
    return out;
  }

  // `share`: give this probe a quarter of the time left, so a hard bound leaves time for easier ones.
  auto check = [&](std::optional<int64_t> bound, bool share = false) -> z3::check_result {
    double left = opt_.time_limit_s - seconds_since(t0);
    if (left <= 0 || watchdog_.expired()) {
      if (out.message.empty()) out.message = fmt::format("the time limit of {} s ran out", opt_.time_limit_s);
      return z3::unknown;
    }
    if (share) left = std::max(std::min(left, 5.0), left / 4);
    z3::params p(ctx_);
    p.set("timeout", static_cast<unsigned>(std::min(left * 1000.0, 4.0e9)));
    solver_.set(p);
    z3::expr_vector assumptions(ctx_);
    for (const auto& l : memory_lits_) assumptions.push_back(l);
    if (bound) {
      z3::expr b = ctx_.bool_const(fmt::format("bound_{}", *bound).c_str());
      add(z3::implies(b, objective_ <= ctx_.int_val(static_cast<int64_t>(*bound))));
      assumptions.push_back(b);
    }
    auto c0 = Clock::now();
    z3::check_result res = z3::unknown;
    try {
      res = solver_.check(assumptions);
    } catch (const z3::exception& e) {
      // The watchdog's interrupt can surface as an exception: then the deadline is the reason.
      if (!watchdog_.expired()) out.message = fmt::format("z3: {}", e.msg());
      res = z3::unknown;
    }
    // An unsat answer once the deadline has passed may come from an interrupted search: not a
    // proof. (A sat answer is safe: its schedule is replayed by value_of before it is kept.)
    if (res == z3::unsat && watchdog_.expired()) res = z3::unknown;
    double dt = seconds_since(c0);
    out.solver_seconds += dt;
    out.probes.push_back({bound ? static_cast<double>(*bound) * unit_s_ : -1.0,
                          res == z3::sat ? "sat" : res == z3::unsat ? "unsat" : "unknown", dt});
    progress(fmt::format("{}? {} in {:.1f} s (best {}, bound {:.6g} s)",
                         bound ? fmt::format("{} <= {:.6g} s", what, static_cast<double>(*bound) * unit_s_) : std::string("any schedule"),
                         out.probes.back().answer, dt,
                         ub == INT64_MAX ? std::string("none") : fmt::format("{:.6g} s", static_cast<double>(ub) * unit_s_),
                         static_cast<double>(lb) * unit_s_));
    if (res == z3::unknown && out.message.empty())
      out.message = watchdog_.expired() ? fmt::format("the time limit of {} s ran out", opt_.time_limit_s)
                                        : "z3: " + solver_.reason_unknown();
    return res;
  };
  auto take_model = [&]() {
    int64_t v = 0;
    auto actions = extract(solver_.get_model(), &v);
    bool fits = false;
    double v_s = 0;
    int64_t verified = value_of(actions, &fits, &v_s);
    if (!fits) {
      out.message = "internal: a solver schedule fails verify";
      return false;
    }
    v = std::min(v, verified);
    if (v < ub) {
      ub = v;
      out.actions = actions;
      out.has_schedule = true;
      out.best_s = static_cast<double>(v) * unit_s_;
      out.source = "solver";
    }
    return true;
  };

  bool stopped = false;
  if (ub == INT64_MAX) {
    // No named schedule fits: is there any schedule within the limit?
    z3::check_result res = check(std::nullopt);
    if (res == z3::unsat) {
      z3::expr_vector core = solver_.unsat_core();
      for (unsigned i = 0; i < core.size(); ++i)
        for (size_t k = 0; k < memory_lits_.size(); ++k)
          if (z3::eq(core[i], memory_lits_[k])) out.core.push_back(memory_keys_[k]);
      out.status = SynthStatus::kInfeasible;
      out.constraints = constraints_;
      return out;
    }
    if (res == z3::unknown || !take_model()) stopped = true;
  }
  // Small steps down from the best value: a bound just below it is usually found quickly,
  // while one far below it is hard to refute and hard to satisfy. An unknown answer shrinks the
  // step; an unknown at the smallest step ends the search.
  int64_t step = std::max<int64_t>(1, (ub - lb) / 8);
  while (!stopped && ub > lb) {
    int64_t target = ub - lb <= 4 ? ub - 1 : ub - std::min(step, ub - lb);
    bool last_try = target == ub - 1;
    z3::check_result res = check(target, !last_try);
    if (res == z3::sat) {
      if (!take_model()) stopped = true;
    } else if (res == z3::unsat) {
      lb = target + 1;
      step = std::max<int64_t>(1, (ub - lb) / 2);  // then bisect the remaining gap
    } else if (last_try || seconds_since(t0) >= opt_.time_limit_s) {
      stopped = true;
    } else {
      step = std::max<int64_t>(1, step / 4);
    }
  }
  out.lower_bound_s = static_cast<double>(std::min(lb, ub)) * unit_s_;
  out.constraints = constraints_;
  if (!out.has_schedule) out.status = SynthStatus::kUnknown;
  else if (ub <= lb) out.status = SynthStatus::kOptimal;
  else out.status = stopped && ub == INT64_MAX ? SynthStatus::kUnknown : SynthStatus::kFeasible;
  if (out.status == SynthStatus::kOptimal) out.message.clear();
  else if (out.message.empty() && out.status == SynthStatus::kUnknown)  // a reason is always given
    out.message = watchdog_.expired() || seconds_since(t0) >= opt_.time_limit_s
                      ? fmt::format("the time limit of {} s ran out", opt_.time_limit_s)
                      : std::string("the solver stopped without an answer");
  return out;
}

}  // namespace

SynthResult synthesize(const PipelineSpec& spec, const SynthOptions& options) {
  try {
    Encoder enc(spec, options);
    return enc.run();
  } catch (const z3::exception& e) {
    SynthResult r;
    r.message = fmt::format("z3: {}", e.msg());
    return r;
  }
}

}  // namespace sc
