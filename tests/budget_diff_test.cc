// Budgets (a spec's budget: mapping and --budget), `schedcheck diff` and `synth --require-optimal`.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "report/diff_report.h"
#include "test_util.h"

namespace {

using nlohmann::json;
using sc::test::run_schedcheck;

const char* k1F1B = "examples/gpu-1f1b-p4-m8.yaml";
const char* kZBH1 = "examples/gpu-zbh1-p4-m8.yaml";

/// The 1F1B example with `budget` appended; its first budget key is on line `*line`.
std::string with_budget(const std::string& name, const std::string& budget, int* line = nullptr) {
  std::string text = sc::test::read_file(sc::test::source_path(k1F1B));
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (line) *line = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 2;
  return sc::test::write_temp("schedcheck_budget", name, text + "budget:\n" + budget);
}

}  // namespace

TEST_CASE("an exceeded budget is a finding of its own with exit 18, located at the budget's line", "[cli][budget]") {
  int line = 0;
  const std::string spec = with_budget("span.yaml", "  span: 1ms\n  bubble_rate: 99%\n", &line);
  auto text = run_schedcheck("verify '" + spec + "'", false);
  CHECK(text.exit_code == 18);
  INFO(text.out);
  CHECK(text.out.find(spec + ":" + std::to_string(line) + ":3: EXCEEDED: span (span) ") != std::string::npos);
  CHECK(text.out.find("exceeds the budget of 1 ms") != std::string::npos);
  CHECK(text.out.find("within the budget of 99%") != std::string::npos);
  CHECK(text.out.find("BUDGET EXCEEDED (1 of 2 budgets, exit 18)") != std::string::npos);
  // The headline says the exit the budget sets, not the "holds (exit 0)" of the schedule alone.
  CHECK(text.out.substr(0, text.out.find('\n')) == spec + ": holds; 1 of 2 budgets exceeded (exit 18)");

  auto j = json::parse(run_schedcheck("verify '" + spec + "' --format json", false).out);
  CHECK(j["exit_code"] == 18);
  CHECK(j["verdict"] == "violated");
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["kind"] == "budget");
  CHECK(j["findings"][0]["locations"][0]["line"] == line);
  CHECK(j["budgets"][0]["key"] == "span");
  CHECK(j["budgets"][0]["value"].get<double>() > 0.001);
  CHECK(j["budgets"][0]["limit"].get<double>() == Approx(0.001));

  auto sarif = json::parse(run_schedcheck("verify '" + spec + "' --format sarif", false).out);
  const json& res = sarif["runs"][0]["results"][0];
  CHECK(res["ruleId"] == "budget");
  CHECK(res["locations"][0]["physicalLocation"]["region"]["startLine"] == line);
}

TEST_CASE("a budget given with --budget overrides the spec's and names the command line", "[cli][budget]") {
  const std::string spec = with_budget("override.yaml", "  span: 1ms\n");
  auto relaxed = run_schedcheck("verify '" + spec + "' --budget span=10s", false);
  CHECK(relaxed.exit_code == 0);
  CHECK(relaxed.out.find("command line: span (span)") != std::string::npos);
  auto peak = run_schedcheck(std::string("verify ") + k1F1B + " --budget peak_bytes_per_rank=1GiB --format json", false);
  CHECK(peak.exit_code == 18);
  auto j = json::parse(peak.out);
  const std::string msg = j["findings"][0]["message"];
  CHECK(msg.find("peak memory per rank (peak_bytes_per_rank)") == 0);
  CHECK(msg.find(" on rank 0 exceeds the budget of 1 GiB") != std::string::npos);
  CHECK(msg.find("(--budget peak_bytes_per_rank=1GiB)") != std::string::npos);
  CHECK(j["budgets"][0]["source"] == "command line");
  // A budget with another violation: exit 10 (several kinds).
  auto both = run_schedcheck("verify examples/gpipe-over-memory-limit.yaml --budget messages=0", false);
  CHECK(both.exit_code == 10);
}

