// The cost model (src/model) against the figures docs/facts/cost-formulas.md derives, and the torchtitan reader
// on torchtitan's own configs and on changes a framework would refuse.
#include <cmath>
#include <cstdio>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "config/lower_job.h"
#include "config/readers.h"
#include "model/cost_model.h"
#include "support/diagnostics.h"
#include "test_util.h"

using namespace sc;
using namespace sc::model;

namespace {

double rel(double a, double b) { return std::abs(a - b) / std::abs(b); }

/// Line of the first line of `path` containing `needle` (1-based), 0 when absent.
int line_of(const std::string& path, const std::string& needle) {
  std::istringstream in(test::read_file(path));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(needle) != std::string::npos) return n;
  return 0;
}

/// The corpus TOML `name` with `from` replaced by `to`, written to a temp file.
std::string changed(const std::string& name, const std::string& from, const std::string& to) {
  std::string text = test::read_file(test::corpus_dir() + "/torchtitan/" + name);
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  return test::write_temp("schedcheck-config-test", "changed-" + name, text);
}

/// Reads torchtitan TOML `text`, written to a temporary file `name`, on 8 GPUs into `d`; true
/// when it reads without errors.
bool read_torchtitan_text(const std::string& name, const std::string& text, Diagnostics& d) {
  config::TrainingJob job;
  config::JobContext ctx;
  ctx.gpus = 8;
  return config::read_torchtitan(test::write_temp("schedcheck-config-test", name, text), ctx, &job, d);
}

