// Values a framework config leaves to its launcher or autotuner, given on the command line:
// --env for a launch script's environment, --micro-batch-size and --grad-accum for DeepSpeed's
// "auto" batch keys.
#include <string>

#include "catch.h"
#include "config/readers.h"
#include "diag_util.h"
#include "test_util.h"

namespace sc::config {
namespace {

using sc::test::all_text;

// A SLURM-style script: the node count comes from the launcher's environment.
const char* kSlurmScript =
    "GPUS_PER_NODE=8\n"
    "NNODES=${SLURM_NNODES:-1}\n"
    "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\\n"
    "  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \\\n"
    "  --max-position-embeddings 4096 --vocab-size 128256 --micro-batch-size 1 --global-batch-size 64 \\\n"
    "  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --bf16\n";

TEST_CASE("a launch script's ${SLURM_NNODES:-1} takes --env and notes its default otherwise", "[config]") {
  const std::string path = sc::test::write_temp("schedcheck-config-options", "slurm.sh", kSlurmScript);
  JobContext ctx;
  ctx.hardware = "h100";
  TrainingJob job;
  Diagnostics d;
  REQUIRE(read_megatron(path, ctx, &job, d));
  CHECK(job.world == 8);  // 8 GPUs per node x the default 1 node
  CHECK(all_text(d).find("slurm.sh:2:8: note: SLURM_NNODES is not set, so its default '1' was used; --env "
                         "SLURM_NNODES=VALUE sets it as the launch environment would") != std::string::npos);

  ctx.env["SLURM_NNODES"] = "4";
  TrainingJob four;
  Diagnostics d4;
  REQUIRE(read_megatron(path, ctx, &four, d4));
  CHECK(four.world == 32);
  CHECK(four.layout.dp_replicate == 8);  // 32 / (tp 2 x pp 2)
  CHECK(all_text(d4).find("SLURM_NNODES is not set") == std::string::npos);

  // --env SLURM_NNODES= (set, empty): ${SLURM_NNODES:-1} takes its default, as bash does, and
  // says why.
  ctx.env["SLURM_NNODES"] = "";
  TrainingJob empty;
  Diagnostics de;
  REQUIRE(read_megatron(path, ctx, &empty, de));
  CHECK(empty.world == 8);
  CHECK(all_text(de).find("slurm.sh:2:8: note: SLURM_NNODES is set but empty, so its default '1' was used (as "
                          "bash's ${SLURM_NNODES:-...} does)") != std::string::npos);
}

TEST_CASE("a misspelt required Megatron flag is one error at the typo, with the flag it meant", "[config]") {
  // Before, "--micro-batch-size is not given" came first, at 1:1, then the typo's own error.
  const std::string path = sc::test::write_temp(
      "schedcheck-config-options", "typo.args",
      "--num-layers 16 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --vocab-size 1000\n"
      "--micro-batch-sise 1 --global-batch-size 8\n");
  JobContext ctx;
  ctx.gpus = 8;
  TrainingJob job;
  Diagnostics d;
  CHECK_FALSE(read_megatron(path, ctx, &job, d));
  INFO(all_text(d));
  CHECK(d.error_count() == 1);
  CHECK(all_text(d).find("typo.args:2:1: error: unrecognized arguments: --micro-batch-sise (Megatron-LM defines no "
                         "such flag; did you mean '--micro-batch-size'?)") != std::string::npos);
}

const char* kAutoBatch =
    "{\n"
    "  \"train_batch_size\": \"auto\",\n"
    "  \"train_micro_batch_size_per_gpu\": \"auto\",\n"
    "  \"gradient_accumulation_steps\": \"auto\",\n"
    "  \"bf16\": {\"enabled\": true},\n"
    "  \"zero_optimization\": {\"stage\": 3}\n"
    "}\n";

TEST_CASE("DeepSpeed batch keys left to the autotuner take --micro-batch-size and --grad-accum", "[config]") {
  const std::string path = sc::test::write_temp("schedcheck-config-options", "auto.json", kAutoBatch);
  JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  ctx.hardware = "h100";
  ctx.seq_len = 4096;
  {
    TrainingJob job;
    Diagnostics d;
    CHECK_FALSE(read_deepspeed(path, ctx, &job, d));
    CHECK(all_text(d).find("auto.json:3:37: error: the batch is left to the autotuner (\"auto\", filled in by the "
                           "Hugging Face Trainer): give --micro-batch-size N") != std::string::npos);
  }
  ctx.micro_batch_size = 2;
  ctx.grad_accum = 4;
  TrainingJob job;
  Diagnostics d;
  REQUIRE(read_deepspeed(path, ctx, &job, d));
  // DeepSpeed's rule: train_batch_size = micro x accumulation x data-parallel ranks = 2 x 4 x 8.
  CHECK(job.global_batch_sequences == 64);
  CHECK(job.microbatch_sequences == 2);
  CHECK(job.microbatches == 4);
  // Accumulation alone defaults to 1.
  ctx.grad_accum = 0;
  TrainingJob one;
  Diagnostics d1;
  REQUIRE(read_deepspeed(path, ctx, &one, d1));
  CHECK(one.global_batch_sequences == 16);
  CHECK(one.microbatches == 1);
}

TEST_CASE("a batch the DeepSpeed config sets is never replaced by --micro-batch-size", "[config]") {
  const std::string path = sc::test::write_temp("schedcheck-config-options", "set.json",
                                                "{\"train_micro_batch_size_per_gpu\": 8, \"bf16\": {\"enabled\": true}}\n");
  JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  ctx.hardware = "h100";
  ctx.seq_len = 4096;
  ctx.micro_batch_size = 2;
  TrainingJob job;
  Diagnostics d;
  CHECK_FALSE(read_deepspeed(path, ctx, &job, d));
  CHECK(all_text(d).find("set.json:1:36: error: train_micro_batch_size_per_gpu is set here to 8; --micro-batch-size "
                         "applies to configs that leave it to the autotuner") != std::string::npos);
}

}  // namespace

TEST_CASE("a DeepSpeed config without batch keys says so with the option that gives one, with the other errors",
          "[config]") {
  // Before, the batch error came only once --gpus was given.
  const std::string path = sc::test::write_temp("schedcheck-config-options", "nobatch.json",
                                                "{\"zero_optimization\": {\"stage\": 2}, \"bf16\": {\"enabled\": true}}\n");
  JobContext ctx;
  TrainingJob job;
  Diagnostics d;
  CHECK_FALSE(read_deepspeed(path, ctx, &job, d));
  INFO(all_text(d));
  CHECK(d.error_count() == 3);
  CHECK(all_text(d).find("pass --gpus") != std::string::npos);
  CHECK(all_text(d).find("pass --model") != std::string::npos);
  CHECK(all_text(d).find("nobatch.json:1:1: error: Either train_batch_size or train_micro_batch_size_per_gpu needs to be "
                         "provided (or pass --micro-batch-size N") != std::string::npos);
  // With the facts and --micro-batch-size, it reads.
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  ctx.micro_batch_size = 2;
  TrainingJob ok;
  Diagnostics d2;
  CHECK(read_deepspeed(path, ctx, &ok, d2));
  CHECK(ok.microbatch_sequences == 2);
}

}  // namespace sc::config