TEST_CASE("bad budgets are refused: unknown keys with their place, bad values, inapplicable files", "[cli][budget]") {
  const std::string spec = with_budget("bad.yaml", "  spna: 1ms\n  bubble_rate: lots\n");
  auto r = run_schedcheck("verify '" + spec + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("unknown budget 'spna'; did you mean 'span'?") != std::string::npos);
  CHECK(r.out.find("budget bubble_rate: expected a fraction (0.05) or a percentage (5%), got 'lots'") !=
        std::string::npos);
  CHECK(r.out.find(spec + ":") != std::string::npos);
  // CI formats carry the errors as results, at their lines.
  auto gh = run_schedcheck("verify '" + spec + "' --format github", false);
  CHECK(gh.exit_code == 2);
  CHECK(gh.out.find("::error file=" + spec + ",line=") != std::string::npos);
  CHECK(gh.out.find("title=schedcheck spec-error::unknown budget 'spna'") != std::string::npos);
  auto opt = run_schedcheck(std::string("verify ") + k1F1B + " --budget sapn=1");
  CHECK(opt.exit_code == 1);
  CHECK(opt.out.find("did you mean 'span'") != std::string::npos);
  auto router = run_schedcheck("verify examples/router-mixtral-dropless.yaml --budget span=1s");
  CHECK(router.exit_code == 1);
  CHECK(router.out.find("--budget does not apply to examples/router-mixtral-dropless.yaml") != std::string::npos);
}

TEST_CASE("diff prints two results side by side with absolute and relative change", "[cli][diff]") {
  auto r = run_schedcheck(std::string("diff ") + k1F1B + " " + kZBH1, false);
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind(std::string(k1F1B) + " -> " + kZBH1 + "\n", 0) == 0);
  CHECK(r.out.find("  verdict: holds (exit 0) -> holds (exit 0)") != std::string::npos);
  for (const char* row : {"span", "step time", "bubble rate", "peak memory per rank", "worst-case memory per rank",
                          "P2P messages per step", "communication bytes per step"})
    CHECK(r.out.find(std::string("\n  ") + row + " ") != std::string::npos);
  CHECK(r.out.find("(rank 0)") != std::string::npos);
  auto j = json::parse(run_schedcheck(std::string("diff ") + k1F1B + " " + kZBH1 + " --format json", false).out);
  const json& span = j["diffs"][0]["figures"]["span"];
  // ZB-H1 fills 1F1B's bubbles with W: a shorter span for the same costs.
  CHECK(span["new"].get<double>() < span["old"].get<double>());
  CHECK(span["relative"].get<double>() == Approx(span["new"].get<double>() / span["old"].get<double>() - 1));
  auto md = run_schedcheck(std::string("diff ") + k1F1B + " " + kZBH1 + " --format markdown", false);
  CHECK(md.out.find("| figure | old | new | change | relative |") != std::string::npos);
}

TEST_CASE("diff --fail-on-regression fails with exit 19 and names the regressed figure", "[cli][diff]") {
  auto r = run_schedcheck(std::string("diff ") + kZBH1 + " " + k1F1B + " --fail-on-regression time=5%,memory=50%");
  INFO(r.out);
  CHECK(r.exit_code == 19);
  CHECK(r.out.find(std::string(k1F1B) + ": REGRESSION: span (span) ") != std::string::npos);
  CHECK(r.out.find("exceeds time=5%") != std::string::npos);
  auto fine = run_schedcheck(std::string("diff ") + k1F1B + " " + kZBH1 + " --fail-on-regression time=5%,memory=50%");
  CHECK(fine.exit_code == 0);
  auto bad = run_schedcheck(std::string("diff ") + k1F1B + " " + kZBH1 + " --fail-on-regression tiem=5%");
  CHECK(bad.exit_code == 1);
  auto kinds = run_schedcheck(std::string("diff ") + k1F1B + " examples/router-mixtral-dropless.yaml");
  CHECK(kinds.exit_code == 1);
  CHECK(kinds.out.find("diff compares inputs of one kind") != std::string::npos);
}

