// The Program IR: ranks x streams x ops, with dependencies, channels and memory effects.
// The one contract between front-ends (pipeline, later FSDP and router) and analyses.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ir/action.h"
#include "ir/semantics.h"
#include "support/source.h"

namespace sc {

using OpId = int32_t;
inline constexpr OpId kNoOp = -1;

/// What an op does.
/// kCompute: runs for `duration_s` on its stream (pipeline F/I/W/B, an overlapped pair, or a
///   named kernel). kSend / kRecv: one point-to-point message on `channel` (FIFO matched: the
///   k-th send of a channel pairs with its k-th recv). kCollective: a collective over `group`
///   (completes when every member has reached it; used by later front-ends). kMarker: a
///   zero-cost bookkeeping op (UNSHARD, RESHARD, REDUCE_GRAD) that orders its stream.
enum class OpKind : uint8_t { kCompute, kSend, kRecv, kCollective, kMarker };

/// How a dependency is satisfied. kLocal: another op on the same rank (an event wait when on
/// another stream; free). kTransfer: an implicit cross-rank transfer in a compute-only
/// schedule; it costs the link time of the program's LinkModel for `message_bytes`.
enum class DepKind : uint8_t { kLocal, kTransfer };

/// What a kCollective op computes (NCCL's names). Bytes are per rank: for kAllGather the
/// gathered output, for kReduceScatter the unreduced input, for kAllReduce the buffer.
/// kCommInit is the creation of its communicator (ncclCommInitRank: every member takes part,
/// and the host thread of each blocks until all have joined); no bytes.
/// kBroadcast: the root's buffer of `bytes` to every member; kBarrier: no payload (PyTorch's
/// barrier all-reduces a one-element tensor), every member waits for all.
enum class CollectiveKind : uint8_t { kAllGather, kReduceScatter, kAllReduce, kCommInit, kAllToAll, kBroadcast, kBarrier };

/// "all-gather", "reduce-scatter", "all-reduce", "communicator init", "all-to-all", "broadcast",
/// "barrier".
const char* collective_name(CollectiveKind k);

/// A static string ("bf16", "act", ...; "" when unset) kept in one byte: an index into a
/// process-wide, append-only table of the distinct strings assigned (at most 255; a 256th
/// distinct string throws std::length_error). Converts to and from `const char*`; the string
/// must outlive every program (a literal or another static string). Used for the element type
/// of a message (Op::dtype) and a buffer's kind (Buffer::kind).
class StaticName {
 public:
  StaticName() = default;
  StaticName(const char* name);  // NOLINT: implicit, as the `const char*` field it replaces
  operator const char*() const;  // NOLINT
  const char* c_str() const { return *this; }

