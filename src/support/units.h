// Parsing of quantities with units in specs: durations, byte counts and bandwidths.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sc {

/// Parses a duration: a number followed by one of `s ms us ns` (optional spaces between), or a
/// bare number meaning seconds. Returns seconds, or nullopt (with `*why` set) on a bad unit, a
/// negative value, a non-finite value or trailing junk. Example: "1.5ms" -> 0.0015.
std::optional<double> parse_duration_s(std::string_view text, std::string* why = nullptr);

/// Parses a byte count: a bare non-negative integer, or a number with one of
/// `B KB MB GB TB` (powers of 1000) or `KiB MiB GiB TiB` (powers of 1024). Fractions are allowed
/// with a unit ("0.5GiB") and rounded to the nearest byte. Errors as parse_duration_s.
std::optional<int64_t> parse_bytes(std::string_view text, std::string* why = nullptr);

/// Parses a bandwidth in bytes per second: a byte quantity followed by "/s" ("50GB/s",
/// "12.5 GiB/s"), or a bare number of bytes per second. Must be > 0.
std::optional<double> parse_bandwidth_bytes_per_s(std::string_view text, std::string* why = nullptr);

/// Formats seconds for people with a fitting unit ("1.5 ms", "27 s").
std::string format_duration(double seconds);

/// Formats bytes for people ("2 GiB", "1.5 MiB", "17 B").
std::string format_bytes(double bytes);

/// A count with its noun in the number it needs: "1 rank", "4 ranks", "1 microbatch",
/// "8 microbatches". `many` defaults to `one` + "s".
std::string format_count(int64_t n, const std::string& one, const std::string& many = "");

/// A run of consecutive ranks [first, last] whose report rows are identical.
struct RankRun {
  int32_t first = 0, last = 0;
  int32_t count() const { return last - first + 1; }
  /// "5", or "0-63" for a run of more than one rank.
  std::string label() const;
};

/// Folds `rows` (one formatted row per rank, rank i at index i, without the rank's own column)
/// into runs of consecutive identical rows, in rank order: data-parallel replicas, which are
/// images of each other, print as one line, so a report of 16,384 ranks stays readable. A rank
/// whose row differs from its neighbours' keeps a line of its own.
std::vector<RankRun> fold_identical_rows(const std::vector<std::string>& rows);

}  // namespace sc
