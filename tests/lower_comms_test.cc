// Tests of merge_bw and the SEND/RECV lowering policies (src/pipeline/lower_comms.h).
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "cli_util.h"
#include "pipeline/lower_comms.h"
#include "spec/csv_schedule.h"
#include "spec/pipeline_spec.h"
#include "test_util.h"

namespace sc {
namespace {

using Lists = std::vector<std::vector<Step>>;

// Action lists from CSV text (one line per rank); fails the test on a parse error.
Lists lists_of(const std::string& text) {
  Diagnostics diags;
  auto csv = parse_csv_schedule("lists.csv", text, diags);
  if (!csv) {
    std::ostringstream os;
    diags.print(os);
    FAIL(os.str());
  }
  return csv->actions;
}

// One rank's list as CSV cells.
std::string row_text(const std::vector<Step>& row) { return write_csv_schedule({row}); }

// Runs each rank's list in order under rendezvous P2P: a SEND completes only together with the
// matching RECV at the head of its peer's list, a RECV only together with the SEND; compute steps
// never wait (their inputs are the RECVs before them). Returns the ranks that cannot finish.
std::vector<size_t> stuck_under_rendezvous(const Lists& lists, const std::vector<int32_t>& stage_to_rank) {
  std::vector<size_t> head(lists.size(), 0);
  auto at_head = [&](size_t r) -> const Action* {
    return head[r] < lists[r].size() ? &lists[r][head[r]].first : nullptr;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t r = 0; r < lists.size(); ++r) {
      while (at_head(r) && !is_p2p(at_head(r)->kind)) {
        ++head[r];
        progress = true;
      }
      const Action* a = at_head(r);
      if (!a || !is_send(a->kind)) continue;
      bool fwd = a->kind == ActionKind::kSendF;
      Action want{fwd ? ActionKind::kRecvF : ActionKind::kRecvB, a->stage + (fwd ? 1 : -1), a->microbatch};
      size_t peer = static_cast<size_t>(stage_to_rank[want.stage]);
      const Action* b = at_head(peer);
      if (b && *b == want) {
        ++head[r];
        ++head[peer];
        progress = true;
      }
    }
  }
  std::vector<size_t> stuck;
  for (size_t r = 0; r < lists.size(); ++r)
    if (head[r] < lists[r].size()) stuck.push_back(r);
  return stuck;
}

// The messages on channel `from` -> `to` in the order the sender issues them (`sending`) or the
// receiver posts them, each named by its SEND ("2SEND_B0").
std::vector<std::string> channel_order(const Lists& lists, const std::vector<int32_t>& stage_to_rank,
                                       size_t from, size_t to, bool sending) {
  std::vector<std::string> out;
  for (const Step& st : lists[sending ? from : to]) {
    const Action& a = st.first;
    if (!is_p2p(a.kind) || is_send(a.kind) != sending) continue;
    Action send = a;
    if (a.kind == ActionKind::kRecvF) send = {ActionKind::kSendF, a.stage - 1, a.microbatch};
    if (a.kind == ActionKind::kRecvB) send = {ActionKind::kSendB, a.stage + 1, a.microbatch};
    int32_t dst = stage_to_rank[send.kind == ActionKind::kSendF ? send.stage + 1 : send.stage - 1];
    if (static_cast<size_t>(stage_to_rank[send.stage]) == from && static_cast<size_t>(dst) == to)
      out.push_back(format_action(send));
  }
  return out;
}

std::string corpus_file(const std::string& name) {
  std::string dir = test::corpus_dir();
  return dir.empty() ? std::string() : dir + "/pytorch/" + name;
}

}  // namespace

TEST_CASE("merge_bw merges an I directly followed by its W into B", "[lower]") {
  Lists in = lists_of("0F0,0I0,0W0,0I1,0F2,0W1,0I2,0W2\n1I0,1W1,(1F3;1I4)OVERLAP_F_B,1W4\n");
  Lists out = merge_bw(in);
  REQUIRE(out.size() == 2);
  CHECK(row_text(out[0]) == "0F0,0B0,0I1,0F2,0W1,0B2\n");
  // Different microbatch: not merged; an overlapped pair is kept as it is.
  CHECK(row_text(out[1]) == "1I0,1W1,(1F3;1I4)OVERLAP_F_B,1W4\n");
  // The merged B keeps the I's location.
  CHECK(out[0][1].loc.col == in[0][1].loc.col);
}

