// Tests of the spec v1 loader (spec/yaml_spec.h) against specs/valid and specs/invalid.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "spec/yaml_spec.h"
#include "support/units.h"
#include "test_util.h"

using namespace sc;
namespace fs = std::filesystem;

namespace {

// The first line `Diagnostics::print` writes (the first diagnostic by location), with `dir`
// removed so it reads as the .expected files do: "NAME.yaml:LINE:COL: error: message".
std::string first_line(const Diagnostics& diags, const std::string& dir) {
  std::ostringstream os;
  diags.print(os);
  std::string line = os.str().substr(0, os.str().find('\n'));
  if (line.rfind(dir, 0) == 0) line = line.substr(dir.size());
  return line;
}

std::string all_lines(const Diagnostics& diags) {
  std::ostringstream os;
  diags.print(os);
  return os.str();
}

std::string trim_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// Parses `text` as a spec named "t.yaml"; `diags` collects the messages.
std::optional<PipelineSpec> parse(const std::string& text, Diagnostics& diags) {
  return parse_yaml_spec("t.yaml", text, diags);
}

// The message of the only (or first) error of `text`, with its location.
std::string error_of(const std::string& text) {
  Diagnostics d;
  auto spec = parse(text, d);
  if (spec) return "<loaded>";
  return first_line(d, "");
}

constexpr const char* kHead = "schedcheck: 1\nranks: 2\n";
constexpr const char* kActions = "schedule:\n  actions:\n    0: 0F0 0F1 0B0 0B1\n    1: 1F0 1F1 1B0 1B1\n";

}  // namespace

TEST_CASE("every invalid reference spec reports its expected first diagnostic", "[spec]") {
  std::string dir = test::source_path("specs/invalid/");
  std::vector<fs::path> specs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") specs.push_back(e.path());
  std::sort(specs.begin(), specs.end());
  REQUIRE(specs.size() >= 12);
  for (const auto& p : specs) {
    fs::path expected_path = p;
    expected_path.replace_extension(".expected");
    INFO(p.filename().string());
    REQUIRE(fs::exists(expected_path));
    std::string expected = trim_newline(test::read_file(expected_path.string()));
    Diagnostics diags;
    auto spec = load_yaml_spec(p.string(), diags);
    CHECK_FALSE(spec.has_value());
    CHECK(diags.has_errors());
    CHECK(first_line(diags, dir) == expected);
  }
}

TEST_CASE("every valid reference spec loads without diagnostics", "[spec]") {
  std::string dir = test::source_path("specs/valid/");
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path().filename().string());
    Diagnostics diags;
    auto spec = load_yaml_spec(e.path().string(), diags);
    CHECK(spec.has_value());
    CHECK(diags.all().empty());
    if (!diags.all().empty()) WARN(all_lines(diags));
    ++n;
  }
  CHECK(n >= 4);
}

