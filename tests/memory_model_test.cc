// The memory model against the frameworks' allocation rules: full recompute as per-layer
// checkpointing (Megatron-LM --recompute-method uniform / block, torchtitan full AC), torchtitan's
// selective AC between none and full, and routed-expert states sharded over expert data
// parallelism (docs/facts/activation-memory.md).
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "config/lower_job.h"
#include "config/readers.h"
#include "check/execution.h"
#include "config/verify_job.h"
#include "model/cost_model.h"
#include "model/fidelity_bands.h"
#include "sim/timeline.h"
#include "test_util.h"

using namespace sc;
using namespace sc::model;

namespace {

double rel(double a, double b) { return std::abs(a - b) / std::abs(b); }

/// A block with `act` activation bytes and `in` input bytes, 1 s of forward.
LayerCost block(int64_t act, int64_t in) {
  LayerCost c;
  c.activation_bytes = act;
  c.input_bytes = in;
  c.retained_bytes = in;
  c.forward_s = 1;
  c.recompute_s = 1;
  return c;
}

/// `text` with `from` replaced by `to` (which must occur).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  return text;
}

/// Reads and verifies a config; the predicted peak bytes of its fullest modelled rank.
int64_t predicted_peak(const std::string& path, const config::JobContext& ctx, config::VerifiedJob* out = nullptr) {
  Diagnostics d;
  config::TrainingJob job;
  const bool read = config::is_torchtitan_config(path) ? config::read_torchtitan(path, ctx, &job, d)
                                                        : config::read_megatron(path, ctx, &job, d);
  INFO(path);
  for (const Diagnostic& x : d.all()) INFO(x.message);
  REQUIRE(read);
  config::VerifiedJob v;
  REQUIRE(config::verify_job(job, ctx, false, &v, d));
  REQUIRE(v.prediction.complete);
  const int64_t peak = v.prediction.peak_bytes;
  if (out) *out = std::move(v);
  return peak;
}

}  // namespace

TEST_CASE("stage activations: uniform checkpoints keep each chunk's input and recompute one chunk at a time",
          "[model][memory]") {
  // Derived in docs/facts/activation-memory.md#full-recompute: uniform N keeps the first input
  // of each chunk and holds at most one chunk's activations at a time.
  std::vector<LayerCost> blocks(6, block(100, 10));
  CostInputs in;
  in.recompute = model::Recompute::kFull;
  in.recompute_method = RecomputeMethod::kUniform;
  in.recompute_layers = 1;
  StageActivations a = stage_activations(in, blocks);
  CHECK(a.retained_bytes == 60);   // 6 inputs
  CHECK(a.transient_bytes == 100); // one block
  CHECK(a.peak_bytes() == 160);    // not 600: the whole stage is never live at once
  CHECK(a.recompute_s == 6);
  in.recompute_layers = 4;         // chunks [0,4) and [4,6)
  a = stage_activations(in, blocks);
  CHECK(a.retained_bytes == 20);
  CHECK(a.transient_bytes == 400);
  in.recompute_method = RecomputeMethod::kBlock;
  in.recompute_layers = 2;         // blocks 0 and 1 checkpointed; 2..5 keep everything
  a = stage_activations(in, blocks);
  CHECK(a.retained_bytes == 2 * 10 + 4 * 100);
  CHECK(a.transient_bytes == 100);
  CHECK(a.recompute_s == 2);
}

TEST_CASE("torchtitan's per-op policy keeps 63,616 bytes per token of a Llama-3-8B block", "[model][memory]") {
  // docs/facts/activation-memory.md#torchtitan-selective: 2h + 2·n_h·d + 2·n_kv·d + 2·n_h·d +
  // 4·n_h + 2F + 2h with h = 4096, d = 128, n_h = 32, n_kv = 8, F = 14336.
  const ModelDesc m = *model_preset("llama3-8b");
  Layout lay;
  CHECK(op_policy_saved_bytes_per_token(m, 0, lay) == 63616);
  lay.tp = 8;  // with sequence parallelism every term is split 8 ways
  CHECK(op_policy_saved_bytes_per_token(m, 0, lay) == 63616.0 / 8);
  CostInputs in;
  in.model = m;
  in.hardware = *hardware_preset("h100");
  in.seq_len = 8192;
  in.recompute = model::Recompute::kSelective;
  in.selective = SelectivePolicy::kOpPolicy;
  const LayerCost op = layer_cost(in, 0);
  CHECK(op.retained_bytes == static_cast<int64_t>(8192.0 * 63616));
  // Recomputed: wk, wo and w3, 2·(4096·1024 + 4096·4096 + 4096·14336) FLOPs per token, with
  // their share of the block's GEMM time (size efficiency and operands' HBM time,
  // docs/facts/cost-formulas.md#memory-time-of-a-kernel), and the elementwise ops.
  const double rate = in.hardware.peak_flops * in.eff.compute;
  const double recomputed = 8192.0 * 2 * (4096.0 * 1024 + 4096.0 * 4096 + 4096.0 * 14336);
  const double lin = 8192.0 * in.model.layer_linear_flops_per_token(0);
  CHECK(rel(op.recompute_s - op.elementwise_s,
            (lin / rate * model::layer_gemm_time_factor(in, 0) + op.gemm_memory_s) * recomputed / lin) < 1e-9);
  CHECK(op.elementwise_s > 0);
  in.selective = SelectivePolicy::kCoreAttention;  // Megatron's selective keeps the Table 2 figure
  CHECK(layer_cost(in, 0).retained_bytes == op.activation_bytes);
}

