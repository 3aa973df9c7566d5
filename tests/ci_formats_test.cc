// CI formats of `schedcheck verify`: SARIF (validated against the official SARIF 2.1.0 schema),
// GitHub annotations, JUnit XML, the versioned JSON report (validated against
// schema/report.schema.json), the pre-commit hook and the GitHub workflow example.
// SCHEDCHECK_UPDATE_GOLDEN=1 rewrites the goldens used here (review a regeneration like code).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "report/ci_report.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using sc::test::run_schedcheck;

/// Exit code and output of a shell command (standard error merged).
sc::test::CliRun shell(const std::string& cmd) {
  sc::test::CliRun r;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// Validates `files` against `schema` with python3-jsonschema; false (with a warning) when the
/// checker cannot run (no python3 or jsonschema), so the test skips that part cleanly.
bool validate_json(const std::string& schema, const std::vector<std::string>& files) {
  std::string cmd = "python3 '" + sc::test::source_path("tests/schema_check.py") + "' '" + sc::test::source_path(schema) + "'";
  for (const auto& f : files) cmd += " '" + f + "'";
  auto r = shell(cmd);
  if (r.exit_code == 77 || r.exit_code == 127) {
    WARN("schema validation skipped (needs python3 with jsonschema and yaml): " << r.out);
    return false;
  }
  INFO(r.out);
  CHECK(r.exit_code == 0);
  return true;
}

std::string temp(const std::string& name) { return (fs::temp_directory_path() / ("schedcheck_ci_" + name)).string(); }

void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = sc::test::source_path("tests/golden/" + name);
  if (std::getenv("SCHEDCHECK_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << actual;
    WARN("rewrote " << path);
    return;
  }
  REQUIRE(fs::exists(path));
  CHECK(sc::test::read_file(path) == actual);
}

/// `j` without wall-clock figures (any key holding "seconds"), for golden comparison.
json stable(json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      if (it.key().find("seconds") != std::string::npos) it = j.erase(it);
      else {
        *it = stable(*it);
        ++it;
      }
    }
  } else if (j.is_array()) {
    for (auto& x : j) x = stable(x);
  }
  return j;
}

const char* kDeadlock = "examples/interleaved-rendezvous-deadlock.yaml";

/// Router examples whose proofs take several seconds each: the full run over every file checks
/// them once (JSON and JUnit); the other formats leave them out to keep the suite quick.
bool is_slow(const std::string& path) {
  for (const char* slow : {"router-expert-choice", "router-megatron-probs", "router-megatron-position",
                           "router-deepspeed-top1", "router-sequence-position"})
    if (path.find(slow) != std::string::npos) return true;
  return false;
}
const char* kHolds = "examples/llama7b-pp8-1f1b.yaml";

}  // namespace

