// PyTorch pipelining schedule CSV: reading (strict) and writing (byte-compatible with PyTorch).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "spec/action.h"
#include "spec/pipeline_spec.h"
#include "support/diagnostics.h"

namespace sc {

/// The two CSV flavours of torch.distributed.pipelining: compute only (F, I, W, B, overlap,
/// idle cells) and compute with comms (adds SEND/RECV and may hold UNSHARD/RESHARD/REDUCE_GRAD).
enum class CsvFormat { kComputeOnly, kComputeComms };

/// Action lists read from a CSV: one row per rank, in row order. Idle cells are dropped (they
/// only pad PyTorch's own simulation) but counted in `idle_cells`.
struct CsvSchedule {
  std::vector<std::vector<Step>> actions;
  CsvFormat format = CsvFormat::kComputeOnly;  ///< detected: comms when any SEND/RECV appears
  int32_t max_stage = -1;                      ///< largest stage id named
  int32_t max_microbatch = -1;                 ///< largest microbatch id named
  size_t idle_cells = 0;
  int32_t file = -1;                           ///< registered source index
  int32_t first_row_line = 1;                  ///< line of rank 0's row (after the comment lines); rank r's is + r
  /// First stage of each pipeline, from a "# schedcheck: pipelines 0,4" header line (ascending,
  /// starting at 0); {0} without one. DualPipe runs two pipelines over one set of stages.
  std::vector<int32_t> pipeline_starts{0};
  SourceLoc pipelines_loc;                     ///< where the header gives them (invalid: absent)
};

/// The header line write_csv_schedule writes for `pipeline_starts` with more than one pipeline
/// ("# schedcheck: pipelines 0,4\n"), or "" for one. Lines starting with '#' before the first
/// rank are comments; this one is read back into CsvSchedule::pipeline_starts. A comment meant
/// as a directive ('#', "schedcheck" in any case, then ':' or "pipeline") must be this line,
/// exactly and once: the reader refuses any other (a mistyped directive would otherwise run the
/// schedule as one pipeline).
std::string csv_pipelines_header(const std::vector<int32_t>& pipeline_starts);

/// Reads a PyTorch schedule CSV from text: one line per rank, cells separated by commas, an
/// empty cell an idle slot, a trailing newline optional; lines starting with '#' before the
/// first rank are comments (csv_pipelines_header's line among them: a malformed one is an error). Every cell goes through
/// parse_step (strict); each bad cell is an error at its line and column. Also errors: an empty
/// file, a NUL byte or other binary junk, a quoted cell, and a file with no actions at all.
/// `expected` (when given) is checked against the detected format.
std::optional<CsvSchedule> parse_csv_schedule(const std::string& name, std::string text,
                                              Diagnostics& diags,
                                              std::optional<CsvFormat> expected = std::nullopt);

/// Reads the file at `path` (an unreadable file is an error located at `from` when given).
std::optional<CsvSchedule> read_csv_schedule(const std::string& path, Diagnostics& diags,
                                             std::optional<CsvFormat> expected = std::nullopt,
                                             SourceLoc from = {});

/// Writes action lists as PyTorch writes them: one line per rank, cells joined by ",", each
/// line ending in "\n" (PyTorch's csv.writer would use "\r\n"; the corpus files use "\n").
std::string write_csv_schedule(const std::vector<std::vector<Step>>& actions);
/// `text` with every "\n" written as "\r\n": the line ending of Python's csv.writer (its
/// default dialect's lineterminator), so what a fresh `_dump_csv` writes; PyTorch's committed
/// artefacts end their lines with "\n". The reader accepts both.
std::string crlf_lines(std::string_view text);

/// Builds a PipelineSpec from a CSV on its own (`schedcheck verify file.csv`): stages =
/// max stage + 1, microbatches = max microbatch + 1, placement inferred (or `placement` when
/// given: "loop", "v" or a comma-separated list of ranks per stage), unit defaults for costs
/// and memory. Errors (bad placement text, a declared placement the lists contradict) go to
/// `diags`.
/// Stage ids must be below kMaxSpecStages and microbatch ids below kMaxSpecMicrobatches (an
/// error at the first action naming the largest, never an overflow).
std::optional<PipelineSpec> spec_from_csv(const std::string& path, Diagnostics& diags,
                                          const std::optional<std::string>& placement);

/// spec_from_csv on text already read, named `name` (fuzzers and tests).
std::optional<PipelineSpec> spec_from_csv_text(const std::string& name, const std::string& text, Diagnostics& diags,
                                               const std::optional<std::string>& placement);

}  // namespace sc
