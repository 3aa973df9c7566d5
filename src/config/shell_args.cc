// A small bash reader: enough of the language to expand a launch script's variables, arrays and
// arithmetic and collect the flags of the commands it runs, each located where it was written.
#include "config/shell_args.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

namespace sc::config {
namespace {

/// One character of expanded text and where it came from: the character itself for literal
/// text, the `$` of the expansion that produced it otherwise. `quoted`: written inside quotes,
/// escaped with `\`, or produced by an expansion inside double quotes, so that word splitting
/// leaves it alone (bash's "Word Splitting": only the results of unquoted expansions and
/// unquoted blanks split). `item_break`: the blank between two items of `"${NAME[@]}"`, which
/// ends a word even inside double quotes.
struct Ch {
  char c;
  SourceLoc loc;
  bool quoted = false;
  bool item_break = false;
};
using Text = std::vector<Ch>;

std::string str(const Text& t) {
  std::string s;
  s.reserve(t.size());
  for (const Ch& c : t) s += c.c;
  return s;
}

void append(Text& t, const std::string& s, const SourceLoc& loc) {
  for (char c : s) t.push_back(Ch{c, loc});
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
/// Whether word splitting ends a word at `ch`: an unquoted blank or newline, or the break
/// between the items of `"${NAME[@]}"`.
bool splits_at(const Ch& ch) { return ch.item_break || (!ch.quoted && (is_blank(ch.c) || ch.c == '\n')); }
/// `t` split into its fields as bash's word splitting does (with the default IFS): runs of
/// splitting characters separate fields, none is kept; quoted blanks stay inside their field.
std::vector<Text> fields(const Text& t) {
  std::vector<Text> out;
  size_t k = 0;
  while (k < t.size()) {
    while (k < t.size() && splits_at(t[k])) ++k;
    if (k >= t.size()) break;
    const size_t b = k;
    while (k < t.size() && !splits_at(t[k])) ++k;
    out.emplace_back(t.begin() + static_cast<std::ptrdiff_t>(b), t.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return out;
}
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
/// A shell variable name: a letter or '_', then letters, digits and '_'.
bool is_name(const std::string& s) {
  return !s.empty() && is_name_start(s[0]) && std::all_of(s.begin(), s.end(), is_name_char);
}

/// Length of the assignment prefix `NAME=` or `NAME+=` at the start of `raw` (0 when none);
/// `append` is set for `+=`.
size_t assignment_prefix(const std::string& raw, bool* append_op) {
  if (raw.empty() || !is_name_start(raw[0])) return 0;
  size_t k = 1;
  while (k < raw.size() && is_name_char(raw[k])) ++k;
  if (k < raw.size() && raw[k] == '=') {
    *append_op = false;
    return k + 1;
  }
  if (k + 1 < raw.size() && raw[k] == '+' && raw[k + 1] == '=') {
    *append_op = true;
    return k + 2;
  }
  return 0;
}

/// Most glob matching steps the `${...}` patterns of one script may take together (a real
/// script's patterns take a few hundred): bounds time whatever the values and patterns.
constexpr int64_t kMaxPatternSteps = int64_t{1} << 24;

/// `s` without its blanks: the text of an expression left unevaluated stays one word.
std::string without_blanks(std::string s) {
  s.erase(std::remove_if(s.begin(), s.end(), [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }),
          s.end());
  return s;
}

/// Whether `text` matches the bash glob `pat` as a whole: `*` any run, `?` one character, `\c`
/// the character c, anything else itself. nullopt for a bracket expression (`[...]`), which is
/// not read. Iterative with one backtrack point, so linear-times-pattern at worst; each step
/// spends one of `budget`, and nullopt is returned once it is spent.
std::optional<bool> glob_match(std::string_view pat, std::string_view text, int64_t& budget) {
  if (pat.find('[') != std::string_view::npos) return std::nullopt;
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (--budget < 0) return std::nullopt;
    const bool escaped = p + 1 < pat.size() && pat[p] == '\\';
    if (p < pat.size() && pat[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pat.size() && (escaped ? pat[p + 1] == text[t] : pat[p] == '?' || pat[p] == text[t])) {
      p += escaped ? 2 : 1;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

/// The bash pattern operators of `${NAME<op>...}` applied to `v`: `#`/`##` remove the shortest /
/// longest matching prefix, `%`/`%%` suffix; `/pat/rep` replaces the first longest match, `//`
/// every one, `/#` one at the start, `/%` one at the end. nullopt when the pattern is not read
/// or `budget` (glob steps, one also per candidate tried) runs out.
std::optional<std::string> pattern_op(const std::string& op, const std::string& pat, const std::string& rep,
                                      const std::string& v, int64_t& budget) {
  const std::string_view sv(v);
  const size_t n = v.size();
  // Whether v[from, from + len) matches, charging the candidate to the budget.
  auto matches = [&](size_t from, size_t len) -> std::optional<bool> {
    if (--budget < 0) return std::nullopt;
    return glob_match(pat, sv.substr(from, len), budget);
  };
  if (op == "#" || op == "##" || op == "/#") {  // a prefix: shortest (#) or longest (## and /#)
    if (op == "/#" && pat.empty()) return rep + v;
    for (size_t k = 0; k <= n; ++k) {
      const size_t len = op == "#" ? k : n - k;
      auto m = matches(0, len);
      if (!m) return std::nullopt;
      if (*m) return (op == "/#" ? rep : std::string()) + v.substr(len);
    }
    return v;
  }
  if (op == "%" || op == "%%" || op == "/%") {  // a suffix: shortest (%) or longest (%% and /%)
    if (op == "/%" && pat.empty()) return v + rep;
    for (size_t k = 0; k <= n; ++k) {
      const size_t from = op == "%" ? n - k : k;
      auto m = matches(from, n - from);
      if (!m) return std::nullopt;
      if (*m) return v.substr(0, from) + (op == "/%" ? rep : std::string());
    }
    return v;
  }
  // `/` and `//`: the longest match starting at each position, left to right. An empty pattern
  // matches nothing; only a pattern of stars matches the empty value.
  if (pat.empty()) return v;
  if (v.empty()) {
    auto m = matches(0, 0);
    if (!m) return std::nullopt;
    return *m ? rep : v;
  }
  std::string out;
  size_t i = 0;
  while (i < n) {
    size_t match = std::string::npos;
    for (size_t len = n - i + 1; len-- > 1;) {  // non-empty matches only
      auto m = matches(i, len);
      if (!m) return std::nullopt;
      if (*m) {
        match = len;
        break;
      }
    }
    if (match == std::string::npos) {
      out += v[i++];
      continue;
    }
    out += rep;
    i += match;
    if (op != "//") return out + v.substr(i);
  }
  return out;
}

/// Integer arithmetic of `$((...))`: + - * / % ** with parentheses and unary signs; names are
/// variables (empty or unset: 0). nullopt on anything else or a division by zero.
class Arith {
 public:
  /// Values of variables already evaluated in one `$((...))` (nullopt: not a number). Variables
  /// do not change during an evaluation, so each is evaluated once: `a=b+b+b+b`, `b=c+c+c+c`, ...
  /// costs the sum of the values' lengths, not 4^depth.
  using Memo = std::map<std::string, std::optional<int64_t>>;
  /// `depth` counts variables evaluated inside variables (A=B, B=A stops at 16; a variable that
  /// fails there fails in the whole evaluation). `deep` is set
  /// when parentheses and unary signs nest more than kMaxShellNesting deep (then nullopt).
  Arith(const std::string& s, const std::map<std::string, Text>& vars, Memo& memo, bool* deep, int depth = 0)
      : s_(s), vars_(vars), memo_(memo), deep_(deep), depth_(depth) {}
  std::optional<int64_t> run() {
    auto v = expr();
    skip();
    if (!v || i_ != s_.size()) return std::nullopt;
    return v;
  }
  /// Evaluates `s` as a whole (a fresh memo); `deep` as above.
  static std::optional<int64_t> eval(const std::string& s, const std::map<std::string, Text>& vars, bool* deep,
                                     std::vector<std::string>* assigned = nullptr) {
    Memo memo;
    Arith a(s, vars, memo, deep);
    a.assigned_ = assigned;
    return a.run();
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  std::optional<int64_t> expr() {
    auto v = term();
    for (skip(); v && i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-'); skip()) {
      char op = s_[i_++];
      auto r = term();
      if (!r) return std::nullopt;
      int64_t out = 0;
      if (op == '+' ? __builtin_add_overflow(*v, *r, &out) : __builtin_sub_overflow(*v, *r, &out)) return std::nullopt;
      v = out;
    }
    return v;
  }
  std::optional<int64_t> term() {
    auto v = power();
    for (skip(); v && i_ < s_.size() && (s_[i_] == '*' || s_[i_] == '/' || s_[i_] == '%'); skip()) {
      char op = s_[i_++];
      auto r = power();
      if (!r || (op != '*' && (*r == 0 || (*r == -1 && *v == INT64_MIN)))) return std::nullopt;
      int64_t out = 0;
      if (op == '*' && __builtin_mul_overflow(*v, *r, &out)) return std::nullopt;
      v = op == '*' ? out : op == '/' ? *v / *r : *v % *r;
    }
    return v;
  }
  /// `a ** b`: right-associative, below the unary signs as in bash (-2**2 is 4); a negative
  /// exponent or an overflow is nullopt (bash: "exponent less than 0").
  std::optional<int64_t> power() {
    auto v = unary();
    skip();
    if (!v || i_ + 1 >= s_.size() || s_[i_] != '*' || s_[i_ + 1] != '*') return v;
    i_ += 2;
    Nest nest(*this);
    if (nest.too_deep()) return std::nullopt;
    auto e = power();
    if (!e || *e < 0) return std::nullopt;
    int64_t out = 1;
    for (int64_t k = 0; k < *e; ++k) {
      if (__builtin_mul_overflow(out, *v, &out)) return std::nullopt;
      if (out == 0 || out == 1) break;          // 0 and 1 stay where they are
      if (out == -1) return (*e - k - 1) % 2 == 0 ? -1 : 1;  // -1 alternates
    }
    return out;
  }
  /// Counts one level of nesting while alive; too deep sets *deep_.
  struct Nest {
    Arith& a;
    explicit Nest(Arith& arith) : a(arith) { ++a.nest_; }
    ~Nest() { --a.nest_; }
    bool too_deep() const {
      if (a.nest_ <= kMaxShellNesting) return false;
      *a.deep_ = true;
      return true;
    }
  };
  std::optional<int64_t> unary() {
    skip();
    if (i_ + 1 < s_.size() && (s_[i_] == '-' || s_[i_] == '+') && s_[i_ + 1] == s_[i_]) {  // ++N, --N: not read
      size_t k = i_ + 2;
      while (k < s_.size() && std::isspace(static_cast<unsigned char>(s_[k]))) ++k;
      size_t b = k;
      while (k < s_.size() && is_name_char(s_[k])) ++k;
      if (k > b && is_name_start(s_[b])) {  // before a number, two signs (bash: $((--1)) is 1)
        record_assigned(s_.substr(b, k - b));
        return std::nullopt;
      }
    }
    if (i_ < s_.size() && (s_[i_] == '-' || s_[i_] == '+')) {
      char op = s_[i_++];
      Nest nest(*this);
      if (nest.too_deep()) return std::nullopt;
      auto v = unary();
      if (!v) return std::nullopt;
      if (op == '-' && *v == INT64_MIN) return std::nullopt;
      return op == '-' ? -*v : *v;
    }
    return primary();
  }
  std::optional<int64_t> primary() {
    skip();
    if (i_ >= s_.size()) return std::nullopt;
    if (s_[i_] == '(') {
      ++i_;
      Nest nest(*this);
      if (nest.too_deep()) return std::nullopt;
      auto v = expr();
      skip();
      if (!v || i_ >= s_.size() || s_[i_] != ')') return std::nullopt;
      ++i_;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      size_t b = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ - b > 18) return std::nullopt;
      // A leading 0 makes an octal constant, as in bash ($((020)) is 16); 8 and 9 are not octal
      // digits (bash: "value too great for base"), so such a number is refused.
      if (s_[b] == '0' && i_ - b > 1) {
        int64_t v = 0;
        for (size_t k = b; k < i_; ++k) {
          if (s_[k] > '7') return std::nullopt;
          v = v * 8 + (s_[k] - '0');
        }
        return v;
      }
      return std::stoll(s_.substr(b, i_ - b));
    }
    if (is_name_start(s_[i_])) {
      size_t b = i_;
      while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
      const std::string name = s_.substr(b, i_ - b);
      size_t k = i_;
      while (k < s_.size() && std::isspace(static_cast<unsigned char>(s_[k]))) ++k;
      const bool incdec = k + 1 < s_.size() && (s_[k] == '+' || s_[k] == '-') && s_[k + 1] == s_[k];
      const bool assign = k < s_.size() && ((s_[k] == '=' && (k + 1 >= s_.size() || s_[k + 1] != '=')) ||
                                            (k + 1 < s_.size() && s_[k + 1] == '=' &&
                                             std::string("+-*/%").find(s_[k]) != std::string::npos));
      if (incdec || assign) {
        record_assigned(name);
        return std::nullopt;
      }
      auto it = vars_.find(name);
      if (it == vars_.end() || it->second.empty()) return 0;
      if (depth_ >= 16) return std::nullopt;
      if (auto m = memo_.find(name); m != memo_.end()) return m->second;
      auto v = Arith(str(it->second), vars_, memo_, deep_, depth_ + 1).run();
      // A failure is memoised too (a cycle, or a chain past depth 16 reached from deeper in),
      // so that no variable is evaluated twice: time stays linear in the values' lengths.
      memo_[name] = v;
      return v;
    }
    return std::nullopt;
  }

  const std::string& s_;
  const std::map<std::string, Text>& vars_;
  Memo& memo_;
  bool* deep_;
  int depth_ = 0;
  /// Names the expression assigns (`++N`, `N++`, `N = e`, `N += e`): such an expression is not
  /// evaluated (nullopt), and its caller is told which variables it would have changed.
  std::vector<std::string>* assigned_ = nullptr;
  void record_assigned(const std::string& name) {
    if (assigned_) assigned_->push_back(name);
  }
  int nest_ = 0;
  size_t i_ = 0;
};

/// Shell builtins and tools whose words are never training flags.
const std::set<std::string> kNotLaunchers = {"echo", "printf", "mkdir", "cd",    "exit",  "return", "set",
                                             "source", ".",    "rm",    "cp",    "mv",    "touch",  "unset",
                                             "shift",  "read", "test",  "[",     "[[",    "true",   "false",
                                             "wait",   "sleep", "trap", "ls",    "cat",   "export", "local",
                                             "declare", "readonly", "typeset", "pushd", "popd", "ln", "chmod"};
const std::set<std::string> kDeclarers = {"export", "local", "declare", "readonly", "typeset"};

class Shell {
 public:
  Shell(int32_t file, const std::string& text, const std::map<std::string, std::string>& env) : s_(&text), file_(file) {
    for (const auto& [name, value] : env) {  // set before the first line, as exported variables are
      Text t;
      append(t, value.substr(0, kMaxShellValue), SourceLoc{});
      scalars_[name] = std::move(t);
      scalar_loc_[name] = SourceLoc{};
    }
  }

  ShellArgs run() {
    // An `a && b` / `a || b` list: the status of what ran so far (nullopt: not known, as for a
    // launcher or a condition schedcheck does not evaluate), and whether the next command runs.
    std::optional<bool> status = true;
    bool skip_next = false;
    bool after_operator = false;  // an `&&` or `||` waits for its right side
    while (!eof()) {
      if (separator()) continue;
      const char c = peek();
      if ((c == '&' && peek(1) == '&') || (c == '|' && peek(1) == '|')) {
        // `&&` runs the next command after a success, `||` after a failure; a command skipped
        // leaves the status as it was (`false && A=1 || B=2` sets B).
        const int32_t line = line_;
        advance();
        advance();
        if (last_was_condition_ && !frames_.empty()) frames_.back().cond_unknown = true;  // `if a && b`
        after_operator = true;  // newlines may follow before the next command
        if (skip_next) continue;  // `a && b && c` with b skipped: c is decided by a's status
        if (!status) {
          if (out_.list_lines.empty() || out_.list_lines.back() != line) out_.list_lines.push_back(line);
        } else {
          skip_next = *status != (c == '&');
        }
      } else if (c == ';' && (peek(1) == ';' || peek(1) == '&')) {  // the end of a case branch
        end_case_branch();
      } else if (c == '\n' && after_operator) {
        advance();
      } else if (c == '\n' || c == ';' || c == '&' || c == '|') {
        status = true, skip_next = false;  // a new list (or pipeline)
        pipe_next_ = c == '|';
        advance();
      } else if (skip_next) {
        after_operator = false;
        // Read without effect: the command, or the block it opens (`{ ...; }`, an if, a loop)
        // up to its end.
        const Snapshot snap = snapshot();
        const size_t depth = frames_.size();
        command_progressing();
        while (frames_.size() > depth && !eof())
          if (!separator() && !operator_chars()) command_progressing();
        restore(snap);
        skip_next = false;
      } else {
        after_operator = false;
        status = command_progressing();
      }
    }
    if (!frames_.empty()) {  // bash: "syntax error: unexpected end of file"
      const Frame& f = frames_.front();
      limit(f.at, std::string("'") + opener(f.kind) + "' has no matching '" + closer(f.kind) + "' before the end of the script");
    }
    if (!command_flags_)
      for (const std::string& name : array_order_) {
        std::vector<ShellToken> tokens;
        for (Text item : arrays_[name]) {  // as `${NAME[@]}` unquoted would pass them: split
          for (Ch& ch : item) ch.quoted = false;
          split(item, tokens);
        }
        collect(tokens);
      }
    for (const auto& [name, value] : scalars_) out_.vars[name] = ShellVar{str(value), scalar_loc_[name]};
    return std::move(out_);
  }

 private:
  bool eof() const { return i_ >= s_->size(); }
  char peek(size_t k = 0) const { return i_ + k < s_->size() ? (*s_)[i_ + k] : '\0'; }
  SourceLoc here() const { return SourceLoc{file_, line_, col_}; }
  /// Skips one blank, comment or character between commands that opens no command (`(` alone,
  /// `)`, `<`, `>`): true if it did. Not `;`, `&`, `|` or a newline, which end a list.
  bool separator() {
    if (eof()) return false;
    const char c = peek();
    if (is_blank(c) || (c == '\\' && peek(1) == '\n')) {
      skip_blanks();
      return true;
    }
    if (c == '#') {
      skip_comment();
      return true;
    }
    if (c == '(' && peek(1) != '(') {  // a subshell (`((` starts an arithmetic command)
      if (case_pattern_) return false;  // `(x)`: a case pattern's optional `(`
      open_subshell();
      return true;
    }
    if (c == ')') {
      const SourceLoc at = here();
      advance();
      close_subshell(at);
      return true;
    }
    if (c == '<' || c == '>') {
      advance();
      return true;
    }
    return false;
  }
  /// A `|` (not `||`) next on this line after blanks: what was just read is a pipeline's element.
  bool pipe_follows() const {
    size_t k = i_;
    while (k < s_->size() && is_blank((*s_)[k])) ++k;
    return k < s_->size() && (*s_)[k] == '|' && (k + 1 >= s_->size() || (*s_)[k + 1] != '|');
  }
  /// `(` at a command's start: a subshell, whose assignments end at its `)`. Its commands
  /// otherwise count as the script's (a launch command inside one is still the launch).
  void open_subshell() {
    Frame f;
    f.kind = Block::kSubshell;
    f.at = here();
    advance();
    f.outer_skip = skipping();
    f.saved = std::make_shared<const SavedVars>(saved_vars());
    frames_.push_back(std::move(f));
  }
  /// `)`: closes the innermost subshell, if one is open, and restores the variables from before
  /// it. Its exit status is not followed: an if or while whose condition holds one reads every
  /// branch, listed in if_lines.
  void close_subshell(const SourceLoc& at) {
    if (frames_.empty() || frames_.back().kind != Block::kSubshell) {
      limit(at, "syntax error near unexpected token ')': no open '(' it belongs to here");
      return;
    }
    restore_vars(*frames_.back().saved);
    frames_.pop_back();
    if (!frames_.empty() && frames_.back().in_condition) frames_.back().cond_unknown = true;
  }
  /// Skips one list or pipeline operator character (`;`, `&`, `|`, a newline): true if it did.
  bool operator_chars() {
    const char c = peek();
    if (c != ';' && c != '&' && c != '|' && c != '\n') return false;
    if (c == ';' && (peek(1) == ';' || peek(1) == '&')) {
      end_case_branch();
      return true;
    }
    advance();
    return true;
  }
  /// `;;` (the case ends), `;&` (the next branch runs too) or `;;&` (the next patterns are tested
  /// as well), at the reader: a pattern follows.
  void end_case_branch() {
    advance();
    const bool fall = peek() == '&';
    const bool next_too = peek() == ';' && peek(1) == '&';
    advance();
    if (next_too) advance();
    if (frames_.empty() || frames_.back().kind != Block::kCase) return;
    Frame& f = frames_.back();
    case_pattern_ = true;
    f.fall_through = fall && !f.skip;  // the branch that ran goes on into the next one
    if (next_too && !f.skip) f.any_taken = false;
  }
  /// command(), and past one character if it read none (it never stalls the reader).
  std::optional<bool> command_progressing() {
    const size_t before = i_;
    std::optional<bool> status = command();
    if (i_ == before && !separator()) advance();  // separator(): a subshell's `)` closes it
    return status;
  }
  void advance() {
    if (eof()) return;
    if ((*s_)[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }
  void skip_blanks() {
    while (!eof()) {
      if (is_blank(peek())) {
        advance();
      } else if (peek() == '\\' && peek(1) == '\n') {
        advance();
        advance();
      } else {
        break;
      }
    }
  }
  void skip_comment() {
    while (!eof() && peek() != '\n') advance();
  }

  /// The text up to the `close` that matches an `open` already consumed, nesting `open`s and
  /// skipping quoted text; the closing character is consumed, not returned.
  std::string balanced(char open, char close) {
    std::string inner;
    int depth = 0;
    while (!eof()) {
      char c = peek();
      if (c == '\'' || c == '"') {
        inner += c;
        advance();
        while (!eof() && peek() != c) {
          if (c == '"' && peek() == '\\' && peek(1) != '\0') {
            inner += peek();
            advance();
          }
          inner += peek();
          advance();
        }
        if (!eof()) {
          inner += peek();
          advance();
        }
        continue;
      }
      if (c == close && depth == 0) {
        advance();
        return inner;
      }
      if (c == open) ++depth;
      if (c == close) --depth;
      inner += c;
      advance();
    }
    return inner;
  }

  /// Reads one word from the cursor, expanding it; stops at a blank or an operator. `raw` gets
  /// the word's source text.
  /// The text of a '...' quote, taken as written; the cursor is on the opening quote.
  void single_quoted(Text& t) {
    advance();
    while (!eof() && peek() != '\'') {
      t.push_back(Ch{peek(), here(), true});
      advance();
    }
    advance();
  }

  Text word(std::string* raw) {
    Text t;
    const size_t start = i_;
    while (!eof()) {
      char c = peek();
      if (is_blank(c) || c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '<' ||
          c == '>')
        break;
      if (c == '\\') {
        if (peek(1) == '\n') break;  // a continuation ends the word; skip_blanks() eats it
        advance();
        if (!eof()) {
          t.push_back(Ch{peek(), here(), true});
          advance();
        }
      } else if (c == '\'') {
        single_quoted(t);
      } else if (c == '"') {
        advance();
        double_quoted(t);
      } else if (c == '$') {
        dollar(t);
      } else if (c == '`') {  // a command substitution, as $(...): not run, one word that says so
        SourceLoc at = here();
        advance();
        while (!eof() && peek() != '`') {
          if (peek() == '\\') advance();
          advance();
        }
        if (eof()) limit(at, "unexpected end of the script while looking for the matching '`'");
        advance();
        splice(t, std::string("$(...)"), "`...`", at);
      } else {
        t.push_back(Ch{c, here()});
        advance();
      }
    }
    if (raw) *raw = s_->substr(start, i_ - start);
    return t;
  }

  void double_quoted(Text& t) {
    while (!eof() && peek() != '"') {
      char c = peek();
      if (c == '\\' && (peek(1) == '"' || peek(1) == '\\' || peek(1) == '$' || peek(1) == '`' || peek(1) == '\n')) {
        advance();
        if (peek() != '\n') t.push_back(Ch{peek(), here(), true});
        advance();
      } else if (c == '$') {
        ++dquote_;  // what the expansion produces is quoted: not split (but "${NAME[@]}")
        dollar(t);
        --dquote_;
      } else {
        t.push_back(Ch{c, here(), true});
        advance();
      }
    }
    advance();
  }

  /// An expansion at the cursor, which is on a `$`.
  void dollar(Text& t) {
    const SourceLoc at = here();
    advance();
    char c = peek();
    if (c == '(' && peek(1) == '(') {
      advance();
      advance();
      std::string inner = balanced('(', ')');
      if (peek() == ')') advance();
      bool deep = false;
      std::vector<std::string> assigned;
      auto v = Arith::eval(plain(inner), scalars_, &deep, &assigned);
      if (deep) limit(at, "$((...)) nests parentheses or signs more than " + std::to_string(kMaxShellNesting) +
                              " deep: a launch script's arithmetic is shallow, so this is not read");
      // Not evaluated: its own text, without blanks so that it stays one word (a flag given it
      // says the value is invalid, and the reader's note points here).
      const std::string text = without_blanks("$((" + inner + "))");
      // A variable the expression would have changed holds the expression's text too.
      for (const std::string& name : assigned) set_text(name, text, at);
      splice(t, v ? std::to_string(*v) : text, "$((...))", at);
    } else if (c == '(') {
      advance();
      balanced('(', ')');
      if (eof() && (i_ == 0 || (*s_)[i_ - 1] != ')'))
        limit(at, "unexpected end of the script while looking for the matching ')' of '$('");
      splice(t, std::string("$(...)"), "$(...)", at);  // a command is not run: one word that says so
    } else if (c == '{') {
      advance();
      parameter(t, balanced('{', '}'), at);
    } else if (is_name_start(c)) {
      std::string name;
      while (is_name_char(peek())) {
        name += peek();
        advance();
      }
      splice(t, value_of(name), name, at);
    } else if (std::isdigit(static_cast<unsigned char>(c)) || (c != '\0' && std::string("@*#?$!-").find(c) != std::string::npos)) {
      advance();  // positional and special parameters: unset here
    } else {
      t.push_back(Ch{'$', at, dquote_ > 0});
    }
  }

  /// The value of scalar `name`, or item 0 of array `name`; empty when unset.
  Text value_of(const std::string& name) const {
    if (auto it = scalars_.find(name); it != scalars_.end()) return it->second;
    if (auto it = arrays_.find(name); it != arrays_.end() && !it->second.empty()) return it->second.front();
    return {};
  }

  /// `${inner}`: NAME, NAME[@], NAME[i], #NAME, and the operators :- - := = :+ + (others give the
  /// plain value).
  void parameter(Text& t, const std::string& inner, const SourceLoc& at) {
    size_t k = 0;
    bool length = false;
    if (inner.size() > 1 && inner[0] == '#') {
      length = true;
      k = 1;
    }
    std::string name;
    if (k < inner.size() && is_name_start(inner[k])) {
      while (k < inner.size() && is_name_char(inner[k])) name += inner[k++];
    } else {
      while (k < inner.size() && std::isdigit(static_cast<unsigned char>(inner[k]))) name += inner[k++];
      if (name.empty() && k < inner.size()) name = std::string(1, inner[k++]);
    }
    std::optional<std::string> index;
    if (k < inner.size() && inner[k] == '[') {
      size_t close = inner.find(']', k);
      if (close == std::string::npos) close = inner.size();
      index = inner.substr(k + 1, close - k - 1);
      k = std::min(close + 1, inner.size());
    }
    auto array = arrays_.find(name);
    if (length) {
      size_t n = index && array != arrays_.end() ? array->second.size() : str(value_of(name)).size();
      append(t, std::to_string(n), at);
      return;
    }
    Text value;
    if (index && array != arrays_.end()) {
      if (*index == "@" || *index == "*") {
        for (size_t j = 0; j < array->second.size(); ++j) {
          if (j) value.push_back(Ch{' ', at, false, *index == "@"});
          value.insert(value.end(), array->second[j].begin(), array->second[j].end());
        }
      } else {
        bool deep = false;
        auto n = Arith::eval(plain(*index), scalars_, &deep);
        if (deep) limit(at, "an array index nests more than " + std::to_string(kMaxShellNesting) + " deep");
        if (n && *n >= 0 && static_cast<size_t>(*n) < array->second.size()) value = array->second[*n];
      }
    } else if (!index || *index == "0" || *index == "@" || *index == "*") {
      value = value_of(name);
    }
    std::string op;
    if (k < inner.size()) {
      if (inner[k] == ':' && k + 1 < inner.size() && std::string("-=+?").find(inner[k + 1]) != std::string::npos) {
        op = inner.substr(k, 2);
      } else if (std::string("-=+?").find(inner[k]) != std::string::npos) {
        op = inner.substr(k, 1);
      } else {
        // Substrings, pattern removal and replacement, case changes; an operator not read
        // here leaves the expansion's own text, which no flag takes as a value, rather than
        // the variable's plain value.
        // An unset variable expands to nothing whatever the operator (bash: `${U/#/x}` is empty).
        if (!scalars_.count(name) && array == arrays_.end()) return;
        auto v = transformed(str(value), inner.substr(k));
        return splice(t, v ? *v : "${" + inner + "}", name, at);
      }
    }
    const std::string word = op.empty() ? std::string() : inner.substr(k + op.size());
    const bool set = op.size() == 2 ? !value.empty() : (scalars_.count(name) || array != arrays_.end());
    if (op == ":-" || op == "-") {
      if (!set) {
        const std::string fallback = plain(word);
        const bool unset = !scalars_.count(name) && array == arrays_.end();
        if (!name.empty() && is_name_start(name[0]) && (unset || op == ":-") &&
            std::none_of(out_.defaults_used.begin(), out_.defaults_used.end(),
                         [&](const ShellArgs::DefaultUsed& d) { return d.name == name; }))
          out_.defaults_used.push_back({name, fallback, at, !unset});
        return splice(t, fallback, name, at);
      }
    } else if (op == ":=" || op == "=") {
      if (!set) {
        value.clear();
        append(value, plain(word), at);
        if (value.size() > kMaxShellValue) {  // the default's literal text on top of its expansions
          value.resize(kMaxShellValue);
          limit(at, name + " expands to more than " + std::to_string(kMaxShellValue) +
                        " characters: a launch script's values are short, so this is not read");
        }
        if (!name.empty() && is_name_start(name[0])) {
          scalars_[name] = value;
          scalar_loc_[name] = at;
        }
      }
    } else if (op == ":+" || op == "+") {
      if (set) splice(t, plain(word), name, at);
      return;
    }
    splice(t, value, name, at);
  }

  /// `rest` (what follows the name in `${NAME<rest>}`) applied to `v`: `:offset[:length]`,
  /// `#pat`, `##pat`, `%pat`, `%%pat`, `/pat/rep`, `//pat/rep`, `/#pat/rep`, `/%pat/rep`, `^^`,
  /// `,,`, `^`, `,` (bash's "Shell Parameter Expansion"; patterns and offsets are expanded
  /// first). nullopt for anything else.
  std::optional<std::string> transformed(const std::string& v, const std::string& rest) {
    if (rest[0] == ':') {  // substring: offsets are arithmetic; a negative offset counts from the end
      const size_t colon = rest.find(':', 1);
      bool deep = false;
      auto off = Arith::eval(plain(rest.substr(1, colon == std::string::npos ? std::string::npos : colon - 1)),
                             scalars_, &deep);
      std::optional<int64_t> len;
      if (colon != std::string::npos) len = Arith::eval(plain(rest.substr(colon + 1)), scalars_, &deep);
      if (!off || (colon != std::string::npos && !len)) return std::nullopt;
      const int64_t n = static_cast<int64_t>(v.size());
      int64_t b = *off < 0 ? n + *off : *off;
      if (b < 0 || b > n) return std::string();
      int64_t e = !len ? n : *len < 0 ? n + *len : *len >= n - b ? n : b + *len;
      if (e < b) return std::nullopt;  // bash: "substring expression < 0"
      return v.substr(static_cast<size_t>(b), static_cast<size_t>(e - b));
    }
    if (rest == "^^" || rest == ",," || rest == "^" || rest == ",") {
      std::string out = v;
      const size_t upto = rest.size() == 2 ? out.size() : std::min<size_t>(1, out.size());
      for (size_t i = 0; i < upto; ++i)
        out[i] = static_cast<char>(rest[0] == '^' ? std::toupper(static_cast<unsigned char>(out[i]))
                                                  : std::tolower(static_cast<unsigned char>(out[i])));
      return out;
    }
    // A quoted or escaped pattern character matches itself in bash; the expansion of quotes
    // here drops that difference, so such a pattern is not read (never read as a wildcard).
    auto quoted = [](const std::string& raw) { return raw.find_first_of("\"'\\") != std::string::npos; };
    if (rest[0] == '#' || rest[0] == '%') {
      const size_t w = rest.size() > 1 && rest[1] == rest[0] ? 2 : 1;
      if (quoted(rest.substr(w))) return std::nullopt;
      return pattern(rest.substr(0, w), plain(rest.substr(w)), "", v);
    }
    if (rest[0] == '/') {
      size_t w = 1;
      if (rest.size() > 1 && (rest[1] == '/' || rest[1] == '#' || rest[1] == '%')) w = 2;
      // The pattern ends at the first unescaped `/`; the rest is the replacement.
      size_t slash = w;
      while (slash < rest.size() && rest[slash] != '/') slash += rest[slash] == '\\' ? 2 : 1;
      if (quoted(rest.substr(w, slash - w))) return std::nullopt;
      const std::string pat = plain(rest.substr(w, slash - w));
      const std::string rep = slash < rest.size() ? plain(rest.substr(slash + 1)) : std::string();
      return pattern(rest.substr(0, w), pat, rep, v);
    }
    return std::nullopt;
  }
  /// pattern_op within the script's budget of glob steps; past it, the limit is recorded.
  std::optional<std::string> pattern(const std::string& op, const std::string& pat, const std::string& rep,
                                     const std::string& v) {
    if (pattern_budget_ < 0) return std::nullopt;
    auto out = pattern_op(op, pat, rep, v, pattern_budget_);
    if (pattern_budget_ < 0)
      limit(here(), "the script's ${...} patterns take more than " + std::to_string(kMaxPatternSteps) +
                        " matching steps: a launch script's patterns are short, so this is not read");
    return out;
  }

  /// Records the first limit the script runs into (see ShellArgs::limit_error).
  void limit(const SourceLoc& at, const std::string& message) {
    if (!out_.limit_error.empty()) return;
    out_.limit_error = message;
    out_.limit_loc = at;
  }
  /// Appends the expansion `v` of `name` to `t`, checked before it is built: past kMaxShellValue
  /// characters in one word, or kMaxShellExpansion for the whole script, it is cut and the limit
  /// recorded. Time and memory are then bounded by the limits, whatever the script.
  void splice(Text& t, const Text& v, const std::string& name, const SourceLoc& at) {
    size_t room = std::min(kMaxShellValue - std::min(kMaxShellValue, t.size()),
                           kMaxShellExpansion - std::min(kMaxShellExpansion, expanded_));
    if (v.size() > room)
      limit(at, (expanded_ + v.size() > kMaxShellExpansion
                     ? "the script's expansions produce more than " + std::to_string(kMaxShellExpansion) + " characters"
                     : name + " expands to more than " + std::to_string(kMaxShellValue) + " characters") +
                    ": a launch script's values are short, so this is not read");
    const size_t n = std::min(room, v.size());
    // Quoted or not as the expansion is written, whatever the value's own quotes were: an
    // unquoted `$X` splits at the blanks of a value assigned as "a b", a quoted one does not.
    for (size_t k = 0; k < n; ++k) {
      Ch ch = v[k];
      ch.quoted = dquote_ > 0 && !ch.item_break;
      t.push_back(ch);
    }
    expanded_ += n;
  }
  void splice(Text& t, const std::string& v, const std::string& name, const SourceLoc& at) {
    Text x;
    x.reserve(std::min(v.size(), kMaxShellValue + 1));
    for (size_t k = 0; k < v.size() && k <= kMaxShellValue; ++k) x.push_back(Ch{v[k], at});
    splice(t, x, name, at);
  }

  /// `text` expanded as the inside of a double-quoted string, without locations: for defaults,
  /// array indices and arithmetic. Quotes are removed.
  std::string plain(const std::string& text) {
    if (plain_depth_ >= kMaxShellNesting) {
      limit(here(), "${...} defaults nest more than " + std::to_string(kMaxShellNesting) +
                        " deep: a launch script's expansions are shallow, so this is not read");
      return {};
    }
    ++plain_depth_;
    const std::string* saved_s = s_;
    const size_t saved_i = i_;
    const int32_t saved_line = line_, saved_col = col_;
    s_ = &text;
    i_ = 0;
    Text t;
    while (!eof()) {
      char c = peek();
      if (c == '\'') {
        single_quoted(t);
      } else if (c == '"') {
        advance();
        double_quoted(t);
      } else if (c == '$') {
        dollar(t);
      } else if (c == '\\' && peek(1) != '\0') {
        advance();
        t.push_back(Ch{peek(), here()});
        advance();
      } else {
        t.push_back(Ch{c, here()});
        advance();
      }
    }
    s_ = saved_s;
    i_ = saved_i;
    line_ = saved_line;
    col_ = saved_col;
    --plain_depth_;
    return str(t);
  }

  /// Items of an array assignment; the cursor is on its `(`.
  std::vector<Text> array_items() {
    advance();
    std::vector<Text> items;
    while (!eof()) {
      skip_blanks();
      char c = peek();
      if (c == '\n') {
        advance();
      } else if (c == '#') {
        skip_comment();
      } else if (c == ')') {
        advance();
        break;
      } else if (c == ';' || c == '&' || c == '|' || c == '(' || c == '<' || c == '>') {
        advance();
      } else {
        // Each word is split as a command's words are: `( $ARGS )` and `( "${A[@]}" )` give
        // one item per field, `( "--fp8-format hybrid" )` one item.
        for (Text& item : fields(word(nullptr))) items.push_back(std::move(item));
      }
    }
    return items;
  }

  /// One simple command up to a newline, `;`, `&` or `|`: assignments, keywords and words.
  /// Reads one simple command and applies it; answers its exit status where schedcheck knows it
  /// (test_status: `[ ... ]`, `[[ ... ]]`, `test`, `true`, `false`, `:`), nullopt otherwise.
  std::optional<bool> command() {
    std::vector<Text> words;
    std::vector<bool> quoted_empty;  // per word: written quoted and expanded to nothing ("")
    bool negate = false;             // `! cmd`
    bool arithmetic = false;         // `(( expr ))`
    bool closing = false;            // a block's closing keyword (fi, done, esac, })
    bool function_parens = false;    // `name()`: a function definition's body may follow
    int32_t parens = 0;              // `(` read inside this command and not yet closed
    std::optional<Snapshot> skipped; // in an if branch not taken: the state to restore at the end
    bool condition = false;   // skipping an if/while condition up to `;` or a newline
    bool declaring = false;   // after export/local/...: words are assignments
    bool scoping = false;     // after local/declare/typeset: the names are local to a function
    bool unsetting = false;   // after unset: words are names to remove
    bool letting = false;     // after let: words are arithmetic assignments
    // Assignments before a command word (`TP=4 torchrun ... $TP`) set the command's environment
    // only: bash expands the command's words with the values from before them, and they do not
    // outlast the command. Each name's earlier value (nullopt: unset), restored at the command word.
    std::vector<std::pair<std::string, std::optional<Text>>> prefix_saved;
    const bool after_pipe = pipe_next_;  // a pipeline's element after a `|`: a subshell
    pipe_next_ = false;
    command_after_pipe_ = after_pipe;
    while (!eof()) {
      skip_blanks();
      if (eof()) break;
      char c = peek();
      if (c == '#') {
        skip_comment();
        break;
      }
      if (c == '\n' || c == ';') break;
      if (case_pattern_ && words.empty()) {  // a case branch's `pattern)`, or the `esac`
        if (s_->compare(i_, 4, "esac") == 0 && (i_ + 4 >= s_->size() || !is_name_char((*s_)[i_ + 4]))) {
          case_pattern_ = false;
        } else {
          std::string pattern;
          char quote = 0;
          while (!eof() && (quote != 0 || (peek() != ')' && peek() != '\n'))) {
            if (quote == 0 && (peek() == '"' || peek() == '\'')) quote = peek();
            else if (quote != 0 && peek() == quote) quote = 0;
            pattern += peek();
            advance();
          }
          if (peek() == ')') {
            advance();
            case_pattern_ = false;
            case_branch(pattern);
          }
          continue;
        }
      }
      if ((c == '&' && peek(1) == '>') || ((c == '<' || c == '>') && peek(1) != '(' && !(c == '<' && peek(1) == '<'))) {
        // A redirection (`> log`, `2>&1`, `&> log`, `< in`): the operator and its target are
        // not words of the command, so a file name never becomes a flag's value.
        advance();
        while (peek() == '>' || peek() == '&' || peek() == '|') advance();
        skip_redirect_target();
        continue;
      }
      if (c == '&' || c == '|') {
        if (!condition) break;
        advance();
        continue;
      }
      if (c == '<' && peek(1) == '<' && peek(2) == '<') {  // a here-string: its word is data
        advance();
        advance();
        advance();
        skip_redirect_target();
        continue;
      }
      if (c == '<' && peek(1) == '<') {
        heredoc_start();
        continue;
      }
      if (c == '(' && peek(1) == '(' && words.empty() && !condition) {  // `(( expr, expr ))`: let's arithmetic
        const SourceLoc at = here();
        const size_t at_i = i_;
        advance();
        advance();
        std::string inner = balanced('(', ')');
        if (peek() != ')') {  // not closed by `))`: bash reads two nested subshells, `( (...) ...)`
          i_ = at_i;
          line_ = at.line;
          col_ = at.col;
          open_subshell();  // the second `(` opens the inner one next
          continue;
        }
        arithmetic = true;
        advance();
        size_t from = 0;
        for (size_t comma = 0; comma != std::string::npos; from = comma + 1) {
          comma = inner.find(',', from);
          let_assign(plain(inner.substr(from, comma == std::string::npos ? std::string::npos : comma - from)), at);
        }
        continue;
      }
      if (c == ')' && parens == 0 && !frames_.empty() && frames_.back().kind == Block::kSubshell)
        break;  // the subshell's `)` ends the command; the list reader closes the subshell
      // `(` where a command starts (after `then`, `do`, `{`, `!`, a case pattern): a subshell.
      if (c == '(' && peek(1) != '(' && words.empty() && !condition && !declaring && !letting && !unsetting) {
        open_subshell();
        continue;
      }
      // `<(...)` / `>(...)`: a process substitution, a command not run; the word names it.
      if ((c == '<' || c == '>') && peek(1) == '(') {
        const SourceLoc at = here();
        advance();
        advance();
        balanced('(', ')');
        if (eof() && (*s_)[i_ - 1] != ')')
          limit(at, std::string("unexpected end of the script while looking for the matching ')' of '") + c + "('");
        Text w;
        splice(w, std::string(1, c) + "(...)", "process substitution", at);
        quoted_empty.push_back(false);
        words.push_back(std::move(w));
        continue;
      }
      // `name() ( ... )`: a function whose body is a subshell, read where it is defined.
      if (c == '(' && peek(1) != '(' && peek(1) != ')' && function_parens && words.size() == 1 && parens == 0) {
        words.clear();
        quoted_empty.clear();
        function_parens = false;
        if (!skipping()) out_.if_lines.push_back(line_);
        open_subshell();
        continue;
      }
      if (c == ')' && parens == 0) {  // bash: "syntax error near unexpected token `)'"
        limit(here(), "syntax error near unexpected token ')': no open '(' it belongs to here");
        advance();
        continue;
      }
      if (c == '(' || c == ')' || c == '<' || c == '>') {
        if (c == '(' && peek(1) == ')' && words.size() == 1) function_parens = true;
        if (c == '(') ++parens;
        if (c == ')' && parens > 0) --parens;
        advance();
        continue;
      }
      const SourceLoc start = here();
      std::string raw;
      Text w = word(&raw);
      if (raw.empty()) {  // a character word() does not take
        advance();
        continue;
      }
      // A function definition, `name() {` or `function name {`: its body is read where it is
      // defined (as if called once there), a `{ }` group.
      if (raw == "{" && !condition && ((words.size() == 1 && function_parens) ||
                                       (!words.empty() && str(words.front()) == "function" && words.size() <= 2))) {
        words.clear();
        quoted_empty.clear();
        keyword(raw, start);
        frames_.back().function_body = true;
        if (!skipping()) out_.if_lines.push_back(start.line);  // a function body, read where defined
        continue;
      }
      // A file descriptor written against its redirection (the 2 of `2>&1`).
      if ((peek() == '>' || peek() == '<') && !raw.empty() &&
          raw.find_first_not_of("0123456789") == std::string::npos)
        continue;
      if (condition) {
        if (!frames_.empty() && frames_.back().kind == Block::kCase && !case_pattern_) {
          Frame& f = frames_.back();
          if (raw == "in" && f.subject_read) {
            condition = false;  // `case WORD in`: the branches' patterns follow
            case_pattern_ = true;
          } else if (!f.subject_read) {
            // The word matched: not read where an expansion left its own text (`$(...)`).
            f.subject_read = true;
            const std::string v = str(w);
            if (v.find("$(") == std::string::npos && v.find("${") == std::string::npos &&
                v.find('`') == std::string::npos)
              f.subject = v;
          }
        }
        continue;
      }
      if (words.empty()) {
        if (keyword(raw, start)) {
          closing = closing || raw == "fi" || raw == "done" || raw == "esac" || raw == "}";
          if (raw == "for" || raw == "case") condition = true;  // their words are no command
          continue;
        }
        // The first word that is not a keyword: in a branch not taken, read it without effect.
        if (!skipped && skipping()) skipped = snapshot();
        if (raw == "!") negate = !negate;
        if (raw == "!" || raw == "in") continue;
        if (kDeclarers.count(raw)) {
          declaring = true;
          // In a function, `local`, `declare` and `typeset` make their names local (bash's
          // "Shell Functions"); `export` and `readonly` do not, nor `declare -g`.
          scoping = raw == "local" || raw == "declare" || raw == "typeset";
          continue;
        }
        if (declaring && scoping && raw == "-g") {
          scoping = false;
          continue;
        }
        if (declaring && scoping && !raw.empty() && raw[0] != '-') {
          const size_t eq = raw.find('=');
          std::string name = raw.substr(0, eq == std::string::npos ? raw.size() : eq);
          if (name.size() > 1 && name.back() == '+') name.pop_back();  // `local X+=1`
          if (is_name(name)) {
            make_local(name);
            if (eq == std::string::npos) {  // `local X`: a new local, unset
              scalars_.erase(name);
              arrays_.erase(name);
              continue;
            }
          }
        }
        if (raw == "unset") {
          unsetting = true;
          continue;
        }
        if (raw == "let") {
          letting = true;
          continue;
        }
        if (letting) {  // `let NAME=expr`, `let NAME+=expr`, `let NAME++`
          let_assign(str(w), start);
          continue;
        }
        if (unsetting) {  // `unset NAME...` (options such as -v skipped)
          if (!raw.empty() && raw[0] != '-') {
            scalars_.erase(raw);
            arrays_.erase(raw);
          }
          continue;
        }
        bool append_op = false;
        if (size_t n = assignment_prefix(raw, &append_op)) {
          const std::string name = raw.substr(0, n - (append_op ? 2 : 1));
          if (!declaring && std::none_of(prefix_saved.begin(), prefix_saved.end(),
                                         [&](const auto& p) { return p.first == name; })) {
            auto old = scalars_.find(name);
            prefix_saved.emplace_back(name, old == scalars_.end() ? std::nullopt : std::optional<Text>(old->second));
          }
          if (n == raw.size() && peek() == '(') {
            std::vector<Text> items = array_items();
            auto& dst = arrays_[name];
            if (std::find(array_order_.begin(), array_order_.end(), name) == array_order_.end())
              array_order_.push_back(name);
            if (!append_op) dst.clear();
            dst.insert(dst.end(), items.begin(), items.end());
            size_t chars = 0;
            for (const Text& t : dst) chars += t.size() + 1;
            if (chars > kMaxShellValue) {  // an array doubling itself, as `X+=( "${X[@]}" )` in a loop would
              while (!dst.empty() && chars > kMaxShellValue) chars -= dst.back().size() + 1, dst.pop_back();
              limit(start, name + " expands to more than " + std::to_string(kMaxShellValue) +
                               " characters: a launch script's values are short, so this is not read");
            }
            scalars_.erase(name);
          } else {
            Text value(w.begin() + std::min(n, w.size()), w.end());
            for (Ch& ch : value) ch.item_break = false;  // X="${A[@]}" joins the items with blanks
            if (append_op) {
              Text old = scalars_[name];
              old.insert(old.end(), value.begin(), value.end());
              value = std::move(old);
            }
            if (value.size() > kMaxShellValue) {
              value.resize(kMaxShellValue);
              limit(start, name + " expands to more than " + std::to_string(kMaxShellValue) +
                               " characters: a launch script's values are short, so this is not read");
            }
            scalars_[name] = std::move(value);
            scalar_loc_[name] = start;
          }
          continue;
        }
        if (declaring) continue;
        // A word that expands to nothing is no command word: bash drops it.
        if (w.empty() && !raw.empty() && raw.find_first_of("\"'") == std::string::npos) continue;
        // The command word: the assignments before it were its environment only.
        for (auto& [name, old] : prefix_saved) {
          if (old)
            scalars_[name] = std::move(*old);
          else
            scalars_.erase(name);
        }
        prefix_saved.clear();
      }
      quoted_empty.push_back(w.empty() && raw.find_first_of("\"'") != std::string::npos);
      words.push_back(std::move(w));
    }
    heredoc_body();
    // Only assignments (`CP=3`): status 0; an arithmetic command's status is its value's, not read.
    // A block's status (the last command it ran) is not followed: after its closing keyword the
    // status is not known.
    std::optional<bool> status = !words.empty() ? test_status(words, quoted_empty)
                                 : arithmetic || closing ? std::nullopt
                                                         : std::optional<bool>(true);
    if (status && negate) status = !*status;
    // A command of an if/while/until condition: the last one before `then`/`do` decides.
    last_was_condition_ = !frames_.empty() && frames_.back().in_condition;
    if (last_was_condition_) frames_.back().cond = status;
    if (!words.empty() && !kNotLaunchers.count(str(words.front()))) {
      std::vector<ShellToken> tokens;
      for (const Text& w : words) split(w, tokens);
      if (collect(tokens)) command_flags_ = true;
    }
    // Each element of a pipeline runs in a subshell (bash without `lastpipe`): `TP=4 | cat`
    // leaves TP as it was.
    if (after_pipe || (peek() == '|' && peek(1) != '|'))
      for (auto& [name, old] : prefix_saved) {
        if (old) scalars_[name] = std::move(*old);
        else scalars_.erase(name);
      }
    if (skipped) restore(*skipped);
    return status;
  }

  /// A compound command being read (`if`, `while`, `until`, `for`, `case`, `{`): whether its
  /// current part runs. An if/while/until condition runs (its last command's status decides,
  /// where test_status knows it); a branch runs by it. From a condition whose status is not
  /// known on, every branch of the if is read (if_lines); a loop runs its body once, or not at
  /// all where its condition is known to end it at once; every branch of a case is read.
  enum class Block : uint8_t { kIf, kWhile, kUntil, kFor, kCase, kGroup, kSubshell };
  /// The script's variables at one point: restored at a subshell's `)` (bash runs it in a child
  /// process, so what it assigns is gone there), at a pipeline element's end, and after a
  /// command read without its effects (Snapshot).
  struct SavedVars {
    std::map<std::string, Text> scalars;
    std::map<std::string, SourceLoc> scalar_loc;
    std::map<std::string, std::vector<Text>> arrays;
    std::vector<std::string> array_order;
  };
  struct Frame {
    Block kind = Block::kIf;
    bool outer_skip = false;        ///< inside a part that does not run: nothing here runs
    bool skip = false;              ///< the current part does not run
    bool in_condition = false;      ///< between if/elif/while/until and then/do
    bool any_taken = false;         ///< an if branch has certainly run
    std::optional<bool> cond;       ///< the status of the condition's last command
    bool cond_unknown = false;      ///< the condition is a list (`a && b`): not evaluated
    bool unknown_recorded = false;  ///< the if's line is in if_lines
    SourceLoc at;                   ///< the opening keyword
    bool subject_read = false;      ///< case: its word has been read
    bool fall_through = false;      ///< case: `;&` after a branch that ran: the next one runs
    std::optional<std::string> subject;  ///< case: the word's value, where it could be read
    /// A subshell: the variables to restore at its `)`; another block: the variables from before
    /// it, restored at its end when it is a pipeline's element.
    std::shared_ptr<const SavedVars> saved;
    bool function_body = false;              ///< `{`: a function's body
    bool after_pipe = false;                 ///< opened as a pipeline's element after a `|`
    /// A function body: each name made local in it (`local`, or `declare`/`typeset` without -g)
    /// with its value from before, restored at the body's `}` as bash ends the local's scope.
    struct Local {
      std::string name;
      std::optional<Text> scalar;
      std::optional<SourceLoc> loc;
      std::optional<std::vector<Text>> array;
    };
    std::vector<Local> locals;
  };
  /// Makes `name` local to the innermost function body being read (no-op outside one, or when
  /// it already is): its value from before is kept for the body's end.
  void make_local(const std::string& name) {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
      if (!f->function_body) continue;
      for (const Frame::Local& l : f->locals)
        if (l.name == name) return;
      Frame::Local l{name, std::nullopt, std::nullopt, std::nullopt};
      if (auto it = scalars_.find(name); it != scalars_.end()) l.scalar = it->second;
      if (auto it = scalar_loc_.find(name); it != scalar_loc_.end()) l.loc = it->second;
      if (auto it = arrays_.find(name); it != arrays_.end()) l.array = it->second;
      f->locals.push_back(std::move(l));
      return;
    }
  }
  /// At a function body's `}`: its locals get their values from before back.
  void end_locals(const Frame& f) {
    for (auto l = f.locals.rbegin(); l != f.locals.rend(); ++l) {
      if (l->scalar) scalars_[l->name] = *l->scalar;
      else scalars_.erase(l->name);
      if (l->loc) scalar_loc_[l->name] = *l->loc;
      else scalar_loc_.erase(l->name);
      if (l->array) arrays_[l->name] = *l->array;
      else arrays_.erase(l->name);
    }
  }
  /// A case branch's `pattern)` (alternatives split at `|`): whether the branch runs. The
  /// first branch whose pattern matches the case's word runs (bash's glob: `*`, `?`, `\c`; a
  /// quoted alternative matches its text literally); the others do not. A pattern or word it
  /// cannot read (`[...]`, an expansion) runs its branch and every later one, listed in
  /// if_lines.
  void case_branch(std::string pattern) {
    Frame& f = frames_.back();
    const size_t b = pattern.find_first_not_of(" \t(");
    pattern = b == std::string::npos ? std::string() : pattern.substr(b);
    while (!pattern.empty() && is_blank(pattern.back())) pattern.pop_back();
    bool known = f.subject.has_value() && pattern.find_first_of("$`[") == std::string::npos;
    bool hit = false;
    for (size_t from = 0, bar = 0; known && !hit && bar != std::string::npos; from = bar + 1) {
      bar = pattern.find('|', from);
      std::string alt = pattern.substr(from, bar == std::string::npos ? std::string::npos : bar - from);
      const size_t l = alt.find_first_not_of(" \t"), r = alt.find_last_not_of(" \t");
      alt = l == std::string::npos ? std::string() : alt.substr(l, r - l + 1);
      if (alt.size() >= 2 && (alt.front() == '"' || alt.front() == '\'') && alt.back() == alt.front()) {
        hit = alt.substr(1, alt.size() - 2) == *f.subject;
      } else if (alt.find_first_of("\"'") != std::string::npos) {
        known = false;
      } else {
        const std::optional<bool> m = glob_match(alt, *f.subject, pattern_budget_);
        known = m.has_value();
        hit = m.value_or(false);
      }
    }
    if (f.fall_through && !f.outer_skip) {
      f.skip = false;
      f.fall_through = false;
    } else if (f.outer_skip || f.any_taken) {
      f.skip = true;
    } else if (known) {
      f.skip = !hit;
      f.any_taken = hit;
    } else {
      f.skip = false;
      if (!f.unknown_recorded) out_.if_lines.push_back(f.at.line);
      f.unknown_recorded = true;
    }
  }
  static const char* opener(Block k) {
    switch (k) {
      case Block::kIf: return "if";
      case Block::kWhile: return "while";
      case Block::kUntil: return "until";
      case Block::kFor: return "for";
      case Block::kCase: return "case";
      case Block::kGroup: return "{";
      case Block::kSubshell: return "(";
    }
    return "";
  }
  static const char* closer(Block k) {
    switch (k) {
      case Block::kIf: return "fi";
      case Block::kWhile:
      case Block::kUntil:
      case Block::kFor: return "done";
      case Block::kCase: return "esac";
      case Block::kGroup: return "}";
      case Block::kSubshell: return ")";
    }
    return "";
  }
  bool skipping() const { return !frames_.empty() && (frames_.back().skip || frames_.back().outer_skip); }
  /// A reserved word at a command's start: updates the blocks and answers true, or false for
  /// any other word. A keyword out of place (`fi` with no `if` open) is a syntax error, as bash
  /// says ("syntax error near unexpected token").
  bool keyword(const std::string& raw, const SourceLoc& at) {
    for (Block b : {Block::kIf, Block::kWhile, Block::kUntil, Block::kFor, Block::kCase, Block::kGroup}) {
      if (raw != opener(b)) continue;
      Frame f;
      f.kind = b;
      f.outer_skip = skipping();
      f.in_condition = f.kind == Block::kIf || f.kind == Block::kWhile || f.kind == Block::kUntil;
      f.at = at;
      f.skip = f.kind == Block::kCase;  // nothing runs before a case's first pattern
      // A compound command may be a pipeline's element, which runs in a subshell: the
      // variables from before it, restored at its end if a `|` precedes or follows it.
      f.saved = std::make_shared<const SavedVars>(saved_vars());
      f.after_pipe = command_after_pipe_;
      frames_.push_back(std::move(f));
      return true;
    }
    static const std::map<std::string, std::vector<Block>> kInner = {
        {"then", {Block::kIf}}, {"elif", {Block::kIf}},  {"else", {Block::kIf}},  {"fi", {Block::kIf}},
        {"do", {Block::kWhile, Block::kUntil, Block::kFor}}, {"done", {Block::kWhile, Block::kUntil, Block::kFor}},
        {"esac", {Block::kCase}}, {"}", {Block::kGroup}}};
    auto k = kInner.find(raw);
    if (k == kInner.end()) return false;
    const bool fits = !frames_.empty() && std::find(k->second.begin(), k->second.end(), frames_.back().kind) !=
                                              k->second.end();
    // `then`/`do` only after a condition, `elif`/`else`/`fi` only after one (not inside it).
    const bool in_cond = fits && frames_.back().in_condition;
    if (!fits || ((raw == "then" || raw == "do") != in_cond && frames_.back().kind != Block::kFor)) {
      const Block b = k->second.front();
      const std::string owner = b == Block::kWhile ? "while/until/for" : opener(b);
      limit(at, "syntax error near unexpected token '" + raw + "': no open '" + owner + "' it belongs to here");
      return true;
    }
    Frame& f = frames_.back();
    if (raw == "fi" || raw == "done" || raw == "esac" || raw == "}") {
      if (f.function_body) end_locals(f);
      if (f.after_pipe || pipe_follows()) restore_vars(*f.saved);  // `... | while ...; done`, `done | tee`
      frames_.pop_back();
      if (raw == "esac") case_pattern_ = false;
      return true;
    }
    if (raw == "elif") {
      f.in_condition = true;
      f.cond.reset();
      f.cond_unknown = false;
      f.skip = f.outer_skip || f.any_taken;  // after a branch that ran, the condition is not run
      return true;
    }
    if (raw == "else") {
      f.skip = f.outer_skip || f.any_taken;
      return true;
    }
    // then / do: whether the part that starts runs. A loop body that runs is read once: listed.
    if (f.kind == Block::kFor) {  // `for x in ...; do`
      if (!f.outer_skip) out_.if_lines.push_back(f.at.line);
      return true;
    }
    f.in_condition = false;
    const bool known = !f.cond_unknown && f.cond.has_value();
    const bool runs = known && f.cond.value_or(false) != (f.kind == Block::kUntil);
    if (f.outer_skip || f.any_taken) {
      f.skip = true;
    } else if (known) {
      f.skip = !runs;
      if (runs && f.kind == Block::kIf) f.any_taken = true;
      if (runs && f.kind != Block::kIf) out_.if_lines.push_back(f.at.line);  // a loop body read once
    } else {
      f.skip = false;  // not known: the part is read as if it ran
      if (!f.unknown_recorded) {
        out_.if_lines.push_back(f.at.line);
        f.unknown_recorded = true;
      }
    }
    return true;
  }

  /// The exit status of a test command, as bash's `test` builtin and `[[` give it for the forms
  /// a launch script uses to default a variable (`[ -z "$TP" ] && TP=2`): no operand; one operand
  /// (non-empty); `!`, `-n`, `-z` and one operand; `=`, `==`, `!=`, `-eq`, `-ne`, `-lt`, `-le`,
  /// `-gt`, `-ge` between two (integers for the last six); each of these after a `!`. `true` and
  /// `:` succeed, `false` fails. Anything else (file tests, patterns, `-a`/`-o`, a command):
  /// nullopt. `[` and `test` drop an unquoted empty expansion, as word splitting does; `[[` keeps
  /// every word, empty or not.
  static std::optional<bool> test_status(const std::vector<Text>& words, const std::vector<bool>& quoted_empty) {
    if (words.empty()) return std::nullopt;
    const std::string cmd = str(words.front());
    if (cmd == "true" || cmd == ":") return true;
    if (cmd == "false") return false;
    const bool dbl = cmd == "[[";
    if (cmd != "[" && !dbl && cmd != "test") return std::nullopt;
    std::vector<std::string> a;
    for (size_t k = 1; k < words.size(); ++k) {
      if (words[k].empty()) {
        if (dbl || quoted_empty[k]) a.emplace_back();
        continue;
      }
      std::vector<ShellToken> t;
      split(words[k], t);
      if (dbl && t.size() != 1) return std::nullopt;  // `[[` does not split: a blank inside is one word
      for (ShellToken& x : t) a.push_back(std::move(x.text));
    }
    if (cmd != "test") {
      if (a.empty() || a.back() != (dbl ? "]]" : "]")) return std::nullopt;
      a.pop_back();
    }
    return test_args(a, dbl);
  }

  static std::optional<bool> test_args(const std::vector<std::string>& a, bool dbl) {
    // `[` and `test` read decimal integers (a leading 0 is decimal); `[[` evaluates its
    // operands as arithmetic, where a leading 0 is octal (010 is 8, 08 an error) and an empty
    // operand is 0. Anything else `[[` would evaluate (names, 0x, expressions): not read.
    const auto integer = [dbl](const std::string& x) -> std::optional<int64_t> {
      if (dbl && x.empty()) return 0;
      int64_t v = 0;
      const char* b = x.data();
      const char* e = x.data() + x.size();
      const bool neg = dbl && b != e && *b == '-';
      if (b != e && (*b == '+' || neg)) ++b;
      const bool octal = dbl && e - b > 1 && *b == '0';
      auto [p, ec] = std::from_chars(b, e, v, octal ? 8 : 10);
      if (b == e || ec != std::errc() || p != e) return std::nullopt;
      return neg ? -v : v;
    };
    switch (a.size()) {
      case 0:
        return false;
      case 1:
        return !a[0].empty();
      case 2:
        if (a[0] == "!") return a[1].empty();
        if (a[0] == "-n") return !a[1].empty();
        if (a[0] == "-z") return a[1].empty();
        return std::nullopt;
      case 3: {
        const std::string& op = a[1];
        if (op == "=" || op == "==" || op == "!=") {
          // `[[ A == B ]]` matches B as a pattern: only a literal B is read.
          if (dbl && a[2].find_first_of("*?[\\") != std::string::npos) return std::nullopt;
          return (a[0] == a[2]) == (op != "!=");
        }
        static const std::set<std::string> kIntOps = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"};
        if (kIntOps.count(op)) {
          const auto x = integer(a[0]), y = integer(a[2]);
          if (!x || !y) return std::nullopt;
          if (op == "-eq") return *x == *y;
          if (op == "-ne") return *x != *y;
          if (op == "-lt") return *x < *y;
          if (op == "-le") return *x <= *y;
          if (op == "-gt") return *x > *y;
          return *x >= *y;
        }
        if (a[0] == "!") {
          const auto r = test_args({a[1], a[2]}, dbl);
          if (r) return !*r;
        }
        return std::nullopt;
      }
      case 4:
        if (a[0] == "!") {
          const auto r = test_args({a[1], a[2], a[3]}, dbl);
          if (r) return !*r;
        }
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }

  /// What a command changes, for reading a command without its effects (a skipped `&&`/`||`
  /// side): restored after it.
  struct Snapshot {
    SavedVars vars;
    bool command_flags = false;
    size_t flags = 0, if_lines = 0, list_lines = 0, defaults_used = 0;
  };
  Snapshot snapshot() const {
    return Snapshot{saved_vars(),          command_flags_,          out_.flags.size(),
                    out_.if_lines.size(), out_.list_lines.size(), out_.defaults_used.size()};
  }
  SavedVars saved_vars() const { return SavedVars{scalars_, scalar_loc_, arrays_, array_order_}; }
  void restore_vars(const SavedVars& v) {
    scalars_ = v.scalars;
    scalar_loc_ = v.scalar_loc;
    arrays_ = v.arrays;
    array_order_ = v.array_order;
  }
  void restore(const Snapshot& s) {
    restore_vars(s.vars);
    command_flags_ = s.command_flags;
    out_.flags.resize(s.flags);
    out_.if_lines.resize(s.if_lines);
    out_.list_lines.resize(s.list_lines);
    out_.defaults_used.resize(s.defaults_used);
  }

  /// Sets scalar `name` to `text` (a value it could not compute: no integer flag accepts it).
  void set_text(const std::string& name, const std::string& text, const SourceLoc& at) {
    Text value;
    append(value, text.substr(0, kMaxShellValue), at);
    scalars_[name] = std::move(value);
    scalar_loc_[name] = at;
  }

  /// One word of `let` or one expression of `(( ))`: NAME=expr, NAME op= expr (+ - * / %),
  /// NAME++, NAME--, ++NAME, --NAME, evaluated as `$((...))` is. A variable it cannot compute
  /// holds the expression's text (`$((...))` without blanks), so a flag that reads it says its
  /// value is invalid, with the note of an unevaluated expression, never a stale value.
  void let_assign(std::string word, const SourceLoc& at) {
    auto trim = [&word] {
      word.erase(0, std::min(word.size(), word.find_first_not_of(" \t")));
      while (!word.empty() && std::isspace(static_cast<unsigned char>(word.back()))) word.pop_back();
    };
    trim();
    // `(((N=4)))`: parentheses around the whole expression group it and change nothing.
    while (word.size() >= 2 && word.front() == '(' && word.back() == ')') {
      int depth = 0;
      size_t k = 0;
      for (; k < word.size(); ++k) {
        depth += word[k] == '(' ? 1 : word[k] == ')' ? -1 : 0;
        if (depth == 0) break;
      }
      if (k + 1 != word.size()) break;  // `(a)+(b)`: the first `(` closes before the end
      word = word.substr(1, word.size() - 2);
      trim();
    }
    std::string prefix;
    if (word.size() > 2 && (word.rfind("++", 0) == 0 || word.rfind("--", 0) == 0)) {
      prefix = word.substr(0, 2);
      word.erase(0, 2);
    }
    size_t n = 0;
    while (n < word.size() && (n ? is_name_char(word[n]) : is_name_start(word[n]))) ++n;
    if (n == 0) return;
    const std::string compact = without_blanks("$((" + prefix + word + "))");
    const std::string name = word.substr(0, n);
    std::string rest = word.substr(n);
    rest.erase(0, std::min(rest.size(), rest.find_first_not_of(" \t")));
    if (!prefix.empty() && !rest.empty()) return set_text(name, compact, at);
    const std::string& incdec = prefix.empty() ? rest : prefix;  // ++N, --N, N++, N--
    std::string expr;
    if (incdec == "++" || incdec == "--") {
      expr = name + (incdec == "++" ? "+1" : "-1");
    } else if (rest.size() >= 2 && rest[1] == '=' && std::string("+-*/%").find(rest[0]) != std::string::npos) {
      expr = name + rest[0] + "(" + rest.substr(2) + ")";
    } else if (!rest.empty() && rest[0] == '=' && (rest.size() == 1 || rest[1] != '=')) {
      expr = rest.substr(1);
    } else {
      return;  // a test (`let N==1`) or an operator not read: assigns nothing
    }
    bool deep = false;
    std::vector<std::string> assigned;
    auto v = Arith::eval(expr, scalars_, &deep, &assigned);
    if (deep) limit(at, "let nests parentheses or signs more than " + std::to_string(kMaxShellNesting) +
                            " deep: a launch script's arithmetic is shallow, so this is not read");
    for (const std::string& other : assigned) set_text(other, compact, at);
    set_text(name, v ? std::to_string(*v) : compact, at);
  }

  /// Skips the target word of a redirection or here-string (on the same line), if any.
  void skip_redirect_target() {
    skip_blanks();
    if (eof() || peek() == '\n' || peek() == ';' || peek() == '&' || peek() == '|') return;
    std::string raw;
    word(&raw);
  }

  /// `<<WORD` or `<<-WORD` at the cursor: remembers the delimiter; the body starts on the next line.
  void heredoc_start() {
    advance();
    advance();
    if (peek() == '-') advance();
    skip_blanks();
    std::string raw;
    Text delim = word(&raw);
    heredoc_delims_.push_back(str(delim));
  }

  /// Skips the bodies of the here-documents the command opened: its text is data, not commands.
  void heredoc_body() {
    if (heredoc_delims_.empty()) return;
    while (!eof() && peek() != '\n') advance();
    for (const std::string& delim : heredoc_delims_) {
      while (!eof()) {
        advance();  // the newline before the line
        std::string line;
        while (!eof() && peek() != '\n') {
          line += peek();
          advance();
        }
        size_t b = line.find_first_not_of(" \t");
        size_t e = line.find_last_not_of(" \t\r");
        if (b != std::string::npos && line.substr(b, e - b + 1) == delim) break;
      }
    }
    heredoc_delims_.clear();
  }

  /// Splits expanded text into words (fields()) located at their first character, removing a
  /// quote pair around a whole word (a value that holds its own quotes, `X="'99,1,0'"`).
  static void split(const Text& t, std::vector<ShellToken>& out) {
    for (const Text& f : fields(t)) {
      size_t b = 0, e = f.size();
      if (e - b >= 2 && (f[b].c == '\'' || f[b].c == '"') && f[e - 1].c == f[b].c && !f[b].quoted &&
          !f[e - 1].quoted) {
        ++b;
        --e;
      }
      ShellToken tok;
      tok.loc = f[std::min(b, f.size() - 1)].loc;
      for (size_t j = b; j < e; ++j) tok.text += f[j].c;
      out.push_back(std::move(tok));
    }
  }

  /// Adds the flags among `tokens` to out_.flags; true when there was one.
  bool collect(const std::vector<ShellToken>& tokens) {
    bool any = false;
    bool in_flag = false;
    for (const ShellToken& tok : tokens) {
      if (tok.text.size() > 2 && tok.text.compare(0, 2, "--") == 0) {
        ShellFlag f;
        f.loc = tok.loc;
        size_t eq = tok.text.find('=');
        f.name = tok.text.substr(0, eq);
        if (eq != std::string::npos) {
          SourceLoc vloc = tok.loc;
          vloc.col += static_cast<int32_t>(eq + 1);
          f.values.push_back(ShellToken{tok.text.substr(eq + 1), vloc});
        }
        out_.flags.push_back(std::move(f));
        in_flag = true;
        any = true;
      } else if (tok.text == "--") {
        in_flag = false;
      } else if (in_flag) {
        out_.flags.back().values.push_back(tok);
      }
    }
    return any;
  }

  const std::string* s_;
  size_t i_ = 0;
  int32_t line_ = 1, col_ = 1;
  int32_t file_;
  std::map<std::string, Text> scalars_;
  std::map<std::string, SourceLoc> scalar_loc_;
  std::map<std::string, std::vector<Text>> arrays_;
  std::vector<std::string> array_order_;
  bool command_flags_ = false;
  std::vector<Frame> frames_;         ///< the compound commands open, innermost last
  bool last_was_condition_ = false;   ///< the last command read was part of a condition
  bool case_pattern_ = false;         ///< a case branch's `pattern)` comes next
  bool pipe_next_ = false;            ///< the next command is a pipeline's element after a `|`
  bool command_after_pipe_ = false;   ///< the command being read follows a `|`
  size_t expanded_ = 0;  ///< characters produced by expansions so far (kMaxShellExpansion)
  int64_t pattern_budget_ = kMaxPatternSteps;  // glob steps left for ${...} patterns
  int plain_depth_ = 0;  ///< nesting of plain() (kMaxShellNesting)
  int dquote_ = 0;       ///< expansions being read inside double quotes (their text is quoted)
  std::vector<std::string> heredoc_delims_;  // opened by the current command
  ShellArgs out_;
};

}  // namespace

ShellArgs read_shell_args(int32_t file, const std::string& text, const std::map<std::string, std::string>& env) {
  return Shell(file, text, env).run();
}

}  // namespace sc::config
