// `schedcheck compare` over sweeps, several files and the spec's own schedule: row counts and
// values against the closed forms, the CSV output parsed back, the self row against verify.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "test_util.h"

namespace {

using sc::test::run_schedcheck;

std::string temp_spec(const std::string& name, const std::string& text) {
  return sc::test::write_temp("schedcheck-compare-test", name, text);
}

// RFC 4180 rows: fields split at commas outside quotes, "" inside quotes is one quote.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field), field.clear();
    } else if (c == '\n') {
      row.push_back(field), field.clear();
      rows.push_back(row), row.clear();
    } else {
      field += c;
    }
    any = true;
  }
  if (any && (!field.empty() || !row.empty())) row.push_back(field), rows.push_back(row);
  return rows;
}

// With equal costs per stage (T_F = 1 s, T_B = T_I + T_W = 2 s per rank) 1F1B's span is
// (m + p - 1)(T_F + T_B), so its bubble rate is (p - 1) / (m + p - 1); ZB-H1's is
// (p - 1) / (3m + p - 1) with T_F = T_I = T_W (ZB paper, arXiv 2401.10241, section 3).
double one_f_one_b_bubble(int p, int m) { return (p - 1.0) / (m + p - 1.0); }
double zb_h1_bubble(int p, int m) { return (p - 1.0) / (3.0 * m + p - 1.0); }

TEST_CASE("compare sweeps ranks and microbatches: one row per schedule and point, at the closed-form bubble", "[cli][compare]") {
  auto r = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules 1f1b,zb-h1 --ranks 4,8 --microbatches 8,16,32 "
                          "--format json", false);
  REQUIRE(r.exit_code == 0);
  auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 2 * 3 * 2);
  size_t i = 0;
  for (int p : {4, 8})
    for (int m : {8, 16, 32})
      for (const char* name : {"1f1b", "zb-h1"}) {
        INFO("p = " << p << ", m = " << m << ", " << name);
        const auto& row = rows[i++];
        CHECK(row["file"] == "examples/compare-p4-m8.yaml");
        CHECK(row["point"]["schedule"] == name);
        CHECK(row["point"]["ranks"] == p);
        CHECK(row["point"]["microbatches"] == m);
        CHECK(row["point"]["chunks"] == 1);
        CHECK(row["verdict"] == "holds");
        CHECK(row["schedule"]["ranks"] == p);
        double expect = std::string(name) == "1f1b" ? one_f_one_b_bubble(p, m) : zb_h1_bubble(p, m);
        CHECK(row["timing"]["bubble_rate"].get<double>() == Approx(expect).margin(1e-12));
        // At 8 ranks the model's 4 ranks' worth of costs is split over 8: T_F = 0.5 s.
        double t_f = p == 4 ? 1.0 : 0.5;
        if (std::string(name) == "1f1b") CHECK(row["timing"]["span"].get<double>() == Approx((m + p - 1) * 3 * t_f));
      }
}

TEST_CASE("compare lists an invalid point of a sweep as a row with its reason", "[cli][compare]") {
  auto r = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules gpipe,1f1b --ranks 4,8 --microbatches 4 --format json",
                          false);
  REQUIRE(r.exit_code == 0);
  auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0]["verdict"] == "holds");    // gpipe, p = 4, m = 4
  CHECK(rows[1]["verdict"] == "holds");    // 1f1b, p = 4, m = 4
  CHECK(rows[2]["verdict"] == "holds");    // gpipe, p = 8, m = 4
  CHECK(rows[3]["verdict"] == "invalid");  // 1f1b, p = 8, m = 4 < 8 stages
  CHECK(rows[3]["point"]["ranks"] == 8);
  CHECK(rows[3]["point"]["microbatches"] == 4);
  CHECK(rows[3]["reason"].get<std::string>().find("1f1b needs microbatches >= stages") != std::string::npos);
  // The text table names the point in its columns and gives the same reason.
  auto text = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules gpipe,1f1b --ranks 4,8 --microbatches 4");
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("swept: ranks 4,8, microbatches 4") != std::string::npos);
  CHECK(text.out.find("invalid: 1f1b needs microbatches >= stages") != std::string::npos);
}