TEST_CASE("verify --format sarif locates each finding, relates the counterexample's ops and validates against SARIF 2.1.0",
          "[cli][ci]") {
  const std::string bad = sc::test::write_temp("schedcheck_ci", "bad.yaml", "schedcheck: 1\nranks: two\n");
  auto r = run_schedcheck(std::string("verify ") + kDeadlock + " " + kHolds + " '" + bad + "' --format sarif", false);
  CHECK(r.exit_code == 10);  // deadlock (11), holds (0) and a spec error (2)
  const json log = json::parse(r.out);
  CHECK(log["version"] == "2.1.0");
  REQUIRE(log["runs"].size() == 1);
  const json& run = log["runs"][0];
  CHECK(run["tool"]["driver"]["name"] == "schedcheck");
  bool deadlock_rule = false;
  for (const auto& rule : run["tool"]["driver"]["rules"])
    if (rule["id"] == "deadlock") deadlock_rule = !rule["help"]["text"].get<std::string>().empty();
  CHECK(deadlock_rule);
  CHECK(run["invocations"][0]["exitCode"] == 10);
  bool deadlock = false, spec_error = false;
  for (const auto& res : run["results"]) {
    const json& loc = res["locations"][0]["physicalLocation"];
    if (res["ruleId"] == "deadlock") {
      deadlock = true;
      CHECK(loc["artifactLocation"]["uri"] == kDeadlock);
      CHECK(loc["region"]["startLine"].get<int>() > 1);
      CHECK(loc["region"]["startColumn"].get<int>() >= 1);
      REQUIRE(res.contains("relatedLocations"));
      CHECK(res["relatedLocations"][0]["message"]["text"].get<std::string>().find("SEND") != std::string::npos);
      CHECK(res["partialFingerprints"]["schedcheckFindingHash/v1"].get<std::string>().size() == 16);
      CHECK(res["message"]["text"].get<std::string>().find("deadlock under rendezvous semantics") != std::string::npos);
    }
    if (res["ruleId"] == "spec-error" && loc["region"]["startLine"] == 2) {  // "ranks: two"
      spec_error = true;
      CHECK(loc["region"]["startColumn"] == 8);
      CHECK(res["message"]["text"] == "ranks must be a whole number, got 'two'");
    }
  }
  CHECK(deadlock);
  CHECK(spec_error);
  const std::string out = temp("mixed.sarif");
  sc::test::write_file(out, r.out);
  validate_json("schema/vendor/sarif-schema-2.1.0.json", {out});

  auto one = run_schedcheck(std::string("verify ") + kDeadlock + " --format sarif", false);
  check_golden("interleaved-rendezvous-deadlock.sarif", one.out);
}

TEST_CASE("SARIF fingerprints stay the same when an edit elsewhere moves a finding's lines", "[cli][ci]") {
  const std::string text = sc::test::read_file(sc::test::source_path(kDeadlock));
  const std::string path = sc::test::write_temp("schedcheck_ci", "fingerprint.yaml", text);
  auto before = json::parse(run_schedcheck("verify '" + path + "' --format sarif", false).out);
  sc::test::write_file(path, "# a comment\n# another\n" + text);
  auto after = json::parse(run_schedcheck("verify '" + path + "' --format sarif", false).out);
  REQUIRE(!before["runs"][0]["results"].empty());
  const json& a = before["runs"][0]["results"][0];
  const json& b = after["runs"][0]["results"][0];
  CHECK(a["locations"][0]["physicalLocation"]["region"]["startLine"].get<int>() + 2 ==
        b["locations"][0]["physicalLocation"]["region"]["startLine"].get<int>());
  CHECK(a["partialFingerprints"] == b["partialFingerprints"]);
}

TEST_CASE("verify --format github annotates each finding at its line, escaped, with a summary line", "[cli][ci]") {
  auto r = run_schedcheck(std::string("verify ") + kDeadlock + " " + kHolds + " --format github", false);
  CHECK(r.exit_code == 11);
  CHECK(r.out.rfind(std::string("::error file=") + kDeadlock + ",line=", 0) == 0);
  CHECK(r.out.find(",title=schedcheck deadlock::deadlock under rendezvous semantics") != std::string::npos);
  CHECK(r.out.find("%0A") != std::string::npos);  // the located ops follow on escaped new lines
  CHECK(r.out.find("schedcheck: 2 files, 1 hold, 1 violated; 1 finding (exit 11)\n") != std::string::npos);
  // A file that cannot be checked is counted "in error".
  const std::string bad = sc::test::write_temp("schedcheck-ci-formats", "github-bad.csv", "0F0,0X0\n");
  auto e = run_schedcheck(std::string("verify ") + kHolds + " '" + bad + "' --format github", false);
  CHECK(e.out.find("schedcheck: 2 files, 1 hold, 1 in error; ") != std::string::npos);
  CHECK(sc::github_escape("50% a:b,c\r\nd", true) == "50%25 a%3Ab%2Cc%0D%0Ad");
  CHECK(sc::github_escape("50% a:b,c\r\nd", false) == "50%25 a:b,c%0D%0Ad");
}

