#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/report.h"
#include "report/view.h"

namespace sc {
namespace {

using nlohmann::json;

// Chrome trace timestamps are microseconds; Perfetto turns them into integer nanoseconds by
// truncation (older releases) or rounding (newer ones). A quarter of a nanosecond above the
// intended value gives the same integer either way, where 1234.567 would truncate to ...566.
double us_of(int64_t ns) { return (static_cast<double>(ns) + 0.25) / 1000.0; }

const char* category(OpKind k) {
  switch (k) {
    case OpKind::kCompute: return "compute";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kCollective: return "collective";
    case OpKind::kMarker: return "marker";
  }
  return "op";
}

// Trace events serialised as they are made: a json tree per event costs about ten times its
// text, which made --trace on a 72k-cell CSV take 706 MiB.
class EventList {
 public:
  void push_back(const json& event) {
    if (count_++) text_ += ',';
    text_ += event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  size_t count_ = 0;
};

json op_args(const Program& p, OpId id) {
  const Op& op = p.ops[id];
  json args = {{"op_id", id}, {"location", format_loc(op.loc)}, {"step", op.step}};
  if (op.num_actions >= 1 && takes_microbatch(op.actions[0].kind)) {
    args["stage"] = op.actions[0].stage;
    args["microbatch"] = op.actions[0].microbatch;
  }
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
    args["peer"] = op.peer();
    args["bytes"] = op.bytes;
  }
  if (op.kind == OpKind::kCollective) {
    args["collective"] = collective_name(op.collective);
    args["bytes"] = op.bytes;
    if (op.comm() >= 0) args["communicator"] = p.comms[op.comm()].name;
  }
  return args;
}

// How each arrow is written so that Perfetto binds it to its two ops. Perfetto's JSON importer
// (trace_processor/importers/json/json_trace_parser.cc, common/flow_tracker.cc) processes events
// sorted by (ts, phase key, file position), with X events at one ts longest first and flow
// events after them. Flow events v2 ("bind_id" with "flow_out"/"flow_in" on an X event) bind to
// that very slice, one id per slice (both flags: the flow passes through), and the flow_out
// slice must be processed before the flow_in slice. Flow events v1 ("s", and "f" with
// "bp":"e") bind to the slice on top of their thread's stack: the X event processed last on
// that thread at or before their ts. So an arrow is v2 when both slices have a free bind slot
// and the producer sorts first, else v1 with each end at a ts where its op is on top.
class FlowPlanner {
 public:
  /// `sorted`: the ops' X events in processing order; `start_ns`: where each X event starts;
  /// `first_ns`: where an op's first slice starts (earlier than `start_ns` for a recv drawn with
  /// a waiting slice before it).
  FlowPlanner(const Program& p, const std::vector<OpId>& sorted, const std::vector<int64_t>& start_ns,
              const std::vector<int64_t>& first_ns, const std::vector<int64_t>& stream_stop_ns)
      : pos_(p.ops.size(), -1), slot_(p.ops.size()), lo_(p.ops.size(), 0), hi_(p.ops.size(), -1) {
    for (size_t i = 0; i < sorted.size(); ++i) pos_[sorted[i]] = static_cast<int64_t>(i);
    // v1 windows: an op is on top from its start until the next op of its stream starts (a
    // later op starting at the same ns sorts after it and takes the top at once).
    std::vector<OpId> last(p.streams.size(), kNoOp);
    for (OpId id : sorted) {
      int32_t s = p.ops[id].stream;
      if (last[s] != kNoOp) hi_[last[s]] = first_ns[id] - 1;
      lo_[id] = start_ns[id];
      hi_[id] = stream_stop_ns[s];
      last[s] = id;
    }
  }

  /// Position of op `id` in the processing order (-1 when it did not run).
  int64_t pos(OpId id) const { return pos_[id]; }

  enum class Slot : uint8_t { kFree, kOut, kIn, kThrough };
  struct V1 {
    int64_t from_ns, to_ns;
  };

  /// Plans `a`: a v2 bind id (>= kV2Base), or v1 times, or neither (returns false).
  bool plan(const Arrow& a, uint64_t* v2_id, V1* v1) {
    *v2_id = 0;
    if (pos_[a.from] < pos_[a.to] && slot_[a.to].state == Slot::kFree &&
        (slot_[a.from].state == Slot::kFree || slot_[a.from].state == Slot::kIn)) {
      if (slot_[a.from].state == Slot::kIn) {
        slot_[a.from].state = Slot::kThrough;
      } else {
        slot_[a.from] = {Slot::kOut, next_v2_++};
      }
      slot_[a.to] = {Slot::kIn, slot_[a.from].id};
      *v2_id = slot_[a.from].id;
      return true;
    }
    int64_t s = lo_[a.from];
    int64_t f = std::max(lo_[a.to], s);
    if (s > hi_[a.from] || f > hi_[a.to]) return false;
    *v1 = {s, f};
    return true;
  }

