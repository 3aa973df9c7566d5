// Pipeline actions in PyTorch's notation ("0F3", "2SEND_B1"): the label an IR op carries.
// Parsing them from text is the spec layer's job (spec/action.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sc {

/// The kind of one pipeline action (torch.distributed.pipelining `_ComputationType`).
/// F forward; I backward for inputs; W backward for weights; B full backward (= I then W);
/// SEND_F/RECV_F activations to/from the next/previous stage; SEND_B/RECV_B gradients to/from the
/// previous/next stage; UNSHARD/RESHARD the stage's parameters (FSDP all-gather, free);
/// REDUCE_GRAD the stage's gradient reduction after its last backward.
/// ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER and BARRIER are collectives a rank issues
/// between its pipeline actions over a named group of pipeline ranks (the loss all-reduce, an
/// evaluation broadcast, a barrier: `ALL_REDUCE@world`, `BROADCAST@eval`); they are not
/// PyTorch's `_ComputationType`s, which have no collective over a group.
enum class ActionKind : uint8_t {
  kF, kI, kW, kB, kSendF, kRecvF, kSendB, kRecvB, kUnshard, kReshard, kReduceGrad,
  kAllReduce, kBroadcast, kAllGather, kReduceScatter, kBarrier, kAllToAll
};

/// Number of ActionKind values (for tables indexed by kind).
inline constexpr int kNumActionKinds = 17;

/// One action: a kind applied to a stage (0-based, global stage id) and a microbatch (0-based;
/// -1 for UNSHARD, RESHARD and REDUCE_GRAD, which take none). A collective (is_collective) has
/// neither: both are -1, and its group is the step's (Step::group). 8 bytes: the kind and the stage
/// share a word, so stage ids must lie in [-2^23, 2^23) (the readers cap them below 2^20).
struct Action {
  ActionKind kind : 8 = ActionKind::kF;
  int32_t stage : 24 = 0;
  int32_t microbatch = -1;
  bool operator==(const Action&) const = default;
};
static_assert(sizeof(Action) == 8);

/// True for F, I, W, B.
bool is_compute(ActionKind k);
/// True for the four SEND/RECV kinds.
bool is_p2p(ActionKind k);
/// True for SEND_F and SEND_B.
bool is_send(ActionKind k);
/// The neighbouring stage a SEND/RECV action's message goes to or comes from: activations flow
/// to later stages, gradients to earlier ones, so stage + 1 for SEND_F and RECV_B, stage - 1 for
/// RECV_F and SEND_B. Only for the four P2P kinds.
int32_t neighbour_stage(const Action& a);
/// True for ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER and BARRIER.
bool is_collective(ActionKind k);
/// True for kinds that carry a microbatch (all but UNSHARD, RESHARD, REDUCE_GRAD and the
/// collectives).
bool takes_microbatch(ActionKind k);
/// Stores a collective group's name (`world`, `eval`) once in a process-wide table and returns
/// its index (what Step::group holds for a collective), or -1 once the table holds
/// kMaxGroupNames distinct names. Thread-compatible, not thread-safe.
int32_t intern_group_name(std::string_view name);
/// Most distinct group names one process keeps.
inline constexpr int32_t kMaxGroupNames = 1 << 16;
/// The name stored at `index` by intern_group_name ("?" for an unknown index).
const std::string& group_name(int32_t index);
/// The group every pipeline spec knows without declaring it: all of its pipeline ranks.
inline constexpr std::string_view kWorldGroup = "world";
/// PyTorch's token for a kind: "F", "I", "W", "B", "SEND_F", ..., "REDUCE_GRAD".
std::string_view kind_token(ActionKind k);

/// Formats an action in PyTorch notation: "0F3", "2SEND_B1", "1UNSHARD"; a collective by its
/// kind alone ("ALL_REDUCE": its group is the step's, format_step).
std::string format_action(const Action& a);

}  // namespace sc