TEST_CASE("a full spec fills every field with its location", "[spec]") {
  std::string path = test::source_path("specs/valid/zbv-pp2-buffered.yaml");
  Diagnostics diags;
  auto spec = load_yaml_spec(path, diags);
  REQUIRE(spec);
  CHECK(spec->name == "zbv-pp2");
  CHECK(spec->path == path);
  CHECK(spec->ranks == 2);
  CHECK(spec->stages == 4);
  CHECK(spec->microbatches == 4);
  CHECK(spec->placement == "v");
  CHECK(spec->placement_declared);
  // V placement (docs/facts/pipeline-schedules.md): rank r holds stages r and 2p-1-r.
  CHECK(spec->stage_to_rank == std::vector<int32_t>{0, 1, 1, 0});

  // Costs: lists per stage, a single value broadcast, B = I + W when B is absent.
  CHECK(spec->costs.f_s == std::vector<double>{0.001, 0.001, 0.001, 0.0015});
  CHECK(spec->costs.i_s == std::vector<double>{0.001, 0.001, 0.001, 0.001});
  REQUIRE(spec->costs.w_s.size() == 4);
  for (double w : spec->costs.w_s) CHECK(w == Approx(0.0005));
  REQUIRE(spec->costs.b_s.size() == 4);
  for (double b : spec->costs.b_s) CHECK(b == Approx(0.0015));

  CHECK(spec->p2p.latency_s == Approx(5e-6));
  CHECK(spec->p2p.bandwidth_bytes_per_s == 25.0 * 1024 * 1024 * 1024);
  CHECK(spec->p2p.message_bytes == 16 * 1024 * 1024);
  CHECK(spec->p2p.semantics == Semantics{Semantics::kBuffered, 2});

  REQUIRE(spec->memory.limit_bytes);
  CHECK(*spec->memory.limit_bytes == 40LL * 1024 * 1024 * 1024);
  const int64_t gib = 1024LL * 1024 * 1024;
  CHECK(spec->memory.params_bytes == std::vector<int64_t>{gib, gib, gib, 2 * gib});
  CHECK(spec->memory.activation_bytes == std::vector<int64_t>(4, 512LL * 1024 * 1024));
  CHECK(spec->memory.weight_grad_bytes == std::vector<int64_t>(4, 256LL * 1024 * 1024));

  // Actions: a two-line quoted string on rank 0, a flow list over two lines on rank 1.
  REQUIRE(spec->actions.size() == 2);
  REQUIRE(spec->actions[0].size() == 24);
  REQUIRE(spec->actions[1].size() == 24);
  CHECK(format_step(spec->actions[0][3]) == "3F0");
  CHECK(spec->actions[0][3].first == Action{ActionKind::kF, 3, 0});
  CHECK(spec->actions[0][4].first == Action{ActionKind::kI, 3, 0});
  CHECK(spec->actions[0][5].first == Action{ActionKind::kW, 3, 0});
  // `    0: "0F0 0F1 0F2 3F0 ...` on line 26: 3F0 starts at column 21.
  CHECK(spec->actions[0][3].loc.line == 26);
  CHECK(spec->actions[0][3].loc.col == 21);
  // The continuation line `        3F2 3I2 ...` (line 27) keeps exact columns.
  CHECK(format_step(spec->actions[0][12]) == "3F2");
  CHECK(spec->actions[0][12].loc.line == 27);
  CHECK(spec->actions[0][12].loc.col == 9);
  // `    1: [1F0, 2F0, ...` on line 28: 2F0 is the list item at column 14.
  CHECK(format_step(spec->actions[1][1]) == "2F0");
  CHECK(spec->actions[1][1].loc.line == 28);
  CHECK(spec->actions[1][1].loc.col == 14);
  CHECK(spec->actions[1][12].loc.line == 29);
  CHECK(spec->actions[1][12].loc.col == 9);
  CHECK(source_name(spec->actions[1][12].loc.file) == path);

  // Key locations point at the values.
  CHECK(spec->locs.file.line == 1);
  CHECK(spec->locs.file.col == 1);
  CHECK(spec->locs.ranks.line == 6);
  CHECK(spec->locs.ranks.col == 8);
  CHECK(spec->locs.stages.line == 7);
  CHECK(spec->locs.placement.line == 8);
  CHECK(spec->locs.placement.col == 12);
  CHECK(spec->locs.microbatches.line == 9);
  CHECK(spec->locs.memory_limit.line == 20);
  CHECK(spec->locs.memory_limit.col == 16);
  CHECK(spec->locs.schedule.line == 24);
  CHECK(spec->locs.schedule.col == 1);
  CHECK(spec->locs.ranks.file == spec->locs.file.file);
}

TEST_CASE("a minimal spec takes its counts from the actions and the unit defaults", "[spec]") {
  Diagnostics diags;
  auto spec = load_yaml_spec(test::source_path("specs/valid/minimal.yaml"), diags);
  REQUIRE(spec);
  CHECK(spec->name == "minimal");
  CHECK(spec->stages == 2);
  CHECK(spec->microbatches == 2);
  CHECK(spec->placement == "inferred:loop");
  CHECK_FALSE(spec->placement_declared);
  CHECK(spec->stage_to_rank == std::vector<int32_t>{0, 1});
  CHECK(spec->costs.f_s == std::vector<double>{1.0, 1.0});
  CHECK(spec->costs.i_s == std::vector<double>{1.0, 1.0});
  CHECK(spec->costs.w_s == std::vector<double>{1.0, 1.0});
  CHECK(spec->costs.b_s == std::vector<double>{2.0, 2.0});
  CHECK(spec->p2p.latency_s == 0);
  CHECK(spec->p2p.message_bytes == 0);
  CHECK(spec->p2p.semantics == Semantics{Semantics::kRendezvous, 0});
  CHECK_FALSE(spec->memory.limit_bytes);
  CHECK(spec->memory.params_bytes == std::vector<int64_t>{0, 0});
  CHECK(spec->memory.activation_bytes == std::vector<int64_t>{1, 1});
  CHECK(spec->memory.weight_grad_bytes == std::vector<int64_t>{1, 1});
  // Plain scalar `    0: 0F0 0F1 0B0 0B1` on line 8.
  CHECK(spec->actions[0][2].loc.line == 8);
  CHECK(spec->actions[0][2].loc.col == 16);
}

TEST_CASE("an explicit placement and an overlapped pair load as written", "[spec]") {
  Diagnostics diags;
  auto spec = load_yaml_spec(test::source_path("specs/valid/overlap-explicit.yaml"), diags);
  REQUIRE(spec);
  CHECK(spec->placement == "explicit");
  CHECK(spec->placement_declared);
  CHECK(spec->stage_to_rank == std::vector<int32_t>{0, 1});
  REQUIRE(spec->actions[0].size() == 3);
  const Step& pair = spec->actions[0][1];
  REQUIRE(pair.is_overlap());
  CHECK(pair.first == Action{ActionKind::kF, 0, 1});
  CHECK(*pair.second == Action{ActionKind::kB, 0, 0});
  CHECK(pair.loc.line == 11);
  CHECK(pair.loc.col == 9);
  // Comma-separated plain scalar `    1: 1F0, 1B0, 1F1, 1B1`.
  REQUIRE(spec->actions[1].size() == 4);
  CHECK(spec->actions[1][3].loc.col == 23);
}