bool has_error_at(const Diagnostics& d, int line, const std::string& words) {
  for (const Diagnostic& x : d.all())
    if (x.severity == Severity::kError && x.loc.line == line && x.message.find(words) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("cost model: parameter counts of the presets match docs/facts/config-keys.md", "[model]") {
  // docs/facts/config-keys.md#model-flavors, [D] counts from torchtitan's flavor tables.
  CHECK(rel(model_preset("llama3-8b")->total_params(), 8.03e9) < 0.005);
  CHECK(rel(model_preset("llama3-70b")->total_params(), 70.55e9) < 0.005);
  CHECK(rel(model_preset("llama3-405b")->total_params(), 405.85e9) < 0.005);
  const ModelDesc ds = *model_preset("deepseek-v3-16b");
  CHECK(rel(ds.total_params(), 15.7e9) < 0.02);
  CHECK(rel(ds.active_params(), 2.7e9) < 0.03);
  const ModelDesc l4 = *model_preset("llama4-17bx128e");
  CHECK(rel(l4.total_params(), 400.7e9) < 0.01);
  CHECK(rel(l4.active_params(), 17.2e9) < 0.02);
  // llama3 8B per layer: 41.9M attention + 176.2M MLP = 218.1M (docs/facts/config-keys.md#model-flavors).
  CHECK(rel(model_preset("llama3-8b")->layer_params(0), 218.1e6) < 0.001);
  CHECK_FALSE(model_preset("llama3-9b"));
  CHECK(torchtitan_preset("llama3", "8B") == "llama3-8b");
  CHECK(torchtitan_preset("llama3", "debugmodel") == "llama3-debug");
}

TEST_CASE("cost model: FLOPs per token follow torchtitan's count", "[model]") {
  // docs/facts/cost-formulas.md#flops: Llama-3-8B at s = 8192 is 57.9 GFLOP per token, 45.0 of them from 6·N.
  const ModelDesc m = *model_preset("llama3-8b");
  CHECK(rel(m.training_flops_per_token(8192), 57.9e9) < 0.005);
  CHECK(rel(6.0 * (m.active_params() - m.embedding_params()), 45.0e9) < 0.005);
}

TEST_CASE("cost model: activation bytes per layer and recompute", "[model]") {
  // docs/facts/cost-formulas.md#activation-memory worked example: Megatron's s·b·h·(18 + 4F/h) for 8B at s = 8192 is 1.07 GB
  // per layer; full recompute keeps 2·s·b·h = 0.067 GB.
  CostInputs in;
  in.model = *model_preset("llama3-8b");
  in.hardware = *hardware_preset("h100");
  in.seq_len = 8192;
  in.microbatch_sequences = 1;
  LayerCost c = layer_cost(in, 0);
  CHECK(rel(c.activation_bytes, 1.07e9) < 0.01);
  CHECK(c.retained_bytes == c.activation_bytes);
  CHECK(c.recompute_s == 0);
  in.recompute = sc::model::Recompute::kFull;
  c = layer_cost(in, 0);
  CHECK(rel(c.retained_bytes, 0.067e9) < 0.01);
  CHECK(c.recompute_s == c.forward_s);
  // Backward for inputs does the linear work once and the attention core twice; W the linear,
  // at the efficiency of each GEMM's size, and its operands' HBM time
  // (docs/facts/cost-formulas.md#memory-time-of-a-kernel).
  const double rate = in.hardware.peak_flops * in.eff.compute;
  CHECK(c.gemm_memory_s > 0);
  CHECK(rel(c.weight_grad_s, 8192 * in.model.layer_linear_flops_per_token(0) / rate *
                                 sc::model::layer_gemm_time_factor(in, 0) + c.gemm_memory_s) < 1e-9);
  CHECK(c.input_grad_s > c.forward_s);
  // TP 8 with SP divides the activation by 8 and adds 4 ring collectives per direction.
  in.recompute = sc::model::Recompute::kNone;
  in.layout.tp = 8;
  const LayerCost t = layer_cost(in, 0);
  CHECK(t.activation_bytes == c.activation_bytes / 8);
  // NVLink at 0.8 of its 450 GB/s: the 360 GB/s bus bandwidth NCCL reaches on 8 H100s
  // (docs/facts/hardware.md#published-mfu).
  const double bytes = 8192.0 * 4096 * 2, bw = 450e9 * 0.8;
  CHECK(rel(t.tp_comm_s, 4 * (10e-6 + 7.0 / 8 * bytes / bw)) < 1e-9);
  // The elementwise ops stream 34·h + 12·kv + 5·F elements per token in eager PyTorch (h = 4096,
  // kv = 1024, F = 14336: 223,232) and 12·h + 2·kv + 3·F fused (94,208), 2 bytes each at the
  // HBM's 3.35 TB/s, split over the TP ranks (docs/facts/cost-formulas.md#elementwise-ops), at
  // 0.75 of it: one op moves 2 × 8192 × 4096 × 2 / 8 = 16.8 MB, between 10 and 100 MB
  // (docs/facts/cost-formulas.md#memory-time-of-a-kernel).
  CHECK(elementwise_elements_per_token(in.model, 0, false) == 223232);
  CHECK(elementwise_elements_per_token(in.model, 0, true) == 94208);
  CHECK(rel(t.elementwise_s, 8192.0 * 223232 * 2 / 8 / (3.35e12 * 0.75)) < 1e-9);
  in.fused_elementwise = true;
  CHECK(rel(layer_cost(in, 0).elementwise_s, 8192.0 * 94208 * 2 / 8 / (3.35e12 * 0.75)) < 1e-9);
  // The forward pays it once, the input-gradient pass twice.
  CHECK(rel(t.forward_s - t.tp_comm_s - t.elementwise_s, (t.input_grad_s - t.tp_comm_s - 2 * t.elementwise_s) -
                                                           8192.0 * in.model.layer_attention_flops_per_token(8192) / 8 / 2 / rate) < 1e-9);
}

TEST_CASE("cost model: model-state bytes per parameter and the FSDP crossover", "[model]") {
  // docs/facts/cost-formulas.md#bytes-per-parameter: ZeRO mixed precision 16 per parameter; Megatron bf16 + fp32 grads 18,
  // distributed optimizer 6 + 12/d.
  CHECK(state_bytes_per_param(StateSharding::kReplicated, 1, true) == 18);
  CHECK(state_bytes_per_param(StateSharding::kOptimizer, 8, true) == 6 + 12.0 / 8);
  CHECK(state_bytes_per_param(StateSharding::kFull, 64, true) == 16.0 / 64);
  // docs/facts/hardware.md#gpus, docs/facts/cost-formulas.md#fsdp-crossover: H100 across nodes C/W = 989e12 / 400e9 = 2472; fp32 reduce ×1.5 = 3709.
  CHECK(std::abs(fsdp_crossover_tokens(2, 4, 989e12, 400e9) - 3709) < 1);
  CHECK(link_tier(*hardware_preset("h100"), 1, 8) == LinkTier::kIntraNode);
  CHECK(link_tier(*hardware_preset("h100"), 8, 4) == LinkTier::kInterNode);
  CHECK(ring_time_s(1e9, 1, 1e9, 1e-5, false) == 0);
  CHECK(rel(ring_time_s(1e9, 4, 1e9, 0, true), 1.5) < 1e-12);
}

TEST_CASE("torchtitan: llama3_8b.toml as shipped", "[config]") {
  if (test::corpus_dir().empty()) return;  // ../shared/corpus is absent
  const std::string path = test::corpus_dir() + "/torchtitan/llama3_8b.toml";
  config::TrainingJob job;
  Diagnostics d;
  REQUIRE(config::read_torchtitan(path, {}, &job, d));
  // "# NOTE: this toml config is a preset for 64 A100 GPUs." gives the world and the GPU.
  CHECK(job.world == 64);
  CHECK(job.hardware == "a100-80gb");
  CHECK(job.model == "llama3-8b");
  CHECK(job.layout.dp_shard == 64);
  CHECK(job.layout.pp == 1);
  CHECK(job.sharding == config::Sharding::kFsdp);
  CHECK(job.seq_len == 8192);
  CHECK(job.microbatch_sequences == 1);
  CHECK(job.global_batch_sequences == 64);
  CHECK(job.recompute == sc::model::Recompute::kSelective);
  CHECK(job.selective_every == 0);  // "op"
  CHECK(job.loc("seq_len").line == line_of(path, "seq_len = 8192"));
  bool lists_optimizer = false;
  for (const auto& u : job.unmodelled) lists_optimizer |= u.first.find("[optimizer]") != std::string::npos;
  CHECK(lists_optimizer);
  config::LoweredJob lj;
  REQUIRE(config::lower_job(job, {}, &lj, d));
  CHECK(lj.is_fsdp);
  CHECK(lj.fsdp.units.size() == 34);  // embedding, 32 blocks, norm + output
  CHECK(lj.fsdp.ranks == 64);
  CHECK(lj.fsdp.limit_bytes == int64_t{80} << 30);
  // FSDP2 model states: 16 bytes per parameter over 64 ranks.
  CHECK(rel(lj.costs.state_bytes_per_rank, 16.0 * 8.03e9 / 64) < 0.01);
}

TEST_CASE("torchtitan: llama3_8b.toml with pipeline_parallel_degree 2 and 4", "[config]") {
  if (test::corpus_dir().empty()) return;  // ../shared/corpus is absent
  for (int pp : {2, 4}) {
    // As shipped, local_batch_size = 1 gives one microbatch: 1F1B refuses fewer than pp.
    const std::string bad = changed("llama3_8b.toml", "pipeline_parallel_degree = 1",
                                    fmt::format("pipeline_parallel_degree = {}", pp));
    config::TrainingJob job;
    Diagnostics d;
    CHECK_FALSE(config::read_torchtitan(bad, {}, &job, d));
    CHECK(has_error_at(d, line_of(bad, "local_batch_size = 1"),
                       fmt::format("Number of microbatches (1) must be greater than or equal to the number of stages ({})", pp)));
    // With 8 sequences per rank (8 microbatches) it is a composed program that verifies.
    std::string text = test::read_file(bad);
    text.replace(text.find("local_batch_size = 1"), 20, "local_batch_size = 8");
    const std::string good = test::write_temp("schedcheck-config-test", fmt::format("pp{}.toml", pp), text);
    Diagnostics d2;
    config::TrainingJob j2;
    REQUIRE(config::read_torchtitan(good, {}, &j2, d2));
    CHECK(j2.layout.pp == pp);
    CHECK(j2.layout.dp_shard == 64 / pp);
    CHECK(j2.microbatches == 8);
    CHECK_FALSE(j2.reshard_after_forward);  // "default" under PP
    config::LoweredJob lj;
    REQUIRE(config::lower_job(j2, {}, &lj, d2));
    CHECK_FALSE(lj.is_fsdp);
    CHECK(lj.pipeline.ranks == pp);
    REQUIRE(lj.pipeline.composition);
    CHECK(lj.pipeline.composition->dp_shard == 64 / pp);
    // torchtitan's split: embedding and output count as a layer each, 34 over pp stages.
    int64_t blocks = 0;
    for (int64_t b : lj.costs.stage_layers) blocks += b;
    CHECK(blocks == 32);
    test::CliRun r = test::run_schedcheck("verify '" + good + "'");
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("predicted     step") != std::string::npos);
    CHECK(r.out.find(fmt::format("mesh: pp {} x dp_replicate 1 x dp_shard {}", pp, 64 / pp)) != std::string::npos);
  }
}

TEST_CASE("torchtitan: changes the framework refuses fail at their line", "[config]") {
  if (test::corpus_dir().empty()) return;  // ../shared/corpus is absent
  // Microbatch size 3 does not divide a local batch of 8.
  std::string text = test::read_file(test::corpus_dir() + "/torchtitan/llama3_8b.toml");
  text.replace(text.find("local_batch_size = 1"), 20, "local_batch_size = 8");
  text.replace(text.find("pipeline_parallel_degree = 1"), 28,
               "pipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 3");
  std::string path = test::write_temp("schedcheck-config-test", "mbs3.toml", text);
  config::TrainingJob job;
  Diagnostics d;
  CHECK_FALSE(config::read_torchtitan(path, {}, &job, d));
  CHECK(has_error_at(d, line_of(path, "pipeline_parallel_microbatch_size = 3"),
                     "Batch size 8 must be divisible by microbatch_size 3"));
  // A multi-stage schedule with one stage per rank (layers_per_stage 17: 34/17 = 2 stages on 2 ranks).
  text = test::read_file(test::corpus_dir() + "/torchtitan/llama3_8b.toml");
  text.replace(text.find("local_batch_size = 1"), 20, "local_batch_size = 8");
  text.replace(text.find("pipeline_parallel_degree = 1"), 28,
               "pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
               "pipeline_parallel_layers_per_stage = 17");
  path = test::write_temp("schedcheck-config-test", "lps17.toml", text);
  Diagnostics d2;
  config::TrainingJob j2;
  CHECK_FALSE(config::read_torchtitan(path, {}, &j2, d2));
  CHECK(has_error_at(d2, line_of(path, "pipeline_parallel_layers_per_stage"), "requires at least 2 stages per rank"));
  // World size not matching the degrees.
  Diagnostics d3;
  config::TrainingJob j3;
  config::JobContext ctx;
  ctx.gpus = 60;
  const std::string l4 = test::corpus_dir() + "/torchtitan/llama4_17bx128e.toml";
  CHECK_FALSE(config::read_torchtitan(l4, ctx, &j3, d3));
  CHECK(has_error_at(d3, line_of(l4, "data_parallel_shard_degree = -1"), "= 60 / (1 * 1 * 8 * 4) = 60 / 32, which is not a whole number"));
  // A note at the degree that does not divide 60 (tp 8), none at the one that does (pp 4).
  auto note_at = [&](const std::string& key) {
    for (const Diagnostic& x : d3.all())
      if (x.severity == Severity::kNote && x.loc.line == line_of(l4, key)) return x.message;
    return std::string();
  };
  CHECK(note_at("tensor_parallel_degree = 8") == "this degree, 8, does not divide the world size 60");
  CHECK(note_at("pipeline_parallel_degree = 4").empty());
  // Without --gpus, dp_shard -1 needs the world size (this preset has no GPU comment).
  Diagnostics d4;
  config::TrainingJob j4;
  CHECK_FALSE(config::read_torchtitan(l4, {}, &j4, d4));
  CHECK(has_error_at(d4, line_of(l4, "data_parallel_shard_degree = -1"), "pass --gpus N"));
  // mixed_precision_reduce is Literal["float32"].
  text = test::read_file(test::corpus_dir() + "/torchtitan/llama3_8b.toml");
  text.replace(text.find("seq_len = 8192"), 14, "seq_len = 8192\nmixed_precision_reduce = \"bfloat16\"");
  path = test::write_temp("schedcheck-config-test", "reduce-bf16.toml", text);
  Diagnostics d5;
  config::TrainingJob j5;
  CHECK_FALSE(config::read_torchtitan(path, {}, &j5, d5));
  CHECK(has_error_at(d5, line_of(path, "mixed_precision_reduce"), "accepts only \"float32\""));
  // A TOML syntax error is located.
  path = test::write_temp("schedcheck-config-test", "broken.toml", "[parallelism]\npipeline_parallel_degree = = 2\n");
  Diagnostics d6;
  config::TrainingJob j6;
  CHECK_FALSE(config::read_torchtitan(path, {}, &j6, d6));
  REQUIRE(d6.has_errors());
  CHECK(d6.all().front().loc.line == 2);
  // A float where an integer belongs, beyond int64 (found by fuzz_torchtitan: the cast was
  // undefined behaviour), and an integral one: both are errors at the key.
  for (const char* value : {"81e92", "8192.0"}) {
    CAPTURE(value);
    path = test::write_temp("schedcheck-config-test", "float-seq.toml",
                            fmt::format("[training]\nlocal_batch_size = 1\nseq_len = {}\n", value));
    Diagnostics d7;
    config::TrainingJob j7;
    CHECK_FALSE(config::read_torchtitan(path, {}, &j7, d7));
    CHECK(has_error_at(d7, 3, "training.seq_len must be an integer"));
  }
}

TEST_CASE("torchtitan: the shipped presets verify or fail with their reason", "[config]") {
  if (test::corpus_dir().empty()) return;  // ../shared/corpus is absent
  // llama4 17bx128e: TP 8, PP 4, one microbatch per rank: torchtitan's 1F1B refuses it.
  test::CliRun r = test::run_schedcheck("verify '" + test::corpus_dir() + "/torchtitan/llama4_17bx128e.toml' --gpus 128");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("must be greater than or equal to the number of stages (4)") != std::string::npos);
  // deepseek_v3_16b names Interleaved1F1B with PP 1: a note, not an error.
  r = test::run_schedcheck("verify '" + test::corpus_dir() + "/torchtitan/deepseek_v3_16b.toml' --gpus 8 --format json",
                           false);
  INFO(r.out);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j["job"]["model"] == "deepseek-v3-16b");
  CHECK(j["job"]["layout"]["ep"] == 8);
  bool noted = false;
  for (const auto& u : j["job"]["unmodelled"]) noted |= u["key"].get<std::string>().find("pipeline_parallel_schedule") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("plan ranks verified layouts and says why the others were rejected", "[config][plan]") {
  test::CliRun r = test::run_schedcheck(
      "plan --model llama3-8b --hardware h100 --gpus 16 --global-batch-tokens 256K --seq-len 8192 --verify-top 3 "
      "--format json",
      false);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["global_batch_tokens"] == 262144);
  REQUIRE(j["ranked"].size() >= 3);
  CHECK(j["ranked"][0]["verdict"] == "holds");
  // Holding layouts come first, by predicted step time; each is a layout of 16 GPUs.
  for (size_t i = 0; i + 1 < j["ranked"].size(); ++i) {
    const auto& a = j["ranked"][i];
    const auto& b = j["ranked"][i + 1];
    if (a["verdict"] == "holds" && b["verdict"] == "holds") CHECK(a["step_time_s"] <= b["step_time_s"]);
    CHECK(a["pp"].get<int>() * a["dp_replicate"].get<int>() * a["dp_shard"].get<int>() * a["tp"].get<int>() == 16);
  }
  // 32 sequences cannot feed 16-way data parallelism with microbatch size 4 and pp > 1 … some are rejected.
  CHECK(!j["rejected"].empty());
  // --emit writes the best layout as a torchtitan TOML that verify reads back to the same prediction.
  const std::string emitted = test::write_temp("schedcheck-config-test", "plan-best.toml", "");
  test::CliRun e = test::run_schedcheck("plan --model llama3-8b --hardware h100 --gpus 16 --global-batch-tokens 256K "
                                        "--seq-len 8192 --verify-top 3 --emit '" + emitted + "'");
  REQUIRE(e.exit_code == 0);
  test::CliRun back = test::run_schedcheck("verify '" + emitted + "' --format json", false);
  INFO(back.out);
  REQUIRE(back.exit_code == 0);
  auto bj = nlohmann::json::parse(back.out);
  double best_step = 0;
  for (const auto& c : j["ranked"])
    if (c["verdict"] == "holds" && c["schedule"] != "zb-h1") {
      best_step = c["step_time_s"].get<double>();
      break;
    }
  CHECK(bj["job"]["predicted"]["step_time_s"].get<double>() == Approx(best_step).epsilon(1e-9));
  // Bad input: a batch that is not whole sequences.
  test::CliRun bad = test::run_schedcheck("plan --model llama3-8b --gpus 16 --global-batch-tokens 1000 --seq-len 8192");
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("not a whole number of sequences") != std::string::npos);
  test::CliRun unknown = test::run_schedcheck("plan --model llama3-9b --gpus 16 --global-batch-tokens 4M --seq-len 8192");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.out.find("llama3-8b") != std::string::npos);
}

