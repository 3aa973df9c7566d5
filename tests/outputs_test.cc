// The output rule every command follows (--trace, --svg, --dot, --junit, -o, --emit): written
// through to what the path names, never onto an input or a file an input references, all or
// none; and `diff --git` (a private temporary folder, revisions resolved before use, added and
// deleted files, absolute paths, files a spec references).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using sc::test::read_file;
using sc::test::run_schedcheck;
using sc::test::source_path;
using sc::test::write_file;

const char* k1F1B = "examples/gpu-1f1b-p4-m8.yaml";

/// A fresh, empty folder under the temporary folder for one test.
fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("schedcheck_outputs_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// Runs a shell command line; its exit status.
int sh(const std::string& cmd) {
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool names_fifo(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

}  // namespace

TEST_CASE("two outputs naming one file under different spellings are refused, nothing written", "[cli][outputs]") {
  const fs::path d = fresh_dir("same");
  const std::string x = (d / "X").string();
  // `X` and `./X` from inside the folder, and the absolute path: one file (issue: one output was lost).
  for (const std::string& other : {std::string("./X"), x, std::string("../") + d.filename().string() + "/X"}) {
    auto r = run_schedcheck("verify " + source_path(k1F1B) + " --trace '" + x + "' --svg '" +
                            (other == x ? other : (d / other).string()) + "'");
    INFO(r.out);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("--trace and --svg name the same file") != std::string::npos);
    CHECK_FALSE(fs::exists(x));
  }
}

TEST_CASE("an output onto a FIFO is written through and the FIFO stays", "[cli][outputs]") {
  const fs::path d = fresh_dir("fifo");
  const fs::path fifo = d / "trace.fifo", got = d / "got.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A reader on the FIFO in the background (as `--trace >(cat)` would be), then the run.
  const std::string cmd = "cat '" + fifo.string() + "' > '" + got.string() + "' & cd '" SCHEDCHECK_SOURCE_DIR "' && '" +
                          SCHEDCHECK_BINARY + "' verify " + k1F1B + " --trace '" + fifo.string() +
                          "' > /dev/null 2>&1; rc=$?; wait; exit $rc";
  CHECK(sh(cmd) == 0);
  CHECK(names_fifo(fifo));
  const std::string trace = read_file(got.string());
  REQUIRE_FALSE(trace.empty());
  CHECK(json::parse(trace).contains("traceEvents"));
}

TEST_CASE("an output onto a character device is written through, never replaced", "[cli][outputs]") {
  auto r = run_schedcheck(std::string("verify ") + k1F1B + " --svg /dev/null");
  CHECK(r.exit_code == 0);
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("an output onto a symbolic link writes the link's target and keeps the link", "[cli][outputs]") {
  const fs::path d = fresh_dir("link");
  write_file((d / "target.json").string(), "old");
  fs::create_symlink("target.json", d / "link.json");
  fs::create_symlink("created.svg", d / "dangling.svg");  // names a file that does not exist yet
  auto r = run_schedcheck(std::string("verify ") + k1F1B + " --trace '" + (d / "link.json").string() + "' --svg '" +
                          (d / "dangling.svg").string() + "'");
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(fs::is_symlink(d / "link.json"));
  CHECK(fs::is_symlink(d / "dangling.svg"));
  CHECK(json::parse(read_file((d / "target.json").string())).contains("traceEvents"));
  CHECK(read_file((d / "created.svg").string()).find("<svg") != std::string::npos);
  // A link to the input is the input.
  fs::copy_file(source_path(k1F1B), d / "spec.yaml");
  fs::create_symlink("spec.yaml", d / "alias.json");
  auto onto_input = run_schedcheck("verify '" + (d / "spec.yaml").string() + "' --trace '" + (d / "alias.json").string() + "'");
  CHECK(onto_input.exit_code == 1);
  CHECK(onto_input.out.find("would overwrite the input file") != std::string::npos);
  CHECK(read_file((d / "spec.yaml").string()) == read_file(source_path(k1F1B)));
}

TEST_CASE("an output never overwrites a router spec that the checked spec references", "[cli][outputs]") {
  const fs::path d = fresh_dir("router");
  fs::copy_file(source_path("examples/composed-moe-ep.yaml"), d / "composed-moe-ep.yaml");
  fs::copy_file(source_path("examples/router-mixtral-dropless.yaml"), d / "router-mixtral-dropless.yaml");
  const std::string before = read_file((d / "router-mixtral-dropless.yaml").string());
  auto r = run_schedcheck("verify '" + (d / "composed-moe-ep.yaml").string() + "' --trace '" +
                          (d / "router-mixtral-dropless.yaml").string() + "'");
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("which an input reads") != std::string::npos);
  CHECK(read_file((d / "router-mixtral-dropless.yaml").string()) == before);
}

TEST_CASE("config front-ends write their outputs all or none under the same rule", "[cli][outputs]") {
  const fs::path d = fresh_dir("config");
  const std::string x = (d / "X").string();
  auto r = run_schedcheck("verify examples/torchtitan-llama3-8b-pp2.toml --gpus 8 --trace '" + x + "' --svg '" +
                          (d / "." / "X").string() + "'");
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("name the same file") != std::string::npos);
  CHECK_FALSE(fs::exists(x));
  auto onto = run_schedcheck("verify examples/torchtitan-llama3-8b-pp2.toml --gpus 8 --trace "
                             "examples/torchtitan-llama3-8b-pp2.toml");
  CHECK(onto.exit_code == 1);
  CHECK(onto.out.find("would overwrite the input file") != std::string::npos);
}

