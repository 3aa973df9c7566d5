// Chrome traces as Perfetto reads them: every arrow binds to the ops the program joins, times
// survive the conversion to nanoseconds, and a stuck run shows where each stream stops.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "pipeline/verify_pipeline.h"
#include "fsdp/fsdp_yaml.h"
#include "fsdp/verify_fsdp.h"
#include "pipeline/named_schedule.h"
#include "report/report.h"
#include "spec/router_spec.h"
#include "spec/yaml_spec.h"
#include "test_util.h"

namespace sc {
namespace {

using nlohmann::json;

// Perfetto's JSON importer, as far as flows go (src/trace_processor/importers/json/
// json_trace_parser.cc, importers/common/slice_tracker.cc and flow_tracker.cc):
// - ts and dur (microseconds) become integer ns: truncated by older releases, rounded by newer.
// - events are processed sorted by (ts, key, file position); key: X events max - dur (longest
//   first), E events min, others max.
// - X (and thread instants "i", slices of duration 0) start a slice on their thread's track
//   after popping the slices on its stack that ended before (or at, unless both have duration
//   0) the new start; a partial overlap moves the slice off the thread's track.
// - flow v2: an X event with bind_id binds that slice: flow_out begins, flow_in ends, both
//   steps. A begin with a known id is dropped; an end or step without a begin is dropped.
// - flow v1: "s" begins and "t" steps at the slice on top of the stack; "f" with "bp":"e" ends
//   there, "f" without it ends at the next slice to begin on the track. v1 ids are numbered
//   from 0 per (id, cat, name), in one table with v2 ids.
struct Binding {
  std::vector<std::pair<int64_t, int64_t>> arrows;  ///< (op_id out, op_id in)
  std::vector<std::string> problems;
};

int64_t to_ns_checked(const json& v, std::vector<std::string>& problems) {
  double us = v.get<double>();
  int64_t truncated = static_cast<int64_t>(us * 1000);
  int64_t rounded = us == std::trunc(us) ? static_cast<int64_t>(us) * 1000 : std::llround(us * 1000.0);
  if (truncated != rounded) problems.push_back("timestamp " + v.dump() + " differs when truncated and rounded");
  return rounded;
}

Binding bind_like_perfetto(const json& trace) {
  Binding b;
  struct Ev {
    int64_t ts, key;
    size_t pos;
    const json* e;
  };
  std::vector<Ev> evs;
  const auto& all = trace["traceEvents"];
  for (size_t i = 0; i < all.size(); ++i) {
    const json& e = all[i];
    std::string ph = e.value("ph", "");
    if (ph != "X" && ph != "s" && ph != "t" && ph != "f" && ph != "i" && ph != "C") continue;
    int64_t ts = to_ns_checked(e["ts"], b.problems);
    int64_t key = std::numeric_limits<int64_t>::max();
    if (ph == "X") key -= to_ns_checked(e["dur"], b.problems);
    evs.push_back({ts, key, i, &e});
  }
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& c) {
    return std::tie(a.ts, a.key, a.pos) < std::tie(c.ts, c.key, c.pos);
  });
  struct Slice {
    int64_t ts, dur, op;
  };
  std::vector<Slice> slices;
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> stacks;    // track -> open slices
  std::map<std::pair<int64_t, int64_t>, std::vector<uint64_t>> pending;  // "f" without bp
  std::map<uint64_t, size_t> flow_at;                                    // flow id -> slice
  std::map<std::tuple<uint64_t, std::string, std::string>, uint64_t> v1_ids;
  auto arrow = [&](size_t from, size_t to) {
    if (slices[from].ts > slices[to].ts) std::swap(from, to);
    b.arrows.push_back({slices[from].op, slices[to].op});
  };
  auto begin = [&](uint64_t id, std::optional<size_t> s) {
    if (!s) return b.problems.push_back("flow begins with no slice on its track");
    if (!flow_at.emplace(id, *s).second) b.problems.push_back("flow id used twice: " + std::to_string(id));
  };
  auto step_or_end = [&](uint64_t id, std::optional<size_t> s, bool step) {
    if (!s) return b.problems.push_back("flow ends with no slice on its track");
    auto it = flow_at.find(id);
    if (it == flow_at.end()) return b.problems.push_back("flow ends before it begins: " + std::to_string(id));
    arrow(it->second, *s);
    if (step) it->second = *s;
  };
  for (const Ev& ev : evs) {
    const json& e = *ev.e;
    std::string ph = e["ph"];
    if (ph == "C") continue;
    auto track = std::make_pair(e.value("pid", int64_t{0}), e.value("tid", int64_t{0}));
    auto& stack = stacks[track];
    auto top = [&]() -> std::optional<size_t> {
      if (stack.empty()) return std::nullopt;
      return stack.back();
    };
    if (ph == "X" || ph == "i") {
      int64_t dur = ph == "X" ? to_ns_checked(e["dur"], b.problems) : 0;
      for (size_t k = stack.size(); k-- > 0;) {
        const Slice& s = slices[stack[k]];
        int64_t end = s.ts + s.dur;
        if (end < ev.ts || (end == ev.ts && !(s.dur == 0 && dur == 0))) {
          stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(k));
          continue;
        }
        if (ev.ts < end && ev.ts + dur > end) b.problems.push_back("slice overlaps another: " + e.dump());
      }
      slices.push_back({ev.ts, dur, e["args"].value("op_id", int64_t{-1})});
      stack.push_back(slices.size() - 1);
      for (uint64_t id : pending[track]) step_or_end(id, slices.size() - 1, false);
      pending[track].clear();
      if (e.contains("bind_id")) {
        uint64_t id = e["bind_id"].get<uint64_t>();
        bool out = e.value("flow_out", false), in = e.value("flow_in", false);
        if (out && in) step_or_end(id, top(), true);
        else if (out) begin(id, top());
        else if (in) step_or_end(id, top(), false);
      }
      continue;
    }
    auto key = std::make_tuple(e["id"].get<uint64_t>(), e.value("cat", ""), e.value("name", ""));
    auto found = v1_ids.find(key);
    uint64_t id = found != v1_ids.end() ? found->second : v1_ids.emplace(key, v1_ids.size()).first->second;
    if (ph == "s") begin(id, top());
    else if (ph == "t") step_or_end(id, top(), true);
    else if (e.value("bp", "") == "e") step_or_end(id, top(), false);
    else pending[track].push_back(id);
  }
  return b;
}

