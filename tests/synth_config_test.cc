// A schedule handed to torchtitan as a CSV (parallelism.pipeline_parallel_schedule_csv), the
// layer split's weights, and `synth` on a framework config: the comparison with the named
// schedules, and the CSV and config it writes, read back by verify with the same prediction.
#include <cmath>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "diag_util.h"
#include "cli_util.h"
#include "config/lower_job.h"
#include "config/readers.h"
#include "config/verify_job.h"
#include "spec/csv_schedule.h"
#include "test_util.h"

using namespace sc;
using sc::test::first_error;
using sc::test::has_finding;

namespace {

const std::string kExample = std::string(SCHEDCHECK_SOURCE_DIR) + "/examples/torchtitan-llama3-8b-pp2.toml";

/// The example config with `line` added after `pipeline_parallel_schedule = ...` and the
/// schedule renamed to `schedule`, written to a temp file `name`.
std::string variant(const std::string& name, const std::string& schedule, const std::string& line) {
  std::string text = test::read_file(kExample);
  const std::string key = "pipeline_parallel_schedule = \"Interleaved1F1B\"";
  const size_t at = text.find(key);
  REQUIRE(at != std::string::npos);
  text.replace(at, key.size(), fmt::format("pipeline_parallel_schedule = \"{}\"\n{}", schedule, line));
  return test::write_temp("schedcheck-synth-config-test", name, text);
}

/// A schedule as `schedcheck gen` writes it, in a temp CSV; its absolute path.
std::string gen_csv(const std::string& name, const std::string& args) {
  const std::string path = test::write_temp("schedcheck-synth-config-test", name, "");
  const test::CliRun r = test::run_schedcheck(fmt::format("gen {} -o '{}'", args, path));
  REQUIRE(r.exit_code == 0);
  return path;
}

config::JobContext a100x64() {
  config::JobContext ctx;
  ctx.gpus = 64;
  ctx.hardware = "a100";
  return ctx;
}

struct Verified {
  bool read = false;
  config::VerifiedJob v;
  Diagnostics diags;
};

Verified verify_config(const std::string& path) {
  Verified out;
  config::TrainingJob job;
  out.read = config::read_torchtitan(path, a100x64(), &job, out.diags) &&
             config::verify_job(job, a100x64(), false, &out.v, out.diags);
  return out;
}

}  // namespace

TEST_CASE("torchtitan layer split: generate_llm_fqn_per_model_part's blocks per stage and its refusals", "[config][synth]") {
  std::string why;
  // Llama 3 8B (32 blocks) over 4 stages with the default weights: 34 effective layers, 8 each
  // and 2 extra: 9-1, 9, 8, 8-1 (torchtitan@02ef790 distributed/pipeline_parallel.py).
  CHECK(config::torchtitan_stage_layers(32, 4, 1, 1, &why) == std::vector<int64_t>{8, 9, 8, 7});
  // last_stage_less_layers = 9: 42 effective, 10 each, 2 extra: 11-1, 11, 10, 10-9.
  CHECK(config::torchtitan_stage_layers(32, 4, 1, 9, &why) == std::vector<int64_t>{10, 11, 10, 1});
  CHECK(config::torchtitan_stage_layers(32, 1, 1, 1, &why) == std::vector<int64_t>{32});
  CHECK(config::torchtitan_stage_layers(32, 4, 0, 0, &why) == std::vector<int64_t>{8, 8, 8, 8});
  // A weight above the smallest share, and more stages than effective layers, are torchtitan's errors.
  CHECK(config::torchtitan_stage_layers(32, 4, 1, 12, &why).empty());
  CHECK_THAT(why, Catch::Contains("output_weight (12) exceeds minimum layers per stage (11"));
  CHECK(config::torchtitan_stage_layers(2, 8, 1, 1, &why).empty());
  CHECK_THAT(why, Catch::Contains("Number of stages (8) cannot be greater than effective layers (4"));
}

