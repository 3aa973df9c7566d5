// The pipeline schedule spec: what `schedcheck verify` reads from YAML or a PyTorch CSV.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/semantics.h"
#include "spec/action.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace sc {

/// Limits on the ids of a spec, the same for a YAML spec and a CSV (per-rank, per-stage and
/// per-microbatch tables are sized by them). Every id is checked against them before any
/// arithmetic, so `id + 1` never overflows. Documented in specs/README.md.
inline constexpr int32_t kMaxSpecRanks = 1 << 16;
inline constexpr int32_t kMaxSpecStages = 1 << 20;
inline constexpr int32_t kMaxSpecMicrobatches = 1 << 24;

/// Per-stage costs in seconds. Each vector has `stages` entries. B defaults to I + W.
struct Costs {
  std::vector<double> f_s, i_s, w_s, b_s;
  /// Recompute forward per stage (`costs.R`), run before the stage's I or B when
  /// MemorySpec::recompute is not kNone; empty = F's time (full recomputation).
  std::vector<double> r_s;
};

/// Activation recomputation of a stage (full or selective activation checkpointing).
enum class Recompute : uint8_t { kNone, kSelective, kFull };

/// The point-to-point link model: a transfer of n bytes takes latency_s + n / bandwidth.
struct P2PSpec {
  double latency_s = 0;
  double bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
  int64_t message_bytes = 0;  ///< bytes of one activation or gradient message
  Semantics semantics;
  BlockingModel blocking = BlockingModel::kCommStream;  ///< `p2p.blocking`; --blocking overrides
  /// `p2p.comm_init`: false (eager, the default) when every communicator exists before the
  /// step; true (lazy) when each is created at its first use, collectively: a rank pair's by both
  /// ranks at their first plain send or receive, the pipeline group's by all its ranks at each
  /// one's first batched group (PyTorch's ProcessGroupNCCL::pointToPoint keys a single P2P by
  /// the rank pair and one inside batch_isend_irecv by the whole group).
  bool lazy_comm_init = false;
};

/// Memory model, bytes per rank. Every vector has `stages` entries.
/// A (stage, microbatch) holds activation_bytes from the start of its F until the end of its I
/// or B, and weight_grad_bytes from the end of its I until the end of its W. params_bytes of a
/// stage are resident on its rank for the whole step, except for stages the schedule UNSHARDs
/// (FSDP inside a pipeline stage): their params_bytes are the unsharded parameters, live from
/// each UNSHARD to the next RESHARD (the sharded copy is not modelled).
/// With recompute (full or selective) a stage keeps only retained_bytes of its activations
/// after its F; the rest (activation_bytes - retained_bytes) is live during the F, freed at its
/// end, and recomputed at the start of the I or B (which then also takes costs.R), live until
/// its end. Full recompute retains the stage input by default (p2p.message_bytes);
/// selective needs retained_bytes given (Korthikanti et al. 2022 give the per-layer figures).
struct MemorySpec {
  std::optional<int64_t> limit_bytes;  ///< per rank; none = no limit check
  std::vector<int64_t> params_bytes;
  std::vector<int64_t> activation_bytes;
  std::vector<int64_t> weight_grad_bytes;
  std::vector<Recompute> recompute;       ///< per stage; empty = none everywhere
  std::vector<int64_t> retained_bytes;    ///< per stage, with recompute; empty = the defaults above
  /// Per stage, resident on its rank for the whole step and not managed by the schedule: the
  /// model states a framework keeps besides the parameters above (sharded fp32 master weights,
  /// gradients and optimizer moments; docs/facts/cost-formulas.md#bytes-per-parameter, #per-rank-memory-with-sharding). Empty = none.
  std::vector<int64_t> state_bytes;
  /// Per stage, held by PyTorch's pipelining runtime until the step's end (a composed spec's
  /// optimizer step, which follows the schedule's step()); empty = none. kept_output_bytes: each
  /// microbatch's forward output, from the end of its F (the last stage's output: the runtime
  /// appends it to output_chunks and merges them when step() ends; PipelineStage.forward_one_chunk,
  /// torch/distributed/pipelining/stage.py). kept_input_grad_bytes: each microbatch's input
  /// gradient, from the end of its I or B (stage_backward accumulates it into the receive
  /// buffer's .grad, which only the next step's clear_runtime_states drops).
  std::vector<int64_t> kept_output_bytes;
  std::vector<int64_t> kept_input_grad_bytes;
};

