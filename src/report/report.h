// Reports of a verify result: text for people, JSON for scripts, Chrome trace, DOT picture.
#pragma once

#include <iosfwd>
#include <string>

#include "pipeline/verify_pipeline.h"

namespace sc {

/// "PATH: holds (exit 0)" or "PATH: VIOLATED: deadlock, memory (3 findings, exit 10)", with a
/// newline: the first line of every text report.
std::string verdict_line(const std::string& path, const std::vector<Finding>& findings, int exit_code);

/// The "findings:" block of a text report: each finding's kind and message, its located ops
/// ("file:line:col: op") and its detail lines. Nothing when `findings` is empty.
void write_findings(std::ostream& os, const std::vector<Finding>& findings);

/// Text for people: the verdict first, then findings (with their counterexamples), then a
/// per-rank summary (busy, idle, peak and worst-case memory) and, for small schedules (at most
/// `timeline_max_ops` ops), a compact text timeline.
void write_text_report(std::ostream& os, const VerifyResult& r, size_t timeline_max_ops = 400);

/// One JSON object with the keys of the issue: verdict, exit_code, semantics, findings
/// ({kind, message, ranks, ops, locations}), timing ({span, makespan, bubble_rate,
/// idle_per_rank} in seconds, null when the schedule does not complete), memory
/// ({peak_bytes_per_rank, worst_case_bytes_per_rank, limit_bytes}), stats (ops, edges, time per
/// pass), plus schedule, placement, units.
std::string json_report(const VerifyResult& r);

/// Chrome trace event JSON (Perfetto opens it): an X event per op (pid = rank, tid = stream),
/// flow events from each send to its recv (and for implicit transfers from producer to
/// consumer), C counter events for live memory per rank, process names and distributedInfo.
std::string chrome_trace(const VerifyResult& r);

/// Graphviz DOT of the stuck state: each rank's stream as a cluster up to its stuck op, and
/// the wait-for edges of the cycle in red. For schedules that complete: the happens-before
/// graph (only for small programs; larger ones get a note instead).
std::string dot_graph(const VerifyResult& r);

}  // namespace sc
