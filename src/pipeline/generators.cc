// Named pipeline schedule generators (see generators.h).
#include "pipeline/generators.h"

#include <algorithm>
#include <array>
#include <deque>
#include <utility>

#include <fmt/format.h>

#include "support/diagnostics.h"

namespace sc {
namespace {

using Lists = std::vector<std::vector<Step>>;
constexpr ActionKind kF = ActionKind::kF;
constexpr ActionKind kI = ActionKind::kI;
constexpr ActionKind kW = ActionKind::kW;
constexpr ActionKind kB = ActionKind::kB;

Step single(ActionKind k, int32_t stage, int32_t mb) { return Step{Action{k, stage, mb}, std::nullopt, {}}; }

// `(F;B)OVERLAP_F_B`: a forward and a full backward run together.
Step overlapped(int32_t f_stage, int32_t f_mb, int32_t b_stage, int32_t b_mb) {
  Step s = single(kF, f_stage, f_mb);
  s.second = Action{kB, b_stage, b_mb};
  return s;
}

// How many stages per rank a schedule takes.
enum class Chunks { kOne, kAny, kTwo };

struct Entry {
  const char* name;
  Chunks chunks;
  const char* source;
};

// The table behind schedule_names(); `source` is what messages and reports cite.
constexpr Entry kEntries[] = {
    {"gpipe", Chunks::kOne, "PyTorch ScheduleGPipe"},
    {"1f1b", Chunks::kOne, "PyTorch Schedule1F1B"},
    {"interleaved-1f1b", Chunks::kAny, "PyTorch ScheduleInterleaved1F1B"},
    {"looped-bfs", Chunks::kAny, "PyTorch ScheduleLoopedBFS"},
    {"interleaved-zb", Chunks::kAny, "PyTorch ScheduleInterleavedZeroBubble"},
    {"zb-h1", Chunks::kOne, "ZB paper (arXiv 2401.10241) ZB-H1"},
    {"zb-h2", Chunks::kOne, "ZB paper (arXiv 2401.10241) ZB-H2"},
    {"zb-v", Chunks::kTwo, "PyTorch ScheduleZBVZeroBubble"},
    {"dualpipe", Chunks::kTwo, "deepseek-ai/DualPipe DualPipe"},
    {"dualpipev", Chunks::kTwo, "PyTorch ScheduleDualPipeV"},
};
constexpr const char* kMegatronSource = "Megatron-LM forward_backward_pipelining_with_interleaving";

std::optional<Generated> reject(std::string* why, std::string message) {
  if (why) *why = std::move(message);
  return std::nullopt;
}

// ---- one stage per rank ---------------------------------------------------------------------

// ScheduleGPipe: F for every microbatch, then B for every microbatch, in order.
Lists gpipe(int32_t p, int32_t m) {
  Lists a(p);
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t j = 0; j < m; ++j) a[s].push_back(single(kF, s, j));
    for (int32_t j = 0; j < m; ++j) a[s].push_back(single(kB, s, j));
  }
  return a;
}

// Schedule1F1B (docs/facts/pipeline-schedules.md): min(p-s-1, m) F's; then repeat { F if any left, B }. PyTorch's
// runtime warms up with min(m, p-s) F's and then runs B, F pairs: the same order.
Lists one_f_one_b(int32_t p, int32_t m) {
  Lists a(p);
  for (int32_t s = 0; s < p; ++s) {
    int32_t f = 0;
    for (; f < std::min(p - s - 1, m); ++f) a[s].push_back(single(kF, s, f));
    for (int32_t b = 0; b < m; ++b) {
      if (f < m) a[s].push_back(single(kF, s, f++));
      a[s].push_back(single(kB, s, b));
    }
  }
  return a;
}

// ZB-H1 / ZB-H2 (docs/facts/pipeline-schedules.md, from the ZB paper's figures): warm-up F's, then for each j: I_j,
// W_{j-lag} once j >= lag, the next F if any left; finally the remaining W's in order.
Lists zb_handcrafted(int32_t p, int32_t m, bool h2) {
  Lists a(p);
  for (int32_t s = 0; s < p; ++s) {
    int32_t warm = h2 ? std::min(2 * (p - s) - 1, m) : std::min(p - s, m);
    int32_t lag = h2 ? 2 * s : s;
    int32_t f = 0, w = 0;
    for (; f < warm; ++f) a[s].push_back(single(kF, s, f));
    for (int32_t j = 0; j < m; ++j) {
      a[s].push_back(single(kI, s, j));
      if (j >= lag) a[s].push_back(single(kW, s, w++));
      if (f < m) a[s].push_back(single(kF, s, f++));
    }
    while (w < m) a[s].push_back(single(kW, s, w++));
  }
  return a;
}