 private:
  uint8_t id_ = 0;
};

/// `dst` may start only after op `src` has completed.
/// 4 bytes: op ids lie below 2^30 (the readers cap programs far below).
struct Dep {
  OpId src : 31 = kNoOp;
  DepKind kind : 1 = DepKind::kLocal;
};

/// A change of live bytes on the op's rank: `bytes` > 0 allocates, < 0 frees. Applied at the
/// op's start (`at_end` false) or end. `buffer` indexes Program::buffers.
/// 16 bytes (bytes first, so the flag packs beside the buffer index); built as
/// MemEffect{buffer, bytes, at_end}.
struct MemEffect {
  MemEffect() = default;
  MemEffect(int32_t buffer_, int64_t bytes_, bool at_end_) : bytes(bytes_), buffer(buffer_), at_end(at_end_) {}
  int64_t bytes = 0;
  int32_t buffer = -1;
  bool at_end = false;
};

/// One of several tensors a SEND/RECV action carries across its stage boundary (`1RECV_F0x3`,
/// `1RECV_F0[act,mask]`): each is a send or recv op of its own, on the action's channel, in the
/// order listed. An op with no entry in Program::tensors carries its boundary's one tensor.
struct BoundaryTensor {
  int32_t index = 0;  ///< 0-based position among the action's tensors
  int32_t count = 1;  ///< tensors the action carries
  int32_t name = -1;  ///< Program::names index of the tensor's name, or -1 (a counted boundary)
};

/// A named allocation on a rank. For pipelines: kind "act" or "wgrad" of (stage, microbatch).
/// For FSDP: kind "param", "ag-buffer", "grad", "rs-input", ... with `name` (Program::names)
/// naming the instance ("param layer.7 it0 fwd").
struct Buffer {
  int32_t rank = 0;
  int32_t stage = -1;
  int32_t microbatch = -1;
  StaticName kind;        ///< "act", "wgrad", ...
  int64_t bytes = 0;
  int32_t name = -1;  ///< Program::names index, or -1
  /// The caching-allocator pool the buffer is allocated from (MemPool): PyTorch's CUDA caching
  /// allocator reuses a freed block only for a later allocation on the stream that allocated
  /// it, so each stream that allocates keeps its own reserve (docs/facts/activation-memory.md#reserved-memory).
  uint8_t pool = 0;
};

/// Buffer::pool values: the compute stream's pool and the side streams FSDP2 allocates on.
enum MemPool : uint8_t {
  kPoolCompute = 0,          ///< the rank's compute (default) stream
  kPoolAllGatherCopyIn = 1,  ///< FSDP2's all-gather copy-in stream: the all-gather output
  kPoolReduceScatter = 2,    ///< FSDP2's reduce-scatter stream: the reduce-scatter output (gradient shards)
  kNumMemPools = 3,
};

/// A block the caching allocator keeps reserved in `pool` while no tensor lives in it: freed by
/// an op's tensor and too small for the larger allocations that follow, so the allocator grows
/// its reserve for them instead (torchtitan's bf16 logits before the loss's fp32 gradients:
/// docs/facts/activation-memory.md#the-loss-region). It counts toward the reserve
/// (Timeline::reserved_bytes_per_rank) and never toward live bytes: the memory passes and the
/// out-of-memory verdict do not see it. Held from `from` (its start, or its end with
/// `from_end`) to `to` (likewise), both ops of `rank`.
struct ReserveHold {
  int32_t rank = 0;
  int64_t bytes = 0;
  OpId from = kNoOp;
  OpId to = kNoOp;
  bool from_end = true;
  bool to_end = true;
  uint8_t pool = 0;  ///< MemPool
};

/// One operation. `actions` holds the pipeline actions it stands for: one, or two for an
/// overlapped F;B pair (kCompute), the local SEND/RECV action (kSend/kRecv), or the marker
/// action. Its deps are Program::deps[the previous op's dep_end, dep_end) (deps_begin/deps_end),
/// its memory effects and uses likewise: each op's ranges follow the previous op's, so only
/// their ends are stored. `step` is its index in the rank's action list.
///
/// 88 bytes. The P2P fields (peer, channel, match, group: kSend/kRecv only) and the fields of
/// every other kind (comm, seq, arith: kCollective; name: any op but kSend/kRecv) share storage;
/// the accessors read by `kind` and answer -1 (kNoOp) for a field the kind does not have, so set
/// `kind` before reading. A setter writes its slot whatever the kind: set only the fields of
/// the op's kind.
struct Op {
  OpKind kind = OpKind::kCompute;
  uint8_t num_actions = 0;
  CollectiveKind collective = CollectiveKind::kAllGather;  ///< collective only
  StaticName dtype;       ///< the element type sent (P2P, collective): "bf16", "fp32", ...
  int32_t rank = 0;
  int32_t stream = 0;     ///< global stream index (Program::streams)
  int32_t step = -1;
  double duration_s = 0;  ///< compute cost; 0 for P2P ops (their time comes from the link)
  Action actions[2];
  int64_t bytes = 0;      ///< message size (P2P), bytes per rank (collective)
  uint32_t dep_end = 0;   ///< end of its range in Program::deps
  uint32_t mem_end = 0;   ///< end of its range in Program::mem
  uint32_t use_end = 0;   ///< end of its range in Program::uses: buffers the op reads or writes
  SourceLoc loc;

