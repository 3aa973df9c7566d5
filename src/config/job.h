// A training job as a framework config describes it: the parallel degrees, the pipeline
// schedule, the batch, recomputation, sharding and precision, each with the config line that set
// it. The torchtitan, Megatron-LM and DeepSpeed readers fill it; lower_job turns it into a
// spec of an existing front-end (composed pipeline or FSDP) with costs from src/model.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_model.h"
#include "spec/action.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace sc::config {

/// How the data-parallel group holds the model states (docs/facts/cost-formulas.md#per-rank-memory-with-sharding).
enum class Sharding {
  kDdp,        ///< replicated; gradients all-reduced
  kZero1,      ///< optimizer state sharded (Megatron distributed optimizer, DeepSpeed stage 1)
  kZero2,      ///< + gradients (DeepSpeed stage 2)
  kFsdp,       ///< + parameters: FSDP2 / ZeRO-3 (gathered per unit, freed after use)
};

/// What the job runs. Degrees follow docs/facts/config-keys.md#torchtitan-validation-rules, #megatron-derived-sizes, #deepspeed-batch-and-precision: world = pp·dp_replicate·
/// dp_shard·cp·tp; EP borrows from dp_shard·cp·tp. Batch figures are per optimizer step.
struct TrainingJob {
  std::string framework;            ///< "torchtitan", "megatron", "deepspeed"
  std::string path;
  SourceLoc file;                   ///< start of the config
  std::string model;                ///< preset name, or "custom" when dims are given
  std::optional<sc::model::ModelDesc> model_desc;  ///< dims read from the config (Megatron)
  std::string hardware;             ///< preset name; empty: the command line's or the default
  int32_t world = 0;                ///< GPUs; 0 when the config does not fix it
  model::Layout layout;
  /// Pipeline schedule in schedcheck's names ("1f1b", "gpipe", "interleaved-1f1b",
  /// "interleaved-zb", "zbv", "dualpipev"), stages per pipeline rank, microbatches per step.
  std::string schedule = "1f1b";
  int32_t stages_per_rank = 1;
  /// Transformer blocks per pipeline stage as the framework assigns them, stage v·pp + r being
  /// virtual stage v of rank r; a stage may hold none. Empty: lower_job's split (torchtitan's
  /// auto split, else even). Megatron-LM's layout flags set it (docs/facts/config-keys.md#megatron-layer-split).
  std::vector<int64_t> stage_layers;
  /// torchtitan's layer-split weights: pipeline_parallel_first_stage_less_layers (the
  /// embedding) and _last_stage_less_layers (norm and output), 1 each by default.
  int64_t input_weight = 1, output_weight = 1;
  /// torchtitan's pipeline_parallel_layers_per_stage (0: not set): the stage count is then
  /// ceil((layers + input_weight + output_weight) / layers_per_stage).
  int32_t layers_per_stage = 0;
  /// A schedule given as action lists instead of by name (torchtitan's
  /// parallelism.pipeline_parallel_schedule_csv, or a synthesised one): one compute-only list per
  /// pipeline rank, as PyTorch's _PipelineScheduleRuntime._load_csv reads them. The named
  /// schedule still decides the stage count and placement (torchtitan builds the stages from it,
  /// docs/facts/config-keys.md#schedule-csv). Empty: the named schedule's own order.
  std::vector<std::vector<Step>> schedule_actions;
  std::string schedule_csv;         ///< the CSV the actions came from ("" when none or synthesised)
  int32_t microbatches = 1;         ///< pipeline microbatches per step (= accumulation without PP)
  int32_t grad_accum = 1;           ///< optimizer steps see grad_accum × microbatches microbatches
  int64_t seq_len = 0;
  int64_t microbatch_sequences = 1; ///< sequences per microbatch per data-parallel rank
  int64_t global_batch_sequences = 0;
  model::Recompute recompute = model::Recompute::kNone;
  /// kSelective: what is kept (Megatron core attention; torchtitan "op" or every n-th block).
  model::SelectivePolicy selective_policy = model::SelectivePolicy::kCoreAttention;
  int32_t selective_every = 0;      ///< kEveryNth: n
  /// kFull: Megatron --recompute-method and --recompute-num-layers (torchtitan and DeepSpeed:
  /// uniform, one block, or DeepSpeed's pipeline.activation_checkpoint_interval blocks).
  model::RecomputeMethod recompute_method = model::RecomputeMethod::kUniform;
  int32_t recompute_layers = 1;
  Sharding sharding = Sharding::kFsdp;
  bool reshard_after_forward = true;
  std::string param_dtype = "bf16";  ///< all-gather and compute dtype
  std::string reduce_dtype = "fp32"; ///< gradient reduction dtype
  bool fp32_master = true;           ///< fp32 master weights and Adam moments
  /// Data-parallel collectives on their own streams (overlapped with compute); DeepSpeed's
  /// zero_optimization.overlap_comm, whose default is true at stage 3 and false below.
  bool overlap_comm = true;
  /// TP collectives pipelined with the GEMMs (model::CostInputs::tp_comm_overlap): Megatron-LM
  /// `--tp-comm-overlap`, torchtitan `enable_async_tensor_parallel`.
  bool tp_comm_overlap = false;
  /// With tp_comm_overlap, the input-gradient pass's collectives are pipelined too
  /// (model::CostInputs::tp_comm_overlap_backward): Megatron-LM's, not torchtitan's async TP.
  bool tp_comm_overlap_backward = false;
  /// The blocks' elementwise ops run fused (model::CostInputs::fused_elementwise): torchtitan
  /// `compile.enable` (`training.compile` before 2025-04) with the model compiled; always for
  /// Megatron-LM, whose blocks use fused kernels (apex / TransformerEngine).
  bool fused_elementwise = false;
  /// PyTorch's pipelining runtime keeps the last stage's output (the logits) of every microbatch
  /// until the schedule's step() ends: torchtitan before commit e5ef99aa (2025-10-22, "Update PP
  /// to release memory earlier", which passes return_outputs=False). Set by the torchtitan reader
  /// when one of the config's keys is a name torchtitan replaced before then (the config is that
  /// old); where["pp_outputs"] locates the key.
  bool pp_keeps_outputs = false;
  /// The blocks' linear layers in fp8 (model::CostInputs::fp8_linear): torchtitan's float8
  /// converter (`float8.enable_float8_linear`, `model.converters = ["float8"]`), Megatron-LM
  /// `--fp8-format` (TransformerEngine, experts included: fp8_experts). where["fp8"] locates it.
  bool fp8_linear = false;
  bool fp8_experts = false;
  /// The weights are all-gathered in fp8 (model::CostInputs::fp8_weights_gathered): torchtitan
  /// `enable_fsdp_float8_all_gather` with FSDP (dp_shard > 1), Megatron-LM `--fp8-param-gather`.
  bool fp8_weights_gathered = false;
  /// The scaling recipe as the config names it ("tensorwise", "rowwise", "delayed", ...): every
  /// recipe is timed as tensorwise dynamic scaling; a note says so for the others.
  std::string fp8_recipe = "tensorwise";
  /// The attention kernel the framework runs when the config names one (Megatron-LM
  /// `--transformer-impl local` without `--use-flash-attn`: materialised); nullopt: the
  /// framework's default (lower_job).
  std::optional<model::AttentionKernel> attention_kernel;
  /// Key/value groups fewer than the TP ranks are replicated, one whole group per rank, when
  /// the TP degree is a multiple of them (Megatron-LM: megatron/core/transformer/attention.py
  /// @d98e8a64). False: the TP degree must divide them (torchtitan splits wk and wv by rows).
  bool kv_groups_replicate = false;
  /// The loss's kernels, as the front-end reads them: torchtitan's compiled loss (`compile.enable`
  /// with "loss" among `compile.components`; `training.compile`, which compiles it from 2025-04)
  /// or eager; Megatron-LM's vocab-parallel cross entropy, fused with
  /// `--cross-entropy-loss-fusion`; PyTorch eager otherwise.
  model::LossKernel loss_kernel = model::LossKernel::kEager;
  /// Gradient reduction under the last backward (Composition::overlap_grad_reduce): Megatron-LM
  /// `--overlap-grad-reduce`; torchtitan always (FSDP2 and DDP reduce per unit or bucket as the
  /// backward produces them); DeepSpeed ZeRO-1/2 `overlap_comm`.
  bool overlap_grad_reduce = false;
  /// Megatron-LM `--overlap-param-gather` (with the distributed optimizer): the parameter
  /// all-gather runs under the next step's forward (Composition::reduce_scatter_only).
  bool overlap_param_gather = false;
  /// DeepSpeed ZeRO-3 knobs, parameters (docs/facts/config-keys.md#deepspeed-zero-keys).
  int64_t prefetch_bucket_params = 50'000'000;
  int64_t max_live_params = 1'000'000'000;
  /// Where each field was set, by field name ("pp", "tp", "cp", "dp_shard", "dp_replicate",
  /// "ep", "schedule", "microbatches", "seq_len", "microbatch_sequences", "global_batch",
  /// "recompute", "model", "hardware", "world", "reduce_dtype", "sharding", "stage_layers", "schedule_csv"); a field absent here
  /// took its default.
  std::map<std::string, SourceLoc> where;
  /// Keys read but not modelled, with their location: reported once as a note.
  std::vector<std::pair<std::string, SourceLoc>> unmodelled;