TEST_CASE("diff --git compares files at a revision with the working tree", "[cli][diff]") {
  auto inside = run_schedcheck("diff --git HEAD " + std::string(k1F1B) + " --format json", false);
  if (inside.out.find("\"diffs\"") == std::string::npos) {
    SC_SKIP("not a git checkout, or git is missing: " << inside.out);
  }
  auto j = json::parse(inside.out);
  CHECK(inside.exit_code == 0);
  CHECK(j["diffs"][0]["old"] == std::string(k1F1B) + "@HEAD");
  CHECK(j["diffs"][0]["figures"]["span"]["absolute"] == 0.0);
  auto missing = run_schedcheck("diff --git no-such-revision-xyz " + std::string(k1F1B));
  CHECK(missing.exit_code == 1);  // a revision is a command-line argument: a usage error
  CHECK(missing.out.find("--git no-such-revision-xyz: not a revision") != std::string::npos);
}

TEST_CASE("diff compares two PyTorch schedule CSVs through the pipeline front-end", "[cli][diff]") {
  const std::string corpus = sc::test::corpus_dir();
  if (corpus.empty()) {
    SC_SKIP("the shared PyTorch corpus is absent");
  }
  const std::string a = corpus + "/pytorch/zb1p_2rank_2stagep_compute.csv";
  const std::string b = corpus + "/pytorch/zb1p_2rank_2stagep_comms.csv";
  if (!std::filesystem::exists(a) || !std::filesystem::exists(b)) {
    SC_SKIP("the corpus has no zb1p CSVs");
  }
  auto r = run_schedcheck("diff '" + a + "' '" + b + "' --format json", false);
  INFO(r.out);
  CHECK(r.exit_code == 0);
  auto j = json::parse(r.out);
  CHECK(j["diffs"][0]["figures"].contains("span"));
  CHECK(j["diffs"][0]["verdict"]["old"] == "holds");
}

TEST_CASE("regression thresholds parse as percentages per figure or group, and a bare number is refused", "[diff]") {
  std::string why;
  auto t = sc::parse_thresholds("time=5%,memory=2%,findings", &why);
  REQUIRE(t);
  CHECK(t->at("time") == Approx(0.05));
  CHECK(t->at("memory") == Approx(0.02));
  CHECK(!sc::parse_thresholds("memory=0.02", &why));
  CHECK(why == "--fail-on-regression: 'memory=0.02' has no unit: write memory=0.02% for 0.02 percent, or memory=2% "
               "for the fraction 0.02 (2 percent)");
  CHECK(t->count("findings") == 1);
  CHECK(!sc::parse_thresholds("time=-1%", &why));
  CHECK(why.find("'time=-1%'") != std::string::npos);
}

TEST_CASE("synth --require-optimal exits 5 unless the result is proven optimal", "[cli][solver]") {
  auto proven = run_schedcheck("synth examples/synth-p4-m8.yaml --seed 3 --rlimit 50000000 --require-optimal", false);
  INFO(proven.out);
  const bool optimal = proven.out.find(": optimal ") != std::string::npos;
  CHECK(proven.exit_code == (optimal ? 0 : 5));
  // A resource limit too small to prove anything leaves a feasible (warm-start) result: its
  // gap is on the first line, and --require-optimal fails it. (The closed-form bound alone proves
  // this shape optimal, so it is turned off to leave the proof to the solver.)
  auto limited = run_schedcheck(
      "synth examples/synth-p4-m8.yaml --seed 3 --rlimit 1 --no-closed-form-bounds --require-optimal", false);
  INFO(limited.out);
  const std::string first = limited.out.substr(0, limited.out.find('\n'));
  if (first.find(": feasible ") != std::string::npos) CHECK(first.find(", gap ") != std::string::npos);
  CHECK(limited.exit_code == 5);
}

