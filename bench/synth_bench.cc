// Synthesis and SMT-engine benchmarks (not tests); figures go to the README.
//   synth_bench targets                 unit costs, M_B = 2, M_W = 1: p = 4, m = 8 at limits 8..14
//                                       (docs/facts/pipeline-schedules.md), p = 4, m = 16 at 8, 10, 12, p = 8, m = 16 at 16, 20
//   synth_bench zb [SECONDS]            p = 8, m = 24, ZB 1.5B costs, limits 2p·M_B and p·M_B
//   synth_bench below [SECONDS]         less memory than 1F1B: p4 m8 @6, p4 m16 @6, p6 m12 @10, p8 m16 @14
//   synth_bench interleaved [SECONDS]   v = 2 stages per rank, p = 4, m = 8, limits 8..16
//   synth_bench shape P M LIMIT [SECONDS]  unit costs, M_B = 2, M_W = 1
//   Any mode but differential takes --no-closed-form-bounds (the solver's own proofs only) and
//   --no-cuts (without the energetic and transitivity constraints).
//   synth_bench differential N [SEED]   N mutated schedules through both verify engines
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pipeline/verify_pipeline.h"
#include "solver/smt_differential.h"
#include "solver/synth.h"

namespace {

bool g_closed_forms = true;
bool g_cuts = true;

sc::PipelineSpec make(int32_t p, int32_t m, double f, double i, double w, double latency_s) {
  sc::PipelineSpec s;
  s.name = fmt::format("p{}-m{}", p, m);
  s.path = "<bench>";
  s.ranks = p;
  s.stages = p;
  s.microbatches = m;
  s.stage_to_rank = sc::loop_placement(p, p);
  s.placement = "loop";
  s.placement_declared = true;
  s.costs.f_s.assign(p, f);
  s.costs.i_s.assign(p, i);
  s.costs.w_s.assign(p, w);
  s.costs.b_s.assign(p, i + w);
  s.p2p.latency_s = latency_s;
  s.memory.params_bytes.assign(p, 0);
  s.memory.activation_bytes.assign(p, 2);
  s.memory.weight_grad_bytes.assign(p, 1);
  return s;
}

void run(const sc::PipelineSpec& spec, int64_t limit, double seconds) {
  sc::SynthOptions o;
  o.limit_bytes = limit;
  o.time_limit_s = seconds;
  o.closed_form_bounds = g_closed_forms;
  o.cuts = g_cuts;
  auto t0 = std::chrono::steady_clock::now();
  sc::SynthResult r = sc::synthesize(spec, o);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double bubble = -1;
  if (r.has_schedule) {
    sc::PipelineSpec s = spec;
    s.actions = r.actions;
    s.memory.limit_bytes = limit;
    sc::VerifyResult v = sc::verify(s, sc::VerifyOptions{});
    if (v.timeline) bubble = v.timeline->bubble_rate;
    if (!v.findings.empty()) std::printf("  verify FAILED: %s\n", v.findings.front().message.c_str());
  }
  std::printf("%-10s limit %3lld  %-10s best %-10.6g lower bound %-10.6g bubble %.4f  warm start %s %.6g  "
              "closed form %.6g %s  %lld order booleans, %zu probes, solver %.2f s, wall %.2f s\n",
              spec.name.c_str(), static_cast<long long>(limit), sc::synth_status_name(r.status), r.best_s,
              r.lower_bound_s, bubble, r.warm_start.empty() ? "-" : r.warm_start.c_str(), r.warm_start_s,
              r.closed_form_lower_bound_s, r.closed_form_source.empty() ? "-" : r.closed_form_source.c_str(),
              static_cast<long long>(r.order_booleans), r.probes.size(), r.solver_seconds, wall);
  for (const auto& p : r.probes) std::printf("    <= %.6g: %s (%.2f s)\n", p.bound_s, p.answer.c_str(), p.seconds);
  std::fflush(stdout);
}

}  // namespace

