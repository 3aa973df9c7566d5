// plan sweeps: lists of models, GPUs and counts, split into shares run as separate processes
// (--shard K/N) and ranked together (--merge), as docs/commands/plan.md describes.
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"

namespace sc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// `j` without wall-clock figures ("seconds"), which differ between any two runs.
json without_seconds(json j) {
  if (j.is_object()) {
    j.erase("seconds");
    for (auto& [k, v] : j.items()) v = without_seconds(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = without_seconds(v);
  }
  return j;
}

const std::string kSweep =
    "plan --model llama3-8b,llama3-70b --hardware h100,a100-80gb --gpus 64,128 --global-batch-tokens 4M "
    "--seq-len 8192 --verify-top 2";

TEST_CASE("three shards run as separate processes merge to the single-process ranking", "[plan][sweep]") {
  const fs::path dir = fs::temp_directory_path() / "schedcheck_plan_sweep";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string shares;
  for (int k = 1; k <= 3; ++k) {
    const std::string path = (dir / ("share-" + std::to_string(k) + ".json")).string();
    test::CliRun r = test::run_schedcheck(kSweep + " --shard " + std::to_string(k) + "/3 -o '" + path + "'");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    json share = json::parse(std::ifstream(path));
    CHECK(share["shard"]["index"] == k);
    CHECK(share["shard"]["count"] == 3);
    // 8 points (2 models x 2 GPUs x 2 counts): share k holds points k-1, k+2, k+5.
    CHECK(share["points"].size() == (k < 3 ? 3u : 2u));
    CHECK(share["points"][0]["index"] == k - 1);
    shares += " '" + path + "'";
  }
  test::CliRun merged = test::run_schedcheck("plan --format json --merge" + shares, false);
  INFO(merged.out);
  REQUIRE(merged.exit_code == 0);
  test::CliRun single = test::run_schedcheck(kSweep + " --format json", false);
  REQUIRE(single.exit_code == 0);
  const json m = json::parse(merged.out), s = json::parse(single.out);
  CHECK(without_seconds(m) == without_seconds(s));
  REQUIRE(m["points"].size() == 8);
  for (size_t i = 0; i < 8; ++i) CHECK(m["points"][i]["index"] == i);
  // Each point's best holding layout, ranked by MFU, highest first; a point whose verified
  // layouts all fail (70B on 64 GPUs with --verify-top 2) comes after them with its reason.
  REQUIRE(m["ranking"].size() == 8);
  size_t holding = 0;
  while (holding < m["ranking"].size() && m["ranking"][holding].contains("mfu")) ++holding;
  CHECK(holding >= 4);
  for (size_t i = holding; i < m["ranking"].size(); ++i) {
    CHECK(m["ranking"][i]["verdict"] == "no layout holds");
    CHECK(m["ranking"][i]["reason"].get<std::string>().find("over the 80 GiB of HBM") != std::string::npos);
  }
  for (size_t i = 0; i + 1 < holding; ++i)
    CHECK(m["ranking"][i]["mfu"].get<double>() >= m["ranking"][i + 1]["mfu"].get<double>());
  // A ranking row is its point's first layout, with tokens/s per GPU from its step time.
  const json& top = m["ranking"][0];
  const json& pt = m["points"][top["index"].get<size_t>()];
  CHECK(top["step_time_s"] == pt["ranked"][0]["step_time_s"]);
  CHECK(top["tokens_per_s_per_gpu"].get<double>() ==
        Approx(4194304.0 / pt["ranked"][0]["step_time_s"].get<double>() / pt["gpus"].get<double>()));

  // The text of the merge: one row per point.
  test::CliRun text = test::run_schedcheck("plan --merge" + shares);
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("plan sweep: 8 points (llama3-8b, llama3-70b × h100, a100-80gb × 64, 128 GPUs)") !=
        std::string::npos);

  // Shares that are not one whole sweep are refused, naming what is wrong.
  const std::string one = (dir / "share-1.json").string(), three = (dir / "share-3.json").string();
  test::CliRun missing = test::run_schedcheck("plan --merge '" + one + "' '" + three + "'");
  CHECK(missing.exit_code == 2);
  CHECK(missing.out.find("share 2/3 missing") != std::string::npos);
  // A share is JSON whatever --format says; asking for text is refused rather than ignored.
  test::CliRun text_share = test::run_schedcheck(
      "plan --model llama3-8b --gpus 8 --global-batch-tokens 4M --seq-len 8192 --shard 1/2 --format text");
  CHECK(text_share.exit_code == 1);
  CHECK(text_share.out.find("--shard writes its share as JSON") != std::string::npos);
  test::CliRun twice = test::run_schedcheck("plan --merge '" + one + "' '" + one + "' '" + three + "'");
  CHECK(twice.exit_code == 2);
  CHECK(twice.out.find("share 1/3 again") != std::string::npos);
  const std::string other = (dir / "other.json").string();
  std::string other_sweep = kSweep;
  other_sweep.replace(other_sweep.find("--verify-top 2"), 14, "--verify-top 1");  // another sweep's share 2/3
  REQUIRE(test::run_schedcheck(other_sweep + " --shard 2/3 -o '" + other + "'").exit_code == 0);
  test::CliRun mixed = test::run_schedcheck("plan --merge '" + one + "' '" + other + "' '" + three + "'");
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.out.find("a share of another sweep") != std::string::npos);
  const std::string junk = (dir / "junk.json").string();
  std::ofstream(junk) << "{\"verdict\": \"holds\"}\n";
  test::CliRun bad = test::run_schedcheck("plan --merge '" + junk + "'");
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("not a plan share") != std::string::npos);
  // A share edited into another shape: a key of another type, a point moved to another share.
  json edited = json::parse(std::ifstream(one));
  edited["points"][0]["index"] = 1;  // point 1 belongs to share 2/3
  const std::string moved = (dir / "moved.json").string();
  std::ofstream(moved) << edited.dump();
  test::CliRun m2 = test::run_schedcheck("plan --merge '" + moved + "' '" + (dir / "share-2.json").string() + "' '" +
                                         three + "'");
  CHECK(m2.exit_code == 2);
  CHECK(m2.out.find("point 1 does not belong to share 1/3") != std::string::npos);
  edited = json::parse(std::ifstream(one));
  edited["points"][0].erase("ranked");
  std::ofstream(moved) << edited.dump();
  test::CliRun m3 = test::run_schedcheck("plan --merge '" + moved + "' '" + (dir / "share-2.json").string() + "' '" +
                                         three + "'");
  CHECK(m3.exit_code == 2);
  // The message names the share that lacks the key.
  CHECK(m3.out.find("--merge " + moved + ": not what `schedcheck plan --shard K/N` writes") != std::string::npos);
  // A point whose contents are not the sweep's at its index, or not a plan's figures.
  edited = json::parse(std::ifstream(one));
  edited["points"][0]["model"] = "llama3-405b";
  std::ofstream(moved) << edited.dump();
  test::CliRun m4 = test::run_schedcheck("plan --merge '" + moved + "' '" + (dir / "share-2.json").string() + "' '" +
                                         three + "'");
  CHECK(m4.exit_code == 2);
  CHECK(m4.out.find("point 0: model, hardware and GPUs are not the sweep's llama3-8b on 64 × h100") != std::string::npos);
  edited = json::parse(std::ifstream(one));
  edited["points"][0]["ranked"][0]["mfu"] = 5.0;
  std::ofstream(moved) << edited.dump();
  test::CliRun m5 = test::run_schedcheck("plan --merge '" + moved + "' '" + (dir / "share-2.json").string() + "' '" +
                                         three + "'");
  CHECK(m5.exit_code == 2);
  CHECK(m5.out.find("figures are not a plan's") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("plan refuses a malformed --shard and sweep options beside --merge", "[plan][sweep]") {
  for (const char* shard : {"0/3", "4/3", "3", "a/b", "1/0", "1/3x"}) {
    test::CliRun r = test::run_schedcheck(kSweep + " --shard " + shard);
    INFO(shard << ": " << r.out);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("expected K/N") != std::string::npos);
  }
  test::CliRun r = test::run_schedcheck("plan --merge x.json --gpus 8");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("--merge takes the shares alone") != std::string::npos);
  // The planning options a share was made with are in it: giving another beside --merge would
  // say nothing, so it is refused.
  // Given at their defaults too (12, 64): what counts is that they were given.
  for (const char* opt : {"--verify-top 3", "--max-pp 8", "--efficiency 0.5", "--verify-top 12", "--max-pp 64"}) {
    test::CliRun given = test::run_schedcheck(std::string("plan --merge x.json ") + opt);
    INFO(opt);
    CHECK(given.exit_code == 1);
    CHECK(given.out.find("--merge takes the shares alone") != std::string::npos);
  }
  test::CliRun twice = test::run_schedcheck("plan --model llama3-8b --gpus 64,64 --global-batch-tokens 4M --seq-len 8192");
  CHECK(twice.exit_code == 1);
  CHECK(twice.out.find("--gpus 64,64: a count twice") != std::string::npos);
  test::CliRun none = test::run_schedcheck("plan --gpus 8 --global-batch-tokens 4M --seq-len 8192");
  CHECK(none.exit_code == 1);
  CHECK(none.out.find("--model is required") != std::string::npos);
}

TEST_CASE("a sweep says why a point has no layout that holds", "[plan][sweep]") {
  // llama3-405b on 8 H100: 16 bytes of model states per parameter alone are 6.5 TB, 811 GB per
  // GPU, so the analytic memory bound rejects every candidate before any is verified.
  test::CliRun r = test::run_schedcheck(
      "plan --model llama3-405b,llama3-8b --gpus 8 --global-batch-tokens 4M --seq-len 8192 --verify-top 1");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);  // llama3-8b holds
  CHECK(r.out.find("llama3-405b      h100             8  no layout holds (") != std::string::npos);
  CHECK(r.out.find("rejected: memory above 80 GiB HBM by the analytic bound") != std::string::npos);
  test::CliRun j = test::run_schedcheck(
      "plan --model llama3-405b,llama3-8b --gpus 8 --global-batch-tokens 4M --seq-len 8192 --verify-top 1 --format json",
      false);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["sweep"]["efficiency"].is_null());  // each preset's own
  const auto& last = doc["ranking"].back();
  CHECK(last["model"] == "llama3-405b");
  CHECK(last["verdict"] == "no layout holds");
  CHECK(last["reason"].get<std::string>().find("analytic bound") != std::string::npos);
}

}  // namespace
}  // namespace sc