TEST_CASE("progress goes to standard error only when it is a terminal", "[cli]") {
  setenv("SCHEDCHECK_PROGRESS_DELAY_S", "0", 1);  // show it at once
  auto piped = run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml 2>&1 | cat", true);
  CHECK(piped.out.find("working") == std::string::npos);
  CHECK(piped.out.find('\r') == std::string::npos);
  // Under a terminal (script(1) gives the command a pseudo-terminal) the line shows and is erased.
  const std::string cmd = "cd '" + std::string(SCHEDCHECK_SOURCE_DIR) + "' && script -qec \"'" + SCHEDCHECK_BINARY +
                          "' verify examples/llama7b-pp8-1f1b.yaml\" /dev/null 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  unsetenv("SCHEDCHECK_PROGRESS_DELAY_S");
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 127 || out.find("holds") == std::string::npos) {
    SC_SKIP("no script(1) to run under a terminal: " << out);
  }
  CHECK(out.find("schedcheck verify: working") != std::string::npos);
  CHECK(out.find("\r\x1b[K") != std::string::npos);
}

namespace {

/// What a terminal shows after `bytes`: '\r' returns to the line's start, ESC[K clears to its
/// end, '\n' starts the next line, other characters overwrite.
std::vector<std::string> screen_of(const std::string& bytes) {
  std::vector<std::string> lines(1);
  size_t col = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    char c = bytes[i];
    std::string& line = lines.back();
    if (c == '\r') {
      col = 0;
    } else if (c == '\n') {
      lines.emplace_back();
      col = 0;
    } else if (c == '\x1b' && bytes.compare(i, 3, "\x1b[K") == 0) {
      line.resize(std::min(line.size(), col));
      i += 2;
    } else {
      if (col < line.size()) line[col] = c;
      else line.append(col - line.size(), ' ').push_back(c);
      ++col;
    }
  }
  return lines;
}

/// Runs schedcheck ARGS under script(1), a pseudo-terminal for standard output and error, with
/// the progress line shown at once; empty when script(1) is missing.
std::optional<std::string> run_on_terminal(const std::string& args) {
  const std::string cmd = "cd '" + std::string(SCHEDCHECK_SOURCE_DIR) +
                          "' && SCHEDCHECK_PROGRESS_DELAY_S=0 script -qec \"'" + SCHEDCHECK_BINARY + "' " + args +
                          "\" /dev/null 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 127 || out.find("examples/") == std::string::npos) return std::nullopt;
  return out;
}

}  // namespace

TEST_CASE("on a terminal the progress line never shares a line with the output, and is gone at the end", "[cli]") {
  auto shown = run_on_terminal("verify examples/llama7b-pp8-1f1b.yaml");
  if (!shown) {
    SC_SKIP("no script(1) to run under a terminal");
  }
  INFO(*shown);
  CHECK(shown->find("schedcheck verify: working") != std::string::npos);  // it was drawn
  // The screen holds exactly the report, as a pipe gets it: the first line is the verdict, not
  // the status line with the verdict appended.
  std::vector<std::string> screen = screen_of(*shown);
  std::string text;
  for (const auto& line : screen) text += line + "\n";
  std::string piped = run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml", false).out;
  CHECK(text == piped + "\n");
  CHECK(screen.front() == "examples/llama7b-pp8-1f1b.yaml: holds (exit 0)");

  // synth's status line carries the last probe; the screen shows each probe once, in the report.
  auto synth = run_on_terminal("synth examples/synth-p4-m8.yaml --memory-limit 10 --no-closed-form-bounds");
  REQUIRE(synth);
  INFO(*synth);
  size_t probes = 0, status = 0;
  for (const auto& line : screen_of(*synth)) {
    if (line.find("probe: span <= 25 s?") != std::string::npos) ++probes;
    if (line.find("working") != std::string::npos) ++status;
  }
  CHECK(probes == 1);
  CHECK(status == 0);
}