  bool is_p2p() const { return kind == OpKind::kSend || kind == OpKind::kRecv; }
  /// P2P only (an op whose one action is a SEND/RECV, read before its kind is set): the stage at
  /// the other end of the message, its action's neighbour (SEND_F and RECV_B: stage + 1; RECV_F
  /// and SEND_B: stage - 1) unless the op skips stages (a spec's `0SEND_F0>2`, set_skip_stage);
  /// -1 for any other op.
  int32_t peer_stage() const;
  /// P2P only: records that the message goes to (a send) or comes from (a receive) `stage`
  /// rather than the neighbour. It is held as the partner action on that stage in actions[1],
  /// which a P2P op does not otherwise use (num_actions stays 1), so an op costs no more bytes.
  void set_skip_stage(int32_t stage);
  /// True when set_skip_stage named a stage other than the neighbour.
  bool skips() const;
  // P2P only.
  int32_t peer() const { return is_p2p() ? slot_[0] : -1; }     ///< the other rank
  int32_t channel() const { return is_p2p() ? slot_[1] : -1; }  ///< Program::channels index
  /// The matched send/recv (FIFO per channel), kNoOp if unmatched.
  OpId match() const { return is_p2p() ? slot_[2] : kNoOp; }
  int32_t group() const { return is_p2p() ? slot_[3] : -1; }    ///< Program::groups index, or -1
  // Collective only.
  int32_t comm() const { return kind == OpKind::kCollective ? slot_[0] : -1; }  ///< Program::comms
  /// Position in its rank's sequence on `comm` (set by add_op).
  int32_t seq() const { return kind == OpKind::kCollective ? slot_[1] : -1; }
  /// Program::arithmetic index for a reducing collective, or -1.
  int32_t arith() const { return kind == OpKind::kCollective ? slot_[2] : -1; }
  /// Program::names index: the label of a non-pipeline op ("AG layer.7"); never on P2P ops.
  int32_t name() const { return is_p2p() ? -1 : slot_[3]; }

  void set_peer(int32_t v) { slot_[0] = v; }
  void set_channel(int32_t v) { slot_[1] = v; }
  void set_match(OpId v) { slot_[2] = v; }
  void set_group(int32_t v) { slot_[3] = v; }
  void set_comm(int32_t v) { slot_[0] = v; }
  void set_seq(int32_t v) { slot_[1] = v; }
  void set_arith(int32_t v) { slot_[2] = v; }
  void set_name(int32_t v) { slot_[3] = v; }

