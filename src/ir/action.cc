#include "ir/action.h"

#include <array>
#include <map>
#include <vector>

#include <fmt/format.h>

namespace sc {
namespace {
constexpr std::array<std::string_view, kNumActionKinds> kTokens = {
    "F", "I", "W", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD",
    "ALL_REDUCE", "BROADCAST", "ALL_GATHER", "REDUCE_SCATTER", "BARRIER", "ALL_TO_ALL"};

struct GroupNames {
  std::vector<std::string> names;
  std::map<std::string, int32_t, std::less<>> index;
};
GroupNames& group_names() {
  static GroupNames t;
  return t;
}
}  // namespace

int32_t intern_group_name(std::string_view name) {
  GroupNames& t = group_names();
  if (auto it = t.index.find(name); it != t.index.end()) return it->second;
  const int32_t i = static_cast<int32_t>(t.names.size());
  if (i >= kMaxGroupNames) return -1;
  t.names.emplace_back(name);
  t.index.emplace(std::string(name), i);
  return i;
}

const std::string& group_name(int32_t index) {
  static const std::string kUnknown = "?";
  const GroupNames& t = group_names();
  return index >= 0 && index < static_cast<int32_t>(t.names.size()) ? t.names[index] : kUnknown;
}

bool is_compute(ActionKind k) {
  return k == ActionKind::kF || k == ActionKind::kI || k == ActionKind::kW || k == ActionKind::kB;
}
int32_t neighbour_stage(const Action& a) {
  return a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvB ? a.stage + 1 : a.stage - 1;
}

bool is_p2p(ActionKind k) {
  return k == ActionKind::kSendF || k == ActionKind::kRecvF || k == ActionKind::kSendB ||
         k == ActionKind::kRecvB;
}
bool is_send(ActionKind k) { return k == ActionKind::kSendF || k == ActionKind::kSendB; }
bool is_collective(ActionKind k) {
  return k == ActionKind::kAllReduce || k == ActionKind::kBroadcast || k == ActionKind::kAllGather ||
         k == ActionKind::kReduceScatter || k == ActionKind::kBarrier || k == ActionKind::kAllToAll;
}
bool takes_microbatch(ActionKind k) {
  return k != ActionKind::kUnshard && k != ActionKind::kReshard && k != ActionKind::kReduceGrad && !is_collective(k);
}
std::string_view kind_token(ActionKind k) { return kTokens[static_cast<int>(k)]; }

std::string format_action(const Action& a) {
  if (is_collective(a.kind)) return std::string(kind_token(a.kind));
  if (!takes_microbatch(a.kind)) return fmt::format("{}{}", a.stage, kind_token(a.kind));
  return fmt::format("{}{}{}", a.stage, kind_token(a.kind), a.microbatch);
}

}  // namespace sc
