// Router checks against the docs/facts/moe-router.md policy table, with every witness replayed through route().
#include <algorithm>
#include <string>

#include "catch.h"
#include "router/plain_router.h"
#include "solver/router_check.h"
#include "spec/router_spec.h"

namespace {

using namespace sc;

RouterSpec spec_from(const std::string& router_body, const std::string& bound = "{batch: 2, seq_len: 3}") {
  std::string text = "schedcheck: 1\nrouter:\n" + router_body + "  bound: " + bound + "\n";
  Diagnostics diags;
  auto spec = parse_router_spec("test.yaml", text, diags);
  INFO(text);
  for (const auto& d : diags.all()) INFO(format_diagnostic(d));
  REQUIRE(spec);
  return *spec;
}

const PropertyResult& prop(const RouterReport& r, const std::string& name) {
  auto it = std::find_if(r.properties.begin(), r.properties.end(), [&](const auto& p) { return p.name == name; });
  REQUIRE(it != r.properties.end());
  return *it;
}

// The witness's flip, recomputed here from its inputs with the plain router (independent of the
// solver's own replay flag).
void require_replayed_flip(const RouterSpec& s, const PropertyResult& p) {
  REQUIRE(p.witness);
  const RouterWitness& w = *p.witness;
  CHECK(w.replayed);
  RouterDecisions da = route(s.train, w.a), db = route(s.train, w.b);
  CHECK_FALSE(da.same_token(db, w.token));
}

struct Row {
  const char* name;
  const char* body;
  bool causal;       // docs/facts/moe-router.md "causal within its sequence"
  bool independent;  // not "depends on other sequences"
};

// docs/facts/moe-router.md policy table, one row each, at E = 4, top-2, batch 2 x 3 tokens.
const Row kRows[] = {
    {"token choice top-k, dropless (Mixtral, DeepSeek-V3, MegaBlocks)",
     "  experts: 4\n  top_k: 2\n  policy: token_choice\n  dropless: true\n", true, true},
    {"capacity + drop by position, scope one sequence",
     "  experts: 4\n  top_k: 2\n  capacity_factor: 1.0\n  drop_policy: position\n  capacity_scope: sequence\n", true,
     true},
    {"capacity + drop by position, microbatch position-major (Megatron position)",
     "  experts: 4\n  top_k: 2\n  capacity_factor: 1.0\n  drop_policy: position\n  capacity_scope: microbatch\n"
     "  fill_order: position_major\n",
     true, false},
    {"capacity + drop by position, batch-major (DeepSpeed, HF NLLB)",
     "  experts: 4\n  top_k: 2\n  capacity_factor: 1.0\n  drop_policy: position\n  capacity_scope: microbatch\n"
     "  fill_order: batch_major\n",
     false, false},
    {"capacity + drop by probability (Megatron probs, DeepSpeed, DeepSeek-V2)",
     "  experts: 4\n  top_k: 2\n  capacity_factor: 1.0\n  drop_policy: probs\n", false, false},
    {"batch-prioritized routing (V-MoE)", "  experts: 4\n  top_k: 1\n  capacity_factor: 1.0\n  drop_policy: priority\n",
     false, false},
    {"random token selection (DeepSpeed top-1)", "  experts: 4\n  top_k: 1\n  capacity_factor: 1.0\n  drop_policy: random\n",
     false, false},
    {"expert choice (Zhou et al. 2022)", "  experts: 4\n  top_k: 2\n  policy: expert_choice\n  capacity_factor: 1.0\n",
     false, false},
};

}  // namespace

TEST_CASE("every row of the docs/facts/moe-router.md policy table gets its causality and batch-independence verdict", "[router]") {
  for (const Row& row : kRows) {
    SECTION(row.name) {
      RouterSpec s = spec_from(row.body);
      RouterCheckOptions opt;
      opt.only = {"prefix_causality", "batch_independence"};
      RouterReport r = check_router(s, opt);
      const PropertyResult& pc = prop(r, "prefix_causality");
      const PropertyResult& bi = prop(r, "batch_independence");
      CHECK(pc.status == (row.causal ? PropertyStatus::kHolds : PropertyStatus::kViolated));
      CHECK(bi.status == (row.independent ? PropertyStatus::kHolds : PropertyStatus::kViolated));
      CHECK(r.exit_code == (row.causal && row.independent ? 0 : 12));
      if (!row.causal) {
        require_replayed_flip(s, pc);
        const RouterWitness& w = *pc.witness;
        REQUIRE_FALSE(w.causes.empty());
        // Every cause is at a later position than the flipping token; earlier positions agree.
        for (int32_t c : w.causes) CHECK(c % s.seq_len > w.token % s.seq_len);
      }
      if (!row.independent) {
        require_replayed_flip(s, bi);
        const RouterWitness& w = *bi.witness;
        REQUIRE_FALSE(w.causes.empty());
        for (int32_t c : w.causes) CHECK(c / s.seq_len != w.token / s.seq_len);
      }
    }
  }
}