 private:
  int32_t slot_[4] = {-1, -1, -1, -1};
};

/// An ordered list of ops that run one after another (a CUDA stream).
struct Stream {
  int32_t rank = 0;
  const char* name = "";  ///< static string: "compute", "comm"
  std::vector<OpId> ops;
};

/// A directed (src rank, dst rank) pair of one communicator. Messages are matched FIFO.
struct Channel {
  int32_t src = 0;
  int32_t dst = 0;
  std::vector<OpId> sends;  ///< in the sender's stream order
  std::vector<OpId> recvs;  ///< in the receiver's stream order
  /// The communicator (Program::comms) the messages travel on, where a front-end tells them
  /// apart (lazy creation: a batched group uses its pipeline group's, a plain SEND/RECV its rank
  /// pair's); -1: the pair's one communicator. NCCL matches within a communicator only, so
  /// messages of one rank pair on two communicators are two channels that never meet.
  int32_t comm = -1;
};

/// A communicator (an NCCL process group): its member ranks and, per member, the collectives
/// that rank issues on it in issue order. The k-th collective of every member forms one
/// instance; it completes only when every member has reached its k-th collective, and a rank's
/// k-th collective starts only after its (k-1)-th on the same communicator (NCCL runs one
/// communicator's collectives one after another).
struct Communicator {
  std::string name;                     ///< "shard 0", "replicate 3", ...
  std::vector<int32_t> ranks;           ///< members, ascending
  std::vector<std::vector<OpId>> ops;   ///< per member (index into `ranks`), in issue order
  /// Ranks of the job's group when the program is a symmetry quotient (Program::rank_classes)
  /// and each built member stands for several; 0: the group is `ranks`. Collective times and
  /// reduction arithmetic use group_size(); agreement and completion use the built `ranks`.
  int32_t size = 0;
  /// Index of `rank` in `ranks`, or -1.
  int32_t member_index(int32_t rank) const;
  /// Ranks in the job's group: `size` when set, else the built members.
  int32_t group_size() const { return size > 0 ? size : static_cast<int32_t>(ranks.size()); }
};

/// The arithmetic of a reducing collective (reduce-scatter, all-reduce), as the front-end's
/// knobs set it; the element type is Op::dtype. `op`: "sum", "avg" (NCCL multiplies by
/// T(1/N)), "premul_sum" (by premul_factor), "max"; `algorithm`: "ring", "tree", "nvls",
/// "auto"; the framework divides every input by pre_divide before the collective and the result
/// by post_divide after it (FSDP1's factors). `where` is the spec key that chose the dtype or op.
struct CollectiveArithmetic {
  const char* op = "sum";         ///< static string
  const char* algorithm = "ring"; ///< static string
  int32_t channels = 1;
  double premul_factor = 1.0;
  double pre_divide = 1.0;
  double post_divide = 1.0;
  SourceLoc where;
};

/// Link cost: a transfer of n bytes takes latency_s + n / bandwidth_bytes_per_s.
struct LinkModel {
  double latency_s = 0;
  double bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
  int64_t message_bytes = 0;  ///< bytes of an implicit (kTransfer) message
  double transfer_s(int64_t bytes) const;
};

/// A class of job ranks that one built rank of a symmetry quotient stands for: job ranks
/// [first, first + count), whose programs are identical up to renumbering
/// (docs/facts/symmetry.md).
struct RankClass {
  int32_t first = 0;
  int32_t count = 1;
};

/// A rank whose program is another rank's (its representative, `of`) up to renumbering ranks,
/// as a front-end guarantees: its ops are the representative's ids + op_shift, its buffers the
/// representative's + buffer_shift, and a permutation of the ranks that maps the representative
/// onto it maps the whole program onto itself (streams, deps, memory effects, messages and
/// collectives). Per-rank passes (residency, worst-case memory) compute the representative only
/// and shift its result: exact by that symmetry. `of` = -1: computed on its own.
struct RankImage {
  int32_t of = -1;
  int32_t op_shift = 0;
  int32_t buffer_shift = 0;
};

/// A whole program. Invariants (checked by validate()): every op is in exactly one stream, in
/// the stream of its rank; deps point at existing ops; channel sends/recvs are send/recv ops of
/// the channel's ranks; `match` is symmetric.
struct Program {
  int32_t num_ranks = 0;
  std::vector<Op> ops;
  std::vector<Dep> deps;
  std::vector<MemEffect> mem;
  std::vector<Buffer> buffers;
  std::vector<Stream> streams;
  std::vector<std::vector<int32_t>> rank_streams;  ///< per rank, its stream indices
  std::vector<Channel> channels;
  /// (src << 32 | dst) -> channels index of the channels with comm -1, and (src, dst, comm) ->
  /// index of the others; kept by channel_for (rebuilt there when out of step with `channels`).
  std::unordered_map<uint64_t, int32_t> channel_index;
  std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> comm_channel_index;
  std::vector<Communicator> comms;
  /// Batched P2P groups (batch_isend_irecv, an NCCL group call): each lists send/recv ops that
  /// stand consecutively on one stream. The group is posted once it reaches the head of its
  /// stream and every member's deps are done (the stream waits for them before the launch);
  /// then each member completes with its partner independently of the others, and the stream
  /// moves past the group when every member has completed.
  std::vector<std::vector<OpId>> groups;
  std::vector<CollectiveArithmetic> arithmetic;    ///< indexed by Op::arith
  /// Numerics tolerances a spec states (`numerics: {max_relative_error, max_bias}`); absent:
  /// the numerics pass's documented defaults.
  std::optional<double> max_relative_error, max_bias;
  /// The spec asks for bitwise-reproducible reductions (`numerics.deterministic: true`): a
  /// reducing collective whose result depends on the fold order NCCL may choose (ring start,
  /// channel count, algorithm) is a numerics finding with the two orders as witnesses.
  bool deterministic = false;
  std::vector<int32_t> uses;                       ///< buffer indices, ranges in Op::use_*
  std::vector<std::string> names;                  ///< op labels of non-pipeline ops, tensor names
  /// Per op id, the tensor a P2P op carries (set_tensor); shorter than `ops` (empty when no
  /// action carries more than one tensor): an op past its end carries the default, one tensor.
  std::vector<BoundaryTensor> tensors;
  std::vector<int64_t> static_bytes_per_rank;      ///< resident for the whole step (params)
  std::vector<ReserveHold> reserve_holds;          ///< reserved, not live: read by the timeline only
  LinkModel link;
  Semantics semantics;
  BlockingModel blocking = BlockingModel::kCommStream;
  bool explicit_comms = false;  ///< built from a schedule with SEND/RECV actions
  std::optional<int64_t> memory_limit_bytes;  ///< per rank; none = no limit check
  std::vector<RankImage> rank_images;         ///< per rank (or empty): set only by a front-end that guarantees it
  /// Per rank (or empty; an entry may be invalid): where the input writes what makes this rank's
  /// program its own, as the front-end knows it: an FSDP spec's `ranks_override` entry, a pipeline
  /// rank's action list. A finding that blames a rank (a collective it issues differently, a hang
  /// it causes) is located there first, with the label rank_loc_label().
  std::vector<SourceLoc> rank_locs;
  /// "rank 3's ranks_override entry" / "rank 1's action list": what rank_locs[r] is, per rank.
  std::vector<std::string> rank_loc_labels;
  /// Symmetry quotient (docs/facts/symmetry.md): per built rank, the class of job ranks it
  /// stands for; empty when every job rank is built (built rank r is job rank r). Set only by a
  /// front-end that builds one rank per class of ranks with identical programs; per-rank results
  /// (timeline, worst case, figures) are then per class.
  std::vector<RankClass> rank_classes;
  /// Job ranks the program stands for: the sum of the classes, or num_ranks.
  int64_t job_ranks() const;
  /// The job ranks built rank `r` stands for ({r, 1} without a quotient).
  RankClass job_class(int32_t r) const;