TEST_CASE("plan lists the verified layouts that fail with their reason, and marks ties", "[config][plan]") {
  // The README's plan: of the layouts of llama3-8b on 64 H100 it verifies, 12 hold and the
  // others go over the 80 GiB of HBM once their programs are built (the analytic bound let them
  // through); the header line counts both.
  const std::string args = "plan --model llama3-8b --hardware h100 --gpus 64 --global-batch-tokens 4M --seq-len 8192";
  test::CliRun r = test::run_schedcheck(args);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const size_t failed = r.out.find("\nverified and failed:\n");
  REQUIRE(failed != std::string::npos);
  CHECK(r.out.find("over the 80 GiB of HBM", failed) != std::string::npos);
  CHECK(r.out.find("... 2 more that hold (--show N lists more)") != std::string::npos);
  CHECK(r.out.find("tie with #") != std::string::npos);
  test::CliRun j = test::run_schedcheck(args + " --format json", false);
  auto doc = nlohmann::json::parse(j.out);
  int fails = 0;
  for (const auto& c : doc["ranked"])
    if (c["verdict"] != "holds") {
      ++fails;
      CHECK(c["reason"].get<std::string>().find("GiB of HBM") != std::string::npos);
      // Each failing layout's row is in the text, under "verified and failed".
      CHECK(r.out.find(fmt::format("{:.3f}", c["step_time_s"].get<double>()), failed) != std::string::npos);
    }
  int verified = 0, hold = 0;
  REQUIRE(std::sscanf(r.out.c_str() + r.out.find("the best "), "the best %d by estimate were built and verified, %d hold",
                      &verified, &hold) == 2);
  CHECK(hold == 12);
  CHECK(fails >= 1);
  CHECK(fails == verified - hold);
}