  /// The v2 fields of op `id`'s X event, if it carries an arrow.
  void annotate(OpId id, json& event) const {
    const auto& sl = slot_[id];
    if (sl.state == Slot::kFree) return;
    event["bind_id"] = sl.id;
    if (sl.state != Slot::kIn) event["flow_out"] = true;
    if (sl.state != Slot::kOut) event["flow_in"] = true;
  }

  /// v2 ids start high: Perfetto keeps v1 ids (numbered from 0 in order of appearance) and v2
  /// ids in one table.
  static constexpr uint64_t kV2Base = uint64_t{1} << 32;

 private:
  struct SlotState {
    Slot state = Slot::kFree;
    uint64_t id = 0;
  };
  std::vector<int64_t> pos_;
  std::vector<SlotState> slot_;
  std::vector<int64_t> lo_, hi_;
  uint64_t next_v2_ = kV2Base;
};


// Writes the trace of one result; each part of the trace is one method.
class TraceWriter {
 public:
  TraceWriter(const VerifyResult& r, bool all_ranks) : r_(r), p_(r.program), v_(timeline_view(r)) { fold(all_ranks); }

  std::string write() {
    metadata();
    order();
    FlowPlanner planner(p_, sorted_, start_, v_.start_ns, stop_);
    json flows = plan_flows(planner);
    ops(planner);
    for (auto& f : flows) events_.push_back(std::move(f));
    memory();
    json stuck = stuck_markers();
    json other = {{"schedule", r_.spec.name}, {"verdict", r_.verdict()}, {"semantics", format_semantics(p_.semantics)},
                  {"timeline", v_.complete ? "predicted" : "executed prefix of a stuck run"}};
    if (!stuck.empty()) other["stuck"] = stuck;
    if (unplaced_) other["arrows_not_drawn"] = unplaced_;
    if (folded_)
      other["folded"] = fmt::format("{} drawn as {}, one per class of ranks that run the same program "
                                    "(docs/facts/symmetry.md){}",
                                    format_count(p_.job_ranks(), "rank"),
                                    format_count(shown_count_, "process", "processes"),
                                    shown_count_ < p_.num_ranks ? "; --trace-all-ranks draws every modelled rank" : "");
    json out = {{"displayTimeUnit", "ms"},
                {"distributedInfo", {{"backend", "schedcheck-prediction"}, {"world_size", p_.job_ranks()}}},
                {"otherData", other}};
    // "traceEvents" sorts last among the keys: splice the serialised events in before the final brace.
    std::string text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text.pop_back();
    return text + ",\"traceEvents\":[" + events_.text() + "]}\n";
  }

 private:
  int tid_of(int32_t stream) const {
    const auto& rs = p_.rank_streams[p_.streams[stream].rank];
    return static_cast<int>(std::find(rs.begin(), rs.end(), stream) - rs.begin());
  }

  /// Which built ranks get a process and its name. A symmetry quotient's built rank is named
  /// for the job ranks it stands for. Rank images (composed specs) fold into their
  /// representative when the run completed and `all_ranks` is false: an image's timeline is its
  /// representative's (docs/facts/symmetry.md), so one process per class, named for its ranks,
  /// shows the whole job; arrows to and from an image are left out with its ops.
  void fold(bool all_ranks) {
    shown_.assign(static_cast<size_t>(p_.num_ranks), 1);
    names_.resize(static_cast<size_t>(p_.num_ranks));
    std::vector<std::vector<int32_t>> members(static_cast<size_t>(p_.num_ranks));
    const bool images = !all_ranks && r_.execution.completed && !p_.rank_images.empty();
    for (int32_t rank = 0; rank < p_.num_ranks; ++rank) {
      const int32_t of = images && rank < static_cast<int32_t>(p_.rank_images.size()) ? p_.rank_images[rank].of : -1;
      if (of >= 0) {
        shown_[static_cast<size_t>(rank)] = 0;
        members[static_cast<size_t>(of)].push_back(rank);
        folded_ = true;
      } else {
        members[static_cast<size_t>(rank)].insert(members[static_cast<size_t>(rank)].begin(), rank);
      }
    }
    for (int32_t rank = 0; rank < p_.num_ranks; ++rank) {
      if (!shown_[static_cast<size_t>(rank)]) continue;
      ++shown_count_;
      std::vector<int32_t> job;
      for (int32_t m : members[static_cast<size_t>(rank)]) {
        const RankClass c = p_.job_class(m);
        for (int32_t k = 0; k < c.count; ++k) job.push_back(c.first + k);
      }
      std::sort(job.begin(), job.end());
      folded_ |= job.size() > 1;
      names_[static_cast<size_t>(rank)] =
          job.size() == 1 ? "rank " + std::to_string(job.front())
                          : fmt::format("ranks {} ({} ranks alike)", format_rank_ranges(job), job.size());
    }
  }
  bool shown(int32_t rank) const { return shown_[static_cast<size_t>(rank)] != 0; }

