// Golden command-line tests: the schedcheck binary on bundled specs and bad inputs.
// SCHEDCHECK_UPDATE_GOLDEN=1 rewrites tests/golden/ (review a regeneration like code).
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "test_util.h"

namespace {

using RunResult = sc::test::CliRun;

// Runs schedcheck with `args` from the source folder (so paths in the output are relative).
RunResult run_cli(const std::string& args, bool merge_stderr = true) {
  return sc::test::run_schedcheck(args, merge_stderr);
}

void check_golden(const std::string& name, const std::string& actual) {
  std::string path = sc::test::source_path("tests/golden/" + name);
  if (std::getenv("SCHEDCHECK_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << actual;
    WARN("rewrote " << path);
    return;
  }
  REQUIRE(std::filesystem::exists(path));
  CHECK(sc::test::read_file(path) == actual);
}

// JSON without the wall-clock figures, for golden comparison.
std::string stable_json(const std::string& text) {
  auto j = nlohmann::json::parse(text);
  j["stats"].erase("seconds_per_pass");
  j["stats"].erase("seconds");
  return j.dump(2) + "\n";
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("schedcheck_test_" + name)).string();
}

}  // namespace

TEST_CASE("verify prints the verdict first and a per-rank summary for the bundled 1F1B example", "[cli]") {
  RunResult r = run_cli("verify examples/llama7b-pp8-1f1b.yaml");
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("examples/llama7b-pp8-1f1b.yaml: holds (exit 0)", 0) == 0);
  check_golden("llama7b-pp8-1f1b.txt", r.out);
}

TEST_CASE("verify reports the rendezvous deadlock with its cycle, traces and exit 11", "[cli]") {
  RunResult r = run_cli("verify examples/interleaved-rendezvous-deadlock.yaml");
  CHECK(r.exit_code == 11);
  CHECK(r.out.find("deadlock under rendezvous semantics: wait-for cycle 0SEND_F1@rank 0 (comm stream) -> "
                   "1SEND_F0@rank 1 (comm stream)") != std::string::npos);
  CHECK(r.out.find("rank 0 (comm stream) trace: 0SEND_F0 [stuck at 0SEND_F1") != std::string::npos);
  check_golden("interleaved-rendezvous-deadlock.txt", r.out);
  // The same schedule under eager semantics (PyTorch's simulator's view) passes.
  RunResult eager = run_cli("verify examples/interleaved-rendezvous-deadlock.yaml --semantics eager");
  CHECK(eager.exit_code == 0);
  RunResult fixed = run_cli("verify examples/interleaved-parity-fix.yaml");
  CHECK(fixed.exit_code == 0);
}

TEST_CASE("verify --format json has the documented keys and values", "[cli]") {
  RunResult r = run_cli("verify specs/reference/p4-m8-zb-h2.yaml --format json", false);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"verdict", "exit_code", "semantics", "findings", "timing", "memory", "stats"})
    CHECK(j.contains(key));
  CHECK(j["verdict"] == "holds");
  // docs/facts/pipeline-schedules.md: ZB-H2 at p = 4, m = 8: span 24, makespan 27, peak 14 (M_B = 2, M_W = 1).
  CHECK(j["timing"]["span"].get<double>() == Approx(24));
  CHECK(j["timing"]["makespan"].get<double>() == Approx(27));
  CHECK(j["timing"]["bubble_rate"].get<double>() == Approx(0.0));
  CHECK(j["memory"]["peak_bytes_per_rank"][0] == 14);
  CHECK(j["memory"]["worst_case_bytes_per_rank"][0] == 14);
  CHECK(j["memory"]["limit_bytes"].is_null());
  CHECK(j["stats"]["ops"] == 4 * 8 * 3);
  check_golden("p4-m8-zb-h2.json", stable_json(r.out));
}

TEST_CASE("verify reports a memory limit violation with exit 13 and the live buffers", "[cli]") {
  RunResult r = run_cli("verify examples/gpipe-over-memory-limit.yaml --format json", false);
  CHECK(r.exit_code == 13);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["findings"].size() == 4);
  CHECK(j["findings"][0]["kind"] == "memory");
  // 8 GiB of parameters + 16 activations of 2 GiB = 40 GiB on every rank.
  CHECK(j["memory"]["peak_bytes_per_rank"][0] == int64_t{40} << 30);
  CHECK(j["findings"][0]["message"].get<std::string>().find("predicted peak 40 GiB") != std::string::npos);
}

