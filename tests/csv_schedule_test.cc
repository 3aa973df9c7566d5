// Tests of the PyTorch schedule CSV reader, writer and bare-CSV spec (src/spec/csv_schedule.h).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "catch.h"
#include "cli_util.h"
#include "spec/csv_schedule.h"
#include "test_util.h"

namespace sc {
namespace {

// "file:line:col: message" of the i-th diagnostic.
std::string diag_at(const Diagnostics& diags, size_t i) {
  REQUIRE(diags.all().size() > i);
  const Diagnostic& d = diags.all()[i];
  return format_loc(d.loc) + ": " + d.message;
}

size_t count_overlaps(const CsvSchedule& csv) {
  size_t n = 0;
  for (const auto& row : csv.actions)
    for (const auto& st : row) n += st.is_overlap() ? 1 : 0;
  return n;
}

std::string corpus_file(const std::string& name) {
  std::string dir = test::corpus_dir();
  return dir.empty() ? std::string() : dir + "/pytorch/" + name;
}

// Writes `text` to a fresh file under the temporary folder and returns its path.
std::string temp_file(const std::string& name, const std::string& text) {
  std::filesystem::path p = std::filesystem::temp_directory_path() / ("schedcheck_csv_test_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

}  // namespace

TEST_CASE("a small compute schedule is read with idle cells dropped and counted", "[csv]") {
  Diagnostics diags;
  auto csv = parse_csv_schedule("s.csv", "0F0,,0B0\r\n,1F0,1B0\r\n", diags);
  REQUIRE(csv);
  CHECK_FALSE(diags.has_errors());
  REQUIRE(csv->actions.size() == 2);
  REQUIRE(csv->actions[0].size() == 2);
  REQUIRE(csv->actions[1].size() == 2);
  CHECK(csv->idle_cells == 2);
  CHECK(csv->format == CsvFormat::kComputeOnly);
  CHECK(csv->max_stage == 1);
  CHECK(csv->max_microbatch == 0);
  CHECK(csv->actions[0][1].first == Action{ActionKind::kB, 0, 0});
  // Each step keeps its cell's 1-based line and column.
  CHECK(csv->actions[0][1].loc.line == 1);
  CHECK(csv->actions[0][1].loc.col == 6);
  CHECK(csv->actions[1][0].loc.line == 2);
  CHECK(csv->actions[1][0].loc.col == 2);
}

TEST_CASE("a CSV cell may hold a BATCH group of one op, which writes back as it was read", "[csv][batch]") {
  Diagnostics diags;
  const std::string text = "0F0,(0SEND_F0)BATCH,(0RECV_B0)BATCH,0B0\n(1RECV_F0)BATCH,1F0,1B0,(1SEND_B0)BATCH\n";
  auto csv = parse_csv_schedule("ones.csv", text, diags);
  REQUIRE(csv);
  CHECK_FALSE(diags.has_errors());
  CHECK(csv->format == CsvFormat::kComputeComms);
  REQUIRE(csv->actions[0].size() == 4);
  CHECK(csv->actions[0][1].in_batch);
  CHECK_FALSE(csv->actions[0][1].batched_with_next);
  CHECK(csv->actions[0][2].in_batch);
  CHECK(csv->actions[0][1].loc.col == 6);  // the member, inside its parentheses
  CHECK(write_csv_schedule(csv->actions) == text);
  // An empty group is an error at its cell.
  Diagnostics bad;
  CHECK_FALSE(parse_csv_schedule("empty.csv", "0F0,()BATCH\n", bad));
  CHECK(diag_at(bad, 0) == "empty.csv:1:6: '()BATCH': a BATCH group needs at least one SEND or RECV action");
}

TEST_CASE("the trailing newline is optional", "[csv]") {
  Diagnostics d1, d2;
  auto a = parse_csv_schedule("a.csv", "0F0,0B0\n1F0,1B0", d1);
  auto b = parse_csv_schedule("b.csv", "0F0,0B0\n1F0,1B0\n", d2);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->actions.size() == 2);
  CHECK(b->actions.size() == 2);
  CHECK(write_csv_schedule(a->actions) == "0F0,0B0\n1F0,1B0\n");
}

TEST_CASE("a schedule with SEND or RECV is detected as compute_comms", "[csv]") {
  Diagnostics diags;
  auto csv = parse_csv_schedule("c.csv", "0F0,0SEND_F0\n1RECV_F0,1F0\n", diags);
  REQUIRE(csv);
  CHECK(csv->format == CsvFormat::kComputeComms);

  Diagnostics d2;
  auto bad = parse_csv_schedule("c2.csv", "0F0,0SEND_F0\n1RECV_F0,1F0\n", d2, CsvFormat::kComputeOnly);
  CHECK_FALSE(bad);
  CHECK(diag_at(d2, 0) == "c2.csv:1:5: expected a compute_only schedule, but the file has "
                          "communication actions (compute_comms format)");

  Diagnostics d3;
  auto bad2 = parse_csv_schedule("c3.csv", "0F0\n", d3, CsvFormat::kComputeComms);
  CHECK_FALSE(bad2);
  CHECK(diag_at(d3, 0) == "c3.csv:1:1: expected a compute_comms schedule, but the file has no "
                          "SEND or RECV action");
}

TEST_CASE("the four corpus schedules parse with their shapes", "[csv]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("corpus folder not found; skipping");
  }
  struct Expect {
    std::string file;
    CsvFormat format;
    size_t ranks;
    int32_t stages, microbatches;
    size_t idle, overlaps;
    std::vector<size_t> row_sizes;
    std::string placement;
    std::vector<int32_t> stage_to_rank;
  };
  // Shapes from ../shared/corpus/README.md (PyTorch and torchtitan test artifacts).
  std::vector<Expect> cases = {
      {"dualpipev_4rank_10mb.csv", CsvFormat::kComputeOnly, 4, 8, 10, 0, 41, {38, 36, 34, 33},
       "inferred:v", {0, 1, 2, 3, 3, 2, 1, 0}},
      {"zb1p_2rank_2stagep_compute.csv", CsvFormat::kComputeOnly, 2, 4, 8, 2, 0, {48, 48},
       "inferred:loop", {0, 1, 0, 1}},
      {"zb1p_2rank_2stagep_comms.csv", CsvFormat::kComputeComms, 2, 4, 8, 0, 0, {80, 96},
       "inferred:loop", {0, 1, 0, 1}},
      {"torchtitan_custom_schedule.csv", CsvFormat::kComputeOnly, 2, 4, 8, 0, 0, {48, 48},
       "inferred:loop", {0, 1, 0, 1}},
  };
  for (const auto& c : cases) {
    INFO(c.file);
    Diagnostics diags;
    auto csv = read_csv_schedule(corpus_file(c.file), diags);
    REQUIRE(csv);
    CHECK(diags.all().empty());
    CHECK(csv->format == c.format);
    REQUIRE(csv->actions.size() == c.ranks);
    CHECK(csv->max_stage + 1 == c.stages);
    CHECK(csv->max_microbatch + 1 == c.microbatches);
    CHECK(csv->idle_cells == c.idle);
    CHECK(count_overlaps(*csv) == c.overlaps);
    for (size_t r = 0; r < c.ranks; ++r) CHECK(csv->actions[r].size() == c.row_sizes[r]);

    Diagnostics sd;
    auto spec = spec_from_csv(corpus_file(c.file), sd, std::nullopt);
    REQUIRE(spec);
    CHECK(spec->ranks == static_cast<int32_t>(c.ranks));
    CHECK(spec->stages == c.stages);
    CHECK(spec->microbatches == c.microbatches);
    CHECK(spec->placement == c.placement);
    CHECK_FALSE(spec->placement_declared);
    CHECK(spec->stage_to_rank == c.stage_to_rank);
    CHECK(spec->name == c.file.substr(0, c.file.size() - 4));
    CHECK(spec->costs.f_s.size() == static_cast<size_t>(c.stages));
    CHECK(spec->has_comms() == (c.format == CsvFormat::kComputeComms));
  }
}

TEST_CASE("an overlapped pair in dualpipev keeps both parts", "[csv]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("corpus folder not found; skipping");
  }
  Diagnostics diags;
  auto csv = read_csv_schedule(corpus_file("dualpipev_4rank_10mb.csv"), diags);
  REQUIRE(csv);
  // Rank 0, cell 18 (0-based 17): (0F7;7B3)OVERLAP_F_B.
  const Step& st = csv->actions[0][17];
  REQUIRE(st.is_overlap());
  CHECK(st.first == Action{ActionKind::kF, 0, 7});
  CHECK(*st.second == Action{ActionKind::kB, 7, 3});
  CHECK(format_step(st) == "(0F7;7B3)OVERLAP_F_B");
  size_t per_rank[4] = {0, 0, 0, 0};
  for (size_t r = 0; r < 4; ++r)
    for (const auto& s : csv->actions[r]) per_rank[r] += s.is_overlap() ? 1 : 0;
  CHECK(per_rank[0] == 9);
  CHECK(per_rank[1] == 10);
  CHECK(per_rank[2] == 11);
  CHECK(per_rank[3] == 11);
}

