// Lookups in the key dictionaries of src/config/config_keys.cc.
#include <algorithm>
#include <set>

#include "config/config_keys.h"
#include "support/diagnostics.h"

namespace sc::config {
namespace {

const std::set<std::string>& torchtitan_set() {
  static const std::set<std::string> s(torchtitan_keys().begin(), torchtitan_keys().end());
  return s;
}
const std::set<std::string>& deepspeed_set() {
  static const std::set<std::string> s(deepspeed_keys().begin(), deepspeed_keys().end());
  return s;
}
const std::set<std::string>& megatron_set() {
  static const std::set<std::string> s(megatron_flags().begin(), megatron_flags().end());
  return s;
}

}  // namespace

bool torchtitan_table_has_keys(const std::string& dotted) {
  const auto& keys = torchtitan_set();
  const std::string prefix = dotted + ".";
  auto it = keys.lower_bound(prefix);
  return it != keys.end() && it->compare(0, prefix.size(), prefix) == 0;
}

bool is_torchtitan_key(const std::string& dotted, bool is_table) {
  const auto& keys = torchtitan_set();
  if (keys.count(dotted)) return true;
  // "a.b.*" admits everything below a.b.
  for (size_t dot = dotted.find('.'); dot != std::string::npos; dot = dotted.find('.', dot + 1))
    if (keys.count(dotted.substr(0, dot) + ".*")) return true;
  return is_table && torchtitan_table_has_keys(dotted);
}

bool is_deepspeed_key(const std::string& name) { return deepspeed_set().count(name) > 0; }

bool is_megatron_flag(const std::string& flag) { return megatron_set().count(flag) > 0; }

std::string closest_torchtitan_key(const std::string& dotted) {
  const size_t dot = dotted.rfind('.');
  const std::string table = dot == std::string::npos ? std::string() : dotted.substr(0, dot + 1);
  const std::string key = dot == std::string::npos ? dotted : dotted.substr(dot + 1);
  std::vector<std::string> same;  // keys of the same table, without it; or the tables
  std::set<std::string> seen;
  for (const std::string& k : torchtitan_keys()) {
    if (table.empty()) {
      const std::string head = k.substr(0, k.find('.'));
      if (seen.insert(head).second) same.push_back(head);
    } else if (k.compare(0, table.size(), table) == 0 && k.find('.', table.size()) == std::string::npos) {
      same.push_back(k.substr(table.size()));
    }
  }
  return closest_match(key, same);
}

std::string closest_deepspeed_key(const std::string& name) { return closest_match(name, deepspeed_keys()); }

std::string closest_megatron_flag(const std::string& flag) { return closest_match(flag, megatron_flags()); }

}  // namespace sc::config