  /// The location of `field`, or the start of the file.
  SourceLoc loc(const std::string& field) const;
};

/// Command-line facts a config may not state: the world size, model and hardware presets.
struct JobContext {
  int32_t gpus = 0;                 ///< --gpus; 0 = from the config or its comment
  std::string model;                ///< --model
  std::string hardware;             ///< --hardware
  int64_t seq_len = 0;              ///< --seq-len, for configs that state none (DeepSpeed)
  double efficiency = 0;            ///< --efficiency: achieved fraction of peak; 0 = the GPU preset's
  /// --micro-batch-size / --grad-accum: DeepSpeed's train_micro_batch_size_per_gpu and
  /// gradient_accumulation_steps where the config leaves them to the autotuner ("auto" or
  /// absent); 0 = not given.
  int64_t micro_batch_size = 0;
  int64_t grad_accum = 0;
  /// --tp / --pp: the tensor- and pipeline-parallel degrees of a DeepSpeed config run by a
  /// trainer that states them elsewhere (Megatron-DeepSpeed's launch arguments), which hands
  /// DeepSpeed a model-parallel unit; DeepSpeed then checks its batch rule against the
  /// data-parallel size, world / (tp·pp) (docs/facts/config-keys.md#deepspeed-batch-and-precision).
  /// 0 = not given.
  int32_t tp = 0;
  int32_t pp = 0;
  /// --env NAME=VALUE: the caller's environment as a launch script sees it (`${SLURM_NNODES:-1}`
  /// takes VALUE); names not given are unset, as in an empty environment.
  std::map<std::string, std::string> env;
};

}  // namespace sc::config
