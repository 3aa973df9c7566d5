// Router specs: core keys, framework presets, located errors; dispatch memory; the plain router.
#include <string>

#include "catch.h"
#include "router/dispatch.h"
#include "router/plain_router.h"
#include "spec/router_spec.h"

namespace {

using namespace sc;

std::optional<RouterSpec> parse(const std::string& text, std::string* errors = nullptr) {
  Diagnostics diags;
  auto spec = parse_router_spec("r.yaml", text, diags);
  if (errors)
    for (const auto& d : diags.all()) *errors += format_diagnostic(d) + "\n";
  return spec;
}

}  // namespace

TEST_CASE("the core router keys of issue 6 load as written", "[router]") {
  auto s = parse(
      "schedcheck: 1\n"
      "router:\n"
      "  experts: 8\n"
      "  top_k: 2\n"
      "  policy: token_choice\n"
      "  capacity_factor: 1.25\n"
      "  drop_policy: probs\n"
      "  capacity_scope: microbatch\n"
      "  fill_order: position_major\n"
      "  bound: {batch: 2, seq_len: 6}\n"
      "  inference: {dropless: true}\n");
  REQUIRE(s);
  CHECK(s->train.experts == 8);
  CHECK(s->train.top_k == 2);
  CHECK_FALSE(s->train.dropless);
  CHECK(s->train.capacity_factor == 1.25);
  CHECK(s->train.drop_policy == DropPolicy::kProbs);
  CHECK(s->batch == 2);
  CHECK(s->seq_len == 6);
  CHECK(s->inference_given);
  CHECK(s->inference.dropless);
  CHECK(s->inference.drop_policy == DropPolicy::kProbs);
  // docs/facts/moe-router.md: capacity = ceil(tokens * top_k / E * capacity_factor) = ceil(12 * 2 / 8 * 1.25) = 4.
  CHECK(expert_capacity(s->train, 12) == 4);
}

TEST_CASE("router spec errors are located, all reported, with did-you-mean", "[router]") {
  std::string errors;
  auto s = parse(
      "schedcheck: 1\n"
      "router:\n"
      "  experts: 8\n"
      "  top_k: 9\n"
      "  capacity_factr: 1.0\n"
      "  drop_policy: prob\n"
      "  bound: {batch: 2, seq_len: 100}\n",
      &errors);
  CHECK_FALSE(s);
  CHECK(errors.find("r.yaml:5:3: error: unknown key 'capacity_factr' in router; did you mean 'capacity_factor'?") !=
        std::string::npos);
  CHECK(errors.find("r.yaml:6:16: error: drop_policy must be one of position, probs, priority, random, got 'prob'; "
                    "did you mean 'probs'?") != std::string::npos);
  CHECK(errors.find("router.bound.seq_len must be from 1 to 64, got 100") != std::string::npos);
  CHECK(errors.find("top_k is 9 but there are only 8 experts") != std::string::npos);
  CHECK(errors.find("    ^") != std::string::npos);  // the caret under the source line
}

TEST_CASE("a router spec must say how full experts get", "[router]") {
  std::string errors;
  CHECK_FALSE(parse("schedcheck: 1\nrouter:\n  experts: 8\n  top_k: 2\n", &errors));
  CHECK(errors.find("capacity_factor: N (tokens beyond capacity are dropped) or dropless: true") != std::string::npos);
  errors.clear();
  CHECK_FALSE(parse("schedcheck: 1\nrouter:\n  experts: 8\n  top_k: 2\n  capacity_factor: 1\n  dropless: true\n"
                    "  drop_policy: probs\n",
                    &errors));
  CHECK(errors.find("not both") != std::string::npos);
  errors.clear();
  CHECK_FALSE(parse("schedcheck: 1\nrouter:\n  experts: 8\n  top_k: 2\n  policy: expert_choice\n  dropless: true\n",
                    &errors));
  CHECK(errors.find("expert_choice needs a capacity_factor") != std::string::npos);
}

TEST_CASE("the Megatron-Core preset maps moe_* keys onto the router model", "[router]") {
  auto s = parse(
      "schedcheck: 1\n"
      "router:\n"
      "  megatron:\n"
      "    num_moe_experts: 8\n"
      "    moe_router_topk: 2\n"
      "    moe_expert_capacity_factor: 1.0\n"
      "    moe_token_drop_policy: position\n"
      "    moe_pad_expert_input_to_capacity: true\n");
  REQUIRE(s);
  CHECK(s->preset == "megatron");
  CHECK(s->train.experts == 8);
  CHECK_FALSE(s->train.dropless);
  CHECK(s->train.drop_policy == DropPolicy::kPosition);
  CHECK(s->train.fill_order == FillOrder::kPositionMajor);  // [s, b, h] flattened
  CHECK(s->train.pad_to_capacity);
  // Without a capacity factor Megatron is dropless; the default drop policy is probs.
  auto d = parse("schedcheck: 1\nrouter:\n  megatron: {num_moe_experts: 64, moe_router_topk: 6}\n");
  REQUIRE(d);
  CHECK(d->train.dropless);
  CHECK(d->train.top_k == 6);
  CHECK(d->train.drop_policy == DropPolicy::kProbs);
  std::string errors;
  CHECK_FALSE(parse("schedcheck: 1\nrouter:\n  experts: 4\n  megatron: {num_moe_experts: 8}\n", &errors));
  CHECK(errors.find("'experts' is set by the megatron preset") != std::string::npos);
}