/// A pipeline composed with data parallelism on a device mesh (a composed spec: `mesh:` and
/// optionally `fsdp:`). Every pipeline rank p is replicated over dp_replicate x dp_shard ranks in
/// torchtitan's dense mesh order [pp, dp_replicate, dp_shard] (docs/facts/config-keys.md#torchtitan-validation-rules): global rank
/// = (p·dp_replicate + replicate)·dp_shard + shard. Each replica runs the pipeline's action
/// lists; its P2P goes to the neighbour with the same data-parallel coordinates.
/// With `fsdp`, a stage's parameters (MemorySpec::params_bytes, unsharded bytes in the param
/// dtype) are sharded over the shard group (the dp_shard ranks of one pipeline rank and
/// replicate index): UNSHARD is an all-gather over that group (on the rank's all-gather
/// stream; the stage's compute waits for it), RESHARD frees the gathered parameters, and
/// REDUCE_GRAD is a reduce-scatter of the stage's gradients (params_bytes x reduce/param dtype
/// bytes) over the shard group followed, with dp_replicate > 1, by an all-reduce of the shard
/// over the replicate group (HSDP), both on the rank's reduce stream. A compute-only schedule
/// gets UNSHARD/RESHARD and REDUCE_GRAD as PyTorch's pipelining runtime places them (docs/facts/composed-runtime.md).
/// Collective times are ring times (Thakur et al. 2005): latency + (n-1)/n·bytes/bandwidth for
/// all-gather and reduce-scatter over n ranks, latency + 2(n-1)/n·bytes/bandwidth for all-reduce.
/// MoE layers with expert parallelism in a composed spec (`moe:`): every forward of a stage runs,
/// per MoE layer, a dispatch all-to-all then a combine all-to-all over its EP group; every
/// backward (I or B) runs the combine's gradient all-to-all then the dispatch's.
struct MoeSpec {
  int32_t layers = 0;                  ///< MoE layers of every stage (moe.layers as one number)
  std::vector<int32_t> layers_per_stage;  ///< moe.layers as a list, one per stage (wins when given)
  int64_t dispatch_bytes = 0;          ///< bytes one rank receives in one layer's dispatch, per microbatch
  int64_t combine_bytes = -1;          ///< bytes of one layer's combine (default: dispatch_bytes)
  std::string router;                  ///< router spec whose dispatch worst case gives dispatch_bytes ("" = none)
  SourceLoc loc, router_loc;           ///< the `moe` key; the `router` value
  /// MoE layers of `stage` (0 for a stage past a too-short list).
  int32_t layers_of(int32_t stage) const {
    if (layers_per_stage.empty()) return layers;
    return stage >= 0 && static_cast<size_t>(stage) < layers_per_stage.size() ? layers_per_stage[stage] : 0;
  }
};