TEST_CASE("Megatron 8B example with full recompute of 1 layer peaks at least 20 % lower", "[config][memory]") {
  // The figure: Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh peaked at
  // 77.2 GiB with and without --recompute-granularity full; per-layer checkpointing keeps one
  // block input per layer (docs/facts/activation-memory.md#full-recompute).
  if (test::corpus_dir().empty()) SC_SKIP("the shared corpus (Megatron-LM's 8B launch script) is absent");
  const std::string plain_text = test::read_file(test::corpus_dir() + "/megatron/train_llama3_8b_h100_fp8.sh");
  const std::string plain = test::write_temp("schedcheck-memory-test", "llama3_8b.sh", plain_text);
  const std::string recompute = test::write_temp(
      "schedcheck-memory-test", "llama3_8b_recompute.sh",
      replaced(plain_text, "    --bf16\n",
               "    --bf16\n    --recompute-granularity full\n    --recompute-method uniform\n"
               "    --recompute-num-layers 1\n"));
  config::JobContext ctx;
  ctx.hardware = "h100";
  const int64_t without = predicted_peak(plain, ctx);
  config::VerifiedJob v;
  const int64_t with = predicted_peak(recompute, ctx, &v);
  INFO("without " << without / double(1 << 30) << " GiB, with " << with / double(1 << 30) << " GiB");
  CHECK(with <= 0.8 * without);
  // What is recomputed at one time is one block, 8192·4096·(18 + 4·14336/4096) bytes (Table 2
  // figure), not the 32 blocks of the stage.
  CHECK(v.lowered.costs.transient_bytes == static_cast<int64_t>(8192.0 * 4096 * (18 + 4 * 14336.0 / 4096)));
}

TEST_CASE("Megatron recompute method block keeps the unchecked blocks' activations", "[config][memory]") {
  // transformer_block.py: block N checkpoints the first N blocks of each stage only, so a
  // larger N keeps less (docs/facts/activation-memory.md#full-recompute).
  const std::string base =
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336\n"
      "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu --vocab-size 128256\n"
      "--untie-embeddings-and-output-weights --seq-length 8192 --micro-batch-size 1 --global-batch-size 8\n"
      "--bf16 --use-distributed-optimizer --recompute-granularity full\n";
  config::JobContext ctx;
  ctx.hardware = "h200";
  int64_t last = 0;
  for (int n : {4, 16, 32}) {
    const std::string path = test::write_temp("schedcheck-memory-test", "block.sh",
                                              base + "--recompute-method block --recompute-num-layers " +
                                                  std::to_string(n) + "\n");
    Diagnostics d;
    config::TrainingJob job;
    REQUIRE(config::read_megatron(path, ctx, &job, d));
    CHECK(job.recompute_method == RecomputeMethod::kBlock);
    CHECK(job.recompute_layers == n);
    config::LoweredJob lj;
    REQUIRE(config::lower_job(job, ctx, &lj, d));
    const int64_t kept = lj.pipeline.memory.retained_bytes[0];
    if (last) CHECK(kept < last);
    last = kept;
  }
  // Megatron refuses full granularity without a method (transformer_config.py __post_init__).
  const std::string bad = test::write_temp("schedcheck-memory-test", "no-method.sh", base);
  Diagnostics d;
  config::TrainingJob job;
  CHECK_FALSE(config::read_megatron(bad, ctx, &job, d));
  bool said = false;
  for (const Diagnostic& x : d.all())
    said |= x.message.find("recompute_method must be \"block\" or \"uniform\"") != std::string::npos && x.loc.line == 4;
  CHECK(said);
}

TEST_CASE("a 405B DDP layout with full AC recomputes one block at a time, not the stage", "[config][memory]") {
  // Before per-layer checkpointing, the recompute transient of a PP-1 DDP layout was the whole
  // stage (456.75 GiB for 405B). One block of 405B at 8192 tokens, Table 2 figure:
  // 8192·16384·(18 + 4·53248/16384) bytes = 4.16 GB (3.88 GiB).
  const std::string path = test::write_temp("schedcheck-memory-test", "ddp405.toml",
                                            "[model]\nname = \"llama3\"\nflavor = \"405B\"\n[training]\n"
                                            "local_batch_size = 1\nseq_len = 8192\n[parallelism]\n"
                                            "data_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1\n"
                                            "[activation_checkpoint]\nmode = \"full\"\n");
  config::JobContext ctx;
  ctx.gpus = 8;
  ctx.hardware = "h100";
  Diagnostics d;
  config::TrainingJob job;
  REQUIRE(config::read_torchtitan(path, ctx, &job, d));
  REQUIRE(job.sharding == config::Sharding::kDdp);
  config::LoweredJob lj;
  REQUIRE(config::lower_job(job, ctx, &lj, d));
  const auto& mem = lj.pipeline.memory;
  const int64_t one_block = static_cast<int64_t>(8192.0 * 16384 * (18 + 4 * 53248.0 / 16384));
  CHECK(mem.activation_bytes[0] - mem.retained_bytes[0] == one_block);
  CHECK(lj.costs.transient_bytes == one_block);
}