TEST_CASE("batch-major position dropping breaks causality across sequences only", "[router]") {
  // docs/facts/moe-router.md: a token of sequence 1 reads every token of sequence 0, later positions included.
  RouterSpec s = spec_from(kRows[3].body);
  RouterCheckOptions opt;
  opt.only = {"prefix_causality"};
  RouterReport r = check_router(s, opt);
  const auto& w = *prop(r, "prefix_causality").witness;
  CHECK(w.token / s.seq_len == 1);
  for (int32_t c : w.causes) CHECK(c / s.seq_len == 0);
}

TEST_CASE("drop-freedom holds exactly when capacity covers the tokens in scope", "[router]") {
  // docs/facts/moe-router.md: nothing is dropped when capacity >= tokens in scope; top_k * capacity_factor >= E
  // guarantees it. E = 4, top-2, 6 tokens: factor 2 gives capacity 6, factor 1.5 gives 5.
  RouterSpec ok = spec_from("  experts: 4\n  top_k: 2\n  capacity_factor: 2.0\n  drop_policy: probs\n");
  RouterCheckOptions opt;
  opt.only = {"drop_free"};
  RouterReport r = check_router(ok, opt);
  CHECK(prop(r, "drop_free").status == PropertyStatus::kHolds);
  CHECK(r.exit_code == 0);

  RouterSpec tight = spec_from("  experts: 4\n  top_k: 2\n  capacity_factor: 1.5\n  drop_policy: probs\n");
  r = check_router(tight, opt);
  const PropertyResult& p = prop(r, "drop_free");
  REQUIRE(p.status == PropertyStatus::kViolated);
  CHECK(r.exit_code == kRouterExitDrop);
  REQUIRE(p.witness);
  CHECK(p.witness->replayed);
  RouterDecisions d = route(tight.train, p.witness->a);
  bool dropped = false;
  for (int32_t e = 0; e < 4; ++e) dropped = dropped || d.fate(p.witness->token, e) == Fate::kDropped;
  CHECK(dropped);

  RouterSpec dropless = spec_from(kRows[0].body);
  r = check_router(dropless, opt);
  CHECK(prop(r, "drop_free").status == PropertyStatus::kHolds);
}

TEST_CASE("determinism fails for random token selection and for unspecified ties, with a replayed witness",
          "[router]") {
  RouterCheckOptions opt;
  opt.only = {"deterministic"};
  RouterSpec random = spec_from(kRows[6].body);
  RouterReport r = check_router(random, opt);
  const PropertyResult& p = prop(r, "deterministic");
  REQUIRE(p.status == PropertyStatus::kViolated);
  CHECK(r.exit_code == kRouterExitDeterminism);
  REQUIRE(p.witness);
  CHECK(p.witness->replayed);
  CHECK(p.witness->a.scores == p.witness->b.scores);  // same scores, different draws
  CHECK(p.witness->a.draws != p.witness->b.draws);

  RouterSpec ties = spec_from("  experts: 4\n  top_k: 2\n  dropless: true\n  tie_break: unspecified\n");
  r = check_router(ties, opt);
  const PropertyResult& t = prop(r, "deterministic");
  REQUIRE(t.status == PropertyStatus::kViolated);
  REQUIRE(t.witness);
  CHECK(t.witness->replayed);
  RouterDecisions low = route(ties.train, t.witness->a, TieOrder::kLowFirst);
  RouterDecisions high = route(ties.train, t.witness->b, TieOrder::kHighFirst);
  CHECK_FALSE(low.same_token(high, t.witness->token));

  RouterSpec fixed = spec_from("  experts: 4\n  top_k: 2\n  dropless: true\n  tie_break: lower_index\n");
  r = check_router(fixed, opt);
  CHECK(prop(r, "deterministic").status == PropertyStatus::kHolds);
  // Random selection that never has to drop anything decides nothing.
  RouterSpec roomy = spec_from("  experts: 4\n  top_k: 1\n  capacity_factor: 4.0\n  drop_policy: random\n");
  r = check_router(roomy, opt);
  CHECK(prop(r, "deterministic").status == PropertyStatus::kHolds);
  CHECK(prop(r, "deterministic").queries == 1);
}