TEST_CASE("plan sets aside FSDP programs too large to verify in a plan instead of running for minutes", "[config][plan]") {
  // llama3-8b on 2 H100 with 4M tokens per step: FSDP without a pipeline needs 128 to 512
  // microbatches per step, 104k to 418k ops, whose exact worst case of memory took minutes each.
  // They are listed as set aside (not refuted). The pipelined layouts run 256 to 512
  // microbatches per step, whose receive buffers PyTorch's pipelining runtime allocates all at
  // once (docs/facts/composed-runtime.md#what-the-pipelining-runtime-keeps): 16 to 32 GiB a
  // direction, refuted by the memory bound. No layout is verified, and that is said to be no
  // verdict on the set-aside ones (exit 5).
  test::CliRun r = test::run_schedcheck("plan --model llama3-8b --hardware h100 --gpus 2 --global-batch-tokens 4M --seq-len 8192");
  INFO(r.out);
  REQUIRE(r.exit_code == 5);
  CHECK(r.out.find("the program to verify is too large for a plan (FSDP, about 208896 ops, more than 60000: 256 "
                   "microbatches per step); verify that layout alone (e.g. pp1 tp1 dp2 fsdp mbs 1") != std::string::npos);
  CHECK(r.out.find("this is not a verdict on those layouts") != std::string::npos);
  // A layout the memory bound refutes is refuted, not set aside: 405B on 8 GPUs has no layout.
  test::CliRun none = test::run_schedcheck("plan --model llama3-405b --hardware h100 --gpus 8 --global-batch-tokens 4M --seq-len 8192");
  CHECK(none.exit_code == 13);
  CHECK(none.out.find("too large for a plan") == std::string::npos);
}