TEST_CASE("compare --format csv writes a header and one parseable row per result in seconds and bytes", "[cli][compare]") {
  auto r = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules self,1f1b,zb-h1 --microbatches 2,8,16 --format csv",
                          false);
  REQUIRE(r.exit_code == 0);
  auto rows = parse_csv(r.out);
  REQUIRE(rows.size() == 1 + 7);  // self only at m = 8; 1f1b is invalid at m = 2
  const std::vector<std::string> header = {"file", "schedule", "ranks", "microbatches", "chunks", "verdict", "exit_code",
                                           "span_s", "makespan_s", "bubble_rate", "peak_bytes_max",
                                           "worst_case_bytes_max", "messages", "reason"};
  CHECK(rows[0] == header);
  for (const auto& row : rows) REQUIRE(row.size() == header.size());
  // m = 2: 1f1b invalid (its reason has a comma, so it is quoted), zb-h1 rejects it too or runs.
  CHECK(rows[1][1] == "1f1b");
  CHECK(rows[1][3] == "2");
  CHECK(rows[1][5] == "invalid");
  CHECK(rows[1][13].find("1f1b needs microbatches >= stages") != std::string::npos);
  CHECK(rows[1][13].find(',') != std::string::npos);
  CHECK(rows[1][7].empty());
  // m = 8: self, 1f1b, zb-h1; m = 16: 1f1b, zb-h1.
  size_t self_at = 0;
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i][1] == "self") self_at = i;
  REQUIRE(self_at != 0);
  CHECK(rows[self_at][3] == "8");
  CHECK(rows[self_at][5] == "holds");
  // Figures at 12 significant digits: 1 - 24 / 30 prints as 0.2, not as the double's noise
  // (0.19999999999999996).
  CHECK(rows[self_at][7] == "30");
  CHECK(rows[self_at][9] == "0.2");
  const auto& mb16 = rows[rows.size() - 2];
  CHECK(mb16[1] == "1f1b");
  CHECK(mb16[3] == "16");
  CHECK(mb16[4] == "1");
  CHECK(mb16[5] == "holds");
  CHECK(mb16[6] == "0");
  CHECK(std::stod(mb16[7]) == Approx(57));  // (16 + 3) x 3 s
  CHECK(std::stod(mb16[8]) == Approx(57));
  CHECK(std::stod(mb16[9]) == Approx(one_f_one_b_bubble(4, 16)).margin(1e-12));
  CHECK(std::stoll(mb16[10]) == 8LL << 30);  // p x M_B on rank 0: 4 x 2 GiB, in bytes
  CHECK(std::stoll(mb16[12]) == 6 * 16);     // 3 boundaries x 16 microbatches x (activation + gradient)
}

TEST_CASE("compare's self row is what verify reports for the same spec", "[cli][compare]") {
  auto c = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules self,zb-h1 --format json", false);
  auto v = run_schedcheck("verify examples/compare-p4-m8.yaml --format json", false);
  REQUIRE(c.exit_code == 0);
  REQUIRE(v.exit_code == 0);
  auto rows = nlohmann::json::parse(c.out);
  REQUIRE(rows.size() == 2);
  auto self = rows[0];
  auto ver = nlohmann::json::parse(v.out);
  CHECK(self["point"]["schedule"] == "self");
  CHECK(self["schedule"] == ver["schedule"]);
  CHECK(self["verdict"] == ver["verdict"]);
  CHECK(self["findings"] == ver["findings"]);
  CHECK(self["timing"] == ver["timing"]);
  CHECK(self["memory"] == ver["memory"]);
  CHECK(self["semantics"] == ver["semantics"]);
  // The example's own schedule, 1F1B with every W deferred, is shorter than 1F1B's 33 s and
  // keeps all 8 weight-gradient inputs (1 GiB each) on every rank.
  CHECK(self["timing"]["span"].get<double>() < 33);
  CHECK(self["memory"]["peak_bytes_per_rank"][3].get<double>() >= 8.0 * (1 << 30));
}

TEST_CASE("compare runs a spec without a schedule key, and refuses self on it", "[cli][compare]") {
  auto ok = run_schedcheck("compare examples/synth/p8-m16.yaml --schedules 1f1b,zb-h1 --format json", false);
  REQUIRE(ok.exit_code == 0);
  auto rows = nlohmann::json::parse(ok.out);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["timing"]["bubble_rate"].get<double>() == Approx(one_f_one_b_bubble(8, 16)).margin(1e-12));
  CHECK(rows[1]["timing"]["bubble_rate"].get<double>() == Approx(zb_h1_bubble(8, 16)).margin(1e-12));
  auto self = run_schedcheck("compare examples/synth/p8-m16.yaml --schedules self,1f1b");
  CHECK(self.exit_code == 2);
  CHECK(self.out.find("examples/synth/p8-m16.yaml: --schedules self: the spec has no schedule: key") != std::string::npos);
}