TEST_CASE("a spec can take its actions from a PyTorch CSV next to it", "[spec]") {
  Diagnostics diags;
  auto spec = load_yaml_spec(test::source_path("specs/valid/from-csv.yaml"), diags);
  REQUIRE(spec);
  CHECK(spec->ranks == 2);
  CHECK(spec->stages == 2);
  CHECK(spec->microbatches == 2);
  CHECK(spec->placement == "inferred:loop");
  REQUIRE(spec->actions.size() == 2);
  REQUIRE(spec->actions[0].size() == 4);
  CHECK(spec->actions[0][2].first == Action{ActionKind::kB, 0, 0});
  CHECK(source_name(spec->actions[0][2].loc.file).find("from-csv.csv") != std::string::npos);
  CHECK(spec->costs.b_s == std::vector<double>{0.003, 0.003});
}

TEST_CASE("costs without B sum I and W, costs with B default I and W to zero", "[spec]") {
  Diagnostics d1;
  auto a = parse(std::string(kHead) + "costs: {F: 2ms, I: 3ms, W: 1ms}\n" + kActions, d1);
  REQUIRE(a);
  CHECK(a->costs.b_s[0] == Approx(0.004));
  Diagnostics d2;
  auto b = parse(std::string(kHead) + "costs: {F: 2ms, B: 5ms}\n" + kActions, d2);
  REQUIRE(b);
  CHECK(b->costs.b_s == std::vector<double>{0.005, 0.005});
  CHECK(b->costs.i_s == std::vector<double>{0, 0});
  CHECK(b->costs.w_s == std::vector<double>{0, 0});
  // Bare numbers are seconds.
  Diagnostics d3;
  auto c = parse(std::string(kHead) + "costs: {F: 1, B: 2.5}\n" + kActions, d3);
  REQUIRE(c);
  CHECK(c->costs.b_s[1] == 2.5);
  // Without B, both I and W are needed.
  CHECK(error_of(std::string(kHead) + "costs: {F: 2ms, I: 3ms}\n" + kActions) ==
        "t.yaml:3:1: error: costs needs W when B is not given (B defaults to I + W)");
}

TEST_CASE("placement is inferred from the actions when it is not declared", "[spec]") {
  Diagnostics d1;
  auto v = parse(std::string(kHead) +
                     "schedule:\n  actions:\n    0: 0F0 3F0 3B0 0B0\n    1: 1F0 2F0 2B0 1B0\n",
                 d1);
  REQUIRE(v);
  CHECK(v->stages == 4);
  CHECK(v->placement == "inferred:v");
  CHECK_FALSE(v->placement_declared);
  CHECK(v->stage_to_rank == std::vector<int32_t>{0, 1, 1, 0});

  // Stage 2 is never named: it takes its loop rank.
  Diagnostics d2;
  auto gap = parse(std::string(kHead) + "schedule:\n  actions:\n    0: 0F0 0B0\n    1: 1F0 3F0\n", d2);
  REQUIRE(gap);
  CHECK(gap->stages == 4);
  CHECK(gap->stage_to_rank == std::vector<int32_t>{0, 1, 0, 1});
  CHECK(gap->placement == "inferred:loop");

  Diagnostics d3;
  auto odd = parse(std::string(kHead) + "schedule:\n  actions:\n    0: 1F0\n    1: 0F0\n", d3);
  REQUIRE(odd);
  CHECK(odd->stage_to_rank == std::vector<int32_t>{1, 0});
  CHECK(odd->placement == "inferred");
}

