// Command-line edges a newcomer meets: one message for a missing file whatever its front-end, a
// bad file among good ones as an entry of its own, and synth at a shape the spec does not give.
#include <string>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "test_util.h"

namespace {
using nlohmann::json;
using sc::test::run_schedcheck;
}  // namespace

TEST_CASE("a missing input gets one form of message whichever front-end its name points to", "[cli]") {
  // Before: "<generated>: error: cannot read nope.toml", "nope.yaml:1:1: error: cannot read the spec",
  // "nope.json:1:1: error: cannot read the DeepSpeed config", ...
  for (const std::string ext : {"toml", "yaml", "csv", "json", "sh"}) {
    auto r = run_schedcheck("verify nope-missing." + ext);
    INFO(r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.rfind("nope-missing." + ext + ": error: cannot read nope-missing." + ext + ": no such file\n", 0) == 0);
  }
}

TEST_CASE("a bad file among good ones is an entry of its own and the good ones are still checked", "[cli]") {
  auto r = run_schedcheck("verify examples/gpu-1f1b-p4-m8.yaml examples/gpu-zbh1-p4-m8.yaml specs/invalid/nope-missing.yaml "
                          "--format json", false);
  CHECK(r.exit_code == 2);
  const json j = json::parse(r.out);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 3);
  CHECK(j[0]["verdict"] == "holds");
  CHECK(j[1]["verdict"] == "holds");
  CHECK(j[2]["verdict"] == "error");
  CHECK(j[2]["path"] == "specs/invalid/nope-missing.yaml");
  CHECK(j[2]["diagnostics"][0]["message"].get<std::string>().find("no such file") != std::string::npos);
}

TEST_CASE("synth takes --microbatches, --ranks and --stages over the spec's", "[cli][synth]") {
  // examples/synth-p4-m8.yaml (p = 4, T_F = T_I = T_W = 1 s, M_B = 2, M_W = 1) at m = 16 with a
  // limit of 10: the work per rank is 3 m T = 48 s, and the memory-aware bound B1 at stage 0
  // (docs/commands/synth.md) lifts it to 50 s, which a schedule reaches: 50 s proven optimal.
  auto m16 = run_schedcheck("synth examples/synth-p4-m8.yaml --microbatches 16 --memory-limit 10");
  INFO(m16.out);
  CHECK(m16.exit_code == 0);
  CHECK(m16.out.find("span 50 s") != std::string::npos);
  CHECK(m16.out.find("optimal") != std::string::npos);
  auto p8 = run_schedcheck("synth examples/synth-p4-m8.yaml --ranks 8 --format json", false);
  INFO(p8.out);
  REQUIRE(p8.exit_code == 0);
  const json j = json::parse(p8.out);
  CHECK(j["actions"].size() == 8);
  auto bad = run_schedcheck("synth examples/synth-p4-m8.yaml --ranks 3 --stages 8");
  CHECK(bad.exit_code == 2);
}

TEST_CASE("a launch script's environment comes from --env, which is refused where it cannot apply", "[cli]") {
  const std::string path = sc::test::write_temp(
      "schedcheck-cli-edges", "slurm.sh",
      "NNODES=${SLURM_NNODES:-1}\n"
      "torchrun --nproc_per_node 8 --nnodes $NNODES pretrain_gpt.py --num-layers 32 --hidden-size 4096 \\\n"
      "  --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --vocab-size 128256 \\\n"
      "  --micro-batch-size 1 --global-batch-size 64 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2\n");
  auto r = run_schedcheck("verify '" + path + "' --hardware h100 --env SLURM_NNODES=4 --format json", false);
  INFO(r.out);
  REQUIRE(r.out.find('{') != std::string::npos);
  const json j = json::parse(r.out.substr(r.out.find('{')));
  CHECK(j["job"]["world"] == 32);
  auto bad = run_schedcheck("verify '" + path + "' --env 4X=1");
  CHECK(bad.exit_code == 1);
  CHECK(bad.out.find("--env 4X=1: expected NAME=VALUE") != std::string::npos);
  auto twice = run_schedcheck("verify '" + path + "' --env A=1 --env A=2");
  CHECK(twice.exit_code == 1);
  CHECK(twice.out.find("--env A is given twice") != std::string::npos);
  auto other = run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml --env A=1");
  CHECK(other.exit_code == 1);
  CHECK(other.out.find("--env does not apply to examples/llama7b-pp8-1f1b.yaml") != std::string::npos);
}

TEST_CASE("diff takes the facts a framework config leaves out, and a JSON that is no DeepSpeed config is not read as one", "[cli][diff]") {
  // DeepSpeed JSONs state neither the world size, the model nor the sequence length: diff takes
  // them as verify does, for both sides.
  const std::string ds = sc::test::write_temp(
      "schedcheck-cli-edges", "ds.json",
      "{\"train_micro_batch_size_per_gpu\": 2, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3}}\n");
  auto d = run_schedcheck("diff '" + ds + "' '" + ds + "' --gpus 8 --model llama3-8b --hardware h100 --seq-len 4096 --format json", false);
  INFO(d.out);
  REQUIRE(d.exit_code == 0);
  const json j = json::parse(d.out);
  CHECK(j["diffs"][0]["figures"]["tokens_per_step"]["new"] == 65536.0);  // 2 sequences x 8 ranks x 4096
  // A JSON with no top-level DeepSpeed key (schedcheck's own report) goes to the spec reader.
  const std::string report = sc::test::write_temp("schedcheck-cli-edges", "report.json", "{\"verdict\": \"holds\", \"findings\": []}\n");
  auto r = run_schedcheck("verify '" + report + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("DeepSpeed") == std::string::npos);
  CHECK(r.out.find("missing required key 'schedcheck'") != std::string::npos);
}

TEST_CASE("run --force of a malformed schedule stops with the schedule's exit, not an internal error", "[cli][run]") {
  // A W before its I frees the weight-gradient inputs before they exist: the plan cannot be
  // built, which is the schedule's fault (verify's structure finding), exit 12, never 70.
  const std::string csv = sc::test::write_temp("schedcheck-run-force", "w-first.csv", "0F0,0W0,0I0\n");
  auto r = run_schedcheck("run '" + csv + "' --dry-run --force");
  CHECK(r.exit_code == 12);
  CHECK(r.out.find("cannot run: op 0W0 frees buffer") != std::string::npos);
  CHECK(r.out.find("the schedule is malformed (verify reports") != std::string::npos);
  CHECK(r.out.find("internal error") == std::string::npos);
}
