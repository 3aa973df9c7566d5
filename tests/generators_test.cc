// Schedule generators: exact matches with PyTorch's artifacts, docs/facts/pipeline-schedules.md numbers, shape rules.
#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "catch.h"
#include "pipeline/verify_pipeline.h"
#include "pipeline/generators.h"
#include "spec/csv_schedule.h"
#include "test_util.h"

namespace sc {
namespace {

Generated gen(const std::string& name, int32_t p, int32_t m, std::optional<int32_t> v = std::nullopt,
              bool megatron = false) {
  GenOptions o;
  o.name = name;
  o.ranks = p;
  o.microbatches = m;
  o.chunks = v;
  o.megatron = megatron;
  std::string why;
  auto g = generate(o, &why);
  INFO(name << " p=" << p << " m=" << m << ": " << why);
  REQUIRE(g);
  return *g;
}

// The reason generate() gives for rejecting `o` (empty when it accepts).
std::string why_not(GenOptions o) {
  std::string why;
  return generate(o, &why) ? std::string() : why;
}

GenOptions opts(const std::string& name, int32_t p, int32_t m, std::optional<int32_t> stages = std::nullopt,
                std::optional<int32_t> chunks = std::nullopt, bool megatron = false) {
  GenOptions o;
  o.name = name;
  o.ranks = p;
  o.microbatches = m;
  o.stages = stages;
  o.chunks = chunks;
  o.megatron = megatron;
  return o;
}

// Compares per-rank format_step strings; prints the first difference of each rank.
void require_same_actions(const std::vector<std::vector<Step>>& expected, const std::vector<std::vector<Step>>& got) {
  REQUIRE(got.size() == expected.size());
  for (size_t r = 0; r < expected.size(); ++r) {
    size_t n = std::max(expected[r].size(), got[r].size());
    for (size_t i = 0; i < n; ++i) {
      std::string e = i < expected[r].size() ? format_step(expected[r][i]) : "<end>";
      std::string g = i < got[r].size() ? format_step(got[r][i]) : "<end>";
      if (e != g) {
        FAIL_CHECK("rank " << r << ", index " << i << ": expected " << e << ", got " << g);
        break;
      }
    }
  }
}

// A spec of `g` with per-stage costs F = I = W = `c` (B = 2c) and memory `act` / `wgrad` bytes.
PipelineSpec costed(const Generated& g, double c, int64_t act, int64_t wgrad) {
  PipelineSpec s = to_pipeline_spec(g);
  size_t n = static_cast<size_t>(g.stages);
  s.costs.f_s.assign(n, c);
  s.costs.i_s.assign(n, c);
  s.costs.w_s.assign(n, c);
  s.costs.b_s.assign(n, 2 * c);
  s.memory.activation_bytes.assign(n, act);
  s.memory.weight_grad_bytes.assign(n, wgrad);
  return s;
}

// An independent as-soon-as-possible simulation of a compute-only schedule with several
// pipelines (Generated::pipeline_starts), unit costs (F = I = W = 1, B = 2, an overlapped pair
// F + B), no link cost. Deps (docs/facts/pipeline-schedules.md): F(s,j) after F(s-1,j) unless s starts a pipeline;
// I/B(s,j) after F(s,j) and after I/B(s+1,j) unless s is its pipeline's last stage; W after I.
struct LocalSim {
  bool complete = false;
  double makespan = 0, span = 0;
  std::vector<double> idle;  // per rank: last end - first start - busy
  size_t ops = 0;
};

LocalSim simulate_local(const Generated& g) {
  const int32_t S = g.stages, M = g.microbatches;
  auto starts = [&](int32_t s) {
    return std::find(g.pipeline_starts.begin(), g.pipeline_starts.end(), s) != g.pipeline_starts.end();
  };
  // end time of F / backward (I or B) / W per (stage, microbatch); < 0 while not run
  std::vector<double> f_end(S * M, -1), b_end(S * M, -1), w_end(S * M, -1);
  auto idx = [&](int32_t s, int32_t j) { return static_cast<size_t>(s) * M + j; };
  auto ready = [&](const Action& a, double& t) {
    double need = 0;
    auto dep = [&](double e) {
      if (e < 0) return false;
      need = std::max(need, e);
      return true;
    };
    bool ok = true;
    if (a.kind == ActionKind::kF) {
      if (!starts(a.stage)) ok = dep(f_end[idx(a.stage - 1, a.microbatch)]);
    } else if (a.kind == ActionKind::kI || a.kind == ActionKind::kB) {
      ok = dep(f_end[idx(a.stage, a.microbatch)]);
      bool last = a.stage + 1 == S || starts(a.stage + 1);
      if (ok && !last) ok = dep(b_end[idx(a.stage + 1, a.microbatch)]);
    } else if (a.kind == ActionKind::kW) {
      ok = dep(b_end[idx(a.stage, a.microbatch)]);
    }
    t = std::max(t, need);
    return ok;
  };
  auto cost = [](const Action& a) { return a.kind == ActionKind::kB ? 2.0 : 1.0; };
  auto finish = [&](const Action& a, double end) {
    (a.kind == ActionKind::kF ? f_end : a.kind == ActionKind::kW ? w_end : b_end)[idx(a.stage, a.microbatch)] = end;
  };
  const int32_t P = g.ranks;
  std::vector<size_t> next(P, 0);
  std::vector<double> free(P, 0), first(P, -1), busy(P, 0);
  LocalSim out;
  for (bool progress = true; progress;) {
    progress = false;
    for (int32_t r = 0; r < P; ++r) {
      while (next[r] < g.actions[r].size()) {
        const Step& st = g.actions[r][next[r]];
        double t = free[r];
        if (!ready(st.first, t) || (st.second && !ready(*st.second, t))) break;
        double d = cost(st.first) + (st.second ? cost(*st.second) : 0);
        if (first[r] < 0) first[r] = t;
        free[r] = t + d;
        busy[r] += d;
        finish(st.first, t + d);
        if (st.second) finish(*st.second, t + d);
        ++next[r];
        ++out.ops;
        progress = true;
      }
    }
  }
  out.complete = true;
  for (int32_t r = 0; r < P; ++r) out.complete = out.complete && next[r] == g.actions[r].size();
  double lo = 1e300, hi = 0;
  out.idle.assign(P, 0);
  for (int32_t r = 0; r < P; ++r) {
    lo = std::min(lo, first[r]);
    hi = std::max(hi, free[r]);
    out.span = std::max(out.span, free[r] - first[r]);
    out.idle[r] = free[r] - first[r] - busy[r];
  }
  out.makespan = hi - lo;
  return out;
}

// Every (stage, microbatch) has one F and one backward (B, or I and W), on the placement's rank.
void require_complete(const Generated& g) {
  std::map<std::tuple<int32_t, int32_t, ActionKind>, int> count;
  for (int32_t r = 0; r < g.ranks; ++r)
    for (const Step& st : g.actions[r])
      for (const Action* a : {&st.first, st.second ? &*st.second : nullptr}) {
        if (!a) continue;
        REQUIRE(a->stage >= 0);
        REQUIRE(a->stage < g.stages);
        REQUIRE(a->microbatch >= 0);
        REQUIRE(a->microbatch < g.microbatches);
        REQUIRE(g.stage_to_rank[a->stage] == r);
        ++count[{a->stage, a->microbatch, a->kind}];
      }
  for (int32_t s = 0; s < g.stages; ++s)
    for (int32_t j = 0; j < g.microbatches; ++j) {
      INFO("stage " << s << ", microbatch " << j);
      CHECK(count[{s, j, ActionKind::kF}] == 1);
      int b = count[{s, j, ActionKind::kB}], i = count[{s, j, ActionKind::kI}], w = count[{s, j, ActionKind::kW}];
      CHECK(((b == 1 && i == 0 && w == 0) || (b == 0 && i == 1 && w == 1)));
    }
}

int64_t max_of(const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

TEST_CASE("dualpipev at 4 ranks and 10 microbatches equals PyTorch's artifact action for action", "[gen]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("../shared/corpus not found; skipping the dualpipev artifact comparison");
  }
  Diagnostics diags;
  auto csv = read_csv_schedule(test::corpus_dir() + "/pytorch/dualpipev_4rank_10mb.csv", diags);
  REQUIRE(csv);
  Generated g = gen("dualpipev", 4, 10);
  CHECK(g.placement == "v");
  CHECK(g.stages == 8);
  require_same_actions(csv->actions, g.actions);
}

TEST_CASE("interleaved-zb at 2 ranks, 4 stages, 8 microbatches equals PyTorch's zb1p artifact without idle cells",
          "[gen]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("../shared/corpus not found; skipping the zb1p artifact comparison");
  }
  Diagnostics diags;
  auto csv = read_csv_schedule(test::corpus_dir() + "/pytorch/zb1p_2rank_2stagep_compute.csv", diags);
  REQUIRE(csv);
  CHECK(csv->idle_cells == 2);  // the reader dropped them; the generator never makes any
  std::string why;
  auto g = generate(opts("interleaved-zb", 2, 8, 4), &why);
  INFO(why);
  REQUIRE(g);
  CHECK(g->placement == "loop");
  require_same_actions(csv->actions, g->actions);
}

TEST_CASE("the generators hold their documented placement and names", "[gen]") {
  CHECK(schedule_names() == std::vector<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "looped-bfs",
                                                     "interleaved-zb", "zb-h1", "zb-h2", "zb-v", "dualpipe",
                                                     "dualpipev"});
  CHECK(gen("1f1b", 4, 8).placement == "loop");
  CHECK(gen("interleaved-1f1b", 4, 8).stages == 8);  // v defaults to 2
  CHECK(gen("looped-bfs", 3, 5, 3).stage_to_rank == std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2});
  CHECK(gen("zb-v", 3, 6).stage_to_rank == std::vector<int32_t>{0, 1, 2, 2, 1, 0});
  Generated d = gen("dualpipe", 4, 8);
  CHECK(d.placement == "v");
  CHECK(d.microbatches == 4);  // per direction
  CHECK(d.pipeline_starts == std::vector<int32_t>{0, 4});
  CHECK(gen("gpipe", 2, 3).pipeline_starts == std::vector<int32_t>{0});
  // docs/facts/pipeline-schedules.md interleaved warm-up on rank r: min((v-1)·(m/rounds) + 2(p-1-r), m·v) forwards.
  Generated il = gen("interleaved-1f1b", 4, 8, 2);
  for (int32_t r = 0; r < 4; ++r) {
    size_t f = 0;
    while (f < il.actions[r].size() && il.actions[r][f].first.kind == ActionKind::kF) ++f;
    CHECK(f == static_cast<size_t>(std::min(4 + 2 * (3 - r), 16)) + 1);  // + the first steady-state F
  }
}

