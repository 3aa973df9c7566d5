// Parsing and formatting pipeline steps in PyTorch's notation ("0F3", "(0F7;7B3)OVERLAP_F_B").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/action.h"
#include "support/source.h"

namespace sc {

/// One entry of a rank's action list: one action, or two run together
/// (`(a;b)OVERLAP_F_B`: `first` runs, then `second`; DualPipe writes a forward and a backward). `loc` is the cell's or
/// list item's location; `col_second` the column of the second part (0 when none).
/// A batched P2P group (`(0SEND_F0;1RECV_B0)BATCH`, PyTorch's batch_isend_irecv, an NCCL group
/// call) is written as one token but held as consecutive steps, one per SEND/RECV, each with
/// `in_batch` set and each but the last with `batched_with_next` set; so every rule that counts
/// actions sees each member. A group of one op (`(0SEND_F0)BATCH`, how PyTorch's pipelining
/// runtime posts every SEND/RECV action) is one step with `in_batch` set and
/// `batched_with_next` clear: it is batched (it travels on the group's communicator under lazy
/// creation) although nothing is batched with it.
///
/// A SEND/RECV step may carry several tensors across its stage boundary, each a message of its
/// own on the channel, posted in the order listed: a count (`0SEND_F1x2`, `tensors` = 2,
/// `tensor_names` = -1) or named tensors (`0SEND_F1[act,mask]`, `tensors` = 2, `tensor_names` the
/// tensor_name_list() index of {"act", "mask"}). Every other step carries one (`tensors` = 1).
///
/// A SEND/RECV goes to, or comes from, the neighbouring stage of its direction (SEND_F to
/// stage + 1, RECV_F from stage - 1, SEND_B to stage - 1, RECV_B from stage + 1) unless it names
/// another stage of the same direction after its tensors: `0SEND_F0>2` sends microbatch 0's
/// activations of stage 0 to stage 2, `2RECV_F0<0` receives them there (a skip connection, as a
/// model whose stage 0 output feeds stage 2 has; its gradient goes back as `2SEND_B0>0` and
/// `0RECV_B0<2`). `peer_stage` holds that stage, or -1 for the neighbour; an action naming its
/// neighbour is stored as -1, so the two spellings are one action.
///
/// A collective (`ALL_REDUCE@world`: `first.kind` is_collective, its stage and microbatch -1)
/// names its group of pipeline ranks in `group`.
struct Step {
  Action first;
  std::optional<Action> second;
  SourceLoc loc;
  bool batched_with_next = false;  ///< the next step is a member of the same BATCH group
  bool in_batch = false;           ///< a member of a BATCH group (of one or more ops)
  uint16_t tensors = 1;            ///< messages the step stands for (SEND/RECV only; 1..kMaxBoundaryTensors)
  /// SEND/RECV: tensor_name_list() index of its tensors' names, or -1 (unnamed). A collective
  /// (which carries no tensors) keeps here the index of this rank's size of it, written
  /// `ALL_TO_ALL@ep:3MiB` (collective_bytes), or -1 for its group's size.
  int32_t tensor_names = -1;
  int32_t group = -1;              ///< a collective's group (intern_group_name index); -1 for every other step
  int32_t peer_stage = -1;         ///< SEND/RECV: the stage at the other end when it skips stages, else -1
  bool is_overlap() const { return second.has_value(); }
  bool is_batched() const { return in_batch || batched_with_next; }
};

/// Most tensors one SEND/RECV action may carry (`0SEND_F1x64`).
inline constexpr int32_t kMaxBoundaryTensors = 64;

/// Stores a list of tensor names (each [A-Za-z_][A-Za-z0-9_]*, none twice, at most
/// kMaxBoundaryTensors) in a process-wide table, once per distinct list; returns its index for
/// Step::tensor_names. Thread-compatible, not thread-safe.
int32_t intern_tensor_names(std::vector<std::string> names);
/// The names stored at `index` by intern_tensor_names (an empty list for -1 or an unknown index).
const std::vector<std::string>& tensor_name_list(int32_t index);
/// The suffix a step's tensors are written with: "" for one unnamed tensor, "x3" for a count,
/// "[act,mask]" for names.
std::string format_tensors(const Step& s);
/// The label of tensor `index` (0-based) of a step's tensors: "[mask]" when named, else "[2]".
std::string tensor_label(int32_t tensor_names, int32_t index);

/// Stores a collective step's size (bytes >= 0) in a process-wide table, once per distinct
/// value; returns its index for Step::tensor_names. Thread-compatible, not thread-safe.
int32_t intern_collective_bytes(int64_t bytes);
/// The size a collective step states for its rank (`ALL_TO_ALL@ep:3MiB`: 3 MiB), or nullopt
/// when it states none (its group's `bytes` apply) or `s` is not a collective.
std::optional<int64_t> collective_bytes(const Step& s);
/// The stage at the other end of a SEND/RECV step: its peer_stage, or the neighbour of its
/// direction (stage + 1 for SEND_F and RECV_B, stage - 1 for RECV_F and SEND_B); -1 for any other
/// step.
int32_t message_peer_stage(const Step& s);
/// The suffix naming a skipping SEND/RECV's other stage: ">2" for a send, "<0" for a receive, ""
/// when it is the neighbour.
std::string format_peer(const Step& s);
/// Formats a step: the action, or "(0F7;7B3)OVERLAP_F_B" (a batch member alone, without its group).
std::string format_step(const Step& s);
/// Formats a rank's list, joining batched steps back into "(0SEND_F0;1RECV_B0)BATCH"; steps are
/// separated by `sep`.
std::string format_steps(const std::vector<Step>& row, std::string_view sep);
/// The number of tokens `row` is written with (a batch group counts once).
size_t count_tokens(const std::vector<Step>& row);

/// The one-action token of most cells, `<stage><kind><microbatch>` with kind F, I, W, B,
/// SEND_F, RECV_F, SEND_B or RECV_B and nothing around it ("0F3", "12SEND_B7"): the step
/// parse_step gives for it, without its general grammar; nullopt for any other token (then ask
/// parse_step, which also gives the error). Stage ids of 7 digits or more and microbatch ids
/// of 10 or more are left to parse_step.
std::optional<Step> parse_plain_step(std::string_view token, const SourceLoc& loc);

/// Result of parsing one action token.
struct ParsedStep {
  std::optional<Step> step;   ///< set on success (the first member of a BATCH group)
  std::vector<Step> batch;    ///< a BATCH group: every member (`in_batch` set), `batched_with_next` set but on the last
  std::string error;          ///< set on failure: what is wrong, lower-case, no final period
  int32_t error_offset = 0;   ///< 0-based offset in the token where the error starts
};

/// Parses one token of PyTorch action notation, strictly: `<stage><KIND><microbatch>` with
/// decimal ids, a SEND/RECV optionally followed by its tensors (`x<count>`, count 1 to
/// kMaxBoundaryTensors, or `[name,name,...]`, names as intern_tensor_names takes them), `<stage>UNSHARD|RESHARD|REDUCE_GRAD`, `(a;b)OVERLAP_F_B` where a and b
/// are compute actions (F, I, W, B) run in that order, `<COLLECTIVE>@<group>` (ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER or
/// BARRIER over a group named by letters, digits, '_' and '-', at most 64 characters, starting
/// with a letter or '_'; the name is interned, intern_group_name), or `(a;b;...)BATCH` with one or more SEND/RECV actions (no action twice; one
/// action is a group of one, as PyTorch's runtime posts it). Rejects what PyTorch's `_Action.from_str` lets through: trailing junk
/// ("0F0xyz"), the legacy "BW" token ("2BW0"), a compute or P2P action without a microbatch, a
/// microbatch on UNSHARD/RESHARD/REDUCE_GRAD, leading '+' or '-', and ids over 2^31-1.
/// Leading and trailing spaces are ignored. `loc` is stored in the step.
ParsedStep parse_step(std::string_view token, const SourceLoc& loc);

}  // namespace sc
