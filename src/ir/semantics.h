// Communication semantics a Program runs under: P2P completion and how a pending P2P op blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sc {

/// P2P completion semantics (DESIGN.md "Semantics switches").
/// kEager: a send never blocks. kRendezvous: a send completes only together with its matching
/// recv (NCCL for large messages; the default). kBuffered: a send completes while fewer than
/// `buffer` messages on its channel are sent and not yet received.
struct Semantics {
  enum Kind { kEager, kRendezvous, kBuffered };
  Kind kind = kRendezvous;
  int32_t buffer = 0;  ///< kBuffered only, >= 1
  bool operator==(const Semantics&) const = default;
};

/// Parses "eager", "rendezvous" or "buffered:N" (N >= 1); nullopt with `*why` otherwise.
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
