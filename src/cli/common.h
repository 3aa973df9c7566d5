// Shared pieces of the schedcheck subcommands: exit codes, loading specs, writing files.
#pragma once

#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include "config/job.h"
#include "spec/pipeline_spec.h"
#include "support/diagnostics.h"

namespace sc::cli {

inline constexpr int kExitUsage = 1;
inline constexpr int kExitSpec = 2;
/// Nothing decided within a resource limit: a solver's, a time limit, or memory (std::bad_alloc).
inline constexpr int kExitInconclusive = 5;

/// The exit code of several files so far (`so_far`) and one more (`code`): theirs when they agree
/// (a 0 takes the other's), else 10 (violations of several kinds).
inline int combine_exit(int so_far, int code) {
  return so_far == 0 ? code : (code == 0 || code == so_far) ? so_far : 10;
}
/// A reducing collective's error, bias, underflow or overflow beyond tolerance (`numerics`).
inline constexpr int kExitNumerics = 17;
inline constexpr int kExitInternal = 70;

/// Largest stages x microbatches a schedule may have (per-pair tables are indexed by both).
inline constexpr int64_t kMaxStageMicrobatchPairs = 10'000'000;

/// A schedule shape given on the command line (`synth --ranks/--stages/--microbatches`) that
/// replaces the spec's; unset fields keep the spec's values.
struct ShapeOverride {
  std::optional<int32_t> ranks, stages, microbatches;
  bool any() const { return ranks || stages || microbatches; }
};

/// Loads a YAML spec, or a bare CSV (by its ".csv" extension) with `placement` ("loop", "v" or
/// "0,1,1,0"; only for CSV). A named schedule (`schedule: {name: ...}`) is generated here.
/// Errors go to `diags` (nullopt returned); also rejects more than kMaxStageMicrobatchPairs.
/// `schedule_optional`: a YAML spec may leave out `schedule:` (see load_yaml_spec).
/// `shape`: replaces the spec's ranks, stages and microbatches before a named schedule is
/// generated; a spec whose action lists are written out loses them (they were for the old shape;
/// only with `schedule_optional`), and its per-stage lists must then be uniform (one value for
/// every stage), else an error at the spec.
std::optional<PipelineSpec> load_spec(const std::string& path, const std::optional<std::string>& placement,
                                      Diagnostics& diags, bool schedule_optional = false,
                                      const ShapeOverride& shape = {});

/// Parses each --env NAME=VALUE into `job->env` (a shell variable name, each name once); the
/// problem, or empty.
std::string parse_env(const std::vector<std::string>& items, config::JobContext* job);

/// `diags` as one JSON report object: {"verdict": "error", "exit_code": 2, "diagnostics":
/// [{severity, file, line, col, message}]} (what --format json gives for a spec error).
nlohmann::json diagnostics_value(const Diagnostics& diags);

/// Where one verify run puts its per-file reports. Every front-end's runner adds each file's
/// JSON report value (add()), and, when the format is text, writes its text report to text()
/// (files after the first are preceded by a blank line). The values are kept (values()), so
/// that CI formats, budgets and lists of mixed files render from them; finish() prints them
/// as JSON (one object, or a list for several or when `list` is set) when the format is json
/// and `print_json` is set. Nothing is parsed back and no stream is redirected.
class ReportSink {
 public:
  ReportSink(std::ostream& text, std::string format, bool print_json = true, bool list = false)
      : text_(text), format_(std::move(format)), print_json_(print_json), list_(list) {}
  const std::string& format() const { return format_; }
  bool wants_text() const { return format_ == "text"; }
  /// The stream for the next file's text report.
  std::ostream& text();
  /// One file's JSON report value.
  void add(nlohmann::json report);
  std::vector<nlohmann::json>& values() { return values_; }
  /// Prints the JSON when the format is json and printing was asked for.
  void finish();