TEST_CASE("torchtitan: pipeline_parallel_first/last_stage_less_layers move blocks between stages", "[config][synth]") {
  const std::string path =
      variant("last9.toml", "Interleaved1F1B", "pipeline_parallel_last_stage_less_layers = 9");
  Verified r = verify_config(path);
  REQUIRE(r.read);
  CHECK(r.v.lowered.costs.stage_layers == std::vector<int64_t>{10, 11, 10, 1});
  // Refused as torchtitan refuses it, at the key.
  const std::string bad = variant("last10.toml", "Interleaved1F1B", "pipeline_parallel_last_stage_less_layers = 12");
  Verified b = verify_config(bad);
  CHECK_FALSE(b.read);
  CHECK_THAT(first_error(b.diags), Catch::StartsWith("49:1: output_weight (12) exceeds minimum layers per stage"));
}

TEST_CASE("torchtitan: a schedule CSV is run in place of the named order, placed as the named class places stages",
          "[config][synth]") {
  Verified named = verify_config(kExample);
  REQUIRE(named.read);
  REQUIRE(named.v.prediction.complete);
  // The named schedule written as a CSV predicts exactly the named schedule's step.
  const std::string i = gen_csv("i.csv", "interleaved-1f1b --ranks 2 --chunks 2 --microbatches 8");
  Verified same = verify_config(variant("csv-i.toml", "Interleaved1F1B", fmt::format("pipeline_parallel_schedule_csv = \"{}\"", i)));
  REQUIRE(same.read);
  CHECK(same.v.prediction.step_s == named.v.prediction.step_s);
  CHECK(same.v.lowered.pipeline.placement == "loop");
  // Another order at the same placement changes the prediction: the CSV is what runs.
  const std::string zb = gen_csv("izb.csv", "interleaved-zb --ranks 2 --chunks 2 --microbatches 8");
  Verified other = verify_config(variant("csv-izb.toml", "Interleaved1F1B", fmt::format("pipeline_parallel_schedule_csv = \"{}\"", zb)));
  REQUIRE(other.read);
  CHECK(other.v.prediction.step_s < named.v.prediction.step_s);
  // ZBVZeroBubble's V placement with a V order holds; the same V order under a loop class does
  // not place: rank 0 would run stage 3, which the loop builds on rank 1.
  const std::string v = gen_csv("v.csv", "zb-v --ranks 2 --microbatches 8");
  Verified vok = verify_config(variant("csv-v.toml", "ZBVZeroBubble", fmt::format("pipeline_parallel_schedule_csv = \"{}\"", v)));
  REQUIRE(vok.read);
  CHECK(vok.v.lowered.pipeline.placement == "v");
  CHECK(vok.v.exit_code == 0);
  Verified vbad = verify_config(variant("csv-v-loop.toml", "Interleaved1F1B", fmt::format("pipeline_parallel_schedule_csv = \"{}\"", v)));
  CHECK_FALSE(vbad.read);
  CHECK_THAT(first_error(vbad.diags), Catch::Contains("rank 0 runs 3F0, but torchtitan builds stage 3 on rank 1"));
  // A CSV for four ranks, and one that does not exist.
  const std::string wide = gen_csv("p4.csv", "1f1b --ranks 4 --microbatches 8");
  Verified rows = verify_config(variant("csv-p4.toml", "1F1B", fmt::format("pipeline_parallel_schedule_csv = \"{}\"", wide)));
  CHECK_FALSE(rows.read);
  CHECK_THAT(first_error(rows.diags), Catch::Contains("has 4 rows (one per pipeline rank), but pipeline_parallel_degree is 2"));
  Verified missing = verify_config(variant("csv-missing.toml", "1F1B", "pipeline_parallel_schedule_csv = \"/nonexistent/s.csv\""));
  CHECK_FALSE(missing.read);
  CHECK_THAT(first_error(missing.diags), Catch::Contains("does not exist or is not a file: torchtitan opens the path"));
}

