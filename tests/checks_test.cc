// Unit tests of the property passes: structure, causality, channel, residency, execution.
#include <sstream>

#include "catch.h"
#include "pipeline/build_program.h"
#include "pipeline/verify_pipeline.h"
#include "fixtures.h"

namespace sc {
namespace {

// A spec with loop placement from action lists written in PyTorch notation, one string per rank.
PipelineSpec spec_of(int32_t ranks, int32_t stages, int32_t mbs, const std::vector<std::string>& rows) {
  PipelineSpec s = test::make_loop_spec("t", ranks, stages, mbs, {});
  for (const auto& row : rows) {
    std::istringstream in(row);
    std::string tok;
    std::vector<Step> steps;
    int col = 1;
    while (in >> tok) {
      ParsedStep p = parse_step(tok, SourceLoc{0, static_cast<int32_t>(s.actions.size() + 1), col});
      REQUIRE(p.step);
      steps.push_back(*p.step);
      col += static_cast<int>(tok.size()) + 1;
    }
    s.actions.push_back(steps);
  }
  return s;
}

std::vector<const Finding*> of_kind(const VerifyResult& r, FindingKind k) {
  std::vector<const Finding*> out;
  for (const auto& f : r.findings)
    if (f.kind == k) out.push_back(&f);
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("structure finds what PyTorch's validator lets through", "[check][structure]") {
  // Duplicate 0F0; microbatch 1 gets both B and I/W on stage 0; W before I; 1B1 missing.
  PipelineSpec s = spec_of(2, 2, 2, {"0F0 0F0 0F1 0W1 0I1 0B1 0B0", "1F0 1F1 1B0"});
  VerifyResult r = verify(s, {});
  auto st = of_kind(r, FindingKind::kStructure);
  REQUIRE(st.size() == 4);
  CHECK(has(st[0]->message, "actions given more than once: 0F0"));
  CHECK(st[0]->locations[0].col == 5);
  CHECK(has(st[1]->message, "both a full backward B and a split backward I/W: 0B1"));
  CHECK(has(st[2]->message, "W before its I"));
  CHECK(st[2]->ops == std::vector<std::string>{"0W1"});
  CHECK(has(st[3]->message, "no backward (B, or I and W): 1B1"));
  CHECK(r.exit_code == 12);
}

TEST_CASE("structure reports actions on a rank other than the declared placement's", "[check][structure]") {
  // Stage 1 declared on rank 1 (loop), but rank 0 runs 1F0.
  PipelineSpec s = spec_of(2, 2, 1, {"0F0 1F0 0B0", "1B0"});
  VerifyResult r = verify(s, {});
  auto st = of_kind(r, FindingKind::kStructure);
  REQUIRE(!st.empty());
  CHECK(has(st[0]->message, "other than the declared placement's: 1F0"));
  CHECK(has(st[0]->details[0], "runs on rank 0, but stage 1 lives on rank 1"));
}

TEST_CASE("causality: an explicit schedule computes before its receive or with no receive", "[check][causality]") {
  // Rank 1 runs 1F0 before 1RECV_F0 delivers it, and 1F1 has no receive at all.
  PipelineSpec s = spec_of(2, 2, 2,
                           {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                            "1F0 1RECV_F0 1RECV_F1 1B0 1SEND_B0 1B1 1SEND_B1"});
  s.actions[1].erase(s.actions[1].begin() + 2);  // drop 1RECV_F1
  s.actions[1].insert(s.actions[1].begin() + 2, Step{Action{ActionKind::kF, 1, 1}, std::nullopt, {}});
  VerifyResult r = verify(s, {});
  auto c = of_kind(r, FindingKind::kCausality);
  REQUIRE(c.size() == 2);
  CHECK(c[0]->message == "1F0 on rank 1 runs before 1RECV_F0 delivers its input from rank 0");
  CHECK(c[1]->message == "1F1 on rank 1 needs 0F1 from rank 0, but rank 1 never receives it (no 1RECV_F1)");
  // The unreceived 0SEND_F1 also leaves the channel unbalanced and hangs under rendezvous.
  auto ch = of_kind(r, FindingKind::kChannel);
  REQUIRE(ch.size() == 1);
  CHECK(has(ch[0]->message, "channel rank 0 -> rank 1: 2 sends but 1 receives"));
  CHECK(!of_kind(r, FindingKind::kDeadlock).empty());
}

TEST_CASE("causality: a send before the compute that produces its data", "[check][causality]") {
  PipelineSpec s = spec_of(2, 2, 1, {"0SEND_F0 0F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
  VerifyResult r = verify(s, {});
  auto c = of_kind(r, FindingKind::kCausality);
  REQUIRE(c.size() == 1);
  CHECK(c[0]->message == "0SEND_F0 on rank 0 sends before 0F0 computes the data");
}

TEST_CASE("channel identity: crosswise pairing at p = 2 is found even when nothing hangs", "[check][channel]") {
  // NVIDIA/Megatron-LM#1450: with p = 2 the previous and next rank are the same peer. Rank 1
  // receives 3RECV_F0 (from stage 2) before 1RECV_F0 (from stage 0) on channel 0 -> 1, but rank 0
  // sends 0SEND_F0 first: the k-th messages differ, the shapes would be swapped silently.
  PipelineSpec s = spec_of(2, 4, 1,
                           {"0F0 0SEND_F0 2RECV_F0 2F0 2SEND_F0 2RECV_B0 2B0 2SEND_B0 0RECV_B0 0B0",
                            "3RECV_F0 1RECV_F0 1F0 1SEND_F0 3F0 3B0 3SEND_B0 1RECV_B0 1B0 1SEND_B0"});
  VerifyResult r = verify(s, VerifyOptions{Semantics{Semantics::kEager, 0}});
  auto ch = of_kind(r, FindingKind::kChannel);
  REQUIRE(!ch.empty());
  CHECK(ch[0]->message ==
        "channel rank 0 -> rank 1: message 0 is sent as 0SEND_F0 (activations of microbatch 0 from stage 0 to stage 1) "
        "but received as 3RECV_F0 (activations of microbatch 0 from stage 2 to stage 3) (2 mismatched messages on this "
        "channel)");
  CHECK(ch[0]->ranks == std::vector<int>{0, 1});
  CHECK(r.exit_code != 0);
}

TEST_CASE("a receiver expecting more messages than the sender sends hangs", "[check][channel][deadlock]") {
  // DeepSpeed PR #5518 shape: rank 1 receives a gradient rank 0 never sends... here rank 0 posts
  // an extra 0RECV_B0 twice-over: the second has no send.
  PipelineSpec s = spec_of(2, 2, 1, {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
  s.actions[0].insert(s.actions[0].begin() + 3, Step{Action{ActionKind::kRecvB, 0, 0}, std::nullopt, {}});
  VerifyResult r = verify(s, VerifyOptions{Semantics{Semantics::kEager, 0}});
  auto d = of_kind(r, FindingKind::kDeadlock);
  REQUIRE(d.size() == 1);
  CHECK(has(d[0]->message, "hang under eager semantics: 0RECV_B0@rank 0 (comm stream) waits for a message rank 1 never sends"));
  auto ch = of_kind(r, FindingKind::kChannel);
  REQUIRE(!ch.empty());
  CHECK(has(ch.back()->message, "1 sends but 2 receives; 1 unmatched receive(s) wait forever"));
  CHECK(r.exit_code == 10);
}

TEST_CASE("a boundary with two tensors where the receiver posts three is a channel finding", "[check][channel][deadlock]") {
  // deepspeedai/DeepSpeed PR #5518 shape: one message per tensor; rank 1 receives three
  // activation tensors of microbatch 0, rank 0 sends two, so the third receive is never matched.
  PipelineSpec s = spec_of(2, 2, 1, {"0F0 0SEND_F0x2 0RECV_B0 0B0", "1RECV_F0x3 1F0 1B0 1SEND_B0"});
  VerifyResult r = verify(s, VerifyOptions{Semantics{Semantics::kEager, 0}});
  auto ch = of_kind(r, FindingKind::kChannel);
  REQUIRE(ch.size() == 1);
  CHECK(ch[0]->message == "channel rank 0 -> rank 1: 2 sends but 3 receives; 1 unmatched receive(s) wait forever");
  CHECK(ch[0]->ranks == std::vector<int>{0, 1});
  CHECK(ch[0]->ops == std::vector<std::string>{"1RECV_F0[2]"});
  REQUIRE(ch[0]->locations.size() == 1);
  CHECK(ch[0]->locations[0].line == 2);
  CHECK(ch[0]->locations[0].col == 1);
  REQUIRE(ch[0]->details.size() == 1);
  CHECK(has(ch[0]->details[0], "message 2: 1RECV_F0[2] ("));
  CHECK(has(ch[0]->details[0], "carries activations of microbatch 0 from stage 0 to stage 1, tensor [2] of 3 and has no "
                               "matching send"));
  // The receive waits forever: rank 1 hangs in it.
  auto d = of_kind(r, FindingKind::kDeadlock);
  REQUIRE(d.size() == 1);
  CHECK(has(d[0]->message, "1RECV_F0[2]@rank 1"));
  CHECK(r.exit_code != 0);
}

TEST_CASE("a boundary with two tensors sent and two received holds", "[check][channel]") {
  PipelineSpec s = spec_of(2, 2, 2, {"0F0 0SEND_F0x2 0F1 0SEND_F1x2 0RECV_B0x2 0B0 0RECV_B1x2 0B1",
                                     "1RECV_F0x2 1F0 1RECV_F1x2 1B0 1SEND_B0x2 1F1 1B1 1SEND_B1x2"});
  VerifyResult r = verify(s, VerifyOptions{Semantics{Semantics::kRendezvous, 0}});
  INFO((r.findings.empty() ? std::string() : r.findings[0].message));
  CHECK(r.findings.empty());
  CHECK(r.exit_code == 0);
  // Each tensor is a message: four sends each way.
  PipelineProgram pp = build_program(s, BlockingModel::kCommStream);
  size_t sends = 0;
  for (const Op& op : pp.program.ops) sends += op.kind == OpKind::kSend;
  CHECK(sends == 8);
  // Names on one side and a count on the other compare positions only; so do batched groups.
  PipelineSpec named = spec_of(2, 2, 1, {"0F0 (0SEND_F0[act,mask])BATCH 0RECV_B0 0B0", "1RECV_F0x2 1F0 1B0 1SEND_B0"});
  CHECK(verify(named, {}).findings.empty());
}

TEST_CASE("a skip connection from stage 0 to stage 2 and its gradient back hold, each on its own channel",
          "[check][channel]") {
  PipelineSpec s = spec_of(3, 3, 1,
                           {"0F0 0SEND_F0 0SEND_F0>2 0RECV_B0<2 0RECV_B0 0B0", "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0",
                            "2RECV_F0<0 2RECV_F0 2F0 2B0 2SEND_B0>0 2SEND_B0"});
  VerifyResult r = verify(s, VerifyOptions{Semantics{Semantics::kRendezvous, 0}});
  INFO((r.findings.empty() ? std::string() : r.findings[0].message));
  CHECK(r.findings.empty());
  CHECK(r.exit_code == 0);
  const Program& p = r.program;
  // 2F0 waits for both receives, 0B0 for both gradient receives.
  auto op_of = [&](const std::string& label) {
    for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id)
      if (p.label(id) == label) return id;
    return kNoOp;
  };
  auto waits_for = [&](OpId consumer, OpId producer) {
    for (const Dep* d = p.deps_begin(consumer); d != p.deps_end(consumer); ++d)
      if (d->src == producer) return true;
    return false;
  };
  REQUIRE(op_of("2F0") != kNoOp);
  CHECK(waits_for(op_of("2F0"), op_of("2RECV_F0<0")));
  CHECK(waits_for(op_of("2F0"), op_of("2RECV_F0")));
  CHECK(waits_for(op_of("0B0"), op_of("0RECV_B0<2")));
  CHECK(waits_for(op_of("0B0"), op_of("0RECV_B0")));
  CHECK(p.ops[op_of("0SEND_F0>2")].peer() == 2);
  CHECK(p.ops[op_of("2SEND_B0>0")].peer() == 0);
}

TEST_CASE("a skip connection's receive listed after the compute it feeds is a causality finding, an unreceived one a "
          "channel finding",
          "[check][channel]") {
  PipelineSpec late = spec_of(3, 3, 1,
                              {"0F0 0SEND_F0 0SEND_F0>2 0RECV_B0 0B0", "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0",
                               "2RECV_F0 2F0 2RECV_F0<0 2B0 2SEND_B0"});
  VerifyResult r = verify(late, {});
  auto c = of_kind(r, FindingKind::kCausality);
  REQUIRE(c.size() == 1);
  CHECK(c[0]->message == "2F0 on rank 2 runs before 2RECV_F0<0 delivers its skip-connection input");
  CHECK(c[0]->ops == std::vector<std::string>{"2F0", "2RECV_F0<0"});

  PipelineSpec lost = spec_of(3, 3, 1,
                              {"0F0 0SEND_F0 0SEND_F0>2 0RECV_B0 0B0", "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0",
                               "2RECV_F0 2F0 2B0 2SEND_B0"});
  r = verify(lost, VerifyOptions{Semantics{Semantics::kEager, 0}});
  auto ch = of_kind(r, FindingKind::kChannel);
  REQUIRE(ch.size() == 1);
  CHECK(ch[0]->message == "channel rank 0 -> rank 2: 1 sends but 0 receives; 1 unmatched send(s) are never received");
  REQUIRE(ch[0]->details.size() == 1);
  CHECK(has(ch[0]->details[0], "activations of microbatch 0 from stage 0 to stage 2"));
}

TEST_CASE("a skip connection out of range or written twice is a structure finding", "[check][structure]") {
  PipelineSpec s = spec_of(3, 3, 1,
                           {"0F0 0SEND_F0 0SEND_F0>5 0SEND_F0>2 0SEND_F0>2 0RECV_B0 0B0",
                            "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0", "2RECV_F0<0 2RECV_F0 2F0 2B0 2SEND_B0"});
  VerifyResult r = verify(s, {});
  auto st = of_kind(r, FindingKind::kStructure);
  REQUIRE(st.size() == 2);
  CHECK(st[0]->message == "ids out of range: 0SEND_F0>5");
  CHECK(st[1]->message == "actions given more than once: 0SEND_F0>2");
  CHECK(r.exit_code != 0);
}

TEST_CASE("named tensors received in another order are a channel mismatch", "[check][channel]") {
  PipelineSpec s = spec_of(2, 2, 1, {"0F0 0SEND_F0[act,mask] 0RECV_B0 0B0", "1RECV_F0[mask,act] 1F0 1B0 1SEND_B0"});
  VerifyResult r = verify(s, {});
  auto ch = of_kind(r, FindingKind::kChannel);
  REQUIRE(ch.size() == 1);
  CHECK(ch[0]->message ==
        "channel rank 0 -> rank 1: message 0 is sent as 0SEND_F0[act] (activations of microbatch 0 from stage 0 to "
        "stage 1, tensor 'act' ([0] of 2)) but received as 1RECV_F0[mask] (activations of microbatch 0 from stage 0 "
        "to stage 1, tensor 'mask' ([0] of 2)) (2 mismatched messages on this channel)");
  CHECK(ch[0]->ranks == std::vector<int>{0, 1});
}

TEST_CASE("buffered:N lets N sends run ahead of their receives", "[check][deadlock]") {
  // Rank 0 sends 0F2 and 0F3 before it receives 1F0 and 1F1; rank 1 sends those two before
  // it receives 0F2 and 0F3. Two slots per channel hold; one slot (and rendezvous) deadlock.
  PipelineSpec s = spec_of(2, 4, 4,
                           {"0F0 0F1 0SEND_F0 0SEND_F1 0F2 0F3 0SEND_F2 0SEND_F3 2RECV_F0 2RECV_F1 2F0 2F1 2SEND_F0 "
                            "2SEND_F1 2RECV_F2 2RECV_F3 2F2 2F3 2SEND_F2 2SEND_F3 2RECV_B0 2RECV_B1 2RECV_B2 2RECV_B3 "
                            "2B0 2B1 2B2 2B3 2SEND_B0 2SEND_B1 2SEND_B2 2SEND_B3 0RECV_B0 0RECV_B1 0RECV_B2 0RECV_B3 "
                            "0B0 0B1 0B2 0B3",
                            "1RECV_F0 1RECV_F1 1F0 1F1 1SEND_F0 1SEND_F1 1RECV_F2 1RECV_F3 1F2 1F3 1SEND_F2 1SEND_F3 "
                            "3RECV_F0 3RECV_F1 3RECV_F2 3RECV_F3 3F0 3F1 3F2 3F3 3B0 3B1 3B2 3B3 3SEND_B0 3SEND_B1 "
                            "3SEND_B2 3SEND_B3 1RECV_B0 1RECV_B1 1RECV_B2 1RECV_B3 1B0 1B1 1B2 1B3 1SEND_B0 1SEND_B1 "
                            "1SEND_B2 1SEND_B3"});
  VerifyResult two = verify(s, VerifyOptions{Semantics{Semantics::kBuffered, 2}});
  CHECK(two.findings.empty());
  VerifyResult one = verify(s, VerifyOptions{Semantics{Semantics::kBuffered, 1}});
  auto d = of_kind(one, FindingKind::kDeadlock);
  REQUIRE(d.size() == 1);
  CHECK(d[0]->ops == std::vector<std::string>{"0SEND_F3", "1SEND_F1"});
  CHECK(has(d[0]->details[0], "waits for a free buffer slot: rank 1 has not received 1RECV_F2 yet"));
  CHECK(has(d[0]->details[1], "waits for a free buffer slot: rank 0 has not received 2RECV_F0 yet"));
  VerifyResult rv = verify(s, VerifyOptions{Semantics{Semantics::kRendezvous, 0}});
  CHECK(of_kind(rv, FindingKind::kDeadlock).size() == 1);
  // Eager: the sends never wait; timing is no later than with two slots.
  VerifyResult eager = verify(s, VerifyOptions{Semantics{Semantics::kEager, 0}});
  REQUIRE(eager.findings.empty());
  CHECK(eager.timeline->makespan_s <= two.timeline->makespan_s);
}

TEST_CASE("residency: compute on a sharded stage and an UNSHARD never resharded", "[check][residency]") {
  PipelineSpec s = spec_of(1, 1, 2, {"0UNSHARD 0F0 0RESHARD 0F1 0UNSHARD 0B0 0B1 0REDUCE_GRAD 0UNSHARD"});
  VerifyResult r = verify(s, {});
  auto res = of_kind(r, FindingKind::kResidency);
  REQUIRE(res.size() == 3);
  CHECK(res[0]->message == "0F1 on rank 0 runs while stage 0's parameters are sharded (no UNSHARD before it since the last RESHARD)");
  CHECK(res[1]->message == "0UNSHARD on rank 0: stage 0 is already unsharded (UNSHARD twice without RESHARD)");
  CHECK(res[2]->message == "stage 0 on rank 0 is still unsharded at the end of the step (UNSHARD never resharded)");
  CHECK(r.exit_code == 12);
}

TEST_CASE("residency: REDUCE_GRAD before the stage's last backward", "[check][residency]") {
  PipelineSpec s = spec_of(1, 1, 2, {"0UNSHARD 0F0 0F1 0B0 0REDUCE_GRAD 0B1 0RESHARD"});
  VerifyResult r = verify(s, {});
  auto res = of_kind(r, FindingKind::kResidency);
  REQUIRE(res.size() == 2);
  CHECK(res[0]->message == "0REDUCE_GRAD on rank 0 comes before stage 0's last backward (0B1): that gradient is not reduced");
}

TEST_CASE("a schedule without UNSHARD actions has no residency findings", "[check][residency]") {
  VerifyResult r = verify(test::make_spec("1f1b", 4, 8, test::one_f_one_b(4, 8)), {});
  CHECK(of_kind(r, FindingKind::kResidency).empty());
}

TEST_CASE("an overlapped F+B step lasts T_F + T_B and carries both inputs", "[check][timing]") {
  // One rank, two stages (V-like on one rank): (0F1;1B0) runs after 1F0 and 0F0.
  PipelineSpec s = spec_of(1, 2, 2, {"0F0 1F0 (0F1;1B0)OVERLAP_F_B 1F1 1B1 0B0 0B1"});
  VerifyResult r = verify(s, {});
  REQUIRE(r.findings.empty());
  REQUIRE(r.program.ops.size() == 7);
  const OpTime& t = r.timeline->ops[2];
  CHECK(t.start_s == Approx(2));
  CHECK(t.end_s == Approx(5));  // F (1 s) + B (2 s)
}

TEST_CASE("an OVERLAP_F_B step runs its sub-actions in order, as PyTorch's runtime performs them", "[check][timing]") {
  // PyTorch's pipelining liveness tests build steps whose second sub-action takes the first's
  // output: (F;B) and (I;W) of one microbatch hold, in the order written.
  VerifyResult fb = verify(spec_of(1, 1, 1, {"(0F0;0B0)OVERLAP_F_B"}), {});
  CHECK(fb.findings.empty());
  REQUIRE(fb.timeline);
  CHECK(fb.timeline->ops[0].end_s == Approx(3));  // F (1 s) then B (2 s)
  VerifyResult iw = verify(spec_of(1, 1, 1, {"0F0 (0I0;0W0)OVERLAP_F_B"}), {});
  CHECK(iw.findings.empty());
  REQUIRE(iw.timeline);
  // The W consumes in the step what the I produces: the peak is the one activation.
  CHECK(iw.timeline->peak_bytes_per_rank[0] == 1);
  CHECK(iw.timeline->ops[1].end_s == Approx(3));  // F 1 s, then I 1 s + W 1 s
  // The other order needs the second sub-action's output first: a causality finding.
  VerifyResult bf = verify(spec_of(1, 1, 1, {"(0B0;0F0)OVERLAP_F_B"}), {});
  REQUIRE(bf.findings.size() == 1);
  CHECK(bf.findings[0].kind == FindingKind::kCausality);
  CHECK(bf.findings[0].message ==
        "0B0 runs before its input 0F0, the second sub-action of the same overlapped step (the sub-actions run in the "
        "order written)");
  // Only compute actions make a step.
  ParsedStep bad = parse_step("(0F0;0SEND_F0)OVERLAP_F_B", SourceLoc{});
  CHECK(!bad.step);
  CHECK(bad.error == "'(0F0;0SEND_F0)OVERLAP_F_B': the actions of OVERLAP_F_B are compute actions (F, I, W or B)");
}

}  // namespace sc

namespace sc {
namespace {

TEST_CASE("UNSHARD/RESHARD in a pipeline schedule gather parameters into memory and uses read them", "[check][residency]") {
  // Two stages on two ranks, each FSDP-sharded: params_bytes are live from UNSHARD to RESHARD.
  PipelineSpec s = spec_of(2, 2, 2, {"0UNSHARD 0F0 0F1 0RESHARD 0UNSHARD 0B0 0B1 0RESHARD",
                                     "1UNSHARD 1F0 1F1 1B0 1B1 1RESHARD"});
  s.memory.params_bytes = {1000, 3000};
  s.memory.activation_bytes = {10, 10};
  VerifyResult r = verify(s, {});
  INFO(r.findings.size());
  REQUIRE(r.findings.empty());
  // Not resident for the whole step: the static part is 0; the gathered parameters show in the peak.
  CHECK(r.program.static_bytes_per_rank == std::vector<int64_t>{0, 0});
  CHECK(r.timeline->peak_bytes_per_rank[0] == 1000 + 2 * 10);
  CHECK(r.timeline->peak_bytes_per_rank[1] == 3000 + 2 * 10);
  CHECK(r.worst_case->bytes_per_rank[1] == 3000 + 2 * 10);
  // Each compute reads the stage's live instance: rank 0 has two gathers, so two buffers.
  int param_buffers = 0;
  for (const Buffer& b : r.program.buffers) param_buffers += std::string(b.kind) == "param" ? 1 : 0;
  CHECK(param_buffers == 3);
  CHECK(r.program.uses.size() == 8);
  // Without UNSHARD, params stay static.
  PipelineSpec plain = spec_of(2, 2, 2, {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"});
  plain.memory.params_bytes = {1000, 3000};
  CHECK(verify(plain, {}).program.static_bytes_per_rank == std::vector<int64_t>{1000, 3000});
}

}  // namespace
}  // namespace sc

namespace sc {

// The CSV reader takes most cells through parse_plain_step: wherever it answers, it must answer
// what parse_step answers, and it must leave every other token (errors included) to parse_step.
TEST_CASE("parse_plain_step gives parse_step's step for plain tokens and declines every other", "[spec][csv]") {
  const SourceLoc loc{0, 3, 7};
  const std::vector<std::string> plain = {"0F0", "12B7", "3I0", "4W999", "0SEND_F0", "63RECV_F8191", "2SEND_B1",
                                          "7RECV_B123456789", "999999F1", "00F01"};
  for (const std::string& tok : plain) {
    INFO(tok);
    std::optional<Step> fast = parse_plain_step(tok, loc);
    ParsedStep full = parse_step(tok, loc);
    REQUIRE(fast);
    REQUIRE(full.step);
    CHECK(fast->first == full.step->first);
    CHECK_FALSE(fast->second);
    CHECK(fast->loc.line == 3);
    CHECK(fast->loc.col == 7);
    CHECK(fast->tensors == full.step->tensors);
    CHECK(fast->tensor_names == full.step->tensor_names);
    CHECK(fast->group == full.step->group);
    CHECK(fast->in_batch == full.step->in_batch);
  }
  CHECK(parse_plain_step("63RECV_F8191", loc)->first == Action{ActionKind::kRecvF, 63, 8191});
  // Declined: the general grammar (tensors, groups, markers, collectives, spaces), long ids, and
  // every malformed token, whose error parse_step gives.
  const std::vector<std::string> other = {"0SEND_F0x2", "0SEND_F0[act]", "(0F0;1B0)OVERLAP_F_B", "(0SEND_F0)BATCH",
                                          "0UNSHARD", "1REDUCE_GRAD", "ALL_REDUCE@world", " 0F0", "0F0 ", "1000000F0",
                                          "0F1234567890", "0F", "F0", "0BW0", "0SEND0", "0F0x", "-1F0", "0F-1", "0f0",
                                          "0SEND_X0", "", "0F0;"};
  for (const std::string& tok : other) {
    INFO(tok);
    CHECK_FALSE(parse_plain_step(tok, loc));
  }
  CHECK(parse_step(" 0F0", loc).step);  // parse_step still takes what the fast path leaves
  CHECK(parse_step("1000000F0", loc).step);
  CHECK(parse_step("2000000F0", loc).error.find("out of range") != std::string::npos);
}

}  // namespace sc
