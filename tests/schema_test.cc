// The JSON Schema covers every kind of spec: each example, valid spec and reference spec validates.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "catch.h"
#include "test_util.h"

namespace sc {

TEST_CASE("every example, valid and reference spec validates against the JSON Schema", "[spec][schema]") {
  std::string cmd = "python3 '" + test::source_path("tests/schema_check.py") + "' '" +
                    test::source_path("schema/schedcheck.schema.json") + "'";
  size_t files = 0;
  for (const char* dir : {"examples", "specs/valid", "specs/reference"}) {
    if (!std::filesystem::is_directory(test::source_path(dir))) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(test::source_path(dir)))
      if (e.path().extension() == ".yaml") {
        cmd += " '" + e.path().string() + "'";
        ++files;
      }
  }
  REQUIRE(files > 0);
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 77 || code == 127) {
    SC_SKIP("schema check skipped (needs python3 with jsonschema and yaml): " << out);
  }
  INFO(out);
  CHECK(code == 0);
}

}  // namespace sc
