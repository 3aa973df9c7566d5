#include "spec/budget.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "spec/yaml_util.h"
#include "support/units.h"

namespace sc {
namespace {

std::optional<double> parse_value(BudgetUnit unit, const std::string& text, std::string* why) {
  switch (unit) {
    case BudgetUnit::kFraction: {
      std::string t = text;
      bool percent = !t.empty() && t.back() == '%';
      if (percent) t.pop_back();
      char* end = nullptr;
      double v = std::strtod(t.c_str(), &end);
      if (t.empty() || end == t.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
        *why = fmt::format("expected a fraction (0.05) or a percentage (5%), got '{}'", text);
        return std::nullopt;
      }
      const double fraction = percent ? v / 100 : v;
      if (fraction > 1) {  // a rate is at most the whole: 200% or 2.5 is a typo, never a budget
        *why = fmt::format("a rate is at most 1 (100%), got '{}'", text);
        return std::nullopt;
      }
      return fraction;
    }
    case BudgetUnit::kSeconds: return parse_duration_s(text, why);
    case BudgetUnit::kBytes: {
      auto b = parse_bytes(text, why);
      return b ? std::optional<double>(static_cast<double>(*b)) : std::nullopt;
    }
    case BudgetUnit::kCount: {
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || v < 0) {
        *why = fmt::format("expected a non-negative whole number, got '{}'", text);
        return std::nullopt;
      }
      return static_cast<double>(v);
    }
  }
  return std::nullopt;
}

const BudgetKey* find_key(const std::string& key) {
  for (const BudgetKey& k : budget_keys())
    if (key == k.key) return &k;
  return nullptr;
}

std::vector<std::string> key_names() {
  std::vector<std::string> out;
  for (const BudgetKey& k : budget_keys()) out.push_back(k.key);
  return out;
}

}  // namespace

const std::vector<BudgetKey>& budget_keys() {
  static const std::vector<BudgetKey> keys = {
      {"bubble_rate", BudgetUnit::kFraction, "bubble rate"},
      {"span", BudgetUnit::kSeconds, "span"},
      {"step_time", BudgetUnit::kSeconds, "step time"},
      {"exposed_comm", BudgetUnit::kSeconds, "exposed communication time"},
      {"peak_bytes_per_rank", BudgetUnit::kBytes, "peak memory per rank"},
      {"worst_case_bytes_per_rank", BudgetUnit::kBytes, "worst-case memory per rank"},
      {"messages", BudgetUnit::kCount, "P2P messages per step"},
      {"comm_bytes", BudgetUnit::kBytes, "communication bytes per step"},
  };
  return keys;
}

std::string format_budget_value(BudgetUnit unit, double value) {
  switch (unit) {
    case BudgetUnit::kFraction: return fmt::format("{:.4g}%", value * 100);
    case BudgetUnit::kSeconds: return format_duration(value);
    case BudgetUnit::kBytes: return format_bytes(value);
    case BudgetUnit::kCount: return fmt::format("{:.0f}", value);
  }
  return fmt::format("{}", value);
}

std::vector<Budget> load_budgets(const std::string& path, Diagnostics& diags) {
  using namespace yaml_util;
  std::vector<Budget> out;
  if (!has_yaml_extension(path)) return out;  // only YAML specs have a budget: key
  Diagnostics d;
  auto file = read_spec_file(path, d);
  if (!file) return out;  // the spec's loader reports an unreadable file
  if (!declares_key(file->text, "budget")) return out;
  Reader reader(file->file, diags);
  YAML::Node root;
  try {
    root = YAML::Load(file->text);
  } catch (const YAML::Exception&) {
    return out;  // the spec's loader reports invalid YAML
  }
  if (!root.IsMap()) return out;
  for (const auto& top : root) {
    const YAML::Node name = top.first, b = top.second;
    if (!name.IsScalar() || name.Scalar() != "budget") continue;
    if (!b.IsMap()) {
      reader.error(reader.loc(b.IsNull() ? name : b),
                   fmt::format("budget must be a map of figure: limit (keys: {}), got {}",
                               fmt::join(key_names(), ", "), describe(b)));
      return out;
    }
    for (const auto& entry : b) {
      const YAML::Node k_node = entry.first, v_node = entry.second;
      const std::string key = k_node.IsScalar() ? k_node.Scalar() : "";
      const BudgetKey* k = find_key(key);
      if (!k) {
        reader.error(reader.loc(k_node), fmt::format("unknown budget '{}'{} (budgets: {})", printable(key),
                                                       did_you_mean(key, key_names()), fmt::join(key_names(), ", ")));
        continue;
      }
      std::string why;
      std::optional<double> v;
      if (v_node.IsScalar()) v = parse_value(k->unit, v_node.Scalar(), &why);
      else why = fmt::format("expected a value, got {}", describe(v_node));
      if (!v) {
        reader.error(reader.loc(v_node.IsDefined() && !v_node.IsNull() ? v_node : k_node),
                     fmt::format("budget {}: {}", key, why));
        continue;
      }
      out.push_back(Budget{key, k->unit, *v, v_node.Scalar(), reader.loc(k_node), false});
    }
  }
  return out;
}

std::optional<Budget> parse_budget_option(const std::string& text, std::string* why) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    *why = fmt::format("--budget {}: expected KEY=VALUE (keys: {})", text, fmt::join(key_names(), ", "));
    return std::nullopt;
  }
  const std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  const BudgetKey* k = find_key(key);
  if (!k) {
    *why = fmt::format("--budget: unknown budget '{}'{} (budgets: {})", key, yaml_util::did_you_mean(key, key_names()),
                       fmt::join(key_names(), ", "));
    return std::nullopt;
  }
  std::string w;
  auto v = parse_value(k->unit, value, &w);
  if (!v) {
    *why = fmt::format("--budget {}: {}", key, w);
    return std::nullopt;
  }
  return Budget{key, k->unit, *v, value, SourceLoc{}, true};
}

std::vector<Budget> with_overrides(std::vector<Budget> budgets, const std::vector<Budget>& overrides) {
  for (const Budget& o : overrides) {
    bool replaced = false;
    for (Budget& b : budgets)
      if (b.key == o.key) {
        b = o;
        replaced = true;
      }
    if (!replaced) budgets.push_back(o);
  }
  return budgets;
}

}  // namespace sc