struct Composition {
  int32_t dp_replicate = 1;
  int32_t dp_shard = 1;
  bool fsdp = false;
  bool fsdp2 = true;                       ///< fsdp.implementation: fsdp2 (default) or fsdp1
  double param_dtype_bytes = 2;            ///< bytes per parameter element (bf16)
  double reduce_dtype_bytes = 4;           ///< bytes per gradient element in the reduction (fp32)
  std::string param_dtype = "bf16", reduce_dtype = "fp32";
  int32_t max_active_stages = 3;           ///< _add_unshard_reshard's window (docs/facts/composed-runtime.md)
  /// FSDP2's reshard_after_forward inside the stages (torchtitan fsdp_reshard_after_forward =
  /// "always" under PP): parameters gathered per compute action and freed after each forward
  /// (add_unshard_reshard_per_forward) instead of the runtime's window. Default false: torchtitan's
  /// "default" does not reshard after forward when PP is on.
  bool reshard_after_forward = false;
  /// Data-parallel collectives (UNSHARD's all-gather, REDUCE_GRAD) on their own streams, so they
  /// overlap compute; false puts them on the compute stream (DeepSpeed `overlap_comm: false`,
  /// whose engine then issues them on the default stream; docs/facts/config-keys.md#deepspeed-zero-keys).
  bool overlap_comm = true;
  /// Gradient reduction overlapped with the step's last backward of each stage (Megatron-LM
  /// `--overlap-grad-reduce`, PyTorch DDP's and FSDP2's bucketed reductions, DeepSpeed ZeRO-1/2
  /// `overlap_comm`): buckets are reduced as the last microbatch's backward produces them, so
  /// REDUCE_GRAD may start when that backward starts (it needs what the backward needs) instead
  /// of after it ends. The last bucket, reduced after the backward, is not modelled (about
  /// 1/buckets of the reduction; Megatron-LM buckets 40M parameters or more). Only with
  /// overlap_comm (the reduction on its own stream).
  bool overlap_grad_reduce = false;
  /// Megatron-LM's distributed optimizer (ZeRO-1) with `--overlap-param-gather`: the gradient
  /// reduction is a reduce-scatter and the all-gather of the updated parameters runs under the
  /// next step's forward, so the step holds only the reduce-scatter. False: an all-reduce (the
  /// same bytes on the wire as reduce-scatter + all-gather).
  bool reduce_scatter_only = false;
  /// fsdp.options.unshard_async_op (FSDP2's `_set_unshard_async_op(True)`, pytorch PR #135523):
  /// each all-gather is issued from the compute stream with async_op=True, so NCCL's stream
  /// waits for the compute work issued before it, and c10d records its output on NCCL's stream.
  bool unshard_async_op = false;
  /// fsdp.options.record_stream (default: unshard_async_op; false is the fix
  /// TORCH_NCCL_AVOID_RECORD_STREAMS=1): a gathered buffer freed by RESHARD is released only
  /// when the collectives queued on its communicator's NCCL stream at the time of the free have
  /// finished (the caching allocator's record_stream rule; pytorch#147168, torchtitan#735).
  bool record_stream = false;
  /// Gradients accumulated unsharded across the step's microbatches (PyTorch's pipelining
  /// runtime with FSDP2): each stage's backward runs with requires_gradient_sync(False) and
  /// reshard_after_backward(False) until its last microbatch, whose post-backward reduce-scatters
  /// once (PipelineStage.backward_maybe_with_nosync); FSDP2 upcasts each unsharded gradient to
  /// the reduce dtype and sums into it (FSDPParam.to_accumulated_grad_if_needed,
  /// accumulate_unsharded_grad_if_needed). So every stage holds params / param_dtype_bytes ×
  /// reduce_dtype_bytes bytes from its first backward to its REDUCE_GRAD
  /// (docs/facts/composed-runtime.md#unsharded-gradient-accumulation). False: the gradients of
  /// each microbatch are reduced as they are produced (nothing unsharded is held).
  bool accumulate_unsharded_grads = false;
  /// Expert parallelism (mesh.ep; 1 = none): EP groups of `ep` consecutive shard ranks of one
  /// pipeline rank and replica (torchtitan borrows EP from dp_shard).
  int32_t ep = 1;
  std::optional<MoeSpec> moe;              ///< `moe:` (needs ep >= 2)
  double bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();  ///< collective link
  double latency_s = 0;                    ///< per collective
  double optimizer_s = 0;                  ///< the optimizer step on each rank, after its reductions
  /// Tied input and output embeddings (Megatron's embedding group): after their stages'
  /// REDUCE_GRAD, the ranks holding the first and the last stage all-reduce the embedding
  /// gradient (embedding_bytes in the reduce dtype) over a two-rank communicator.
  int64_t tied_embedding_bytes = 0;
  SourceLoc loc;                           ///< the `mesh` key
  SourceLoc reduce_loc;                    ///< where the reduction's dtype was chosen
  int32_t data_parallel() const { return dp_replicate * dp_shard; }
};

