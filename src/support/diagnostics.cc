#include "support/diagnostics.h"
#include "support/escape.h"

#include <algorithm>
#include <ostream>
#include <string_view>

#include <fmt/format.h>

namespace sc {

void Diagnostics::error(const SourceLoc& loc, std::string message) {
  items_.push_back({Severity::kError, loc, std::move(message)});
  ++errors_;
}

void Diagnostics::warning(const SourceLoc& loc, std::string message) {
  items_.push_back({Severity::kWarning, loc, std::move(message)});
}

void Diagnostics::note(const SourceLoc& loc, std::string message) {
  items_.push_back({Severity::kNote, loc, std::move(message)});
}

void Diagnostics::merge(const Diagnostics& other) {
  for (const auto& d : other.items_) {
    items_.push_back(d);
    if (d.severity == Severity::kError) ++errors_;
  }
}

std::string escape_controls(std::string_view text) {
  std::string out;
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && ch != '\t' && ch != '\n') || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += ch;
  }
  return out;
}

namespace {
/// Replaces with '?' what a terminal must not be sent from a source line: control bytes (tab
/// kept) and DEL, and every byte outside a well-formed UTF-8 sequence (Latin-1 text, binary, a
/// sequence cut by the excerpt's window), so the excerpt is always valid UTF-8; well-formed
/// multibyte characters ("µs" in a YAML comment) are kept.
void replace_unprintable(std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) text[i] = '?';
      ++i;
      continue;
    }
    // The length of the sequence a lead byte starts (RFC 3629; C0, C1 and F5-FF start none),
    // and the range of its second byte (which rules out overlong forms and surrogates).
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    bool ok = n > 0 && i + n <= text.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(text[i + k]);
      ok = k == 1 ? b >= lo && b <= hi : b >= 0x80 && b <= 0xbf;
    }
    if (!ok) {
      text[i] = '?';
      ++i;
    } else {
      i += n;
    }
  }
}
}  // namespace

std::string format_diagnostic(const Diagnostic& d) {
  const char* sev = d.severity == Severity::kError     ? "error"
                    : d.severity == Severity::kWarning ? "warning"
                                                       : "note";
  std::string out = fmt::format("{}: {}: {}\n", escape_controls(format_loc(d.loc)), sev, escape_controls(d.message));
  if (d.loc.valid() && d.loc.line > 0) {
    std::string_view line = source_line(d.loc.file, d.loc.line);
    if (!line.empty()) {
      // Keep very long lines (CSV rows) readable: show a window around the column.
      // A column past the line's end (a location computed inside an expansion's text) points
      // at the end of the line.
      size_t col = d.loc.col > 0 ? std::min(static_cast<size_t>(d.loc.col - 1), line.size()) : 0;
      size_t start = 0;
      std::string prefix;
      if (line.size() > 120 && col > 60) {
        start = col - 60;
        prefix = "...";
      }
      std::string shown(line.substr(start, 120));
      replace_unprintable(shown);
      std::string suffix = start + shown.size() < line.size() ? "..." : "";
      out += fmt::format("  {}{}{}\n", prefix, shown, suffix);
      if (d.loc.col > 0) {
        std::string pad(prefix.size() + (col - start), ' ');
        for (size_t i = 0; i < col - start && i + start < line.size(); ++i)
          if (line[start + i] == '\t') pad[prefix.size() + i] = '\t';
        out += fmt::format("  {}^\n", pad);
      }
    }
  }
  return out;
}

void Diagnostics::print(std::ostream& os) const {
  std::vector<const Diagnostic*> sorted;
  for (const auto& d : items_) sorted.push_back(&d);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic* a, const Diagnostic* b) {
    if (a->loc.file != b->loc.file) return a->loc.file < b->loc.file;
    if (a->loc.line != b->loc.line) return a->loc.line < b->loc.line;
    return a->loc.col < b->loc.col;
  });
  for (const Diagnostic* d : sorted) os << format_diagnostic(*d);
}

namespace {
/// Levenshtein distance between `a` and `b`, or any value >= `bound` once the distance is known
/// to reach `bound`: only the diagonal band |i - j| < bound is filled, and a row whose cells all
/// reach `bound` ends the search. Time O(|a| * bound), memory O(|b|).
size_t edit_distance_below(const std::string& a, const std::string& b, size_t bound) {
  const size_t la = a.size(), lb = b.size();
  if ((la > lb ? la - lb : lb - la) >= bound) return bound;
  std::vector<size_t> prev(lb + 1, bound), cur(lb + 1, bound);
  for (size_t j = 0; j <= lb && j < bound; ++j) prev[j] = j;
  for (size_t i = 1; i <= la; ++i) {
    const size_t lo = i >= bound ? i - bound + 1 : 1, hi = std::min(lb, i + bound - 1);
    std::fill(cur.begin(), cur.end(), bound);
    cur[0] = i < bound ? i : bound;
    size_t row_min = cur[0];
    for (size_t j = lo; j <= hi; ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub, bound});
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min >= bound) return bound;
    std::swap(prev, cur);
  }
  return prev[lb];
}
}  // namespace

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.size() > kMaxSuggestedWord) return {};
  size_t best = std::max<size_t>(2, word.size() / 3) + 1;
  std::string out;
  for (const auto& c : candidates) {
    const size_t d = edit_distance_below(word, c, best);
    if (d < best) {
      best = d;
      out = c;
    }
  }
  if (!out.empty() || word.size() < 9) return out;
  // An abbreviation of a long name ("enable_async_tp" for "enable_async_tensor_parallel") is
  // too far by edits: the one candidate sharing a prefix of all but the word's last two
  // characters is suggested (none when several do).
  const size_t need = word.size() - 2;
  size_t found = 0;
  for (const auto& c : candidates)
    if (c.size() > word.size() && c.compare(0, need, word, 0, need) == 0) {
      out = c;
      ++found;
    }
  if (found == 1) return out;
  // The same words, some shortened ("sequence_len" for "seq_len", "seq_length" for "seq_len"):
  // split at '_' and '-', the same number of parts, and of each pair of parts one begins the
  // other (at least two characters); suggested when exactly one candidate fits.
  auto parts = [](const std::string& w) {
    std::vector<std::string_view> out;
    size_t start = 0;
    for (size_t i = 0; i <= w.size(); ++i)
      if (i == w.size() || w[i] == '_' || w[i] == '-') {
        out.emplace_back(w.data() + start, i - start);
        start = i + 1;
      }
    return out;
  };
  const std::vector<std::string_view> mine = parts(word);
  if (mine.size() < 2) return {};
  found = 0;
  for (const auto& c : candidates) {
    const std::vector<std::string_view> theirs = parts(c);
    bool fits = theirs.size() == mine.size() && c != word;
    for (size_t i = 0; fits && i < mine.size(); ++i) {
      const std::string_view a = mine[i], b = theirs[i];
      const std::string_view& shorter = a.size() < b.size() ? a : b;
      const std::string_view& longer = a.size() < b.size() ? b : a;
      fits = a == b || (shorter.size() >= 2 && longer.substr(0, shorter.size()) == shorter);  // "--x": empty parts
    }
    if (fits) {
      out = c;
      ++found;
    }
  }
  return found == 1 ? out : std::string();
}

}  // namespace sc
