// Loading a pipeline spec from YAML (spec v1) — the only code besides csv_schedule that reads files.
#pragma once

#include <optional>
#include <string>

#include "spec/pipeline_spec.h"
#include "support/diagnostics.h"

namespace sc {

/// Loads spec v1 from `path` (see specs/README.md and schema/schedcheck.schema.json).
/// Units are parsed (durations s/ms/us/ns, bytes B/KB/MB/GB/KiB/MiB/GiB or a bare integer,
/// bandwidth as bytes per second). Unknown keys (with "did you mean"), wrong types, bad units,
/// unknown stage ids, ranks out of range, microbatches out of range and a missing file are
/// errors with file:line:col in `diags`; all are collected before returning nullopt.
/// `schedule: {csv: FILE}` reads FILE relative to the spec's folder with read_csv_schedule.
/// Costs and memory not given take the unit defaults (apply_unit_defaults).
///
/// With `schedule_optional` (synthesis, which is asked to find the schedule), a spec without a
/// `schedule:` key is a model: its actions are empty, its stages come from `placement` (or
/// `stages`) and `microbatches:` is required.
std::optional<PipelineSpec> load_yaml_spec(const std::string& path, Diagnostics& diags, bool schedule_optional = false);

/// Same, from text already in memory; `name` is used in locations.
std::optional<PipelineSpec> parse_yaml_spec(const std::string& name, const std::string& text,
                                            Diagnostics& diags);

}  // namespace sc