// ---- loop placement, v stages per rank ------------------------------------------------------

// PyTorch's _get_1f1b_rank_ops for ScheduleInterleaved1F1B (zero_bubble = false, warm-up
// factor 2) and ScheduleInterleavedZeroBubble (true, factor 1). Rank r runs op k = 0, 1, ...:
// warm-up ops are F's, then F + backward pairs, then backwards only. Forward stage of op k:
// ((k // mpr) % v) * p + r; backward stage of the k-th backward: (v-1 - (k // mpr) % v) * p + r,
// mpr = m / rounds. Zero bubble: I instead of B, and after the i-th I a W for the oldest
// pending I once i >= r; the remaining W's at the end. Microbatches count per stage.
Lists pytorch_interleaved(int32_t p, int32_t m, int32_t v, bool zero_bubble) {
  const int32_t rounds = std::max(1, m / p);
  const int32_t mpr = m / rounds;
  Lists a(p);
  for (int32_t r = 0; r < p; ++r) {
    const int32_t factor = zero_bubble ? 1 : 2;
    const int32_t warmup = std::min((v - 1) * mpr + factor * (p - 1 - r), m * v);
    const int32_t fwd_bwd = m * v - warmup;
    const int32_t total = warmup + fwd_bwd + warmup;  // cooldown = warmup
    std::vector<int32_t> f_next(v, 0), b_next(v, 0), w_next(v, 0);
    std::vector<int32_t> backward_stages;  // stage of each backward, in order
    size_t w_done = 0;
    auto& out = a[r];
    auto forward = [&](int32_t op) {
      int32_t c = (op / mpr) % v;
      out.push_back(single(kF, c * p + r, f_next[c]++));
    };
    auto weight = [&]() {
      int32_t c = backward_stages[w_done++] / p;
      out.push_back(single(kW, c * p + r, w_next[c]++));
    };
    auto backward = [&](int32_t op) {
      int32_t k = op - warmup;
      int32_t c = v - 1 - (k / mpr) % v;
      out.push_back(single(zero_bubble ? kI : kB, c * p + r, b_next[c]++));
      backward_stages.push_back(c * p + r);
      if (zero_bubble && k >= r) weight();
    };
    for (int32_t op = 0; op < total; ++op) {
      if (op < warmup) {
        forward(op);
      } else if (op < warmup + fwd_bwd) {
        forward(op);
        backward(op);
      } else {
        backward(op);
      }
    }
    while (zero_bubble && w_done < backward_stages.size()) weight();
  }
  return a;
}

// Megatron-LM forward_backward_pipelining_with_interleaving (microbatch_group_size_per_vp_stage
// = p): virtual microbatch k runs chunk (k % (p*v)) / p (reversed, v-1-chunk, for backwards) on
// microbatch (k / (p*v)) * p + k % p. Warm-up (p-r-1)*2 + (v-1)*p forwards capped at m*v; then
// F(warm-up + i), B(i) pairs; then the remaining B's.
Lists megatron_interleaved(int32_t p, int32_t m, int32_t v) {
  const int32_t total = m * v;
  Lists a(p);
  for (int32_t r = 0; r < p; ++r) {
    const int32_t warmup = std::min((p - r - 1) * 2 + (v - 1) * p, total);
    auto chunk = [&](int32_t k, bool forward) {
      int32_t c = (k % (p * v)) / p;
      return forward ? c : v - 1 - c;
    };
    auto mb = [&](int32_t k) { return (k / (p * v)) * p + k % p; };
    auto& out = a[r];
    auto fwd = [&](int32_t k) { out.push_back(single(kF, chunk(k, true) * p + r, mb(k))); };
    auto bwd = [&](int32_t k) { out.push_back(single(kB, chunk(k, false) * p + r, mb(k))); };
    for (int32_t k = 0; k < warmup; ++k) fwd(k);
    for (int32_t i = 0; i < total - warmup; ++i) {
      fwd(warmup + i);
      bwd(i);
    }
    for (int32_t i = total - warmup; i < total; ++i) bwd(i);
  }
  return a;
}