TEST_CASE("megatron's interleaved order equals PyTorch's when m is a multiple of p", "[gen]") {
  for (int32_t p : {3, 4, 5})
    for (int32_t v : {1, 2, 3})
      for (int32_t m : {p, 2 * p, 3 * p}) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        require_same_actions(gen("interleaved-1f1b", p, m, v).actions, gen("interleaved-1f1b", p, m, v, true).actions);
      }
}

// Each rejection names the reference's rule; the shapes just inside a rule are accepted.
TEST_CASE("shapes the references reject are rejected with the reference's rule", "[gen]") {
  CHECK(why_not(opts("1f1b", 4, 3)) ==
        "1f1b needs microbatches >= stages (PyTorch Schedule1F1B rejects m < stages): got m = 3, 4 stages");
  CHECK(why_not(opts("1f1b", 8, 1)).find("rejects m < stages") != std::string::npos);  // the reported hang
  CHECK(why_not(opts("1f1b", 4, 4)).empty());
  CHECK(why_not(opts("interleaved-1f1b", 4, 9, std::nullopt, 2)) ==
        "interleaved-1f1b needs microbatches divisible by rounds = max(1, m // p) = 2 (PyTorch "
        "ScheduleInterleaved1F1B rejects m % rounds != 0): got m = 9, p = 4");
  CHECK(why_not(opts("interleaved-1f1b", 4, 10, std::nullopt, 2)).empty());  // rounds 2, flex_pp example
  CHECK(why_not(opts("interleaved-1f1b", 4, 3, std::nullopt, 2)).empty());   // rounds 1
  CHECK(why_not(opts("interleaved-zb", 4, 9, std::nullopt, 2)).find("PyTorch ScheduleInterleavedZeroBubble rejects") !=
        std::string::npos);
  CHECK(why_not(opts("interleaved-1f1b", 4, 10, std::nullopt, 2, true)) ==
        "interleaved-1f1b (megatron) needs microbatches divisible by ranks (Megatron-LM's interleaved schedule "
        "requires m % p == 0): got m = 10, p = 4");
  CHECK(why_not(opts("interleaved-1f1b", 1, 4, std::nullopt, 2, true)).find("needs ranks > 1") != std::string::npos);
  CHECK(why_not(opts("zb-v", 4, 8, 12)) ==
        "zb-v needs exactly 2 stages per rank (PyTorch ScheduleZBVZeroBubble): got 12 stages for 4 ranks");
  CHECK(why_not(opts("dualpipev", 4, 8, std::nullopt, 1)).find("needs exactly 2 stages per rank") != std::string::npos);
  CHECK(why_not(opts("dualpipev", 4, 7)) ==
        "dualpipev needs microbatches >= stages = 2 * ranks (PyTorch ScheduleDualPipeV rejects m < stages): got m = "
        "7, 8 stages");
  CHECK(why_not(opts("dualpipev", 4, 8)).empty());
  CHECK(why_not(opts("dualpipe", 3, 12)) ==
        "dualpipe needs an even number of ranks (deepseek-ai/DualPipe asserts num_ranks % 2 == 0): got 3");
  CHECK(why_not(opts("dualpipe", 4, 9)).find("asserts num_chunks % 2 == 0") != std::string::npos);
  CHECK(why_not(opts("dualpipe", 4, 6)) ==
        "dualpipe needs microbatches >= 2 * ranks (deepseek-ai/DualPipe asserts num_chunks >= num_ranks * 2): got m = "
        "6, 4 ranks");
  CHECK(why_not(opts("gpipe", 4, 8, 8)) == "gpipe runs one stage per rank (PyTorch ScheduleGPipe): got 8 stages for 4 ranks");
  CHECK(why_not(opts("zb-h2", 4, 8, std::nullopt, 2)).find("zb-h2 runs one stage per rank") != std::string::npos);
  CHECK(why_not(opts("looped-bfs", 4, 8, 6)) ==
        "stages must be a positive multiple of ranks (every rank holds the same number of stages): got 6 stages for 4 "
        "ranks");
  CHECK(why_not(opts("looped-bfs", 4, 8, 8, 3)) ==
        "stages (8) and chunks (3) disagree: stages must be chunks * ranks = 12");
  CHECK(why_not(opts("looped-bfs", 4, 8, 8, 2)).empty());
  CHECK(why_not(opts("looped-bfs", 4, 8, std::nullopt, 0)) == "chunks (stages per rank) must be >= 1: got 0");
  CHECK(why_not(opts("gpipe", 0, 8)) == "gpipe needs ranks >= 1: got 0");
  CHECK(why_not(opts("gpipe", 2, 0)) == "gpipe needs microbatches >= 1: got 0");
  CHECK(why_not(opts("zb-h1", 4, 8, std::nullopt, std::nullopt, true)) ==
        "the megatron variant exists for interleaved-1f1b only, not zb-h1");
  CHECK(why_not(opts("zbh1", 4, 8)).rfind("unknown schedule 'zbh1'; did you mean 'zb-h1'? (schedules: gpipe, 1f1b", 0) == 0);
  CHECK(why_not(opts("pipedream", 4, 8)).rfind("unknown schedule 'pipedream' (schedules: gpipe, 1f1b", 0) == 0);
}