TEST_CASE("reading then writing the comms corpus file gives back its bytes", "[csv]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("corpus folder not found; skipping");
  }
  for (const char* name : {"zb1p_2rank_2stagep_comms.csv", "dualpipev_4rank_10mb.csv",
                           "torchtitan_custom_schedule.csv"}) {
    INFO(name);
    std::string original = test::read_file(corpus_file(name));
    REQUIRE_FALSE(original.empty());
    Diagnostics diags;
    auto csv = parse_csv_schedule(name, original, diags);
    REQUIRE(csv);
    CHECK(write_csv_schedule(csv->actions) == original);
  }
}

TEST_CASE("trailing junk after an action is an error at the junk", "[csv]") {
  Diagnostics diags;
  auto csv = parse_csv_schedule("junk.csv", "0F0,0B0\n1F0,0F0xyz\n", diags);
  CHECK_FALSE(csv);
  REQUIRE(diags.error_count() == 1);
  CHECK(diag_at(diags, 0) == "junk.csv:2:8: '0F0xyz': unexpected 'xyz' after the action");
  // The printed diagnostic shows the line with a caret under the junk.
  CHECK(format_diagnostic(diags.all()[0]) ==
        "junk.csv:2:8: error: '0F0xyz': unexpected 'xyz' after the action\n"
        "  1F0,0F0xyz\n"
        "         ^\n");
}