TEST_CASE("merge_bw skips idle cells as PyTorch does", "[lower]") {
  // The reader drops idle cells, so "0I0,,0W0" has the I directly followed by the W.
  Lists out = merge_bw(lists_of("0I0,,0W0\n"));
  CHECK(row_text(out[0]) == "0B0\n");
}

TEST_CASE("PyTorch lowering of zb1p reproduces PyTorch's comms artifact byte for byte", "[lower]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("corpus folder not found; skipping");
  }
  // PyTorch's test: _merge_bw then _add_send_recv with stage s on rank s % 2, 4 stages.
  Diagnostics diags;
  auto compute = read_csv_schedule(corpus_file("zb1p_2rank_2stagep_compute.csv"), diags);
  REQUIRE(compute);
  std::string why;
  auto lowered = lower_comms(merge_bw(compute->actions), loop_placement(2, 4), LowerPolicy::kPyTorch, &why);
  REQUIRE(lowered);
  CHECK(why.empty());
  std::string got = write_csv_schedule(*lowered);
  std::string want = test::read_file(corpus_file("zb1p_2rank_2stagep_comms.csv"));
  REQUIRE_FALSE(want.empty());
  if (got != want) {
    // Name the first differing rank and cell.
    Diagnostics d2;
    auto expected = parse_csv_schedule("want.csv", want, d2);
    REQUIRE(expected);
    for (size_t r = 0; r < std::max(lowered->size(), expected->actions.size()); ++r) {
      const auto* a = r < lowered->size() ? &(*lowered)[r] : nullptr;
      const auto* b = r < expected->actions.size() ? &expected->actions[r] : nullptr;
      size_t n = std::max(a ? a->size() : 0, b ? b->size() : 0);
      for (size_t i = 0; i < n; ++i) {
        std::string x = a && i < a->size() ? format_step((*a)[i]) : "<none>";
        std::string y = b && i < b->size() ? format_step((*b)[i]) : "<none>";
        if (x != y) FAIL("rank " << r << ", cell " << i << ": got " << x << ", expected " << y);
      }
    }
    FAIL("outputs differ only in line ends");
  }
  CHECK(got == want);
}

TEST_CASE("inserted actions carry the location of the compute step that caused them", "[lower]") {
  Lists in = lists_of("0F0,0B0\n1F0,1B0\n");
  std::vector<int32_t> place = {0, 1};
  std::string why;
  auto py = lower_comms(in, place, LowerPolicy::kPyTorch, &why);
  REQUIRE(py);
  CHECK(row_text((*py)[0]) == "0F0,0SEND_F0,0RECV_B0,0B0\n");
  CHECK(row_text((*py)[1]) == "1RECV_F0,1F0,1B0,1SEND_B0\n");
  // PyTorch places both ends when the producer runs: both carry the producer's cell.
  CHECK((*py)[0][1].loc.line == 1);  // 0SEND_F0 <- 0F0 at 1:1
  CHECK((*py)[0][1].loc.col == 1);
  CHECK((*py)[1][0].loc.line == 1);  // 1RECV_F0 <- 0F0 at 1:1
  CHECK((*py)[1][0].loc.col == 1);
  CHECK((*py)[0][2].loc.line == 2);  // 0RECV_B0 <- 1B0 at 2:5
  CHECK((*py)[0][2].loc.col == 5);

  auto dd = lower_comms(in, place, LowerPolicy::kDeferred, &why);
  REQUIRE(dd);
  CHECK(row_text((*dd)[0]) == "0F0,0SEND_F0,0RECV_B0,0B0\n");
  CHECK(row_text((*dd)[1]) == "1RECV_F0,1F0,1B0,1SEND_B0\n");
  // Deferred: a SEND carries its producer's cell, a RECV its consumer's.
  CHECK((*dd)[1][0].loc.line == 2);  // 1RECV_F0 <- 1F0 at 2:1
  CHECK((*dd)[1][0].loc.col == 1);
  CHECK((*dd)[0][2].loc.line == 1);  // 0RECV_B0 <- 0B0 at 1:5
  CHECK((*dd)[0][2].loc.col == 5);
  CHECK((*dd)[1][3].loc.col == 5);   // 1SEND_B0 <- 1B0 at 2:5
}