TEST_CASE("diff of a batch change compares throughput and MFU, not step time", "[cli][diff]") {
  // Doubling torchtitan's local_batch_size doubles the tokens per step (2,097,152 -> 4,194,304 for
  // this 64-GPU example: 32 data-parallel shards x 8 sequences x 8,192 tokens, then x 16). The step
  // takes about twice as long; that was reported as "step time +94%" and, with time=5%, exit 19,
  // though each token got cheaper.
  std::string text = sc::test::read_file(sc::test::source_path("examples/torchtitan-llama3-8b-pp2.toml"));
  const size_t at = text.find("local_batch_size = 8\n");
  REQUIRE(at != std::string::npos);
  text.replace(at, 21, "local_batch_size = 16\n");
  const std::string doubled = sc::test::write_temp("schedcheck-diff-batch", "doubled.toml", text);
  auto r = run_schedcheck("diff examples/torchtitan-llama3-8b-pp2.toml '" + doubled +
                          "' --fail-on-regression time=5% --format json", false);
  INFO(r.out);
  CHECK(r.exit_code == 0);
  const json j = json::parse(r.out);
  const json& figs = j["diffs"][0]["figures"];
  CHECK(figs["tokens_per_step"]["old"] == 2097152.0);
  CHECK(figs["tokens_per_step"]["new"] == 4194304.0);
  CHECK(figs["step_time"]["like_for_like"] == false);
  CHECK(figs["span"]["like_for_like"] == false);
  CHECK(figs["throughput"]["higher_is_better"] == true);
  CHECK(figs["throughput"]["new"].get<double>() > figs["throughput"]["old"].get<double>());
  CHECK(figs["mfu"]["relative"].get<double>() == Approx(figs["throughput"]["relative"].get<double>()));
  CHECK(j["diffs"][0]["notes"][0].get<std::string>().find("the work per step changed from 2097152 to 4194304 tokens") == 0);
  CHECK(j["diffs"][0]["regressions"].empty());

  // The other way round, throughput falls (by the same 3 %): a regression under time= or throughput=.
  auto back = run_schedcheck("diff '" + doubled + "' examples/torchtitan-llama3-8b-pp2.toml --fail-on-regression throughput=1%");
  INFO(back.out);
  CHECK(back.exit_code == 19);
  CHECK(back.out.find("REGRESSION: throughput (tokens/s) (throughput)") != std::string::npos);
  CHECK(back.out.find("step time (step_time)") == std::string::npos);  // not like for like: never a regression
}

TEST_CASE("diff and compare of gen outputs with different chunk counts say the work differs", "[cli][diff][compare]") {
  // gen writes per-stage costs (F = I = W = 1, B = 2): 1F1B at p = 4, m = 8 does 4 x 8 x 3 s = 96 s of
  // compute, interleaved 1F1B with 2 chunks per rank twice the stages, 192 s.
  const std::string dir = (std::filesystem::temp_directory_path() / "schedcheck-diff-work").string();
  std::filesystem::create_directories(dir);
  REQUIRE(run_schedcheck("gen 1f1b --ranks 4 --microbatches 8 --format yaml -o " + dir + "/g1.yaml").exit_code == 0);
  REQUIRE(run_schedcheck("gen interleaved-1f1b --ranks 4 --microbatches 8 --chunks 2 --format yaml -o " + dir + "/g2.yaml")
              .exit_code == 0);
  auto d = run_schedcheck("diff " + dir + "/g1.yaml " + dir + "/g2.yaml --fail-on-regression time=5% --format json", false);
  INFO(d.out);
  CHECK(d.exit_code == 0);  // span 33 s -> 57 s, but for twice the work: not a regression
  const json j = json::parse(d.out);
  CHECK(j["diffs"][0]["figures"]["span"]["like_for_like"] == false);
  CHECK(j["diffs"][0]["notes"][0] == "the two schedules do not do the same work (compute summed over ranks 96 s and "
                                     "192 s): span, step time and communication compare different amounts of work and "
                                     "are not regressions");
  auto c = run_schedcheck("compare " + dir + "/g1.yaml " + dir + "/g2.yaml --schedules self");
  INFO(c.out);
  CHECK(c.out.find("at 4 ranks and 8 microbatches the schedules do not do the same work (compute summed over ranks: " +
                   dir + "/g1.yaml: self 96 s, " + dir + "/g2.yaml: self 192 s)") != std::string::npos);
  // Generated schedules of one spec share its costs: no note.
  auto same = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules 1f1b,zb-h1,interleaved-1f1b");
  CHECK(same.out.find("do not do the same work") == std::string::npos);
}