TEST_CASE("the printed line shows every byte outside well-formed UTF-8 as '?'", "[csv]") {
  // Latin-1, a lone continuation byte, an overlong form, a surrogate and a cut sequence go out
  // as '?', so the message stays valid UTF-8; a well-formed character is kept.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0F0,\xe9t\xe9", "0F0,?t?"},
      {"0F0,\x80", "0F0,?"},
      {"0F0,\xc0\xaf", "0F0,??"},
      {"0F0,\xed\xa0\x80", "0F0,???"},
      {"0F0,\xe2\x82", "0F0,??"},
      {"0F0,\xc3\xa9\xe2\x82\xac", "0F0,\xc3\xa9\xe2\x82\xac"},
  };
  for (const auto& [row, shown] : cases) {
    Diagnostics diags;
    CHECK_FALSE(parse_csv_schedule("u.csv", row + "\n", diags));
    REQUIRE(diags.all().size() == 1);
    const std::string printed = format_diagnostic(diags.all()[0]);
    CHECK(printed.find("\n  " + shown + "\n      ^\n") != std::string::npos);
  }
}

TEST_CASE("ranks without actions are warned about eight at most, and a note counts the rest", "[csv]") {
  // 0F0,0B0 then 20,000 blank lines: ranks 1-20000 have no actions.
  Diagnostics diags;
  auto csv = parse_csv_schedule("blank-rows.csv", "0F0,0B0" + std::string(20000, '\n'), diags);
  REQUIRE(csv);
  CHECK(csv->actions.size() == 20000);
  REQUIRE(diags.all().size() == 9);
  CHECK(diag_at(diags, 0) == "blank-rows.csv:2:1: rank 1 has no actions");
  CHECK(diag_at(diags, 7) == "blank-rows.csv:9:1: rank 8 has no actions");
  CHECK(diag_at(diags, 8) == "blank-rows.csv:20000:1: 19991 more ranks have no actions, the last of them rank 19999");
  // Printing them reads each line from an index: linear in the file, not in lines x diagnostics.
  std::string printed;
  for (const Diagnostic& d : diags.all()) printed += format_diagnostic(d);
  CHECK(printed.find("blank-rows.csv:20000:1: note: 19991 more ranks") != std::string::npos);
}

