// Text and JSON reports of an FSDP verify result.
#include <algorithm>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fsdp/verify_fsdp.h"
#include "report/numerics_report.h"
#include "report/report.h"
#include "support/units.h"

namespace sc {
namespace {

const char* implementation_name(FsdpImplementation i) {
  switch (i) {
    case FsdpImplementation::kFsdp1: return "fsdp1";
    case FsdpImplementation::kFsdp2: return "fsdp2";
    case FsdpImplementation::kZero3: return "zero3";
  }
  return "?";
}

std::string pct(double x) { return fmt::format("{:.1f}%", 100.0 * x); }

}  // namespace

void write_fsdp_text_report(std::ostream& os, const VerifyResult& v) {
  const FsdpExtras& x = *fsdp_extras(v);  // an FSDP spec's result (verify_fsdp)
  const FsdpSpec& s = x.spec;
  const Program& p = v.program;
  os << verdict_line(v.spec.path, v.findings, v.exit_code);
  os << fmt::format("  fsdp {}: {} on {} ranks (shard {}, replicate {}), {} unit{}, {} microbatch{}, {}, {} ops\n",
                    s.name, implementation_name(s.implementation), s.ranks, s.shard_size, s.replicate_size,
                    s.units.size(), s.units.size() == 1 ? "" : "s", s.microbatches, s.microbatches == 1 ? "" : "es",
                    s.programs.empty() ? fmt::format("{} step{}", s.iterations, s.iterations == 1 ? "" : "s") : std::string("explicit programs"), p.ops.size());
  if (!p.rank_classes.empty())
    os << fmt::format("  symmetry: every rank runs the same program, so {} built for the {} (each collective timed "
                      "over its whole group; docs/facts/symmetry.md)\n",
                      p.num_ranks == 1 ? "one rank is" : fmt::format("{} ranks are", p.num_ranks),
                      format_count(p.job_ranks(), "rank"));
  write_findings(os, v.findings);
  write_numerics_fixes(os, v);
  if (!x.figures || !v.timeline || !v.worst_case) {
    os << "\n  no timeline: the program does not run to completion\n";
    return;
  }
  const FsdpFigures& f = *x.figures;
  os << "\nstep:\n";
  for (size_t i = 0; i < f.step_time_s.size(); ++i)
    os << fmt::format("  step {} time {}\n", i, format_duration(f.step_time_s[i]));
  os << fmt::format("  communication per rank per step {} ({:.2f}x the parameter bytes {}; docs/facts/fsdp-zero.md formula {})\n",
                    format_bytes(f.comm_bytes_per_step),
                    f.params_bytes > 0 ? f.comm_bytes_per_step / f.params_bytes : 0.0, format_bytes(f.params_bytes),
                    s.programs.empty() ? format_bytes(f.expected_comm_bytes_per_step) : "n/a for explicit programs");
  os << fmt::format("  communication time {} over {} step{} on rank {}, exposed {} (overlap {})\n",
                    format_duration(f.comm_time_s), f.step_time_s.size(), f.step_time_s.size() == 1 ? "" : "s",
                    p.job_class(f.most_exposed_rank).first, format_duration(f.exposed_comm_s), pct(f.overlap));
  std::vector<FsdpUnitExposure> top = f.exposure;
  std::stable_sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.exposed_s > b.exposed_s; });
  if (!top.empty() && top.front().exposed_s > 0) {
    os << fmt::format("  most exposed all-gathers (over {} step{}):", f.step_time_s.size(), f.step_time_s.size() == 1 ? "" : "s");
    for (size_t i = 0; i < top.size() && i < 5 && top[i].exposed_s > 0; ++i)
      os << fmt::format(" {} {} (rank {}){}", top[i].unit, format_duration(top[i].exposed_s), p.job_class(top[i].rank).first,
                        i + 1 < std::min<size_t>(top.size(), 5) && top[i + 1].exposed_s > 0 ? "," : "");
    os << "\n";
  }
  os << fmt::format("\nper rank (limit {}; reserved = what the caching allocator holds, each stream's pool at its own "
                    "peak; gathered = unsharded parameters live at once, largest unit {}):\n",
                    s.limit_bytes ? format_bytes(static_cast<double>(*s.limit_bytes)) : "none",
                    format_bytes(static_cast<double>(f.largest_unit_params_bytes)));
  // One row per run of consecutive ranks with identical figures (every rank is shown: a rank
  // that differs from its neighbours keeps its own line).
  const size_t last = f.peak_bytes_per_step.size() - 1;
  std::vector<std::string> rows(static_cast<size_t>(p.num_ranks));
  for (int32_t rk = 0; rk < p.num_ranks; ++rk)
    rows[static_cast<size_t>(rk)] =
        fmt::format(" {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}", format_bytes(static_cast<double>(p.static_bytes_per_rank[rk])),
                    format_bytes(static_cast<double>(f.peak_bytes_per_step[0][rk])),
                    format_bytes(static_cast<double>(f.peak_bytes_per_step[last][rk])),
                    format_bytes(static_cast<double>(v.worst_case->bytes_per_rank[rk])),
                    format_bytes(static_cast<double>(v.timeline->reserved_bytes_per_rank[rk])),
                    format_bytes(static_cast<double>(f.gathered_peak_bytes_per_rank[rk])),
                    format_bytes(static_cast<double>(f.gathered_worst_case_bytes_per_rank[rk])));
  const std::vector<JobRankRun> runs = fold_job_rows(p, rows);
  const int width = static_cast<int64_t>(runs.size()) < p.job_ranks() ? 11 : 5;
  os << fmt::format("  {:>{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "rank", width, "static", "peak step0",
                    "peak last", "worst case", "reserved", "gathered", "gathered wc");
  for (const JobRankRun& run : runs)
    os << fmt::format("  {:>{}}{}{}\n", run.ranks.label(), width, rows[static_cast<size_t>(run.row)],
                      alike_suffix(run.ranks));
}