TEST_CASE("same-rank neighbours and W exchange no messages", "[lower]") {
  // Stages 0 and 1 on rank 0, stage 2 on rank 1.
  Lists in = lists_of("0F0,1F0,1I0,0I0,1W0,0W0\n2F0,2B0\n");
  std::vector<int32_t> place = {0, 0, 1};
  for (LowerPolicy policy : {LowerPolicy::kPyTorch, LowerPolicy::kDeferred}) {
    std::string why;
    auto out = lower_comms(in, place, policy, &why);
    REQUIRE(out);
    CHECK(row_text((*out)[0]) == "0F0,1F0,1SEND_F0,1RECV_B0,1I0,0I0,1W0,0W0\n");
    CHECK(row_text((*out)[1]) == "2RECV_F0,2F0,2B0,2SEND_B0\n");
  }
}

TEST_CASE("overlapped pairs wait for both inputs and send the forward part first", "[lower]") {
  // Stages 0 and 2 on rank 0, stage 1 on rank 1 (loop placement for 3 stages): both parts of rank 1's (1F1;1B0) talk to rank 0.
  Lists in = lists_of("0F0,0F1,2F0,2B0,2F1,2B1,0B0,0B1\n"
                      "1F0,(1F1;1B0)OVERLAP_F_B,1B1\n");
  std::vector<int32_t> place = {0, 1, 0};
  std::string why;
  auto py = lower_comms(in, place, LowerPolicy::kPyTorch, &why);
  REQUIRE(py);
  // PyTorch: rank 1's 1F0 puts 2RECV_F0 on rank 0 in the first round, before rank 0 reaches
  // 0F1. The pair is placed only once 1RECV_F1 and 1RECV_B0 are both in rank 1's list (rank 0's
  // 2B0 put the second there); then 1SEND_F1 (forward part) before 1SEND_B0.
  CHECK(row_text((*py)[0]) ==
        "0F0,0SEND_F0,2RECV_F0,0F1,0SEND_F1,2F0,2B0,2SEND_B0,2RECV_F1,0RECV_B0,2F1,2B1,2SEND_B1,"
        "0RECV_B1,0B0,0B1\n");
  CHECK(row_text((*py)[1]) ==
        "1RECV_F0,1F0,1SEND_F0,1RECV_F1,1RECV_B0,(1F1;1B0)OVERLAP_F_B,1SEND_F1,1SEND_B0,1RECV_B1,"
        "1B1,1SEND_B1\n");

  auto dd = lower_comms(in, place, LowerPolicy::kDeferred, &why);
  REQUIRE(dd);
  // Deferred: both RECVs right before the pair, both SENDs right after it, forward part first.
  // Rank parity: before 0SEND_F1, rank 0 posts 2RECV_F0 (rank 1 sends 1SEND_F0 before its
  // 1RECV_F1); before 2SEND_B1 it posts 0RECV_B0 (rank 1 sends 1SEND_B0 before 1RECV_B1).
  CHECK(row_text((*dd)[0]) ==
        "0F0,0SEND_F0,0F1,2RECV_F0,0SEND_F1,2F0,2B0,2SEND_B0,2RECV_F1,2F1,2B1,0RECV_B0,2SEND_B1,"
        "0B0,0RECV_B1,0B1\n");
  CHECK(row_text((*dd)[1]) ==
        "1RECV_F0,1F0,1SEND_F0,1RECV_F1,1RECV_B0,(1F1;1B0)OVERLAP_F_B,1SEND_F1,1SEND_B0,1RECV_B1,"
        "1B1,1SEND_B1\n");
  CHECK(stuck_under_rendezvous(*dd, place).empty());
}