TEST_CASE("the legacy BW token is rejected", "[csv]") {
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("bw.csv", "0F0,2BW0\n", diags));
  REQUIRE(diags.error_count() == 1);
  CHECK(diag_at(diags, 0) ==
        "bw.csv:1:6: '2BW0': the legacy token BW is not accepted; write B (full backward) or I and W");
}

TEST_CASE("a compute action without a microbatch is rejected", "[csv]") {
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("mb.csv", "0F0\n1F0,2F\n", diags));
  REQUIRE(diags.error_count() == 1);
  CHECK(diag_at(diags, 0) == "mb.csv:2:7: '2F': F needs a microbatch id, as in 2F0");
}

TEST_CASE("every bad cell is reported, not only the first", "[csv]") {
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("many.csv", "0F0,0Q0\n1F,1F0\n", diags));
  REQUIRE(diags.error_count() == 2);
  CHECK(diag_at(diags, 0) == "many.csv:1:6: '0Q0': unknown action kind 'Q'");
  CHECK(diag_at(diags, 1) == "many.csv:2:3: '1F': F needs a microbatch id, as in 1F0");
}

TEST_CASE("an empty file is an error", "[csv]") {
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("empty.csv", "", diags));
  REQUIRE(diags.all().size() == 1);
  CHECK(diag_at(diags, 0) == "empty.csv:1:1: empty schedule file");
}

TEST_CASE("a file whose cells are all empty has no actions", "[csv]") {
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("idle.csv", ",,\n,\n", diags));
  REQUIRE(diags.all().size() == 1);
  CHECK(diag_at(diags, 0) == "idle.csv:1:1: schedule file has no actions (every cell is empty)");
}

TEST_CASE("binary junk is reported once at its first byte", "[csv]") {
  std::string text = "0F0,1F0\n0F1,";
  text += '\0';
  for (int i = 0; i < 50000; ++i) text += static_cast<char>(i * 37 % 256);
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("bin.csv", text, diags));
  REQUIRE(diags.all().size() == 1);
  CHECK(diag_at(diags, 0) == "bin.csv:2:5: unexpected byte 0x00: a schedule file is plain text");

  Diagnostics d2;
  CHECK_FALSE(parse_csv_schedule("utf.csv", "0F0,\xc3\xa9\n", d2));
  REQUIRE(d2.all().size() == 1);
  CHECK(diag_at(d2, 0) == "utf.csv:1:5: unexpected byte 0xc3: a schedule file is plain text");
}

TEST_CASE("every byte outside printable ASCII is found at its column, wherever it falls in a word", "[csv]") {
  // The reader tests eight bytes at a time and looks closer only at a word with another byte:
  // each such byte, at each of the 23 columns of the second line (three words), is found there.
  const std::string line = "0F1,1F1,0F2,1F2,0F3,1F3";
  int checked = 0;
  for (int b = 0; b < 256; ++b) {
    if (b == '\t' || b == '\n' || b == '\r' || (b >= 0x20 && b < 0x7f)) continue;  // a CR ends a row
    for (size_t col = 0; col < line.size(); ++col) {
      std::string text = "0F0,1F0\n" + line + "\n";
      text[8 + col] = static_cast<char>(b);
      Diagnostics diags;
      CHECK_FALSE(parse_csv_schedule("w.csv", text, diags));
      REQUIRE(diags.all().size() == 1);
      CHECK(diag_at(diags, 0) ==
            fmt::format("w.csv:2:{}: unexpected byte 0x{:02x}: a schedule file is plain text", col + 1, b));
      ++checked;
    }
  }
  CHECK(checked == (256 - 95 - 3) * static_cast<int>(line.size()));  // all but printable, tab, CR and LF
}

