// From a TrainingJob to a spec of an existing front-end, with costs from the cost model:
// pipeline parallelism (pp > 1), or DDP / ZeRO-1 without it, becomes a composed pipeline spec;
// FSDP or ZeRO-3 without a pipeline becomes an FSDP spec with one unit per transformer block.
#pragma once

#include <string>
#include <vector>

#include "config/job.h"
#include "fsdp/fsdp_spec.h"
#include "model/cost_model.h"
#include "spec/pipeline_spec.h"
#include "support/diagnostics.h"

namespace sc::config {

/// What the cost model derived for a job, for the report. Times in seconds, sizes in bytes.
struct JobCosts {
  model::ModelDesc model;
  model::HardwareDesc hardware;
  model::Efficiency eff;
  int64_t total_params = 0, active_params = 0;
  int64_t tokens_per_step = 0;            ///< global batch in tokens
  double flops_per_token = 0;             ///< torchtitan's count (docs/facts/cost-formulas.md#flops)
  double flops_per_step = 0;              ///< flops_per_token × tokens_per_step (6·N·D plus attention)
  int64_t tokens_per_gpu_microbatch = 0;  ///< tokens one rank computes per microbatch (b·s/cp)
  /// Per-layer communication folded into the compute times (not separate ops): TP, CP and EP.
  double tp_comm_per_layer_s = 0, cp_comm_per_layer_s = 0, ep_comm_per_layer_s = 0;
  double cp_grad_comm_per_layer_s = 0;  ///< CP: the key/value gradients' ring in I (LayerCost::cp_grad_comm_s)
  double tp_exposed_per_layer_s = 0;
  double estimated_ops = 0;  ///< the size check's estimate of the program's ops (all modelled ranks)  ///< of tp_comm_per_layer_s, what F and I wait for (all without overlap)
  /// Link tiers chosen from the mesh: the FSDP / data-parallel group, pipeline neighbours, TP.
  model::LinkTier dp_tier = model::LinkTier::kIntraNode, pp_tier = model::LinkTier::kIntraNode,
                  tp_tier = model::LinkTier::kIntraNode;
  double dp_bandwidth = 0, pp_bandwidth = 0;
  /// FSDP crossover (docs/facts/cost-formulas.md#fsdp-crossover): tokens per GPU per microbatch above which the backward
  /// hides its all-gather and reduce-scatter; 0 without FSDP.
  double fsdp_crossover_tokens = 0;
  int64_t state_bytes_per_rank = 0;       ///< resident model states on the most loaded rank
  /// Ranks the routed experts' states are sharded (or, DDP, replicated) over: d·tp/(ep·etp)
  /// with d the dense data-parallel sharding degree; 1 without experts.
  int32_t expert_dp = 1;
  /// The largest activations recomputed (full or selective recompute) or live at one time
  /// beyond what a stage keeps, bytes per microbatch (model::stage_activations).
  int64_t transient_bytes = 0;
  std::vector<int64_t> stage_layers;      ///< transformer blocks per pipeline stage
  int32_t tp_ranks_per_modelled_rank = 1; ///< each modelled rank stands for its TP group
  std::vector<std::string> notes;         ///< simplifications the figures rest on
};

/// A job lowered to one of the existing front-ends.
struct LoweredJob {
  bool is_fsdp = false;   ///< true: `fsdp` holds the spec; false: `pipeline` does
  PipelineSpec pipeline;  ///< composed spec with a named schedule (resolve_named_schedule not yet run)
  FsdpSpec fsdp;
  JobCosts costs;
};

/// Lowers `job`. Model and hardware: the job's, else ctx's, else an error (model) or H100
/// (hardware, with a note). Pipeline stages split the blocks as torchtitan's auto split does
/// (embedding and output each count as one layer; docs/facts/config-keys.md#torchtitan-validation-rules) for torchtitan jobs, evenly
/// for the others, or as the job's stage_layers say when the framework gave them (Megatron's
/// layout flags; a stage may then hold no block). Each stage's F, I, W and R are the sums of its blocks' layer_cost (plus the
/// output projection on the last stage); activation bytes likewise, plus the output layer's
/// inputs and fp32 logits 4·s·b·(h + V)/t on the last stage (Megatron's
/// compute_activation_memory). Weight-gradient bytes (held from I until W): the inputs of each
/// block's linear layers, 2·tokens·(3h + F)/t. The memory limit is the GPU's HBM. Returns false
/// after adding errors (unknown preset, a stage with no block) to `diags`.
bool lower_job(const TrainingJob& job, const JobContext& ctx, LoweredJob* out, Diagnostics& diags);

/// Transformer blocks per stage as torchtitan's generate_llm_fqn_per_model_part assigns them
/// (torchtitan@02ef790 torchtitan/distributed/pipeline_parallel.py): the embedding counts as
/// `input_weight` layers and the norm and output as `output_weight`
/// (pipeline_parallel_first/last_stage_less_layers, default 1 each); the layers + weights are
/// spread evenly over `stages`, the first (layers + weights) mod stages stages taking one more,
/// and stage 0 and the last stage hold their share minus their weight. One stage holds every
/// block. Returns `stages` entries summing to `layers`, or an empty vector with torchtitan's
/// own reason in `why` (more stages than layers + weights, an empty stage, a weight above
/// the smallest share).
std::vector<int64_t> torchtitan_stage_layers(int64_t layers, int32_t stages, int64_t input_weight,
                                             int64_t output_weight, std::string* why);

/// A pipeline schedule torchtitan runs by name (get_schedule_class, docs/facts/config-keys.md#pipeline-schedule-names).
struct TorchtitanSchedule {
  const char* torch;  ///< torchtitan's (PyTorch's) class name, as written in configs ("Interleaved1F1B")
  const char* ours;   ///< TrainingJob::schedule ("interleaved-1f1b")
  bool multi;         ///< a multi-stage class (2 stages per rank unless layers_per_stage says)
  bool v;             ///< V placement (exactly 2 stages per rank)
};

/// The schedules torchtitan runs by name, in get_schedule_class's order.
const std::vector<TorchtitanSchedule>& torchtitan_schedules();

/// torchtitan's (PyTorch's) rule on the microbatch count `m` of schedule `ours` (TrainingJob
/// names) over `pp` ranks and `stages` stages: 1F1B needs m >= stages, the interleaved schedules
/// m a multiple of their rounds max(1, m / pp), DualPipeV m >= 2 pp. "" when `m` is allowed,
/// else the reason in PyTorch's words.
std::string torchtitan_microbatch_rule(const std::string& ours, int32_t m, int32_t pp, int32_t stages);

/// Largest program lower_job builds, in ops (about 470 bytes each: under 2 GiB); a larger job is
/// an error naming its size.
inline constexpr double kMaxJobOps = 4e6;

}  // namespace sc::config