// docs/facts/p2p-semantics.md (pytorch/pytorch#172668): interleaved 1F1B, p = 2, 4 stages in loop placement. This is
// the schedule of PyTorch's Interleaved1F1B recipe for m = 2 (docs/facts/pipeline-schedules.md: rounds = 1, warm-up
// min((v-1)(m/rounds) + 2(p-1-r), m v) = 4 forwards on rank 0 and 2 on rank 1).
TEST_CASE("deferred lowering follows one global transfer order and avoids the #172668 hang", "[lower]") {
  Lists in = lists_of("0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1\n"
                      "1F0,1F1,3F0,3B0,3F1,3B1,1B0,1B1\n");
  std::vector<int32_t> place = loop_placement(2, 4);

  // The plain deferred placement (RECV just before its consumer, SEND just after its producer),
  // written by hand. Rank 0 reaches 0SEND_F1 while rank 1 sits in 1SEND_F0: under rendezvous
  // both SENDs wait for RECVs that come after them -- the reported hang.
  Lists plain = lists_of(
      "0F0,0SEND_F0,0F1,0SEND_F1,2RECV_F0,2F0,2SEND_F0,2RECV_F1,2F1,2SEND_F1,"
      "2RECV_B0,2B0,2SEND_B0,2RECV_B1,2B1,2SEND_B1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,3RECV_F0,3F0,3B0,3SEND_B0,"
      "3RECV_F1,3F1,3B1,3SEND_B1,1RECV_B0,1B0,1SEND_B0,1RECV_B1,1B1,1SEND_B1\n");
  CHECK(stuck_under_rendezvous(plain, place) == std::vector<size_t>{0, 1});

  std::string why;
  auto out = lower_comms(in, place, LowerPolicy::kDeferred, &why);
  REQUIRE(out);
  // The global transfer order of the unit-time simulation (time the producer ends, then the
  // higher rank first): 0F0@1, 1F0@2, 0F1@2, 1F1@3, 2F0@3, 2F1@4, 3B0@6, 2B0@8, 3B1@9, 1B0@11,
  // 2B1@11, 1B1@13. Each rank's SENDs and RECVs follow it; a RECV moves up only as far as the
  // order needs: rank 0 posts 2RECV_F0 before 0SEND_F1 (the lower rank drains its peer's 1F0
  // first: the fix of #172668), 2RECV_F1 before 2SEND_F0; rank 1 posts 3RECV_F1 before 3SEND_B0.
  CHECK(row_text((*out)[0]) ==
        "0F0,0SEND_F0,0F1,2RECV_F0,0SEND_F1,2F0,2RECV_F1,2SEND_F0,2F1,2SEND_F1,"
        "2RECV_B0,2B0,2SEND_B0,2RECV_B1,2B1,0RECV_B0,2SEND_B1,0B0,0RECV_B1,0B1\n");
  CHECK(row_text((*out)[1]) ==
        "1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,3RECV_F0,3F0,3B0,3RECV_F1,"
        "3SEND_B0,3F1,3B1,1RECV_B0,3SEND_B1,1B0,1SEND_B0,1RECV_B1,1B1,1SEND_B1\n");
  CHECK(stuck_under_rendezvous(*out, place).empty());
}

TEST_CASE("on zb1p, PyTorch lowering finishes under rendezvous and deferred keeps compute order",
          "[lower]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("corpus folder not found; skipping");
  }
  Diagnostics diags;
  auto compute = read_csv_schedule(corpus_file("zb1p_2rank_2stagep_compute.csv"), diags);
  REQUIRE(compute);
  Lists merged = merge_bw(compute->actions);
  std::vector<int32_t> place = loop_placement(2, 4);
  std::string why;

  auto py = lower_comms(merged, place, LowerPolicy::kPyTorch, &why);
  REQUIRE(py);
  // PyTorch puts each RECV in the receiver's list when the SEND is placed, so both ends of a
  // channel agree on the order, and this schedule completes even when SENDs block.
  CHECK(channel_order(*py, place, 0, 1, true) == channel_order(*py, place, 0, 1, false));
  CHECK(channel_order(*py, place, 1, 0, true) == channel_order(*py, place, 1, 0, false));
  CHECK(stuck_under_rendezvous(*py, place).empty());

  auto out = lower_comms(merged, place, LowerPolicy::kDeferred, &why);
  REQUIRE(out);
  // Every compute step is kept in order, and every SEND has its RECV on the peer.
  size_t sends = 0, recvs = 0, compute_steps = 0;
  for (const auto& row : *out)
    for (const auto& st : row) {
      if (is_send(st.first.kind)) ++sends;
      else if (is_p2p(st.first.kind)) ++recvs;
      else ++compute_steps;
    }
  CHECK(sends == 2 * 8 * 3);  // 3 cross-rank edges per direction per microbatch, 8 microbatches
  CHECK(recvs == sends);
  CHECK(compute_steps == merged[0].size() + merged[1].size());
  for (size_t r = 0; r < 2; ++r) {
    std::vector<Step> kept;
    for (const auto& st : (*out)[r])
      if (!is_p2p(st.first.kind)) kept.push_back(st);
    CHECK(row_text(kept) == row_text(merged[r]));
  }
  // Rank 0 runs 2B0 before 0F2, so it sends 2SEND_B0 before 0SEND_F2, while rank 1 consumes
  // 1F2 before 1I0. A RECV placed by its consumer alone would pair 2SEND_B0 with 1RECV_F2;
  // the deferred placement pulls 1RECV_B0 up so both ends agree, and the lists complete.
  std::vector<std::string> sent = channel_order(*out, place, 0, 1, true);
  std::vector<std::string> received = channel_order(*out, place, 0, 1, false);
  REQUIRE(sent.size() == 24);
  CHECK(sent[4] == "2SEND_B0");
  CHECK(sent == received);
  CHECK(channel_order(*out, place, 1, 0, true) == channel_order(*out, place, 1, 0, false));
  CHECK(stuck_under_rendezvous(*out, place).empty());
}