TEST_CASE("a lone carriage return ends a row, as Python's csv reader (PyTorch's _load_csv) splits rows", "[csv]") {
  // Old Mac line endings: "\r" alone. Python's csv reader gives three rows; the reader once
  // refused the file ("unexpected byte 0x0d").
  Diagnostics diags;
  auto csv = parse_csv_schedule("cr.csv", "0F0,0B0\r1F0,1B0\r\n2F0,2B0\r", diags);
  REQUIRE(csv);
  REQUIRE(csv->actions.size() == 3);
  CHECK(format_steps(csv->actions[1], " ") == "1F0 1B0");
  CHECK(format_steps(csv->actions[2], " ") == "2F0 2B0");
  // A bad cell after a lone CR is located on the row Python counts.
  Diagnostics bad;
  CHECK_FALSE(parse_csv_schedule("cr-bad.csv", "0F0\r1F0,1Q0\r", bad));
  REQUIRE(bad.all().size() == 1);
  CHECK(diag_at(bad, 0) == "cr-bad.csv:2:6: '1Q0': unknown action kind 'Q'");
}

TEST_CASE("a comment naming schedcheck must be the pipelines line, written exactly, once", "[csv]") {
  const std::string rows = "0F0,0B0\n";
  // Mistyped: each would otherwise be a plain comment, and a DualPipe CSV one pipeline.
  for (const std::string line : {"# schedcheck: pipeline 0,4", "#schedcheck: pipelines 0,4", "# Schedcheck: pipelines 0,4",
                                 "# schedcheck:pipelines 0,4", "# schedcheck: foo 1", "# schedcheck: pipelines",
                                 "# schedcheck pipelines 0,4", "# SCHEDCHECK : pipelines 0,4"}) {
    Diagnostics diags;
    INFO(line);
    CHECK_FALSE(parse_csv_schedule("d.csv", line + "\n" + rows, diags));
    REQUIRE(diags.all().size() == 1);
    CHECK(diag_at(diags, 0) == "d.csv:1:1: '" + line +
                                   "': not a schedcheck directive; the one directive is the pipelines line, written "
                                   "exactly '# schedcheck: pipelines 0,4' (the first stage of each pipeline)");
  }
  Diagnostics twice;
  CHECK_FALSE(parse_csv_schedule("t.csv", "# schedcheck: pipelines 0\n# schedcheck: pipelines 0\n" + rows, twice));
  REQUIRE(twice.all().size() == 1);
  CHECK(diag_at(twice, 0) == "t.csv:2:1: a second pipelines line; the first is at line 1");
  // Other comments are comments.
  Diagnostics plain;
  auto csv = parse_csv_schedule(
      "p.csv", "# written by hand: schedcheck reads this\n#\n# schedcheck gen 1f1b wrote the rest\n#schedcheck\n" + rows,
      plain);
  REQUIRE(csv);
  CHECK(plain.all().empty());
  CHECK(csv->pipeline_starts == std::vector<int32_t>{0});
  CHECK(csv->actions.size() == 1);
}

TEST_CASE("a quoted cell is rejected", "[csv]") {
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("q.csv", "0F0,\"1F0\"\n", diags));
  REQUIRE(diags.error_count() == 1);
  CHECK(diag_at(diags, 0) ==
        "q.csv:1:5: '\"1F0\"': quoted cells are not accepted; write the action without quotes, as in 0F3");
}