TEST_CASE("verify writes a Chrome trace with op, flow and counter events", "[cli]") {
  std::string trace = temp_path("trace.json");
  std::filesystem::remove(trace);
  RunResult r = run_cli("verify examples/interleaved-parity-fix.yaml --trace " + trace);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(sc::test::read_file(trace));
  size_t x = 0, flows = 0, counters = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") ++x;
    if (e["ph"] == "s" || (e["ph"] == "X" && e.value("flow_out", false) && !e.value("flow_in", false))) ++flows;
    if (e["ph"] == "C") ++counters;
  }
  CHECK(x == 40);       // one per op
  CHECK(flows == 12);   // one per matched message (flow events v2 on the send, or an "s" event)
  CHECK(counters > 0);
  CHECK(j["distributedInfo"]["world_size"] == 2);
}

TEST_CASE("verify --dot draws the stuck state with the wait-for edges", "[cli]") {
  std::string dot = temp_path("stuck.dot");
  RunResult r = run_cli("verify examples/interleaved-rendezvous-deadlock.yaml --dot " + dot);
  REQUIRE(r.exit_code == 11);
  std::string text = sc::test::read_file(dot);
  CHECK(text.rfind("digraph schedule {", 0) == 0);
  CHECK(text.find("waits for") != std::string::npos);
  CHECK(text.find("0SEND_F1") != std::string::npos);
}

TEST_CASE("bad inputs get a clear error with exit code 2, never a crash", "[cli]") {
  struct Case {
    std::string name, content, expect;
  };
  std::string wide(200000, ',');  // 10^5 idle columns around one action
  std::vector<Case> cases = {
      {"empty.csv", "", "empty.csv:1:1: error: "},
      {"junk.csv", std::string("\x7f\x45\x4c\x46\x02\x01\x00\x00\xff\xfe", 10), "junk.csv:1:"},
      {"junk.yaml", std::string("\x00\x01\x02\xff", 4), "junk.yaml:"},
      {"trailing.csv", "0F0xyz,0B0\n", "trailing.csv:1:4: error: '0F0xyz': unexpected 'xyz' after the action"},
      {"neg.yaml", "schedcheck: 1\nranks: 1\ncosts: {F: -1ms}\nschedule: {actions: {0: \"0F0 0B0\"}}\n",
       "neg.yaml:3:"},
      {"wide.csv", "0F0" + wide + "0B0\n", ""},
      // A malformed tensor count or list of a SEND/RECV points at the bad character.
      {"count.yaml", "schedcheck: 1\nranks: 2\nschedule: {actions: {0: \"0F0 0SEND_F0x0\", 1: \"1RECV_F0 1F0\"}}\n",
       "count.yaml:3:39: error: rank 0: '0SEND_F0x0': a tensor count is 1 to 64, got 0"},
      {"names.yaml", "schedcheck: 1\nranks: 2\nschedule:\n  actions:\n    0: 0F0 0SEND_F0[act,act]\n",
       "names.yaml:5:25: error: rank 0: '0SEND_F0[act,act]': tensor 'act' is listed twice"},
      {"names.csv", "0F0,0SEND_F0[act,mask]\n",
       "names.csv:1:13: error: '0SEND_F0[act': a tensor list ends with ']', as in [act,mask]"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    std::string path = temp_path(c.name);
    std::ofstream(path, std::ios::binary) << c.content;
    RunResult r = run_cli("verify '" + path + "'");
    if (c.name == "wide.csv") {  // 10^5 columns is a valid schedule: one rank, one stage
      CHECK(r.exit_code == 0);
      continue;
    }
    CHECK(r.exit_code == 2);
    CHECK(r.out.find(c.expect) != std::string::npos);
    CHECK(r.out.find("nothing was checked") != std::string::npos);
  }
  RunResult missing = run_cli("verify no/such/file.yaml");
  CHECK(missing.exit_code == 2);
  CHECK(missing.out.find("no/such/file.yaml") != std::string::npos);
}

TEST_CASE("a causality cycle in a compute-only CSV is a deadlock with its cycle", "[cli]") {
  std::string path = temp_path("cycle.csv");
  // docs/facts/p2p-semantics.md: accepted by PyTorch's validator; 0B0 needs 1B0, which needs 3B0 -> 3F0 -> 2F0 after 0B0.
  std::ofstream(path) << "0F0,0B0,2F0,2B0\n1F0,3F0,3B0,1B0\n";
  RunResult r = run_cli("verify '" + path + "'");
  CHECK(r.exit_code == 11);
  CHECK(r.out.find("wait-for cycle 0B0@rank 0 -> 3F0@rank 1 -> 0B0@rank 0") != std::string::npos);
}

TEST_CASE("usage errors exit 1 and --help teaches the commands", "[cli]") {
  CHECK(run_cli("verify").exit_code == 1);
  CHECK(run_cli("verify examples/llama7b-pp8-1f1b.yaml --semantics sometimes").exit_code == 1);
  RunResult help = run_cli("verify --help");
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--semantics") != std::string::npos);
  CHECK(help.out.find("rendezvous") != std::string::npos);
}

TEST_CASE("compare prints the docs/facts/pipeline-schedules.md p = 4, m = 8 table from one command", "[cli][compare]") {
  RunResult r = run_cli("compare examples/compare-p4-m8.yaml --schedules gpipe,1f1b,zb-h1,zb-h2,interleaved-1f1b,zb-v "
                        "--format json", false);
  REQUIRE(r.exit_code == 0);
  auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 6);
  // docs/facts/pipeline-schedules.md reference values: span, makespan, peak memory on rank 0 (M_B = 2 GiB, M_W = 1 GiB).
  struct Expect {
    const char* name;
    double span, makespan, peak_gib;
  };
  const Expect expect[] = {{"gpipe", 33, 33, 16},          {"1f1b", 33, 33, 8},  {"zb-h1", 27, 27, 8},
                           {"zb-h2", 24, 27, 14},          {"interleaved-1f1b", 28.5, 28.5, 11},
                           {"zb-v", 24, 25.5, 8}};
  for (size_t i = 0; i < 6; ++i) {
    INFO(expect[i].name);
    const auto& row = rows[i];
    CHECK(row["schedule"]["name"] == expect[i].name);
    CHECK(row["verdict"] == "holds");
    CHECK(row["timing"]["span"].get<double>() == Approx(expect[i].span));
    CHECK(row["timing"]["makespan"].get<double>() == Approx(expect[i].makespan));
    CHECK(row["memory"]["peak_bytes_per_rank"][0].get<double>() == Approx(expect[i].peak_gib * (1 << 30)));
  }
  RunResult text = run_cli("compare examples/compare-p4-m8.yaml --schedules gpipe,1f1b,zb-h1,zb-h2,interleaved-1f1b,zb-v");
  CHECK(text.exit_code == 0);
  check_golden("compare-p4-m8.txt", text.out);
}