TEST_CASE("compare runs self only at the spec's own shape and says so", "[cli][compare]") {
  auto some = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules self,1f1b --microbatches 8,16");
  REQUIRE(some.exit_code == 0);
  CHECK(some.out.find("self (the spec's own schedule) runs only at its own shape (4 ranks, 8 microbatches, 1 stage per "
                      "rank): left out at 1 other point\n") != std::string::npos);
  auto two = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules self,1f1b --microbatches 8,16,32");
  CHECK(two.out.find("left out at 2 other points\n") != std::string::npos);
  auto none = run_schedcheck("compare examples/compare-p4-m8.yaml --schedules self,1f1b --microbatches 16 --format json");
  REQUIRE(none.exit_code == 0);
  CHECK(none.out.find("no swept point has that shape, so it is left out") != std::string::npos);  // on stderr
  auto rows = nlohmann::json::parse(run_schedcheck("compare examples/compare-p4-m8.yaml --schedules self,1f1b "
                                                   "--microbatches 16 --format json", false).out);
  CHECK(rows.size() == 1);
}

TEST_CASE("compare takes several spec files and groups their rows per file", "[cli][compare]") {
  std::string two = temp_spec("p2-m4.yaml", "schedcheck: 1\nname: p2-m4\nranks: 2\nmicrobatches: 4\ncosts: {F: 1s, B: 2s}\n");
  auto r = run_schedcheck("compare examples/compare-p4-m8.yaml '" + two + "' --schedules 1f1b,gpipe --format json", false);
  REQUIRE(r.exit_code == 0);
  auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0]["file"] == "examples/compare-p4-m8.yaml");
  CHECK(rows[1]["file"] == "examples/compare-p4-m8.yaml");
  CHECK(rows[2]["file"] == two);
  CHECK(rows[3]["file"] == two);
  CHECK(rows[2]["point"]["ranks"] == 2);
  CHECK(rows[2]["timing"]["bubble_rate"].get<double>() == Approx(one_f_one_b_bubble(2, 4)).margin(1e-12));
  auto text = run_schedcheck("compare examples/compare-p4-m8.yaml '" + two + "' --schedules 1f1b");
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("examples/compare-p4-m8.yaml: 4 ranks, 8 microbatches") != std::string::npos);
  CHECK(text.out.find(two + ": 2 ranks, 4 microbatches") != std::string::npos);
}

TEST_CASE("compare and run refuse inputs of another front-end, naming the file and the front-end", "[cli][compare]") {
  auto c = run_schedcheck("compare examples/router-mixtral-dropless.yaml --schedules 1f1b");
  CHECK(c.exit_code == 2);
  CHECK(c.out.find("examples/router-mixtral-dropless.yaml: compare takes pipeline") != std::string::npos);
  CHECK(c.out.find("front-end 'router'") != std::string::npos);
  auto f = run_schedcheck("compare examples/fsdp2-llama3-8b.yaml");
  CHECK(f.exit_code == 2);
  CHECK(f.out.find("front-end 'fsdp'") != std::string::npos);
  auto r = run_schedcheck("run examples/router-mixtral-dropless.yaml --dry-run");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("examples/router-mixtral-dropless.yaml: schedcheck run executes pipeline") != std::string::npos);
  CHECK(r.out.find("front-end 'router'") != std::string::npos);
}

}  // namespace

TEST_CASE("compare --svg refuses a picture of more than 64 timelines and writes nothing", "[compare]") {
  const std::string out = sc::test::write_temp("schedcheck-compare-sweep", "too-many.svg", "");
  std::remove(out.c_str());
  std::string mbs;
  for (int m = 4; m < 4 + 70; ++m) mbs += (mbs.empty() ? "" : ",") + std::to_string(m);
  auto r = sc::test::run_schedcheck("compare examples/compare-p4-m8.yaml --schedules 1f1b --microbatches " + mbs +
                                    " --svg '" + out + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--svg: 70 timelines holding") != std::string::npos);
  CHECK(r.out.find("at most 64 timelines") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));
}
