// The front-end table is the one place a kind of input plugs in: a toy front-end registered
// here is detected, verified and rendered by `verify` in every format (text, JSON, SARIF,
// GitHub annotations, JUnit), with budgets and mixed files, as the built-in ones are.
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/frontends.h"
#include "pipeline/named_schedule.h"
#include "pipeline/verify_pipeline.h"
#include "report/report.h"
#include "spec/yaml_spec.h"
#include "support/diagnostics.h"
#include "support/source.h"
#include "test_util.h"

namespace {

using nlohmann::json;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool is_toy(const std::string& path) { return std::filesystem::path(path).extension() == ".toy"; }

/// A toy input: one line "NAME RANKS MICROBATCHES" (a named schedule with 1 ms forwards and 2 ms
/// backwards). Anything else is a located error at line 1.
int run_toy(const std::vector<std::string>& files, const sc::cli::VerifyRequest&, sc::cli::ReportSink& sink) {
  int exit = 0;
  for (const std::string& f : files) {
    const std::string text = sc::test::read_file(f);
    std::istringstream in(text);
    std::string name;
    int ranks = 0, microbatches = 0;
    sc::Diagnostics d;
    if (!(in >> name >> ranks >> microbatches)) {
      d.error(sc::SourceLoc{sc::register_source(f, text), 1, 1}, "a toy file is one line: NAME RANKS MICROBATCHES");
      sink.add(sc::cli::diagnostics_value(d));
      exit = sc::cli::combine_exit(exit, sc::cli::report_spec_errors(d));
      continue;
    }
    const std::string yaml = "schedcheck: 1\nname: toy\nranks: " + std::to_string(ranks) + "\nmicrobatches: " +
                             std::to_string(microbatches) + "\nschedule: {name: " + name + "}\ncosts: {F: 1ms, B: 2ms}\n";
    auto spec = sc::parse_yaml_spec(f, yaml, d);
    REQUIRE(spec);
    REQUIRE(sc::resolve_named_schedule(*spec, d));
    sc::VerifyResult r = sc::verify(*spec, sc::VerifyOptions{});
    exit = sc::cli::combine_exit(exit, r.exit_code);
    sink.add(sc::json_report_value(r));
    if (sink.wants_text()) sc::write_text_report(sink.text(), r, 0);
  }
  return exit;
}

/// `schedcheck ARGS...` in this process: exit code and standard output.
std::pair<int, std::string> cli(std::vector<std::string> args) {
  args.insert(args.begin(), "schedcheck");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out;
  std::streambuf* old = std::cout.rdbuf(out.rdbuf());  // the test reads what the command prints
  const int code = sc::cli::run_cli(static_cast<int>(argv.size()), argv.data());
  std::cout.rdbuf(old);
  return {code, out.str()};
}

void register_toy_once() {
  static bool done = false;
  if (done) return;
  done = true;
  sc::cli::register_front_end({"toy", "toy files (.toy)", is_toy, {"--budget"}, run_toy});
}

}  // namespace

TEST_CASE("a registered front-end is verified and rendered in every format", "[cli][frontends]") {
  register_toy_once();
  const std::string good = sc::test::write_temp("schedcheck-toy", "good.toy", "1f1b 4 8\n");
  const std::string bad = sc::test::write_temp("schedcheck-toy", "bad.toy", "nonsense\n");
  CHECK(std::string(sc::cli::front_end_for(good).name) == "toy");

  // 1F1B at p = 4, m = 8, F = 1 ms, B = 2 ms: (m + p - 1)(F + B) = 33 ms, bubble 9/33.
  auto [text_code, text] = cli({"verify", good});
  CHECK(text_code == 0);
  CHECK(has(text, "span 33 ms"));

  auto [json_code, json_out] = cli({"verify", good, "--format", "json"});
  CHECK(json_code == 0);
  const json j = json::parse(json_out);
  CHECK(j["verdict"] == "holds");
  CHECK(j["timing"]["span"].get<double>() == Approx(0.033));

  auto [sarif_code, sarif] = cli({"verify", good, bad, "--format", "sarif"});
  CHECK(sarif_code == 2);
  const json s = json::parse(sarif);
  REQUIRE(s["runs"][0]["results"].size() == 1);  // the bad file's error; the good file holds
  CHECK(s["runs"][0]["results"][0]["ruleId"] == "spec-error");

  auto [gh_code, gh] = cli({"verify", good, bad, "--format", "github"});
  CHECK(gh_code == 2);
  CHECK(has(gh, "::error file=" + bad + ",line=1,col=1,title=schedcheck spec-error::a toy file is one line"));
  CHECK(has(gh, "schedcheck: 2 files"));

  const std::string junit = (std::filesystem::temp_directory_path() / "schedcheck-toy" / "toy.xml").string();
  auto [ju_code, ju] = cli({"verify", good, "--junit", junit});
  CHECK(ju_code == 0);
  CHECK(has(sc::test::read_file(junit), "<testsuite name=\"" + good + "\""));

  // Budgets apply to its figures: the bubble rate 9/33 = 27.3% exceeds 10%.
  auto [b_code, b] = cli({"verify", good, "--budget", "bubble_rate=10%", "--format", "json"});
  CHECK(b_code == 18);
  CHECK(json::parse(b)["budgets"][0]["exceeded"] == true);

  // Mixed with a built-in front-end: one list, one entry per file.
  auto [m_code, m] = cli({"verify", good, sc::test::source_path("examples/llama7b-pp8-1f1b.yaml"), bad, "--format", "json"});
  CHECK(m_code == 2);
  const json list = json::parse(m);
  REQUIRE(list.size() == 3);
  CHECK(list[0]["verdict"] == "holds");
  CHECK(list[1]["verdict"] == "holds");
  CHECK(list[2]["verdict"] == "error");
  CHECK(list[2]["path"] == bad);
}
