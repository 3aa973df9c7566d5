#include "ir/semantics.h"

#include <charconv>

#include <fmt/format.h>

namespace sc {

std::optional<Semantics> parse_semantics(std::string_view text, std::string* why) {
  if (text == "eager") return Semantics{Semantics::kEager, 0};
  if (text == "rendezvous") return Semantics{Semantics::kRendezvous, 0, false};
  if (text == "rendezvous:independent") return Semantics{Semantics::kRendezvous, 0, true};
  constexpr std::string_view kBuf = "buffered:";
  if (text.substr(0, kBuf.size()) == kBuf) {
    std::string_view n = text.substr(kBuf.size());
    int32_t v = 0;
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (ec == std::errc() && p == n.data() + n.size() && v >= 1 && !n.empty())
      return Semantics{Semantics::kBuffered, v};
    if (why) *why = fmt::format("'{}': buffered needs a whole number of messages >= 1, as in buffered:2", text);
    return std::nullopt;
  }
  if (why) *why = fmt::format("unknown P2P semantics '{}' (expected eager, rendezvous, rendezvous:independent or buffered:N)", text);
  return std::nullopt;
}

std::string format_semantics(const Semantics& s) {
  switch (s.kind) {
    case Semantics::kEager: return "eager";
    case Semantics::kRendezvous: return s.independent_groups ? "rendezvous:independent" : "rendezvous";
    case Semantics::kBuffered: return fmt::format("buffered:{}", s.buffer);
  }
  return "?";
}

}  // namespace sc
