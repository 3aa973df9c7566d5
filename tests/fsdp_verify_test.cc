// FSDP verify end to end: spec text -> lowering -> checks, against docs/facts/fsdp-zero.md.
#include <string>
#include <string_view>

#include "catch.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"

namespace sc {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

/// The spec `text` parses without errors (a test failure otherwise).
FsdpSpec parse_or_fail(const std::string& name, const std::string& text) {
  Diagnostics d;
  auto spec = parse_fsdp_spec(name, text, d);
  INFO(text);
  REQUIRE(spec);
  REQUIRE_FALSE(d.has_errors());
  return *spec;
}

/// A spec with `units` identical 1 GiB layers on 4 ranks; `extra` is appended inside `fsdp:`.
FsdpSpec spec_of(const std::string& implementation, const std::string& extra, const std::string& bandwidth = "100GB/s",
                 int units = 8, const std::string& top = "") {
  std::string text = "schedcheck: 1\nranks: 4\n" + top + "fsdp:\n  implementation: " + implementation +
                     "\n  dtypes: {param: bf16}\n  link: {bandwidth: " + bandwidth +
                     ", latency: 10us}\n  units:\n    - {name: layer, repeat: " + std::to_string(units) +
                     ", params_bytes: 1GiB, forward: 1ms, backward: 2ms, activation_bytes: 0.1GiB}\n" + extra;
  return parse_or_fail("test.yaml", text);
}

const Finding* find_kind(const VerifyResult& r, FindingKind k) {
  for (const auto& f : r.findings)
    if (f.kind == k) return &f;
  return nullptr;
}

TEST_CASE("fsdp1: without the rate limiter more units are gathered, with it never more than two", "[fsdp]") {
  // A fast link (compute-bound) lets the all-gather stream run ahead when nothing holds it.
  for (const char* bw : {"4000GB/s", "100GB/s"}) {
    INFO("bandwidth " << bw);
    VerifyResult on = verify_fsdp(spec_of("fsdp1", "  options: {limit_all_gathers: true}\n", bw));
    VerifyResult off = verify_fsdp(spec_of("fsdp1", "  options: {limit_all_gathers: false}\n", bw));
    REQUIRE(fsdp_extras(on)->figures);
    REQUIRE(fsdp_extras(off)->figures);
    CHECK(on.findings.empty());
    // docs/facts/fsdp-zero.md (pytorch PR #98354): at most 2 gathered units pending free with the limiter.
    for (int r = 0; r < on.program.num_ranks; ++r) {  // one built rank stands for the 4
      CHECK(fsdp_extras(on)->figures->gathered_worst_case_bytes_per_rank[r] <= 2 * kGiB);
      CHECK(fsdp_extras(on)->figures->gathered_peak_bytes_per_rank[r] <= 2 * kGiB);
    }
    CHECK(fsdp_extras(off)->figures->gathered_worst_case_bytes_per_rank[0] > fsdp_extras(on)->figures->gathered_worst_case_bytes_per_rank[0]);
    CHECK(off.worst_case->bytes_per_rank[0] > on.worst_case->bytes_per_rank[0]);
  }
  // On the predicted timeline too, when compute is the bottleneck the unlimited stream runs ahead.
  VerifyResult on = verify_fsdp(spec_of("fsdp1", "  options: {limit_all_gathers: true}\n", "4000GB/s"));
  VerifyResult off = verify_fsdp(spec_of("fsdp1", "  options: {limit_all_gathers: false}\n", "4000GB/s"));
  CHECK(fsdp_extras(off)->figures->gathered_peak_bytes_per_rank[0] > fsdp_extras(on)->figures->gathered_peak_bytes_per_rank[0]);
}

TEST_CASE("fsdp2 with implicit prefetch holds at most three units' parameters", "[fsdp]") {
  // docs/facts/fsdp-zero.md: current unsharded params, its gather buffer until the next copy-in, the next
  // unit's gather buffer.
  for (const char* bw : {"4000GB/s", "100GB/s"}) {
    VerifyResult r = verify_fsdp(spec_of("fsdp2", "", bw));
    REQUIRE(fsdp_extras(r)->figures);
    CHECK(r.findings.empty());
    for (int k = 0; k < r.program.num_ranks; ++k) {  // one built rank stands for the 4
      CHECK(fsdp_extras(r)->figures->gathered_worst_case_bytes_per_rank[k] <= 3 * kGiB);
      CHECK(fsdp_extras(r)->figures->gathered_peak_bytes_per_rank[k] >= 2 * kGiB);  // prefetch overlaps
    }
  }
}

TEST_CASE("a rank that skips a unit hangs the job, the finding names it and the first divergent collective", "[fsdp]") {
  VerifyResult r = verify_fsdp(spec_of("fsdp2", "  ranks_override: {3: {skip_units: [layer.5]}}\n"));
  CHECK(r.exit_code == 10);  // deadlock + collective mismatch
  const Finding* hang = find_kind(r, FindingKind::kDeadlock);
  REQUIRE(hang);
  INFO(hang->message);
  REQUIRE_FALSE(hang->ranks.empty());
  CHECK(hang->ranks.front() == 3);
  CHECK(hang->message.find("hang caused by rank 3") == 0);
  CHECK(hang->message.find("rank 3 issues all-gather 'AG layer.6'") != std::string::npos);
  CHECK(hang->message.find("ranks 0-2 issue all-gather 'AG layer.5'") != std::string::npos);
  const Finding* mismatch = find_kind(r, FindingKind::kChannel);
  REQUIRE(mismatch);
  CHECK(mismatch->ranks == std::vector<int>{3});
  CHECK(mismatch->message.find("at #6:") != std::string::npos);  // the 6th collective: AG of layer.5
  CHECK_FALSE(fsdp_extras(r)->figures);
}

TEST_CASE("a rank with more microbatches hangs the others at the end of its extra work", "[fsdp]") {
  VerifyResult r = verify_fsdp(spec_of("fsdp2", "  ranks_override: {1: {microbatches: 2}}\n"));
  const Finding* hang = find_kind(r, FindingKind::kDeadlock);
  REQUIRE(hang);
  CHECK(hang->ranks.front() == 1);
}

TEST_CASE("communication per step is (N-1)/N x 3 x the parameter bytes when dtypes match", "[fsdp]") {
  // docs/facts/fsdp-zero.md: (N-1)/N·Ψ·(2·b_c + b_r); 8 GiB of parameters on N = 4: 0.75 · 8 · 3 = 18 GiB.
  for (const char* impl : {"fsdp1", "fsdp2", "zero3"}) {
    VerifyResult r = verify_fsdp(spec_of(impl, ""));
    REQUIRE(fsdp_extras(r)->figures);
    CHECK(fsdp_extras(r)->figures->comm_bytes_per_step == Approx(18 * kGiB));
    CHECK(fsdp_extras(r)->figures->expected_comm_bytes_per_step == Approx(18 * kGiB));
  }
  // An fp32 reduce-scatter: 0.75 · 8 · (2 + 2) = 24 GiB.
  std::string text =
      "schedcheck: 1\nranks: 4\nfsdp:\n  dtypes: {param: bf16, reduce: fp32}\n  link: {bandwidth: 100GB/s}\n"
      "  units:\n    - {name: layer, repeat: 8, params_bytes: 1GiB, forward: 1ms, backward: 2ms}\n";
  FsdpSpec spec = parse_or_fail("fp32.yaml", text);
  VerifyResult r = verify_fsdp(spec);
  REQUIRE(fsdp_extras(r)->figures);
  CHECK(fsdp_extras(r)->figures->comm_bytes_per_step == Approx(24 * kGiB));
}

TEST_CASE("an integer reshard_after_forward keeps a 1/k slice to the backward and gathers it over k ranks",
          "[fsdp]") {
  // docs/facts/fsdp-zero.md#integer-reshard-after-forward: 8 units of 1 GiB on a shard group of
  // 4, k = 2. Forward all-gather and reduce-scatter over 4 ranks (0.75 · 8 GiB each), the
  // backward's all-gather over 2 (0.5 · 8 GiB): 16 GiB per step, where true moves 18 and false 12.
  auto with = [](const std::string& raf) {
    return verify_fsdp(spec_of("fsdp2", "  options: {reshard_after_forward: " + raf + "}\n"));
  };
  VerifyResult full = with("true"), kept = with("false"), two = with("2"), one = with("1"), four = with("4");
  for (const VerifyResult* r : {&full, &kept, &two, &one, &four}) REQUIRE(fsdp_extras(*r)->figures);
  const FsdpFigures& f2 = *fsdp_extras(two)->figures;
  CHECK(f2.comm_bytes_per_step == Approx(16 * kGiB));
  CHECK(f2.expected_comm_bytes_per_step == Approx(16 * kGiB));
  CHECK(fsdp_extras(full)->figures->expected_comm_bytes_per_step == Approx(18 * kGiB));
  CHECK(fsdp_extras(kept)->figures->expected_comm_bytes_per_step == Approx(12 * kGiB));
  // Each unit keeps 0.5 GiB from its forward to its backward's all-gather, in each of the two
  // steps modelled (FsdpSpec::iterations).
  int slices = 0;
  for (const Buffer& b : two.program.buffers)
    if (std::string_view(b.kind) == "param-post-forward") {
      ++slices;
      CHECK(b.bytes == static_cast<int64_t>(kGiB / 2));
    }
  CHECK(slices == 8 * 2);
  // The backward's all-gathers are rings of 2: latency + 0.5 GiB / 100 GB/s.
  const auto& info = fsdp_extras(two)->info;
  int backward_gathers = 0;
  for (OpId id = 0; id < static_cast<OpId>(two.program.ops.size()); ++id)
    if (info[id].kind == FsdpOpKind::kAllGather && info[id].backward) {
      ++backward_gathers;
      CHECK(two.program.ops[id].duration_s == Approx(10e-6 + 0.5 * kGiB / 100e9));
    }
  CHECK(backward_gathers > 0);
  // The slices move the peak between true's and false's.
  const int64_t p_full = full.timeline->peak_bytes_per_rank[0], p_two = two.timeline->peak_bytes_per_rank[0],
                p_kept = kept.timeline->peak_bytes_per_rank[0];
  CHECK(p_two > p_full);
  CHECK(p_two < p_kept);
  // k = 1 is false and k = the shard size is true (_get_post_forward_mesh_info).
  CHECK(one.timeline->peak_bytes_per_rank[0] == p_kept);
  CHECK(fsdp_extras(one)->figures->comm_bytes_per_step == Approx(12 * kGiB));
  CHECK(four.timeline->peak_bytes_per_rank[0] == p_full);
  CHECK(fsdp_extras(four)->figures->comm_bytes_per_step == Approx(18 * kGiB));
}

TEST_CASE("an integer reshard_after_forward is noted at its key with what is modelled", "[fsdp]") {
  Diagnostics d;
  auto spec = parse_fsdp_spec("raf.yaml",
                              "schedcheck: 1\nranks: 4\nfsdp:\n  link: {bandwidth: 100GB/s}\n"
                              "  options: {reshard_after_forward: 2}\n"
                              "  units:\n    - {name: layer, repeat: 2, params_bytes: 1GiB, forward: 1ms, backward: 2ms}\n",
                              d);
  REQUIRE(spec);
  REQUIRE(d.all().size() == 1);
  CHECK(d.all()[0].severity == Severity::kNote);
  CHECK(d.all()[0].loc.line == 5);
  CHECK(d.all()[0].message.rfind("reshard_after_forward 2: after each forward a unit keeps a 1/2 slice", 0) == 0);
}

TEST_CASE("step 1 peaks higher than step 0: the optimizer state appears at the first step", "[fsdp]") {
  VerifyResult r = verify_fsdp(spec_of("fsdp2", ""));
  REQUIRE(fsdp_extras(r)->figures);
  REQUIRE(fsdp_extras(r)->figures->peak_bytes_per_step.size() == 2);
  // Adam: 8 bytes per parameter, sharded: 8 GiB / 2 bytes · 8 / 4 ranks = 8 GiB more at step 1.
  CHECK(fsdp_extras(r)->figures->peak_bytes_per_step[1][0] - fsdp_extras(r)->figures->peak_bytes_per_step[0][0] == int64_t{8} << 30);
}

TEST_CASE("a free ordered only on the wrong stream is reported with the interleaving that breaks it", "[fsdp]") {
  // The all-gather stream frees layer.0 right after gathering layer.1; nothing orders the free
  // after the forward of layer.0 on the compute stream.
  std::string programs =
      "  programs:\n"
      "    all:\n"
      "      - {op: all_gather, unit: layer.0, id: g0}\n"
      "      - {op: forward, unit: layer.0, after: [g0], id: f0}\n"
      "      - {op: all_gather, unit: layer.1, id: g1}\n"
      "      - {op: free, unit: layer.0, stream: all_gather}\n"
      "      - {op: forward, unit: layer.1, after: [g1], id: f1}\n"
      "      - {op: free, unit: layer.1, after: [f1]}\n";
  VerifyResult r = verify_fsdp(spec_of("fsdp2", programs, "100GB/s", 2));
  const Finding* f = find_kind(r, FindingKind::kResidency);
  REQUIRE(f);
  INFO(f->message);
  CHECK(f->message.find("all_gather stream") != std::string::npos);
  CHECK(f->message.find("F layer.0") != std::string::npos);
  CHECK(f->message.find("free") != std::string::npos);
  bool compute_line = false;
  for (const auto& d : f->details) compute_line |= d.find("compute stream") != std::string::npos;
  CHECK(compute_line);
  // Ordering the free after the forward with an event fixes it.
  std::string fixed = programs;
  fixed.replace(fixed.find("{op: free, unit: layer.0, stream: all_gather}"),
                std::string("{op: free, unit: layer.0, stream: all_gather}").size(),
                "{op: free, unit: layer.0, stream: all_gather, after: [f0]}");
  VerifyResult ok = verify_fsdp(spec_of("fsdp2", fixed, "100GB/s", 2));
  CHECK(find_kind(ok, FindingKind::kResidency) == nullptr);
}

TEST_CASE("an aggressive explicit prefetch exceeds the memory limit on every rank", "[fsdp]") {
  std::string prefetch = "  options: {forward_prefetch: {layer.0: [layer.1, layer.2, layer.3, layer.4, layer.5]}}\n";
  VerifyResult base = verify_fsdp(spec_of("fsdp2", "", "100GB/s", 8, "memory: {limit_bytes: 12GiB}\n"));
  VerifyResult eager = verify_fsdp(spec_of("fsdp2", prefetch, "100GB/s", 8, "memory: {limit_bytes: 12GiB}\n"));
  REQUIRE(fsdp_extras(base)->figures);
  REQUIRE(fsdp_extras(eager)->figures);
  CHECK(fsdp_extras(eager)->figures->gathered_worst_case_bytes_per_rank[0] > fsdp_extras(base)->figures->gathered_worst_case_bytes_per_rank[0]);
  CHECK(fsdp_extras(eager)->figures->gathered_peak_bytes_per_rank[0] >= 6 * kGiB);
}

}  // namespace
}  // namespace sc