TEST_CASE("verify reads the Megatron launch script and the DeepSpeed JSON of the corpus", "[config]") {
  if (test::corpus_dir().empty()) return;  // ../shared/corpus is absent
  test::CliRun m = test::run_schedcheck("verify '" + test::corpus_dir() + "/megatron/train_llama3_8b_h100_fp8.sh' --format json", false);
  INFO(m.out);
  REQUIRE(m.exit_code == 0);
  auto j = nlohmann::json::parse(m.out);
  CHECK(j["job"]["framework"] == "megatron");
  CHECK(j["job"]["world"] == 8);
  CHECK(j["job"]["layout"]["dp_replicate"] == 8);
  CHECK(j["job"]["microbatches"] == 16);  // 128 / (1 · 8)
  test::CliRun d = test::run_schedcheck("verify '" + test::corpus_dir() + "/deepspeed/ds_config_zero3.json'");
  CHECK(d.exit_code == 2);
  CHECK(d.out.find("pass --gpus") != std::string::npos);
  d = test::run_schedcheck("verify '" + test::corpus_dir() +
                               "/deepspeed/ds_config_zero3.json' --gpus 8 --model llama3-8b --seq-len 4096 --format json",
                           false);
  INFO(d.out);
  REQUIRE(d.exit_code == 0);
  j = nlohmann::json::parse(d.out);
  CHECK(j["fsdp"]["implementation"] == "zero3");
  CHECK(j["job"]["seq_len"] == 4096);
  // --gpus on a YAML spec is refused, naming the file.
  test::CliRun y = test::run_schedcheck("verify examples/llama7b-pp8-1f1b.yaml --gpus 8");
  CHECK(y.exit_code == 1);
  CHECK(y.out.find("--gpus does not apply to examples/llama7b-pp8-1f1b.yaml") != std::string::npos);
}

