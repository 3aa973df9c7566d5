// Buffer residency over interleavings: every use of a buffer lies between its allocation and
// its free in every execution the happens-before order allows.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "check/passes.h"
#include "graph/happens_before.h"

namespace sc {
namespace {

/// Per buffer, the event of its allocation and of its free (-1 when none).
struct BufferEvents {
  std::vector<int32_t> alloc, free;  ///< per buffer: event, or -1
};

BufferEvents buffer_events(const Program& p) {
  BufferEvents be;
  be.alloc.assign(p.buffers.size(), -1);
  be.free.assign(p.buffers.size(), -1);
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id)
    for (const MemEffect* m = p.mem_begin(id); m != p.mem_end(id); ++m) {
      if (m->buffer < 0 || m->bytes == 0) continue;
      int32_t e = m->at_end ? end_event(id) : start_event(id);
      (m->bytes > 0 ? be.alloc : be.free)[m->buffer] = e;
    }
  return be;
}

/// One rank's clocks at any event: the projection (RankProjector, sized by the rank's events)
/// answers for the rank's own events; whole-program RankClocks are built only if an event of
/// another rank is asked about (a buffer freed by another rank's op).
class Clocks {
 public:
  Clocks(const HappensBefore& hb, RankProjector& projector, int32_t rank)
      : hb_(hb), order_(projector.project(rank)) {}

  const std::vector<int32_t>& streams() const { return order_.streams(); }
  /// RankClocks::prefix.
  int32_t prefix(int32_t event, int k) {
    if (hb_.program().ops[event >> 1].rank == order_.rank()) return order_.prefix(order_.local(event), k);
    if (!whole_) whole_ = std::make_unique<RankClocks>(hb_, order_.rank());
    return whole_->prefix(event, k);
  }
  /// RankClocks::ordered.
  bool ordered(int32_t a, int32_t b) {
    const int k = order_.stream_index(hb_.program().ops[a >> 1].stream);
    return k >= 0 && prefix(b, k) >= 2 * hb_.position(a >> 1) + (a & 1) + 1;
  }

 private:
  const HappensBefore& hb_;
  RankOrder order_;
  std::unique_ptr<RankClocks> whole_;
};

/// People's description of a moment of rank `r`: per stream, what has run and what has not.
std::vector<std::string> describe_moment(const Program& p, Clocks& clocks, int32_t event) {
  std::vector<std::string> out;
  for (size_t k = 0; k < clocks.streams().size(); ++k) {
    const Stream& s = p.streams[clocks.streams()[k]];
    if (s.ops.empty()) continue;
    int32_t prefix = clocks.prefix(event, static_cast<int>(k));
    size_t done = static_cast<size_t>(prefix / 2);
    std::string line = fmt::format("rank {} {} stream: ", s.rank, s.name);
    if (done == 0) line += "nothing run yet";
    else line += fmt::format("ran up to {}", p.label(s.ops[done - 1]));
    if (prefix % 2 == 1) line += fmt::format(", running {}", p.label(s.ops[done]));
    else if (done < s.ops.size()) line += fmt::format(", next {}", p.label(s.ops[done]));
    out.push_back(line);
  }
  return out;
}

}  // namespace

std::vector<Finding> check_buffer_residency(const Program& p, size_t max_findings, const std::vector<int32_t>* only_ranks) {
  std::vector<Finding> out;
  if (p.uses.empty()) return out;
  HappensBefore hb(p);
  if (!hb.acyclic()) return out;
  BufferEvents be = buffer_events(p);
  RankProjector projector(hb);
  std::vector<std::string> keys;  // per finding in `out`: its message without the rank
  size_t suppressed = 0;
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    if (only_ranks && std::find(only_ranks->begin(), only_ranks->end(), r) == only_ranks->end()) continue;
    bool any = false;
    for (int32_t s : p.rank_streams[r])
      for (OpId id : p.streams[s].ops) any |= p.uses_end(id) > p.uses_begin(id);
    if (!any) continue;
    Clocks clocks(hb, projector, r);
    for (int32_t s : p.rank_streams[r])
      for (OpId id : p.streams[s].ops)
        for (const int32_t* u = p.uses_begin(id); u != p.uses_end(id); ++u) {
          const Buffer& b = p.buffers[*u];
          if (b.bytes == 0) continue;  // nothing allocated, nothing to free (a unit without parameters)
          std::string bname = b.name >= 0 ? p.names[b.name] : fmt::format("buffer {}", *u);
          Finding f;
          f.kind = FindingKind::kResidency;
          f.ranks = {r};
          f.ops = {p.label(id)};
          f.locations = {p.ops[id].loc};
          int32_t a = be.alloc[*u], fr = be.free[*u];
          if (a < 0) {
            f.message = fmt::format("{} on rank {} uses {}, which is never gathered or allocated", p.label(id), r, bname);
          } else if (!clocks.ordered(a, start_event(id))) {
            const OpId aop = a >> 1;
            f.message = fmt::format("{} on rank {} may start before {} is allocated by {} ({} stream): no stream order or "
                                    "event puts it after",
                                    p.label(id), r, bname, p.label(aop), p.streams[p.ops[aop].stream].name);
            f.ops.push_back(p.label(aop));
            f.locations.push_back(p.ops[aop].loc);
            f.details.push_back(fmt::format("an interleaving: {} starts while", p.label(id)));
            for (auto& d : describe_moment(p, clocks, start_event(id))) f.details.push_back("  " + d);
          } else if (fr >= 0 && !clocks.ordered(end_event(id), fr)) {
            const OpId fop = fr >> 1;
            f.message = fmt::format("{} ({} stream) on rank {} may free {} while {} still needs it: the free is not "
                                    "ordered after the use by stream order or an event",
                                    p.label(fop), p.streams[p.ops[fop].stream].name, r, bname, p.label(id));
            f.ops.push_back(p.label(fop));
            f.locations.push_back(p.ops[fop].loc);
            f.details.push_back(fmt::format("an interleaving that breaks it: {} runs at this moment, before {} ends:",
                                            p.label(fop), p.label(id)));
            for (auto& d : describe_moment(p, clocks, fr)) f.details.push_back("  " + d);
          } else {
            continue;
          }
          // The same violation on several ranks (the usual case: one program for all) is one
          // finding naming them all; the first rank's interleaving is shown.
          std::string key = f.message;
          const std::string on_rank = fmt::format("on rank {} ", r);
          for (size_t pos; (pos = key.find(on_rank)) != std::string::npos;) key.erase(pos, on_rank.size());
          size_t same = 0;
          while (same < out.size() && !(out[same].ops == f.ops && keys[same] == key)) ++same;
          if (same < out.size()) {
            out[same].ranks.push_back(r);
          } else if (out.size() < max_findings) {
            out.push_back(std::move(f));
            keys.push_back(std::move(key));
          } else {
            ++suppressed;
          }
        }
  }
  for (Finding& f : out)
    if (f.ranks.size() > 1) name_ranks(f, std::vector<int32_t>(f.ranks.begin(), f.ranks.end()));
  if (suppressed && !out.empty())
    out.back().details.push_back(fmt::format("{} more residency violations not listed", suppressed));
  return out;
}

}  // namespace sc