TEST_CASE("plan --emit refuses a folder before the search", "[cli][outputs]") {
  const fs::path d = fresh_dir("plan");
  auto r = run_schedcheck("plan --model llama3-8b --gpus 8 --global-batch-tokens 1M --seq-len 8192 --emit '" +
                          d.string() + "'");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("--emit " + d.string() + " is a folder") != std::string::npos);
}

namespace {

/// A git repository in a fresh folder with one commit: a 1F1B spec, a spec that references a
/// CSV, and a spec that is deleted afterwards. Empty when git is missing.
fs::path make_repo(const std::string& name) {
  const fs::path d = fresh_dir(name);
  if (sh("git --version > /dev/null 2>&1") != 0) return {};
  fs::create_directories(d / "specs");
  fs::copy_file(source_path(k1F1B), d / "specs" / "a.yaml");
  fs::copy_file(source_path(k1F1B), d / "specs" / "gone.yaml");
  write_file((d / "specs" / "s.csv").string(), "0F0,0B0\n");
  const std::string git = "cd '" + d.string() + "' && git -c init.defaultBranch=main init -q && git add -A && "
                          "git -c user.name=t -c user.email=t@t -c commit.gpgsign=false commit -q -m base";
  REQUIRE(sh(git + " > /dev/null 2>&1") == 0);
  return d;
}

/// `schedcheck ARGS` run inside `dir`, standard error kept.
sc::test::CliRun run_in(const fs::path& dir, const std::string& args) {
  sc::test::CliRun r;
  const std::string cmd = "cd '" + dir.string() + "' && '" SCHEDCHECK_BINARY "' " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace

TEST_CASE("diff --git reports an added file, a deleted file and absolute paths", "[cli][diff]") {
  const fs::path d = make_repo("git_added");
  if (d.empty()) {
    SC_SKIP("git is missing");
  }
  fs::copy_file(source_path("examples/gpu-zbh1-p4-m8.yaml"), d / "specs" / "new.yaml");  // untracked
  fs::remove(d / "specs" / "gone.yaml");
  auto r = run_in(d, "diff --git HEAD specs/a.yaml specs/new.yaml specs/gone.yaml '" + (d / "specs" / "a.yaml").string() +
                         "' --format json");
  INFO(r.out);
  REQUIRE((r.exit_code == 0 || r.exit_code == 19));
  const json j = json::parse(r.out.substr(r.out.find('{')));
  REQUIRE(j["diffs"].size() == 4);
  CHECK(j["diffs"][0]["verdict"]["old"] == "holds");
  CHECK(j["diffs"][1]["verdict"]["old"] == "absent");
  CHECK(j["diffs"][1]["verdict"]["new"] == "holds");
  CHECK(j["diffs"][2]["verdict"]["old"] == "holds");
  CHECK(j["diffs"][2]["verdict"]["new"] == "deleted");
  CHECK(j["diffs"][3]["figures"]["span"]["absolute"] == 0.0);  // the absolute path is specs/a.yaml
  CHECK(r.out.find("schedcheck-diff-") == std::string::npos);  // no temporary path anywhere
}

TEST_CASE("diff --git materialises a referenced file at the revision", "[cli][diff]") {
  const fs::path d = make_repo("git_ref");
  if (d.empty()) {
    SC_SKIP("git is missing");
  }
  // A spec that references a schedule CSV beside it, committed, then the CSV changed in the
  // working tree: the old side must read the committed CSV (else the span would not change).
  write_file((d / "specs" / "ref.yaml").string(),
             "schedcheck: 1\nname: ref\nranks: 2\nplacement: loop\nmicrobatches: 2\n"
             "costs: {F: 1ms, B: 2ms}\np2p: {latency: 0us, semantics: eager}\nschedule: {csv: s.csv}\n");
  write_file((d / "specs" / "s.csv").string(), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  REQUIRE(sh("cd '" + d.string() + "' && git add -A && git -c user.name=t -c user.email=t@t commit -q -m ref") == 0);
  write_file((d / "specs" / "s.csv").string(), "0F0,0B0,0F1,0B1\n1F0,1B0,1F1,1B1\n");
  auto r = run_in(d, "diff --git HEAD specs/ref.yaml --format json");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out.substr(r.out.find('{')));
  CHECK(j["diffs"][0]["old"] == "specs/ref.yaml@HEAD");
  // The working-tree order puts rank 0's second forward behind its first backward (which waits for
  // rank 1's), so the span grows; read from the working-tree CSV on both sides it would not change.
  CHECK(j["diffs"][0]["figures"]["span"]["absolute"].get<double>() > 0.0);
}

TEST_CASE("diff --git resolves the revision first: option-like and ambiguous names are errors", "[cli][diff]") {
  const fs::path d = make_repo("git_rev");
  if (d.empty()) {
    SC_SKIP("git is missing");
  }
  auto opt = run_in(d, "diff --git=--output=o specs/a.yaml");
  INFO(opt.out);
  CHECK(opt.exit_code == 1);
  CHECK(opt.out.find("--git --output=o: not a revision") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "o"));
  auto none = run_in(d, "diff --git no-such-revision-xyz specs/a.yaml");
  CHECK(none.exit_code == 1);
  CHECK(none.out.find("not a revision of this repository") != std::string::npos);
  CHECK(none.out.find("unknown key") == std::string::npos);
  auto missing = run_in(d, "diff --git HEAD specs/nowhere.yaml");
  CHECK(missing.exit_code == 2);
  CHECK(missing.out.find("specs/nowhere.yaml: error: no such file, in the working tree or at HEAD") != std::string::npos);
  // A spec error in the old version names it as PATH@REV, not the temporary copy.
  write_file((d / "specs" / "a.yaml").string(), "schedcheck: 1\nranks: [\n");
  REQUIRE(sh("cd '" + d.string() + "' && git add -A && git -c user.name=t -c user.email=t@t commit -q -m broken") == 0);
  fs::copy_file(source_path(k1F1B), d / "specs" / "a.yaml", fs::copy_options::overwrite_existing);
  auto broken = run_in(d, "diff --git HEAD specs/a.yaml");
  INFO(broken.out);
  CHECK(broken.exit_code == 2);
  CHECK(broken.out.find("specs/a.yaml@HEAD:") != std::string::npos);
  CHECK(broken.out.find("schedcheck-diff-") == std::string::npos);
}

TEST_CASE("a misspelt option of any command gets the closest known option", "[cli]") {
  // Before: CLI11's "--ranks is required" (gen) or "The following argument was not expected".
  auto gen = run_schedcheck("gen zb-h1 --rank 4 --microbatches 8");
  CHECK(gen.exit_code == 1);
  CHECK(gen.out.find("schedcheck gen: error: unknown option '--rank'; did you mean '--ranks'?") != std::string::npos);
  auto verify = run_schedcheck(std::string("verify ") + k1F1B + " --tracee x.json");
  CHECK(verify.exit_code == 1);
  CHECK(verify.out.find("unknown option '--tracee'; did you mean '--trace'?") != std::string::npos);
  CHECK_FALSE(fs::exists(source_path("x.json")));
  auto fine = run_schedcheck("gen zb-h1 --ranks 4 --microbatches 8");
  CHECK(fine.exit_code == 0);
}

TEST_CASE("diff --git with an ambiguous revision name reads the spec, not git's warning", "[cli][diff]") {
  // A branch and a tag both named `amb`: git resolves it (the tag, with a warning on stderr). The
  // warning once reached the YAML reader as the file ("unknown key 'warning'").
  const fs::path d = make_repo("git_ambiguous");
  if (d.empty()) {
    SC_SKIP("git is missing");
  }
  REQUIRE(sh("cd '" + d.string() + "' && git branch amb && git tag amb > /dev/null 2>&1") == 0);
  auto r = run_in(d, "diff --git amb specs/a.yaml --format json");
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("unknown key") == std::string::npos);
  const json j = json::parse(r.out.substr(r.out.find('{')));
  CHECK(j["diffs"][0]["old"] == "specs/a.yaml@amb");
  CHECK(j["diffs"][0]["figures"]["span"]["absolute"] == 0.0);
}
