#include "ir/action.h"

#include <array>

#include <fmt/format.h>

namespace sc {
namespace {
constexpr std::array<std::string_view, kNumActionKinds> kTokens = {
    "F", "I", "W", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD"};
}  // namespace

bool is_compute(ActionKind k) {
  return k == ActionKind::kF || k == ActionKind::kI || k == ActionKind::kW || k == ActionKind::kB;
}
bool is_p2p(ActionKind k) {
  return k == ActionKind::kSendF || k == ActionKind::kRecvF || k == ActionKind::kSendB ||
         k == ActionKind::kRecvB;
}
bool is_send(ActionKind k) { return k == ActionKind::kSendF || k == ActionKind::kSendB; }
bool takes_microbatch(ActionKind k) {
  return k != ActionKind::kUnshard && k != ActionKind::kReshard && k != ActionKind::kReduceGrad;
}
std::string_view kind_token(ActionKind k) { return kTokens[static_cast<int>(k)]; }

std::string format_action(const Action& a) {
  if (!takes_microbatch(a.kind)) return fmt::format("{}{}", a.stage, kind_token(a.kind));
  return fmt::format("{}{}{}", a.stage, kind_token(a.kind), a.microbatch);
}

}  // namespace sc