TEST_CASE("synth on a torchtitan config: compared with every named schedule, emitted CSV and config verify to the same "
          "step", "[config][synth][cli]") {
  const std::string dir = std::filesystem::path(test::write_temp("schedcheck-synth-config-test", "keep", "")).parent_path();
  const std::string csv = dir + "/synth.csv", toml = dir + "/synth.toml";
  std::filesystem::remove(csv);
  std::filesystem::remove(toml);
  const test::CliRun r = test::run_schedcheck(
      fmt::format("synth examples/torchtitan-llama3-8b-pp2.toml --gpus 64 --hardware a100 --time-limit 6s "
                  "--format json --emit-csv '{}' --emit '{}'", csv, toml),
      false);
  INFO(r.out);
  REQUIRE((r.exit_code == 0 || r.exit_code == 5));
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Every named schedule torchtitan offers is a row, at the config's split; GPipe and LoopedBFS
  // run every forward before any backward and exceed 80 GiB.
  std::vector<std::string> named;
  for (const auto& row : j["schedules"])
    if (!row["synthesised"].get<bool>()) named.push_back(row["label"]);
  CHECK(named == std::vector<std::string>{"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
                                          "ZBVZeroBubble", "DualPipeV"});
  CHECK_FALSE(j["schedules"][0]["holds"].get<bool>());
  CHECK(j["schedules"][1]["holds"].get<bool>());
  REQUIRE(j["best_synthesised"].is_number());
  REQUIRE(j["best_named"].is_number());
  const auto& best = j["schedules"][j["best_synthesised"].get<int>()];
  const auto& best_named = j["schedules"][j["best_named"].get<int>()];
  // At equal memory: the searches ran under the fastest named schedule's peak, and the search
  // starts from it, so the best order is no slower and no larger.
  CHECK(best["step_s"].get<double>() <= best_named["step_s"].get<double>() * (1 + 1e-9));
  CHECK(best["peak_bytes"].get<int64_t>() <= best_named["peak_bytes"].get<int64_t>());
  // The emitted config is the user's file with only the schedule keys edited: every other line
  // (comments, order, `lr = 3e-4` as written) is kept byte for byte.
  const std::string original = test::read_file(test::source_path("examples/torchtitan-llama3-8b-pp2.toml"));
  const std::string emitted = test::read_file(toml);
  const std::regex schedule_key(R"(^pipeline_parallel_(schedule|schedule_csv|first_stage_less_layers|last_stage_less_layers|layers_per_stage) = )");
  auto without_schedule_keys = [&](const std::string& text) {
    std::vector<std::string> kept;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (!std::regex_search(line, schedule_key)) kept.push_back(line);
    return kept;
  };
  CHECK(without_schedule_keys(emitted) == without_schedule_keys(original));
  CHECK(emitted.find("lr = 3e-4\n") != std::string::npos);
  // The order handed back: a synthesised one is the CSV torchtitan loads; when no synthesised order
  // is shorter than the best named schedule, that schedule by name and no CSV.
  REQUIRE(j["handed_back"].is_object());
  const bool named_best = j["handed_back"]["named"].get<bool>();
  const std::string cls = j["handed_back"]["torchtitan_class"];
  CHECK(emitted.find("pipeline_parallel_schedule = \"" + cls + "\"") != std::string::npos);
  CHECK(std::filesystem::exists(csv) == !named_best);
  CHECK((emitted.find("pipeline_parallel_schedule_csv") != std::string::npos) == !named_best);
  const auto& handed = named_best ? best_named : best;
  // verify of the emitted config predicts the same step (the done-when: 0.1 %).
  const test::CliRun v = test::run_schedcheck(fmt::format("verify '{}' --format json", toml), false);
  INFO(v.out);
  REQUIRE(v.exit_code == 0);
  const nlohmann::json vj = nlohmann::json::parse(v.out);
  const nlohmann::json& job = vj["job"];
  CHECK(std::abs(job["predicted"]["step_time_s"].get<double>() / handed["step_s"].get<double>() - 1) < 1e-3);
  if (named_best) return;
  CHECK(job["schedule_csv"] == csv);
  // The CSV is PyTorch's compute-only form: our reader takes it back and writes the same bytes.
  const std::string text = test::read_file(csv);
  Diagnostics d;
  auto cs = parse_csv_schedule("synth.csv", text, d, CsvFormat::kComputeOnly);
  REQUIRE(cs);
  CHECK(cs->actions.size() == 2);
  CHECK(write_csv_schedule(cs->actions) == text);
}