int main(int argc_in, char** argv_in) {
  std::vector<char*> args;
  for (int k = 0; k < argc_in; ++k) {
    if (std::string(argv_in[k]) == "--no-closed-form-bounds") g_closed_forms = false;
    else if (std::string(argv_in[k]) == "--no-cuts") g_cuts = false;
    else args.push_back(argv_in[k]);
  }
  const int argc = static_cast<int>(args.size());
  char** argv = args.data();
  std::string mode = argc > 1 ? argv[1] : "targets";
  if (mode == "targets") {
    for (int64_t limit : {8, 10, 12, 14}) run(make(4, 8, 1, 1, 1, 0), limit, 120);
    for (int64_t limit : {8, 10, 12}) run(make(4, 16, 1, 1, 1, 0), limit, 120);
    for (int64_t limit : {16, 20}) run(make(8, 16, 1, 1, 1, 0), limit, 120);
  } else if (mode == "below") {
    double seconds = argc > 2 ? std::atof(argv[2]) : 60;
    run(make(4, 8, 1, 1, 1, 0), 6, seconds);
    run(make(4, 16, 1, 1, 1, 0), 6, seconds);
    run(make(6, 12, 1, 1, 1, 0), 10, seconds);
    run(make(8, 16, 1, 1, 1, 0), 14, seconds);
  } else if (mode == "interleaved") {
    double seconds = argc > 2 ? std::atof(argv[2]) : 60;
    sc::PipelineSpec s = make(4, 8, 1, 1, 1, 0);
    s.name = "p4-v2-m8";
    s.stages = 8;
    s.stage_to_rank = sc::loop_placement(4, 8);
    s.costs.f_s.assign(8, 1);
    s.costs.i_s.assign(8, 1);
    s.costs.w_s.assign(8, 1);
    s.costs.b_s.assign(8, 2);
    s.memory.params_bytes.assign(8, 0);
    s.memory.activation_bytes.assign(8, 2);
    s.memory.weight_grad_bytes.assign(8, 1);
    for (int64_t limit : {8, 12, 16}) run(s, limit, seconds);
  } else if (mode == "zb") {
    double seconds = argc > 2 ? std::atof(argv[2]) : 120;
    // ZB paper (arXiv 2401.10241) appendix, 1.5B model, m = 24 (docs/facts/pipeline-schedules.md).
    sc::PipelineSpec s = make(8, 24, 18.522e-3, 18.086e-3, 9.337e-3, 0.601e-3);
    s.name = "zb-1.5b";
    for (int64_t limit : {32, 16}) run(s, limit, seconds);
  } else if (mode == "shape" && argc >= 5) {
    double seconds = argc > 5 ? std::atof(argv[5]) : 120;
    run(make(std::atoi(argv[2]), std::atoi(argv[3]), 1, 1, 1, 0), std::atoll(argv[4]), seconds);
  } else if (mode == "differential") {
    int64_t n = argc > 2 ? std::atoll(argv[2]) : 5000;
    uint32_t seed = argc > 3 ? static_cast<uint32_t>(std::atoll(argv[3])) : 1;
    auto t0 = std::chrono::steady_clock::now();
    sc::DifferentialTally t = sc::run_mutation_differential(
        n, seed, sc::SmtOptions{}, [](const std::string& m) { std::printf("%s\n", m.c_str()); });
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("differential: %lld cases, %lld deadlocked, %lld disagreements, smt %.2f s, wall %.2f s\n",
                static_cast<long long>(t.cases), static_cast<long long>(t.deadlocks),
                static_cast<long long>(t.disagreements), t.smt_seconds, wall);
    return t.disagreements == 0 ? 0 : 1;
  } else {
    std::fprintf(stderr, "usage: synth_bench targets | zb [SECONDS] | below [SECONDS] | interleaved [SECONDS] | shape P M LIMIT [SECONDS] "
                 "[--no-closed-form-bounds] [--no-cuts] | differential N [SEED]\n");
    return 1;
  }
  return 0;
}