// ScheduleLoopedBFS: for each local stage in increasing order, F for microbatches 0..m-1; then
// for each local stage in decreasing order, B for microbatches m-1 down to 0.
Lists looped_bfs(int32_t p, int32_t m, int32_t v) {
  Lists a(p);
  for (int32_t r = 0; r < p; ++r) {
    for (int32_t c = 0; c < v; ++c)
      for (int32_t j = 0; j < m; ++j) a[r].push_back(single(kF, c * p + r, j));
    for (int32_t c = v - 1; c >= 0; --c)
      for (int32_t j = m - 1; j >= 0; --j) a[r].push_back(single(kB, c * p + r, j));
  }
  return a;
}

// ---- V placement, 2 stages per rank ---------------------------------------------------------

// ScheduleZBVZeroBubble._calculate_single_rank_operations: built for n = max(2p-1, m)
// microbatches, then actions on microbatches >= m are dropped. Rank r holds c0 = r and
// c1 = 2p-1-r.
Lists zbv(int32_t p, int32_t m) {
  const int32_t n = std::max(2 * p - 1, m);
  Lists a(p);
  for (int32_t r = 0; r < p; ++r) {
    const int32_t c0 = r, c1 = 2 * p - 1 - r;
    int32_t f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    std::vector<Step> ops;
    auto add = [&](ActionKind k, int32_t stage, int32_t mb) { ops.push_back(single(k, stage, mb)); };
    for (int32_t i = 0; i < 2 * (p - r) - 1; ++i) add(kF, c0, f0++);
    for (int32_t i = 0; i < r; ++i) {
      add(kF, c1, f1++);
      add(kF, c0, f0++);
    }
    for (int32_t i = 0; i < p - r; ++i) {
      add(kF, c1, f1++);
      add(kI, c1, b1);
      add(kW, c1, b1++);
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) add(kF, c0, f0++);
      add(kI, c0, b0);
      add(kW, c0, b0++);
      add(kF, c1, f1++);
      add(kI, c1, b1);
      add(kW, c1, b1++);
    }
    int32_t w0 = b0, w1 = b1;
    for (int32_t i = 0; i < r; ++i) {
      add(kI, c0, b0++);
      add(kI, c1, b1++);
    }
    for (int32_t i = 0; i < p - r; ++i) {
      add(kI, c0, b0++);
      add(kW, c0, w0++);
    }
    while (w1 < b1) add(kW, c1, w1++);
    while (w0 < b0) add(kW, c0, w0++);
    for (auto& st : ops)
      if (st.first.microbatch < m) a[r].push_back(st);
  }
  return a;
}

// Per-rank bookkeeping shared by DualPipeV and DualPipe: microbatch counters per local stage
// (0 or 1) for F and for backwards (B and I share one), and the FIFO of W's queued by I's
// (PyTorch's weight_queue, DualPipe's WeightGradStore).
class TwoStageRank {
 public:
  TwoStageRank(std::vector<Step>& out, int32_t stage0, int32_t stage1) : out_(out), stage_{stage0, stage1} {}

  void f(int c) { out_.push_back(single(kF, stage_[c], f_[c]++)); }
  void b(int c) { out_.push_back(single(kB, stage_[c], b_[c]++)); }
  void i(int c) {
    weights_.emplace_back(stage_[c], b_[c]);
    out_.push_back(single(kI, stage_[c], b_[c]++));
  }
  /// I when `zero_bubble`, else B.
  void backward(int c, bool zero_bubble) { zero_bubble ? i(c) : b(c); }
  /// The oldest queued W, if any.
  void w() {
    if (weights_.empty()) return;
    auto [stage, mb] = weights_.front();
    weights_.pop_front();
    out_.push_back(single(kW, stage, mb));
  }
  /// `(F(cf);B(cb))OVERLAP_F_B`.
  void fb(int cf, int cb) { out_.push_back(overlapped(stage_[cf], f_[cf]++, stage_[cb], b_[cb]++)); }

