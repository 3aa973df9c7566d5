// Pipeline actions in PyTorch's notation ("0F3", "2SEND_B1", "(0F7;7B3)OVERLAP_F_B").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "support/source.h"

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
/// -1 for UNSHARD, RESHARD and REDUCE_GRAD, which take none).
struct Action {
  ActionKind kind = ActionKind::kF;
  int32_t stage = 0;
  int32_t microbatch = -1;
  bool operator==(const Action&) const = default;
};

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

/// One entry of a rank's action list: one action, or two run together
/// (`(a;b)OVERLAP_F_B`: `first` is the forward, `second` the backward). `loc` is the cell's or
/// list item's location; `col_second` the column of the second part (0 when none).
struct Step {
  Action first;
  std::optional<Action> second;
  SourceLoc loc;
  bool is_overlap() const { return second.has_value(); }
};

/// Formats an action in PyTorch notation: "0F3", "2SEND_B1", "1UNSHARD".
std::string format_action(const Action& a);
/// Formats a step: the action, or "(0F7;7B3)OVERLAP_F_B".
std::string format_step(const Step& s);

/// Result of parsing one action token.
struct ParsedStep {
  std::optional<Step> step;   ///< set on success
  std::string error;          ///< set on failure: what is wrong, lower-case, no final period
  int32_t error_offset = 0;   ///< 0-based offset in the token where the error starts
};

/// Parses one token of PyTorch action notation, strictly: `<stage><KIND><microbatch>` with
/// decimal ids, `<stage>UNSHARD|RESHARD|REDUCE_GRAD`, or `(a;b)OVERLAP_F_B` where a is an F and b
/// a B, I or W. Rejects what PyTorch's `_Action.from_str` lets through: trailing junk
/// ("0F0xyz"), the legacy "BW" token ("2BW0"), a compute or P2P action without a microbatch, a
/// microbatch on UNSHARD/RESHARD/REDUCE_GRAD, leading '+' or '-', and ids over 2^31-1.
/// Leading and trailing spaces are ignored. `loc` is stored in the step.
ParsedStep parse_step(std::string_view token, const SourceLoc& loc);

}  // namespace sc
