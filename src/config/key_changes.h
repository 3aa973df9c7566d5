// The keys that differ between two versions of one input file, each with its value on either
// side and its line: what `diff` shows a reviewer as "the change, in the config's words".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/key_change.h"

namespace sc::config {

using sc::KeyChange;

/// The keys that differ between `old_text` and `new_text`, both of the format `path` names by its
/// extension (.toml; .yaml, .yml, .json read as YAML; .sh as a launch script's flags after shell
/// expansion, a flag given twice counting its last value), in the new file's order, then keys
/// only the old one has. Empty for other formats (a CSV's rows are not keys) or when a side does
/// not parse (the readers report that).
std::vector<KeyChange> changed_keys(const std::string& path, const std::string& old_text, const std::string& new_text);

}  // namespace sc::config
