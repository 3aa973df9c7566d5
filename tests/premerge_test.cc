// The pre-merge check over many files: a file in error is one result and never hides the others,
// a verdict that stops holding fails `diff` by default, thresholds carry their unit, and
// `diff --git` on a fixture repository built here.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "test_util.h"

namespace {

using nlohmann::json;
using sc::test::CliRun;
namespace fs = std::filesystem;

/// Runs `command` (a shell line) in `dir`; standard error merged unless `merge_stderr` is false.
CliRun run_in(const std::string& dir, const std::string& command, bool merge_stderr = true) {
  const std::string cmd = "cd '" + dir + "' && " + command + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CliRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// `schedcheck ARGS` run in `dir`.
CliRun schedcheck_in(const std::string& dir, const std::string& args, bool merge_stderr = true) {
  return run_in(dir, "'" + std::string(SCHEDCHECK_BINARY) + "' " + args, merge_stderr);
}

/// The 1F1B example (holds, 11.24 GiB per rank against 32 GiB).
std::string holding_spec() { return sc::test::read_file(sc::test::source_path("examples/gpu-1f1b-p4-m8.yaml")); }

/// The same with an 8 GiB limit: memory violated (exit 13).
std::string violating_spec() {
  std::string s = holding_spec();
  const size_t at = s.find("limit_bytes: 32GiB");
  REQUIRE(at != std::string::npos);
  s.replace(at, 18, "limit_bytes: 8GiB");
  return s;
}

/// The same with `ranks: many`: an input error at that line (returned in *line, 1-based).
std::string broken_spec(int* line) {
  std::string s = holding_spec();
  const size_t at = s.find("ranks: 4");
  REQUIRE(at != std::string::npos);
  s.replace(at, 8, "ranks: many");
  *line = 1 + static_cast<int>(std::count(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  return s;
}

/// A fresh folder under the temporary folder.
std::string fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / name;
  std::error_code ec;
  fs::remove_all(d, ec);
  fs::create_directories(d);
  return d.string();
}

/// A git repository in a fresh folder, with an identity for commits; empty when git is missing.
std::string fixture_repo(const std::string& name) {
  const std::string dir = fresh_dir(name);
  auto init = run_in(dir, "git init -q . && git config user.email t@example.com && git config user.name t && "
                          "git config commit.gpgsign false");
  return init.exit_code == 0 ? dir : std::string();
}

}  // namespace

TEST_CASE("verify of several files: a file in error is one result in every format, the others are still checked",
          "[cli][ci]") {
  const std::string dir = fresh_dir("schedcheck_premerge_verify");
  int line = 0;
  sc::test::write_file(dir + "/a-holds.yaml", holding_spec());
  sc::test::write_file(dir + "/b-broken.yaml", broken_spec(&line));
  sc::test::write_file(dir + "/c-over.yaml", violating_spec());
  const std::string files = "a-holds.yaml b-broken.yaml c-over.yaml";
  const std::string located = "b-broken.yaml:" + std::to_string(line) + ":";

  auto text = schedcheck_in(dir, "verify " + files, false);
  INFO(text.out);
  CHECK(text.exit_code == 10);  // a violation (13) beside an input error (2)
  CHECK(text.out.find("a-holds.yaml: holds (exit 0)") != std::string::npos);
  CHECK(text.out.find("b-broken.yaml: ERROR: " + located) != std::string::npos);
  CHECK(text.out.find("c-over.yaml: VIOLATED: memory") != std::string::npos);
  CHECK(text.out.find("schedcheck: 3 files, 1 hold, 1 violated, 1 in error;") != std::string::npos);
  const std::string last = "(exit 10)\n";  // the summary is the last line
  CHECK(text.out.compare(text.out.size() - last.size(), last.size(), last) == 0);

  auto j = schedcheck_in(dir, "verify " + files + " --format json", false);
  auto list = json::parse(j.out);
  REQUIRE(list.size() == 3);
  CHECK(list[1]["path"] == "b-broken.yaml");
  CHECK(list[1]["verdict"] == "error");
  CHECK(list[1]["diagnostics"][0]["line"] == line);
  CHECK(list[2]["verdict"] == "violated");

  auto sarif = schedcheck_in(dir, "verify " + files + " --format sarif --junit junit.xml", false);
  CHECK(sarif.exit_code == 10);
  const auto log = json::parse(sarif.out);
  bool spec_error = false, memory = false;
  for (const auto& r : log["runs"][0]["results"]) {
    const std::string uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"];
    if (r["ruleId"] == "spec-error" && uri == "b-broken.yaml") spec_error = true;
    if (r["ruleId"] == "memory" && uri == "c-over.yaml") memory = true;
  }
  CHECK(spec_error);
  CHECK(memory);
  const std::string junit = sc::test::read_file(dir + "/junit.xml");
  CHECK(junit.find("<testsuite name=\"b-broken.yaml\"") != std::string::npos);
  CHECK(junit.find("type=\"spec-error\"") != std::string::npos);
  CHECK(junit.find("<testsuite name=\"c-over.yaml\"") != std::string::npos);

  auto github = schedcheck_in(dir, "verify " + files + " --format github", false);
  CHECK(github.out.find("::error file=b-broken.yaml,line=" + std::to_string(line)) != std::string::npos);
  CHECK(github.out.find("title=schedcheck memory::") != std::string::npos);
  CHECK(github.out.find("schedcheck: 3 files, 1 hold, 1 violated, 1 in error;") != std::string::npos);
}

TEST_CASE("a spec whose budget: mapping is malformed is one result in error, and the other files are still checked",
          "[cli][ci][budget]") {
  const std::string dir = fresh_dir("schedcheck_premerge_budget");
  sc::test::write_file(dir + "/bad-budget.yaml", holding_spec() + "budget:\n  span: soon\n");
  sc::test::write_file(dir + "/over.yaml", violating_spec());
  auto r = schedcheck_in(dir, "verify bad-budget.yaml over.yaml --format github", false);
  INFO(r.out);
  CHECK(r.exit_code == 10);
  CHECK(r.out.find("::error file=bad-budget.yaml,line=") != std::string::npos);
  CHECK(r.out.find("title=schedcheck memory::") != std::string::npos);
  CHECK(r.out.find("schedcheck: 2 files, 1 violated, 1 in error;") != std::string::npos);
}

TEST_CASE("diff exits 19 with no flags when a verdict goes from holds to violated", "[cli][diff]") {
  const std::string dir = fresh_dir("schedcheck_premerge_gate");
  sc::test::write_file(dir + "/old.yaml", holding_spec());
  sc::test::write_file(dir + "/new.yaml", violating_spec());
  auto r = schedcheck_in(dir, "diff old.yaml new.yaml");
  INFO(r.out);
  CHECK(r.exit_code == 19);
  CHECK(r.out.find("new.yaml: REGRESSION: verdict holds (exit 0) -> violated (exit 13)") != std::string::npos);
  auto back = schedcheck_in(dir, "diff new.yaml old.yaml");  // violated -> holds: an improvement
  CHECK(back.exit_code == 0);
  CHECK(back.out.find("REGRESSION") == std::string::npos);
}

TEST_CASE("a regression threshold without its unit is refused with both readings spelled out", "[cli][diff]") {
  const std::string dir = fresh_dir("schedcheck_premerge_unit");
  sc::test::write_file(dir + "/a.yaml", holding_spec());
  auto r = schedcheck_in(dir, "diff a.yaml a.yaml --fail-on-regression time=5");
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("'time=5' has no unit: write time=5% for 5 percent, or time=500% for the fraction 5 (500 percent)") !=
        std::string::npos);
  auto fraction = schedcheck_in(dir, "diff a.yaml a.yaml --fail-on-regression memory=0.02");
  CHECK(fraction.exit_code == 1);
  CHECK(fraction.out.find("memory=2% for the fraction 0.02") != std::string::npos);
  CHECK(schedcheck_in(dir, "diff a.yaml a.yaml --fail-on-regression time=5%").exit_code == 0);
}

TEST_CASE("diff --git over several files: a file in error is one result and the good file's regression still "
          "appears in every format", "[cli][diff][git]") {
  const std::string repo = fixture_repo("schedcheck_premerge_git_errors");
  if (repo.empty()) {
    SC_SKIP("git is not installed");
  }
  sc::test::write_file(repo + "/good.yaml", holding_spec());
  sc::test::write_file(repo + "/bad.yaml", holding_spec());
  REQUIRE(run_in(repo, "git add . && git commit -q -m base").exit_code == 0);
  int line = 0;
  sc::test::write_file(repo + "/good.yaml", violating_spec());
  sc::test::write_file(repo + "/bad.yaml", broken_spec(&line));
  const std::string located = "bad.yaml:" + std::to_string(line) + ":";

  auto j = schedcheck_in(repo, "diff --git HEAD bad.yaml good.yaml --format json", false);
  INFO(j.out);
  CHECK(j.exit_code == 10);  // an input error (2) beside a regression (19)
  auto doc = json::parse(j.out);
  CHECK(doc["exit_code"] == 10);
  REQUIRE(doc["diffs"].size() == 2);
  CHECK(doc["diffs"][0]["error"].get<std::string>().rfind(located, 0) == 0);
  CHECK(doc["diffs"][1]["error"].is_null());
  CHECK(doc["diffs"][1]["regressions"][0] == "verdict holds (exit 0) -> violated (exit 13)");

  auto text = schedcheck_in(repo, "diff --git HEAD bad.yaml good.yaml", false);
  CHECK(text.exit_code == 10);
  CHECK(text.out.find("  ERROR: " + located) != std::string::npos);
  CHECK(text.out.find("good.yaml: REGRESSION: verdict holds (exit 0) -> violated (exit 13)") != std::string::npos);
  CHECK(text.out.find("2 files: 1 regressed, 1 in error (exit 10)\n") != std::string::npos);

  auto md = schedcheck_in(repo, "diff --git HEAD bad.yaml good.yaml --format markdown", false);
  CHECK(md.exit_code == 10);
  CHECK(md.out.find("**schedcheck:** 2 files: 1 regressed, 1 in error (exit 10)") == 0);
  CHECK(md.out.find("**Error:** :x: " + located) != std::string::npos);
  CHECK(md.out.find("- :x: verdict holds (exit 0) -> violated (exit 13)") != std::string::npos);
}

namespace {

/// The 70B preset of specs/reference with its first line (torchtitan's preset comment) replaced
/// by `first_line`.
std::string preset_70b_with(const std::string& first_line) {
  std::string s = sc::test::read_file(sc::test::source_path("specs/reference/torchtitan-llama3-70b-a100x64.toml"));
  REQUIRE(s.rfind("# NOTE: this toml config is a preset for 64 A100 GPUs.\n", 0) == 0);
  return first_line + s.substr(s.find('\n'));
}

}  // namespace

TEST_CASE("a config's schedcheck: directive states its facts, and the command line never silently overrides them",
          "[cli][config]") {
  const std::string dir = fresh_dir("schedcheck_premerge_facts");
  sc::test::write_file(dir + "/stated.toml", preset_70b_with("# schedcheck: gpus=64 hardware=a100-80gb"));
  auto stated = schedcheck_in(dir, "verify stated.toml --format json", false);
  INFO(stated.out);
  CHECK(stated.exit_code == 0);
  CHECK(json::parse(stated.out)["verdict"] == "holds");
  // --gpus 8 meant for another file: this one keeps its 64 GPUs, and a warning at the directive says so.
  auto other = schedcheck_in(dir, "verify stated.toml --gpus 8 --hardware h100");
  INFO(other.out);
  CHECK(other.exit_code == 0);
  CHECK(other.out.find("stated.toml:1:15: warning: --gpus 8 is not applied to this file: it states gpus=64 here") !=
        std::string::npos);
  CHECK(other.out.find("stated.toml:1:23: warning: --hardware h100 is not applied to this file: it states "
                       "hardware=a100-80gb here") != std::string::npos);
  // torchtitan's own preset comment is a statement too: the same outcome.
  sc::test::write_file(dir + "/noted.toml", preset_70b_with("# NOTE: this toml config is a preset for 64 A100 GPUs."));
  auto noted = schedcheck_in(dir, "verify noted.toml --gpus 8");
  CHECK(noted.exit_code == 0);
  CHECK(noted.out.find("noted.toml:1:") != std::string::npos);
  CHECK(noted.out.find("--gpus 8 is not applied to this file: it states gpus=64 here") != std::string::npos);
  // A file that states nothing takes the command line's facts.
  sc::test::write_file(dir + "/open.toml", preset_70b_with("# no facts here"));
  auto open = schedcheck_in(dir, "verify open.toml --gpus 64 --hardware a100 --format json", false);
  CHECK(open.exit_code == 0);
  CHECK(json::parse(open.out)["verdict"] == "holds");
}

TEST_CASE("unknown text in a schedcheck: directive is an input error at its line and column", "[cli][config]") {
  const std::string dir = fresh_dir("schedcheck_premerge_directive");
  sc::test::write_file(dir + "/typo.toml", preset_70b_with("# schedcheck: gpus=64 hw=a100"));
  auto typo = schedcheck_in(dir, "verify typo.toml");
  INFO(typo.out);
  CHECK(typo.exit_code == 2);
  CHECK(typo.out.find("typo.toml:1:23: error: unknown fact 'hw' in the schedcheck: directive") != std::string::npos);
  sc::test::write_file(dir + "/gpu.toml", preset_70b_with("# schedcheck: gpus=64 hardware=h100-80gb"));
  auto gpu = schedcheck_in(dir, "verify gpu.toml");
  CHECK(gpu.exit_code == 2);
  CHECK(gpu.out.find("gpu.toml:1:23: error: hardware=h100-80gb: no such GPU preset (did you mean 'h100'?)") !=
        std::string::npos);
  sc::test::write_file(dir + "/count.toml", preset_70b_with("# schedcheck: gpus=lots"));
  auto count = schedcheck_in(dir, "verify count.toml");
  CHECK(count.exit_code == 2);
  CHECK(count.out.find("count.toml:1:15: error: gpus=lots: expected a whole number of GPUs") != std::string::npos);
  // A directive that contradicts torchtitan's preset comment in the same file.
  std::string both = preset_70b_with("# NOTE: this toml config is a preset for 64 A100 GPUs.");
  sc::test::write_file(dir + "/both.toml", "# schedcheck: gpus=32\n" + both);
  auto contradiction = schedcheck_in(dir, "verify both.toml");
  CHECK(contradiction.exit_code == 2);
  CHECK(contradiction.out.find("both.toml:1:15: error: gpus=32 differs from the preset comment at both.toml:2:") !=
        std::string::npos);
}

TEST_CASE("a Megatron-LM launch script states its GPU in a schedcheck: directive", "[cli][config]") {
  const std::string dir = fresh_dir("schedcheck_premerge_megatron");
  std::string script = sc::test::read_file(sc::test::source_path("examples/megatron-mixtral-8x7b.sh"));
  const size_t eol = script.find('\n');  // after the #! line
  sc::test::write_file(dir + "/train.sh", script.substr(0, eol + 1) + "# schedcheck: hardware=h100\n" + script.substr(eol + 1));
  auto stated = schedcheck_in(dir, "verify train.sh --format json", false);
  auto given = schedcheck_in(dir, "verify " + sc::test::source_path("examples/megatron-mixtral-8x7b.sh") +
                                      " --hardware h100 --format json", false);
  INFO(stated.out);
  REQUIRE(stated.exit_code == given.exit_code);
  CHECK(json::parse(stated.out)["timing"] == json::parse(given.out)["timing"]);
  auto conflict = schedcheck_in(dir, "verify train.sh --hardware a100");
  CHECK(conflict.out.find("train.sh:2:15: warning: --hardware a100 is not applied to this file: it states "
                          "hardware=h100 here") != std::string::npos);
}

TEST_CASE("diff --git BASE with no files finds the changed inputs since the merge-base: modified, added, deleted "
          "and renamed, and unchanged files are skipped", "[cli][diff][git]") {
  const std::string repo = fixture_repo("schedcheck_premerge_git_changes");
  if (repo.empty()) {
    SC_SKIP("git is not installed");
  }
  // Contents unlike each other where git must not pair a deletion with an addition as a rename.
  for (const char* f : {"changed.yaml", "moved.yaml", "same.yaml"}) sc::test::write_file(repo + "/" + f, holding_spec());
  sc::test::write_file(repo + "/gone.yaml",
                       sc::test::read_file(sc::test::source_path("examples/router-mixtral-dropless.yaml")));
  sc::test::write_file(repo + "/notes.md", "not an input\n");
  REQUIRE(run_in(repo, "git add . && git commit -q -m base && git branch -M main && git checkout -q -b change")
              .exit_code == 0);
  sc::test::write_file(repo + "/changed.yaml", violating_spec());
  sc::test::write_file(repo + "/added.yaml", sc::test::read_file(sc::test::source_path("examples/llama7b-pp8-1f1b.yaml")));
  sc::test::write_file(repo + "/notes.md", "still not an input\n");
  REQUIRE(run_in(repo, "git rm -q gone.yaml && git mv moved.yaml renamed.yaml && git add . && git commit -q -m change")
              .exit_code == 0);
  // The base branch moves on after the branch point: same.yaml changes there, not in this change.
  REQUIRE(run_in(repo, "git checkout -q main").exit_code == 0);
  sc::test::write_file(repo + "/same.yaml", violating_spec());
  REQUIRE(run_in(repo, "git commit -q -am later && git checkout -q change").exit_code == 0);

  auto r = schedcheck_in(repo, "diff --git main --format json", false);
  INFO(r.out);
  CHECK(r.exit_code == 19);  // changed.yaml went from holds to violated
  const auto doc = json::parse(r.out);
  std::map<std::string, json> by_new;
  for (const auto& d : doc["diffs"]) by_new[d["new"].get<std::string>()] = d;
  REQUIRE(by_new.size() == 4);
  CHECK(by_new.count("same.yaml") == 0);
  CHECK(by_new["changed.yaml"]["old"] == "changed.yaml@main");
  CHECK(by_new["changed.yaml"]["regressions"][0] == "verdict holds (exit 0) -> violated (exit 13)");
  CHECK(by_new["added.yaml"]["verdict"]["old"] == "absent");
  CHECK(by_new["added.yaml"]["verdict"]["new"] == "holds");
  CHECK(by_new["gone.yaml (deleted)"]["verdict"]["old"] == "holds");
  CHECK(by_new["gone.yaml (deleted)"]["verdict"]["new"] == "deleted");
  CHECK(by_new["renamed.yaml (renamed)"]["old"] == "moved.yaml@main");
  CHECK(by_new["renamed.yaml (renamed)"]["verdict"]["old"] == "holds");
  CHECK(by_new["renamed.yaml (renamed)"]["figures"]["span"]["absolute"] == 0.0);  // compared like for like

  auto md = schedcheck_in(repo, "diff --git main --format markdown", false);
  CHECK(md.out.find("**schedcheck:** 4 files: 1 regressed, 3 unchanged or better (exit 19)") == 0);
  CHECK(md.out.find("`moved.yaml@main` → `renamed.yaml (renamed)`") != std::string::npos);

  // Nothing changed since the merge-base: said so, and exit 0 (never an empty comment).
  REQUIRE(run_in(repo, "git checkout -q main").exit_code == 0);
  auto none = schedcheck_in(repo, "diff --git main --format markdown", false);
  CHECK(none.exit_code == 0);
  CHECK(none.out.find("**schedcheck:** no changed inputs since main") == 0);
}

TEST_CASE("the running process keeps its name schedcheck after the huge-page re-exec (ps -C schedcheck finds it)",
          "[cli]") {
  if (!fs::exists("/proc/self/comm")) {
    SC_SKIP("no /proc");
  }
  // A `git` first on PATH that reports the name of the process that started it: the running
  // schedcheck, as ps, pgrep and top see it (/proc/PID/comm).
  const std::string dir = fresh_dir("schedcheck_premerge_comm");
  sc::test::write_file(dir + "/git", "#!/bin/sh\necho \"fatal: $(/bin/cat /proc/$PPID/comm)\" >&2\nexit 1\n");
  REQUIRE(fs::exists(dir + "/git"));
  fs::permissions(dir + "/git", fs::perms::owner_all);
  auto r = run_in(dir, "env -u SCHEDCHECK_NO_REEXEC PATH='" + dir + "' '" + std::string(SCHEDCHECK_BINARY) +
                           "' diff --git HEAD a.yaml");
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("schedcheck: error: diff --git: schedcheck\n") != std::string::npos);
}

