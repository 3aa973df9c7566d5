// `schedcheck verify fsdp.yaml`: FSDP / ZeRO-3 gather-free specs (a top-level `fsdp:` key).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/lower_fsdp.h"
#include "fsdp/verify_fsdp.h"
#include "report/report.h"

namespace sc::cli {
namespace {

/// Peak memory of verify per lowered FSDP op, bytes: measured 4.4 GiB peak RSS for a spec of
/// 10^7 ops (465 bytes per op: the Program IR, its per-op info and the passes' tables).
constexpr double kFsdpBytesPerOp = 470;
/// Memory a single verify may take, bytes (4 GiB).
constexpr double kFsdpMemoryBudgetBytes = 4.0 * (1 << 30);
/// Most ops a spec may lower to: the budget over the measured bytes per op (about 9.1 million).
constexpr double kMaxFsdpOps = kFsdpMemoryBudgetBytes / kFsdpBytesPerOp;
/// Most ops per rank: the exact worst case over interleavings is a minimum cut on one rank's
/// events, which grows faster than linearly (measured: 48k ops per rank 1.9 s, 192k 63 s).
constexpr double kMaxFsdpOpsPerRank = 1e5;

/// Checks what the loader cannot see alone: the size of the lowered program (ranks x steps x
/// microbatches x units x about 12 ops per unit, in all and per rank) and that every collective's predicted time is
/// finite and within the duration limit. Errors go to `d` at the fsdp block.
void check_fsdp_size(const FsdpSpec& spec, Diagnostics& d) {
  int max_mb = spec.microbatches;
  for (const auto& [rank, o] : spec.overrides)
    if (o.microbatches) max_mb = std::max(max_mb, *o.microbatches);
  // The ranks built: one when every rank runs the same program (the symmetry quotient,
  // docs/facts/symmetry.md), else every rank.
  const double built = fsdp_quotient_applies(spec) ? 1.0 : static_cast<double>(spec.ranks);
  const double ops = built * spec.iterations * max_mb * static_cast<double>(spec.units.size()) * 12;
  if (ops > kMaxFsdpOps)
    d.error(spec.locs.fsdp, fmt::format("this spec lowers to about {:.3g} ops (built ranks x iterations x microbatches "
                                        "x units x 12; every rank is built because ranks differ), more than the {:.3g} "
                                        "schedcheck checks at once (about {:.0f} bytes each, {:.0f} GiB in all); model "
                                        "fewer ranks (one shard group shows the same gathers and frees) or fewer units",
                                        ops, kMaxFsdpOps, kFsdpBytesPerOp, kFsdpMemoryBudgetBytes / (1 << 30)));
  const double per_rank = ops / built;
  if (ops <= kMaxFsdpOps && per_rank > kMaxFsdpOpsPerRank)
    d.error(spec.locs.fsdp, fmt::format("each rank runs about {:.3g} ops (iterations x microbatches x units x 12), "
                                        "more than the {:.0e} whose worst case over all interleavings schedcheck "
                                        "computes at once; model fewer units (group layers), microbatches or "
                                        "iterations",
                                        per_rank, kMaxFsdpOpsPerRank));
  int64_t largest = 0;
  for (const auto& u : spec.units) largest = std::max(largest, u.params_bytes);
  const int64_t reduce = static_cast<int64_t>(static_cast<double>(largest) / spec.param_dtype.bytes * spec.reduce_dtype.bytes);
  for (auto [kind, bytes] : {std::pair{CollectiveKind::kAllGather, largest}, std::pair{CollectiveKind::kReduceScatter, reduce}}) {
    const double t = collective_time_s(spec, kind, bytes, spec.shard_size);
    if (!std::isfinite(t) || t > kMaxFsdpSeconds) {
      d.error(spec.locs.fsdp, fmt::format("{} {} of the largest unit would take {} s on this link (bandwidth {} B/s): "
                                          "more than the {:.0e} s limit",
                                          kind == CollectiveKind::kAllGather ? "an" : "a", collective_name(kind), t,
                                          spec.bandwidth_bytes_per_s, kMaxFsdpSeconds));
      break;
    }
  }
}

}  // namespace

/// Verifies FSDP specs `files`, adding each file's report to `sink` (its text when the sink
/// wants text); writes
/// the Chrome trace of the single input to `trace`, its DOT picture to `dot` and its SVG timeline
/// to `svg` when given (empty: not written; `trace_all_ranks` as chrome_trace's `all_ranks`). Spec errors in any file stop
/// the run before anything is checked (exit 2). Returns the exit code.
int run_fsdp_verify(const std::vector<std::string>& files, ReportSink& sink, const std::string& trace,
                    const std::string& dot, bool force_min_cut, const std::string& svg, bool trace_all_ranks) {
  std::vector<FsdpSpec> specs;
  std::vector<double> read_s;  // per spec: reading and checking its file (the "read" pass)
  Diagnostics diags;
  for (const auto& f : files) {
    Diagnostics d;
    const auto t0 = std::chrono::steady_clock::now();
    if (!is_fsdp_spec(f))
      d.error(SourceLoc{register_source(f, ""), 1, 1},
              "this file is not an fsdp spec; check fsdp specs and other specs in separate runs");
    else if (auto spec = load_fsdp_spec(f, d)) {
      check_fsdp_size(*spec, d);
      if (!d.has_errors()) {
        specs.push_back(std::move(*spec));
        read_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    diags.merge(d);
  }
  if (diags.has_errors()) {
    sink.add(diagnostics_value(diags));
    return report_spec_errors(diags);
  }
  diags.print(std::cerr);
  int exit = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    VerifyResult r = verify_fsdp(specs[i], force_min_cut);
    r.pass_times.insert(r.pass_times.begin(), PassTime{"read", read_s[i]});
    int code = r.exit_code;
    exit = combine_exit(exit, code);
    // As for a pipeline spec: the text report and the files first, timed as the "report" pass.
    const auto report_start = std::chrono::steady_clock::now();
    if (sink.wants_text()) write_fsdp_text_report(sink.text(), r);
    std::vector<OutputFile> outputs;  // all or none, as for a pipeline spec
    if (!trace.empty()) outputs.push_back({"--trace", trace, chrome_trace(r, trace_all_ranks)});
    if (!trace.empty() && trace_all_ranks) std::cerr << trace_all_ranks_note(r);
    if (!dot.empty()) outputs.push_back({"--dot", dot, dot_graph(r)});
    if (!svg.empty()) outputs.push_back({"--svg", svg, svg_timeline(r)});
    r.pass_times.push_back(
        PassTime{"report", std::chrono::duration<double>(std::chrono::steady_clock::now() - report_start).count()});
    sink.add(fsdp_json_value(r));
    if (!outputs.empty() && !write_outputs(outputs, files)) return exit != 0 ? exit : kExitUsage;
  }
  return exit;
}

}  // namespace sc::cli