TEST_CASE("hostile configs: non-JSON DeepSpeed, exploding shell variables, huge worlds, degrees the model cannot split",
          "[config]") {
  // DeepSpeed reads with json.load: a comment is an error there, so here (not a silently different job).
  std::string p = test::write_temp("schedcheck-config-test", "ds-comment.json",
                                   "{\"train_micro_batch_size_per_gpu\": 1,\n /* c */ \"zero_optimization\": {\"stage\": 3}}\n");
  test::CliRun r = test::run_schedcheck("verify '" + p + "' --gpus 8 --model llama3-8b --seq-len 4096");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find(p + ":2:2: error: invalid JSON") != std::string::npos);
  // A chain of doubling variables stops at the cap with a located error.
  std::string sh = "#!/bin/bash\nA0=xxxxxxxxxxxxxxxx\n";
  for (int i = 1; i < 40; ++i) sh += fmt::format("A{}=\"$A{}$A{}\"\n", i, i - 1, i - 1);
  sh += "torchrun pretrain_gpt.py --micro-batch-size 1 --global-batch-size 8 $A39\n";
  p = test::write_temp("schedcheck-config-test", "explode.sh", sh);
  r = test::run_schedcheck("verify '" + p + "' --gpus 8 --model llama3-8b");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("expands to more than 65536 characters") != std::string::npos);
  // A world too large to model is refused with its size, not built.
  const std::string ex = test::source_path("examples/torchtitan-llama3-8b-pp2.toml");
  // (At 65,536 GPUs it is 2.56 M ops and verifies; at 524,288 it is 20.4 M.) Without the preset
  // comment, which states 64 GPUs that --gpus does not override.
  std::string open_world = test::read_file(ex);
  open_world = "# the preset's comment left out" + open_world.substr(open_world.find('\n'));
  const std::string huge = test::write_temp("schedcheck-config-test", "huge-world.toml", open_world);
  r = test::run_schedcheck("verify '" + huge + "' --gpus 524288");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("this job lowers to about 2.04e+07 ops (524288 modelled ranks × 39 ops each)") != std::string::npos);
  // TP 16 does not divide llama3-8b's 8 key/value heads; seq_len must divide by 2·tp·cp at any degree.
  std::string text = test::read_file(ex);
  std::string tp16 = text;
  tp16.replace(tp16.find("tensor_parallel_degree = 1"), 26, "tensor_parallel_degree = 16");
  p = test::write_temp("schedcheck-config-test", "tp16.toml", tp16);
  r = test::run_schedcheck("verify '" + p + "' --gpus 128");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("key/value heads") != std::string::npos);
  std::string odd = text;
  odd.replace(odd.find("seq_len = 8192"), 14, "seq_len = 8191");
  p = test::write_temp("schedcheck-config-test", "odd-seq.toml", odd);
  r = test::run_schedcheck("verify '" + p + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("seq_len = 8191 must be divisible by tp * 2 * cp = 2") != std::string::npos);
  // Valid TOML with dotted keys is read; a TOML file that is not a torchtitan job says so.
  p = test::write_temp("schedcheck-config-test", "dotted.toml",
                       "# NOTE: this toml config is a preset for 8 H100 GPUs.\nmodel.name = \"llama3\"\nmodel.flavor = \"8B\"\n"
                       "training.local_batch_size = 1\ntraining.seq_len = 4096\n");
  r = test::run_schedcheck("verify '" + p + "'");
  INFO(r.out);
  CHECK(r.exit_code == 0);
  p = test::write_temp("schedcheck-config-test", "pyproject.toml", "[project]\nname = \"x\"\n");
  r = test::run_schedcheck("verify '" + p + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("not a torchtitan job config") != std::string::npos);
  // plan with one-token sequences finishes, rejecting what is too large to verify.
  r = test::run_schedcheck("plan --model llama3-8b --gpus 8 --global-batch-tokens 64K --seq-len 1 --verify-top 2");
  CHECK((r.exit_code == 0 || r.exit_code == 13));
  CHECK(r.out.find("too large") != std::string::npos);
}

TEST_CASE("a DeepSpeed JSON with a number out of range is an input error, not a crash", "[config]") {
  // Found by fuzz_deepspeed: nlohmann::json throws out_of_range (not parse_error) for 1e1110.
  const std::string p = test::write_temp("schedcheck-config-test", "ds-huge.json", "[11100000000000011111E1110<1111\n {");
  test::CliRun r = test::run_schedcheck("verify '" + p + "' --gpus 8 --model llama3-8b --seq-len 4096");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("invalid JSON") != std::string::npos);
}