/// A schedule named in a spec instead of written out (`schedule: {name: zb-h1}`); the pipeline
/// front-end generates its action lists (src/pipeline/named_schedule.h).
struct ScheduleRequest {
  std::string name;
  std::optional<int32_t> chunks;  ///< stages per rank, where the schedule takes a choice
  bool megatron = false;          ///< interleaved-1f1b: Megatron-LM's variant
  SourceLoc loc;                  ///< the `name` value
};

/// A named group of pipeline ranks that collective actions run over (`groups:` in a pipeline
/// spec; `ALL_REDUCE@eval`). In a composed spec each data-parallel replica has its own
/// communicator over the group's pipeline ranks.
struct CollectiveGroup {
  int32_t name = -1;            ///< intern_group_name index
  std::vector<int32_t> ranks;   ///< pipeline ranks, ascending, distinct, each in [0, ranks)
  /// Bytes per rank of each collective over the group (the buffer of an all-reduce or a
  /// broadcast, the gathered output of an all-gather, the input of a reduce-scatter); a
  /// barrier moves none. Default 4: one fp32 scalar, as a loss all-reduce or PyTorch's
  /// barrier (an all-reduce of a one-element tensor) moves.
  int64_t bytes = 4;
  SourceLoc loc;                ///< the group's key
};

/// One phase of a step (`phases:`): a run of consecutive microbatch ids, trained (F and a
/// backward each) or forward-only (an evaluation: F only, each activation freed when its forward
/// ends). Phases follow each other in id order; each rank's action list holds them all, so an
/// evaluation after the training step is one spec (DeepSpeed PR #1944's hang is a rank that
/// skips a collective of the evaluation).
struct Phase {
  std::string name;            ///< as written ("" when not named)
  int32_t first = 0;           ///< first microbatch id
  int32_t microbatches = 1;    ///< ids first .. first + microbatches - 1
  bool forward_only = false;
  SourceLoc loc;               ///< the phase's entry
};

/// Where the spec's values came from, for messages that point at a key.
struct SpecLocs {
  SourceLoc file;        ///< start of the file
  SourceLoc ranks, stages, placement, microbatches, memory_limit, schedule;
  /// Per rank, where its action list is written (a CSV's row), or empty: what a rank is missing
  /// is reported there when its list is empty.
  std::vector<SourceLoc> rank_lists;
};

