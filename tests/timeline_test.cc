// Timing: ASAP simulation with implicit transfers and with explicit transfers on comm streams.
#include <sstream>

#include "catch.h"
#include "pipeline/verify_pipeline.h"
#include "fixtures.h"

namespace sc {
namespace {

PipelineSpec two_stage(bool explicit_comms) {
  using K = ActionKind;
  using test::step;
  PipelineSpec s = test::make_loop_spec("t", 2, 2, 1, {});
  s.p2p.latency_s = 1;  // every transfer takes 1 s (no bytes)
  if (explicit_comms)
    s.actions = {{step(K::kF, 0, 0), step(K::kSendF, 0, 0), step(K::kRecvB, 0, 0), step(K::kB, 0, 0)},
                 {step(K::kRecvF, 1, 0), step(K::kF, 1, 0), step(K::kB, 1, 0), step(K::kSendB, 1, 0)}};
  else
    s.actions = {{step(K::kF, 0, 0), step(K::kB, 0, 0)}, {step(K::kF, 1, 0), step(K::kB, 1, 0)}};
  return s;
}

double start_of(const VerifyResult& r, const std::string& label) {
  for (OpId id = 0; id < static_cast<OpId>(r.program.ops.size()); ++id)
    if (r.program.label(id) == label) return r.timeline->ops[id].start_s;
  FAIL("no op " << label);
  return -1;
}

}  // namespace

TEST_CASE("implicit and explicit transfers give the same hand-computed timeline", "[sim]") {
  // 0F0 [0,1]; transfer 1 s; 1F0 [2,3]; 1B0 [3,5]; transfer; 0B0 [6,8].
  for (bool explicit_comms : {false, true})
    for (auto sem : {Semantics{Semantics::kRendezvous, 0}, Semantics{Semantics::kEager, 0}}) {
      INFO("explicit " << explicit_comms << ", " << format_semantics(sem));
      VerifyResult r = verify(two_stage(explicit_comms), VerifyOptions{sem});
      REQUIRE(r.findings.empty());
      CHECK(start_of(r, "1F0") == Approx(2));
      CHECK(start_of(r, "0B0") == Approx(6));
      CHECK(r.timeline->makespan_s == Approx(8));
      CHECK(r.timeline->span_s == Approx(8));
      CHECK(r.timeline->idle_per_rank_s[0] == Approx(5));  // 8 - (F 1 + B 2)
      CHECK(r.timeline->idle_per_rank_s[1] == Approx(0));  // 2..5 fully busy
      CHECK(r.timeline->bubble_rate == Approx(1 - 6.0 / 16));
      if (explicit_comms) {
        // The transfer occupies both comm streams from 1 s to 2 s.
        CHECK(start_of(r, "0SEND_F0") == Approx(1));
        CHECK(start_of(r, "1SEND_B0") == Approx(5));
      }
    }
}

TEST_CASE("bandwidth adds message_bytes / bandwidth to each transfer", "[sim]") {
  PipelineSpec s = two_stage(false);
  s.p2p.latency_s = 0.5;
  s.p2p.bandwidth_bytes_per_s = 100;
  s.p2p.message_bytes = 50;  // 0.5 s + 50 B / (100 B/s) = 1 s per hop
  VerifyResult r = verify(s, {});
  CHECK(start_of(r, "1F0") == Approx(2));
  CHECK(r.timeline->makespan_s == Approx(8));
}

TEST_CASE("a receive behind a pending send on the comm stream: eager waits, rendezvous hangs", "[sim]") {
  using K = ActionKind;
  using test::step;
  // Rank 1 posts 1RECV_F1 behind 1SEND_B0 on its comm stream, and rank 0 posts 0RECV_B0 behind
  // 0SEND_F1. Eager: 0SEND_F1 leaves at 2 s, but 1F1 waits until rank 1's comm stream reaches
  // 1RECV_F1 after 1SEND_B0 (1B0 ends at 4 s). Rendezvous: 0SEND_F1 and 1SEND_B0 wait for each
  // other's peer to reach the receive: a deadlock.
  PipelineSpec s = test::make_loop_spec("t", 2, 2, 2, {});
  s.actions = {{step(K::kF, 0, 0), step(K::kSendF, 0, 0), step(K::kF, 0, 1), step(K::kSendF, 0, 1), step(K::kRecvB, 0, 0),
                step(K::kB, 0, 0), step(K::kRecvB, 0, 1), step(K::kB, 0, 1)},
               {step(K::kRecvF, 1, 0), step(K::kF, 1, 0), step(K::kB, 1, 0), step(K::kSendB, 1, 0), step(K::kRecvF, 1, 1),
                step(K::kF, 1, 1), step(K::kB, 1, 1), step(K::kSendB, 1, 1)}};
  VerifyResult ev = verify(s, VerifyOptions{Semantics{Semantics::kEager, 0}});
  REQUIRE(ev.findings.empty());
  CHECK(start_of(ev, "0SEND_F1") == Approx(2));
  CHECK(start_of(ev, "1F1") == Approx(4));
  VerifyResult rv = verify(s, VerifyOptions{Semantics{Semantics::kRendezvous, 0}});
  REQUIRE(rv.findings.size() == 1);
  CHECK(rv.findings[0].ops == std::vector<std::string>{"0SEND_F1", "1SEND_B0"});
  CHECK(!rv.timeline);
}

}  // namespace sc
