// Reports of a verify result: text for people, JSON for scripts, Chrome trace, SVG and DOT pictures.
#pragma once

#include <iosfwd>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "pipeline/verify_pipeline.h"
#include "support/units.h"

namespace sc {

/// "PATH: holds (exit 0)" or "PATH: VIOLATED: deadlock, memory (3 findings, exit 10)", with a
/// newline: the first line of every text report.
std::string verdict_line(const std::string& path, const std::vector<Finding>& findings, int exit_code);

/// The "findings:" block of a text report: each finding's kind and message, its located ops
/// ("file:line:col: op") and its detail lines. Nothing when `findings` is empty.
void write_findings(std::ostream& os, const std::vector<Finding>& findings);

/// Text for people: the verdict first, then findings (with their counterexamples), then a
/// per-rank summary (busy, idle, peak and worst-case memory) and, for small schedules (at most
/// `timeline_max_ops` ops and as many streams), a compact text timeline: a row per stream, a column per third (or
/// half, or whole) of the shortest compute op, at most 120 columns; a column shows the op that
/// covers more than half of it (else idle): its kind letter, then its microbatch where its
/// columns leave room, then '-' for its other columns.
/// A larger schedule gets a one-line note instead (none when `timeline_max_ops` is 0).
void write_text_report(std::ostream& os, const VerifyResult& r, size_t timeline_max_ops = 400);

/// Each rank's row of the text report's per-rank table without the rank column (start, end,
/// busy, idle, peak and worst-case memory, "over limit"), rank i at index i; empty when the
/// schedule does not complete. Ranks with equal rows are alike in every figure the report
/// shows: the text table and the SVG fold consecutive ones (fold_identical_rows).
std::vector<std::string> rank_rows(const VerifyResult& r);

/// A run of consecutive job ranks whose report rows are identical: `ranks` the job ranks
/// (through Program::rank_classes, so a symmetry quotient's one built rank prints as the
/// ranks it stands for), `row` the built rank whose row it prints.
struct JobRankRun {
  RankRun ranks;
  int32_t row = 0;
};

/// Folds `rows` (one per built rank of `p`) into runs of consecutive identical rows, in rank
/// order, each over the job ranks its built ranks stand for (fold_identical_rows, then
/// Program::job_class).
std::vector<JobRankRun> fold_job_rows(const Program& p, const std::vector<std::string>& rows);

/// " (N ranks alike)" for a run of more than one job rank, else "".
std::string alike_suffix(const RankRun& run);

/// One JSON object with the keys of the issue: verdict, exit_code, semantics, findings
/// ({kind, message, ranks, ops, locations}), timing ({span, makespan, bubble_rate,
/// idle_per_rank} in seconds, null when the schedule does not complete), memory
/// ({peak_bytes_per_rank, worst_case_bytes_per_rank, limit_bytes}), stats (ops, edges, time per
/// pass), plus schedule, placement, units.
std::string json_report(const VerifyResult& r);
/// The same report as a JSON value: what renderers that add to it or read it (CI formats,
/// budgets, diff, compare, the framework-config report) take, so that no report is parsed back.
nlohmann::json json_report_value(const VerifyResult& r);

/// Chrome trace event JSON (Perfetto and chrome://tracing open it): an X event per op that ran
/// (pid = rank, tid = stream; a recv posted before its send also gets a "(waiting)" slice up to
/// the send's start), an arrow from each send to its recv and from producer to consumer of each
/// implicit transfer, written so that Perfetto binds it to those two ops (see trace.cc), C
/// counter events for live memory per rank (with the limit), process and thread names and
/// distributedInfo. Times are whole nanoseconds that survive Perfetto's conversion. For a stuck
/// run: the executed prefix, an instant event where each stuck stream stops (args: the op, what
/// it waits for) and otherData.stuck.
std::string chrome_trace(const VerifyResult& r, bool all_ranks = false);
/// What `--trace-all-ranks` cannot unfold, as a note for the user ("" when nothing): a symmetry
/// quotient builds one rank for each class of identical ranks (docs/facts/symmetry.md), so the
/// trace holds the built ranks, each named for the job ranks it stands for.
std::string trace_all_ranks_note(const VerifyResult& r);

/// An SVG picture of the timeline (the predicted one, or for a stuck run the executed prefix):
/// a lane per rank and stream with time left to right, ops coloured by kind and labelled where
/// the label fits, arrows for messages and implicit transfers, a bar through the member lanes of
/// each collective, a strip per rank with live memory and the limit, idle time as empty lane,
/// and for a stuck run a red mark where each stuck stream stops and the wait-for cycle. Ops
/// narrower than a pixel are merged per pixel column and the picture says how many; above 5000
/// arrows (or collectives) those are left out and the picture says so.
std::string svg_timeline(const VerifyResult& r);

/// Several timelines as svg_timeline draws them, one below the other on one time scale (the
/// longest run's), for comparing schedules.
std::string svg_timelines(const std::vector<const VerifyResult*>& results);

/// Graphviz DOT of the stuck state: each rank's stream as a cluster up to its stuck op, and
/// the wait-for edges of the cycle in red. For schedules that complete: the happens-before
/// graph (only for small programs; larger ones show each stream's last 4 ops and its stuck op,
/// and say so in the graph label).
std::string dot_graph(const VerifyResult& r);

}  // namespace sc
