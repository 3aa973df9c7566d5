// The tool's version and the version of its JSON report format (schema/report.schema.json).
#pragma once

namespace sc {

/// schedcheck's release version (semantic versioning), as `schedcheck --version` prints it.
inline constexpr const char* kToolVersion = "0.1.0";

/// Version of the JSON report layout described by schema/report.schema.json. Raised when a key
/// is removed or changes meaning; adding keys keeps it. Every JSON report object carries it as
/// `schema_version`, next to `schedcheck_version` (kToolVersion).
inline constexpr int kReportSchemaVersion = 1;

}  // namespace sc
