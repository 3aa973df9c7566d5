// Router checks benchmark: seconds per property as the bound grows (E = 8, top-2), for the
// docs/facts/moe-router.md policies. Run by hand; figures go to the README. Usage: router_bench [max_seq_len]
#include <cstdio>
#include <iostream>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "solver/router_check.h"
#include "spec/router_spec.h"

int main(int argc, char** argv) {
  int max_seq = argc > 1 ? std::atoi(argv[1]) : 8;
  const std::pair<const char*, const char*> policies[] = {
      {"dropless", "  dropless: true\n"},
      {"sequence/position", "  capacity_factor: 1.0\n  drop_policy: position\n  capacity_scope: sequence\n"},
      {"megatron position", "  capacity_factor: 1.0\n  drop_policy: position\n  fill_order: position_major\n"},
      {"probs", "  capacity_factor: 1.0\n  drop_policy: probs\n"},
      {"expert choice", "  policy: expert_choice\n  capacity_factor: 1.0\n"},
  };
  fmt::print("{:<18} {:>5} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n", "policy", "batch", "seq_len", "prefix",
             "batch", "train/inf", "drops", "determ", "total");
  for (const auto& [name, body] : policies)
    for (int seq : {2, 4, 6, 8, 12, 16}) {
      if (seq > max_seq) break;
      std::string text = fmt::format("schedcheck: 1\nrouter:\n  experts: 8\n  top_k: 2\n{}  bound: {{batch: 2, "
                                     "seq_len: {}}}\n",
                                     body, seq);
      sc::Diagnostics diags;
      auto spec = sc::parse_router_spec("bench.yaml", text, diags);
      if (!spec) {
        diags.print(std::cerr);
        return 1;
      }
      sc::RouterReport r = sc::check_router(*spec);
      std::string cells;
      for (const auto& p : r.properties)
        cells += fmt::format(" {:>7.2f}{}", p.seconds, p.status == sc::PropertyStatus::kInconclusive ? "?" : " ");
      fmt::print("{:<18} {:>5} {:>7}{} {:>8.2f}\n", name, 2, seq, cells, r.seconds);
      std::fflush(stdout);
    }
  return 0;
}