TEST_CASE("torchtitan selective AC lies between none and full in peak memory", "[config][memory]") {
  // none keeps every activation, op keeps what the per-op policy saves (48.5 % for 8B), "2"
  // checkpoints every second block, full keeps block inputs only
  // (docs/facts/activation-memory.md#torchtitan-selective).
  const std::string head = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 1\n"
                           "seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 8\n[activation_checkpoint]\n";
  config::JobContext ctx;
  ctx.hardware = "h100";
  auto peak = [&](const std::string& name, const std::string& ac) {
    return predicted_peak(test::write_temp("schedcheck-memory-test", name, head + ac), ctx);
  };
  const int64_t none = peak("none.toml", "mode = \"none\"\n");
  const int64_t op = peak("op.toml", "mode = \"selective\"\nselective_ac_option = \"op\"\n");
  const int64_t every2 = peak("every2.toml", "mode = \"selective\"\nselective_ac_option = \"2\"\n");
  const int64_t full = peak("full.toml", "mode = \"full\"\n");
  CHECK(none > op);
  CHECK(op > full);
  CHECK(none > every2);
  CHECK(every2 > full);
}

TEST_CASE("Mixtral 8x7B on 32 GPUs (TP 1, PP 4, EP 8) shards expert states over expert DP", "[config][memory]") {
  // examples/megatron-mixtral-8x7b.sh sets the layout through its own variables. Megatron-LM:
  // expert_dp = world / (etp·ep·pp) = 32 / (1·8·4) = 1 while the dense dp = 8
  // (docs/facts/activation-memory.md#expert-data-parallel-states). Most loaded stage (the last:
  // 8 blocks + output layer + final norm), per rank:
  //   dense 8·(41,943,040 attention + 8,192 norms + 32,768 router) + 131,072,000 + 4,096
  //         = 466,948,096 parameters at 2 + 4 + 12/8 = 7.5 bytes (distributed optimizer);
  //   experts 8 blocks · 8 experts · 3·4096·14336 / 8 EP ranks = 1,409,286,144 parameters at
  //         2 + 4 + 12/1 = 18 bytes.
  const std::string path = test::source_path("examples/megatron-mixtral-8x7b.sh");
  config::JobContext ctx;
  ctx.hardware = "h100";
  Diagnostics d;
  config::TrainingJob job;
  REQUIRE(config::read_megatron(path, ctx, &job, d));
  CHECK(job.world == 32);
  CHECK(job.layout.pp == 4);
  CHECK(job.layout.ep == 8);
  CHECK(job.layout.dp_replicate == 8);
  config::LoweredJob lj;
  REQUIRE(config::lower_job(job, ctx, &lj, d));
  CHECK(lj.costs.expert_dp == 1);
  const double expected = 7.5 * 466948096.0 + 18.0 * 1409286144.0;
  CHECK(rel(static_cast<double>(lj.costs.state_bytes_per_rank), expected) < 1e-6);
  // Sharded over the dense DP instead: 7.5 bytes for every parameter; the difference is
  // 10.5 · 1,409,286,144 = 13.78 GiB per rank.
  const double over_dense = 7.5 * (466948096.0 + 1409286144.0);
  CHECK(rel((static_cast<double>(lj.costs.state_bytes_per_rank) - over_dense) / double(1 << 30), 13.78) < 0.001);
}

TEST_CASE("torchtitan fsdp_reshard_after_forward = always under PP gathers per forward", "[config][memory]") {
  // torchtitan: "default" means reshard_after_forward = not pp_enabled, so with PP the stage's
  // parameters stay gathered; "always" frees them after every forward and gathers again before
  // the next forward (docs/facts/composed-runtime.md#reshard-after-forward-under-pp): more
  // all-gathers, never more bytes held (a backward keeps its stage gathered, so in the steady
  // state of this interleaved schedule both stages of a rank are gathered at its peak anyway).
  const std::string head = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 8\n"
                           "seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 4\npipeline_parallel_degree = 2\n"
                           "pipeline_parallel_schedule = \"Interleaved1F1B\"\n";
  config::JobContext ctx;
  ctx.hardware = "h100";
  config::VerifiedJob def, always, never;
  const int64_t peak_default = predicted_peak(test::write_temp("schedcheck-memory-test", "raf-default.toml", head), ctx, &def);
  const int64_t peak_always = predicted_peak(
      test::write_temp("schedcheck-memory-test", "raf-always.toml", head + "fsdp_reshard_after_forward = \"always\"\n"), ctx,
      &always);
  predicted_peak(test::write_temp("schedcheck-memory-test", "raf-never.toml", head + "fsdp_reshard_after_forward = \"never\"\n"),
                 ctx, &never);
  CHECK(peak_always <= peak_default);
  CHECK(always.prediction.step_s > def.prediction.step_s);
  size_t gathers_default = 0, gathers_always = 0;
  for (const Op& o : def.result.program.ops) gathers_default += o.kind == OpKind::kCollective;
  for (const Op& o : always.result.program.ops) gathers_always += o.kind == OpKind::kCollective;
  CHECK(gathers_always > gathers_default);
  // "never" under PP is what "default" does.
  CHECK(never.prediction.peak_bytes == def.prediction.peak_bytes);
  CHECK(never.prediction.step_s == def.prediction.step_s);
}

