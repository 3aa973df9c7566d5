// Diagnostics for user input: collected, sorted by location and all reported before stopping.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "support/source.h"

namespace sc {

enum class Severity { kError, kWarning, kNote };

/// One message about the input, printed as `file:line:col: error: message`, then the source
/// line and a caret under `loc.col`. Messages are lower-case without a final period.
struct Diagnostic {
  Severity severity = Severity::kError;
  SourceLoc loc;
  std::string message;
};

/// An ordered collection of diagnostics. A spec with any error is rejected (exit code 2).
class Diagnostics {
 public:
  void error(const SourceLoc& loc, std::string message);
  void warning(const SourceLoc& loc, std::string message);
  void note(const SourceLoc& loc, std::string message);

  bool has_errors() const { return errors_ > 0; }
  size_t error_count() const { return errors_; }
  const std::vector<Diagnostic>& all() const { return items_; }

  /// Appends every diagnostic of `other`.
  void merge(const Diagnostics& other);

  /// Prints all diagnostics, errors first by location, each with its source line and caret.
  void print(std::ostream& os) const;

 private:
  std::vector<Diagnostic> items_;
  size_t errors_ = 0;
};

/// Formats one diagnostic (with source line and caret when the location has a file).
std::string format_diagnostic(const Diagnostic& d);

/// Longest word `closest_match` looks for (bytes); no flag, key or name is near that long, and a
/// longer word (a fuzzer's 40 KB "flag") would cost |word| x |candidates| for nothing.
inline constexpr size_t kMaxSuggestedWord = 128;

/// "did you mean 'x'?" suggestion: the candidate with the smallest edit distance to `word`
/// when that distance is at most max(2, |word|/3); else the one candidate that abbreviates or
/// spells out `word` ("enable_async_tp" for "enable_async_tensor_parallel"; "sequence_len" and
/// "seq_length" for "seq_len": the same '_'/'-' parts, of each pair one beginning the other);
/// empty when none is close or when `word` is longer than kMaxSuggestedWord. Time O(|word| * |candidates| * max(2, |word|/3)) at worst:
/// each distance is computed in a band and abandoned once it cannot beat the best so far.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace sc