// Every schedule verifies (structure, causality, deadlock, memory) over
// p = 2..8, m = 1..24, v = 1..4 wherever the reference accepts the shape: compute only, and
// with PyTorch's own SEND/RECV lowering under rendezvous semantics.
TEST_CASE("every generated schedule verifies over a grid of shapes", "[gen]") {
  auto t0 = std::chrono::steady_clock::now();
  size_t checked = 0;
  for (int32_t p = 2; p <= 8; ++p)
    for (int32_t m = 1; m <= 24; ++m) {
      for (const std::string& name : schedule_names()) {
        for (int32_t v = 1; v <= 4; ++v) {
          for (bool megatron : {false, true}) {
            if (megatron && name != "interleaved-1f1b") continue;
            GenOptions o = opts(name, p, m, std::nullopt, v, megatron);
            std::string why;
            auto g = generate(o, &why);
            if (!g) continue;
            INFO(name << (megatron ? " (megatron)" : "") << " p=" << p << " m=" << m << " v=" << v);
            PipelineSpec spec = to_pipeline_spec(*g);
            VerifyResult r = verify(spec, VerifyOptions{});
            for (const auto& f : r.findings) FAIL_CHECK(f.message);
            REQUIRE(r.timeline);
            VerifyOptions lowered;
            lowered.lower = LowerPolicy::kPyTorch;
            lowered.semantics = Semantics{Semantics::kRendezvous, 0};
            VerifyResult rl = verify(spec, lowered);
            for (const auto& f : rl.findings) FAIL_CHECK("lowered (pytorch, rendezvous): " << f.message);
            ++checked;
          }
        }
      }
    }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(checked << " schedules in " << s << " s");
  CHECK(checked > 2500);
}