TEST_CASE("torchtitan under PP holds each stage's unsharded gradients in fp32 from its first backward to its "
          "reduce-scatter", "[config][memory]") {
  // PyTorch's pipelining runtime skips FSDP2's gradient sync until a stage's last microbatch and
  // FSDP2 accumulates the unsharded gradients in the reduce dtype
  // (docs/facts/composed-runtime.md#unsharded-gradient-accumulation): 4 bytes per parameter
  // (mixed_precision_reduce fp32) where the gathered bf16 parameters take 2.
  const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 8\n"
                           "seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 4\npipeline_parallel_degree = 2\n"
                           "pipeline_parallel_schedule = \"1F1B\"\n";
  config::JobContext ctx;
  ctx.hardware = "h100";
  config::VerifiedJob v;
  predicted_peak(test::write_temp("schedcheck-memory-test", "pp-grads.toml", text), ctx, &v);
  const Program& p = v.result.program;
  std::map<std::pair<int32_t, int32_t>, int64_t> param_bytes;  // (rank, stage) -> gathered bytes
  for (const Buffer& b : p.buffers)
    if (std::string_view(b.kind) == "param") param_bytes[{b.rank, b.stage}] = b.bytes;
  int grads = 0;
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id)
    for (const MemEffect* e = p.mem_begin(id); e != p.mem_end(id); ++e) {
      const Buffer& b = p.buffers[e->buffer];
      if (std::string_view(b.kind) != "grad") continue;
      const Op& o = p.ops[id];
      if (e->bytes > 0) {
        ++grads;
        CHECK(b.bytes == 2 * param_bytes.at({b.rank, b.stage}));
        // Allocated by the stage's first backward on the rank: microbatch 0 under 1F1B.
        CHECK(o.kind == OpKind::kCompute);
        CHECK(o.actions[0].kind == ActionKind::kB);
        CHECK(o.actions[0].microbatch == 0);
      } else {
        CHECK(o.kind == OpKind::kCollective);
        CHECK(o.collective == CollectiveKind::kReduceScatter);
        CHECK(e->at_end);
      }
    }
  CHECK(grads == static_cast<int>(param_bytes.size()));
  CHECK(grads == 2 * 4);  // one stage on each of 2 pipeline ranks, 4 shard ranks each
}

