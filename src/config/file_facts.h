// The facts a framework config states about its own run: the `# schedcheck:` directive (and
// torchtitan's "preset for N <GPU> GPUs" comment), merged with the command line's facts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "config/job.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace sc::config {

/// What a config file states about the run it describes, each with where it says so. A fact
/// not stated is empty (0 or "") with an invalid location.
///
/// The directive is a whole comment line (`#` first on the line, after blanks) whose text
/// starts with `schedcheck:`, then blank-separated KEY=VALUE items:
///   # schedcheck: gpus=64 hardware=a100-80gb model=llama3-70b
/// gpus: the world size (1 to 2^20); hardware and model: preset names (as --hardware and
/// --model take them). Several directive lines add up;
/// a key given twice, an unknown key, an item without '=', a bad value or an unknown preset is
/// an error located at the item's line and column. In a torchtitan TOML, the comment its
/// presets open with ("# NOTE: this toml config is a preset for 64 A100 GPUs.") states gpus
/// and hardware too (a GPU with no preset is a warning, and ignored); where it and a directive
/// both state a fact and differ, that is an error at the directive.
struct FileFacts {
  int32_t gpus = 0;
  std::string hardware, model;  ///< canonical preset names
  SourceLoc gpus_at, hardware_at, model_at;
};

/// Reads the facts `text` (the contents of a config registered as `file`) states. Errors and
/// warnings go to `diags`; `torchtitan` also reads torchtitan's preset comment.
FileFacts read_file_facts(int32_t file, const std::string& text, bool torchtitan, Diagnostics& diags);

/// The facts a reader gets for the config: each fact the file states, else the command line's
/// (`cli`: the command line fills what the file leaves open). A command-line fact that differs
/// from the file's is not applied to this file: a warning located at the file's statement says so
/// ("--gpus 8 is not applied here: the file states gpus=64"), so an option given for several
/// files never silently overrides one file's own facts.
JobContext merge_file_facts(const JobContext& cli, const FileFacts& facts, Diagnostics& diags);

/// Points job.where at the file's statement for each fact the file stated and the job took
/// ("world", "hardware", "model"), so findings about them are located there.
void locate_file_facts(const FileFacts& facts, TrainingJob* job);

/// The repository's facts file: a file of this name, found walking up from a config's folder to
/// the repository's root, states facts for configs by path. Each line is `GLOB: KEY=VALUE...`
/// (the directive's items), `#` starts a comment line:
///   configs/*.toml: gpus=64 hardware=a100-80gb
///   configs/llama70b-*.toml: model=llama3-70b
/// GLOB is matched (fnmatch, `*` also across `/`) against the config's path relative to the
/// facts file's folder; for each fact the first matching line that states it gives it. A fact the
/// config states itself (its directive or torchtitan's preset comment) wins over the facts file;
/// the facts file wins over the command line (which fills what both leave open), with the same
/// located warning when they differ.
inline constexpr const char* kFactsFileName = ".schedcheck-facts";

/// A reader's entry with the file's facts: reads `path` (when it cannot be read, `read` runs with
/// `cli` alone and reports it in its words), read_file_facts, the facts file's facts for what
/// the file leaves open, then `read` with merge_file_facts(cli, ...), then locate_file_facts. False when the facts have errors (the
/// reader is not run) or when `read` returns false.
bool read_with_file_facts(const std::string& path, const JobContext& cli, bool torchtitan, TrainingJob* job,
                          Diagnostics& diags, const std::function<bool(const JobContext&)>& read);

}  // namespace sc::config