// The independent simulation above agrees with verify's timeline on every schedule.
TEST_CASE("an independent simulation agrees with verify's timeline on every schedule", "[gen]") {
  for (const std::string& name : schedule_names()) {
    for (auto [p, m] : {std::pair{4, 8}, std::pair{3, 7}, std::pair{2, 12}, std::pair{6, 16}}) {
      std::string why;
      auto g = generate(opts(name, p, m), &why);
      if (!g) continue;
      INFO(name << " p=" << p << " m=" << m);
      LocalSim local = simulate_local(*g);
      REQUIRE(local.complete);
      VerifyResult r = verify(to_pipeline_spec(*g), VerifyOptions{});
      REQUIRE(r.timeline);
      CHECK(local.makespan == Approx(r.timeline->makespan_s));
      CHECK(local.span == Approx(r.timeline->span_s));
      for (int32_t q = 0; q < p; ++q) CHECK(local.idle[q] == Approx(r.timeline->idle_per_rank_s[q]));
    }
  }
}

// DualPipe has two pipelines (Generated::pipeline_starts): complete, deadlock-free in the
// independent simulation as well as in verify (above), every rank equally busy.
TEST_CASE("dualpipe is complete and deadlock-free over a grid of shapes", "[gen]") {
  for (int32_t p = 2; p <= 8; p += 2)
    for (int32_t m = 2 * p; m <= 24; m += 2) {
      INFO("p=" << p << " m=" << m);
      Generated g = gen("dualpipe", p, m);
      require_complete(g);
      LocalSim local = simulate_local(g);
      REQUIRE(local.complete);
      // each rank: m/2 microbatches on each of its 2 stages, F + I + W = 3 s each
      for (int32_t r = 0; r < p; ++r) {
        double busy = 0;
        for (const Step& st : g.actions[r])
          busy += (st.first.kind == ActionKind::kB ? 2 : 1) + (st.second ? 2 : 0);
        CHECK(busy == Approx(3.0 * m));
      }
    }
  // DeepSeek-V3 report (arXiv 2412.19437) Table 2, docs/facts/pipeline-schedules.md: DualPipe's bubble is
  // (PP/2 - 1)(F&B + B - 3W); unit costs F = I = W = 1, B = 2, F&B = F + B = 3 give p - 2, the
  // idle of the end ranks.
  for (int32_t p = 2; p <= 8; p += 2)
    for (int32_t m : {2 * p, 2 * p + 2, 24}) {
      INFO("p=" << p << " m=" << m);
      VerifyResult r = verify(to_pipeline_spec(gen("dualpipe", p, m)), VerifyOptions{});
      for (const auto& f : r.findings) FAIL_CHECK(f.message);
      REQUIRE(r.timeline);
      CHECK(max_of(r.timeline->idle_per_rank_s) == Approx((p / 2 - 1) * (3 + 2 - 3)));
      CHECK(r.timeline->idle_per_rank_s[0] == Approx(p - 2));
    }
  // deepseek-ai/DualPipe step 1 and 2 on rank 0 of 8 ranks, 20 micro-batches: (p/2 - 1) * 2 = 6
  // forwards of its own direction, then one of each direction in turn.
  Generated g = gen("dualpipe", 8, 20);
  CHECK(format_step(g.actions[0][6]) == "0F6");
  CHECK(format_step(g.actions[0][7]) == "15F0");
}