 private:
  std::ostream& text_;
  std::string format_;
  bool print_json_ = true, list_ = false;
  bool any_text_ = false;
  std::vector<nlohmann::json> values_;
};

/// Whether `spec` runs any microbatch forward only (`forward_only: true`, or a forward-only
/// phase of `phases:`): then an error located at that phase (or the file's start) saying that
/// `command` ("synth", "compare") orders and generates training steps only, a forward and a
/// backward per microbatch, and what to run instead. Synthesis and the named schedules would
/// otherwise add backwards the spec does not have, and fail their own verify.
bool refuse_forward_only(const PipelineSpec& spec, const std::string& command, Diagnostics& diags);

/// `--phase NAME|N` of synth and compare: a spec with several `phases:` is ordered one training
/// phase at a time, since the phases run one after the other with the spec's own collectives
/// between them and no order crosses a phase boundary. With `phase` (a phase's name, or its
/// 1-based position), `spec` becomes that phase alone: microbatches = the phase's count, ids
/// renumbered from 0 (the phase's first id is returned in *first_id), phases cleared, and each
/// rank's written list keeps only that phase's pipeline actions (compute, SEND/RECV; the
/// collectives between phases are the spec's, not an order's). Errors (in `diags`, located at the
/// phase or the file): several phases and no --phase (the message lists them and the option),
/// --phase on a spec without phases, an unknown name or position, or a forward-only phase (as
/// refuse_forward_only). Returns false on an error.
bool narrow_to_phase(PipelineSpec& spec, const std::optional<std::string>& phase, const std::string& command,
                     Diagnostics& diags, int32_t* first_id);

/// A check for an option whose value is one of `names`: a value not among them is refused as
/// "'jsn' is not one of text, json, sarif, github (did you mean 'json'?)" (CLI11 puts the option
/// first), the suggestion by closest_match. Use instead of CLI::IsMember.
CLI::Validator one_of(std::vector<std::string> names);

/// Prints `diags` and the closing line to standard error; returns kExitSpec.
int report_spec_errors(const Diagnostics& diags);

/// Writes `text` to `path` as write_outputs does, or to standard output when `path` is empty.
/// `option` names the path in messages ("--junit"). False (with a message on standard error)
/// when it cannot.
bool write_output(const std::optional<std::string>& path, const std::string& text,
                  const std::string& option = "--output");

/// One output file: the option that names it ("--trace"), its path, and its contents.
struct OutputFile {
  std::string option;
  std::string path;
  std::string text;
};

/// Writes every file of `files` or none of them. Each must pass check_output_path (never an
/// input, never a file an input references, never a folder, no two the same file under any
/// spelling); each regular file's text goes to a temporary file made with mkstemp beside its
/// real target (links followed: the link is kept and its target replaced; ".NAME.XXXXXX", so no
/// existing file is touched), FIFOs and character devices (/dev/stdout) are written through once
/// every temporary file is complete, and only then are the temporary files renamed into place. False (with a
/// message on standard error, no temporary file left) when any cannot be written.
bool write_outputs(const std::vector<OutputFile>& files, const std::vector<std::string>& inputs = {});

/// Checks an output path given with `option` before any work is done: not one of `inputs` nor
/// any file read so far (input_files_read(): a spec and the files it references), compared by
/// device and inode or by real path (symbolic links followed), not a folder, a block device or
/// a socket, in an existing folder we may write, and, when it exists, a file we may write (as `>`
/// checks: access(W_OK), so a read-only file is refused though its folder is writable). An existing FIFO or character device is a valid
/// output: it is written through, never replaced; a link is followed and its target written.
/// Returns the problem, or empty.
std::string check_output_path(const std::string& option, const std::string& path,
                              const std::vector<std::string>& inputs);

/// Checks several output options at once, before any work is done: check_output_path on each
/// given path, and no two naming the same file under any spelling (`X`, `./X`, `$PWD/X`, a link
/// to X). `named` holds (option, path) pairs; an absent path is skipped. Returns the first
/// problem, or empty.
std::string check_output_paths(const std::vector<std::pair<std::string, std::optional<std::string>>>& named,
                               const std::vector<std::string>& inputs);

/// Spec v1 YAML of `spec` with its action lists (`actions` replaces spec.actions when given).
std::string yaml_spec_text(const PipelineSpec& spec, const std::vector<std::vector<Step>>* actions = nullptr);

/// Adds `--semantics eager|rendezvous|buffered:N` to `cmd`, validated while parsing (a bad value is
/// a usage error, exit 1), so a stored value always parses with parse_semantics.
void add_semantics_option(CLI::App* cmd, std::optional<std::string>& value);

/// One subcommand: its CLI11 app and what runs it after parsing.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_verify(CLI::App& parent);
Command add_lower(CLI::App& parent);
Command add_gen(CLI::App& parent);
Command add_compare(CLI::App& parent);
Command add_synth(CLI::App& parent);
Command add_run(CLI::App& parent);  ///< `schedcheck run` (GPU confirmation, verify_gpu/)
Command add_numerics(CLI::App& parent);  ///< `schedcheck numerics` (one collective's arithmetic)
Command add_plan(CLI::App& parent);      ///< `schedcheck plan` (parallel layouts for a model on N GPUs)
Command add_diff(CLI::App& parent);  ///< `schedcheck diff` (two verify results side by side)

}  // namespace sc::cli