namespace sc {
namespace {

TEST_CASE("exposed communication per unit, overlap and step time match a hand-computed timeline", "[fsdp]") {
  // 2 ranks, two 1 GB units, 1 GB/s, no latency: each all-gather or reduce-scatter takes
  // (n-1)/n·B/W = 0.5 s (ring, Thakur et al. 2005); compute is 1 ms forward, 2 ms backward.
  // Step: AG u.0 0-0.5 | F u.0 0.5-0.501 | AG u.1 0.5-1.0 (waits 0.499) | F u.1 1.0-1.001 |
  // AG u.1 (bwd) 1.0-1.5 (waits 0.499) | B u.1 1.5-1.502 | AG u.0 (bwd, prefetched) 1.5-2.0
  // (waits 0.498) | RS u.1 2.0-2.5 | B u.0 2.0-2.002 | RS u.0 2.5-3.0 (the step waits 0.998).
  std::string text =
      "schedcheck: 1\nranks: 2\nfsdp:\n  link: {bandwidth: 1GB/s, latency: 0us}\n  optimizer: none\n"
      "  units:\n    - {name: u, repeat: 2, params_bytes: 1GB, forward: 1ms, backward: 2ms}\n";
  FsdpSpec spec = parse_or_fail("exposed.yaml", text);
  VerifyResult r = verify_fsdp(spec);
  REQUIRE(fsdp_extras(r)->figures);
  const FsdpFigures& f = *fsdp_extras(r)->figures;
  REQUIRE(f.step_time_s.size() == 2);
  CHECK(f.step_time_s[0] == Approx(3.0));
  CHECK(f.step_time_s[1] == Approx(3.0));
  REQUIRE(f.exposure.size() == 2);
  CHECK(f.exposure[0].unit == "u.0");
  CHECK(f.exposure[0].exposed_s == Approx(2 * (0.5 + 0.498)));
  CHECK(f.exposure[1].exposed_s == Approx(2 * (0.499 + 0.499)));
  CHECK(f.exposed_comm_s == Approx(2 * (0.5 + 0.499 + 0.499 + 0.498 + 0.998)));
  CHECK(f.comm_time_s == Approx(2 * 6 * 0.5));
  CHECK(f.overlap == Approx(1 - 5.988 / 6.0));
}

}  // namespace
}  // namespace sc