TEST_CASE("the command line suggests what a mistyped value meant, and schedcheck alone lists the commands", "[cli]") {
  auto format = sc::test::run_schedcheck("verify examples/gpu-1f1b-p4-m8.yaml --format jsn");
  CHECK(format.exit_code == 1);
  CHECK(format.out.find("--format: 'jsn' is not one of text, json, sarif, github (did you mean 'json'?)") !=
        std::string::npos);
  const std::string plan = "plan --gpus 64 --global-batch-tokens 4M --seq-len 8192 ";
  auto model = sc::test::run_schedcheck(plan + "--model llama3-70");
  CHECK(model.out.find("--model llama3-70: unknown preset (did you mean 'llama3-70b'?)") != std::string::npos);
  auto gpu = sc::test::run_schedcheck(plan + "--model llama3-70b --hardware h100-80gb");
  CHECK(gpu.out.find("--hardware h100-80gb: unknown preset (did you mean 'h100'?)") != std::string::npos);

  auto bare = sc::test::run_schedcheck("");
  INFO(bare.out);
  CHECK(bare.exit_code == 1);
  CHECK(bare.out.find("usage: schedcheck COMMAND") == 0);
  for (const char* command : {"verify", "lower", "gen", "compare", "synth", "run", "numerics", "diff", "plan"})
    CHECK(bare.out.find("\n  " + std::string(command) + " ") != std::string::npos);
  size_t start = 0, widest = 0;
  for (size_t end; (end = bare.out.find('\n', start)) != std::string::npos; start = end + 1)
    widest = std::max(widest, end - start);
  CHECK(widest <= 80);
}