TEST_CASE("a named schedule is recorded for the pipeline front-end to generate", "[spec]") {
  Diagnostics d;
  auto spec = load_yaml_spec(test::source_path("specs/valid/named-zb-v.yaml"), d);
  REQUIRE(spec);
  REQUIRE(spec->named);
  CHECK(spec->named->name == "zb-v");
  CHECK_FALSE(spec->named->chunks);
  CHECK_FALSE(spec->named->megatron);
  CHECK(spec->named->loc.line == 11);
  CHECK(spec->named->loc.col == 9);
  CHECK(spec->microbatches == 8);
  REQUIRE(spec->actions.size() == 4);
  for (const auto& row : spec->actions) CHECK(row.empty());
  // Without a `stages` key the generator picks the stage count: no location is recorded.
  CHECK_FALSE(spec->locs.stages.valid());
  CHECK(spec->memory.limit_bytes == 24LL * 1024 * 1024 * 1024);

  Diagnostics d2;
  auto inter = parse(std::string(kHead) +
                         "microbatches: 4\nstages: 4\ncosts: {F: 1ms, I: [1ms, 1ms, 1ms, 2ms], W: 1ms}\n"
                         "schedule: {name: interleaved-1f1b, chunks: 2, megatron: true}\n",
                     d2);
  REQUIRE(inter);
  REQUIRE(inter->named);
  CHECK(inter->named->chunks == 2);
  CHECK(inter->named->megatron);
  CHECK(inter->locs.stages.valid());
  CHECK(inter->costs.b_s == std::vector<double>{0.002, 0.002, 0.002, 0.003});

  // With the stage count open, per-stage lists are not held to a length here; a value given once
  // follows a list.
  Diagnostics d3;
  auto open = parse(std::string(kHead) +
                        "microbatches: 4\ncosts: {F: 1ms, I: [1ms, 1ms, 1ms, 2ms], W: 1ms}\n"
                        "schedule: {name: zb-v}\n",
                    d3);
  REQUIRE(open);
  CHECK(open->costs.b_s == std::vector<double>{0.002, 0.002, 0.002, 0.003});

  CHECK(error_of(std::string(kHead) + "microbatches: 2\nschedule: {name: 1f1b, megatron: maybe}\n") ==
        "t.yaml:4:34: error: schedule.megatron must be true or false, got 'maybe'");
  CHECK(error_of(std::string(kHead) + "microbatches: 2\nschedule: {actions: {0: 0F0}, chunks: 2}\n") ==
        "t.yaml:4:31: error: schedule.chunks applies only to schedule.name");
  CHECK(error_of(std::string(kHead) + "microbatches: 2\nschedule: {name: 1f1b, csv: a.csv}\n") ==
        "t.yaml:4:24: error: schedule has both name and csv; give one of them");
}

TEST_CASE("pipelines lists the first stage of each independent pipeline", "[spec]") {
  Diagnostics d;
  auto spec = parse(std::string(kHead) +
                        "stages: 4\nplacement: [0, 1, 1, 0]\npipelines: [0, 2]\n"
                        "schedule:\n  actions:\n    0: 0F0 3F0\n    1: 1F0 2F0\n",
                    d);
  REQUIRE(spec);
  CHECK(spec->pipeline_starts == std::vector<int32_t>{0, 2});
  CHECK(spec->is_first_stage(2));
  CHECK(spec->is_last_stage(1));
  Diagnostics d2;
  auto one = parse(std::string(kHead) + kActions, d2);
  REQUIRE(one);
  CHECK(one->pipeline_starts == std::vector<int32_t>{0});
  CHECK(error_of(std::string(kHead) + "pipelines: [1]\n" + kActions) ==
        "t.yaml:3:13: error: pipelines must start with stage 0, got 1");
  CHECK(error_of(std::string(kHead) + "pipelines: [0, 5]\n" + kActions) ==
        "t.yaml:3:16: error: pipelines[1] is stage 5, out of range: stages is 2 (ids 0 to 1)");
  CHECK(error_of(std::string(kHead) + "pipelines: 2\n" + kActions) ==
        "t.yaml:3:12: error: pipelines must be a list of the first stage of each pipeline, such as "
        "[0, 4], got '2'");
}

TEST_CASE("a declared placement is kept even when the actions contradict it", "[spec]") {
  // The structure pass reports the contradiction as a finding; the loader does not.
  Diagnostics d;
  auto spec = parse(std::string(kHead) +
                        "placement: loop\nschedule:\n  actions:\n    0: 1F0 1B0\n    1: 0F0 0B0\n",
                    d);
  REQUIRE(spec);
  CHECK(spec->placement == "loop");
  CHECK(spec->placement_declared);
  CHECK(spec->stage_to_rank == std::vector<int32_t>{0, 1});
}

TEST_CASE("ranks without actions get empty lists and stages follow the placement", "[spec]") {
  Diagnostics d;
  auto spec = parse("schedcheck: 1\nranks: 3\nplacement: v\nschedule:\n  actions:\n    0: 0F0\n", d);
  REQUIRE(spec);
  CHECK(spec->stages == 6);
  REQUIRE(spec->actions.size() == 3);
  CHECK(spec->actions[1].empty());
  CHECK(spec->actions[2].empty());
  CHECK(spec->microbatches == 1);
  CHECK(spec->stage_to_rank == std::vector<int32_t>{0, 1, 2, 2, 1, 0});
}

