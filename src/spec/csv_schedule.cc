// PyTorch pipelining schedule CSV: a strict reader, a byte-compatible writer, and the bare-CSV spec.
#include "spec/csv_schedule.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/concurrent.h"
#include "support/huge_pages.h"
#include "support/units.h"

namespace sc {

namespace {

// At most this many errors are reported per file; then one note says the rest were not checked.
constexpr size_t kMaxErrorsPerFile = 20;
// From this size on, a file's rows are read on two threads.
constexpr size_t kConcurrentReadBytes = size_t{4} << 20;
// From this size on, reading a CSV faults in the heap its program will take (prefault_heap):
// about kHeapBytesPerCsvByte bytes a byte of CSV, at most kMaxPrefaultBytes. Measured: verify of
// the comms CSV of 1F1B at p = 64, m = 8192 (34 MB, 3.1 M ops) peaks at 592 MB resident.
constexpr uintmax_t kPrefaultFromBytes = uintmax_t{4} << 20;
constexpr uintmax_t kHeapBytesPerCsvByte = 18;
constexpr uintmax_t kMaxPrefaultBytes = uintmax_t{1} << 30;
// Ranks without actions warned about one by one; a note counts the others.
constexpr size_t kMaxIdleRankWarnings = 8;
// A cell longer than this is shown abbreviated in messages.
constexpr size_t kMaxShownCell = 40;
// Ids beyond these are rejected by spec_from_csv (as in a YAML spec, pipeline_spec.h).
constexpr int32_t kMaxStages = kMaxSpecStages;
constexpr int32_t kMaxMicrobatches = kMaxSpecMicrobatches;

// Collects the diagnostics of one file and enforces the per-file cap.
class FileErrors {
 public:
  explicit FileErrors(Diagnostics& diags) : diags_(diags) {}

  // Reports an error; returns false once the cap is reached (the caller then stops).
  bool error(const SourceLoc& loc, std::string message) {
    if (count_ >= kMaxErrorsPerFile) {
      if (!capped_) {
        diags_.note(loc, fmt::format("too many errors, stopping after {}", kMaxErrorsPerFile));
        capped_ = true;
      }
      return false;
    }
    diags_.error(loc, std::move(message));
    ++count_;
    return true;
  }
  bool any() const { return count_ > 0 || capped_; }
  bool capped() const { return capped_; }