// The arrows the program names: each matched send to its recv, each implicit transfer from
// producer to consumer, among the ops that ran.
std::vector<std::pair<int64_t, int64_t>> expected_arrows(const VerifyResult& r) {
  const Program& p = r.program;
  std::vector<std::pair<int64_t, int64_t>> out;
  const auto& done = r.execution.done;
  auto ran = [&](OpId id) { return done.empty() || done[id]; };
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    if (!ran(id)) continue;
    const Op& op = p.ops[id];
    if (op.kind == OpKind::kSend && op.match() != kNoOp && ran(op.match())) out.push_back({id, op.match()});
    for (const Dep* d = p.deps_begin(id); d != p.deps_end(id); ++d)
      if (d->kind == DepKind::kTransfer && ran(d->src)) out.push_back({d->src, id});
  }
  return out;
}

std::optional<VerifyResult> verify_example(const std::string& path, std::optional<Semantics> semantics = std::nullopt) {
  Diagnostics diags;
  if (is_router_spec(path)) return std::nullopt;
  if (is_fsdp_spec(path)) {
    auto spec = load_fsdp_spec(path, diags);
    REQUIRE(spec);
    return verify_fsdp(*spec);
  }
  auto spec = load_yaml_spec(path, diags);
  REQUIRE(spec);
  resolve_named_schedule(*spec, diags);
  REQUIRE_FALSE(diags.has_errors());
  VerifyOptions o;
  o.semantics = semantics;
  return verify(*spec, o);
}

}  // namespace

TEST_CASE("every arrow of every example's trace binds in Perfetto to the ops the program joins", "[report][trace]") {
  size_t total = 0, bound = 0;
  // Each pipeline example also under the other P2P semantics: under eager and buffered a recv
  // may start before its send, which flow events v2 cannot bind.
  std::vector<std::pair<std::string, std::optional<Semantics>>> runs;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_path("examples"))) {
    if (entry.path().extension() != ".yaml") continue;
    runs.push_back({entry.path().string(), std::nullopt});
    if (!is_fsdp_spec(entry.path().string()) && !is_router_spec(entry.path().string()))
      for (const char* sem : {"eager", "buffered:1", "rendezvous"}) runs.push_back({entry.path().string(), parse_semantics(sem)});
  }
  for (const auto& [path, semantics] : runs) {
    auto r = verify_example(path, semantics);
    if (!r) continue;
    INFO(path << (semantics ? " under " + format_semantics(*semantics) : std::string()));
    json trace = json::parse(chrome_trace(*r, /*all_ranks=*/true));  // every arrow, images' too
    Binding b = bind_like_perfetto(trace);
    CHECK(b.problems.empty());
    for (const auto& p : b.problems) UNSCOPED_INFO(p);
    auto want = expected_arrows(*r);
    auto got = b.arrows;
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    std::vector<std::pair<int64_t, int64_t>> hit;
    std::set_intersection(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(hit));
    CHECK(hit.size() == want.size());
    CHECK(got.size() == want.size());
    total += want.size();
    bound += hit.size();
  }
  WARN(bound << " of " << total << " arrows bind to the intended ops");
  CHECK(total > 0);
}

