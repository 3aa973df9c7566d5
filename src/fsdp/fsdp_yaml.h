// Loading `fsdp:` specs (FSDP1, FSDP2 and ZeRO-3 gather/free schedules) from YAML, with located
// diagnostics. Key reference: specs/fsdp.md; semantics: docs/facts/fsdp-zero.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fsdp/fsdp_spec.h"
#include "support/diagnostics.h"

namespace sc {

/// Limits that keep a mistaken or hostile spec from exhausting memory or time; far above any real
/// FSDP job. Each is reported as a located error, never a crash or an overflow.
inline constexpr int kMaxFsdpRanks = 1 << 16;                 ///< ranks: 1 .. 65536
inline constexpr int64_t kMaxFsdpUnits = 100'000;             ///< units after `repeat` is expanded
inline constexpr int64_t kMaxFsdpRepeat = 100'000;            ///< one unit's `repeat`: 1 .. 100000
inline constexpr int64_t kMaxFsdpRankUnits = 100'000'000;     ///< ranks x expanded units
inline constexpr int64_t kMaxFsdpBytes = int64_t{1} << 62;    ///< any byte value and any byte sum
inline constexpr double kMaxFsdpSeconds = 1e12;               ///< any duration
inline constexpr int kMaxFsdpIterations = 8;                  ///< iterations: 1 .. 8
inline constexpr int kMaxFsdpMicrobatches = 1 << 20;          ///< microbatches: 1 .. 2^20

/// True when `path` is a .yaml/.yml regular file (at most 256 MiB) whose top level has an `fsdp:`
/// key, or, when the YAML is broken, one of whose lines starts with `fsdp:` (so its errors come
/// from the fsdp loader). False for anything unreadable; never throws.
bool is_fsdp_spec(const std::string& path);

/// Loads an fsdp spec from a file (read as a regular file of at most 256 MiB).
///
/// Shape: `schedcheck: 1` (required), `name` (default: the file stem), `ranks` (required,
/// 1..65536), `memory: {limit_bytes}` (optional), and `fsdp:` with implementation (fsdp1 |
/// fsdp2 | zero3, default fsdp2), shard_size / replicate_size (shard_size x replicate_size ==
/// ranks), dtypes {param, reduce}, link {bandwidth (required, > 0), latency, model: ring |
/// alpha-beta}, microbatches, iterations (1..8), optimizer, units (required, non-empty),
/// options (per implementation), ranks_override and programs. Units in the result: bytes,
/// seconds, bytes per second. `repeat: N` units are expanded to "name.0" .. "name.N-1"; a unit
/// given as `params: 525M` (a parameter count) gets params_bytes = count x the param dtype size.
///
/// Errors, each at file:line:col in `diags` and all collected before returning nullopt: an
/// unreadable file, invalid YAML, a missing or wrong version, unknown keys (with "did you
/// mean"), duplicate keys, wrong types, values out of range (the kMaxFsdp* limits, negative
/// bytes or times), an option of another implementation ("limit_all_gathers is an fsdp1
/// option; this spec uses fsdp2"), duplicate expanded unit names, references to units, ranks or
/// program ids that do not exist (with "did you mean"), and shard_size x replicate_size != ranks.
std::optional<FsdpSpec> load_fsdp_spec(const std::string& path, Diagnostics& diags);

/// Same as load_fsdp_spec, from text already in memory; `name` is used in locations and its stem
/// is the default spec name.
std::optional<FsdpSpec> parse_fsdp_spec(const std::string& name, const std::string& text, Diagnostics& diags);

}  // namespace sc