/// A pipeline schedule with its model. Invariants after a successful load:
/// ranks >= 1, stages >= 1, microbatches >= 1, stage_to_rank.size() == stages with entries in
/// [0, ranks), actions.size() == ranks, every action's stage in [0, stages) and microbatch in
/// [0, microbatches) (or -1 where the kind takes none), all cost/memory vectors sized `stages`.
struct PipelineSpec {
  std::string name;
  std::string path;              ///< file it was read from
  int32_t ranks = 0;
  int32_t stages = 0;
  int32_t microbatches = 0;
  std::vector<int32_t> stage_to_rank;
  /// "loop", "v", "explicit", or "inferred:loop" / "inferred:v" / "inferred" when the
  /// placement was not declared and was read off the action lists.
  std::string placement;
  bool placement_declared = false;
  Costs costs;
  P2PSpec p2p;
  MemorySpec memory;
  std::vector<std::vector<Step>> actions;  ///< per rank, in issue order
  /// First stage of each independent pipeline, ascending, starting with 0. One pipeline ({0})
  /// but for bidirectional schedules (DualPipe: {0, p}): a stage that starts a pipeline has no
  /// predecessor, and the stage before it is the previous pipeline's last.
  std::vector<int32_t> pipeline_starts{0};
  /// An evaluation or inference schedule: forwards only (F, SEND_F, RECV_F); no backward is
  /// required, and each activation is freed when its forward ends.
  bool forward_only = false;
  /// `phases:` in id order; empty: one phase of every microbatch, forward-only as forward_only
  /// says. forward_only is true when every phase is.
  std::vector<Phase> phases;
  /// True when microbatch `mb` runs forward only: its phase's flag, else forward_only.
  bool forward_only_microbatch(int32_t mb) const;
  /// True when some microbatch trains (runs a backward).
  bool trains() const;
  /// Microbatches that train: all of them but the forward-only ones.
  int32_t trained_microbatches() const;
  /// Groups declared under `groups:`, in file order; `world` is implicit (collective_group).
  std::vector<CollectiveGroup> groups;
  /// Numerics tolerances (`numerics: {max_relative_error, max_bias}`), for the numerics pass.
  std::optional<double> max_relative_error, max_bias;
  /// `numerics.deterministic: true`: a reduction whose bits depend on the order NCCL folds it in
  /// is a finding (Program::deterministic).
  bool deterministic = false;
  /// A composed spec (`mesh:`): the data-parallel replicas and FSDP of every pipeline rank.
  std::optional<Composition> composition;
  /// Set when the schedule is named rather than written out; `actions` is empty until resolved.
  std::optional<ScheduleRequest> named;
  SpecLocs locs;

  /// True when stage s has no predecessor (it starts a pipeline).
  bool is_first_stage(int32_t s) const;
  /// True when stage s has no successor (it ends a pipeline).
  bool is_last_stage(int32_t s) const;
  /// True when stages a and b, each in [0, stages), belong to the same pipeline (no pipeline
  /// start lies in (min, max]): where a skip connection (`0SEND_F0>2`) may go.
  bool same_pipeline(int32_t a, int32_t b) const;

  /// True when any action is a SEND or RECV (the schedule has explicit communication).
  bool has_comms() const;
  /// The group a collective names (`name`: intern_group_name index): a declared one, else for
  /// `world` every rank with 4 bytes per collective; nullopt for any other undeclared name.
  std::optional<CollectiveGroup> collective_group(int32_t name) const;
};

/// Cost and memory defaults for a schedule given without a model (a bare CSV): F = I = W = 1 s,
/// B = 2 s, no link cost, activation_bytes = weight_grad_bytes = 1, params 0, no limit; so the
/// memory peak reads as a count of live (stage, microbatch) activations.
void apply_unit_defaults(PipelineSpec& spec);

/// Stage-to-rank maps of PyTorch's generators (docs/facts/pipeline-schedules.md): loop puts stage s on rank s % ranks;
/// v (2 stages per rank) puts stages r and 2*ranks-1-r on rank r. Empty when v does not fit
/// (stages != 2 * ranks).
std::vector<int32_t> loop_placement(int32_t ranks, int32_t stages);
std::vector<int32_t> v_placement(int32_t ranks, int32_t stages);

/// Reads the placement off the action lists: stage s belongs to the rank whose list names it
/// most often (the lowest such rank on a tie), so one stray action on another rank is what gets
/// blamed, not the rank that runs the stage; stages never named map to -1. A stage named on two
/// ranks is not an error here: the structure pass reports every action that runs on a rank
/// other than its stage's. Stage ids outside [0, stages) are ignored.
std::vector<int32_t> infer_placement(const std::vector<std::vector<Step>>& actions, int32_t stages);

/// Names a placement: "loop", "v" or "explicit".
std::string placement_name(const std::vector<int32_t>& stage_to_rank, int32_t ranks);

}  // namespace sc