TEST_CASE("action errors point at the action inside the string", "[spec]") {
  // Double-quoted, single-quoted and plain scalars all give the token's own column.
  CHECK(error_of(std::string(kHead) + "stages: 2\nschedule:\n  actions:\n    0: \"0F0  0F1 7B0\"\n") ==
        "t.yaml:6:18: error: stage 7 of '7B0' is out of range: stages is 2 (ids 0 to 1)");
  CHECK(error_of(std::string(kHead) + "stages: 2\nschedule:\n  actions:\n    0: '0F0,7B0'\n") ==
        "t.yaml:6:13: error: stage 7 of '7B0' is out of range: stages is 2 (ids 0 to 1)");
  CHECK(error_of(std::string(kHead) + "stages: 2\nschedule:\n  actions:\n    0: 0F0 7B0\n") ==
        "t.yaml:6:12: error: stage 7 of '7B0' is out of range: stages is 2 (ids 0 to 1)");
  // The second action of an overlapped pair.
  CHECK(error_of(std::string(kHead) +
                 "stages: 2\nschedule:\n  actions:\n    0: 0F0 (0F1;5B0)OVERLAP_F_B\n") ==
        "t.yaml:6:17: error: stage 5 of '5B0' is out of range: stages is 2 (ids 0 to 1)");
  // A syntax error inside a token points at the bad character.
  CHECK(error_of(std::string(kHead) + "schedule:\n  actions:\n    0: 0F0 0F1xyz\n") ==
        "t.yaml:5:15: error: rank 0: '0F1xyz': unexpected 'xyz' after the action");
  // An escape breaks the verbatim match: later tokens point at the string itself.
  CHECK(error_of(std::string(kHead) + "stages: 2\nschedule:\n  actions:\n    0: \"0F0\\t7B0\"\n") ==
        "t.yaml:6:8: error: stage 7 of '7B0' is out of range: stages is 2 (ids 0 to 1)");
}

TEST_CASE("a SEND or RECV carries a count or a list of named tensors and a malformed one is located", "[spec]") {
  Diagnostics d;
  auto spec = parse(std::string(kHead) +
                        "stages: 2\nschedule:\n  actions:\n"
                        "    0: \"0F0 0SEND_F0[act, mask] 0RECV_B0x2 0B0\"\n"
                        "    1: [1RECV_F0x2, 1F0, 1B0, \"(1SEND_B0[grad])BATCH\"]\n",  // quoted: [ ] in a flow list
                    d);
  INFO(first_line(d, ""));
  REQUIRE(spec);
  const std::vector<Step>& r0 = spec->actions[0];
  REQUIRE(r0.size() == 4);
  CHECK(r0[1].tensors == 2);
  CHECK(tensor_name_list(r0[1].tensor_names) == std::vector<std::string>{"act", "mask"});
  CHECK(r0[1].loc.col == 13);
  CHECK(r0[2].tensors == 2);
  CHECK(r0[2].tensor_names == -1);
  CHECK(r0[2].loc.col == 33);  // the token after the bracketed list, blanks inside it and all
  CHECK(format_steps(r0, " ") == "0F0 0SEND_F0[act,mask] 0RECV_B0x2 0B0");
  CHECK(format_steps(spec->actions[1], " ") == "1RECV_F0x2 1F0 1B0 (1SEND_B0[grad])BATCH");
  // Each malformed form points at the character where it goes wrong.
  const std::string head = std::string(kHead) + "stages: 2\nschedule:\n  actions:\n    0: 0F0 ";
  CHECK(error_of(head + "0SEND_F0x0\n") == "t.yaml:6:21: error: rank 0: '0SEND_F0x0': a tensor count is 1 to 64, got 0");
  CHECK(error_of(head + "0SEND_F0x65\n") == "t.yaml:6:21: error: rank 0: '0SEND_F0x65': a tensor count is 1 to 64, got 65");
  CHECK(error_of(head + "0SEND_F0x99999999999999999999\n") ==
        "t.yaml:6:21: error: rank 0: '0SEND_F0x99999999999999999999': a tensor count is 1 to 64, got 99999999999999999999");
  CHECK(error_of(head + "0SEND_F0xy\n") ==
        "t.yaml:6:21: error: rank 0: '0SEND_F0xy': a tensor count follows 'x', as in 0SEND_F0x2");
  CHECK(error_of(head + "0SEND_F0[act\n") ==
        "t.yaml:6:20: error: rank 0: '0SEND_F0[act': a tensor list ends with ']', as in [act,mask]");
  CHECK(error_of(head + "0SEND_F0[]\n") ==
        "t.yaml:6:21: error: rank 0: '0SEND_F0[]': a tensor list names at least one tensor, as in [act,mask]");
  CHECK(error_of(head + "0SEND_F0[act,2d]\n") ==
        "t.yaml:6:25: error: rank 0: '0SEND_F0[act,2d]': a tensor name starts with a letter or '_' and holds "
        "letters, digits and '_'");
  // Inside a BATCH group an unclosed list ends at the group's ')', not at the end of the line.
  CHECK(error_of(head + "(0SEND_F0[a;1RECV_B0)BATCH 0B0\n") ==
        "t.yaml:6:21: error: rank 0: '0SEND_F0[a': a tensor list ends with ']', as in [act,mask]");
  CHECK(error_of(head + "0SEND_F0[act;mask]\n") ==
        "t.yaml:6:24: error: rank 0: '0SEND_F0[act;mask]': tensor names are separated by ',', as in [act,mask]");
  CHECK(error_of(head + "0SEND_F0[act]x2\n") ==
        "t.yaml:6:25: error: rank 0: '0SEND_F0[act]x2': unexpected 'x2' after the action");
  CHECK(error_of(head + "0F1x2\n") ==
        "t.yaml:6:15: error: rank 0: '0F1x2': only SEND and RECV actions carry a tensor count or list, not F");
  // Inside a BATCH group the column is the member's.
  CHECK(error_of(head + "(0SEND_F0;1RECV_B0x0)BATCH\n") ==
        "t.yaml:6:31: error: rank 0: '1RECV_B0x0': a tensor count is 1 to 64, got 0");
}

