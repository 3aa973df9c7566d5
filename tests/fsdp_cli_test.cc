// Command-line tests of `schedcheck verify` on FSDP specs: the bundled examples and bad input.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "test_util.h"

namespace {

using sc::test::run_schedcheck;

std::string temp_fsdp_spec(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "schedcheck-fsdp-cli-test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST_CASE("the Llama-3-8B-like FSDP2 example holds and reports step time, overlap and memory", "[fsdp][cli]") {
  auto r = run_schedcheck("verify examples/fsdp2-llama3-8b.yaml --format json", false);
  CHECK(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["verdict"] == "holds");
  CHECK(j["fsdp"]["implementation"] == "fsdp2");
  CHECK(j["fsdp"]["units"].size() == 34);
  const auto& f = j["fsdp_figures"];
  // docs/facts/fsdp-zero.md: (N-1)/N x (2 + 1) x parameter bytes, N = 8.
  double params = f["params_bytes"];
  CHECK(double(f["comm_bytes_per_step"]) == Approx(7.0 / 8.0 * 3.0 * params));
  CHECK(double(f["overlap"]) > 0.9);
  CHECK(f["step_time_s"].size() == 2);
  // Every rank runs the same program: one rank is built for the 8 (docs/facts/symmetry.md),
  // and the per-rank arrays have its one entry.
  REQUIRE(j["rank_classes"].size() == 1);
  CHECK(j["rank_classes"][0]["first"] == 0);
  CHECK(j["rank_classes"][0]["ranks"] == 8);
  REQUIRE(f["peak_bytes_per_step"][0].size() == 1);
  // Step 1 carries the optimizer state: its peak is higher than step 0's.
  CHECK(f["peak_bytes_per_step"][1][0].get<int64_t>() > f["peak_bytes_per_step"][0][0].get<int64_t>());
  CHECK(j["memory"]["worst_case_bytes_per_rank"][0].get<int64_t>() <= int64_t{80} << 30);
  CHECK(j["stats"]["collectives"].get<int>() > 0);
}

TEST_CASE("the eager-prefetch example exceeds 80 GiB (exit 13) and names the live gathered parameters",
          "[fsdp][cli]") {
  auto r = run_schedcheck("verify examples/fsdp2-llama3-8b-eager-prefetch.yaml");
  CHECK(r.exit_code == 13);
  // Every rank runs the same program: one finding names them all.
  CHECK(r.out.find("VIOLATED: memory (1 finding, exit 13)") != std::string::npos);
  CHECK(r.out.find("memory: ranks 0-7: each exceeds its memory limit: predicted peak 81.39 GiB") != std::string::npos);
  CHECK(r.out.find("live bytes by kind: optimizer-state 7.47 GiB (1), act 57.09 GiB (34), param 7.47 GiB (17), ag-buffer 6.5 GiB (16)") != std::string::npos);
}

TEST_CASE("the divergent-rank example hangs (deadlock + collective mismatch, exit 10) naming rank 3", "[fsdp][cli]") {
  auto r = run_schedcheck("verify examples/fsdp-divergent-rank-hang.yaml --format json", false);
  CHECK(r.exit_code == 10);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["findings"].size() == 2);
  CHECK(j["findings"][0]["kind"] == "deadlock");
  CHECK(j["findings"][0]["ranks"][0] == 3);
  std::string msg = j["findings"][0]["message"];
  CHECK(msg.find("hang caused by rank 3") == 0);
  CHECK(msg.find("'AG layer.8'") != std::string::npos);
  CHECK(msg.find("'AG layer.7'") != std::string::npos);
  // Layer 8's all-gather has layer 7's size, so the ranks run on (mixing the layers' shards) until
  // the sizes differ: rank 3's gather of the head meets the others' of layer 31, and all hang
  // there (NCCL compares no sizes). No P2P message in an FSDP program: the hang does not name
  // P2P semantics that play no part.
  CHECK(msg.find("waits in all-gather #33 on communicator 'shard 0', which its members issue with different kinds or "
                 "sizes (ranks 0-2, 4-7: all-gather of 415.8 MiB; rank 3: all-gather of 1001.36 MiB)") != std::string::npos);
  CHECK(msg.find("semantics") == std::string::npos);
  // Located first where the spec makes rank 3 differ: its ranks_override entry (line 17).
  const auto& at = j["findings"][0]["locations"][0];
  INFO(at.dump());
  CHECK(at["line"] == 17);
  CHECK(j["findings"][0]["ops"][0] == "rank 3's ranks_override entry");
  CHECK(j["findings"][1]["kind"] == "channel");
  CHECK(j["findings"][1]["locations"][0]["line"] == 17);
  CHECK(j["timing"].is_null());
  CHECK(j["fsdp_figures"].is_null());
}

TEST_CASE("a bad fsdp spec is a located error with exit 2, and nothing is written", "[fsdp][cli]") {
  std::string bad = temp_fsdp_spec("bad.yaml",
                                   "schedcheck: 1\nranks: 8\nfsdp:\n  implementation: fsdp3\n  link: {bandwidth: 1GB/s}\n"
                                   "  units:\n    - {name: a, params_bytes: 1GiB, forward: 1ms, backward: 2ms}\n");
  std::string trace = (std::filesystem::temp_directory_path() / "schedcheck-fsdp-cli-test" / "t.json").string();
  std::filesystem::remove(trace);
  auto r = run_schedcheck("verify '" + bad + "' --trace '" + trace + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("bad.yaml:4:19: error:") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(trace));
}

TEST_CASE("verify --trace writes the FSDP timeline with collectives on their streams", "[fsdp][cli]") {
  std::string trace = (std::filesystem::temp_directory_path() / "schedcheck-fsdp-cli-test" / "fsdp-trace.json").string();
  auto r = run_schedcheck("verify examples/fsdp2-llama3-8b.yaml --trace '" + trace + "'");
  CHECK(r.exit_code == 0);
  auto j = nlohmann::json::parse(sc::test::read_file(trace));
  bool all_gather = false;
  for (const auto& e : j["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("name", "").rfind("AG layer.", 0) == 0) all_gather = true;
  CHECK(all_gather);
}

}  // namespace

namespace {

TEST_CASE("fsdp specs too large to check, or with an infinite collective time, are refused with exit 2",
          "[fsdp][cli]") {
  std::string many = temp_fsdp_spec("many.yaml",
                                    "schedcheck: 1\nranks: 2\nfsdp:\n  link: {bandwidth: 100GB/s}\n  units:\n"
                                    "    - {name: l, repeat: 8000, params_bytes: 1MiB, forward: 1ms, backward: 2ms}\n");
  auto r = run_schedcheck("verify '" + many + "' --format json", false);
  CHECK(r.exit_code == 2);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["verdict"] == "error");
  CHECK(j["diagnostics"][0]["line"] == 3);
  CHECK(j["diagnostics"][0]["message"].get<std::string>().find("each rank runs about 1.92e+05 ops") == 0);
  std::string slow = temp_fsdp_spec("slow.yaml",
                                    "schedcheck: 1\nranks: 2\nfsdp:\n  link: {bandwidth: 1e-300B/s}\n  units:\n"
                                    "    - {name: l, params_bytes: 1GiB, forward: 1ms, backward: 2ms}\n");
  auto s = run_schedcheck("verify '" + slow + "'");
  CHECK(s.exit_code == 2);
  CHECK(s.out.find("slow.yaml:3:1: error: an all-gather of the largest unit would take inf s") != std::string::npos);
}

}  // namespace