 private:
  Diagnostics& diags_;
  size_t count_ = 0;
  bool capped_ = false;
};

// True for a byte that cannot appear in a text schedule: NUL and other control characters
// except tab and line ends, DEL, and every byte >= 0x80 (the grammar is ASCII).
bool is_binary_byte(unsigned char c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return c < 0x20 || c >= 0x7f;
}

// True when the 8 bytes at `p` are all printable ASCII, 0x20 to 0x7e (none is binary, none a
// line end). Word-at-a-time tests from Anderson's "Bit Twiddling Hacks" (hasless, haszero):
// a byte below 0x20, a byte equal to 0x7f, or a byte with its high bit set.
bool all_printable(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  const uint64_t below_space = (w - kOnes * 0x20) & ~w & kHigh;
  const uint64_t x = w ^ (kOnes * 0x7f);
  const uint64_t del = (x - kOnes) & ~x & kHigh;
  return ((w & kHigh) | below_space | del) == 0;
}

// Shortens a long cell for messages: "0F0xxxxxxxx..." (the message still points at the column).
std::string shown_cell(std::string_view cell) {
  if (cell.size() <= kMaxShownCell) return std::string(cell);
  return fmt::format("{}...", cell.substr(0, kMaxShownCell));
}

// parse_step quotes the token (and parts of it) in its message; abbreviate every quoted part
// longer than kMaxShownCell so a huge cell does not make a huge message.
std::string shorten_message(const std::string& message) {
  if (message.size() <= 3 * kMaxShownCell) return message;
  std::string out;
  size_t pos = 0;
  while (pos < message.size()) {
    size_t open = message.find('\'', pos);
    size_t close = open == std::string::npos ? open : message.find('\'', open + 1);
    if (close == std::string::npos) break;
    out.append(message, pos, open + 1 - pos);
    out += shown_cell(std::string_view(message).substr(open + 1, close - open - 1));
    out += '\'';
    pos = close + 1;
  }
  if (pos < message.size()) out.append(message, pos, std::string::npos);
  return out;
}

void note_ids(CsvSchedule& out, const Action& a) {
  if (a.stage > out.max_stage) out.max_stage = a.stage;
  if (a.microbatch > out.max_microbatch) out.max_microbatch = a.microbatch;
}

constexpr std::string_view kPipelinesHeader = "# schedcheck: pipelines ";

// True when a comment line is meant as a schedcheck directive: after its '#' (spaces allowed)
// "schedcheck" in any case, then a ':' or the word "pipeline..." (spaces allowed). Prose that
// names the tool ("# schedcheck gen 1f1b wrote this") stays a comment.
bool names_schedcheck(std::string_view line) {
  auto skip_spaces = [&](size_t i) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    return i;
  };
  auto word_at = [&](size_t i, std::string_view word) {
    if (line.size() - i < word.size()) return false;
    for (size_t k = 0; k < word.size(); ++k)
      if (std::tolower(static_cast<unsigned char>(line[i + k])) != word[k]) return false;
    return true;
  };
  size_t i = skip_spaces(1);
  if (!word_at(i, "schedcheck")) return false;
  i = skip_spaces(i + std::string_view("schedcheck").size());
  return (i < line.size() && line[i] == ':') || word_at(i, "pipeline");
}

// Reads a comment line; "# schedcheck: pipelines 0,4" sets the pipeline starts. Returns false
// (with an error) for a malformed pipelines line, a second one, or any other line naming
// schedcheck: read as a plain comment, a mistyped directive would verify the schedule as one
// pipeline without a word.
bool parse_header(std::string_view line, SourceLoc loc, CsvSchedule& out, Diagnostics& diags) {
  if (!names_schedcheck(line)) return true;  // a plain comment
  if (line.substr(0, kPipelinesHeader.size()) != kPipelinesHeader) {
    diags.error(loc, fmt::format("'{}': not a schedcheck directive; the one directive is the pipelines line, "
                                 "written exactly '# schedcheck: pipelines 0,4' (the first stage of each pipeline)",
                                 shown_cell(line)));
    return false;
  }
  if (out.pipelines_loc.valid()) {
    diags.error(loc, fmt::format("a second pipelines line; the first is at line {}", out.pipelines_loc.line));
    return false;
  }
  std::vector<int32_t> starts;
  std::string_view list = line.substr(kPipelinesHeader.size());
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int32_t v = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v < 0 || (!starts.empty() && v <= starts.back())) {
      diags.error(loc, fmt::format("'{}': the pipelines line lists the first stage of each pipeline, ascending from 0, "
                                   "as in '# schedcheck: pipelines 0,4'",
                                   shown_cell(line)));
      return false;
    }
    starts.push_back(v);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  if (starts.empty() || starts.front() != 0) {
    diags.error(loc, fmt::format("'{}': the first pipeline starts at stage 0", shown_cell(line)));
    return false;
  }
  out.pipeline_starts = std::move(starts);
  out.pipelines_loc = loc;
  return true;
}