/// The process names of `trace`, by pid.
std::map<int, std::string> process_names(const json& trace) {
  std::map<int, std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
  return names;
}

TEST_CASE("a trace draws one process per class of identical ranks, named for its ranks, every rank on request",
          "[report][trace][symmetry]") {
  // PP 4 x HSDP (2 x 4): 32 ranks, the 8 replicas of each pipeline rank are images of one
  // (docs/facts/symmetry.md), so 4 processes.
  auto r = verify_example(test::source_path("examples/composed-pp4-hsdp.yaml"));
  REQUIRE(r);
  REQUIRE(r->program.num_ranks == 32);
  json folded = json::parse(chrome_trace(*r));
  auto names = process_names(folded);
  REQUIRE(names.size() == 4);
  CHECK(names[0] == "ranks 0-7 (8 ranks alike)");
  CHECK(names[24] == "ranks 24-31 (8 ranks alike)");
  CHECK(folded["otherData"]["folded"].get<std::string>().rfind("32 ranks drawn as 4 processes", 0) == 0);
  CHECK(bind_like_perfetto(folded).problems.empty());
  size_t x = 0;
  for (const auto& e : folded["traceEvents"])
    if (e["ph"] == "X") {
      ++x;
      CHECK(e["pid"].get<int>() % 8 == 0);  // only the representatives' ops
    }
  CHECK(x * 8 == r->program.ops.size());
  json all = json::parse(chrome_trace(*r, true));
  CHECK(process_names(all).size() == 32);
  CHECK(process_names(all)[5] == "rank 5");
  CHECK_FALSE(all["otherData"].contains("folded"));

  // An FSDP spec built as the quotient: its one built rank is named for the 8 it stands for.
  auto f = verify_example(test::source_path("examples/fsdp2-llama3-8b.yaml"));
  REQUIRE(f);
  REQUIRE(f->program.num_ranks == 1);
  json q = json::parse(chrome_trace(*f));
  CHECK(process_names(q) == std::map<int, std::string>{{0, "ranks 0-7 (8 ranks alike)"}});
  CHECK(q["distributedInfo"]["world_size"] == 8);
  // --trace-all-ranks has nothing more to draw there, and says so.
  CHECK(trace_all_ranks_note(*f).find("built on 1 of the job's 8 ranks") != std::string::npos);
  CHECK(trace_all_ranks_note(*r).empty());
}

TEST_CASE("a stuck run's trace shows the executed prefix and where each stuck stream stops", "[report][trace]") {
  auto r = verify_example(test::source_path("examples/interleaved-rendezvous-deadlock.yaml"));
  REQUIRE(r);
  REQUIRE_FALSE(r->execution.completed);
  json trace = json::parse(chrome_trace(*r));
  size_t x = 0;
  std::vector<std::string> stuck;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") ++x;
    if (e["ph"] == "i") stuck.push_back(e["name"].get<std::string>() + ": " + e["args"]["why"].get<std::string>());
  }
  CHECK(x == r->execution.order.size());
  CHECK(x > 0);
  REQUIRE(stuck.size() == 4);
  CHECK(std::find(stuck.begin(), stuck.end(), "stuck at 0SEND_F1: waits for rank 1 to post 1RECV_F1 (rendezvous)") !=
        stuck.end());
  CHECK(trace["otherData"]["timeline"] == "executed prefix of a stuck run");
  CHECK(bind_like_perfetto(trace).problems.empty());
}

TEST_CASE("run --trace writes measured times that Perfetto reads back exactly, beside arrows that bind", "[report][trace][gpu-plan]") {
  // The dry run's replayed times are not whole nanoseconds (the link model's transfer times).
  for (const char* example : {"examples/gpu-zbh1-p4-m8.yaml", "examples/gpu-1f1b-p4-m8.yaml"}) {
    INFO(example);
    auto path = std::filesystem::temp_directory_path() / "schedcheck-run-trace.json";
    auto run = test::run_schedcheck(std::string("run ") + example + " --dry-run --trace '" + path.string() + "'", false);
    REQUIRE(run.exit_code == 0);
    json trace = json::parse(test::read_file(path.string()));
    size_t measured = 0;
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["pid"].get<int>() >= 100000) ++measured;
    CHECK(measured > 0);
    Binding b = bind_like_perfetto(trace);
    for (const auto& p : b.problems) UNSCOPED_INFO(p);
    CHECK(b.problems.empty());
    auto r = verify_example(test::source_path(example));
    REQUIRE(r);
    CHECK(b.arrows.size() == expected_arrows(*r).size());
  }
}

}  // namespace sc