TEST_CASE("torchtitan: async TP without a compiled model, a misspelt compile component and integer booleans are "
          "refused at their line", "[config]") {
  // torchtitan/distributed/tensor_parallel.py::maybe_enable_async_tp @238fa99 raises "Async TP
  // requires 'model' in --compile.components and --compile.enable" when TP is on.
  const std::string base =
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\nseq_len = 8192\n"
      "[parallelism]\ndata_parallel_shard_degree = 2\ntensor_parallel_degree = 4\n"
      "enable_async_tensor_parallel = true\n";
  auto read = [](const std::string& name, const std::string& text, config::TrainingJob* job, Diagnostics& d) {
    config::JobContext ctx;
    ctx.gpus = 8;
    return config::read_torchtitan(test::write_temp("schedcheck-config-test", name, text), ctx, job, d);
  };
  {
    config::TrainingJob job;
    Diagnostics d;
    CHECK_FALSE(read("asynctp-eager.toml", base, &job, d));
    CHECK(has_error_at(d, 10, "needs the model compiled"));
  }
  {  // Compiling only the loss does not satisfy it either.
    config::TrainingJob job;
    Diagnostics d;
    CHECK_FALSE(read("asynctp-loss.toml", base + "[compile]\nenable = true\ncomponents = [\"loss\"]\n", &job, d));
    CHECK(has_error_at(d, 10, "needs the model compiled"));
  }
  {  // With the model compiled it reads, and the TP overlap is on.
    config::TrainingJob job;
    Diagnostics d;
    CHECK(read("asynctp-compiled.toml", base + "[compile]\nenable = true\ncomponents = [\"model\"]\n", &job, d));
    CHECK(job.tp_comm_overlap);
    CHECK(job.fused_elementwise);
    CHECK(job.loss_kernel == model::LossKernel::kEager);
  }
  {  // The Python config system's compile.enable_async_tensor_parallel is read as the same switch.
    config::TrainingJob job;
    Diagnostics d;
    const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
                             "seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 2\ntensor_parallel_degree = 4\n"
                             "[compile]\nenable = true\nenable_async_tensor_parallel = true\n";
    CHECK(read("asynctp-compile-key.toml", text, &job, d));
    CHECK(job.tp_comm_overlap);
    for (const auto& [key, loc] : job.unmodelled) CHECK(key != "compile.enable_async_tensor_parallel");
  }
  const std::string plain = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
                            "seq_len = 8192\n";
  {  // A misspelt component: torchtitan would compile nothing for it.
    config::TrainingJob job;
    Diagnostics d;
    CHECK_FALSE(read("components-typo.toml", plain + "[compile]\nenable = true\ncomponents = [\"modle\"]\n", &job, d));
    CHECK(has_error_at(d, 9, "\"modle\", which torchtitan does not compile (did you mean \"model\"?)"));
  }
  {  // A string where torchtitan's list[str] belongs.
    config::TrainingJob job;
    Diagnostics d;
    CHECK_FALSE(read("components-string.toml", plain + "[compile]\nenable = true\ncomponents = \"model\"\n", &job, d));
    CHECK(has_error_at(d, 9, "must be an array of strings"));
  }
  {  // toml++ would read 2 as true; torchtitan's bool field takes a TOML boolean.
    config::TrainingJob job;
    Diagnostics d;
    CHECK_FALSE(read("enable-int.toml", plain + "[compile]\nenable = 2\n", &job, d));
    CHECK(has_error_at(d, 8, "compile.enable must be true or false"));
  }
  {  // The two eras' switches contradicting each other.
    config::TrainingJob job;
    Diagnostics d;
    CHECK_FALSE(read("compile-both.toml", plain + "compile = true\n[compile]\nenable = false\n", &job, d));
    CHECK(has_error_at(d, 7, "contradicts compile.enable = false at line 9"));
  }
}

TEST_CASE("Megatron: fewer query groups than TP ranks are replicated, one whole group per rank", "[config][model]") {
  // Megatron-LM's attention (megatron/core/transformer/attention.py @d98e8a64): with
  // num_query_groups < TP each rank holds one group, so wk and wv cost 2·h·d_head per rank where
  // an even split gives 2·h·d_head·kv/tp. h = 4096, d_head = 128, 4 groups on TP 8: 524,288 more.
  ModelDesc m = *model_preset("llama3-8b");
  m.kv_heads = 4;
  CostInputs in;
  in.model = m;
  in.hardware = *hardware_preset("h100");
  in.seq_len = 4096;
  in.layout.tp = 8;
  const LayerCost rep = layer_cost(in, 0);
  CHECK(rep.params == (m.layer_params(0) - m.layer_expert_params(0)) / 8 + 2 * 4096 * 128 / 2);
  // Eight groups on TP 8 split evenly: nothing replicated.
  in.model.kv_heads = 8;
  CHECK(layer_cost(in, 0).params == (in.model.layer_params(0) - in.model.layer_expert_params(0)) / 8);

  config::JobContext ctx;
  ctx.gpus = 8;
  const std::string script = "--micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 8 --bf16\n"
                             "--group-query-attention --num-query-groups 4\n"
                             "--num-layers 4 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
                             "--vocab-size 32000\n";
  const std::string path = test::write_temp("schedcheck-config-test", "gqa4-tp8.sh", script);
  const auto r = test::run_schedcheck("verify " + path + " --gpus 8");
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("4 key/value heads on 8 TP ranks: each rank holds one whole key/value group, shared by 2 ranks") !=
        std::string::npos);
  // Megatron's rule (transformer_config.py @d98e8a64): groups a multiple or divisor of TP.
  config::TrainingJob job;
  Diagnostics d;
  std::string s3 = script;
  s3.replace(s3.find("--num-query-groups 4"), 20, "--num-query-groups 32");  // divides heads; TP 8 divides 32: fine
  CHECK(config::read_megatron(test::write_temp("schedcheck-config-test", "gqa32.sh", s3), ctx, &job, d));
  std::string s6 = "--micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 4 --bf16\n"
                   "--group-query-attention --num-query-groups 6\n"
                   "--num-layers 4 --hidden-size 3072 --num-attention-heads 24 --seq-length 4096 --vocab-size 32000\n";
  config::TrainingJob j6;
  Diagnostics d6;
  CHECK_FALSE(config::read_megatron(test::write_temp("schedcheck-config-test", "gqa6-tp4.sh", s6), ctx, &j6, d6));
  CHECK(has_error_at(d6, 2, "num_query_groups (6) must be a multiple or divisor of tensor_model_parallel_size (4)"));
}

