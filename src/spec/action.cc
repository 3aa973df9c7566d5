#include "spec/action.h"

#include <array>
#include <cctype>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "spec/pipeline_spec.h"
#include "support/units.h"

namespace sc {

namespace {
constexpr std::array<std::string_view, kNumActionKinds> kTokens = {
    "F", "I", "W", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD",
    "ALL_REDUCE", "BROADCAST", "ALL_GATHER", "REDUCE_SCATTER", "BARRIER", "ALL_TO_ALL"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads a decimal id at `pos`; returns -1 when there is none, -2 on overflow.
int64_t read_id(std::string_view s, size_t& pos) {
  size_t start = pos;
  int64_t v = 0;
  while (pos < s.size() && is_digit(s[pos])) {
    v = v * 10 + (s[pos] - '0');
    if (v > std::numeric_limits<int32_t>::max()) {
      while (pos < s.size() && is_digit(s[pos])) ++pos;
      return -2;
    }
    ++pos;
  }
  return pos == start ? -1 : v;
}

ParsedStep fail(std::string msg, size_t offset) {
  ParsedStep p;
  p.error = std::move(msg);
  p.error_offset = static_cast<int32_t>(offset);
  return p;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Reads the tensors of a SEND/RECV at `pos` of `s` (at 'x' followed by a digit, or at '[') into
// `step`; on success moves `pos` past them and returns "", else returns the error and sets `pos`
// to where it starts.
std::string parse_tensors(std::string_view s, size_t& pos, Step& step) {
  if (s[pos] == 'x') {
    size_t at = ++pos;
    int64_t n = read_id(s, pos);
    if (n < 1 || n > kMaxBoundaryTensors) {
      size_t end = at;
      while (end < s.size() && is_digit(s[end])) ++end;  // the digits as written (n is -2 past int range)
      pos = at;
      return fmt::format("'{}': a tensor count is 1 to {}, got {}", s, kMaxBoundaryTensors,
                         n == -2 ? std::string(s.substr(at, end - at)) : std::to_string(n));
    }
    step.tensors = static_cast<uint16_t>(n);
    return "";
  }
  const size_t open = pos;
  const size_t close = s.find(']', open);
  if (close == std::string_view::npos) return fmt::format("'{}': a tensor list ends with ']', as in [act,mask]", s);
  std::vector<std::string> names;
  size_t i = open + 1;
  while (true) {
    while (i < close && (s[i] == ' ' || s[i] == '\t')) ++i;
    const size_t start = i;
    while (i < close && is_name_char(s[i])) ++i;
    std::string_view name = s.substr(start, i - start);
    if (name.empty() || !is_name_start(name[0])) {
      pos = start;
      return name.empty() && close == open + 1
                 ? fmt::format("'{}': a tensor list names at least one tensor, as in [act,mask]", s)
                 : fmt::format("'{}': a tensor name starts with a letter or '_' and holds letters, digits and '_'", s);
    }
    for (const std::string& seen : names)
      if (seen == name) {
        pos = start;
        return fmt::format("'{}': tensor '{}' is listed twice", s, name);
      }
    if (names.size() == static_cast<size_t>(kMaxBoundaryTensors)) {
      pos = start;
      return fmt::format("'{}': at most {} tensors per action", s, kMaxBoundaryTensors);
    }
    names.emplace_back(name);
    while (i < close && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i == close) break;
    if (s[i] != ',') {
      pos = i;
      return fmt::format("'{}': tensor names are separated by ',', as in [act,mask]", s);
    }
    ++i;
  }
  step.tensors = static_cast<uint16_t>(names.size());
  step.tensor_names = intern_tensor_names(std::move(names));
  pos = close + 1;
  return "";
}

// Reads the other stage of a skipping SEND/RECV at `pos` of `s` (at '>' after a SEND, '<' after
// a RECV) into step.peer_stage (-1 when it names the neighbour); on success moves `pos` to the
// end of the id and returns "", else returns the error and leaves `pos` where it starts.
std::string parse_peer(std::string_view s, size_t& pos, Step& step) {
  const Action& a = step.first;
  const bool send = is_send(a.kind);
  const char mark = send ? '>' : '<';
  if (!is_p2p(a.kind))
    return fmt::format("'{}': only SEND and RECV actions name another stage ('>' or '<'), not {}", s,
                       kind_token(a.kind));
  // Activations flow to later stages, gradients to earlier ones.
  const bool later = a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvB;
  if (s[pos] != mark)
    return fmt::format("'{}': a {} names the stage it {} after '{}', as in {}{}{}{}{}", s, send ? "send" : "receive",
                       send ? "sends to" : "receives from", mark, a.stage, kind_token(a.kind), a.microbatch, mark,
                       later ? a.stage + 2 : std::max(a.stage - 2, 0));
  size_t id_pos = pos + 1;
  const int64_t peer = read_id(s, id_pos);
  if (peer == -1) return fmt::format("'{}': a stage id follows '{}'", s, mark);
  if (peer == -2 || peer >= kMaxSpecStages) return fmt::format("'{}': stage id after '{}' is too large", s, mark);
  if (later ? peer <= a.stage : peer >= a.stage)
    return fmt::format("'{}': {} must {} a stage {} than {} ({} flow {})", s, kind_token(a.kind),
                       send ? "send to" : "receive from", later ? "later" : "earlier", a.stage,
                       a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF ? "activations" : "gradients",
                       a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF ? "from earlier stages to later ones"
                                                                                    : "from later stages to earlier ones");
  step.peer_stage = peer == neighbour_stage(a) ? -1 : static_cast<int32_t>(peer);
  pos = id_pos;
  return "";
}

bool is_group_char(char c) { return is_name_char(c) || c == '-'; }

// Parses a collective `<KIND>@<group>` occupying all of `s` (s starts with a letter); `base` is
// s's offset in the token.
ParsedStep parse_collective(std::string_view s, size_t base, const SourceLoc& loc) {
  size_t pos = 0;
  while (pos < s.size() && (std::isupper(static_cast<unsigned char>(s[pos])) || s[pos] == '_')) ++pos;
  const std::string_view word = s.substr(0, pos);
  int kind = -1;
  for (int k = 0; k < kNumActionKinds; ++k)
    if (kTokens[k] == word && is_collective(static_cast<ActionKind>(k))) kind = k;
  if (kind < 0 && s.find('@') == std::string_view::npos)
    return fail(fmt::format("'{}': an action starts with its stage id, as in 0F3", s), base);
  if (kind < 0)
    return fail(fmt::format("'{}': an action starts with its stage id, as in 0F3, or is a collective over a group: "
                            "ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL or BARRIER, as in "
                            "ALL_REDUCE@world",
                            s),
                base);
  if (pos >= s.size() || s[pos] != '@')
    return fail(fmt::format("'{}': a collective names its group after '@', as in {}@world", s, word), base + pos);
  const size_t name_pos = ++pos;
  if (pos >= s.size() || !is_name_start(s[pos]))
    return fail(fmt::format("'{}': a group name starts with a letter or '_', as in {}@world", s, word), base + pos);
  while (pos < s.size() && is_group_char(s[pos])) ++pos;
  const size_t name_end = pos;
  int32_t size_index = -1;
  if (pos < s.size() && s[pos] == ':') {  // this rank's size of the collective: ALL_TO_ALL@ep:3MiB
    const std::string_view size = s.substr(pos + 1);
    if (kind == static_cast<int>(ActionKind::kBarrier))
      return fail(fmt::format("'{}': a barrier carries no data, so it takes no size", s), base + pos);
    std::string why;
    const std::optional<int64_t> bytes = parse_bytes(size, &why);
    if (!bytes || *bytes < 0)
      return fail(fmt::format("'{}': the size after ':' is this rank's bytes of the collective, as in {}@ep:3MiB{}", s,
                              word, why.empty() ? std::string() : " (" + why + ")"),
                  base + pos + 1);
    size_index = intern_collective_bytes(*bytes);
    pos = s.size();
  }
  if (pos != s.size())
    return fail(fmt::format("'{}': unexpected '{}' after the group name (names hold letters, digits, '_' and '-'{})", s,
                            s.substr(pos),
                            kind == static_cast<int>(ActionKind::kBarrier)
                                ? std::string()
                                : fmt::format("; a size follows ':', as in {}@ep:3MiB", word)),
                base + pos);
  if (name_end - name_pos > 64) return fail(fmt::format("'{}': a group name has at most 64 characters", s), base + name_pos);
  Action a;
  a.kind = static_cast<ActionKind>(kind);
  a.stage = -1;
  a.microbatch = -1;
  Step step{a, std::nullopt, loc};
  step.group = intern_group_name(s.substr(name_pos, name_end - name_pos));
  step.tensor_names = size_index;
  if (step.group < 0) return fail(fmt::format("'{}': more than {} distinct group names", s, kMaxGroupNames), base + name_pos);
  ParsedStep out;
  out.step = step;
  return out;
}

// Parses a simple (non-overlap) action occupying all of `s`; `base` is s's offset in the token.
ParsedStep parse_simple(std::string_view s, size_t base, const SourceLoc& loc) {
  size_t pos = 0;
  if (!s.empty() && is_name_start(s[0])) return parse_collective(s, base, loc);
  if (!s.empty() && (s[0] == '+' || s[0] == '-'))
    return fail(fmt::format("'{}': a stage id must be a non-negative decimal number", s), base);
  int64_t stage = read_id(s, pos);
  if (stage == -1) return fail(fmt::format("'{}': an action starts with its stage id, as in 0F3", s), base);
  if (stage == -2) return fail(fmt::format("'{}': stage id is too large", s), base);
  size_t kind_pos = pos;
  while (pos < s.size() && (std::isupper(static_cast<unsigned char>(s[pos])) || s[pos] == '_')) ++pos;
  std::string_view word = s.substr(kind_pos, pos - kind_pos);
  if (word.empty())
    return fail(fmt::format("'{}': expected an action kind (F, I, W, B, SEND_F, RECV_F, SEND_B, "
                            "RECV_B, UNSHARD, RESHARD, REDUCE_GRAD) after the stage id", s),
                base + kind_pos);
  if (word == "BW")
    return fail(fmt::format("'{}': the legacy token BW is not accepted; write B (full backward) "
                            "or I and W", s), base + kind_pos);
  int kind = -1;
  for (int k = 0; k < kNumActionKinds; ++k)
    if (kTokens[k] == word) kind = k;
  if (kind < 0)
    return fail(fmt::format("'{}': unknown action kind '{}'", s, word), base + kind_pos);
  // A collective has one grammar, parse_collective's: a stage id before it is not a
  // stage-prefixed collective but an error, as a collective without its group is.
  if (is_collective(static_cast<ActionKind>(kind)))
    return fail(fmt::format("'{}': a collective takes no stage id; it names its group after '@', as in {}@world", s,
                            word),
                base);
  // Refused here, before the id is stored: an Action holds stage ids below 2^23 only.
  if (stage >= kMaxSpecStages)
    return fail(fmt::format("stage id {} of '{}' is out of range (at most {} stages)", stage, s, kMaxSpecStages), base);
  Action a;
  a.kind = static_cast<ActionKind>(kind);
  a.stage = static_cast<int32_t>(stage);
  size_t mb_pos = pos;
  if (takes_microbatch(a.kind)) {
    if (pos < s.size() && (s[pos] == '+' || s[pos] == '-'))
      return fail(fmt::format("'{}': a microbatch id must be a non-negative decimal number", s), base + pos);
    int64_t mb = read_id(s, pos);
    if (mb == -1)
      return fail(fmt::format("'{}': {} needs a microbatch id, as in {}{}0", s, word, stage, word),
                  base + mb_pos);
    if (mb == -2) return fail(fmt::format("'{}': microbatch id is too large", s), base + mb_pos);
    a.microbatch = static_cast<int32_t>(mb);
  } else if (pos < s.size() && is_digit(s[pos])) {
    return fail(fmt::format("'{}': {} takes no microbatch id", s, word), base + pos);
  }
  Step step{a, std::nullopt, loc};
  if (pos < s.size() && (s[pos] == '[' || (s[pos] == 'x' && pos + 1 < s.size() && is_digit(s[pos + 1])))) {
    if (!is_p2p(a.kind))
      return fail(fmt::format("'{}': only SEND and RECV actions carry a tensor count or list, not {}", s, word),
                  base + pos);
    if (std::string err = parse_tensors(s, pos, step); !err.empty()) return fail(std::move(err), base + pos);
  } else if (pos < s.size() && s[pos] == 'x' && is_p2p(a.kind)) {
    return fail(fmt::format("'{}': a tensor count follows 'x', as in {}{}{}x2", s, stage, word, a.microbatch),
                base + pos + 1);
  }
  if (pos < s.size() && (s[pos] == '>' || s[pos] == '<')) {
    if (std::string err = parse_peer(s, pos, step); !err.empty()) return fail(std::move(err), base + pos);
  }
  if (pos != s.size())
    return fail(fmt::format("'{}': unexpected '{}' after the action", s, s.substr(pos)), base + pos);
  ParsedStep out;
  out.step = step;
  return out;
}
}  // namespace

namespace {
struct NameTable {
  std::vector<std::vector<std::string>> lists;
  std::map<std::vector<std::string>, int32_t> index;
};
NameTable& name_table() {
  static NameTable t;
  return t;
}
}  // namespace

int32_t intern_tensor_names(std::vector<std::string> names) {
  NameTable& t = name_table();
  auto [it, inserted] = t.index.try_emplace(names, static_cast<int32_t>(t.lists.size()));
  if (inserted) t.lists.push_back(std::move(names));
  return it->second;
}

const std::vector<std::string>& tensor_name_list(int32_t index) {
  static const std::vector<std::string> kNone;
  const NameTable& t = name_table();
  return index >= 0 && index < static_cast<int32_t>(t.lists.size()) ? t.lists[index] : kNone;
}

std::string format_tensors(const Step& s) {
  if (s.tensor_names >= 0) return fmt::format("[{}]", fmt::join(tensor_name_list(s.tensor_names), ","));
  return s.tensors > 1 ? fmt::format("x{}", s.tensors) : std::string();
}

std::string tensor_label(int32_t tensor_names, int32_t index) {
  const std::vector<std::string>& names = tensor_name_list(tensor_names);
  if (index >= 0 && index < static_cast<int32_t>(names.size())) return fmt::format("[{}]", names[index]);
  return fmt::format("[{}]", index);
}

std::vector<int64_t>& collective_sizes() {
  static std::vector<int64_t> sizes;
  return sizes;
}

// A size as the action notation writes it, without a blank and read back exactly: "3MiB",
// "512KiB", "1000".
std::string compact_bytes(int64_t bytes) {
  for (auto [unit, name] : {std::pair<int64_t, const char*>{int64_t{1} << 40, "TiB"}, {int64_t{1} << 30, "GiB"},
                            {int64_t{1} << 20, "MiB"}, {int64_t{1} << 10, "KiB"}})
    if (bytes >= unit && bytes % unit == 0) return fmt::format("{}{}", bytes / unit, name);
  return fmt::format("{}", bytes);
}

int32_t intern_collective_bytes(int64_t bytes) {
  std::vector<int64_t>& sizes = collective_sizes();
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] == bytes) return static_cast<int32_t>(i);
  sizes.push_back(bytes);
  return static_cast<int32_t>(sizes.size() - 1);
}

std::optional<int64_t> collective_bytes(const Step& s) {
  if (!is_collective(s.first.kind) || s.tensor_names < 0) return std::nullopt;
  const std::vector<int64_t>& sizes = collective_sizes();
  return s.tensor_names < static_cast<int32_t>(sizes.size()) ? std::optional<int64_t>(sizes[s.tensor_names]) : std::nullopt;
}

int32_t message_peer_stage(const Step& s) {
  const Action& a = s.first;
  if (!is_p2p(a.kind)) return -1;
  return s.peer_stage >= 0 ? s.peer_stage : neighbour_stage(a);
}

std::string format_peer(const Step& s) {
  if (s.peer_stage < 0 || !is_p2p(s.first.kind)) return {};
  return fmt::format("{}{}", is_send(s.first.kind) ? '>' : '<', s.peer_stage);
}

std::string format_step(const Step& s) {
  if (is_collective(s.first.kind)) {
    const std::optional<int64_t> size = collective_bytes(s);
    return fmt::format("{}@{}{}", kind_token(s.first.kind), group_name(s.group),
                       size ? ":" + compact_bytes(*size) : std::string());
  }
  if (!s.second) return format_action(s.first) + format_tensors(s) + format_peer(s);
  return fmt::format("({};{})OVERLAP_F_B", format_action(s.first), format_action(*s.second));
}

namespace {

// Parses `(a;b;...)BATCH` (`t` trimmed, starting at offset `lead` of the token).
ParsedStep parse_batch(std::string_view t, size_t lead, const SourceLoc& at) {
  std::string_view inner = t.substr(1, t.size() - 7);
  if (inner.empty()) return fail(fmt::format("'{}': a BATCH group needs at least one SEND or RECV action", t), lead + 1);
  ParsedStep out;
  size_t pos = 0;
  while (true) {
    size_t semi = inner.find(';', pos);
    std::string_view part = inner.substr(pos, semi == std::string_view::npos ? std::string_view::npos : semi - pos);
    ParsedStep p = parse_simple(part, lead + 1 + pos, at);
    if (!p.step) return p;
    if (!is_p2p(p.step->first.kind))
      return fail(fmt::format("'{}': a BATCH group holds only SEND and RECV actions, not {}", t,
                              format_action(p.step->first)),
                  lead + 1 + pos);
    for (const Step& s : out.batch)
      if (s.first == p.step->first && s.peer_stage == p.step->peer_stage)
        return fail(fmt::format("'{}': {} appears twice in one BATCH group", t, format_step(s)), lead + 1 + pos);
    Step s = *p.step;
    s.loc = at;
    if (at.col > 0) s.loc.col += static_cast<int32_t>(1 + pos);
    out.batch.push_back(s);
    if (semi == std::string_view::npos) break;
    pos = semi + 1;
  }
  // One action is a group of one: PyTorch's pipelining runtime posts every SEND/RECV action
  // through batch_isend_irecv, one call per action (docs/facts/p2p-semantics.md#groups-of-one).
  for (Step& s : out.batch) s.in_batch = true;
  for (size_t i = 0; i + 1 < out.batch.size(); ++i) out.batch[i].batched_with_next = true;
  out.step = out.batch.front();
  return out;
}

}  // namespace

std::string format_steps(const std::vector<Step>& row, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < row.size(); ++i) {
    if (i) out += sep;
    if (!row[i].is_batched()) {
      out += format_step(row[i]);
      continue;
    }
    out += '(';
    for (;; ++i) {
      out += format_action(row[i].first) + format_tensors(row[i]) + format_peer(row[i]);
      if (!row[i].batched_with_next || i + 1 == row.size()) break;
      out += ';';
    }
    out += ")BATCH";
  }
  return out;
}

