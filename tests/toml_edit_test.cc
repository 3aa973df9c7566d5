// config::edit_toml_table: keys replaced, added and removed as text, every other byte kept.
#include <string>

#include "catch.h"
#include "config/toml_edit.h"

using sc::config::edit_toml_table;
using sc::config::TomlKeyEdit;

namespace {

const std::string kConfig =
    "# NOTE: this toml config is a preset for 64 A100 GPUs.\n"
    "[optimizer]\n"
    "lr = 3e-4  # kept as written\n"
    "\n"
    "[parallelism]\n"
    "pipeline_parallel_degree = 2\n"
    "pipeline_parallel_schedule = \"Interleaved1F1B\"  # the schedule\n"
    "pipeline_parallel_layers_per_stage = 4\n"
    "\n"
    "[parallelism.extra]\n"
    "x = 1\n"
    "\n"
    "[training]\n"
    "steps = 10\n";

}  // namespace

TEST_CASE("edit_toml_table replaces a value where it stands and keeps its comment", "[config][toml]") {
  std::string why;
  auto out = edit_toml_table(kConfig, "parallelism", {{"pipeline_parallel_schedule", "\"ZBVZeroBubble\""}}, &why);
  REQUIRE(out);
  std::string expected = kConfig;
  expected.replace(expected.find("\"Interleaved1F1B\""), 17, "\"ZBVZeroBubble\"");
  CHECK(*out == expected);
}

TEST_CASE("edit_toml_table adds a key after the table's last own key, not inside a sub-table", "[config][toml]") {
  std::string why;
  auto out = edit_toml_table(kConfig, "parallelism",
                             {{"pipeline_parallel_schedule_csv", "\"synth.csv\""}, {"pipeline_parallel_layers_per_stage", std::nullopt}},
                             &why);
  REQUIRE(out);
  std::string expected = kConfig;
  expected.replace(expected.find("pipeline_parallel_layers_per_stage = 4\n"), 39,
                   "pipeline_parallel_schedule_csv = \"synth.csv\"\n");
  CHECK(*out == expected);
}

TEST_CASE("edit_toml_table creates the table at the end, keeps CRLF, and refuses what it cannot edit as text",
          "[config][toml]") {
  std::string why;
  auto added = edit_toml_table("[training]\r\nsteps = 10\r\n", "parallelism", {{"pipeline_parallel_degree", "4"}}, &why);
  REQUIRE(added);
  CHECK(*added == "[training]\r\nsteps = 10\r\n\r\n[parallelism]\r\npipeline_parallel_degree = 4\r\n");
  // Removing an absent key changes nothing.
  auto same = edit_toml_table(kConfig, "parallelism", {{"pipeline_parallel_schedule_csv", std::nullopt}}, &why);
  REQUIRE(same);
  CHECK(*same == kConfig);

  CHECK_FALSE(edit_toml_table("parallelism = {pipeline_parallel_degree = 2}\n", "parallelism",
                              {{"pipeline_parallel_degree", "4"}}, &why));
  CHECK(why == "[parallelism] is written as an inline table; set its keys by hand");
  CHECK_FALSE(edit_toml_table("parallelism.pipeline_parallel_degree = 2\n", "parallelism",
                              {{"pipeline_parallel_degree", "4"}}, &why));
  CHECK(why == "[parallelism] is set with dotted keys, not a [parallelism] section; set its keys by hand");
  CHECK_FALSE(edit_toml_table("[parallelism]\nfilter = [\n  \"a\",\n]\n", "parallelism", {{"filter", "[]"}}, &why));
  CHECK(why == "parallelism.filter spans several lines; set it by hand");
  CHECK_FALSE(edit_toml_table("[parallelism\n", "parallelism", {{"a", "1"}}, &why));
  CHECK(why.rfind("the config does not parse: ", 0) == 0);
}

TEST_CASE("toml_string_literal escapes quotes, backslashes and control characters", "[config][toml]") {
  CHECK(sc::config::toml_string_literal("a\"b\\c\n\x01") == "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST_CASE("edit_toml_table and changed_keys count toml++'s columns in code points, not bytes", "[config][toml]") {
  // A value after multi-byte characters on its line: replaced and read back whole.
  const std::string text = "[parallelism]\npipeline_parallel_schedule_csv = \"ordre-\u00e9t\u00e9 \u2013 v2.csv\"  # r\u00e9sum\u00e9\n";
  std::string why;
  auto out = edit_toml_table(text, "parallelism", {{"pipeline_parallel_schedule_csv", "\"s.csv\""}}, &why);
  REQUIRE(out);
  CHECK(*out == "[parallelism]\npipeline_parallel_schedule_csv = \"s.csv\"  # r\u00e9sum\u00e9\n");
  CHECK(sc::config::toml_column_to_byte("a\u00e9b", 3) == 3);  // 'b': after a 2-byte character
}