TEST_CASE("torchtitan: a zero global batch and a batch whose tokens leave int64 are refused at the key", "[config]") {
  // Each value is within the reader's range, but 2^31 sequences of 2^31 tokens overflow int64.
  const auto big = test::run_schedcheck(
      "verify " + test::write_temp("schedcheck-config-test", "big-batch.toml",
                                   "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\n"
                                   "local_batch_size = 2147483647\nseq_len = 2147483646\n") +
      " --gpus 8");
  INFO(big.out);
  CHECK(big.exit_code == 2);
  CHECK(big.out.find(":5:1: error: 17179869176 sequences × 2147483646 tokens is 3.69e+19 tokens per step, more than "
                     "schedcheck models (2^40)") != std::string::npos);
  CHECK(big.out.find("tokens per step;") == std::string::npos);  // no report of a negative batch
  // global_batch_size = 0 passed the divisibility check (0 % n == 0) and gave "0 tokens per step".
  const auto zero = test::run_schedcheck(
      "verify " + test::write_temp("schedcheck-config-test", "zero-batch.toml",
                                   "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
                                   "global_batch_size = 0\nseq_len = 8192\n") +
      " --gpus 8");
  INFO(zero.out);
  CHECK(zero.exit_code == 2);
  CHECK(zero.out.find(":6:1: error: global_batch_size = 0: it must be -1 (local_batch_size × data-parallel degree, 16)") !=
        std::string::npos);
}

TEST_CASE("torchtitan: two names of one setting from different versions are an error at the later one", "[config]") {
  // The reader took the first and dropped the other without a word (local_batch_size 12 with
  // batch_size 4 ran at 12). No single torchtitan version defines both names of a pair.
  const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
                           "seq_len = 8192\nbatch_size = 4\n[parallelism]\ndata_parallel_shard_degree = 8\n"
                           "enable_async_tensor_parallel = false\n[experimental]\nenable_async_tensor_parallel = true\n";
  config::TrainingJob job;
  Diagnostics d;
  config::JobContext ctx;
  ctx.gpus = 8;
  CHECK_FALSE(config::read_torchtitan(test::write_temp("schedcheck-config-test", "two-names.toml", text), ctx, &job, d));
  CHECK(has_error_at(d, 7, "training.batch_size and training.local_batch_size (line 5) set the same thing"));
  CHECK(has_error_at(d, 12, "experimental.enable_async_tensor_parallel and parallelism.enable_async_tensor_parallel "
                            "(line 10) set the same thing"));
}

TEST_CASE("torchtitan: the 2024 [experimental] pipeline keys give the pipeline", "[config]") {
  // experimental.pipeline_parallel_degree was listed as not modelled and the job ran at PP 1.
  const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nbatch_size = 8\nseq_len = 8192\n"
                           "[experimental]\npipeline_parallel_degree = 4\npipeline_parallel_microbatches = 8\n";
  config::TrainingJob job;
  Diagnostics d;
  config::JobContext ctx;
  ctx.gpus = 32;
  REQUIRE(config::read_torchtitan(test::write_temp("schedcheck-config-test", "exp-pp.toml", text), ctx, &job, d));
  CHECK(job.layout.pp == 4);
  CHECK(job.layout.dp_shard == 8);
  CHECK(job.microbatches == 8);
  CHECK(job.loc("pp").line == 8);
  for (const auto& [key, loc] : job.unmodelled) CHECK(key.rfind("experimental.pipeline", 0) != 0);
}

TEST_CASE("torchtitan: a table written as a value, and a training.dtype torchtitan does not define, are refused",
          "[config]") {
  // `compile = true` was "unknown table 'compile' (did you mean 'compile'?)"; training.dtype is
  // Literal["bfloat16", "float32"] at 238fa99, and "float16" was accepted and ignored.
  Diagnostics d;
  const std::string text = "compile = true\n[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\n"
                           "local_batch_size = 2\nseq_len = 8192\ndtype = \"float16\"\n";
  CHECK_FALSE(read_torchtitan_text("table-value.toml", text, d));
  CHECK(has_error_at(d, 1, "compile is a table in torchtitan's JobConfig: write [compile] with its keys below it, "
                           "not a single value"));
  CHECK(has_error_at(d, 8, "training.dtype = \"float16\": expected \"bfloat16\" or \"float32\""));
}

TEST_CASE("an abbreviated key gets the long name it abbreviates as its suggestion", "[config]") {
  // "enable_async_tp" is 13 edits from "enable_async_tensor_parallel", past the edit bound.
  Diagnostics d;
  const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
                           "seq_len = 8192\n[parallelism]\nenable_async_tp = true\n";
  CHECK_FALSE(read_torchtitan_text("abbrev.toml", text, d));
  CHECK(has_error_at(d, 8, "(did you mean 'enable_async_tensor_parallel'?)"));
  CHECK(closest_match("pipeline_par", {"pipeline_parallel_degree", "pipeline_parallel_schedule"}).empty());  // two share it
}

TEST_CASE("a key with its words spelled out or shortened gets the key as its suggestion", "[config]") {
  // "sequence_len" is 5 edits from "seq_len", past the edit bound for its 12 characters.
  Diagnostics d;
  const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
                           "sequence_len = 8192\n";
  CHECK_FALSE(read_torchtitan_text("words.toml", text, d));
  CHECK(has_error_at(d, 6, "unknown key 'training.sequence_len': torchtitan's JobConfig defines no such key "
                           "(did you mean 'seq_len'?)"));
  CHECK(closest_match("seq_length_x", {"seq_len_x", "seq_len_y"}) == "seq_len_x");
  CHECK(closest_match("sequence_len", {"seq_len", "seq_lens"}).empty());  // two fit: none suggested
  CHECK(closest_match("sequence_len_total", {"seq_len"}).empty());       // not the same number of words
  CHECK(closest_match("sequence_l", {"seq_len"}).empty());               // a one-letter word abbreviates nothing
  CHECK(closest_match("--sequence-parallelism", {"--seq-par", "--tp"}) == "--seq-par");  // a flag's leading "--"
}
