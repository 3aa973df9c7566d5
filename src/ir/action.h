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
enum class ActionKind : uint8_t {
  kF, kI, kW, kB, kSendF, kRecvF, kSendB, kRecvB, kUnshard, kReshard, kReduceGrad
};

/// Number of ActionKind values (for tables indexed by kind).
inline constexpr int kNumActionKinds = 11;

/// One action: a kind applied to a stage (0-based, global stage id) and a microbatch (0-based;
/// -1 for UNSHARD, RESHARD and REDUCE_GRAD, which take none). 8 bytes: the kind and the stage
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
/// True for kinds that carry a microbatch (all but UNSHARD, RESHARD, REDUCE_GRAD).
bool takes_microbatch(ActionKind k);
/// PyTorch's token for a kind: "F", "I", "W", "B", "SEND_F", ..., "REDUCE_GRAD".
std::string_view kind_token(ActionKind k);

/// Formats an action in PyTorch notation: "0F3", "2SEND_B1", "1UNSHARD".
std::string format_action(const Action& a);

}  // namespace sc