  // Process and thread names and their order.
  void metadata() {
    for (int32_t rank = 0; rank < p_.num_ranks; ++rank) {
      if (!shown(rank)) continue;
      events_.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"args", {{"name", names_[static_cast<size_t>(rank)]}}}});
      events_.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
      for (size_t k = 0; k < p_.rank_streams[rank].size(); ++k) {
        int32_t s = p_.rank_streams[rank][k];
        events_.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", k},
                           {"args", {{"name", std::string(p_.streams[s].name) + " stream"}}}});
        events_.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", rank}, {"tid", k}, {"args", {{"sort_index", k}}}});
      }
    }
  }

  // Where each X event starts, where each stream stops, and the X events in Perfetto's
  // processing order: start, longest first, then execution order (which puts a producer before
  // a consumer that starts at the same ns).
  void order() {
    const size_t n = p_.ops.size();
    // Where each stream stops: the end of time for a stream that finished, its last completed
    // op's end for a stuck one (its stuck marker sits there).
    stop_.assign(p_.streams.size(), std::numeric_limits<int64_t>::max());
    for (const auto& st : r_.execution.stuck) stop_[st.stream] = stop_ns(r_, v_, st.stream);
    // A recv posted before its send (eager, buffered) waits, then receives: drawn as a waiting
    // slice and the recv from the send's start, so the message's arrow can run from the send to
    // the recv (Perfetto points every arrow from the slice that starts first).
    start_ = v_.start_ns;
    for (OpId id = 0; id < static_cast<OpId>(n); ++id) {
      const Op& op = p_.ops[id];
      if (v_.ran[id] && op.kind == OpKind::kRecv && op.match() != kNoOp && v_.ran[op.match()])
        start_[id] = std::clamp(v_.start_ns[op.match()], v_.start_ns[id], v_.end_ns[id]);
    }
    std::vector<int64_t> exec_pos(n, 0);
    for (size_t i = 0; i < r_.execution.order.size(); ++i) exec_pos[r_.execution.order[i]] = static_cast<int64_t>(i);
    for (OpId id = 0; id < static_cast<OpId>(n); ++id)
      if (v_.ran[id] && shown(op_rank(id))) sorted_.push_back(id);
    std::sort(sorted_.begin(), sorted_.end(), [&](OpId a, OpId b) {
      int64_t da = v_.end_ns[a] - start_[a], db = v_.end_ns[b] - start_[b];
      if (start_[a] != start_[b]) return start_[a] < start_[b];
      if (da != db) return da > db;
      return exec_pos[a] < exec_pos[b];
    });
  }

  // Plans every arrow (producers in processing order); returns the v1 flow events.
  json plan_flows(FlowPlanner& planner) {
    json flows = json::array();
    uint64_t v1_id = 0;
    std::vector<Arrow> arrows = v_.arrows;
    std::stable_sort(arrows.begin(), arrows.end(),
                     [&](const Arrow& a, const Arrow& b) { return planner.pos(a.from) < planner.pos(b.from); });
    for (const Arrow& a : arrows) {
      if (!shown(op_rank(a.from)) || !shown(op_rank(a.to))) continue;  // an image's arrow: drawn on its representative
      uint64_t v2_id = 0;
      FlowPlanner::V1 t{};
      if (!planner.plan(a, &v2_id, &t)) {
        ++unplaced_;
        continue;
      }
      if (v2_id) continue;
      const char* name = a.kind == Arrow::Kind::kMessage ? "message" : "transfer";
      ++v1_id;
      flows.push_back({{"ph", "s"}, {"name", name}, {"cat", "p2p"}, {"id", v1_id}, {"pid", p_.ops[a.from].rank},
                       {"tid", tid_of(p_.ops[a.from].stream)}, {"ts", us_of(t.from_ns)}});
      flows.push_back({{"ph", "f"}, {"bp", "e"}, {"name", name}, {"cat", "p2p"}, {"id", v1_id}, {"pid", p_.ops[a.to].rank},
                       {"tid", tid_of(p_.ops[a.to].stream)}, {"ts", us_of(t.to_ns)}});
    }
    return flows;
  }

  // An X event per op that ran (after a waiting slice for a recv posted before its send).
  void ops(const FlowPlanner& planner) {
    for (OpId id : sorted_) {
      const Op& op = p_.ops[id];
      if (start_[id] > v_.start_ns[id])
        events_.push_back({{"ph", "X"}, {"name", p_.label(id) + " (waiting)"}, {"cat", "wait"}, {"pid", op.rank},
                           {"tid", tid_of(op.stream)}, {"ts", us_of(v_.start_ns[id])},
                           {"dur", us_of(start_[id] - v_.start_ns[id])}, {"args", {{"waits_for", p_.label(op.match())}}}});
      json e = {{"ph", "X"}, {"name", p_.label(id)}, {"cat", category(op.kind)}, {"pid", op.rank},
                {"tid", tid_of(op.stream)}, {"ts", us_of(start_[id])},
                {"dur", us_of(v_.end_ns[id] - start_[id])}, {"args", op_args(p_, id)}};
      planner.annotate(id, e);
      events_.push_back(std::move(e));
    }
  }

  // One counter track per rank: live bytes, with the limit when the spec has one.
  void memory() {
    auto limit = r_.spec.memory.limit_bytes;
    const auto& curves = v_.timeline.memory_curve;
    for (int32_t rank = 0; rank < p_.num_ranks && rank < static_cast<int32_t>(curves.size()); ++rank)
      for (const auto& [time, bytes] : curves[rank]) {
        if (!shown(rank)) break;
        json args = {{"live bytes", bytes}};
        if (limit) args["limit bytes"] = *limit;
        events_.push_back({{"ph", "C"}, {"name", "memory"}, {"pid", rank}, {"ts", us_of(to_ns(time))}, {"args", args}});
      }
  }

  // A stuck run: an instant where each stuck stream stops, naming the op it cannot start and
  // what that op waits for. Written after the flow events so that a flow event at the same ts
  // still binds to the op before it. Returns the lines for otherData.stuck.
  json stuck_markers() {
    json stuck = json::array();
    for (const auto& st : r_.execution.stuck) {
      std::string waits_for = st.waits_for == kNoOp ? "" : p_.label(st.waits_for);
      events_.push_back({{"ph", "i"}, {"s", "t"}, {"name", "stuck at " + p_.label(st.op)}, {"cat", "deadlock"},
                         {"pid", p_.streams[st.stream].rank}, {"tid", tid_of(st.stream)}, {"ts", us_of(stop_[st.stream])},
                         {"args", {{"op_id", st.op}, {"stuck_at", p_.label(st.op)}, {"location", format_loc(p_.ops[st.op].loc)},
                                   {"waits_for", waits_for}, {"why", st.why}}}});
      stuck.push_back(p_.stream_label(st.stream) + " stuck at " + p_.label(st.op) + ": " + st.why);
    }
    return stuck;
  }

  int32_t op_rank(OpId id) const { return p_.ops[static_cast<size_t>(id)].rank; }

  const VerifyResult& r_;
  const Program& p_;
  TimelineView v_;
  std::vector<char> shown_;          ///< per built rank: drawn as a process
  std::vector<std::string> names_;   ///< per shown rank: its process name
  bool folded_ = false;              ///< a process stands for more than one rank
  int32_t shown_count_ = 0;
  EventList events_;
  std::vector<int64_t> start_, stop_;
  std::vector<OpId> sorted_;
  size_t unplaced_ = 0;
};

}  // namespace

std::string chrome_trace(const VerifyResult& r, bool all_ranks) { return TraceWriter(r, all_ranks).write(); }

std::string trace_all_ranks_note(const VerifyResult& r) {
  const Program& p = r.program;
  const int64_t job = p.job_ranks();
  if (job <= p.num_ranks) return {};
  return fmt::format("note: --trace-all-ranks: the program was built on {} of the job's {} ranks (each built rank stands "
                     "for the ranks that run the same program; docs/facts/symmetry.md), so the trace has one process "
                     "per built rank, named for the ranks it stands for\n",
                     p.num_ranks, job);
}

}  // namespace sc
