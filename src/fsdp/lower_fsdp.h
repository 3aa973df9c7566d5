// Lowering of an FSDP / ZeRO-3 spec into the Program IR: per rank, the CPU issue order of
// gathers, compute, frees and reductions on compute and communication streams.
// Semantics: docs/facts/fsdp-zero.md.
#pragma once

#include <cstdint>
#include <vector>

#include "check/finding.h"
#include "fsdp/fsdp_spec.h"
#include "ir/program.h"

namespace sc {

/// What a lowered FSDP op stands for.
/// kCopyIn: FSDP2 all-gather copy-in (marker on "ag_copy_in"; allocates the gather buffer).
/// kAllGather: the unit's parameter all-gather (collective on the shard group).
/// kWait: the compute stream waits for the unit's all-gather (marker on "compute").
/// kForward / kBackward: one microbatch's compute of the unit.
/// kReshard: frees the unit's unsharded parameters (marker on "compute").
/// kRsCopyIn: FSDP2 reduce-scatter copy-in (marker on "reduce_scatter"; allocates its input).
/// kReduceScatter: the unit's gradient reduce-scatter (collective on the shard group).
/// kAllReduce: HSDP all-reduce of the gradient shard (collective on the replicate group).
/// kWaitReduce: the compute stream waits for the step's last reductions (marker).
/// kOptimizer: optimizer.step (compute).
enum class FsdpOpKind : uint8_t {
  kCopyIn, kAllGather, kWait, kForward, kBackward, kReshard, kRsCopyIn, kReduceScatter, kAllReduce,
  kWaitReduce, kOptimizer
};

/// "copy-in", "all-gather", "wait", "forward", "backward", "reshard", "rs-copy-in",
/// "reduce-scatter", "all-reduce", "wait-reduce", "optimizer".
const char* fsdp_op_kind_name(FsdpOpKind k);

/// Where a lowered op comes from.
struct FsdpOpInfo {
  FsdpOpKind kind = FsdpOpKind::kForward;
  int32_t unit = -1;        ///< FsdpSpec::units index, -1 for none (optimizer, wait-reduce)
  int16_t iteration = 0;    ///< step index, 0-based
  int16_t microbatch = 0;   ///< microbatch index within the step, 0-based
  bool backward = false;    ///< issued in the backward phase (gathers, frees, reductions too)
};

/// A lowered spec: the Program and, per op id, what it stands for.
struct FsdpProgram {
  Program program;
  std::vector<FsdpOpInfo> info;         ///< per op id
  std::vector<int32_t> shard_comm;      ///< per rank: its shard-group communicator
  std::vector<int32_t> replicate_comm;  ///< per rank: its replicate communicator, -1 without HSDP
  /// Static problems of explicit programs (`programs:`), in program order: kResidency for a
  /// free, forward or backward of a unit with no gathered parameters at that point of the rank's
  /// program; kStructure for an unknown unit or `after` id and an all_reduce without HSDP.
  std::vector<Finding> findings;
};

/// Time of one collective over `group_size` ranks moving `bytes` per rank (all-gather output,
/// reduce-scatter input, all-reduce buffer), with the spec's latency a, bandwidth W and model
/// (Thakur, Rabenseifner & Gropp 2005): ring all-gather and reduce-scatter (n-1)·a +
/// (n-1)/n·B/W, all-reduce twice that; alpha-beta a + (n-1)/n·B/W (all-reduce a + 2(n-1)/n·B/W).
/// 0 for a group of one rank; a bandwidth <= 0 counts as infinite. Seconds.
double collective_time_s(const FsdpSpec& spec, CollectiveKind kind, int64_t bytes, int group_size);

/// Lowers `spec` into a Program, rank by rank, each rank's ops added in CPU issue order (so
/// per-communicator sequence numbers follow issue order).
///
/// Communicators: "shard g" over ranks [g·N, (g+1)·N) (N = shard_size) carries every all-gather
/// and reduce-scatter of its ranks; with replicate_size > 1, "replicate j" over {j, j+N, ...}
/// carries the HSDP all-reduces. Streams per rank: "compute", "ag_copy_in" (FSDP2 only),
/// "all_gather", "reduce_scatter", "all_reduce" (HSDP only). Program::static_bytes_per_rank is
/// the parameter shard, sum of params_bytes / N.
///
/// Buffers (kind, bytes; P = params_bytes, p / q = param / reduce dtype bytes): "param" (P, the
/// unsharded parameters of one gather), "ag-buffer" (P, FSDP2 gather output), "act"
/// (activation_bytes, one microbatch), "grad" (P, unsharded gradient of one microbatch),
/// "rs-input" (P·q/p, FSDP2), "grad-shard" (P·q/p/N, from the unit's first reduce-scatter of a
/// step until the optimizer step), "optimizer-state" (sum P/p/N · state bytes per parameter,
/// from the first optimizer step on). Forward and backward ops use() the param buffer they read.
///
/// Per step and microbatch: forward over the rank's units, backward in reverse; then a
/// wait-reduce marker and the optimizer step. Rank overrides: skipped units are left out,
/// repeated units run twice in a row (each with its own gather, free and reduce-scatter), and
/// the microbatch count may differ. The gather/free policy follows `implementation`:
/// FSDP2 copy-in + all-gather (parameters at the all-gather's end), explicit or depth-based
/// prefetch, the previous gather's buffer freed at the next copy-in, one reduce-scatter input
/// alive until the next unit's post-backward; FSDP1 all-gather (parameters at its start),
/// limit_all_gathers as a dependency of the j-th all-gather on the (j-2)-th reshard,
/// forward_prefetch and BACKWARD_PRE / POST / NONE; ZeRO-3 prefetch bounded by
/// prefetch_bucket_size and max_live_parameters (in parameters), each all-gather of a pre-forward
/// or pre-backward hook depending on the compute op issued before the hook.
/// `reshard_after_forward` = 0 keeps the parameters from forward to backward for every
/// implementation; an integer k as post_forward_group says (FSDP2: 1 like false, the shard size
/// like true, otherwise a 1/k post-forward shard kept to the backward's all-gather over k ranks).
///
/// With spec.programs non-empty, each rank's explicit program (its own, else key -1, else none)
/// is translated op by op instead, and static problems go to FsdpProgram::findings.
///
/// `quotient` (where fsdp_quotient_applies): the symmetry quotient of docs/facts/symmetry.md.
/// Every rank runs the same generated program up to renumbering, so one rank is built and
/// stands for all of them (Program::rank_classes = {{0, ranks}}): num_ranks 1, its "shard 0"
/// and "replicate 0" communicators with the built rank as their one member and the job's group
/// sizes (Communicator::size), so each collective is timed and its arithmetic analysed for the
/// whole group and completes when the built rank reaches it. The per-rank vectors (shard_comm,
/// replicate_comm, static bytes) have one entry.
FsdpProgram lower_fsdp(const FsdpSpec& spec, bool quotient = false);

/// The group FSDP2 reshards a unit to after its forward, from FsdpSpec::reshard_after_forward
/// (torch/distributed/_composable/fsdp/_fsdp_init.py `_get_post_forward_mesh_info` @ pytorch aa4b756b,
/// docs/facts/fsdp-zero.md#integer-reshard-after-forward): 0 = the whole shard group (true, or
/// an integer equal to the shard size), 1 = none, parameters kept gathered (false, or the
/// integer 1, which FSDP2 treats as false), k = a post-forward group of k ranks.
int post_forward_group(const FsdpSpec& spec);

/// Whether lower_fsdp can build the quotient of `spec`: more than one rank, no rank overrides
/// and generated programs (no `programs:`), so every rank's program is the same.
bool fsdp_quotient_applies(const FsdpSpec& spec);

}  // namespace sc