TEST_CASE("a SEND or RECV names a stage other than its neighbour after '>' or '<' (a skip connection)", "[spec]") {
  Diagnostics d;
  auto spec = parse("schedcheck: 1\nranks: 3\n"
                        "stages: 3\nschedule:\n  actions:\n"
                        "    0: \"0F0 (0SEND_F0;0SEND_F0x2>2)BATCH 0RECV_B0<2 0RECV_B0 0B0\"\n"
                        "    1: \"1RECV_F0 1F0 1SEND_F0>2 1RECV_B0 1B0 1SEND_B0<0\"\n"
                        "    2: \"2RECV_F0 2RECV_F0x2<0 2F0 2B0 2SEND_B0>0 2SEND_B0>1\"\n",
                    d);
  // 1SEND_F0>2 and 2SEND_B0>1 name the neighbour: the plain action. 1SEND_B0<0 is an error.
  REQUIRE_FALSE(spec);
  CHECK(first_line(d, "") ==
        "t.yaml:7:54: error: rank 1: '1SEND_B0<0': a send names the stage it sends to after '>', as in 1SEND_B0>0");
  Diagnostics ok;
  spec = parse("schedcheck: 1\nranks: 3\n"
                   "stages: 3\nschedule:\n  actions:\n"
                   "    0: \"0F0 (0SEND_F0;0SEND_F0x2>2)BATCH 0RECV_B0<2 0RECV_B0 0B0\"\n"
                   "    1: \"1RECV_F0 1F0 1SEND_F0>2 1RECV_B0 1B0 1SEND_B0\"\n"
                   "    2: \"2RECV_F0 2RECV_F0x2<0 2F0 2B0 2SEND_B0>0 2SEND_B0>1\"\n",
               ok);
  INFO(first_line(ok, ""));
  REQUIRE(spec);
  const std::vector<Step>& r0 = spec->actions[0];
  REQUIRE(r0.size() == 6);  // the BATCH group is two steps
  CHECK(r0[1].peer_stage == -1);
  CHECK(r0[2].peer_stage == 2);
  CHECK(r0[2].tensors == 2);
  CHECK(r0[3].peer_stage == 2);
  CHECK(message_peer_stage(r0[3]) == 2);
  CHECK(message_peer_stage(r0[4]) == 1);
  CHECK(spec->actions[1][2].peer_stage == -1);  // 1SEND_F0>2 names its neighbour
  CHECK(spec->actions[2][5].peer_stage == -1);  // so does 2SEND_B0>1
  // Formatting writes the other stage back only where it is not the neighbour.
  CHECK(format_steps(r0, " ") == "0F0 (0SEND_F0;0SEND_F0x2>2)BATCH 0RECV_B0<2 0RECV_B0 0B0");
  CHECK(format_steps(spec->actions[1], " ") == "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0");
  CHECK(format_steps(spec->actions[2], " ") == "2RECV_F0 2RECV_F0x2<0 2F0 2B0 2SEND_B0>0 2SEND_B0");
  // Malformed forms, each located.
  const std::string head = std::string(kHead) + "stages: 3\nschedule:\n  actions:\n    0: 0F0 ";
  CHECK(error_of(head + "0SEND_F0>0\n") ==
        "t.yaml:6:20: error: rank 0: '0SEND_F0>0': SEND_F must send to a stage later than 0 (activations flow from "
        "earlier stages to later ones)");
  CHECK(error_of(head + "0RECV_B0<0\n") ==
        "t.yaml:6:20: error: rank 0: '0RECV_B0<0': RECV_B must receive from a stage later than 0 (gradients flow from "
        "later stages to earlier ones)");
  CHECK(error_of(head + "0SEND_F0>\n") == "t.yaml:6:20: error: rank 0: '0SEND_F0>': a stage id follows '>'");
  CHECK(error_of(head + "0SEND_F0>99999999999\n") ==
        "t.yaml:6:20: error: rank 0: '0SEND_F0>99999999999': stage id after '>' is too large");
  CHECK(error_of(head + "0F0>2\n") ==
        "t.yaml:6:15: error: rank 0: '0F0>2': only SEND and RECV actions name another stage ('>' or '<'), not F");
  CHECK(error_of(head + "0SEND_F0>2x2\n") == "t.yaml:6:22: error: rank 0: '0SEND_F0>2x2': unexpected 'x2' after the action");
}

