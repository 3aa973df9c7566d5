// Parsing and formatting of durations, byte counts and bandwidths (see units.h).
#include "support/units.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/diagnostics.h"

namespace sc {
namespace {

struct Unit {
  std::string_view name;
  double scale;
};

constexpr std::array<Unit, 5> kDurationUnits = {{
    {"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"\xC2\xB5s", 1e-6}, {"ns", 1e-9}}};

constexpr std::array<Unit, 11> kByteUnits = {{{"B", 1.0},
                                              {"KB", 1e3},
                                              {"MB", 1e6},
                                              {"GB", 1e9},
                                              {"TB", 1e12},
                                              {"PB", 1e15},
                                              {"KiB", 1024.0},
                                              {"MiB", 1024.0 * 1024},
                                              {"GiB", 1024.0 * 1024 * 1024},
                                              {"TiB", 1024.0 * 1024 * 1024 * 1024},
                                              {"PiB", 1024.0 * 1024 * 1024 * 1024 * 1024}}};

// Largest double below 2^63: byte counts must fit int64_t after rounding.
constexpr double kMaxBytes = 9.2233720368547748e18;

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && (is_space(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

void set(std::string* why, std::string message) {
  if (why) *why = std::move(message);
}

// A number with an optional unit after it: "1.5ms", "64 MiB", "3".
struct Quantity {
  double value = 0;
  std::string_view unit;  // empty for a bare number
};

// How a quantity is named in messages: `shown` is the text quoted back (the whole input even
// when only a part of it is parsed), `what` its kind ("duration"), `example` a good spelling.
struct Named {
  std::string_view shown;
  std::string_view what;
  std::string_view example;
};

// Splits `text` into a finite, non-negative number and the unit that follows it.
std::optional<Quantity> split_quantity(std::string_view text, const Named& n, std::string* why) {
  std::string_view t = trim(text);
  std::string_view what = n.what, example = n.example;
  if (t.empty()) {
    set(why, fmt::format("empty {}; write a number with a unit, as in {}", what, example));
    return std::nullopt;
  }
  Quantity q;
  const char* begin = t.data();
  const char* end = t.data() + t.size();
  // from_chars takes neither a leading '+' nor "inf"/"nan" spellings we want to hear about.
  auto [ptr, ec] = std::from_chars(begin, end, q.value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) {
    set(why, fmt::format("'{}': {} is too large", n.shown, what));
    return std::nullopt;
  }
  if (ec != std::errc() || ptr == begin) {
    set(why, fmt::format("'{}' is not a {}; write a number with a unit, as in {}", n.shown, what,
                         example));
    return std::nullopt;
  }
  if (!std::isfinite(q.value)) {
    set(why, fmt::format("'{}': a {} must be a finite number", n.shown, what));
    return std::nullopt;
  }
  if (q.value < 0) {
    set(why, fmt::format("'{}': a {} must not be negative", n.shown, what));
    return std::nullopt;
  }
  if (q.value == 0) q.value = 0;  // drops the sign of -0
  q.unit = trim(std::string_view(ptr, static_cast<size_t>(end - ptr)));
  return q;
}

template <size_t N>
std::optional<double> unit_scale(const std::array<Unit, N>& units, std::string_view unit) {
  for (const Unit& u : units)
    if (u.name == unit) return u.scale;
  return std::nullopt;
}

template <size_t N>
std::string unit_list(const std::array<Unit, N>& units) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (units[i].name == "\xC2\xB5s") continue;  // an alias of us
    if (!out.empty()) out += i + 1 == N ? " or " : ", ";
    out += units[i].name;
  }
  return out;
}

template <size_t N>
std::string unknown_unit(const Named& n, std::string_view unit, const std::array<Unit, N>& units) {
  std::vector<std::string> names;
  for (const Unit& u : units) names.emplace_back(u.name);
  std::string word(unit);
  // Case slips ("gib", "MS") are the common mistake; edit distance alone ranks them poorly.
  std::string near;
  for (const auto& n : names)
    if (n.size() == word.size() &&
        std::equal(n.begin(), n.end(), word.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        }))
      near = n;
  if (near.empty()) near = closest_match(word, names);
  std::string out = fmt::format("'{}': unknown {} unit '{}' (expected {})", n.shown, n.what, unit,
                                unit_list(units));
  if (!near.empty()) out += fmt::format("; did you mean '{}'?", near);
  return out;
}

// Parses a byte quantity as a double (no rounding); `*bare` tells whether the text had no unit.
std::optional<double> parse_byte_quantity(std::string_view text, const Named& n, std::string* why,
                                          bool* bare = nullptr) {
  auto q = split_quantity(text, n, why);
  if (!q) return std::nullopt;
  if (bare) *bare = q->unit.empty();
  if (q->unit.empty()) return q->value;
  auto scale = unit_scale(kByteUnits, q->unit);
  if (!scale) {
    set(why, unknown_unit(n, q->unit, kByteUnits));
    return std::nullopt;
  }
  double v = q->value * *scale;
  if (!std::isfinite(v)) {
    set(why, fmt::format("'{}': {} is too large", n.shown, n.what));
    return std::nullopt;
  }
  return v;
}

// Formats `v` with at most `decimals` digits after the point, trailing zeros dropped.
std::string trimmed(double v, int decimals) {
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

}  // namespace

std::optional<double> parse_duration_s(std::string_view text, std::string* why) {
  const Named n{trim(text), "duration", "1.5ms"};
  auto q = split_quantity(text, n, why);
  if (!q) return std::nullopt;
  if (q->unit.empty()) return q->value;
  auto scale = unit_scale(kDurationUnits, q->unit);
  if (!scale) {
    set(why, unknown_unit(n, q->unit, kDurationUnits));
    return std::nullopt;
  }
  return q->value * *scale;
}

std::optional<int64_t> parse_bytes(std::string_view text, std::string* why) {
  bool bare = false;
  auto v = parse_byte_quantity(text, Named{trim(text), "byte count", "64MiB"}, why, &bare);
  if (!v) return std::nullopt;
  if (bare && std::floor(*v) != *v) {
    set(why, fmt::format("'{}': a byte count without a unit must be a whole number", trim(text)));
    return std::nullopt;
  }
  double rounded = std::nearbyint(*v);
  if (rounded > kMaxBytes) {
    set(why, fmt::format("'{}': byte count is too large", trim(text)));
    return std::nullopt;
  }
  return static_cast<int64_t>(rounded);
}

std::optional<double> parse_bandwidth_bytes_per_s(std::string_view text, std::string* why) {
  std::string_view t = trim(text);
  std::string_view body = t;
  bool per_second = false;
  if (body.size() >= 2 && body.substr(body.size() - 2) == "/s") {
    body.remove_suffix(2);
    per_second = true;
  }
  const Named n{t, "bandwidth", "50GB/s"};
  auto q = split_quantity(body, n, why);
  if (!q) return std::nullopt;
  if (!q->unit.empty() && !per_second) {
    if (unit_scale(kByteUnits, q->unit))
      set(why, fmt::format("'{}': a bandwidth is bytes per second; write {}/s", t, t));
    else
      set(why, unknown_unit(n, q->unit, kByteUnits) + " per second, as in 50GB/s");
    return std::nullopt;
  }
  auto v = parse_byte_quantity(body, n, why);
  if (!v) return std::nullopt;
  if (*v <= 0) {
    set(why, fmt::format("'{}': a bandwidth must be greater than zero", t));
    return std::nullopt;
  }
  return v;
}

std::string format_duration(double seconds) {
  if (std::isnan(seconds)) return "nan s";
  if (std::isinf(seconds)) return seconds > 0 ? "inf s" : "-inf s";
  double a = std::fabs(seconds);
  if (a == 0 || a >= 1) return trimmed(seconds, 3) + " s";
  if (a >= 1e-3) return trimmed(seconds * 1e3, 3) + " ms";
  if (a >= 1e-6) return trimmed(seconds * 1e6, 3) + " us";
  return trimmed(seconds * 1e9, 3) + " ns";
}

std::string format_bytes(double bytes) {
  if (std::isnan(bytes)) return "nan B";
  if (std::isinf(bytes)) return bytes > 0 ? "inf B" : "-inf B";
  constexpr std::array<std::string_view, 6> kNames = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double a = std::fabs(bytes);
  size_t k = 0;
  double scale = 1;
  while (k + 1 < kNames.size() && a >= scale * 1024) {
    scale *= 1024;
    ++k;
  }
  return fmt::format("{} {}", trimmed(bytes / scale, 2), kNames[k]);
}

std::string format_count(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many.empty() ? one + "s" : many);
}

std::string RankRun::label() const {
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

std::vector<RankRun> fold_identical_rows(const std::vector<std::string>& rows) {
  std::vector<RankRun> runs;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<int32_t>(i);
    if (!runs.empty() && rows[i] == rows[static_cast<size_t>(runs.back().last)]) runs.back().last = r;
    else runs.push_back(RankRun{r, r});
  }
  return runs;
}

}  // namespace sc