TEST_CASE("github annotations stop at the cap and say how many were left out", "[ci]") {
  json records = json::array();
  json findings = json::array();
  for (int i = 0; i < 7; ++i)
    findings.push_back({{"kind", "memory"}, {"message", "m" + std::to_string(i)}, {"ranks", {i}}, {"ops", json::array()},
                        {"locations", json::array()}});
  records.push_back({{"path", "a.yaml"}, {"verdict", "violated"}, {"exit_code", 13}, {"findings", findings}});
  const std::string out = sc::github_annotations(records, 13, 5);
  size_t errors = 0;
  for (size_t p = out.find("::error "); p != std::string::npos; p = out.find("::error ", p + 1)) ++errors;
  CHECK(errors == 5);
  CHECK(out.find("::warning::schedcheck: 2 more findings not annotated (at most 5 per run)") != std::string::npos);
  CHECK(out.find("::error file=a.yaml,title=schedcheck memory::m0\n") != std::string::npos);
}

TEST_CASE("verify --junit writes a test case per file and property that a JUnit consumer accepts", "[cli][ci]") {
  const std::string xml = temp("report.xml");
  fs::remove(xml);
  auto r = run_schedcheck(std::string("verify ") + kDeadlock + " " + kHolds +
                              " examples/router-mixtral-dropless.yaml --junit '" + xml + "'");
  CHECK(r.exit_code == 11);
  CHECK(r.out.find("examples/llama7b-pp8-1f1b.yaml: holds (exit 0)") != std::string::npos);  // text as usual
  REQUIRE(fs::exists(xml));
  const std::string text = sc::test::read_file(xml);
  CHECK(text.find("<testcase classname=\"examples/interleaved-rendezvous-deadlock.yaml\" name=\"deadlock\"") !=
        std::string::npos);
  CHECK(text.find("<failure message=\"examples/interleaved-rendezvous-deadlock.yaml:") != std::string::npos);
  CHECK(text.find("<testcase classname=\"examples/llama7b-pp8-1f1b.yaml\" name=\"memory\" time=\"0\"/>") !=
        std::string::npos);
  auto check = shell("python3 '" + sc::test::source_path("tests/junit_check.py") + "' '" + xml + "'");
  if (check.exit_code == 127) {
    SC_SKIP("JUnit check skipped (needs python3)");
  }
  INFO(check.out);
  CHECK(check.exit_code == 0);
  CHECK(check.out.find("testsuites=3 ") != std::string::npos);
  CHECK(check.out.find(" failures=1 errors=0") != std::string::npos);
}

TEST_CASE("verify --junit may not name the file of another output or an input", "[cli][ci]") {
  const std::string out = temp("both.xml");
  fs::remove(out);
  auto r = run_schedcheck(std::string("verify ") + kHolds + " --junit '" + out + "' --trace '" + out + "'");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("--trace and --junit name the same file") != std::string::npos);
  CHECK_FALSE(fs::exists(out));  // nothing written
  r = run_schedcheck(std::string("verify ") + kHolds + " --junit " + kHolds);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find(std::string("--junit ") + kHolds + " would overwrite the input file") != std::string::npos);
}