std::string fsdp_json_report(const VerifyResult& r) {
  return fsdp_json_value(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

nlohmann::json fsdp_json_value(const VerifyResult& r) {
  using nlohmann::json;
  const FsdpExtras& x = *fsdp_extras(r);  // an FSDP spec's result (verify_fsdp)
  json j = json_report_value(r);
  const FsdpSpec& s = x.spec;
  j.erase("schedule");
  json units = json::array();
  for (const auto& u : s.units)
    units.push_back({{"name", u.name},
                     {"params_bytes", u.params_bytes},
                     {"forward_s", u.forward_s},
                     {"backward_s", u.backward_s},
                     {"activation_bytes", u.activation_bytes}});
  j["fsdp"] = {{"name", s.name},
               {"path", r.spec.path},
               {"implementation", implementation_name(s.implementation)},
               {"ranks", s.ranks},
               {"shard_size", s.shard_size},
               {"replicate_size", s.replicate_size},
               {"dtypes", {{"param", s.param_dtype.name}, {"reduce", s.reduce_dtype.name}}},
               {"microbatches", s.microbatches},
               {"iterations", s.iterations},
               {"units", units}};
  j["semantics"]["collectives"] = "complete when every member of the communicator reaches them; one at a time per communicator";
  if (x.figures) {
    const FsdpFigures& f = *x.figures;
    json exposure = json::array();
    for (const auto& e : f.exposure) exposure.push_back({{"unit", e.unit}, {"exposed_s", e.exposed_s}, {"rank", e.rank}});
    j["fsdp_figures"] = {{"comm_bytes_per_step", f.comm_bytes_per_step},
                         {"expected_comm_bytes_per_step", f.expected_comm_bytes_per_step},
                         {"params_bytes", f.params_bytes},
                         {"comm_time_s", f.comm_time_s},
                         {"exposed_comm_s", f.exposed_comm_s},
                         {"most_exposed_rank", f.most_exposed_rank},
                         {"overlap", f.overlap},
                         {"step_time_s", f.step_time_s},
                         {"peak_bytes_per_step", f.peak_bytes_per_step},
                         {"gathered_peak_bytes_per_rank", f.gathered_peak_bytes_per_rank},
                         {"gathered_worst_case_bytes_per_rank", f.gathered_worst_case_bytes_per_rank},
                         {"largest_unit_params_bytes", f.largest_unit_params_bytes},
                         {"exposure_per_unit", exposure}};
  } else {
    j["fsdp_figures"] = nullptr;
  }
  size_t collectives = 0;
  for (const Op& o : r.program.ops) collectives += o.kind == OpKind::kCollective ? 1 : 0;
  j["stats"]["collectives"] = collectives;
  j["stats"]["communicators"] = r.program.comms.size();
  return j;
}

}  // namespace sc