  /// Appends an op (deps, memory effects and uses are added with add_dep / add_mem / add_use
  /// right after, in order: an op's ranges start where the previous op's end) and puts it at
  /// the end of `stream`. A kCollective op with `comm`
  /// set is appended to its rank's sequence on that communicator and gets its `seq` (so the
  /// order of add_op calls per rank is the issue order). Returns its id.
  OpId add_op(const Op& op);
  /// Adds a dependency to the op added last (must be `dst`).
  void add_dep(OpId dst, Dep dep);
  /// Adds a memory effect to the op added last (must be `op`).
  void add_mem(OpId op, MemEffect effect);
  /// Records that the op added last (must be `op`) reads or writes `buffer` (for the
  /// residency check: the buffer must be allocated before and freed after the op).
  void add_use(OpId op, int32_t buffer);
  /// Makes the ops `members` (consecutive on one stream, sends and recvs) one batched group;
  /// returns its index.
  int32_t add_group(std::vector<OpId> members);
  /// Creates a communicator over `ranks` (any order; stored ascending); returns its index.
  int32_t add_communicator(std::string name, std::vector<int32_t> ranks);
  /// Adds a label to Program::names; returns its index (for Op::name).
  int32_t add_name(std::string label);
  /// For a collective op: the ops of its instance (the same seq on every member), kNoOp for a
  /// member that never issues that many collectives on the communicator.
  std::vector<OpId> instance(OpId collective) const;
  /// Creates a stream on `rank`; returns its global index.
  int32_t add_stream(int32_t rank, const char* name);
  /// Returns the channel index for (src, dst) on communicator `comm` (-1: the pair's one
  /// communicator; see Channel::comm), creating it. O(1) for comm -1 (channel_index), where a
  /// scan of the channels cost ranks x ops over a whole program; O(log channels) otherwise.
  int32_t channel_for(int32_t src, int32_t dst, int32_t comm = -1);
  /// Sets Op::match for every channel (k-th send with k-th recv).
  void match_channels();

  const Dep* deps_begin(OpId id) const { return deps.data() + (id > 0 ? ops[id - 1].dep_end : 0); }
  const Dep* deps_end(OpId id) const { return deps.data() + ops[id].dep_end; }
  const MemEffect* mem_begin(OpId id) const { return mem.data() + (id > 0 ? ops[id - 1].mem_end : 0); }
  const MemEffect* mem_end(OpId id) const { return mem.data() + ops[id].mem_end; }
  const int32_t* uses_begin(OpId id) const { return uses.data() + (id > 0 ? ops[id - 1].use_end : 0); }
  const int32_t* uses_end(OpId id) const { return uses.data() + ops[id].use_end; }

  /// Records that P2P op `id` carries tensor `t` of its action's tensors.
  void set_tensor(OpId id, BoundaryTensor t);
  /// The tensor op `id` carries ({0, 1, -1} unless set_tensor said otherwise).
  BoundaryTensor tensor_of(OpId id) const {
    return id >= 0 && id < static_cast<OpId>(tensors.size()) ? tensors[id] : BoundaryTensor{};
  }

  /// "0F3", "(0F7;7B3)OVERLAP_F_B", "2SEND_B1" — the op as the user wrote it; one of several
  /// tensors of a SEND/RECV is labelled with its name or 0-based index: "1RECV_F0[mask]",
  /// "1RECV_F0[2]".
  std::string label(OpId id) const;
  /// "rank 1 compute" etc.
  std::string stream_label(int32_t stream) const;
  /// Checks the invariants above; returns the first violation or empty. For tests.
  std::string validate() const;
};

}  // namespace sc