TEST_CASE("every JSON report carries schema_version and validates against schema/report.schema.json", "[cli][ci][schema]") {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(sc::test::source_path("tests/golden")))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  REQUIRE(!files.empty());
  auto mixed = run_schedcheck(std::string("verify ") + kDeadlock + " " + kHolds +
                                  " examples/fsdp2-llama3-8b.yaml examples/router-mixtral-dropless.yaml --format json",
                              false);
  CHECK(mixed.exit_code == 11);
  json list = json::parse(mixed.out);
  REQUIRE(list.size() == 4);
  for (const auto& j : list) {
    CHECK(j["schema_version"] == 1);
    CHECK(j["schedcheck_version"].is_string());
  }
  check_golden("verify-mixed.json", stable(list).dump(2) + "\n");
  const std::string err = sc::test::write_temp("schedcheck_ci", "err.yaml", "schedcheck: 1\nranks: -1\n");
  auto error = run_schedcheck("verify '" + err + "' --format json", false);
  CHECK(error.exit_code == 2);
  CHECK(json::parse(error.out)["schema_version"] == 1);
  sc::test::write_file(temp("error.json"), error.out);
  files.push_back(temp("error.json"));
  // diff and budget reports follow the same schema.
  auto diff = run_schedcheck("diff examples/gpu-1f1b-p4-m8.yaml examples/gpu-zbh1-p4-m8.yaml --format json", false);
  sc::test::write_file(temp("diff.json"), diff.out);
  files.push_back(temp("diff.json"));
  auto budget = run_schedcheck("verify specs/valid/budget-gpipe-2.yaml " + std::string(kHolds) +
                                   " --budget span=1s --format json",
                               false);
  CHECK(budget.exit_code == 18);
  sc::test::write_file(temp("budget.json"), budget.out);
  files.push_back(temp("budget.json"));
  // A framework config's report adds its job.
  auto config = run_schedcheck("verify examples/torchtitan-llama3-8b-pp2.toml --format json", false);
  CHECK(config.exit_code == 0);
  CHECK(json::parse(config.out)["job"]["framework"] == "torchtitan");
  sc::test::write_file(temp("config.json"), config.out);
  files.push_back(temp("config.json"));
  // A numerics finding's report carries the usual fixes (numerics_fixes).
  const std::string numerics = sc::test::write_temp(
      "schedcheck_ci", "numerics.yaml",
      "schedcheck: 1\nranks: 64\nnumerics: {max_relative_error: 1e-3, max_bias: 1e-3}\n"
      "fsdp:\n  implementation: fsdp2\n  shard_size: 64\n  dtypes: {param: bf16, reduce: bf16}\n"
      "  link: {bandwidth: 450GB/s, latency: 10us}\n  iterations: 1\n"
      "  units:\n    - {name: layer, params: 218M, forward: 3.6ms, backward: 7.2ms, activation_bytes: 432MiB}\n");
  auto num = run_schedcheck("verify '" + numerics + "' --format json", false);
  CHECK(num.exit_code == 17);
  CHECK(json::parse(num.out)["numerics_fixes"].size() == 1);
  sc::test::write_file(temp("numerics.json"), num.out);
  files.push_back(temp("numerics.json"));
  validate_json("schema/report.schema.json", files);
}

TEST_CASE("the pre-commit hook's command line checks the examples as pre-commit runs it", "[cli][ci]") {
  const std::string hooks = sc::test::read_file(sc::test::source_path(".pre-commit-hooks.yaml"));
  REQUIRE(!hooks.empty());
  std::smatch m;
  REQUIRE(std::regex_search(hooks, m, std::regex("\\n  entry: *([^\\n]+)")));
  std::string entry = m[1];
  REQUIRE(entry.rfind("schedcheck ", 0) == 0);
  REQUIRE(std::regex_search(hooks, m, std::regex("\\n  files: *'([^']+)'")));
  const std::regex files(m[1].str());
  // pre-commit passes the staged files that match `files`, appended to the entry.
  std::string args;
  std::vector<std::string> matched;
  for (const char* dir : {"examples", "specs/valid"})
    for (const auto& e : fs::directory_iterator(sc::test::source_path(dir))) {
      const std::string rel = std::string(dir) + "/" + e.path().filename().string();
      if (!std::regex_search(rel, files) || is_slow(rel)) continue;
      args += " " + rel;
      matched.push_back(rel);
    }
  REQUIRE(matched.size() >= 15);
  CHECK(!std::regex_search(std::string("README.md"), files));
  // Training configs too: torchtitan TOML, Megatron-LM scripts, DeepSpeed JSON.
  for (const char* config : {"configs/train.toml", "specs/pretrain.sh", "configs/ds_config.json"})
    CHECK(std::regex_search(std::string(config), files));
  CHECK(!std::regex_search(std::string("docs/ci/schedcheck.yml"), files));
  auto all = run_schedcheck(entry.substr(std::string("schedcheck ").size()) + args, false);
  CHECK(all.exit_code == 10);  // the examples include deadlocks, memory and router violations
  for (const auto& f : matched) CHECK(all.out.find(f + ": ") != std::string::npos);
  auto ok = run_schedcheck(entry.substr(std::string("schedcheck ").size()) + " " + kHolds + " specs/valid/minimal.yaml", false);
  CHECK(ok.exit_code == 0);
  auto fails = run_schedcheck(entry.substr(std::string("schedcheck ").size()) + " " + kDeadlock, false);
  CHECK(fails.exit_code == 11);
  CHECK(fails.out.find("VIOLATED: deadlock") != std::string::npos);
}