TEST_CASE("the DeepSpeed MoE preset maps k, drop_tokens, use_rts and eval_capacity_factor", "[router]") {
  auto s = parse("schedcheck: 1\nrouter:\n  deepspeed: {num_experts: 8, k: 1, capacity_factor: 1.0}\n");
  REQUIRE(s);
  CHECK(s->preset == "deepspeed");
  CHECK(s->train.drop_policy == DropPolicy::kRandom);  // use_rts defaults to true
  CHECK(s->train.fill_order == FillOrder::kBatchMajor);
  CHECK(s->train.min_capacity == 4);
  CHECK_FALSE(s->inference_given);
  auto t = parse("schedcheck: 1\nrouter:\n  deepspeed: {num_experts: 8, k: 2, capacity_factor: 1.0, "
                 "eval_capacity_factor: 2.0, min_capacity: 0}\n");
  REQUIRE(t);
  CHECK(t->train.drop_policy == DropPolicy::kPosition);
  CHECK(t->inference_given);
  CHECK(t->inference.capacity_factor == 2.0);
  auto u = parse("schedcheck: 1\nrouter:\n  deepspeed: {num_experts: 8, drop_tokens: false}\n");
  REQUIRE(u);
  CHECK(u->train.dropless);
}

TEST_CASE("dispatch memory: capacity bounds what one expert-parallel rank receives", "[router]") {
  RouterConfig c;
  c.experts = 8;
  c.top_k = 2;
  c.capacity_factor = 1.0;
  c.drop_policy = DropPolicy::kProbs;
  DispatchSpec d;
  d.ep_size = 4;
  d.hidden = 4096;
  d.dtype_bytes = 2;
  d.batch = 4;
  d.seq_len = 1024;
  d.limit_bytes = int64_t{256} << 20;
  // 4096 tokens, capacity ceil(4096 * 2 / 8) = 1024, 2 experts per rank: 2048 copies per sender,
  // 4 senders: 8192 tokens x 4096 x 2 B = 64 MiB.
  DispatchResult r = dispatch_worst_case(c, d);
  CHECK(r.capacity == 1024);
  CHECK(r.worst_tokens_per_rank == 8192);
  CHECK(r.buffer_bytes == int64_t{64} << 20);
  CHECK_FALSE(r.over_limit);
  // Dropless: every token may pick both of one rank's experts: 4096 x 2 x 4 senders = 32768.
  c.dropless = true;
  r = dispatch_worst_case(c, d);
  CHECK(r.worst_tokens_per_rank == 32768);
  CHECK(r.buffer_bytes == int64_t{256} << 20);
  CHECK_FALSE(r.over_limit);
  d.limit_bytes = (int64_t{256} << 20) - 1;
  CHECK(dispatch_worst_case(c, d).over_limit);
}

TEST_CASE("the plain router drops by position, probability and fill order as specified", "[router]") {
  RouterConfig c;
  c.experts = 2;
  c.top_k = 1;
  c.capacity_factor = 1.0;  // 4 tokens, capacity ceil(4 / 2) = 2
  RouterInput in;
  in.batch = 2;
  in.seq_len = 2;
  // Every token prefers expert 0, with scores 1, 4 (sequence 0) and 3, 2 (sequence 1).
  in.scores = {1, 0, 4, 0, 3, 0, 2, 0};
  c.drop_policy = DropPolicy::kPosition;
  c.fill_order = FillOrder::kPositionMajor;  // order (0,0) (1,0) (0,1) (1,1)
  RouterDecisions d = route(c, in);
  CHECK(d.fate(0, 0) == Fate::kKept);
  CHECK(d.fate(2, 0) == Fate::kKept);  // (1,0)
  CHECK(d.fate(1, 0) == Fate::kDropped);
  c.fill_order = FillOrder::kBatchMajor;  // order (0,0) (0,1) (1,0) (1,1)
  d = route(c, in);
  CHECK(d.fate(1, 0) == Fate::kKept);
  CHECK(d.fate(2, 0) == Fate::kDropped);
  c.drop_policy = DropPolicy::kProbs;  // keeps the scores 4 and 3
  d = route(c, in);
  CHECK(d.fate(1, 0) == Fate::kKept);
  CHECK(d.fate(2, 0) == Fate::kKept);
  CHECK(d.fate(0, 0) == Fate::kDropped);
  CHECK(d.describe(0) == "e0 dropped");
}

TEST_CASE("a check list names known properties only", "[router]") {
  std::string errors;
  CHECK_FALSE(parse("schedcheck: 1\nrouter:\n  experts: 4\n  top_k: 1\n  dropless: true\n"
                    "  check: [prefix_causality, drop_fre]\n",
                    &errors));
  CHECK(errors.find("r.yaml:6:29: error: router.check must be one of") != std::string::npos);
  CHECK(errors.find("did you mean 'drop_free'?") != std::string::npos);
}

TEST_CASE("a bound too large for the proofs is a located spec error", "[router]") {
  std::string errors;
  CHECK_FALSE(parse("schedcheck: 1\nrouter:\n  experts: 256\n  top_k: 8\n  dropless: true\n"
                    "  bound: {batch: 4, seq_len: 16}\n",
                    &errors));
  CHECK(errors.find("r.yaml:6:10: error: 64 tokens x 256 experts squared is more than") != std::string::npos);
  // DeepSeek-V3's 256 experts fit at a small bound.
  CHECK(parse("schedcheck: 1\nrouter:\n  experts: 256\n  top_k: 8\n  dropless: true\n"
              "  bound: {batch: 2, seq_len: 4}\n"));
}