TEST_CASE("torchtitan under PP keeps every microbatch's receive buffers, input gradients and last-stage logits",
          "[config][memory]") {
  // PyTorch's pipelining runtime (docs/facts/composed-runtime.md#what-the-pipelining-runtime-keeps):
  // each stage allocates a receive buffer per microbatch and direction when it is set up; a
  // non-first stage's input gradients stay in those buffers' .grad, and the last stage's logits
  // in output_chunks, until the step ends.
  const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 8\n"
                           "seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 4\npipeline_parallel_degree = 2\n"
                           "pipeline_parallel_schedule = \"1F1B\"\npipeline_parallel_microbatch_size = 2\n";
  config::JobContext ctx;
  ctx.hardware = "h100";
  config::VerifiedJob v;
  predicted_peak(test::write_temp("schedcheck-memory-test", "pp-kept.toml", text), ctx, &v);
  const PipelineSpec& spec = v.lowered.pipeline;
  REQUIRE(spec.microbatches == 4);
  const int64_t tokens = 2 * 8192;
  const int64_t boundary = tokens * 4096 * 2;  // the stage boundary's bf16 activation
  REQUIRE(spec.p2p.message_bytes == boundary);
  const int64_t logits = tokens * 128256 * 2;  // bf16 logits, no TP
  // No key dates this config before torchtitan stopped returning the pipeline's outputs
  // (e5ef99aa, 2025-10-22): the logits are not kept. training.batch_size, the name
  // local_batch_size replaced in 2025-06, dates it: they are.
  CHECK(spec.memory.kept_output_bytes == std::vector<int64_t>{0, 0});
  config::VerifiedJob dated;
  std::string old_text = text;
  old_text.replace(old_text.find("local_batch_size"), 16, "batch_size");
  predicted_peak(test::write_temp("schedcheck-memory-test", "pp-kept-old.toml", old_text), ctx, &dated);
  CHECK(dated.lowered.pipeline.memory.kept_output_bytes == std::vector<int64_t>{0, logits});
  CHECK(dated.prediction.peak_bytes > v.prediction.peak_bytes);
  CHECK(spec.memory.kept_input_grad_bytes == std::vector<int64_t>{0, boundary});
  const Program& p = dated.result.program;
  int kept = 0, freed = 0;
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id)
    for (const MemEffect* e = p.mem_begin(id); e != p.mem_end(id); ++e) {
      const Buffer& b = p.buffers[e->buffer];
      const std::string_view kind(b.kind);
      if (kind != "output" && kind != "input-grad") continue;
      const Op& o = p.ops[id];
      CHECK(b.stage == 1);
      if (e->bytes > 0) {
        ++kept;
        CHECK(e->at_end);
        CHECK(o.actions[0].kind == (kind == "output" ? ActionKind::kF : ActionKind::kB));
        CHECK(e->bytes == (kind == "output" ? logits : boundary));
      } else {
        ++freed;
        CHECK(p.label(id) == "optimizer step");
        CHECK_FALSE(e->at_end);
      }
    }
  CHECK(kept == 2 * 4 * 4);  // 4 shard ranks of the last stage, 4 microbatches, two kinds
  CHECK(freed == kept);
  // The receive buffers are resident, one per microbatch: forward ones on stage 1, backward ones
  // on stage 0. Twice the microbatches of the same size hold 4 more of each.
  config::TrainingJob twice_job;
  Diagnostics d;
  std::string twice = text;
  twice.replace(twice.find("local_batch_size = 8"), 20, "local_batch_size = 16");
  REQUIRE(config::read_torchtitan(test::write_temp("schedcheck-memory-test", "pp-kept-16.toml", twice), ctx, &twice_job, d));
  config::LoweredJob lowered;
  REQUIRE(config::lower_job(twice_job, ctx, &lowered, d));
  REQUIRE(lowered.pipeline.microbatches == 8);
  CHECK(lowered.pipeline.memory.state_bytes[0] - spec.memory.state_bytes[0] == 4 * boundary);
  CHECK(lowered.pipeline.memory.state_bytes[1] - spec.memory.state_bytes[1] == 4 * boundary);
}