TEST_CASE("the GitHub workflow example runs schedcheck verify with SARIF upload and the diff gate", "[ci]") {
  const std::string wf = sc::test::read_file(sc::test::source_path("docs/ci/schedcheck.yml"));
  REQUIRE(!wf.empty());
  CHECK(wf.find("schedcheck verify") != std::string::npos);
  CHECK(wf.find("--format sarif") != std::string::npos);
  CHECK(wf.find("github/codeql-action/upload-sarif") != std::string::npos);
  CHECK(wf.find("schedcheck diff --git") != std::string::npos);
  // The comparison is posted also when verify found something (its step failed).
  const size_t compare = wf.find("name: Compare with the base branch");
  REQUIRE(compare != std::string::npos);
  CHECK(wf.substr(compare, wf.find('\n', wf.find("if:", compare)) - compare).find("if: always()") != std::string::npos);
  auto parsed = shell("python3 -c \"import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); "
                      "assert 'jobs' in d and 'on' in d or True in d, d.keys(); print('ok')\" '" +
                      sc::test::source_path("docs/ci/schedcheck.yml") + "'");
  if (parsed.exit_code == 127 || parsed.out.find("No module named") != std::string::npos) {
    SC_SKIP("workflow YAML check skipped (needs python3-yaml)");
  }
  INFO(parsed.out);
  CHECK(parsed.exit_code == 0);
}

TEST_CASE("verify checks examples, valid specs and the PyTorch corpus each with its own result in every format",
          "[cli][ci]") {
  std::string args, quick;  // every file; every file but the slow router proofs
  size_t n = 0, n_quick = 0;
  for (const char* dir : {"examples", "specs/valid"})
    for (const auto& e : fs::directory_iterator(sc::test::source_path(dir))) {
      const std::string name = e.path().filename().string();
      args += std::string(" ") + dir + "/" + name;
      ++n;
      if (!is_slow(name)) {
        quick += std::string(" ") + dir + "/" + name;
        ++n_quick;
      }
    }
  const std::string corpus = sc::test::corpus_dir();
  if (!corpus.empty() && fs::is_directory(corpus + "/pytorch"))
    for (const auto& e : fs::directory_iterator(corpus + "/pytorch")) {
      args += " '" + e.path().string() + "'";
      quick += " '" + e.path().string() + "'";
      ++n;
      ++n_quick;
    }
  else
    WARN("the shared PyTorch corpus is absent; checking the bundled files only");
  const std::string xml = temp("all.xml");
  auto j = run_schedcheck("verify" + args + " --format json --junit '" + xml + "'", false);
  json list = json::parse(j.out);
  REQUIRE(list.size() == n);
  for (const auto& rec : list) {
    CHECK(rec.contains("path"));
    CHECK(rec.contains("verdict"));
  }
  CHECK(j.exit_code == 10);
  auto sarif_run = run_schedcheck("verify" + quick + " --format sarif", false);
  auto sarif = json::parse(sarif_run.out);
  CHECK(sarif["runs"][0]["artifacts"].size() == n_quick);
  const std::string sarif_file = temp("all.sarif");
  sc::test::write_file(sarif_file, sarif_run.out);
  validate_json("schema/vendor/sarif-schema-2.1.0.json", {sarif_file});
  auto gh = run_schedcheck("verify" + quick + " --format github", false);
  CHECK(gh.out.find("schedcheck: " + std::to_string(n_quick) + " files") != std::string::npos);
  CHECK(gh.exit_code == 10);
  auto junit = shell("python3 '" + sc::test::source_path("tests/junit_check.py") + "' '" + xml + "'");
  if (junit.exit_code != 127) CHECK(junit.out.find("testsuites=" + std::to_string(n) + " ") != std::string::npos);
}
