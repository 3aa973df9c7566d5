// "Did you mean" for the names of model and GPU presets, wherever a name is given (a command-line
// option, a config's schedcheck: directive).
#pragma once

#include <string>

namespace sc::config {

/// The preset a mistyped model name most likely meant ("llama3-70" -> "llama3-70b"), by edit
/// distance over the model presets' names (closest_match); empty when none is close.
std::string closest_model_preset(const std::string& name);

/// The preset a mistyped GPU name most likely meant: a name that spells out a preset's memory
/// ("h100-80gb" -> "h100", whose HBM is 80 GiB) gives that preset; otherwise the closest name by
/// edit distance (closest_match); empty when none is close.
std::string closest_hardware_preset(const std::string& name);

/// " (did you mean 'x'?)" for closest_model_preset / closest_hardware_preset, or empty.
std::string model_preset_hint(const std::string& name);
std::string hardware_preset_hint(const std::string& name);

}  // namespace sc::config
