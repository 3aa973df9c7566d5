// One key whose value differs between two versions of an input file (config::changed_keys
// finds them; `diff` reports them).
#pragma once

#include <optional>
#include <string>

namespace sc {

/// `key` is the dotted path (TOML `parallelism.pipeline_parallel_degree`, YAML/JSON
/// `p2p.semantics`, a list item `phases[1].microbatches`, a Megatron-LM flag
/// `--pipeline-model-parallel-size`); values are as written in the file (shortened to 60
/// characters); a side where the key is absent has no value and line 0.
struct KeyChange {
  std::string key;
  std::optional<std::string> old_value, new_value;
  int old_line = 0, new_line = 0;  ///< 1-based; 0 where absent
};

}  // namespace sc
