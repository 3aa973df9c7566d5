// FSDP / ZeRO-3 gather-free specs (the `fsdp:` key of a schedcheck YAML spec).
// Semantics: docs/facts/fsdp-zero.md; key reference: specs/fsdp.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/source.h"

namespace sc {

/// Which runtime's gather/free policy is modelled.
enum class FsdpImplementation { kFsdp1, kFsdp2, kZero3 };

/// FSDP1 `backward_prefetch`: BACKWARD_PRE issues the next unit's all-gather before the
/// current unit's gradient computation, BACKWARD_POST after it, NONE when the next unit's
/// backward starts (docs/facts/fsdp-zero.md).
enum class BackwardPrefetch { kPre, kPost, kNone };

/// Collective time model for n ranks, B bytes (per-rank all-gather output, reduce-scatter
/// input or all-reduce buffer), latency a and bandwidth W (Thakur, Rabenseifner & Gropp 2005,
/// "Optimization of collective communication operations in MPICH"):
/// kRing: all-gather and reduce-scatter (n-1)·a + (n-1)/n·B/W; all-reduce twice that.
/// kAlphaBeta: one latency term: a + (n-1)/n·B/W (twice the bandwidth term for all-reduce).
enum class CollectiveModel { kRing, kAlphaBeta };

/// A data type of parameters or reductions: name ("bf16") and size in bytes (2).
struct DType {
  std::string name = "bf16";
  int bytes = 2;
};

/// One FSDP unit (an FSDP1 wrapped module, an FSDP2 `fully_shard` group, a ZeRO-3 module), in
/// forward order, after `repeat: N` is expanded ("layer" with repeat 32 becomes "layer.0" ..
/// "layer.31"; a unit without repeat keeps its name).
struct FsdpUnit {
  std::string name;
  int64_t params_bytes = 0;       ///< unsharded parameters in the param dtype, bytes
  /// Bytes the unit's all-gather moves and its unsharded parameters hold when they are not
  /// params_bytes: the linear weights all-gathered in fp8 (FSDP2's float8 all-gather, one byte
  /// each, the rest in the param dtype; docs/facts/cost-formulas.md#fp8-linear-layers). -1: params_bytes.
  int64_t gathered_bytes = -1;
  /// The bytes the all-gather moves and the unsharded copy holds.
  int64_t gather_bytes() const { return gathered_bytes >= 0 ? gathered_bytes : params_bytes; }
  double forward_s = 0;           ///< forward compute of one microbatch, seconds
  double backward_s = 0;          ///< backward compute of one microbatch, seconds
  int64_t activation_bytes = 0;   ///< saved for backward, per microbatch, bytes
  /// Live only while the unit's forward runs and again while its backward runs, per microbatch,
  /// bytes: activations a checkpointed unit recomputes, or a loss's transient copies (0: none).
  int64_t transient_bytes = 0;
  /// Live while the unit's backward runs instead of transient_bytes when >= 0, bytes: a loss
  /// whose backward holds more than its forward (docs/facts/activation-memory.md#the-loss).
  int64_t backward_transient_bytes = -1;
  /// Reserved by the caching allocator but not live from the end of the unit's forward to the
  /// end of its backward, per microbatch, bytes: a block the forward's transients free that the
  /// backward's larger allocations cannot reuse (torchtitan's bf16 logits, too small for the
  /// loss's fp32 gradients; docs/facts/activation-memory.md#the-loss-region). A ReserveHold in
  /// the program: it raises the reserve, never the live peak or the out-of-memory verdict.
  int64_t stranded_bytes = 0;
  SourceLoc loc;                  ///< the unit's entry in the spec
};

/// Per-rank divergence, to model real hangs (docs/facts/fsdp-zero.md: DeepSpeed#7461, transformers#16688).
/// Unit names are expanded names ("layer.7"); the loader checks they exist.
struct FsdpRankOverride {
  std::vector<std::string> skip_units;    ///< this rank runs neither forward nor backward of these
  std::vector<std::string> repeat_units;  ///< this rank runs these twice in a row (forward and backward)
  std::optional<int> microbatches;        ///< this rank's number of microbatches per step
  SourceLoc loc;
};

/// One op of an explicit per-rank stream program (`programs:`), for custom sequences.
/// kind: "all_gather" (allocates the unit's unsharded parameters at start; collective on the
/// shard group), "forward" / "backward" (compute; use the gathered parameters; forward
/// allocates the unit's activations, backward frees them and allocates its unsharded
/// gradient), "free" (frees the unit's gathered parameters), "reduce_scatter" (collective;
/// frees the unit's unsharded gradient at its end), "all_reduce" (HSDP, on the replicate
/// group), "optimizer" (compute). `stream` defaults by kind: all_gather -> "all_gather",
/// reduce_scatter -> "reduce_scatter", all_reduce -> "all_reduce", others -> "compute".
/// `after` names ops (by `id`) of the same rank that must complete first (a CUDA event wait).
struct FsdpProgramOp {
  std::string kind;
  std::string unit;                ///< empty for "optimizer"
  std::string stream;
  std::string id;                  ///< optional, unique per rank
  std::vector<std::string> after;  ///< ids of earlier ops of the same rank
  SourceLoc loc;
};

/// A whole `fsdp:` spec. Sizes in bytes, times in seconds, bandwidth in bytes per second.
struct FsdpSpec {
  std::string name;                       ///< `name:` or the file stem
  int ranks = 0;
  std::optional<int64_t> limit_bytes;     ///< memory.limit_bytes
  FsdpImplementation implementation = FsdpImplementation::kFsdp2;
  std::optional<double> max_relative_error, max_bias;  ///< `numerics:` tolerances
  bool deterministic = false;                          ///< `numerics.deterministic` (Program::deterministic)
  int shard_size = 0;                     ///< ranks per shard group (default: ranks / replicate_size)
  int replicate_size = 1;                 ///< HSDP replicas; shard_size * replicate_size == ranks
  DType param_dtype{"bf16", 2};           ///< all-gather dtype (dtypes.param)
  DType reduce_dtype{"bf16", 2};          ///< reduce-scatter dtype (dtypes.reduce; default param)
  double bandwidth_bytes_per_s = 0;       ///< link.bandwidth (per rank, per direction)
  double latency_s = 0;                   ///< link.latency
  CollectiveModel collective_model = CollectiveModel::kRing;  ///< link.model: ring | alpha-beta
  std::vector<FsdpUnit> units;            ///< expanded, forward order
  int microbatches = 1;                   ///< per step (gradient accumulation; reduce-scatter each)
  int iterations = 2;                     ///< steps modelled (2 so the step-1 peak is seen)
  /// Optimizer state per parameter, bytes (optimizer: adam = 8, two fp32 moments; sgd = 0;
  /// or {state_bytes_per_param: N}); allocated at the first step, sharded like the parameters.
  double optimizer_state_bytes_per_param = 8;
  double optimizer_step_s = 0;            ///< optimizer.step time, seconds