TEST_CASE("all errors are collected before the loader gives up", "[spec]") {
  Diagnostics d;
  auto spec = parse("schedcheck: 1\nranks: 2\nmicrobatches: 1\nstages: 2\n"
                    "p2p: {latency: 3 fortnights, semantics: lazy}\n"
                    "memory: {activation_bytes: [1GiB]}\n"
                    "schedule:\n  actions:\n    0: 0F0 0F1 9B0\n    7: 1F0\n",
                    d);
  CHECK_FALSE(spec);
  CHECK(d.error_count() == 6);
  std::string out = all_lines(d);
  CHECK(out.find("t.yaml:5:16: error: p2p.latency") != std::string::npos);
  CHECK(out.find("t.yaml:5:41: error: p2p.semantics: unknown P2P semantics 'lazy'") != std::string::npos);
  CHECK(out.find("t.yaml:6:28: error: memory.activation_bytes lists 1 value but stages is 2") !=
        std::string::npos);
  CHECK(out.find("t.yaml:9:12: error: microbatch 1 of '0F1' is out of range") != std::string::npos);
  CHECK(out.find("t.yaml:9:16: error: stage 9 of '9B0' is out of range") != std::string::npos);
  CHECK(out.find("t.yaml:10:5: error: rank 7 is out of range") != std::string::npos);
  // Each error prints its source line and a caret.
  CHECK(out.find("    0: 0F0 0F1 9B0\n                 ^\n") != std::string::npos);
}

TEST_CASE("type and value errors name the key and what was found", "[spec]") {
  CHECK(error_of("schedcheck: 1\nranks: 0\n" + std::string(kActions)) ==
        "t.yaml:2:8: error: ranks must be at least 1, got 0");
  CHECK(error_of("schedcheck: 1\nranks: -3\n" + std::string(kActions)) ==
        "t.yaml:2:8: error: ranks must be at least 1, got -3");
  CHECK(error_of("schedcheck: 1\nranks: [2]\n" + std::string(kActions)) ==
        "t.yaml:2:8: error: ranks must be a whole number, got a list");
  CHECK(error_of("schedcheck: 1\nranks:\n" + std::string(kActions)) ==
        "t.yaml:2:1: error: ranks must be a whole number, got nothing");
  CHECK(error_of("schedcheck: 1\nranks: 99999999999999999999\n" + std::string(kActions)) ==
        "t.yaml:2:8: error: ranks is too large (at most 65536)");
  CHECK(error_of(std::string(kHead) + "name: {a: 1}\n" + kActions) ==
        "t.yaml:3:7: error: name must be a string, got a map");
  CHECK(error_of(std::string(kHead) + "costs: 1ms\n" + kActions) ==
        "t.yaml:3:8: error: costs must be a map of F, I, W and B, got '1ms'");
  CHECK(error_of(std::string(kHead) + "p2p: {bandwidth: 50GB}\n" + kActions) ==
        "t.yaml:3:18: error: p2p.bandwidth: '50GB': a bandwidth is bytes per second; write 50GB/s");
  CHECK(error_of(std::string(kHead) + "costs: {F: [1ms, fast], B: 1ms}\n" + kActions) ==
        "t.yaml:3:18: error: costs.F[1]: 'fast' is not a duration; write a number with a unit, as "
        "in 1.5ms");
  CHECK(error_of(std::string(kHead) + "latency: 1ms\n" + kActions) ==
        "t.yaml:3:1: error: unknown key 'latency'; 'latency' belongs in p2p");
  CHECK(error_of(std::string(kHead) + "schedule:\n  actions: {0: 0F0, 0: 0B0}\n") ==
        "t.yaml:4:21: error: duplicate rank 0 in schedule.actions (first given at line 4)");
  CHECK(error_of(std::string(kHead) + "schedule:\n  actions: {r0: 0F0}\n") ==
        "t.yaml:4:13: error: a rank in schedule.actions must be a whole number, got 'r0'");
  CHECK(error_of(std::string(kHead) + "schedule:\n  actions: {0: {a: 0F0}}\n") ==
        "t.yaml:4:16: error: rank 0: actions must be a string or a list of strings, got a map");
  CHECK(error_of(std::string(kHead) + "schedule:\n  actions: {0: \"\"}\n") ==
        "t.yaml:3:1: error: the schedule has no actions");
  CHECK(error_of(std::string(kHead) + "schedule:\n  actions: {0: 0F0}\n  format: compute_only\n") ==
        "t.yaml:5:3: error: schedule.format applies only to schedule.csv");
}