 private:
  std::vector<Step>& out_;
  std::array<int32_t, 2> stage_;
  std::array<int32_t, 2> f_{0, 0}, b_{0, 0};
  std::deque<std::pair<int32_t, int32_t>> weights_;
};

// ScheduleDualPipeV._calculate_single_rank_operations (docs/facts/pipeline-schedules.md steps 1-8); local stage 0 is
// r, local stage 1 is 2p-1-r.
Lists dualpipev(int32_t p, int32_t m) {
  Lists a(p);
  for (int32_t r = 0; r < p; ++r) {
    TwoStageRank k(a[r], r, 2 * p - 1 - r);
    for (int32_t i = 0; i < 2 * (p - r - 1); ++i) k.f(0);
    for (int32_t i = 0; i < r + 1; ++i) {
      k.f(0);
      k.f(1);
    }
    for (int32_t i = 0; i < p - r - 1; ++i) {
      k.i(1);
      k.w();
      k.f(1);
    }
    for (int32_t i = 0; i < m - 2 * p + r + 1; ++i) {
      if (i == 0 && r == p - 1) {
        k.f(0);  // "we don't overlap these two chunks to further reduce bubble size"
        k.b(1);
      } else {
        k.fb(0, 1);
      }
      k.fb(1, 0);
    }
    for (int32_t i = 0; i < p - r - 1; ++i) {
      k.b(1);
      k.fb(1, 0);
    }
    const int32_t step6 = r + 1;
    bool zb = false;
    for (int32_t i = 0; i < step6; ++i) {
      if (i == step6 / 2 && r % 2 == 1) zb = true;
      k.backward(1, zb);
      if (i == step6 / 2 && r % 2 == 0) zb = true;
      k.backward(0, zb);
    }
    for (int32_t i = 0; i < p - r - 1; ++i) {
      k.w();
      k.backward(0, zb);
    }
    for (int32_t i = 0; i < r + 1; ++i) k.w();
  }
  return a;
}

// deepseek-ai/DualPipe DualPipe.step with m micro-batches, m/2 per direction. Rank r, half
// rank h = min(r, p-1-r); local phase 0 is the forward direction (stage r) on the first half
// of the ranks and the reverse direction (stage 2p-1-r) on the second half ("phase ^=
// is_in_second_half"). Steps: 1. (p/2-h-1)*2 x F0; 2. (h+1) x [F0, F1]; 3. (p/2-h-1) x
// [I1, W, F1]; 4. (m/2-p+h+1) x [(F0;B1), (F1;B0)], the first (F0;B1) split into F0, B1 on the
// two middle ranks; 5. (p/2-h-1) x [B1, (F1;B0)]; 6. (h+1) x [x1, x0], x = B until the
// half-way point i = (h+1)//2 and I after it (odd h switch before x1, even h before x0);
// 7. (p/2-h-1) x [W, I0]; 8. (h+1) x W. W's pop FIFO from the I's that queued them.
Lists dualpipe(int32_t p, int32_t m) {
  const int32_t half_ranks = p / 2, half_m = m / 2;
  Lists a(p);
  for (int32_t r = 0; r < p; ++r) {
    const int32_t h = std::min(r, p - 1 - r);
    const bool second_half = r >= half_ranks;
    const bool middle = r == half_ranks - 1 || r == half_ranks;
    const int32_t fwd_stage = r, rev_stage = 2 * p - 1 - r;
    TwoStageRank k(a[r], second_half ? rev_stage : fwd_stage, second_half ? fwd_stage : rev_stage);
    for (int32_t i = 0; i < (half_ranks - h - 1) * 2; ++i) k.f(0);
    for (int32_t i = 0; i < h + 1; ++i) {
      k.f(0);
      k.f(1);
    }
    for (int32_t i = 0; i < half_ranks - h - 1; ++i) {
      k.i(1);
      k.w();
      k.f(1);
    }
    for (int32_t i = 0; i < half_m - p + h + 1; ++i) {
      if (i == 0 && middle) {
        k.f(0);  // "we don't overlap these two chunks to further reduce bubble size"
        k.b(1);
      } else {
        k.fb(0, 1);
      }
      k.fb(1, 0);
    }
    for (int32_t i = 0; i < half_ranks - h - 1; ++i) {
      k.b(1);
      k.fb(1, 0);
    }
    const int32_t step6 = h + 1;
    bool zb = false;
    for (int32_t i = 0; i < step6; ++i) {
      if (i == step6 / 2 && h % 2 == 1) zb = true;
      k.backward(1, zb);
      if (i == step6 / 2 && h % 2 == 0) zb = true;
      k.backward(0, zb);
    }
    for (int32_t i = 0; i < half_ranks - h - 1; ++i) {
      k.w();
      k.i(0);
    }
    for (int32_t i = 0; i < h + 1; ++i) k.w();
  }
  return a;
}