TEST_CASE("synth --emit hands back a synthesised order as a CSV when no named schedule that fits the memory is as "
          "fast, editing only the schedule keys", "[config][synth][cli]") {
  // Under 44.5 GiB the fastest named schedule (ZBVZeroBubble, 45.3 GiB with the unsharded fp32
  // gradients PyTorch's pipelining runtime holds) does not fit; a synthesised order does, faster
  // than every named schedule that fits, and is handed back as the CSV torchtitan loads.
  const std::string dir = std::filesystem::path(test::write_temp("schedcheck-synth-config-csv", "keep", "")).parent_path();
  const std::string csv = dir + "/synth.csv", toml = dir + "/synth.toml";
  std::filesystem::remove(csv);
  std::filesystem::remove(toml);
  const test::CliRun r = test::run_schedcheck(
      fmt::format("synth examples/torchtitan-llama3-8b-pp2.toml --gpus 64 --hardware a100 --time-limit 6s "
                  "--memory-limit 44.5GiB --format json --emit-csv '{}' --emit '{}'", csv, toml),
      false);
  INFO(r.out);
  REQUIRE((r.exit_code == 0 || r.exit_code == 5));
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["handed_back"].is_object());
  CHECK_FALSE(j["handed_back"]["named"].get<bool>());
  REQUIRE(std::filesystem::exists(csv));
  const std::string original = test::read_file(test::source_path("examples/torchtitan-llama3-8b-pp2.toml"));
  const std::string emitted = test::read_file(toml);
  // Line by line: the same file with the schedule line replaced and the CSV line added after the
  // table's last key.
  std::string expected = original;
  const std::string cls = j["handed_back"]["torchtitan_class"];
  expected.replace(expected.find("pipeline_parallel_schedule = \"Interleaved1F1B\""), 46,
                   "pipeline_parallel_schedule = \"" + cls + "\"");
  const size_t cp = expected.find("context_parallel_degree = 1\n");
  REQUIRE(cp != std::string::npos);
  const auto& best = j["schedules"][j["best_synthesised"].get<int>()];
  const int first = best["split"]["input_weight"], last = best["split"]["output_weight"];
  std::string added = "pipeline_parallel_schedule_csv = \"" + csv + "\"\n";
  if (first != 1) added += fmt::format("pipeline_parallel_first_stage_less_layers = {}\n", first);  // torchtitan's default: 1
  if (last != 1) added += fmt::format("pipeline_parallel_last_stage_less_layers = {}\n", last);
  expected.insert(cp + 28, added);
  CHECK(emitted == expected);
  const test::CliRun v = test::run_schedcheck(fmt::format("verify '{}' --format json", toml), false);
  INFO(v.out);
  REQUIRE(v.exit_code == 0);
  const nlohmann::json vj = nlohmann::json::parse(v.out);
  CHECK(vj["job"]["schedule_csv"] == csv);
  CHECK(std::abs(vj["job"]["predicted"]["step_time_s"].get<double>() / best["step_s"].get<double>() - 1) < 1e-3);
}

TEST_CASE("synth on configs: what it refuses", "[config][synth][cli]") {
  // --emit names a CSV: without --emit-csv nothing is searched (a usage error, exit 1).
  test::CliRun r = test::run_schedcheck("synth examples/torchtitan-llama3-8b-pp2.toml --gpus 64 --emit /tmp/x.toml");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("give --emit-csv too"));
  // Megatron-LM runs its named schedules only.
  r = test::run_schedcheck("synth examples/megatron-mixtral-8x7b.sh --emit-csv /tmp/x.csv --emit /tmp/x.toml");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("Megatron-LM runs only its named schedules"));
  // A config without a pipeline: an input error at the key, exit 2.
  const std::string flat = test::write_temp("schedcheck-synth-config-test", "pp1.toml",
                                            "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
                                            "pipeline_parallel_degree = 1\n");
  r = test::run_schedcheck(fmt::format("synth '{}' --gpus 8", flat));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Catch::Contains("no pipeline parallelism"));
}
