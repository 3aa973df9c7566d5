#include "config/preset_names.h"

#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "model/cost_model.h"
#include "support/diagnostics.h"

namespace sc::config {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string hint(const std::string& near) { return near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near); }

}  // namespace

std::string closest_model_preset(const std::string& name) {
  return closest_match(lower(name), model::model_preset_names());
}

std::string closest_hardware_preset(const std::string& name) {
  const std::string n = lower(name);
  // "<preset>-<N>gb": the preset when its memory is N GiB ("h100-80gb" is the 80 GiB "h100").
  const size_t dash = n.rfind('-');
  if (dash != std::string::npos && n.size() > dash + 3 && n.compare(n.size() - 2, 2, "gb") == 0) {
    const std::string digits = n.substr(dash + 1, n.size() - dash - 3);
    const bool numeric = !digits.empty() && digits.size() < 6 &&
                         digits.find_first_not_of("0123456789") == std::string::npos;
    if (numeric)
      if (auto h = model::hardware_preset(n.substr(0, dash));
          h && h->hbm_bytes == std::strtoll(digits.c_str(), nullptr, 10) * (int64_t{1} << 30))
        return h->name;
  }
  return closest_match(n, model::hardware_preset_names());
}

std::string model_preset_hint(const std::string& name) { return hint(closest_model_preset(name)); }
std::string hardware_preset_hint(const std::string& name) { return hint(closest_hardware_preset(name)); }

}  // namespace sc::config