TEST_CASE("compare lists a schedule the shape does not allow with its reason", "[cli][compare]") {
  // 1F1B needs m >= stages; DualPipeV needs m >= 2p: at p = 4, m = 2 neither is valid.
  std::string spec = temp_path("small.yaml");
  std::ofstream(spec) << "schedcheck: 1\nranks: 4\nmicrobatches: 2\nschedule: {name: gpipe}\n";
  RunResult r = run_cli("compare '" + spec + "' --schedules gpipe,1f1b,dualpipev --format json", false);
  REQUIRE(r.exit_code == 0);
  auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0]["verdict"] == "holds");
  CHECK(rows[1]["verdict"] == "invalid");
  CHECK(rows[1]["reason"].get<std::string>().find("1f1b needs microbatches >= stages") != std::string::npos);
  CHECK(rows[2]["verdict"] == "invalid");
}

TEST_CASE("gen writes PyTorch's own DualPipeV artifact and rejects shapes its reference rejects", "[cli][gen]") {
  if (sc::test::corpus_dir().empty()) return;
  RunResult r = run_cli("gen dualpipev --ranks 4 --microbatches 10", false);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == sc::test::read_file(sc::test::corpus_dir() + "/pytorch/dualpipev_4rank_10mb.csv"));
  RunResult bad = run_cli("gen 1f1b --ranks 4 --microbatches 2");
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("1f1b needs microbatches >= stages") != std::string::npos);
  // The YAML form reads back and verifies.
  std::string yaml = temp_path("zbv.yaml");
  REQUIRE(run_cli("gen zb-v --ranks 4 --microbatches 8 --format yaml -o '" + yaml + "'").exit_code == 0);
  RunResult v = run_cli("verify '" + yaml + "' --format json", false);
  CHECK(v.exit_code == 0);
  CHECK(nlohmann::json::parse(v.out)["timing"]["span"].get<double>() == Approx(48));  // unit costs, 2 chunks
}

// ZB paper (arXiv 2401.10241) Table 5, 1.5B model, p = 8: bubble rates of 1F1B, ZB-H1, ZB-H2
// from the profiled costs in specs/reference/zb-table5-1.5b-m*.yaml (docs/facts/pipeline-schedules.md).
TEST_CASE("compare reproduces ZB Table 5 for the 1.5B model from the specs' costs", "[cli][compare]") {
  struct Row {
    int m;
    double one_f_one_b, h1, h2;
  };
  const Row table[] = {{24, 0.2431, 0.1585, 0.1083}, {32, 0.1985, 0.1242, 0.0837}, {64, 0.1240, 0.0674, 0.0444}};
  for (const Row& t : table) {
    INFO("m = " << t.m);
    RunResult r = run_cli("compare specs/reference/zb-table5-1.5b-m" + std::to_string(t.m) +
                              ".yaml --schedules 1f1b,zb-h1,zb-h2 --format json", false);
    REQUIRE(r.exit_code == 0);
    auto rows = nlohmann::json::parse(r.out);
    auto rounded = [&](size_t i) { return std::round(rows[i]["timing"]["bubble_rate"].get<double>() * 1e4) / 1e4; };
    CHECK(rounded(0) == Approx(t.one_f_one_b).margin(1e-9));
    CHECK(rounded(1) == Approx(t.h1).margin(1e-9));
    CHECK(rounded(2) == Approx(t.h2).margin(1e-9));
  }
}