namespace sc {
namespace {

/// `per_class` (one entry per built rank of `p`) written out for every job rank its built rank
/// stands for (Program::rank_classes).
template <typename T>
std::vector<T> per_job_rank(const Program& p, const std::vector<T>& per_class) {
  std::vector<T> out;
  for (int32_t r = 0; r < static_cast<int32_t>(per_class.size()); ++r)
    for (int32_t k = 0; k < p.job_class(r).count; ++k) out.push_back(per_class[r]);
  return out;
}

TEST_CASE("the symmetry quotient gives what the full build gives: findings, figures, peaks per rank",
          "[fsdp][symmetry]") {
  // docs/facts/symmetry.md: every rank runs the same generated program, so one built rank stands
  // for all. Each case is built both ways (the quotient and every rank) and compared figure by
  // figure; the cases cover the three implementations, two microbatches, HSDP and a memory
  // finding on every rank.
  const std::string programs =
      "  programs:\n    all:\n      - {op: all_gather, unit: layer.0, id: g0}\n"
      "      - {op: forward, unit: layer.0, after: [g0], id: f0}\n      - {op: all_gather, unit: layer.1, id: g1}\n"
      "      - {op: free, unit: layer.0, stream: all_gather}\n      - {op: forward, unit: layer.1, after: [g1]}\n";
  struct Case {
    const char* impl;
    std::string extra;
    int units;
    std::string top;
  };
  for (const Case& c : {Case{"fsdp1", "  options: {limit_all_gathers: false}\n", 6, ""}, Case{"fsdp2", "", 6, ""},
                        Case{"zero3", "", 6, ""}, Case{"fsdp2", "  microbatches: 2\n", 4, ""},
                        Case{"fsdp2", "", 8, "memory: {limit_bytes: 12GiB}\n"},
                        Case{"fsdp2", "  replicate_size: 2\n", 3, ""}, Case{"fsdp2", programs, 2, ""}}) {
    INFO(c.impl << c.extra << c.top);
    FsdpSpec spec = spec_of(c.impl, c.extra, "100GB/s", c.units, c.top);
    VerifyResult fast = verify_fsdp(spec);
    VerifyResult full = verify_fsdp(spec, false, /*use_symmetry=*/false);
    REQUIRE(fast.worst_case);
    REQUIRE(full.worst_case);
    const Program& q = fast.program;
    CHECK(full.program.rank_classes.empty());
    CHECK(full.program.num_ranks == 4);
    if (c.extra == programs) {
      // Explicit programs are built on every rank (rank images, not the quotient).
      CHECK(q.num_ranks == 4);
      CHECK(q.rank_classes.empty());
    } else {
      REQUIRE(q.num_ranks == 1);
      REQUIRE(q.rank_classes.size() == 1);
      CHECK(q.rank_classes[0].count == 4);
      CHECK(q.ops.size() * 4 == full.program.ops.size());
    }
    CHECK(fast.exit_code == full.exit_code);
    CHECK(per_job_rank(q, fast.worst_case->bytes_per_rank) == full.worst_case->bytes_per_rank);
    CHECK(fast.worst_case->live_buffers[0] == full.worst_case->live_buffers[0]);  // rank 0 is built first both ways
    REQUIRE(fast.timeline);
    REQUIRE(full.timeline);
    CHECK(fast.timeline->makespan_s == Approx(full.timeline->makespan_s).epsilon(1e-12));
    CHECK(per_job_rank(q, fast.timeline->peak_bytes_per_rank) == full.timeline->peak_bytes_per_rank);
    CHECK(per_job_rank(q, fast.timeline->busy_per_rank_s) == full.timeline->busy_per_rank_s);
    const FsdpFigures& a = *fsdp_extras(fast)->figures;
    const FsdpFigures& b = *fsdp_extras(full)->figures;
    CHECK(a.step_time_s == b.step_time_s);
    CHECK(a.comm_bytes_per_step == b.comm_bytes_per_step);
    CHECK(a.comm_time_s == b.comm_time_s);
    CHECK(a.exposed_comm_s == b.exposed_comm_s);
    CHECK(per_job_rank(q, a.gathered_worst_case_bytes_per_rank) == b.gathered_worst_case_bytes_per_rank);
    CHECK(per_job_rank(q, a.gathered_peak_bytes_per_rank) == b.gathered_peak_bytes_per_rank);
    for (size_t it = 0; it < a.peak_bytes_per_step.size(); ++it)
      CHECK(per_job_rank(q, a.peak_bytes_per_step[it]) == b.peak_bytes_per_step[it]);
    REQUIRE(fast.findings.size() == full.findings.size());
    for (size_t i = 0; i < fast.findings.size(); ++i) {
      CHECK(fast.findings[i].message == full.findings[i].message);
      CHECK(fast.findings[i].ranks == full.findings[i].ranks);
      CHECK(fast.findings[i].details == full.findings[i].details);
    }
    if (!c.top.empty()) {
      // The memory case: one finding naming every rank, as the full build groups them.
      REQUIRE(fast.findings.size() == 1);
      CHECK(fast.findings[0].message.rfind("ranks 0-3: each exceeds its memory limit", 0) == 0);
    }
  }
}

}  // namespace
}  // namespace sc
