// Communication semantics a Program runs under: P2P completion and how a pending P2P op blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sc {

/// P2P completion semantics (docs/facts/p2p-semantics.md).
/// kEager: a send never blocks. kRendezvous: a send completes only together with its matching
/// recv (NCCL for large messages; the default). kBuffered: a send completes while fewer than
/// `buffer` messages on its channel are sent and not yet received.
///
/// How the members of a batched group (an NCCL group call: batch_isend_irecv) progress, under
/// kRendezvous: with `independent_groups` false (the default, spelt "rendezvous") a group
/// completes as one: none of its members is guaranteed to progress before every member's
/// partner is posted, and a message between two groups (or a group and a plain op) completes
/// with both. That is all NCCL promises: "it is not safe to assume that all calls within a group
/// will progress without blocking each other" (NVIDIA/nccl#1279), and NCCL's planner puts a
/// group's sends and receives into one launch in rounds by peer (the loop over
/// comm->p2pSchedule in NVIDIA/nccl's src/enqueue.cc), so a member may wait behind another.
/// A group whose members all use one channel (sends to one peer, or receives from one) keeps
/// that channel's FIFO order: each member completes with its partner in turn. With `independent_groups` true
/// ("rendezvous:independent") each member completes with its partner on its own, as NCCL does
/// when every member runs concurrently on a channel of its own (few peers, small groups): the
/// semantics this tool used before, kept for "does it hang on my small job" questions.
struct Semantics {
  enum Kind { kEager, kRendezvous, kBuffered };
  Kind kind = kRendezvous;
  int32_t buffer = 0;  ///< kBuffered only, >= 1
  bool independent_groups = false;  ///< kRendezvous only
  bool operator==(const Semantics&) const = default;
  /// Groups complete as one (kRendezvous without independent_groups).
  bool atomic_groups() const { return kind == kRendezvous && !independent_groups; }
};

/// Parses "eager", "rendezvous", "rendezvous:independent" or "buffered:N" (N >= 1); nullopt
/// with `*why` otherwise.
std::optional<Semantics> parse_semantics(std::string_view text, std::string* why = nullptr);
/// Formats semantics back to the spec's spelling.
std::string format_semantics(const Semantics& s);

/// How a pending P2P op blocks its rank (issue: "model P2P ops on an in-order communication
/// stream per rank ...; offer the stricter whole-rank-blocks model as an option").
/// kCommStream: sends and receives run in order on one communication stream per rank; a pending
/// one blocks later communication, not compute. kWholeRank: every action runs in order on one
/// stream, so a pending send or receive blocks the rank.
enum class BlockingModel { kCommStream, kWholeRank };

}  // namespace sc