  // fsdp2 options
  int reshard_after_forward = -1;         ///< -1: true; 0: false; k > 0: reshard to groups of k ranks (int form)
  /// FSDPModule.set_gradient_divide_factor: the gradients are divided by this instead of the
  /// data-parallel size (numerics::fsdp2_gradient_divide for how the reduction then computes).
  std::optional<double> gradient_divide_factor;
  int forward_prefetch_depth = 1;         ///< implicit: 1 (the next unit's all-gather overlaps this unit)
  int backward_prefetch_depth = 1;        ///< FSDP2 default: exactly one unit ahead
  /// Explicit prefetch lists (set_modules_to_forward_prefetch / ..._backward_prefetch): for a
  /// unit, the units whose all-gathers are issued when it runs. Empty when not given.
  std::map<std::string, std::vector<std::string>> forward_prefetch;
  std::map<std::string, std::vector<std::string>> backward_prefetch;

  // fsdp1 options
  bool limit_all_gathers = true;          ///< rate limiter: at most 2 all-gathers pending free
  bool forward_prefetch_fsdp1 = false;    ///< fsdp1 forward_prefetch
  BackwardPrefetch backward_prefetch_fsdp1 = BackwardPrefetch::kPre;

  // zero3 options (parameter counts, as DeepSpeed's config)
  int64_t prefetch_bucket_size = 50'000'000;   ///< stage3_prefetch_bucket_size, parameters
  int64_t max_live_parameters = 1'000'000'000; ///< stage3_max_live_parameters, parameters
  /// zero_optimization.overlap_comm: all-gathers and reduce-scatters on their own streams
  /// (true, DeepSpeed's default at stage 3) or on the compute stream (false: DeepSpeed's
  /// parameter coordinator and reducer then use the default stream).
  bool overlap_comm = true;

  std::map<int, FsdpRankOverride> overrides;   ///< ranks_override, by rank
  /// Explicit programs, by rank (key -1: every rank without its own). When non-empty, they
  /// replace the generated sequences.
  std::map<int, std::vector<FsdpProgramOp>> programs;

  /// Where things were written, for findings.
  struct Locs {
    SourceLoc file, fsdp, units, options, limit, programs;
    /// The value that chose the reduce dtype: `dtypes.reduce`, else `dtypes.param` (the reduce
    /// dtype defaults to it); invalid when neither is written (then findings point at `fsdp`).
    SourceLoc reduce_dtype;
    SourceLoc gradient_divide_factor;  ///< its value, where it was given
  } locs;
};

}  // namespace sc