// The number of stages per rank the options ask for, checked against what `e` supports.
std::optional<int32_t> resolve_chunks(const GenOptions& o, const Entry& e, std::string* why) {
  const int32_t p = o.ranks;
  std::optional<int32_t> v;
  if (o.chunks) {
    if (*o.chunks < 1) {
      if (why) *why = fmt::format("chunks (stages per rank) must be >= 1: got {}", *o.chunks);
      return std::nullopt;
    }
    v = *o.chunks;
  }
  if (o.stages) {
    if (*o.stages < 1 || *o.stages % p != 0) {
      if (why)
        *why = fmt::format("stages must be a positive multiple of ranks (every rank holds the same number of stages): "
                           "got {} stages for {} ranks", *o.stages, p);
      return std::nullopt;
    }
    if (v && *v * p != *o.stages) {
      if (why)
        *why = fmt::format("stages ({}) and chunks ({}) disagree: stages must be chunks * ranks = {}", *o.stages, *v,
                           *v * p);
      return std::nullopt;
    }
    v = *o.stages / p;
  }
  switch (e.chunks) {
    case Chunks::kOne:
      if (v && *v != 1) {
        if (why)
          *why = fmt::format("{} runs one stage per rank ({}): got {} stages for {} ranks", e.name, e.source, *v * p, p);
        return std::nullopt;
      }
      return 1;
    case Chunks::kTwo:
      if (v && *v != 2) {
        if (why)
          *why = fmt::format("{} needs exactly 2 stages per rank ({}): got {} stages for {} ranks", e.name, e.source,
                             *v * p, p);
        return std::nullopt;
      }
      return 2;
    case Chunks::kAny:
      return v.value_or(2);
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const Entry& e : kEntries) out.emplace_back(e.name);
  return out;
}

std::string unknown_schedule_message(const std::string& name) {
  std::string msg = fmt::format("unknown schedule '{}'", name);
  std::string near = closest_match(name, schedule_names());
  if (!near.empty()) msg += fmt::format("; did you mean '{}'?", near);
  std::string names;
  for (const auto& n : schedule_names()) names += (names.empty() ? "" : ", ") + n;
  return msg + " (schedules: " + names + ")";
}