TEST_CASE("every schedule is complete with one forward and one backward per stage and microbatch", "[gen]") {
  for (const std::string& name : schedule_names())
    for (auto [p, m] : {std::pair{4, 8}, std::pair{5, 11}, std::pair{2, 4}}) {
      std::string why;
      auto g = generate(opts(name, p, m), &why);
      if (!g) continue;
      INFO(name << " p=" << p << " m=" << m);
      require_complete(*g);
    }
}

// docs/facts/pipeline-schedules.md bubble and memory formulas as properties over p = 2..8, m = 1..24, v = 1..4, with
// chunk cost 1/v (F = I = W = 1/v, B = 2/v), no link cost, one byte of activation per chunk
// and no weight-gradient bytes (the formulas count activations), so a peak reads in chunk units
// (M_B = v units). Idle is that of the rank that sets the span (the largest), as in the
// docs/facts/pipeline-schedules.md table. Each formula is checked where it holds; the conditions in the code are the ranges.
TEST_CASE("the docs/facts/pipeline-schedules.md idle and peak formulas hold over ranges of p, m and v", "[gen][facts]") {
  size_t checked = 0;
  for (int32_t p = 2; p <= 8; ++p)
    for (int32_t m = 1; m <= 24; ++m)
      for (int32_t v = 1; v <= 4; ++v)
        for (const std::string& name : schedule_names())
          for (bool megatron : {false, true}) {
            if (name == "dualpipe" || name == "dualpipev" || name == "interleaved-zb") continue;  // see their tests
            if (megatron && name != "interleaved-1f1b") continue;
            std::string why;
            auto g = generate(opts(name, p, m, std::nullopt, v, megatron), &why);
            if (!g) continue;
            const int32_t V = g->stages / p;
            if (V != v) continue;
            INFO(name << (megatron ? " (megatron)" : "") << " p=" << p << " m=" << m << " v=" << v);
            VerifyResult r = verify(costed(*g, 1.0 / v, 1, 0), VerifyOptions{});
            REQUIRE(r.timeline);
            const auto& idle = r.timeline->idle_per_rank_s;
            const auto& peak = r.timeline->peak_bytes_per_rank;
            const double work = 3;  // T_F + T_B + T_W of a whole stage's worth of chunks
            ++checked;
            if (name == "gpipe") {
              CHECK(max_of(idle) == Approx((p - 1) * work));
              CHECK(peak[0] == m);
            } else if (name == "1f1b") {
              CHECK(max_of(idle) == Approx((p - 1) * work));
              for (int32_t s = 0; s < p; ++s) CHECK(peak[s] == std::min(m, p - s));
            } else if (name == "zb-h1") {
              if (m >= p) CHECK(max_of(idle) == Approx((p - 1) * (1 + 1 - 1)));  // (p-1)(T_F+T_B-T_W)
              CHECK(peak[0] == std::min(m, p));
            } else if (name == "zb-h2") {
              if (m >= 2 * p - 1) CHECK(max_of(idle) == Approx(0));  // (p-1)(T_F+T_B-2T_W)
              CHECK(peak[0] == std::min(m, 2 * p - 1));
            } else if (name == "interleaved-1f1b") {
              if (m >= p) CHECK(max_of(idle) == Approx((p - 1) * work / v));
              // (p + (p-1)/v) M_B, M_B = v chunk units
              if (m % p == 0 && m >= 2 * p) CHECK(peak[0] == v * p + p - 1);
            } else if (name == "looped-bfs") {
              if (m >= p) CHECK(max_of(idle) == Approx((p - 1) * work / v));
              CHECK(peak[0] == m * v);
            } else if (name == "zb-v") {
              if (m >= 2 * p) {
                for (double x : idle) CHECK(x == Approx(0));
                for (int64_t x : peak) CHECK(x == 2 * p);  // p M_B on every rank, M_B = 2 chunk units
              }
            }
          }
  CHECK(checked > 1500);
}