TEST_CASE("inputs that cannot be read sensibly are refused before any work", "[cli]") {
  RunResult dev = run_cli("verify /dev/zero");
  CHECK(dev.exit_code == 2);
  CHECK(dev.out.find("/dev/zero:1:1: error: cannot read the spec: it is not a regular file") != std::string::npos);
  // Memory values whose sum would overflow, and costs whose sum loses all precision.
  std::string big = temp_path("overflow.yaml");
  std::ofstream(big) << "schedcheck: 1\nranks: 1\nmicrobatches: 2\nmemory: {activation_bytes: 5000PiB}\n"
                        "schedule: {name: gpipe}\n";
  RunResult mem = run_cli("verify '" + big + "'");
  CHECK(mem.exit_code == 2);
  CHECK(mem.out.find("add up to more than 2^62 bytes") != std::string::npos);
  // An output file that would overwrite the input, or sits in a missing folder: usage errors.
  std::string self = temp_path("self.yaml");
  std::filesystem::copy_file(sc::test::source_path("examples/interleaved-parity-fix.yaml"), self,
                             std::filesystem::copy_options::overwrite_existing);
  RunResult over = run_cli("verify '" + self + "' --trace '" + self + "'");
  CHECK(over.exit_code == 1);
  CHECK(over.out.find("would overwrite the input file") != std::string::npos);
  CHECK(sc::test::read_file(self).rfind("# yaml-language-server", 0) == 0);
  CHECK(run_cli("verify '" + self + "' --dot /no/such/dir/x.dot").exit_code == 1);
}

TEST_CASE("a CSV with a byte order mark is refused and its blank lines are ranks, as PyTorch reads them", "[cli][csv]") {
  // Python's csv reader keeps the mark in the first cell ("\ufeff0F0"), which _Action.from_str refuses.
  std::string bom = temp_path("bom.csv");
  std::ofstream(bom, std::ios::binary) << "\xEF\xBB\xBF" "0F0,0B0\n1F0,1B0\n";
  RunResult b = run_cli("verify '" + bom + "'");
  CHECK(b.exit_code == 2);
  CHECK(b.out.find("bom.csv:1:1: error: the file starts with a UTF-8 byte order mark") != std::string::npos);
  // One final line break ends the file; each blank line before it is a row: two more ranks
  // without actions, whose loop stages never run (PyTorch: "incorrect number of ranks").
  std::string path = temp_path("blank-rows.csv");
  std::ofstream(path, std::ios::binary) << "0F0,0B0\n1F0,1B0\n\n\n";
  RunResult r = run_cli("verify '" + path + "' --format json", false);
  CHECK(r.exit_code == 12);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["schedule"]["ranks"] == 4);
  std::string crlf = temp_path("crlf.csv");
  std::ofstream(crlf, std::ios::binary) << "0F0,0B0\r\n1F0,1B0\r\n";
  RunResult c = run_cli("verify '" + crlf + "' --format json", false);
  REQUIRE(c.exit_code == 0);
  auto k = nlohmann::json::parse(c.out);
  CHECK(k["schedule"]["ranks"] == 2);
  CHECK(k["timing"]["bubble_rate"].get<double>() == Approx(1 - 6.0 / (2 * 6)));  // span 6 s: 0F0 1F0 1B0 0B0
}

TEST_CASE("compare rejects unknown schedule names and charges DualPipe a whole stage per direction", "[cli][compare]") {
  RunResult bad = run_cli("compare examples/compare-p4-m8.yaml --schedules zbh1");
  CHECK(bad.exit_code == 1);
  CHECK(bad.out.find("unknown schedule 'zbh1'; did you mean 'zb-h1'?") != std::string::npos);
  RunResult dp = run_cli("compare examples/compare-p4-m8.yaml --schedules dualpipe --format json", false);
  REQUIRE(dp.exit_code == 0);
  auto j = nlohmann::json::parse(dp.out)[0];
  // Each rank runs m/2 = 4 microbatches in each direction on a full 1/p stage: 2 x 4 x 3 s.
  for (const auto& b : j["timing"]["busy_per_rank"]) CHECK(b.get<double>() == Approx(24));
  // docs/facts/pipeline-schedules.md: DualPipe holds PP + 1 = 5 chunk units of activations, 2 GiB each.
  CHECK(j["memory"]["peak_bytes_per_rank"][0].get<double>() == Approx(10.0 * (1 << 30)));
}