namespace {

/// The `run: |` block of the workflow step named `name` in `wf`, dedented; empty when absent.
std::string workflow_run(const std::string& wf, const std::string& name) {
  const size_t step = wf.find("- name: " + name + "\n");
  if (step == std::string::npos) return "";
  const size_t run = wf.find("run: |\n", step);
  const size_t next_step = wf.find("\n      - ", step + 1);
  if (run == std::string::npos || (next_step != std::string::npos && run > next_step)) return "";
  std::string out;
  size_t at = run + 7, indent = std::string::npos;
  while (at < wf.size()) {
    const size_t eol = wf.find('\n', at);
    const std::string line = wf.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    const size_t lead = line.find_first_not_of(' ');
    if (lead != std::string::npos) {
      if (indent == std::string::npos) indent = lead;
      if (lead < indent) break;
      out += line.substr(indent) + "\n";
    }
    if (eol == std::string::npos) break;
    at = eol + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("the documented workflow's steps, run on a pull request's repository, post one comment naming every "
          "change and fail on the regression", "[cli][ci][diff][git]") {
  const std::string repo = fixture_repo("schedcheck_premerge_recipe");
  if (repo.empty()) {
    SC_SKIP("git is not installed");
  }
  const std::string wf = sc::test::read_file(sc::test::source_path("docs/ci/schedcheck.yml"));
  const std::string verify = workflow_run(wf, "Verify (annotations, JUnit)");
  const std::string sarif = workflow_run(wf, "SARIF for code scanning");
  const std::string compare = workflow_run(wf, "Compare with the base branch");
  REQUIRE(!verify.empty());
  REQUIRE(!sarif.empty());
  REQUIRE(!compare.empty());
  const size_t specs_at = wf.find("  SPECS: ");
  REQUIRE(specs_at != std::string::npos);
  const std::string specs = wf.substr(specs_at + 9, wf.find('\n', specs_at) - specs_at - 9);

  // The base branch: a torchtitan config stating its GPUs in torchtitan's preset comment, specs
  // to change, rename, delete and keep.
  fs::create_directories(repo + "/configs");
  fs::create_directories(repo + "/specs");
  const std::string toml = sc::test::read_file(sc::test::source_path("examples/torchtitan-llama3-8b-pp2.toml"));
  REQUIRE(toml.rfind("# NOTE: this toml config is a preset for 64 A100 GPUs.", 0) == 0);
  sc::test::write_file(repo + "/configs/train.toml", toml);
  for (const char* f : {"changed.yaml", "moved.yaml", "same.yaml"}) sc::test::write_file(repo + "/specs/" + f, holding_spec());
  sc::test::write_file(repo + "/specs/gone.yaml",
                       sc::test::read_file(sc::test::source_path("examples/router-mixtral-dropless.yaml")));
  REQUIRE(run_in(repo, "git add . && git commit -q -m base && git branch -M main && git checkout -q -b change")
              .exit_code == 0);
  // The pull request: the pipeline degree 2 -> 4 (a throughput regression), a Megatron-LM script
  // added with its GPU in a directive, a spec over its memory limit, a rename and a deletion.
  std::string pp4 = toml;
  const size_t pp = pp4.find("pipeline_parallel_degree = 2");
  REQUIRE(pp != std::string::npos);
  pp4.replace(pp, 28, "pipeline_parallel_degree = 4");
  sc::test::write_file(repo + "/configs/train.toml", pp4);
  std::string script = sc::test::read_file(sc::test::source_path("examples/megatron-mixtral-8x7b.sh"));
  const size_t eol = script.find('\n');
  sc::test::write_file(repo + "/configs/pretrain.sh",
                       script.substr(0, eol + 1) + "# schedcheck: hardware=h100\n" + script.substr(eol + 1));
  sc::test::write_file(repo + "/specs/changed.yaml", violating_spec());
  REQUIRE(run_in(repo, "git rm -q specs/gone.yaml && git mv specs/moved.yaml specs/renamed.yaml && git add . && "
                       "git commit -q -m change && git update-ref refs/remotes/origin/main main")
              .exit_code == 0);

  // Each step as the runner runs it: bash -e, schedcheck on the PATH, the workflow's SPECS.
  const std::string bin_dir = fs::path(SCHEDCHECK_BINARY).parent_path().string();
  auto step = [&](const std::string& body) {
    std::string script_text = body;
    for (size_t at; (at = script_text.find("${{ github.base_ref }}")) != std::string::npos;)
      script_text.replace(at, 22, "main");
    sc::test::write_file(repo + "/.step.sh", script_text);
    return run_in(repo, "PATH='" + bin_dir + "':\"$PATH\" SPECS='" + specs + "' bash -e .step.sh");
  };
  auto v = step(verify);
  INFO(v.out);
  CHECK(v.exit_code == 13);  // specs/changed.yaml is over its memory limit
  CHECK(v.out.find("::error file=specs/changed.yaml,line=") != std::string::npos);
  CHECK(fs::exists(repo + "/schedcheck-junit.xml"));
  auto s = step(sarif);
  INFO(s.out);
  CHECK(s.exit_code == 0);  // a log with findings is uploaded, not a failed step
  const json log = json::parse(sc::test::read_file(repo + "/schedcheck.sarif"));
  CHECK(log["version"] == "2.1.0");
  CHECK_FALSE(log["runs"][0]["results"].empty());
  auto c = step(compare);
  INFO(c.out);
  CHECK(c.exit_code == 19);  // the step fails on the regressions; the comment still posts
  const std::string comment = sc::test::read_file(repo + "/schedcheck-diff.md");
  INFO(comment);
  CHECK(comment.rfind("**schedcheck:** 5 files: 2 regressed", 0) == 0);
  for (const char* named : {"configs/train.toml", "configs/pretrain.sh", "specs/changed.yaml",
                            "`specs/moved.yaml@origin/main` → `specs/renamed.yaml (renamed)`", "specs/gone.yaml (deleted)"})
    CHECK(comment.find(named) != std::string::npos);
  CHECK(comment.find("specs/same.yaml") == std::string::npos);  // unchanged: skipped
  CHECK(comment.find("verdict holds (exit 0) -> violated (exit 13)") != std::string::npos);
  CHECK(comment.find("throughput (tokens/s)") != std::string::npos);
  // The change in the config's words: the key, its line, and what torchtitan derived from it.
  CHECK(comment.find("`parallelism.pipeline_parallel_degree` `2` -> `4` (line 47)") != std::string::npos);
  CHECK(comment.find("**Derived:** pp 2 -> 4, dp_shard 32 -> 16") != std::string::npos);
  // diff's SARIF: each finding of the new side carries the lines the change touched.
  auto sarif_diff = run_in(repo, "'" + std::string(SCHEDCHECK_BINARY) + "' diff --git origin/main --format sarif", false);
  INFO(sarif_diff.out);
  CHECK(sarif_diff.exit_code == 19);
  bool related = false;
  const json sarif_doc = json::parse(sarif_diff.out);
  for (const auto& res : sarif_doc["runs"][0]["results"])
    if (res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "specs/changed.yaml")
      for (const auto& rl : res.value("relatedLocations", json::array()))
        related = related || rl["message"]["text"] == "changed here: memory.limit_bytes 32GiB -> 8GiB";
  CHECK(related);
}

TEST_CASE("a repository's .schedcheck-facts states facts for configs by glob, under what the file states itself",
          "[cli][config]") {
  const std::string repo = fixture_repo("schedcheck_premerge_facts_file");
  if (repo.empty()) {
    SC_SKIP("git is not installed");
  }
  fs::create_directories(repo + "/configs/big");
  sc::test::write_file(repo + "/.schedcheck-facts",
                       "# facts for the configs of this repository\n"
                       "configs/big/*.toml: gpus=64 hardware=a100-80gb\n"
                       "configs/*.toml: gpus=8 hardware=h100\n");
  sc::test::write_file(repo + "/configs/big/open.toml", preset_70b_with("# no facts here"));
  sc::test::write_file(repo + "/configs/big/own.toml", preset_70b_with("# schedcheck: gpus=64 hardware=a100-80gb"));
  // From a subfolder, as a CI step or a user runs it: the facts file is found walking up.
  auto open = schedcheck_in(repo + "/configs", "verify big/open.toml --format json", false);
  INFO(open.out);
  CHECK(open.exit_code == 0);
  const json j = json::parse(open.out);
  CHECK(j["verdict"] == "holds");
  CHECK(j["job"]["world"] == 64);
  CHECK(j["job"]["hardware"] == "a100-80gb");
  // The command line does not override the facts file: a warning at the facts line says so.
  auto other = schedcheck_in(repo, "verify configs/big/open.toml --gpus 8");
  INFO(other.out);
  CHECK(other.exit_code == 0);
  CHECK(other.out.find(".schedcheck-facts:2:21: warning: --gpus 8 is not applied to this file: it states gpus=64 "
                       "here") != std::string::npos);
  // A DeepSpeed JSON, which has no comment to state them in, takes its facts from the file too.
  sc::test::write_file(repo + "/configs/ds.json",
                       "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 2, \"bf16\": {\"enabled\": true},\n"
                       " \"zero_optimization\": {\"stage\": 1}}\n");
  sc::test::write_file(repo + "/.schedcheck-facts",
                       "configs/big/*.toml: gpus=64 hardware=a100-80gb\n"
                       "configs/*.json: gpus=8 hardware=h100 model=llama3-8b\n");
  auto ds = schedcheck_in(repo, "verify configs/ds.json --seq-len 4096 --format json", false);
  INFO(ds.out);
  CHECK(ds.exit_code == 0);
  const json dj = json::parse(ds.out);
  CHECK(dj["job"]["world"] == 8);
  CHECK(dj["job"]["model"] == "llama3-8b");
  // A fact the file states itself wins; a bad line that matches is an error at its line.
  auto own = schedcheck_in(repo, "verify configs/big/own.toml --format json", false);
  CHECK(own.exit_code == 0);
  sc::test::write_file(repo + "/.schedcheck-facts", "configs/big/*.toml: gpus=64 hw=a100\n");
  auto bad = schedcheck_in(repo, "verify configs/big/open.toml");
  INFO(bad.out);
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find(".schedcheck-facts:1:29: error: unknown fact 'hw'") != std::string::npos);
}

TEST_CASE("under pipeline parallelism a memory finding's microbatch size is located at "
          "pipeline_parallel_microbatch_size, not local_batch_size", "[cli][config]") {
  // The key a reviewer changed is the one the finding names (it once pointed at local_batch_size).
  const std::string dir = fresh_dir("schedcheck_premerge_mbs_location");
  std::string toml = sc::test::read_file(sc::test::source_path("examples/torchtitan-llama3-8b-pp2.toml"));
  const size_t at = toml.find("pipeline_parallel_microbatch_size = 1");
  REQUIRE(at != std::string::npos);
  toml.replace(at, 37, "pipeline_parallel_microbatch_size = 8");
  const int line = 1 + static_cast<int>(std::count(toml.begin(), toml.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  sc::test::write_file(dir + "/mbs8.toml", toml);
  auto r = schedcheck_in(dir, "verify mbs8.toml");
  INFO(r.out);
  CHECK(r.exit_code == 13);
  CHECK(r.out.find("(set by the microbatch size at mbs8.toml:" + std::to_string(line) + ":1,") != std::string::npos);
}

TEST_CASE("diff --git on a file of a submodule says whose file it is, instead of calling it added", "[cli][diff][git]") {
  const std::string repo = fixture_repo("schedcheck_premerge_submodule");
  if (repo.empty()) {
    SC_SKIP("git is not installed");
  }
  sc::test::write_file(repo + "/main.yaml", holding_spec());
  REQUIRE(run_in(repo, "git add . && git commit -q -m base").exit_code == 0);
  // A nested repository recorded in this one as a gitlink, as a submodule is.
  fs::create_directories(repo + "/sub");
  sc::test::write_file(repo + "/sub/inner.yaml", holding_spec());
  REQUIRE(run_in(repo + "/sub", "git init -q . && git config user.email t@example.com && git config user.name t && "
                                "git config commit.gpgsign false && git add . && git commit -q -m inner")
              .exit_code == 0);
  REQUIRE(run_in(repo, "git add sub 2>/dev/null && git commit -q -m 'add sub'").exit_code == 0);
  auto r = schedcheck_in(repo, "diff --git HEAD sub/inner.yaml");
  INFO(r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("sub/inner.yaml: error: it belongs to the repository at ") != std::string::npos);
  CHECK(r.out.find("(a submodule or a nested repository)") != std::string::npos);
  CHECK(r.out.find("absent") == std::string::npos);
}
