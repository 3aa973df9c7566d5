// A step as phases: a training phase then a forward-only evaluation in one spec
// (examples/train-then-eval-phases.yaml, after deepspeedai/DeepSpeed PR #1944).
#include <fmt/format.h>

#include "catch.h"
#include "diag_util.h"
#include "pipeline/verify_pipeline.h"
#include "report/report.h"
#include "spec/yaml_spec.h"
#include "test_util.h"

using namespace sc;
using sc::test::first_error;
using sc::test::has_finding;

namespace {

std::string example_text() { return test::read_file(test::source_path("examples/train-then-eval-phases.yaml")); }

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  return text;
}

std::optional<VerifyResult> verify_text(const std::string& text, Diagnostics& d) {
  std::optional<PipelineSpec> spec = parse_yaml_spec("phases.yaml", text, d);
  if (!spec) return std::nullopt;
  return verify(*spec, VerifyOptions{});
}

}  // namespace

TEST_CASE("phases: a training step then a forward-only evaluation hold in one spec", "[phases]") {
  Diagnostics d;
  auto r = verify_text(example_text(), d);
  REQUIRE(r);
  CHECK(r->exit_code == 0);
  REQUIRE(r->spec.phases.size() == 2);
  CHECK(r->spec.microbatches == 6);
  CHECK(r->spec.trained_microbatches() == 4);
  CHECK_FALSE(r->spec.forward_only);
  CHECK(r->spec.forward_only_microbatch(4));
  CHECK_FALSE(r->spec.forward_only_microbatch(3));
  // 1 GiB per activation: rank 0 holds two in flight while training (1F1B at p = 2); the
  // evaluation frees each as its forward ends, so its peak stays 2 GiB, and rank 1's 1 GiB.
  REQUIRE(r->timeline);
  CHECK(r->timeline->peak_bytes_per_rank[0] == 2 * (int64_t{1} << 30));
  CHECK(r->timeline->peak_bytes_per_rank[1] == (int64_t{1} << 30));
  const std::string json = json_report(*r);
  CHECK(json.find("\"first_microbatch\": 4") != std::string::npos);
}

TEST_CASE("phases: a rank that skips the evaluation's broadcast hangs the others, and each phase keeps its rules",
          "[phases]") {
  Diagnostics d;
  // PR #1944: rank 1 never enters the loss broadcast; rank 0 waits in it forever.
  auto skipped = verify_text(replaced(example_text(), "1RECV_F5 1F5 BROADCAST@world", "1RECV_F5 1F5"), d);
  REQUIRE(skipped);
  CHECK(skipped->exit_code == 10);
  CHECK(has_finding(*skipped, FindingKind::kDeadlock, "waits in broadcast #2 on communicator 'group world' for rank 1"));
  // A backward of an evaluation microbatch is a structure finding; so is a training
  // microbatch without its backward.
  auto backward = verify_text(replaced(example_text(), "1RECV_F5 1F5 BROADCAST@world", "1RECV_F5 1F5 1B5 BROADCAST@world"), d);
  REQUIRE(backward);
  CHECK(has_finding(*backward, FindingKind::kStructure, "backward actions of forward-only microbatches"));
  auto missing = verify_text(replaced(replaced(example_text(), "0RECV_B3 0B3", ""), "1B3 1SEND_B3", ""), d);
  REQUIRE(missing);
  CHECK(has_finding(*missing, FindingKind::kStructure, "no backward (B, or I and W): 0B3, 1B3"));
  CHECK_FALSE(d.has_errors());
}

TEST_CASE("phases: what the reader refuses, at the key", "[phases]") {
  const std::string text = example_text();
  Diagnostics sum;
  CHECK_FALSE(verify_text(replaced(text, "stages: 2\n", "stages: 2\nmicrobatches: 5\n"), sum));
  CHECK_THAT(first_error(sum), Catch::Contains("the phases add up to 6 microbatches but microbatches is 5"));
  Diagnostics both;
  CHECK_FALSE(verify_text(replaced(text, "stages: 2\n", "stages: 2\nforward_only: true\n"), both));
  CHECK_THAT(first_error(both), Catch::Contains("forward_only and phases are both given"));
  Diagnostics beyond;
  CHECK_FALSE(verify_text(replaced(text, "{name: eval, microbatches: 2, forward_only: true}",
                                   "{name: eval, microbatches: 1, forward_only: true}"),
                          beyond));
  CHECK_THAT(first_error(beyond), Catch::Contains("the schedule names microbatch 5 but the phases add up to 5"));
  Diagnostics named;
  CHECK_FALSE(verify_text("schedcheck: 1\nranks: 2\nmicrobatches: 4\nschedule: {name: 1f1b}\n"
                          "phases: [{microbatches: 4}]\n",
                          named));
  CHECK_THAT(first_error(named), Catch::Contains("phases need the action lists written out"));
  Diagnostics shape;
  CHECK_FALSE(verify_text(replaced(text, "- {name: train, microbatches: 4}", "- train"), shape));
  CHECK_THAT(first_error(shape), Catch::Contains("phases[0] must be a map"));
  // An empty list is named as one (it once said "got a list", which a list is).
  Diagnostics empty;
  CHECK_FALSE(verify_text(replaced(text, "phases:\n  - {name: train, microbatches: 4}\n"
                                         "  - {name: eval, microbatches: 2, forward_only: true}\n",
                                   "phases: []\n"),
                          empty));
  CHECK_THAT(first_error(empty), Catch::EndsWith("got an empty list"));
}
