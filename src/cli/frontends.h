// The front-ends the commands know, in one table: which input files each reads and which
// verify options apply to it.
#pragma once

#include <string>
#include <vector>

namespace sc::cli {

/// One kind of input. `claims` is true when the file is this front-end's (decided by extension
/// and top-level keys, never by a file's position on the command line); `options` are the
/// verify options that apply to it (--format always does).
struct FrontEnd {
  const char* name;  ///< "torchtitan", "deepspeed", "megatron", "router", "fsdp", "composed", "pipeline"
  const char* what;  ///< for messages: "router specs (a top-level router: key)"
  bool (*claims)(const std::string& path);
  std::vector<std::string> options;
};

/// The table, in detection order; the last (pipeline: YAML specs and PyTorch CSVs) claims every
/// file the others do not.
const std::vector<FrontEnd>& front_ends();

/// The front-end of `path`.
const FrontEnd& front_end_for(const std::string& path);

}  // namespace sc::cli
