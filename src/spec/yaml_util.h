// Small yaml-cpp helpers shared by the spec loaders (src/spec only: yaml-cpp stays here).
#pragma once

#include <map>
#include <string>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace sc::yaml_util {

/// One key of a map with its value.
struct Entry {
  YAML::Node key;
  YAML::Node value;
};
/// A map's keys by name.
using Fields = std::map<std::string, Entry>;

/// "a map", "a list", "nothing" or the quoted scalar (cut at 40 characters), for "got ..." in
/// messages.
inline std::string describe(const YAML::Node& n) {
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  std::string s = n.Scalar();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return fmt::format("'{}'", s);
}

}  // namespace sc::yaml_util