// Parses one line (one rank) into `row`. Returns false when the error cap was reached.
bool parse_row(std::string_view line, int32_t file, int32_t line_no, CsvSchedule& out,
               std::vector<Step>& row, FileErrors& errors, SourceLoc& first_p2p) {
  if (line.empty()) return true;  // a blank line: a rank without actions
  // One step a cell that holds something (a BATCH cell adds its members): sized once, where
  // growing by doubling left a third of the row's bytes unused on large schedules. Idle cells
  // (",,") hold no step: counting every comma once reserved 40 bytes per byte of a file of
  // idle cells (a 20 MB one took 800 MB).
  size_t cells = 0;
  for (size_t i = 0; i < line.size(); ++i) cells += line[i] != ',' && (i == 0 || line[i - 1] == ',');
  row.reserve(row.size() + cells);
  // One step read: its ids, whether it makes the file a comms CSV, then the row.
  auto take = [&](const Step& st) {
    note_ids(out, st.first);
    if (st.second) note_ids(out, *st.second);
    // A SEND or RECV makes the file a compute_comms one; a collective (schedcheck's own cell,
    // which neither of PyTorch's formats holds) is a communication action too.
    if (is_p2p(st.first.kind)) out.format = CsvFormat::kComputeComms;
    if ((is_p2p(st.first.kind) || is_collective(st.first.kind)) && !first_p2p.valid()) first_p2p = st.loc;
    row.push_back(st);
  };
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    size_t end = comma == std::string_view::npos ? line.size() : comma;
    std::string_view cell = line.substr(start, end - start);
    SourceLoc loc{file, line_no, static_cast<int32_t>(start + 1)};
    if (std::optional<Step> plain = parse_plain_step(cell, loc)) {  // most cells: "0F3", "2SEND_B1"
      take(*plain);
    } else if (size_t quote = cell.find('"'); quote != std::string_view::npos) {
      SourceLoc at{file, line_no, static_cast<int32_t>(start + quote + 1)};
      if (!errors.error(at, fmt::format("'{}': quoted cells are not accepted; write the action "
                                        "without quotes, as in 0F3",
                                        shown_cell(cell))))
        return false;
    } else if (cell.find_first_not_of(" \t") == std::string_view::npos) {
      ++out.idle_cells;
    } else {
      ParsedStep p = parse_step(cell, loc);
      if (!p.step) {
        SourceLoc at{file, line_no, static_cast<int32_t>(start + p.error_offset + 1)};
        if (!errors.error(at, shorten_message(p.error))) return false;
      } else if (p.batch.empty()) {
        take(*p.step);
      } else {
        for (const Step& st : p.batch) take(st);  // a BATCH group: every member
      }
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return true;
}

std::string_view format_name(CsvFormat f) {
  return f == CsvFormat::kComputeOnly ? "compute_only" : "compute_comms";
}

// Parses a --placement value against the schedule's shape. `file` is the registered text.
std::optional<std::vector<int32_t>> parse_placement(const std::string& text, int32_t file,
                                                    int32_t ranks, int32_t stages,
                                                    Diagnostics& diags) {
  SourceLoc at{file, 1, 1};
  if (text == "loop") return loop_placement(ranks, stages);
  if (text == "v") {
    if (stages != 2 * ranks) {
      diags.error(at, fmt::format("placement v needs 2 stages per rank (stages = 2 * ranks), but "
                                  "the schedule has {} stages on {} ranks",
                                  stages, ranks));
      return std::nullopt;
    }
    return v_placement(ranks, stages);
  }
  if (text.empty() || (text[0] < '0' || text[0] > '9')) {
    diags.error(at, fmt::format("unknown placement '{}' (expected loop, v, or the rank of each "
                                "stage, as in 0,1,1,0)",
                                text));
    return std::nullopt;
  }
  std::vector<int32_t> out;
  bool ok = true;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    size_t end = comma == std::string::npos ? text.size() : comma;
    std::string_view item = std::string_view(text).substr(start, end - start);
    SourceLoc loc{file, 1, static_cast<int32_t>(start + 1)};
    int64_t v = 0;
    bool digits = !item.empty();
    for (char c : item) {
      if (c < '0' || c > '9') {
        digits = false;
        break;
      }
      if (v <= ranks) v = v * 10 + (c - '0');  // saturates once out of range: no overflow
    }
    if (!digits) {
      diags.error(loc, fmt::format("'{}': a placement entry is the rank of a stage, a "
                                   "non-negative decimal number",
                                   item));
      ok = false;
    } else if (v >= ranks) {
      diags.error(loc, fmt::format("placement puts stage {} on rank {}, but the schedule has {} "
                                   "ranks",
                                   out.size(), item, ranks));
      ok = false;
    }
    out.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (ok && static_cast<int32_t>(out.size()) != stages) {
    diags.error(at, fmt::format("placement names {} stages, but the schedule has {} stages",
                                out.size(), stages));
    ok = false;
  }
  if (!ok) return std::nullopt;
  return out;
}

// The location of the first action naming `stage` (for messages about it).
SourceLoc find_stage(const std::vector<std::vector<Step>>& actions, int32_t stage) {
  for (const auto& row : actions)
    for (const auto& st : row)
      if (st.first.stage == stage || (st.second && st.second->stage == stage)) return st.loc;
  return {};
}

// The location of the first action naming microbatch `mb`.
SourceLoc find_microbatch(const std::vector<std::vector<Step>>& actions, int32_t mb) {
  for (const auto& row : actions)
    for (const auto& st : row)
      if (st.first.microbatch == mb || (st.second && st.second->microbatch == mb)) return st.loc;
  return {};
}

}  // namespace