size_t count_tokens(const std::vector<Step>& row) {
  size_t n = 0;
  for (const Step& s : row) n += !s.batched_with_next;
  return n;
}

std::optional<Step> parse_plain_step(std::string_view t, const SourceLoc& loc) {
  // <stage><kind><microbatch>, nothing around: stage below 10^6 (< kMaxSpecStages), microbatch
  // below 10^9 (parse_simple reads up to 2^31 - 1 and leaves the range to the spec).
  size_t pos = 0;
  int32_t stage = 0;
  while (pos < t.size() && pos < 6 && is_digit(t[pos])) stage = stage * 10 + (t[pos++] - '0');
  if (pos == 0 || pos == t.size() || is_digit(t[pos])) return std::nullopt;
  const size_t kind_pos = pos;
  while (pos < t.size() && ((t[pos] >= 'A' && t[pos] <= 'Z') || t[pos] == '_')) ++pos;
  const std::string_view word = t.substr(kind_pos, pos - kind_pos);
  int kind = -1;
  if (word.size() == 1) {
    kind = word[0] == 'F' ? 0 : word[0] == 'I' ? 1 : word[0] == 'W' ? 2 : word[0] == 'B' ? 3 : -1;
  } else if (word.size() == 6) {
    for (int k = static_cast<int>(ActionKind::kSendF); k <= static_cast<int>(ActionKind::kRecvB); ++k)
      if (kTokens[k] == word) kind = k;
  }
  if (kind < 0) return std::nullopt;
  const size_t mb_pos = pos;
  int32_t mb = 0;
  while (pos < t.size() && pos - mb_pos < 9 && is_digit(t[pos])) mb = mb * 10 + (t[pos++] - '0');
  if (pos == mb_pos || pos != t.size()) return std::nullopt;
  Action a;
  a.kind = static_cast<ActionKind>(kind);
  a.stage = stage;
  a.microbatch = mb;
  return Step{a, std::nullopt, loc};
}