TEST_CASE("train/inference equivalence: dropless both ways holds, capacity in training and dropless serving fails",
          "[router]") {
  RouterCheckOptions opt;
  opt.only = {"train_inference"};
  RouterSpec same = spec_from(kRows[0].body);
  CHECK(prop(check_router(same, opt), "train_inference").status == PropertyStatus::kHolds);

  RouterSpec differ = spec_from(std::string(kRows[4].body) + "  inference: {dropless: true}\n");
  CHECK(differ.inference_given);
  CHECK(differ.inference.dropless);
  RouterReport r = check_router(differ, opt);
  const PropertyResult& p = prop(r, "train_inference");
  REQUIRE(p.status == PropertyStatus::kViolated);
  CHECK(r.exit_code == kRouterExitCausality);
  REQUIRE(p.witness);
  CHECK(p.witness->replayed);
  RouterDecisions train = route(differ.train, p.witness->a);
  RouterDecisions alone = route_alone(differ.inference, p.witness->a, p.witness->token);
  bool equal = true;
  for (int32_t e = 0; e < 4; ++e) equal = equal && train.fate(p.witness->token, e) == alone.fate(0, e);
  CHECK_FALSE(equal);

  // Expert choice cannot be served one token at a time: every expert takes the lone token.
  RouterSpec ec = spec_from(kRows[7].body);
  CHECK(prop(check_router(ec, opt), "train_inference").status == PropertyStatus::kViolated);
}

TEST_CASE("a query at batch 2, sequence length 8, E = 8, top-2 finishes well inside 10 s", "[router]") {
  // Issue 6 performance target; Megatron's default (probs) is the hardest row that still fails fast,
  // the sequence-scoped position policy one that must be proven for every target token.
  RouterSpec s = spec_from("  experts: 8\n  top_k: 2\n  capacity_factor: 1.0\n  drop_policy: position\n"
                           "  capacity_scope: sequence\n",
                           "{batch: 2, seq_len: 8}");
  RouterReport r = check_router(s);
  for (const auto& p : r.properties) {
    INFO(p.name);
    CHECK(p.status != PropertyStatus::kInconclusive);
    CHECK(p.seconds < 10.0);
  }
  CHECK(prop(r, "prefix_causality").status == PropertyStatus::kHolds);
  CHECK(prop(r, "batch_independence").status == PropertyStatus::kHolds);
}

TEST_CASE("a solver that runs out of resources makes the result inconclusive, never proven", "[router]") {
  RouterSpec s = spec_from(kRows[4].body);  // needs a search either way
  RouterCheckOptions opt;
  opt.rlimit = 1;
  opt.only = {"prefix_causality", "drop_free"};
  RouterReport r = check_router(s, opt);
  CHECK(prop(r, "prefix_causality").status == PropertyStatus::kInconclusive);
  CHECK(prop(r, "drop_free").status == PropertyStatus::kInconclusive);
  CHECK(r.exit_code == kRouterExitInconclusive);
  CHECK(r.verdict() == "inconclusive");
  // A violation found elsewhere still wins over an inconclusive property.
  std::vector<PropertyResult> props(2);
  props[0].status = PropertyStatus::kInconclusive;
  props[1].status = PropertyStatus::kViolated;
  props[1].kind = "causality";
  CHECK(router_exit_code(props, std::nullopt) == kRouterExitCausality);
}

TEST_CASE("the spec's check list limits the properties checked", "[router]") {
  RouterSpec s = spec_from(std::string(kRows[4].body) + "  check: [drop_free]\n");
  RouterReport r = check_router(s);
  REQUIRE(r.properties.size() == 1);
  CHECK(r.properties[0].name == "drop_free");
  CHECK(r.exit_code == kRouterExitDrop);
}