std::optional<CsvSchedule> parse_csv_schedule(const std::string& name, std::string text,
                                              Diagnostics& diags,
                                              std::optional<CsvFormat> expected) {
  CsvSchedule out;
  // Python's csv reader, which PyTorch's _load_csv reads with, ends a row at "\n", "\r\n" or a
  // lone "\r" (old Mac line endings): a lone one reads as "\n" here, so rows and line numbers
  // are the reader's. Only this copy changes, never the file.
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n')) text[i] = '\n';
  out.file = register_source(name, std::move(text));
  SourceLoc file_start{out.file, 1, 1};
  // The registered text itself (nothing registers another source while this parses).
  std::string_view body = source_text(out.file);
  if (body.empty()) {
    diags.error(file_start, "empty schedule file");
    return std::nullopt;
  }

  // A UTF-8 byte order mark (spreadsheet exports write one): Python's csv reader keeps it in
  // the first cell, whose action string _Action.from_str then refuses; so does this reader.
  if (body.substr(0, 3) == "\xEF\xBB\xBF") {
    diags.error(file_start, "the file starts with a UTF-8 byte order mark, which PyTorch's reader keeps in the "
                            "first cell and then refuses as an action; save it without one");
    return std::nullopt;
  }
  // Binary junk: report the first offending byte once and stop; a binary file would otherwise
  // produce an error for every cell.
  int32_t line_no = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    // Eight printable bytes at once (no line end among them either); a word with any other byte
    // goes byte by byte below.
    while (i + 8 <= body.size() && all_printable(body.data() + i)) i += 8;
    if (i == body.size()) break;
    unsigned char c = static_cast<unsigned char>(body[i]);
    if (c == '\n') {
      ++line_no;
      line_start = i + 1;
      continue;
    }
    if (is_binary_byte(c)) {
      SourceLoc at{out.file, line_no, static_cast<int32_t>(i - line_start + 1)};
      diags.error(at, fmt::format("unexpected byte 0x{:02x}: a schedule file is plain text", c));
      return std::nullopt;
    }
  }

  SourceLoc first_p2p;
  std::string_view rest = body;
  // The last line's terminator ends the file; every line before it is a row, a blank one
  // included (a rank without actions), as Python's csv reader gives PyTorch's _load_csv rows.
  if (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  if (!rest.empty() && rest.back() == '\r') rest.remove_suffix(1);
  constexpr size_t kMaxRanks = kMaxSpecRanks;  // as the YAML spec's ranks
  line_no = 1;
  int32_t first_row_line = 1;
  std::vector<std::string_view> rows;  // one per rank, at line first_row_line + index
  // With the final terminator gone, every remaining line break separates two rows.
  bool more = !rest.empty();
  while (more) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    more = nl != std::string_view::npos;
    rest = more ? rest.substr(nl + 1) : std::string_view();
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (rows.empty() && !line.empty() && line[0] == '#') {  // a comment before the first rank
      if (!parse_header(line, SourceLoc{out.file, line_no, 1}, out, diags)) return std::nullopt;
      first_row_line = ++line_no;
      continue;
    }
    if (rows.size() == kMaxRanks) {
      diags.error(SourceLoc{out.file, line_no, 1}, fmt::format("more than {} rows: schedcheck supports at most {} ranks",
                                                               kMaxRanks, kMaxRanks));
      return std::nullopt;
    }
    rows.push_back(line);
    ++line_no;
  }
  out.actions.resize(rows.size());
  out.first_row_line = first_row_line;
  // Rows [from, to) into out.actions, counting into `part`; false once the error cap is reached.
  auto parse_rows = [&](size_t from, size_t to, CsvSchedule& part, FileErrors& errors, SourceLoc& p2p) {
    for (size_t r = from; r < to; ++r)
      if (!parse_row(rows[r], out.file, first_row_line + static_cast<int32_t>(r), part, out.actions[r], errors, p2p))
        return false;
    return true;
  };
  // A large file is read in two halves at once. Group names and tensor lists are numbered in
  // the order they are first read (intern_group_name, intern_tensor_names), so a file naming
  // any ('@' or '[') is read in one pass, as is a file with an error: its diagnostics, capped
  // per file, come from the one pass below in file order.
  bool parsed = false;
  if (body.size() >= kConcurrentReadBytes && rows.size() >= 2 &&
      body.find('@') == std::string_view::npos && body.find('[') == std::string_view::npos) {  // memchr each
    size_t half = 0;  // the first row of the second half: about half of the bytes before it
    for (size_t bytes = 0; half < rows.size() && bytes < body.size() / 2; ++half) bytes += rows[half].size() + 1;
    half = std::clamp<size_t>(half, 1, rows.size() - 1);
    CsvSchedule second;
    Diagnostics first_diags, second_diags;
    FileErrors first_errors(first_diags), second_errors(second_diags);
    SourceLoc first_half_p2p, second_half_p2p;
    run_concurrently(
        true, [&] { parse_rows(0, half, out, first_errors, first_half_p2p); },
        [&] { parse_rows(half, rows.size(), second, second_errors, second_half_p2p); });
    if (!first_errors.any() && !second_errors.any()) {
      out.max_stage = std::max(out.max_stage, second.max_stage);
      out.max_microbatch = std::max(out.max_microbatch, second.max_microbatch);
      out.idle_cells += second.idle_cells;
      if (second.format == CsvFormat::kComputeComms) out.format = CsvFormat::kComputeComms;
      first_p2p = first_half_p2p.valid() ? first_half_p2p : second_half_p2p;
      parsed = true;
    } else {
      for (auto& row : out.actions) std::vector<Step>().swap(row);
      out.max_stage = out.max_microbatch = -1;
      out.idle_cells = 0;
      out.format = CsvFormat::kComputeOnly;
    }
  }
  if (!parsed) {
    FileErrors errors(diags);
    parse_rows(0, rows.size(), out, errors, first_p2p);
    if (errors.any()) return std::nullopt;
  }

  bool any_action = false;
  for (const auto& row : out.actions) any_action = any_action || !row.empty();
  if (!any_action) {
    diags.error(file_start, "schedule file has no actions (every cell is empty)");
    return std::nullopt;
  }
  // A warning per rank without actions, the first kMaxIdleRankWarnings of them; one note counts
  // the rest (a file of blank lines would otherwise print one per line).
  size_t idle_ranks = 0, last_idle = 0;
  for (size_t r = 0; r < out.actions.size(); ++r) {
    if (!out.actions[r].empty()) continue;
    last_idle = r;
    if (++idle_ranks <= kMaxIdleRankWarnings)
      diags.warning(SourceLoc{out.file, static_cast<int32_t>(r) + first_row_line, 1}, fmt::format("rank {} has no actions", r));
  }
  if (idle_ranks > kMaxIdleRankWarnings)
    diags.note(SourceLoc{out.file, static_cast<int32_t>(last_idle) + first_row_line, 1},
               fmt::format("{} more ranks have no actions, the last of them rank {}", idle_ranks - kMaxIdleRankWarnings,
                           last_idle));

  if (expected == CsvFormat::kComputeOnly && out.format == CsvFormat::kComputeOnly && first_p2p.valid()) {
    diags.error(first_p2p, "expected a compute_only schedule, but the file has a collective, which neither of "
                           "PyTorch's schedule formats holds (its _load_csv refuses the cell)");
    return std::nullopt;
  }
  if (expected && *expected != out.format) {
    if (*expected == CsvFormat::kComputeOnly)
      diags.error(first_p2p, fmt::format("expected a compute_only schedule, but the file has "
                                         "communication actions ({} format)",
                                         format_name(out.format)));
    else
      diags.error(file_start, "expected a compute_comms schedule, but the file has no SEND or "
                              "RECV action");
    return std::nullopt;
  }
  return out;
}

