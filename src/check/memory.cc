// Memory pass: timeline peak and worst case per rank against the limit.
#include <algorithm>

#include <fmt/format.h>

#include "check/passes.h"
#include "support/units.h"

namespace sc {

std::vector<Finding> check_memory(const Program& p, const Timeline* timeline, const WorstCaseMemory* worst,
                                  int64_t limit_bytes) {
  std::vector<Finding> out;
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    int64_t peak = timeline ? timeline->peak_bytes_per_rank[r] : 0;
    int64_t wc = worst ? worst->bytes_per_rank[r] : 0;
    if (peak <= limit_bytes && wc <= limit_bytes) continue;
    Finding f;
    f.kind = FindingKind::kMemory;
    f.ranks = {r};
    if (peak > limit_bytes) {
      f.message = fmt::format("rank {} exceeds its memory limit: predicted peak {} ({} B) at t = {} > limit {} ({} B)", r,
                              format_bytes(static_cast<double>(peak)), peak,
                              format_duration(timeline->peak_time_per_rank_s[r]),
                              format_bytes(static_cast<double>(limit_bytes)), limit_bytes);
    } else {
      f.message = fmt::format("rank {} can exceed its memory limit: worst case over all allowed orders {} ({} B) > limit {} "
                              "({} B); the predicted peak is {} ({} B)", r, format_bytes(static_cast<double>(wc)), wc,
                              format_bytes(static_cast<double>(limit_bytes)), limit_bytes,
                              format_bytes(static_cast<double>(peak)), peak);
    }
    if (worst) {
      std::string live;
      size_t shown = 0;
      for (int32_t b : worst->live_buffers[r]) {
        if (shown++ == 12) {
          live += fmt::format(" ... ({} in all)", worst->live_buffers[r].size());
          break;
        }
        const Buffer& buf = p.buffers[b];
        if (buf.name >= 0)
          live += fmt::format(" {}={}", p.names[buf.name], format_bytes(static_cast<double>(buf.bytes)));
        else
          live += fmt::format(" {}(s{},mb{})={}", buf.kind.c_str(), buf.stage, buf.microbatch, format_bytes(static_cast<double>(buf.bytes)));
      }
      f.details.push_back(fmt::format("worst case {} ({} B) with static {} and live buffers:{}",
                                      format_bytes(static_cast<double>(wc)), wc,
                                      format_bytes(static_cast<double>(p.static_bytes_per_rank[r])), live));
      if (worst->live_buffers[r].size() > 12) {
        // Many buffers: the bytes by kind say more than the list.
        std::vector<std::pair<std::string, std::pair<int64_t, int>>> by_kind;
        for (int32_t b : worst->live_buffers[r]) {
          const Buffer& buf = p.buffers[b];
          auto it = std::find_if(by_kind.begin(), by_kind.end(), [&](const auto& k) { return k.first == buf.kind.c_str(); });
          if (it == by_kind.end()) it = by_kind.insert(by_kind.end(), {buf.kind.c_str(), {0, 0}});
          it->second.first += buf.bytes;
          ++it->second.second;
        }
        std::string kinds;
        for (const auto& [kind, sum] : by_kind)
          kinds += fmt::format("{}{} {} ({})", kinds.empty() ? "" : ", ", kind, format_bytes(static_cast<double>(sum.first)), sum.second);
        f.details.push_back("live bytes by kind: " + kinds);
      }
      for (OpId id : worst->running_ops[r]) {
        if (f.ops.size() >= 8) break;
        f.ops.push_back(p.label(id));
        f.locations.push_back(p.ops[id].loc);
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace sc