// docs/facts/pipeline-schedules.md: DualPipeV is DualPipe folded onto p ranks, so PP = 2p stages: idle per rank
// (PP/2 - 1)(F&B + B - 3W) = 2p - 2 at unit costs (F&B = 3, B = 2, W = 1), and peak activation
// PP + 1 = 2p + 1 chunk units on every rank.
TEST_CASE("dualpipev has DualPipe's bubble and memory with PP = 2p stages", "[gen][facts]") {
  for (int32_t p = 1; p <= 8; ++p)
    for (int32_t m : {2 * p, 2 * p + 1, 4 * p, 24}) {
      if (m < 2 * p) continue;
      INFO("p=" << p << " m=" << m);
      VerifyResult r = verify(costed(gen("dualpipev", p, m), 1, 1, 1), VerifyOptions{});
      for (const auto& f : r.findings) FAIL_CHECK(f.message);
      REQUIRE(r.timeline);
      CHECK(max_of(r.timeline->idle_per_rank_s) == Approx((p - 1) * (3 + 2 - 3)));
      for (int64_t peak : r.timeline->peak_bytes_per_rank) CHECK(peak == 2 * p + 1);
    }
}

// docs/facts/pipeline-schedules.md reference values: p = 4, m = 8, unit costs, T_comm = 0, M_B = 2, M_W = 1 (chunked
// schedules: cost and memory per chunk divided by v).
TEST_CASE("the docs/facts/pipeline-schedules.md reference table at p = 4, m = 8 comes out of verify's timeline exactly", "[gen][facts]") {
  struct Row {
    const char* name;
    std::optional<int32_t> v;
    bool megatron;
    double cost;         // F = I = W per stage, B = 2 * cost
    int64_t act, wgrad;  // bytes per stage, scaled by `scale`
    int64_t scale;       // memory is int64 bytes: half-byte chunk memory is doubled, and so the peak
    double span, makespan, idle, peak;
  };
  const Row rows[] = {
      {"gpipe", std::nullopt, false, 1, 2, 1, 1, 33, 33, 9, 16},
      {"1f1b", std::nullopt, false, 1, 2, 1, 1, 33, 33, 9, 8},
      {"zb-h1", std::nullopt, false, 1, 2, 1, 1, 27, 27, 3, 8},
      {"zb-h2", std::nullopt, false, 1, 2, 1, 1, 24, 27, 0, 14},
      // interleaved uses B = I + W; chunk cost 1/v, chunk activation M_B/v
      {"interleaved-1f1b", 2, false, 0.5, 1, 1, 1, 28.5, 28.5, 4.5, 11},
      {"interleaved-1f1b", 2, true, 0.5, 1, 1, 1, 28.5, 28.5, 4.5, 11},
      {"interleaved-1f1b", 4, false, 0.25, 1, 1, 2, 26.25, 26.25, 2.25, 9.5},  // M_B/4 = 0.5 -> 1 at scale 2
      {"interleaved-1f1b", 4, true, 0.25, 1, 1, 2, 26.25, 26.25, 2.25, 9.5},
      // ZB-V: chunk memory M_B/2 = 1 and M_W/2 = 0.5 -> 2 and 1 at scale 2
      {"zb-v", std::nullopt, false, 0.5, 2, 1, 2, 24, 25.5, 0, 8},
  };
  for (const Row& row : rows) {
    INFO(row.name << (row.v ? " v=" + std::to_string(*row.v) : "") << (row.megatron ? " (megatron)" : ""));
    Generated g = gen(row.name, 4, 8, row.v, row.megatron);
    VerifyResult r = verify(costed(g, row.cost, row.act, row.wgrad), VerifyOptions{});
    for (const auto& f : r.findings) FAIL_CHECK(f.message);
    REQUIRE(r.timeline);
    CHECK(r.timeline->span_s == Approx(row.span));
    CHECK(r.timeline->makespan_s == Approx(row.makespan));
    // docs/facts/pipeline-schedules.md lists the idle of the stage that sets the span (span - 24)
    CHECK(max_of(r.timeline->idle_per_rank_s) == Approx(row.idle));
    CHECK(static_cast<double>(r.timeline->peak_bytes_per_rank[0]) / row.scale == Approx(row.peak));
    CHECK(static_cast<double>(max_of(r.timeline->peak_bytes_per_rank)) / row.scale == Approx(row.peak));
  }
}

}  // namespace sc