TEST_CASE("DeepSpeed overlap_comm false is slower than true, and no half-precision section computes in fp32",
          "[config][memory]") {
  // overlap_comm: true puts ZeRO's collectives on their own streams; false on the compute stream
  // (docs/facts/config-keys.md#deepspeed-zero-keys). Without bf16/fp16 DeepSpeed trains in fp32:
  // H100's dense fp32 rate is 67 TFLOP/s against 989 bf16 (docs/facts/hardware.md#gpus), and every
  // activation takes 4 bytes.
  auto config = [](bool overlap, bool bf16) {
    return std::string("{\n  \"train_micro_batch_size_per_gpu\": 1,\n  \"gradient_accumulation_steps\": 1,\n") +
           (bf16 ? "  \"bf16\": {\"enabled\": true},\n" : "") + "  \"zero_optimization\": {\"stage\": 3, \"overlap_comm\": " +
           (overlap ? "true" : "false") + "}\n}\n";
  };
  config::JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  ctx.hardware = "h100";
  ctx.seq_len = 4096;
  auto verify = [&](const std::string& name, const std::string& text) {
    const std::string path = test::write_temp("schedcheck-memory-test", name, text);
    Diagnostics d;
    config::TrainingJob job;
    REQUIRE(config::read_deepspeed(path, ctx, &job, d));
    job.seq_len = ctx.seq_len;
    config::VerifiedJob v;
    REQUIRE(config::verify_job(job, ctx, false, &v, d));
    REQUIRE(v.prediction.complete);
    return v;
  };
  const config::VerifiedJob on = verify("overlap.json", config(true, true));
  const config::VerifiedJob off = verify("no-overlap.json", config(false, true));
  CHECK(off.prediction.step_s > on.prediction.step_s);
  // Nothing hides a collective on the compute stream: the report's overlap is 0, not the 91.8 %
  // the overlapped run reaches.
  REQUIRE(fsdp_extras(off.result)->figures);
  CHECK(fsdp_extras(off.result)->figures->overlap == 0);
  CHECK(fsdp_extras(on.result)->figures->overlap > 0.5);
  const config::VerifiedJob fp32 = verify("fp32.json", config(true, false));
  CHECK(fp32.prediction.step_s > 5 * on.prediction.step_s);  // 989 / 67 = 14.8 on the compute
  CHECK(fp32.prediction.peak_bytes > on.prediction.peak_bytes);
  bool noted = false;
  for (const std::string& n : fp32.lowered.costs.notes) noted |= n.find("67.0 TFLOP/s dense fp32") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("a memory finding of 405B FSDP x TP 8 without AC points at the AC mode line", "[config][memory]") {
  // The published 405B layout (torchtitan docs/performance.md: FSDP 16 x TP 8 on 128 H100, full
  // AC) with activation checkpointing off: the activations (126 blocks of 8192 tokens) dwarf
  // the model states, and the key a user changes is activation_checkpoint.mode.
  const std::string text = replaced(test::read_file(test::source_path(
                                        "specs/reference/published/torchtitan-llama3-405b-h100x128-fsdp16-tp8.toml")),
                                    "mode = \"full\"", "mode = \"none\"");
  const std::string path = test::write_temp("schedcheck-memory-test", "405b-no-ac.toml", text);
  config::JobContext ctx;
  ctx.gpus = 128;
  ctx.hardware = "h100";
  config::VerifiedJob v;
  predicted_peak(path, ctx, &v);
  const Finding* mem = nullptr;
  for (const Finding& f : v.result.findings)
    if (f.kind == FindingKind::kMemory) mem = &f;
  REQUIRE(mem);
  REQUIRE(!mem->locations.empty());
  int line = 0;
  {
    std::istringstream in(text);
    std::string l;
    for (int n = 1; std::getline(in, l); ++n)
      if (l.find("mode = \"none\"") != std::string::npos) line = n;
  }
  CHECK(mem->locations[0].line == line);
  bool lists = false;
  for (const std::string& d : mem->details) lists |= d.find("contributors: activations") != std::string::npos;
  CHECK(lists);
}

TEST_CASE("stage activations: every n-th block checkpointed recomputes one whole block at a time", "[model][memory]") {
  // torchtitan selective_ac_option = "2" (docs/facts/activation-memory.md#torchtitan-selective):
  // per block on average (1 - 1/2)·100 + 10/2 = 55 kept; the block being recomputed holds 100.
  CostInputs in;
  in.model = *model_preset("llama3-8b");
  in.hardware = *hardware_preset("h100");
  in.seq_len = 8192;
  in.recompute = model::Recompute::kSelective;
  in.selective = SelectivePolicy::kEveryNth;
  in.selective_every = 2;
  const LayerCost c = layer_cost(in, 0);
  CHECK(c.retained_bytes == static_cast<int64_t>(0.5 * c.activation_bytes + 0.5 * c.input_bytes));
  const StageActivations a = stage_activations(in, std::vector<LayerCost>(4, c));
  CHECK(a.retained_bytes == 4 * c.retained_bytes);
  CHECK(a.transient_bytes == c.activation_bytes);
}

TEST_CASE("Megatron-FSDP checkpoints as --recompute-method says", "[config][memory]") {
  // Without a pipeline Megatron-FSDP lowers to one FSDP unit per block; the block method keeps
  // every activation of the blocks after the first N (docs/facts/activation-memory.md#full-recompute).
  const std::string base =
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336\n"
      "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu --vocab-size 128256\n"
      "--untie-embeddings-and-output-weights --seq-length 8192 --micro-batch-size 1 --global-batch-size 8\n"
      "--bf16 --use-megatron-fsdp --recompute-granularity full\n";
  config::JobContext ctx;
  ctx.hardware = "h200";
  auto units_kept = [&](const std::string& method, int n) {
    const std::string path = test::write_temp("schedcheck-memory-test", "mfsdp.sh",
                                              base + "--recompute-method " + method + " --recompute-num-layers " +
                                                  std::to_string(n) + "\n");
    Diagnostics d;
    config::TrainingJob job;
    REQUIRE(config::read_megatron(path, ctx, &job, d));
    config::LoweredJob lj;
    REQUIRE(config::lower_job(job, ctx, &lj, d));
    REQUIRE(lj.is_fsdp);
    int64_t kept = 0;
    for (const FsdpUnit& u : lj.fsdp.units) kept += u.activation_bytes;
    return kept;
  };
  // One block of 8192 tokens: input 8192·4096·2 bytes, activations 8192·4096·(18 + 4·14336/4096).
  const int64_t input = 8192LL * 4096 * 2, act = 8192LL * 4096 * 32;
  const int64_t logits = static_cast<int64_t>(4 * 8192.0 * (4096 + 128256));
  CHECK(units_kept("block", 8) == 8 * input + 24 * act + logits);
  CHECK(units_kept("uniform", 1) == 32 * input + logits);
  CHECK(units_kept("uniform", 4) == 8 * input + logits);
}

TEST_CASE("a config's prediction quotes the error band of the published runs of its framework", "[config][fidelity]") {
  // The band is docs/fidelity.md's, per framework (src/model/fidelity_bands.h, written by
  // scripts/fidelity.py with the table and checked by the fidelity test).
  const model::FidelityBand* tt = model::fidelity_band("torchtitan");
  REQUIRE(tt);
  CHECK(tt->runs >= 12);
  CHECK(tt->min_error_pct <= tt->max_error_pct);
  auto r = sc::test::run_schedcheck("verify examples/torchtitan-llama3-8b-pp2.toml --format json", false);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["job"]["fidelity"]["framework"] == "torchtitan");
  CHECK(j["job"]["fidelity"]["runs"] == tt->runs);
  CHECK(j["job"]["fidelity"]["min_error_pct"] == tt->min_error_pct);
  auto text = sc::test::run_schedcheck("verify examples/torchtitan-llama3-8b-pp2.toml");
  CHECK(text.out.find(fmt::format("checked       the throughput predicted for {} published torchtitan runs, each "
                                  "with the parameters fitted without its source, lies {:+.1f} % to {:+.1f} % from "
                                  "the published figure (docs/fidelity.md)",
                                  tt->runs, tt->min_error_pct, tt->max_error_pct)) != std::string::npos);
  // The torchtitan runs that publish their peak (docs/fidelity.md's table, open misses
  // included; Tables 1 to 4 of the December 2024 benchmark): their band is quoted too.
  CHECK(tt->memory_runs >= 12);
  CHECK(tt->memory_min_error_pct <= tt->memory_max_error_pct);
  CHECK(j["job"]["fidelity"]["memory_runs"] == tt->memory_runs);
  CHECK(text.out.find(fmt::format("; the memory reserved, for the {} that publish it, {:+.1f} % to {:+.1f} %",
                                  tt->memory_runs, tt->memory_min_error_pct, tt->memory_max_error_pct)) !=
        std::string::npos);
  const model::FidelityBand* mg = model::fidelity_band("megatron");
  REQUIRE(mg);
  CHECK(mg->memory_runs == 0);  // no Megatron-LM run of the table publishes its memory
  CHECK_FALSE(model::fidelity_band("deepspeed"));  // no published DeepSpeed run is checked yet
}

