// `schedcheck verify` for FSDP / ZeRO-3 specs: lowering, the checks of docs/facts/fsdp-zero.md, and the
// predicted step time, exposed communication and memory.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pipeline/verify_pipeline.h"
#include "fsdp/fsdp_spec.h"
#include "fsdp/lower_fsdp.h"

namespace sc {

/// Exposed communication of one unit on one rank: the time the compute stream waited for the
/// unit's all-gathers (start of each wait marker minus the end of the op before it on the
/// compute stream), summed over iterations, microbatches, forward and backward. Seconds.
struct FsdpUnitExposure {
  std::string unit;
  double exposed_s = 0;   ///< the largest over ranks
  int32_t rank = 0;       ///< the rank where it is largest
};

/// FSDP figures of a completed program.
/// comm_bytes_per_step: per rank, bytes each rank sends in one step, sum over its collectives
/// of (n-1)/n·B (all-reduce 2(n-1)/n·B) for group size n and per-rank bytes B (ring algorithms,
/// Thakur et al. 2005); the largest over ranks and steps. expected_comm_bytes_per_step: docs/facts/fsdp-zero.md,
/// (N-1)/N·Ψ·(2·b_c + b_r) per microbatch (all-gather in forward and backward, one
/// reduce-scatter), plus HSDP's 2(R-1)/R·Ψ·b_r/N; with reshard_after_forward false one
/// all-gather per microbatch, with an integer k (post_forward_group) the backward's all-gather
/// over k ranks, (k-1)/k·Ψ·b_c, measured with group size k as well. overlap = 1 - exposed / communication time on the most exposed
/// rank. step_time_s[i]: end of step i's optimizer minus end of step i-1's (the first from 0),
/// largest over ranks. peak_bytes_per_step[i][r]: rank r's timeline peak during step i.
/// gathered_*: parameter bytes ("param" and "ag-buffer" buffers) live at once, on the timeline
/// and in the worst case over all interleavings of the streams.
struct FsdpFigures {
  double comm_bytes_per_step = 0;
  double expected_comm_bytes_per_step = 0;
  double params_bytes = 0;                 ///< sum of the units' params_bytes (unsharded)
  double comm_time_s = 0;                  ///< collective time on the most exposed rank, seconds
  double exposed_comm_s = 0;               ///< all-gather and reduction waits on that rank, seconds
  int32_t most_exposed_rank = 0;
  double overlap = 0;                      ///< fraction of communication hidden behind compute
  std::vector<double> step_time_s;
  std::vector<std::vector<int64_t>> peak_bytes_per_step;
  std::vector<int64_t> gathered_peak_bytes_per_rank;
  std::vector<int64_t> gathered_worst_case_bytes_per_rank;
  int64_t largest_unit_params_bytes = 0;
  std::vector<FsdpUnitExposure> exposure;  ///< per unit, forward order
};

/// What verify adds for an FSDP spec to the common result (VerifyResult::extras): the spec,
/// the per-op info and the FSDP figures. The program, findings, execution, timeline and worst
/// case are the common result's, which every generic report reads.
struct FsdpExtras : ResultExtras {
  FsdpSpec spec;
  std::vector<FsdpOpInfo> info;        ///< per op
  std::optional<FsdpFigures> figures;  ///< when the program completes
};

/// The FSDP extras of `r`, or null when `r` is not an FSDP spec's result.
inline const FsdpExtras* fsdp_extras(const VerifyResult& r) { return dynamic_cast<const FsdpExtras*>(r.extras.get()); }

/// Lowers `spec` (lower_fsdp) and runs: lowering findings; collective agreement per
/// communicator (kind, bytes, dtype and unit of the k-th collective equal on every member;
/// the first divergence with the culprit ranks, a "channel" finding); execution (a hang or
/// deadlock; a hang caused by a divergence names the culprit rank and the first divergent
/// collective); residency (every compute's parameters gathered before it and freed after it
/// in every interleaving: a gather and the free must be ordered with the use by stream order or
/// events; else a "residency" finding with the interleaving that breaks it); timeline; worst-case
/// memory over all interleavings; the memory limit; FSDP figures. `force_min_cut` as for
/// pipelines. When every rank runs the same generated program (fsdp_quotient_applies), one
/// rank is built and stands for all of them (lower_fsdp's quotient, docs/facts/symmetry.md):
/// the result's per-rank vectors then have one entry per class (Program::rank_classes) and
/// findings name the class's job ranks. With one explicit program for all ranks, every rank
/// is built and the residency and worst-case passes run on rank 0 and are copied to the others
/// (exact by symmetry). `use_symmetry` false builds and computes every rank (the comparison in
/// tests). Never fails: problems are
/// findings.
VerifyResult verify_fsdp(const FsdpSpec& spec, bool force_min_cut = false, bool use_symmetry = true);

/// Text report for people: verdict, findings, FSDP figures, per-rank table.
void write_fsdp_text_report(std::ostream& os, const VerifyResult& r);

/// The JSON report: the verify report's keys (verdict, exit_code, semantics, findings, timing,
/// memory, stats) with `schedule` replaced by `fsdp` (implementation, ranks, shard and
/// replicate sizes, units, options) and an `fsdp_figures` object (FsdpFigures, units in key
/// names).
std::string fsdp_json_report(const VerifyResult& r);
/// The same report as a JSON value (for renderers that add to it or read it).
nlohmann::json fsdp_json_value(const VerifyResult& r);

}  // namespace sc