TEST_CASE("a row of 10^5 cells parses in linear time", "[csv]") {
  constexpr int kCols = 100000;
  std::string text;
  text.reserve(kCols * 8);
  for (int i = 0; i < kCols; ++i) {
    if (i) text += ',';
    text += "0F" + std::to_string(i);
  }
  text += '\n';
  for (int i = 0; i < kCols; ++i) {
    if (i) text += ',';
    text += "1F" + std::to_string(i);
  }
  auto start = std::chrono::steady_clock::now();
  Diagnostics diags;
  auto csv = parse_csv_schedule("wide.csv", text, diags);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(csv);
  REQUIRE(csv->actions.size() == 2);
  REQUIRE(csv->actions[0].size() == kCols);
  REQUIRE(csv->actions[1].size() == kCols);
  CHECK(csv->max_microbatch == kCols - 1);
  CHECK(csv->max_stage == 1);
  CHECK(csv->actions[1][kCols - 1].first == Action{ActionKind::kF, 1, kCols - 1});
  // Column of the last cell: 10 one-digit + 90 two-digit + ... ids, each cell "1F<id>," wide.
  CHECK(csv->actions[1][kCols - 1].loc.col == static_cast<int32_t>(text.size() - text.rfind('\n') - 7));
  CHECK(write_csv_schedule(csv->actions) == text + "\n");
  CHECK(seconds < 2.0);  // about 10 ms when linear; a quadratic reader takes minutes
}

// A file of 4 MiB or more is read in two halves at once (csv_schedule.cc); what it gives must
// be what one pass gives: every step, its location, the counts and the detected format.
TEST_CASE("a large file read in two halves gives what one pass gives", "[csv]") {
  constexpr int kRows = 8, kCols = 90000;
  std::string text;
  for (int r = 0; r < kRows; ++r) {
    for (int i = 0; i < kCols; ++i) {
      if (i) text += ',';
      if (i % 1000 == 999) continue;  // an idle cell
      // Only the last row sends, so only the second half sees the comms format.
      text += (r == kRows - 1 && i % 2 ? std::to_string(r) + "SEND_F" : std::to_string(r) + "F") + std::to_string(i);
    }
    text += '\n';
  }
  REQUIRE(text.size() >= (size_t{4} << 20));
  Diagnostics diags;
  auto csv = parse_csv_schedule("large.csv", text, diags);
  REQUIRE(csv);
  CHECK_FALSE(diags.has_errors());
  REQUIRE(csv->actions.size() == kRows);
  for (int r = 0; r < kRows; ++r) CHECK(csv->actions[r].size() == kCols - kCols / 1000);
  CHECK(csv->idle_cells == static_cast<size_t>(kRows * (kCols / 1000)));
  CHECK(csv->max_stage == kRows - 1);
  CHECK(csv->max_microbatch == kCols - 2);
  CHECK(csv->format == CsvFormat::kComputeComms);
  const Step& last = csv->actions[kRows - 1].back();  // "7F89998", the last cell before an idle one
  CHECK(last.first == Action{ActionKind::kF, kRows - 1, kCols - 2});
  CHECK(last.loc.line == kRows);
  const size_t row_start = text.rfind('\n', text.size() - 2) + 1;
  CHECK(last.loc.col == static_cast<int32_t>(text.rfind("7F89998") - row_start + 1));
  CHECK(csv->actions[3][5].loc.line == 4);
  CHECK(write_csv_schedule(csv->actions) == [&] {  // idle cells are not kept
    std::string expected;
    for (int r = 0; r < kRows; ++r) {
      for (int i = 0, n = 0; i < kCols; ++i) {
        if (i % 1000 == 999) continue;
        if (n++) expected += ',';
        expected += (r == kRows - 1 && i % 2 ? std::to_string(r) + "SEND_F" : std::to_string(r) + "F") + std::to_string(i);
      }
      expected += '\n';
    }
    return expected;
  }());

  SECTION("errors in both halves are reported in file order, as one pass reports them") {
    std::string bad = text;
    bad.replace(bad.find("6F100,"), 5, "6X100");  // row 7, second half
    bad.replace(bad.find("1F7,"), 3, "1F7y");     // row 2, first half
    Diagnostics d;
    CHECK_FALSE(parse_csv_schedule("large-bad.csv", bad, d));
    REQUIRE(d.error_count() == 2);
    CHECK(diag_at(d, 0).rfind("large-bad.csv:2:", 0) == 0);
    CHECK(diag_at(d, 0).find("'1F7y'") != std::string::npos);
    CHECK(diag_at(d, 1).rfind("large-bad.csv:7:", 0) == 0);
    CHECK(diag_at(d, 1).find("unknown action kind 'X'") != std::string::npos);
  }
}