std::optional<CsvSchedule> read_csv_schedule(const std::string& path, Diagnostics& diags,
                                             std::optional<CsvFormat> expected, SourceLoc from) {
  // A large CSV becomes a large program: its heap is faulted in beside the reading and the
  // building (prefault_heap).
  std::error_code size_error;
  const uintmax_t size = std::filesystem::file_size(path, size_error);
  if (!size_error && size >= kPrefaultFromBytes)
    prefault_heap(static_cast<size_t>(std::min<uintmax_t>(size * kHeapBytesPerCsvByte, kMaxPrefaultBytes)));
  std::string text, why;
  if (!read_input_file(path, &text, &why)) {
    SourceLoc at = from.valid() ? from : SourceLoc{register_source(path, ""), 0, 0};
    diags.error(at, fmt::format("cannot read '{}': {}", path, why));
    return std::nullopt;
  }
  return parse_csv_schedule(path, std::move(text), diags, expected);
}

std::string csv_pipelines_header(const std::vector<int32_t>& pipeline_starts) {
  if (pipeline_starts.size() <= 1) return "";
  return fmt::format("{}{}\n", kPipelinesHeader, fmt::join(pipeline_starts, ","));
}

std::string crlf_lines(std::string_view text) {
  std::string out;
  out.reserve(text.size() + static_cast<size_t>(std::count(text.begin(), text.end(), '\n')));
  for (char c : text) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

std::string write_csv_schedule(const std::vector<std::vector<Step>>& actions) {
  std::string out;
  for (const auto& row : actions) out += format_steps(row, ",") + '\n';
  return out;
}

namespace {
std::optional<PipelineSpec> spec_of_csv(const std::string& path, std::optional<CsvSchedule> csv, Diagnostics& diags,
                                        const std::optional<std::string>& placement);
}  // namespace

std::optional<PipelineSpec> spec_from_csv(const std::string& path, Diagnostics& diags,
                                          const std::optional<std::string>& placement) {
  return spec_of_csv(path, read_csv_schedule(path, diags), diags, placement);
}

std::optional<PipelineSpec> spec_from_csv_text(const std::string& name, const std::string& text, Diagnostics& diags,
                                               const std::optional<std::string>& placement) {
  return spec_of_csv(name, parse_csv_schedule(name, text, diags), diags, placement);
}

namespace {
std::optional<PipelineSpec> spec_of_csv(const std::string& path, std::optional<CsvSchedule> csv, Diagnostics& diags,
                                        const std::optional<std::string>& placement) {
  if (!csv) return std::nullopt;
  PipelineSpec spec;
  spec.name = std::filesystem::path(path).stem().string();
  spec.path = path;
  spec.ranks = static_cast<int32_t>(csv->actions.size());
  spec.locs.file = SourceLoc{csv->file, 1, 1};
  spec.locs.schedule = spec.locs.file;
  for (int32_t r = 0; r < spec.ranks; ++r) spec.locs.rank_lists.push_back(SourceLoc{csv->file, csv->first_row_line + r, 1});
  if (csv->max_stage >= kMaxStages) {  // compared before any + 1: ids reach 2^31 - 1
    diags.error(find_stage(csv->actions, csv->max_stage),
                fmt::format("stage id {} is out of range (at most {} stages)", csv->max_stage,
                            kMaxStages));
    return std::nullopt;
  }
  // Rows are ranks, as PyTorch's _load_csv reads them, and every rank of a pipeline holds at
  // least one stage (PyTorch's schedules place num_stages = ranks x stages per rank): without a
  // declared placement, a rank whose row names no stage still has its loop stage, so an idle row
  // leaves that stage's forwards and backwards missing (a structure finding at the row) rather
  // than a schedule on fewer ranks.
  spec.stages = placement ? csv->max_stage + 1 : std::max(csv->max_stage + 1, spec.ranks);
  if (csv->max_microbatch < 0) {
    diags.error(spec.locs.file, "no action names a microbatch (the schedule has no F, I, W or B)");
    return std::nullopt;
  }
  if (csv->max_microbatch >= kMaxMicrobatches) {
    diags.error(find_microbatch(csv->actions, csv->max_microbatch),
                fmt::format("microbatch id {} is out of range (at most {} microbatches)", csv->max_microbatch,
                            kMaxMicrobatches));
    return std::nullopt;
  }
  spec.microbatches = csv->max_microbatch + 1;
  spec.actions = std::move(csv->actions);
  if (csv->pipeline_starts.back() >= spec.stages) {
    diags.error(csv->pipelines_loc, fmt::format("a pipeline starts at stage {}, but the schedule has {}",
                                                csv->pipeline_starts.back(), format_count(spec.stages, "stage")));
    return std::nullopt;
  }
  spec.pipeline_starts = csv->pipeline_starts;

  if (placement) {
    int32_t file = register_source("--placement", *placement);
    spec.locs.placement = SourceLoc{file, 1, 1};
    std::optional<std::vector<int32_t>> map =
        parse_placement(*placement, file, spec.ranks, spec.stages, diags);
    if (!map) return std::nullopt;
    spec.stage_to_rank = std::move(*map);
    spec.placement = placement_name(spec.stage_to_rank, spec.ranks);
    spec.placement_declared = true;
  } else {
    // Read off the lists; a stage no list names falls back to the loop placement.
    spec.stage_to_rank = infer_placement(spec.actions, spec.stages);
    for (int32_t s = 0; s < spec.stages; ++s)
      if (spec.stage_to_rank[s] < 0) spec.stage_to_rank[s] = s % spec.ranks;
    std::string name = placement_name(spec.stage_to_rank, spec.ranks);
    // pipeline_spec.h: "inferred:loop", "inferred:v", or plain "inferred" for any other map.
    spec.placement = name == "explicit" ? "inferred" : "inferred:" + name;
    spec.placement_declared = false;
  }
  apply_unit_defaults(spec);
  return spec;
}

}  // namespace

}  // namespace sc