ParsedStep parse_step(std::string_view token, const SourceLoc& loc) {
  size_t lead = 0;
  while (lead < token.size() && (token[lead] == ' ' || token[lead] == '\t')) ++lead;
  std::string_view t = token.substr(lead);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) t.remove_suffix(1);
  SourceLoc at = loc;
  if (at.col > 0) at.col += static_cast<int32_t>(lead);
  if (t.empty()) return fail("empty action", 0);
  if (t[0] != '(') {
    ParsedStep p = parse_simple(t, lead, at);
    return p;
  }
  constexpr std::string_view kSuffix = ")OVERLAP_F_B";
  constexpr std::string_view kBatch = ")BATCH";
  size_t close = t.find(')');
  if (close != std::string_view::npos && t.substr(close) == kBatch) return parse_batch(t, lead, at);
  if (close == std::string_view::npos)
    return fail(fmt::format("'{}': a group is written without spaces, as (aF;bB)OVERLAP_F_B or (a;b;...)BATCH", t), lead);
  if (t.size() > 1 && t[1] == '(')
    return fail(fmt::format("'{}': groups do not nest: a BATCH group holds SEND/RECV actions and an OVERLAP_F_B pair "
                            "two compute actions",
                            t),
                lead + 1);
  if (t.substr(close) != kSuffix)
    return fail(fmt::format("'{}': expected OVERLAP_F_B or BATCH right after ')'", t), lead + close + 1);
  std::string_view inner = t.substr(1, close - 1);
  size_t semi = inner.find(';');
  if (semi == std::string_view::npos)
    return fail(fmt::format("'{}': an overlapped pair needs two actions separated by ';'", t), lead + 1);
  ParsedStep a = parse_simple(inner.substr(0, semi), lead + 1, at);
  if (!a.step) return a;
  ParsedStep b = parse_simple(inner.substr(semi + 1), lead + 2 + semi, at);
  if (!b.step) return b;
  const Action& fa = a.step->first;
  const Action& fb = b.step->first;
  // PyTorch's runtime performs an OVERLAP_F_B's sub-actions one after the other, whatever they
  // are (its liveness tests build (F;B), (I;W) and more); only compute actions are meaningful.
  if (!is_compute(fa.kind))
    return fail(fmt::format("'{}': the actions of OVERLAP_F_B are compute actions (F, I, W or B)", t), lead + 1);
  if (!is_compute(fb.kind))
    return fail(fmt::format("'{}': the actions of OVERLAP_F_B are compute actions (F, I, W or B)", t),
                lead + 2 + semi);
  ParsedStep out;
  out.step = Step{fa, fb, at};
  return out;
}

}  // namespace sc