TEST_CASE("a 10^5-cell row of junk stops after a bounded number of errors", "[csv]") {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "x,";
  auto start = std::chrono::steady_clock::now();
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("junkrow.csv", text, diags));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(diags.error_count() == 20);
  REQUIRE(diags.all().size() == 21);
  CHECK(diag_at(diags, 0) == "junkrow.csv:1:1: 'x': an action starts with its stage id, as in 0F3");
  CHECK(diag_at(diags, 19) == "junkrow.csv:1:39: 'x': an action starts with its stage id, as in 0F3");
  CHECK(diags.all()[20].severity == Severity::kNote);
  CHECK(diag_at(diags, 20) == "junkrow.csv:1:41: too many errors, stopping after 20");
  CHECK(seconds < 2.0);
}

TEST_CASE("a very long bad cell is abbreviated in the message", "[csv]") {
  std::string cell = "0F0" + std::string(5000, 'y');
  Diagnostics diags;
  CHECK_FALSE(parse_csv_schedule("long.csv", cell + "\n", diags));
  REQUIRE(diags.error_count() == 1);
  CHECK(diag_at(diags, 0) == "long.csv:1:4: '0F0" + std::string(37, 'y') + "...': unexpected '" +
                                 std::string(40, 'y') + "...' after the action");
}

TEST_CASE("a blank line is a rank without actions, with a warning", "[csv]") {
  Diagnostics diags;
  auto csv = parse_csv_schedule("blank.csv", "0F0\n\n2F0\n", diags);
  REQUIRE(csv);
  CHECK(csv->actions.size() == 3);
  CHECK(csv->actions[1].empty());
  REQUIRE(diags.all().size() == 1);
  CHECK(diags.all()[0].severity == Severity::kWarning);
  CHECK(diag_at(diags, 0) == "blank.csv:2:1: rank 1 has no actions");
}

TEST_CASE("a declared placement is taken as given", "[csv]") {
  std::string path = temp_file("placement.csv", "0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n");
  {
    Diagnostics diags;
    auto spec = spec_from_csv(path, diags, std::string("loop"));
    REQUIRE(spec);
    CHECK(spec->placement == "loop");
    CHECK(spec->placement_declared);
    CHECK(spec->stage_to_rank == std::vector<int32_t>{0, 1, 0, 1});
    CHECK(spec->name == "schedcheck_csv_test_placement");
    CHECK(spec->path == path);
  }
  {
    // Contradicts the lists (stage 2 runs on rank 0); a later structure pass reports that.
    Diagnostics diags;
    auto spec = spec_from_csv(path, diags, std::string("v"));
    REQUIRE(spec);
    CHECK(spec->placement == "v");
    CHECK(spec->stage_to_rank == std::vector<int32_t>{0, 1, 1, 0});
    CHECK_FALSE(diags.has_errors());
  }
  {
    Diagnostics diags;
    auto spec = spec_from_csv(path, diags, std::string("1,0,1,0"));
    REQUIRE(spec);
    CHECK(spec->placement == "explicit");
    CHECK(spec->stage_to_rank == std::vector<int32_t>{1, 0, 1, 0});
  }
  {
    Diagnostics diags;
    CHECK_FALSE(spec_from_csv(path, diags, std::string("0,1,2,0")));
    REQUIRE(diags.error_count() == 1);
    CHECK(diag_at(diags, 0) == "--placement:1:5: placement puts stage 2 on rank 2, but the schedule has 2 ranks");
  }
  {
    Diagnostics diags;
    CHECK_FALSE(spec_from_csv(path, diags, std::string("0,1")));
    CHECK(diag_at(diags, 0) == "--placement:1:1: placement names 2 stages, but the schedule has 4 stages");
  }
  {
    Diagnostics diags;
    CHECK_FALSE(spec_from_csv(path, diags, std::string("0,99999999999x,1,0")));
    CHECK(diag_at(diags, 0) == "--placement:1:3: '99999999999x': a placement entry is the rank of a "
                               "stage, a non-negative decimal number");
  }
  {
    Diagnostics diags;
    CHECK_FALSE(spec_from_csv(path, diags, std::string("0,x,1,0")));
    CHECK(diag_at(diags, 0) ==
          "--placement:1:3: 'x': a placement entry is the rank of a stage, a non-negative decimal number");
  }
  {
    Diagnostics diags;
    CHECK_FALSE(spec_from_csv(path, diags, std::string("looped")));
    CHECK(diag_at(diags, 0) == "--placement:1:1: unknown placement 'looped' (expected loop, v, or the "
                               "rank of each stage, as in 0,1,1,0)");
  }
  std::filesystem::remove(path);
}

