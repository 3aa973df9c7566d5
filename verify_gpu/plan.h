// The execution plan of a Program on GPUs: streams, events, timed items, buffers and the host
// command list an executor enqueues, built on the CPU (no CUDA headers) and replayable here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/program.h"
#include "sim/timeline.h"
#include "support/expected.h"

namespace sc::gpu {

/// A device stream of the plan. Every IR stream becomes one (same index: plan stream i is
/// Program::streams[i] for i < program.streams.size()); implicit transfers (kTransfer deps of
/// compute-only schedules) get "lane" streams per (src rank, dst rank) after them, as many as
/// transfers of that pair overlap in the prediction, so no two predicted-concurrent transfers
/// share a stream. A batched P2P group's members after the first run on "batch lane" streams of
/// their IR stream (one per member position), so all members of the group run together.
struct PlanStream {
  int32_t rank = 0;        ///< the rank that owns it (the sender for a transfer lane)
  int32_t ir_stream = -1;  ///< Program::streams index, or -1 for a transfer lane
  int32_t peer = -1;       ///< transfer lanes: the receiving rank
  std::string name;        ///< "rank 0 compute", "rank 0 -> 1 transfer #0"
};

/// What a timed item is, for the figures: compute counts as busy time; communication (sends,
/// receives, collectives, implicit transfers) is what compute may overlap with; markers are
/// zero-time bookkeeping.
enum class ItemClass : uint8_t { kCompute, kComm, kMarker };

/// Something with a start and an end on one stream: an op of the Program (items [0, ops)) or
/// an implicit transfer (items [ops, ops + transfers)). Times in seconds from the first op's
/// start. `start_event` / `end_event` index GpuPlan::events (timing events).
struct Item {
  OpId op = kNoOp;          ///< the op, or kNoOp for a transfer
  OpId transfer_src = kNoOp, transfer_dst = kNoOp;  ///< transfers: producer and consumer op
  int32_t stream = 0;       ///< plan stream
  int32_t rank = 0;
  ItemClass cls = ItemClass::kCompute;
  int32_t start_event = -1, end_event = -1;
  double predicted_start_s = 0, predicted_end_s = 0;
  std::string label;        ///< Program::label, or "xfer 0F3 -> 1F3"
};

/// A CUDA event of the plan. Timing events (item start and end) are created with timing
/// enabled; the others (an op's "ready" point for a rendezvous or collective partner) without.
/// A member of a batched P2P group is ready at the group's launch: its ready event is recorded
/// on its IR stream after every member's deps (Program::groups, the timeline's group start).
struct PlanEvent {
  bool timing = false;
  int32_t item = -1;     ///< timing events: the item whose start or end this is
  bool is_start = false; ///< timing events: start (true) or end (false) of `item`
};

/// One allocation from a rank's memory pool: a positive memory effect of an op, or the rank's
/// static bytes (parameters, `ir_buffer` -1), allocated before the first op and freed after the
/// last. `bytes` is what the IR says; the pool may round it up.
struct PlanBuffer {
  int32_t rank = 0;
  int32_t ir_buffer = -1;  ///< Program::buffers index, or -1 for static bytes
  int64_t bytes = 0;
};

/// What a host command does (the executor maps each to one CUDA call or kernel launch):
/// kWait: cudaStreamWaitEvent(stream, event). kRecord: cudaEventRecord(event, stream).
/// kAlloc / kFree: cudaMallocAsync / cudaFreeAsync of `buffer` from its rank's pool on `stream`.
/// kSpin: a compute kernel of `duration_s` for `item`. kCopy: a device-to-device copy of
/// `bytes` from rank `src_rank`'s send buffer to rank `dst_rank`'s receive buffer, padded with
/// a spin so copy + pad last `duration_s` (the link time) when the copy is faster.
enum class CmdKind : uint8_t { kWait, kRecord, kAlloc, kFree, kSpin, kCopy };

/// One host command, in the order the executor issues them (GpuPlan::commands).
struct Command {
  CmdKind kind = CmdKind::kRecord;
  int32_t stream = 0;
  int32_t event = -1;     ///< kWait, kRecord
  int32_t item = -1;      ///< kSpin, kCopy: the item whose work this is
  int32_t buffer = -1;    ///< kAlloc, kFree: GpuPlan::buffers index
  int32_t src_rank = -1, dst_rank = -1;  ///< kCopy
  int64_t bytes = 0;      ///< kCopy: message bytes
  double duration_s = 0;  ///< kSpin: kernel time; kCopy: time to hold copy + pad to
};

/// A happens-before fact the correctness pass checks on the GPU's ticket order:
/// kEndBeforeBegin: item `before` ended before item `after` began (stream order, deps,
/// rendezvous and collective partners); kEndBeforeEnd: `before` ended before `after` ended (a
/// receive completes after its send).
struct HbEdge {
  enum Kind : uint8_t { kEndBeforeBegin, kEndBeforeEnd };
  int32_t before = 0, after = 0;
  Kind kind = kEndBeforeBegin;
};

/// How ranks are put on GPUs when there are fewer GPUs than ranks: kBlocked gives GPU g the
/// ranks [g * ceil(R/G), (g+1) * ceil(R/G)); kRoundRobin gives rank r GPU r % G.
enum class DevicePolicy : uint8_t { kBlocked, kRoundRobin };

/// The GPU (0-based, among `gpus`) of each of `ranks` ranks. `gpus` >= 1; ranks >= 0.
std::vector<int32_t> assign_devices(int32_t ranks, int32_t gpus, DevicePolicy policy);

/// Options of make_plan.
struct PlanOptions {
  int32_t gpus = 1;                              ///< GPUs the ranks are spread over
  DevicePolicy policy = DevicePolicy::kBlocked;
};

/// The whole plan. Invariants: commands are in an order where every kWait's event was last
/// recorded by an earlier kRecord of the same happens-before fact (so a single pass in command
/// order is a valid issue order); per stream the commands are in the predicted order of its
/// items; per rank the kAlloc/kFree commands are in the predicted time order of the memory
/// effects, frees before allocations at the same instant (Timeline's rule).
struct GpuPlan {
  int32_t num_ranks = 0;
  std::vector<int32_t> device_of_rank;        ///< GPU per rank (assign_devices)
  std::vector<PlanStream> streams;
  std::vector<PlanEvent> events;
  std::vector<Item> items;                    ///< ops first (item i = op i), then transfers
  std::vector<PlanBuffer> buffers;
  std::vector<Command> commands;
  std::vector<HbEdge> hb;
  /// Per rank, the largest message it sends / receives (bytes): the size of its staging
  /// buffers, allocated outside the pools (messages are not memory effects of the IR).
  std::vector<int64_t> send_staging_bytes, recv_staging_bytes;
  /// Per rank, the pool's expected high-water mark of used bytes when the commands are issued
  /// in order (the pool counts at issue time), before the pool's rounding. Equals the
  /// timeline's peak_bytes_per_rank for a program whose memory effects all lie on compute ops
  /// of positive duration (tests pin this for the pipeline examples).
  std::vector<int64_t> expected_peak_bytes_per_rank;
  /// Most buffers live at once per rank (rounding adds at most this many rounding units).
  std::vector<int32_t> max_live_buffers_per_rank;
  size_t num_ops = 0;                         ///< items [0, num_ops) are ops
};

/// Builds the plan of `program` from its prediction `timeline` (simulate over a complete
/// `order`). Errors: the timeline does not cover every op (the program did not execute to
/// completion), a memory effect frees a buffer that is not live, or an op kind this executor
/// does not know.
Expected<GpuPlan> make_plan(const Program& program, const Timeline& timeline, const PlanOptions& options = {});

/// The expected high-water mark of `plan`'s rank `rank` when the pool rounds every allocation
/// up to a multiple of `rounding_bytes` (>= 1), replaying the commands in order.
int64_t expected_peak_rounded(const GpuPlan& plan, int32_t rank, int64_t rounding_bytes);

/// Start and end of one item, in seconds (a prediction or a measurement).
struct ItemTime {
  double start_s = 0;
  double end_s = 0;
};

/// The order in which the GPU reached each item's start and end in the untimed pass: tickets
/// from one global counter (begin_ticket[i] < end_ticket[i]), and how often each item ran.
struct Tickets {
  std::vector<int64_t> begin_ticket, end_ticket;
  std::vector<int32_t> runs;
};

/// Costs of the CPU replay: a fixed latency per kernel launch or copy (seconds) and a copy
/// bandwidth (bytes/s; infinite by default). With the defaults the replay is the ideal GPU.
struct ReplayCosts {
  double launch_s = 0;
  double copy_bandwidth_bytes_per_s = 0;  ///< 0: copies take no time (held to their link time)
};

/// What the CPU replay found: item times (from the first item's start); tickets in an order
/// the GPU could have reached the items' starts and ends (time order, and at equal times
/// causal order: a record before the waits on it); per rank, the pool high-water mark as
/// issued (no rounding) and bytes still allocated at the end.
struct ReplayResult {
  std::vector<ItemTime> items;
  Tickets tickets;
  std::vector<int64_t> peak_bytes_per_rank;
  std::vector<int64_t> leaked_bytes_per_rank;
};

/// Runs the plan's commands in order on an ideal in-memory GPU (each stream a FIFO with its own
/// clock, events carry the time of their last record, unlimited parallelism). With zero costs
/// the item times equal the prediction: the fake against which the plan is tested.
ReplayResult replay(const GpuPlan& plan, const ReplayCosts& costs = {});

/// Checks an untimed pass: every item ran exactly once, every HbEdge holds in ticket order, and
/// no pool bytes were left (`leaked_bytes_per_rank`, all zero). Returns the problems found, one
/// line each ("item 0F3 ran 2 times", "0F1 began before 0F0 ended"); empty when correct.
std::vector<std::string> check_execution(const GpuPlan& plan, const Tickets& tickets,
                                         const std::vector<int64_t>& leaked_bytes_per_rank);

}  // namespace sc::gpu