TEST_CASE("file-level problems are errors at the start of the file", "[spec]") {
  Diagnostics d;
  std::string missing = test::source_path("specs/invalid/no-such-spec.yaml");
  CHECK_FALSE(load_yaml_spec(missing, d));
  CHECK(first_line(d, "") == missing + ":1:1: error: cannot read the spec: no such file");

  CHECK(error_of("# only a comment\n") ==
        "t.yaml:1:1: error: the spec is empty; it needs at least schedcheck: 1, ranks and schedule");
  CHECK(error_of("just a string\n") ==
        "t.yaml:1:1: error: a spec must be a map of keys (schedcheck, ranks, schedule, ...), got "
        "'just a string'");
  CHECK(error_of(std::string(kHead) + kActions + "---\nranks: 3\n") ==
        "t.yaml:7:1: error: a spec file holds one YAML document; remove everything from here on");
  // A leading document marker is fine.
  Diagnostics d2;
  CHECK(parse(std::string("--- # v1\n") + kHead + kActions, d2));
  CHECK(error_of("null\n") ==
        "t.yaml:1:1: error: the spec is empty; it needs at least schedcheck: 1, ranks and schedule");
  CHECK(error_of("schedcheck: 1\nranks: *nowhere\n") ==
        "t.yaml:2:8: error: invalid YAML: the referenced anchor is not defined");
  CHECK(error_of("schedcheck: 1\n\tranks: 2\n") .find("t.yaml:2:1: error: invalid YAML") == 0);
  CHECK(error_of(std::string("schedcheck: 1\nname: a\0b\n", 22)) ==
        "t.yaml:2:8: error: the spec is not text: it holds a NUL byte");
}

TEST_CASE("junk input gives an error quickly instead of hanging or crashing", "[spec]") {
  std::mt19937 rng(12345);
  const size_t kSize = 10 * 1000 * 1000;
  std::vector<std::string> junk;
  {
    std::string bytes(kSize, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng() & 0xff);
    junk.push_back(std::move(bytes));
  }
  {
    const std::string alphabet = "{}[],:-?&*!|>'\"#% \n\tab01";
    std::string text(kSize, ' ');
    for (auto& c : text) c = alphabet[rng() % alphabet.size()];
    junk.push_back(std::move(text));
  }
  junk.push_back(std::string(kSize, '['));
  junk.push_back(std::string(kSize / 2, '{') + std::string(kSize / 2, '}'));
  {
    // Valid YAML that is not a spec: a large map yaml-cpp reads slowly, so kept to 2 MB.
    std::string lines;
    while (lines.size() < kSize / 5) lines += "key: value\n";
    junk.push_back(std::move(lines));
  }
  for (size_t i = 0; i < junk.size(); ++i) {
    INFO("junk case " << i);
    Diagnostics d;
    auto t0 = std::chrono::steady_clock::now();
    auto spec = parse_yaml_spec("junk.yaml", junk[i], d);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK_FALSE(spec);
    CHECK(d.has_errors());
    CHECK(d.error_count() <= 100);
    CHECK(s < 20.0);
  }
}

TEST_CASE("mutated specs never crash and fail only with diagnostics", "[spec]") {
  std::string base = test::read_file(test::source_path("specs/valid/zbv-pp2-buffered.yaml"));
  REQUIRE(!base.empty());
  const std::string alphabet = "{}[],:-'\"#&*!|> \n\tF0123456789BIWms";
  std::mt19937 rng(7);
  int loaded = 0, rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string text = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: text.erase(pos, 1 + rng() % 8); break;
        default: text.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
      }
    }
    Diagnostics d;
    std::optional<PipelineSpec> spec;
    REQUIRE_NOTHROW(spec = parse_yaml_spec("m.yaml", text, d));
    if (spec) {
      ++loaded;
      CHECK_FALSE(d.has_errors());
      CHECK(static_cast<int32_t>(spec->actions.size()) == spec->ranks);
      CHECK(static_cast<int32_t>(spec->stage_to_rank.size()) == spec->stages);
      CHECK(static_cast<int32_t>(spec->costs.f_s.size()) == spec->stages);
    } else {
      ++rejected;
      CHECK(d.has_errors());
    }
  }
  CHECK(loaded > 0);
  CHECK(rejected > 0);
}

TEST_CASE("a flood of errors is capped with a note", "[spec]") {
  std::string text = "schedcheck: 1\nranks: 1\n";
  for (int i = 0; i < 500; ++i) text += "k" + std::to_string(i) + ": 1\n";
  text += "schedule: {actions: {0: 0F0}}\n";
  Diagnostics d;
  CHECK_FALSE(parse(text, d));
  CHECK(d.error_count() == 100);
  REQUIRE(!d.all().empty());
  CHECK(d.all().back().severity == Severity::kNote);
  CHECK(d.all().back().message == "400 more errors are not shown");
}