TEST_CASE("the split backward with and without AC moves per-rank peaks as torchtitan #773 measured", "[config][memory]") {
  // pytorch/torchtitan#773 (2025-01): Llama 3 8B, local batch 16, seq 512, PP 8 on 8 H100s.
  // Without AC, InterleavedZeroBubble peaks lower than Interleaved1F1B on rank 0 (20.57 against
  // 22.74 GiB) and higher on rank 7 (22.23 against 17.97 GiB): the split backward holds the
  // weight-gradient inputs from I until W, and the last rank defers its W's. With full AC the
  // I recomputes the block and what W needs stays until W, so on Llama 3 405B on 512 GPUs
  // (FSDP 8 x TP 8 x PP 8) InterleavedZeroBubble peaks above Interleaved1F1B (89.73 against
  // 72.69 GiB in the first table).
  config::JobContext ctx;
  ctx.hardware = "h100-96gb";
  auto peaks = [&](const std::string& flavor, int batch, int seq, int tp, const std::string& schedule,
                   const std::string& ac, int gpus) {
    const std::string text = fmt::format(
        "[model]\nname = \"llama3\"\nflavor = \"{}\"\n[training]\nlocal_batch_size = {}\nseq_len = {}\n"
        "[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = {}\npipeline_parallel_degree = 8\n"
        "pipeline_parallel_schedule = \"{}\"\npipeline_parallel_microbatch_size = 1\n[activation_checkpoint]\nmode = \"{}\"\n",
        flavor, batch, seq, tp, schedule, ac);
    ctx.gpus = gpus;
    config::VerifiedJob v;
    predicted_peak(test::write_temp("schedcheck-memory-test", flavor + schedule + ac + ".toml", text), ctx, &v);
    REQUIRE(v.result.timeline);
    return v.result.timeline->peak_bytes_per_rank;
  };
  const std::vector<int64_t> i1f1b = peaks("8B", 16, 512, 1, "Interleaved1F1B", "none", 8);
  const std::vector<int64_t> zb = peaks("8B", 16, 512, 1, "InterleavedZeroBubble", "none", 8);
  REQUIRE(i1f1b.size() == 8);
  REQUIRE(zb.size() == 8);
  CHECK(zb[0] < i1f1b[0]);
  CHECK(zb[7] > i1f1b[7]);
  auto fullest = [](const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); };
  const int64_t i1f1b_ac = fullest(peaks("405B", 16, 8192, 8, "Interleaved1F1B", "full", 512));
  const int64_t zb_ac = fullest(peaks("405B", 16, 8192, 8, "InterleavedZeroBubble", "full", 512));
  CHECK(zb_ac > i1f1b_ac);
}