TEST_CASE("v placement needs two stages per rank", "[csv]") {
  std::string path = temp_file("v3.csv", "0F0,2F0\n1F0\n");
  Diagnostics diags;
  CHECK_FALSE(spec_from_csv(path, diags, std::string("v")));
  CHECK(diag_at(diags, 0) == "--placement:1:1: placement v needs 2 stages per rank (stages = 2 * "
                             "ranks), but the schedule has 3 stages on 2 ranks");
  std::filesystem::remove(path);
}

TEST_CASE("an inferred placement falls back to loop for stages no rank names", "[csv]") {
  // Stage 1 appears nowhere: it maps to rank 1 % 2; the map is then the loop one.
  std::string path = temp_file("gap.csv", "0F0,2F0\n3F0\n");
  Diagnostics diags;
  auto spec = spec_from_csv(path, diags, std::nullopt);
  REQUIRE(spec);
  CHECK(spec->stage_to_rank == std::vector<int32_t>{0, 1, 0, 1});
  CHECK(spec->placement == "inferred:loop");
  std::filesystem::remove(path);

  std::string odd = temp_file("odd.csv", "0F0,1F0\n2F0\n");
  Diagnostics d2;
  auto s2 = spec_from_csv(odd, d2, std::nullopt);
  REQUIRE(s2);
  CHECK(s2->stage_to_rank == std::vector<int32_t>{0, 0, 1});
  CHECK(s2->placement == "inferred");
  std::filesystem::remove(odd);
}

TEST_CASE("an unreadable file is an error at the referring location", "[csv]") {
  Diagnostics diags;
  CHECK_FALSE(read_csv_schedule("/nonexistent/dir/x.csv", diags));
  REQUIRE(diags.error_count() == 1);
  CHECK(diags.all()[0].message.rfind("cannot read '/nonexistent/dir/x.csv'", 0) == 0);
}

}  // namespace sc

TEST_CASE("an idle CSV row is a rank whose stage is missing, as PyTorch reads rows as ranks", "[csv]") {
  // PyTorch's pipelining tests expect a schedule with a rank that has no actions to be refused:
  // rows are ranks, and rank 1's loop stage has no forward or backward.
  sc::test::CliRun r = sc::test::run_schedcheck("verify '" + sc::temp_file("idle-rank.csv", "0F0,0B0\n,\n") + "'");
  CHECK(r.exit_code == 12);
  CHECK(r.out.find("2 ranks, 2 stages") != std::string::npos);
  CHECK(r.out.find("(stage, microbatch) pairs with no forward F: 1F0") != std::string::npos);
  CHECK(r.out.find("(stage, microbatch) pairs with no backward (B, or I and W): 1B0") != std::string::npos);
  CHECK(r.out.find("idle-rank.csv:2:1: warning: rank 1 has no actions") != std::string::npos);
  // The missing actions are located at the idle row, where they would go, not at the file's start.
  CHECK(r.out.find("idle-rank.csv:2:1: 1F0") != std::string::npos);
  CHECK(r.out.find("idle-rank.csv:1:1: 1F0") == std::string::npos);
  // The final line break is not a row: one rank, which holds; a blank line before it is one.
  sc::test::CliRun one = sc::test::run_schedcheck("verify '" + sc::temp_file("one-rank.csv", "0F0,0B0\n") + "'");
  CHECK(one.exit_code == 0);
  CHECK(one.out.find("1 rank, 1 stage") != std::string::npos);
  sc::test::CliRun blank = sc::test::run_schedcheck("verify '" + sc::temp_file("blank-rank.csv", "0F0,0B0\n\n") + "'");
  CHECK(blank.exit_code == 12);
  CHECK(blank.out.find("2 ranks, 2 stages") != std::string::npos);
}