TEST_CASE("lists that already hold SEND or RECV are rejected", "[lower]") {
  Lists in = lists_of("0F0,0SEND_F0\n1RECV_F0,1F0\n");
  for (LowerPolicy policy : {LowerPolicy::kPyTorch, LowerPolicy::kDeferred}) {
    std::string why;
    CHECK_FALSE(lower_comms(in, {0, 1}, policy, &why));
    CHECK(why == "already has explicit communication");
  }
}

TEST_CASE("PyTorch lowering reports a schedule no rank can advance as malformed", "[lower]") {
  // docs/facts/p2p-semantics.md: accepted by PyTorch's _validate_schedule, but 0B0 needs 1B0, which needs 2B0,
  // which rank 0 runs after 0B0.
  Lists in = lists_of("0F0,0B0,2F0,2B0\n1F0,3F0,3B0,1B0\n");
  std::string why;
  CHECK_FALSE(lower_comms(in, loop_placement(2, 4), LowerPolicy::kPyTorch, &why));
  CHECK(why == "malformed compute schedule: no rank can make progress; rank 0 waits at 0B0 "
               "(lists.csv:1:5), rank 1 waits at 3F0 (lists.csv:2:5)");
  // The deferred policy simulates the schedule to order its transfers, and refuses it too.
  std::string why2;
  CHECK_FALSE(lower_comms(in, loop_placement(2, 4), LowerPolicy::kDeferred, &why2));
  CHECK(why2 == "malformed compute schedule: its steps wait for each other in a cycle (verify shows the cycle)");
}

TEST_CASE("a stage outside the placement is rejected", "[lower]") {
  Lists in = lists_of("0F0,5F0\n");
  std::string why;
  CHECK_FALSE(lower_comms(in, {0}, LowerPolicy::kPyTorch, &why));
  CHECK(why == "5F0 names stage 5, but the placement has 1 stages");
  CHECK_FALSE(lower_comms(lists_of("0F0\n"), {3}, LowerPolicy::kDeferred, &why));
  CHECK(why == "the placement puts stage 0 on rank 3, but there are 1 ranks");
}

}  // namespace sc

namespace sc {

TEST_CASE("lower and gen write what a fresh _dump_csv writes with --line-endings crlf, and read it back", "[lower]") {
  // Python's csv.writer ends rows with "\r\n" (the default dialect's lineterminator); PyTorch's
  // committed artefacts end them with "\n". Both read back to the same lists.
  test::CliRun lf = test::run_schedcheck("gen 1f1b --ranks 2 --microbatches 2 --comms pytorch", false);
  test::CliRun crlf = test::run_schedcheck("gen 1f1b --ranks 2 --microbatches 2 --comms pytorch --line-endings crlf", false);
  REQUIRE(lf.exit_code == 0);
  REQUIRE(crlf.exit_code == 0);
  CHECK(crlf.out == crlf_lines(lf.out));
  CHECK(std::count(crlf.out.begin(), crlf.out.end(), '\r') == 2);  // one per rank, before each "\n"
  Diagnostics d;
  auto a = parse_csv_schedule("lf.csv", lf.out, d);
  auto b = parse_csv_schedule("crlf.csv", crlf.out, d);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(format_steps(a->actions[0], ",") == format_steps(b->actions[0], ","));
  CHECK(format_steps(a->actions[1], ",") == format_steps(b->actions[1], ","));
  CHECK_FALSE(d.has_errors());
}

TEST_CASE("lower --line-endings crlf reproduces a fresh _dump_csv of PyTorch's zb1p artefact byte for byte", "[lower]") {
  if (test::corpus_dir().empty()) SC_SKIP("corpus folder not found; skipping");
  // PyTorch's test lowers zb1p_2rank_2stagep_compute.csv with _merge_bw; the artefact it dumps,
  // written by a fresh _dump_csv, is the committed file with CRLF line ends.
  const std::string compute = corpus_file("zb1p_2rank_2stagep_compute.csv");
  test::CliRun dumped =
      test::run_schedcheck("lower '" + compute + "' --merge-bw --placement loop --line-endings crlf", false);
  REQUIRE(dumped.exit_code == 0);
  CHECK(dumped.out == crlf_lines(test::read_file(corpus_file("zb1p_2rank_2stagep_comms.csv"))));
}

}  // namespace sc