TEST_CASE("torchtitan's loss holds 12·V bytes per token in its backward, 2·V more than in its forward",
          "[config][memory]") {
  // docs/facts/activation-memory.md#the-loss: forward bf16 logits, their fp32 copy and the kept
  // log-softmax output (2 + 4 + 4 = 10·V per token); backward (the bf16 logits freed by `del pred`)
  // the kept output and the gradients of nll_loss and log_softmax (4 + 4 + 4 = 12·V).
  const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
                           "seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 8\n[activation_checkpoint]\n"
                           "mode = \"full\"\n";
  config::JobContext ctx;
  ctx.hardware = "h100";
  config::VerifiedJob v;
  predicted_peak(test::write_temp("schedcheck-memory-test", "loss.toml", text), ctx, &v);
  REQUIRE(v.lowered.is_fsdp);
  const FsdpUnit& out = v.lowered.fsdp.units.back();
  REQUIRE(out.name == "norm+output");
  const double tokens = 2 * 8192, vocab = 128256;  // Llama-3's vocabulary (docs/facts/config-keys.md)
  CHECK(out.transient_bytes == static_cast<int64_t>(6 * tokens * vocab));
  CHECK(out.backward_transient_bytes == static_cast<int64_t>(8 * tokens * vocab));
  // The built program holds exactly those transients around the output unit's forward and backward.
  const Program& p = v.result.program;
  std::vector<int64_t> tmp;
  for (const Buffer& b : p.buffers)
    if (std::string(b.kind.c_str()) == "act-tmp" && b.stage == static_cast<int32_t>(v.lowered.fsdp.units.size()) - 1)
      tmp.push_back(b.bytes);
  REQUIRE(tmp.size() == 4);  // forward and backward of each of the two modelled steps
  CHECK(tmp[0] == out.transient_bytes);
  CHECK(tmp[1] == out.backward_transient_bytes);

  // docs/facts/activation-memory.md#the-loss-region: the bf16 logits' 2·V block stays reserved
  // through the backward, one hold per step; the reserve is 2·V above the live peak where the
  // loss's backward is the rank's peak (here: full AC, so the loss region dominates).
  CHECK(out.stranded_bytes == static_cast<int64_t>(2 * tokens * vocab));
  REQUIRE(p.reserve_holds.size() == 2);
  CHECK(p.reserve_holds[0].bytes == out.stranded_bytes);
  REQUIRE(v.result.timeline);
  const Timeline& t = *v.result.timeline;
  Program no_holds = p;
  no_holds.reserve_holds.clear();
  const ExecutionResult ex = execute(no_holds);
  REQUIRE(ex.completed);
  const Timeline t0 = simulate(no_holds, ex.order);
  CHECK(t.peak_bytes_per_rank == t0.peak_bytes_per_rank);
  CHECK(t.reserved_bytes_per_rank[0] == t0.reserved_bytes_per_rank[0] + out.stranded_bytes);

  // A compiled loss (compile.components with "loss") writes no fp32 copy or gradients: no hold.
  config::VerifiedJob c;
  predicted_peak(test::write_temp("schedcheck-memory-test", "loss-compiled.toml",
                                  text + "[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n"),
                 ctx, &c);
  REQUIRE(c.lowered.is_fsdp);
  CHECK(c.lowered.fsdp.units.back().stranded_bytes == 0);
  CHECK(c.result.program.reserve_holds.empty());
}

TEST_CASE("torchtitan's compile fuses the elementwise ops: the same job is faster compiled", "[config][model]") {
  // docs/facts/cost-formulas.md#elementwise-ops: 34·h + 12·kv + 5·F elements per token eager,
  // 12·h + 2·kv + 3·F fused. compile.enable (and training.compile, its older spelling) with the
  // model among compile.components fuses; components without "model" does not.
  const std::string head = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_shard_degree = 8\n"
                           "[activation_checkpoint]\nmode = \"none\"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n";
  config::JobContext ctx;
  ctx.hardware = "h100";
  auto step = [&](const std::string& name, const std::string& extra) {
    const std::string path = test::write_temp("schedcheck-memory-test", name, head + extra);
    config::VerifiedJob v;
    predicted_peak(path, ctx, &v);
    Diagnostics d;
    config::TrainingJob job;
    REQUIRE(config::read_torchtitan(path, ctx, &job, d));
    for (const auto& [key, loc] : job.unmodelled) CHECK(key.find("compile") == std::string::npos);
    return v.prediction.step_s;
  };
  const double eager = step("eager.toml", "");
  const double compiled = step("compiled.toml", "[compile]\nenable = true\n");
  const double older = step("older.toml", "compile = true\n");  // training.compile
  const double loss_only = step("loss-only.toml", "[compile]\nenable = true\ncomponents = [\"loss\"]\n");
  const double model_only = step("model-only.toml", "[compile]\nenable = true\ncomponents = [\"model\"]\n");
  CHECK(compiled < eager);
  CHECK(older == Approx(compiled));
  // The blocks' saving is the elementwise time of 32 blocks: (223,232 - 94,208) elements per
  // token, 2 bytes each, three passes (the forward, twice in the input gradient), at 0.9 of
  // 3.35 TB/s (kernels of 134 MB, docs/facts/cost-formulas.md#memory-time-of-a-kernel), for the
  // 8192 tokens of the one microbatch. The loss's is 48 - 8 bytes per logit
  // (docs/facts/cost-formulas.md#the-loss) over 8192 tokens × 128,256 logits, likewise at 0.9.
  const double blocks = 32 * 8192.0 * (223232 - 94208) * 2 * 3 / (3.35e12 * 0.9);
  const double loss = 8192.0 * 128256 * (48 - 8) / (3.35e12 * 0.9);
  CHECK(eager - loss_only == Approx(loss).epsilon(0.02));
  CHECK(eager - model_only == Approx(blocks).epsilon(0.02));
  CHECK(eager - compiled == Approx(blocks + loss).epsilon(0.02));
}