std::optional<Generated> generate(const GenOptions& o, std::string* why) {
  const Entry* entry = nullptr;
  for (const Entry& e : kEntries)
    if (o.name == e.name) entry = &e;
  if (!entry) {
    return reject(why, unknown_schedule_message(o.name));
  }
  const std::string name = o.name;
  const int32_t p = o.ranks, m = o.microbatches;
  if (p < 1) return reject(why, fmt::format("{} needs ranks >= 1: got {}", name, p));
  if (m < 1) return reject(why, fmt::format("{} needs microbatches >= 1: got {}", name, m));
  if (o.megatron && name != "interleaved-1f1b")
    return reject(why, fmt::format("the megatron variant exists for interleaved-1f1b only, not {}", name));
  // Bound the shape before anything is allocated (the same bound verify applies to specs).
  constexpr int64_t kMaxPairs = 10'000'000;
  auto v_opt = resolve_chunks(o, *entry, why);  // allocates nothing
  if (!v_opt) return std::nullopt;
  const int32_t v = *v_opt;
  if (p > 65536 || static_cast<int64_t>(p) * std::max<int64_t>(v, 1) * m > kMaxPairs)
    return reject(why, fmt::format("{} ranks x {} stage{} per rank x {} microbatches is more than the {} (stage, "
                                   "microbatch) pairs schedcheck supports", p, v, v == 1 ? "" : "s", m, kMaxPairs));
  if (static_cast<int64_t>(p) * std::max<int64_t>(v, 1) > kMaxSpecStages)
    return reject(why, fmt::format("{} ranks x {} stage{} per rank is more than the {} stages schedcheck supports", p, v,
                                   v == 1 ? "" : "s", kMaxSpecStages));
  const int32_t S = v * p;  // at most kMaxSpecStages

  Generated g;
  g.name = name;
  g.ranks = p;
  g.stages = S;
  g.microbatches = m;
  g.pipeline_starts = {0};
  g.source = entry->source;
  g.stage_to_rank = loop_placement(p, S);

  if (name == "gpipe") {
    g.actions = gpipe(p, m);
  } else if (name == "1f1b") {
    if (m < S)
      return reject(why, fmt::format("1f1b needs microbatches >= stages (PyTorch Schedule1F1B rejects m < stages): "
                                     "got m = {}, {} stages", m, S));
    g.actions = one_f_one_b(p, m);
  } else if (name == "interleaved-1f1b" && o.megatron) {
    if (p < 2)
      return reject(why, fmt::format("interleaved-1f1b (megatron) needs ranks > 1 (Megatron-LM "
                                     "initialize_model_parallel rejects an interleaved schedule without pipeline "
                                     "parallelism): got {}", p));
    if (m % p != 0)
      return reject(why, fmt::format("interleaved-1f1b (megatron) needs microbatches divisible by ranks (Megatron-LM's "
                                     "interleaved schedule requires m % p == 0): got m = {}, p = {}", m, p));
    g.source = kMegatronSource;
    g.actions = megatron_interleaved(p, m, v);
  } else if (name == "interleaved-1f1b" || name == "interleaved-zb") {
    const int32_t rounds = std::max(1, m / p);
    if (m % rounds != 0)
      return reject(why, fmt::format("{} needs microbatches divisible by rounds = max(1, m // p) = {} ({} rejects "
                                     "m % rounds != 0): got m = {}, p = {}", name, rounds, entry->source, m, p));
    g.actions = pytorch_interleaved(p, m, v, name == "interleaved-zb");
  } else if (name == "looped-bfs") {
    g.actions = looped_bfs(p, m, v);
  } else if (name == "zb-h1" || name == "zb-h2") {
    g.actions = zb_handcrafted(p, m, name == "zb-h2");
  } else if (name == "zb-v") {
    g.stage_to_rank = v_placement(p, S);
    g.actions = zbv(p, m);
  } else if (name == "dualpipev") {
    if (m < S)
      return reject(why, fmt::format("dualpipev needs microbatches >= stages = 2 * ranks (PyTorch ScheduleDualPipeV "
                                     "rejects m < stages): got m = {}, {} stages", m, S));
    g.stage_to_rank = v_placement(p, S);
    g.actions = dualpipev(p, m);
  } else if (name == "dualpipe") {
    if (p % 2 != 0)
      return reject(why, fmt::format("dualpipe needs an even number of ranks (deepseek-ai/DualPipe asserts "
                                     "num_ranks % 2 == 0): got {}", p));
    if (m % 2 != 0)
      return reject(why, fmt::format("dualpipe needs an even number of microbatches, half per direction "
                                     "(deepseek-ai/DualPipe asserts num_chunks % 2 == 0): got {}", m));
    if (m < 2 * p)
      return reject(why, fmt::format("dualpipe needs microbatches >= 2 * ranks (deepseek-ai/DualPipe asserts "
                                     "num_chunks >= num_ranks * 2): got m = {}, {} ranks", m, p));
    g.stage_to_rank = v_placement(p, S);
    g.microbatches = m / 2;
    g.pipeline_starts = {0, p};
    g.actions = dualpipe(p, m);
  }
  g.placement = placement_name(g.stage_to_rank, p);
  return g;
}

PipelineSpec to_pipeline_spec(const Generated& g) {
  PipelineSpec s;
  s.name = g.name;
  s.path = "<generated>";
  s.ranks = g.ranks;
  s.stages = g.stages;
  s.microbatches = g.microbatches;
  s.stage_to_rank = g.stage_to_rank;
  s.placement = g.placement;
  s.placement_declared = true;
  s.actions = g.actions;
  s.pipeline_starts = g.pipeline_starts;
  apply_unit_defaults(s);
  return s;
}

}  // namespace sc
