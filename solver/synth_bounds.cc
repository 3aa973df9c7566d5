// Closed-form span bounds under a memory limit, and the Zero Bubble paper's heuristic.
//
// Notation (one stage per rank, stage s on its own rank; all times in whole units):
//   m microbatches, p stages; F_s, I_s, W_s the durations; c the P2P time between stages;
//   M_B = act[s], M_W = wgrad[s]; L = cap[s] = limit - params of the rank;
//   a_s the start of the first op of stage s (always an F: an I needs its F on the same rank);
//   K_s = min(m, floor(L / M_B)) (m when there is no limit or M_B = 0);
//   Work_s = m·(F_s + I_s + W_s);
//   D_s = Σ_{t=s}^{p-1} F_t + Σ_{t=s+1}^{p-1} I_t + 2(p-1-s)·c, the least time from the start of
//     F(s, j) to the start of I(s, j): the F chain down to the last stage, then the I chain back.
// The span of stage s is (end of its last op) - a_s; the schedule's span is the largest.
#include "solver/synth_bounds.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>

namespace sc {

int64_t ClosedFormBounds::value() const { return std::max({b1, b2, b3}); }

std::string ClosedFormBounds::source() const {
  int64_t v = value();
  // On a tie the simpler bound is named: B1, then B2, then B3.
  if (v == b1 || (b2 <= 0 && b3 <= 0)) return fmt::format("B1 ({})", b1_at);
  if (v == b2) return fmt::format("B2 ({})", b2_at);
  return fmt::format("B3 ({})", b3_at);
}

namespace {

// ceil(a / b) for b > 0.
int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

}  // namespace

ClosedFormBounds closed_form_bounds(const ChainShape& sh) {
  ClosedFormBounds out;
  const int32_t p = static_cast<int32_t>(sh.f.size());
  const int64_t m = sh.m;
  if (p < 1 || m < 1) return out;
  const int64_t c = sh.comm;

  std::vector<int64_t> d(p, 0), k(p, m), idle1(p, 0);
  for (int32_t s = p - 1; s >= 0; --s) {
    // D_s from D_{s+1}: one more F on the way down, one more I and two links on the way back.
    d[s] = s == p - 1 ? sh.f[s] : sh.f[s] + c + d[s + 1] + sh.i[s + 1] + c;
  }
  for (int32_t s = 0; s < p; ++s) {
    if (sh.cap[s] && sh.act[s] > 0) k[s] = std::min<int64_t>(m, std::max<int64_t>(0, *sh.cap[s]) / sh.act[s]);
    if (k[s] < 1) {
      // Not even the first F of the stage fits: nothing is freed before an F has run.
      out.feasible = false;
      out.infeasible_stage = s;
      out.why = fmt::format("stage {}: one activation of {} B does not fit in the {} B left under the limit", s,
                            sh.act[s], sh.cap[s].value_or(0));
      return out;
    }
  }

  // B1, warm-up. Before the first I of stage s only F's run (a W needs its I), and nothing is
  // freed before an I ends, so at most K_s F's start before it. The first I, of some microbatch
  // j, starts at least D_s after F(s, j), hence after a_s + D_s; the rank is busy at most
  // K_s·F_s of that time. Every op of the stage runs within its span, so
  //   span_s >= Work_s + idle1_s,  idle1_s = max(0, D_s - K_s·F_s).
  for (int32_t s = 0; s < p; ++s) {
    idle1[s] = std::max<int64_t>(0, d[s] - k[s] * sh.f[s]);
    int64_t v = m * (sh.f[s] + sh.i[s] + sh.w[s]) + idle1[s];
    if (v > out.b1) {
      out.b1 = v;
      out.b1_at = fmt::format("stage {}", s);
    }
  }

  // B2, last F. Let F* be the stage's last F, starting at f, with nI I's and nW W's run before it
  // (nW <= nI <= m - 1: a W follows its I, and F*'s own I comes after F*). At f every F has
  // started, so the live bytes are m·M_B - (M_B - M_W)·nI - M_W·nW, which must be <= L.
  //   f - a_s >= (m - 1)·F_s + nI·I_s + nW·W_s + [nI >= 1]·idle1_s
  // (the idle time before the first I lies before f when an I precedes F*). After f the stage
  // still runs F*, m - nI I's and m - nW W's, and F*'s own I starts at least D_s after f:
  //   end - f >= max(D_s + I_s + W_s, F_s + (m - nI)·I_s + (m - nW)·W_s).
  // Whatever (nI, nW) a schedule has, it is one of the feasible pairs, so the least sum over them
  // bounds span_s; no feasible pair means no schedule fits.
  for (int32_t s = 0; s < p; ++s) {
    int64_t best = INT64_MAX;
    const int64_t mb = sh.act[s], mw = sh.wgrad[s];
    const bool has_w = sh.w[s] > 0 || mw > 0;
    for (int64_t ni = 0; ni <= m - 1; ++ni)
      for (int64_t nw = 0; nw <= (has_w ? ni : 0); ++nw) {
        if (sh.cap[s] && m * mb - (mb - mw) * ni - mw * nw > *sh.cap[s]) continue;
        int64_t before = (m - 1) * sh.f[s] + ni * sh.i[s] + nw * sh.w[s] + (ni >= 1 ? idle1[s] : 0);
        int64_t after = std::max(d[s] + sh.i[s] + sh.w[s], sh.f[s] + (m - ni) * sh.i[s] + (m - nw) * sh.w[s]);
        best = std::min(best, before + after);
      }
    if (best == INT64_MAX) {
      out.feasible = false;
      out.infeasible_stage = s;
      out.why = fmt::format(
          "stage {}: at its last F all {} activations of {} B are live less what the I's and W's before it free, "
          "and even with {} I's and W's before it that exceeds the {} B left under the limit",
          s, m, mb, m - 1, sh.cap[s].value_or(0));
      return out;
    }
    if (best > out.b2) {
      out.b2 = best;
      out.b2_at = fmt::format("stage {}", s);
    }
  }

  // B3, bottleneck stage q seen from stage r <= q. Every op of q needs an F of q, which needs
  // F(r, j) and the F chain down, so a_q >= a_r + Σ_{t=r}^{q-1} F_t + (q - r)·c. Before the last
  // I of q (microbatch j*), q runs all m F's, the other m - 1 I's, and the W's that memory at
  // q's last F forces before it: nW_q >= ceil((m·M_B - (M_B - M_W)(m - 1) - L) / M_W)
  // (B2's memory with nI = m - 1 at most; 0 without a limit or when M_W = 0), plus the idle
  // time idle1_q. Then I(q, j*) runs, the I chain carries j* back to r (each I_t and a link), and
  // I(r, j*) and W(r, j*) run on r:
  //   span_r >= Σ_{t=r}^{q-1} (F_t + c) + m·F_q + (m - 1)·I_q + nW_q·W_q + idle1_q
  //             + Σ_{t=r}^{q} I_t + (q - r)·c + W_r.
  // (r = 0, q = p - 1 with ample memory and uniform costs: (m + p - 1)(F + I) + 2(p - 1)c + W,
  // the Zero Bubble paper's heuristic's span at limit 2p·M_B.)
  std::vector<int64_t> nw_forced(p, 0);
  for (int32_t q = 0; q < p; ++q)
    if (sh.cap[q] && sh.wgrad[q] > 0)
      nw_forced[q] = std::max<int64_t>(0, ceil_div(m * sh.act[q] - (sh.act[q] - sh.wgrad[q]) * (m - 1) - *sh.cap[q], sh.wgrad[q]));
  for (int32_t q = 0; q < p; ++q) {
    const int64_t at_q = m * sh.f[q] + (m - 1) * sh.i[q] + nw_forced[q] * sh.w[q] + idle1[q] + sh.i[q];
    int64_t down = 0, back = 0;  // Σ_{t=r}^{q-1} (F_t + c) and Σ_{t=r}^{q-1} (I_t + c)
    for (int32_t r = q; r >= 0; --r) {
      if (r < q) {
        down += sh.f[r] + c;
        back += sh.i[r] + c;
      }
      int64_t v = down + at_q + back + sh.w[r];
      if (v > out.b3) {
        out.b3 = v;
        out.b3_at = r == q ? fmt::format("stage {}", q) : fmt::format("stage {} seen from stage {}", q, r);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The Zero Bubble heuristic. Each stage keeps a clock (the end of its last op), its live bytes
// and counts of F's, I's and W's placed; ops are placed in per-stage order as soon as their
// inputs allow (the as-soon-as-possible timing verify uses), so end times are exact.

namespace {

class ZbBuilder {
 public:
  ZbBuilder(const ChainShape& sh, bool allow_bubble, bool prioritise_i, bool fill_small)
      : sh_(sh), p_(static_cast<int32_t>(sh.f.size())), m_(sh.m), allow_bubble_(allow_bubble),
        prioritise_i_(prioritise_i), fill_small_(fill_small), clock_(p_, 0), live_(p_, 0), bubble_(p_, 0),
        nf_(p_, 0), ni_(p_, 0), nw_(p_, 0), f_end_(p_, std::vector<int64_t>(m_, -1)),
        i_end_(p_, std::vector<int64_t>(m_, -1)), order_(p_) {}

  std::optional<ZbOrder> build();

 private:
  const ChainShape& sh_;
  const int32_t p_, m_;
  const bool allow_bubble_, prioritise_i_, fill_small_;
  std::vector<int64_t> clock_, live_, bubble_;
  std::vector<int32_t> nf_, ni_, nw_;
  std::vector<std::vector<int64_t>> f_end_, i_end_;
  std::vector<std::vector<std::pair<char, int32_t>>> order_;

  int64_t cap(int32_t s) const { return sh_.cap[s] ? *sh_.cap[s] : INT64_MAX / 4; }
  // When the next F (I) of stage s could start for its input: the previous stage's F (the next
  // stage's I) of that microbatch ended and crossed the link. Requires that op placed.
  int64_t f_ready(int32_t s) const { return s == 0 ? 0 : f_end_[s - 1][nf_[s]] + sh_.comm; }
  int64_t i_ready(int32_t s) const {
    int32_t j = ni_[s];
    return std::max(f_end_[s][j], s == p_ - 1 ? 0 : i_end_[s + 1][j] + sh_.comm);
  }
  int64_t largest_bubble() const { return *std::max_element(bubble_.begin(), bubble_.end()); }
  void put(int32_t s, char kind);
  // W's before the next op of stage s whose input is ready at `ready`: those that end by then,
  // then one more if the remaining gap is a bubble worth filling. False: W's to fill lacking.
  void fill_before(int32_t s, int64_t ready);
  // W's until `bytes` more fit under the limit; false when no W is left to free memory.
  bool make_room(int32_t s, int64_t bytes);
};

void ZbBuilder::put(int32_t s, char kind) {
  int64_t start = clock_[s];
  int32_t j = 0;
  if (kind == 'F') {
    j = nf_[s]++;
    start = std::max(start, s == 0 ? int64_t{0} : f_end_[s - 1][j] + sh_.comm);
    live_[s] += sh_.act[s];
  } else if (kind == 'I') {
    j = ni_[s];
    start = std::max(start, i_ready(s));
    ++ni_[s];
    live_[s] += sh_.wgrad[s] - sh_.act[s];
  } else {
    j = nw_[s]++;
    live_[s] -= sh_.wgrad[s];
  }
  // Idle time after the stage's first F counts as its bubble.
  if (nf_[s] + ni_[s] + nw_[s] > 1) bubble_[s] += start - clock_[s];
  int64_t dur = kind == 'F' ? sh_.f[s] : kind == 'I' ? sh_.i[s] : sh_.w[s];
  clock_[s] = start + dur;
  if (kind == 'F') f_end_[s][j] = clock_[s];
  if (kind == 'I') i_end_[s][j] = clock_[s];
  order_[s].push_back({kind, j});
}

void ZbBuilder::fill_before(int32_t s, int64_t ready) {
  while (nw_[s] < ni_[s] && clock_[s] + sh_.w[s] <= ready) put(s, 'W');
  if (nw_[s] < ni_[s] && clock_[s] < ready) {
    // A bubble shorter than a W: fill it anyway when leaving it would make this stage's
    // accumulated bubble the largest (or with `fill_small`, always).
    bool would_be_largest = ready - clock_[s] > largest_bubble() - bubble_[s];
    if (would_be_largest || fill_small_) put(s, 'W');
  }
}

bool ZbBuilder::make_room(int32_t s, int64_t bytes) {
  while (live_[s] + bytes > cap(s)) {
    if (nw_[s] >= ni_[s]) return false;
    put(s, 'W');
  }
  return true;
}

std::optional<ZbOrder> ZbBuilder::build() {
  if (p_ < 1 || m_ < 1) return std::nullopt;
  // Warm-up of microbatch 0: one F per stage, then as many more F's as fit before each stage's
  // first I could start (from the last stage back), each stage fewer than the one before it.
  for (int32_t s = 0; s < p_; ++s) {
    if (!make_room(s, sh_.act[s])) return std::nullopt;
    put(s, 'F');
  }
  std::vector<int32_t> extra(p_, 0);
  int64_t i_end = f_end_[p_ - 1][0] + sh_.i[p_ - 1];  // end of the last stage's first I
  for (int32_t s = p_ - 2; s >= 0; --s) {
    int64_t t = clock_[s], bytes = live_[s];
    const int64_t i_start = i_end + sh_.comm;  // when this stage's first I could start
    while (nf_[s] + extra[s] < m_ && bytes + sh_.act[s] <= cap(s)) {
      if (allow_bubble_ ? t + sh_.f[s] > i_start : t >= i_start) break;
      bytes += sh_.act[s];
      t += sh_.f[s];
      ++extra[s];
    }
    i_end = std::max(t, i_start) + sh_.i[s];
  }
  for (int32_t s = 1; s < p_; ++s)
    while (extra[s] > 0 && extra[s] >= extra[s - 1] && nf_[s] + extra[s] < m_) --extra[s];
  for (int32_t s = 0; s < p_; ++s)
    for (int32_t e = 0; e < extra[s]; ++e) put(s, 'F');
  for (int32_t s = p_ - 1; s >= 0; --s) {
    if (!make_room(s, sh_.wgrad[s] - sh_.act[s])) return std::nullopt;
    put(s, 'I');
  }
  // Steady state: microbatch j's I on every stage, after at most one F per stage.
  for (int32_t j = 1; j < m_; ++j) {
    std::vector<int32_t> want_f(p_, 0);
    for (int32_t s = 0; s < p_; ++s) {
      if (nf_[s] >= m_) continue;
      want_f[s] = 1;
      if (prioritise_i_ && s + 1 < p_ && nf_[s] >= nf_[s + 1] + 2) {
        // Two F's ahead of the next stage: skip this F when the next stage is the bottleneck.
        int64_t next_done = clock_[s + 1] + sh_.f[s + 1] + sh_.i[s + 1] + sh_.comm;
        if (clock_[s] >= next_done) {
          want_f[s] = 0;
          continue;
        }
        int64_t w_time = 0, bytes = live_[s] + sh_.act[s];
        for (int32_t w = nw_[s]; bytes > cap(s) && w < ni_[s]; ++w) {
          w_time += sh_.w[s];
          bytes -= sh_.wgrad[s];
        }
        if (clock_[s] + sh_.f[s] + w_time <= next_done) continue;  // the F costs no bubble
        if (next_done - clock_[s] <= largest_bubble() - bubble_[s]) want_f[s] = 0;
      }
    }
    for (int32_t s = p_ - 2; s >= 0; --s) want_f[s] = std::min(want_f[s], want_f[s + 1]);
    for (int32_t s = 0; s < p_; ++s) {
      if (!want_f[s]) continue;
      if (!make_room(s, sh_.act[s])) return std::nullopt;
      if (s > 0) fill_before(s, f_ready(s));
      put(s, 'F');
    }
    for (int32_t s = p_ - 1; s >= 0; --s) {
      if (ni_[s] >= nf_[s]) return std::nullopt;  // the stage's F of this microbatch was skipped
      if (!make_room(s, sh_.wgrad[s] - sh_.act[s])) return std::nullopt;
      if (s + 1 < p_) fill_before(s, i_ready(s));
      if (s == 0 && nf_[s] == m_)
        while (nw_[s] < ni_[s]) put(s, 'W');
      put(s, 'I');
    }
  }
  for (int32_t s = 0; s < p_; ++s)
    while (nw_[s] < m_) put(s, 'W');
  ZbOrder z;
  z.stages = order_;
  for (int32_t s = 0; s < p_; ++s) z.span = std::max(z.span, clock_[s] - (f_end_[s][0] - sh_.f[s]));
  z.name = fmt::format("zb heuristic ({}, {}, {})", allow_bubble_ ? "bubble before first I allowed" : "no bubble before first I",
                       prioritise_i_ ? "I prioritised" : "F every round", fill_small_ ? "small bubbles filled" : "small bubbles left");
  return z;
}

}  // namespace

std::optional<ZbOrder> zb_heuristic(const ChainShape& shape, bool allow_bubble_before_first_i, bool prioritise_i,
                                    bool fill_small_bubbles) {
  for (size_t s = 0; s < shape.f.size(); ++s)
    if (shape.w[s] <= 0) return std::nullopt;  // the heuristic needs a split backward
  ZbBuilder b(shape, allow_bubble_before_first_i, prioritise_i, fill_small_bubbles);
  return b.build();
}

}  // namespace sc
