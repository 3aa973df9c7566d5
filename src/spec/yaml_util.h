// yaml-cpp helpers shared by the spec loaders: located errors, key checks and scalar readers.
// Only src/spec and the FSDP spec loader include it (yaml-cpp stays behind the spec front door).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "support/diagnostics.h"
#include "support/nesting.h"
#include "support/source.h"

namespace sc::yaml_util {

/// One key of a map with its value.
struct Entry {
  YAML::Node key;
  YAML::Node value;
};
/// A map's keys by name.
using Fields = std::map<std::string, Entry>;

/// Sections of a spec with the keys each allows ("" is the top level), for "'k' belongs in s"
/// hints on unknown keys.
using Sections = std::vector<std::pair<std::string, const std::vector<std::string>*>>;

/// Errors a loader reports before it only counts them, so a large broken spec (or a junk file
/// that happens to parse) stays readable and quick to print.
inline constexpr int kMaxErrors = 100;

/// Deepest nesting of flow collections ("[[[[...") prescan() lets through: yaml-cpp scans deeper
/// text slowly before it gives up. The same cap as every JSON input's (support/nesting.h).
inline constexpr int kMaxFlowDepth = kMaxInputNesting;

/// "a map", "a list", "nothing" or the quoted scalar (cut at 40 characters), for "got ..." in
/// messages.
inline std::string describe(const YAML::Node& n) {
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  std::string s = n.Scalar();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return fmt::format("'{}'", s);
}

/// JSON text that nlohmann::json accepted, made readable by yaml-cpp with the same values: a
/// UTF-16 surrogate pair escape (`\ud83d\ude00`, valid JSON for one code point above U+FFFF)
/// becomes YAML's `\U0001f600`, which yaml-cpp 0.7 reads (it refuses each half of the pair).
/// Everything else is unchanged; a line holding a pair has its later columns 2 less per pair.
std::string json_for_yaml(const std::string& json_text);

/// `s` with every byte below 0x20, 0x7f and every byte from 0x80 shown as \xNN (lower-case hex),
/// so text from yaml-cpp's messages or from junk input prints safely. Other bytes are unchanged.
std::string printable(std::string_view s);

/// "; did you mean 'x'?" with the closest of `names` to `word` (closest_match), or "" when none
/// is close. Meant to follow a message directly.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& names);

/// A spec's default name: the file stem of `path` ("specs/a.yaml" -> "a"), or `path` itself when
/// it has no stem.
std::string default_name(const std::string& path);

/// Whether `text` declares top-level key `key`: a line that starts at column 0 with `key:` (or
/// `"key":`), in one pass without parsing (time linear in the text, so front-end detection costs
/// no YAML parse); a flow-style document (`{...}` at column 0) is parsed once instead. Broken
/// YAML with such a line counts as declaring it, so that its errors come from the right
/// front-end. False for text with a NUL byte and for any other document. Never throws.
bool declares_key(const std::string& text, const std::string& key);

/// True when `path` ends in .yaml or .yml: only such files are specs with YAML keys (a CSV,
/// TOML, JSON or launch script never declares `budget:` or a front-end key, and parsing a
/// 34 MB schedule CSV as YAML to find out took longer than verifying it).
bool has_yaml_extension(const std::string& path);

/// A spec file read with read_input_file() and registered with register_source().
struct SpecFile {
  int32_t file = -1;
  std::string text;
};

/// Reads and registers the spec file `path`. When it cannot be read, registers it with no text,
/// reports "cannot read the spec: <why>" (why from read_input_file()) at its 1:1 and returns
/// nullopt.
std::optional<SpecFile> read_spec_file(const std::string& path, Diagnostics& diags);

/// How a Reader words and caps its errors.
struct ReaderOptions {
  /// Errors reported before the rest are only counted (see note_unshown()).
  int max_errors = kMaxErrors;
  /// choice() and guard() pass user text and yaml-cpp messages through printable(); false
  /// prints them as given.
  bool escape_text = true;
  /// fields(): an unknown key that one of these sections allows gets "'k' belongs in s" when no
  /// allowed key is close to it (null: no such hint).
  const Sections* sections = nullptr;
  /// fields(): a duplicate key is named with its section ("p2p.latency") rather than bare.
  bool qualify_duplicates = false;
};

/// The common part of a spec loader: it turns yaml-cpp marks into SourceLocs of one registered
/// file, reports errors to a Diagnostics (capped at ReaderOptions::max_errors) and reads keys and
/// scalars with the project's wording. Loaders derive from it and add their own readers. Every
/// reader reports its errors and returns nullopt (or skips the entry); none throws, except that
/// yaml-cpp may throw YAML::Exception on a node it cannot convert (see guard()).
class Reader {
 public:
  /// `file` is an index from register_source(); `diags` must outlive the Reader.
  Reader(int32_t file, Diagnostics& diags, ReaderOptions options = {});

  /// The 1-based location of 0-based yaml-cpp line and column (negative values count as 0).
  SourceLoc at(int64_t line0, int64_t col0) const;
  /// Line 1, column 1 of the file.
  SourceLoc file_start() const { return SourceLoc{file_, 1, 1}; }
  /// Where `n` starts; file_start() when it has no mark.
  SourceLoc loc(const YAML::Node& n) const;
  /// Where `e`'s value starts, or its key for a null value ("ranks:"), which carries the mark of
  /// whatever follows.
  SourceLoc loc(const Entry& e) const { return e.value.IsNull() ? loc(e.key) : loc(e.value); }

  /// Reports an error unless max_errors are already reported; counts it either way.
  void error(const SourceLoc& l, std::string message);
  /// Notes "N more errors are not shown" at file_start() when errors were only counted.
  void note_unshown();

  /// Refuses text yaml-cpp would read slowly or wrongly before it is parsed: a NUL byte ("the spec
  /// is not text: it holds a NUL byte"), flow collections nested deeper than kMaxFlowDepth
  /// ("collections are nested more than 256 levels deep") and a second document after content
  /// ("a spec file holds one YAML document; remove everything from here on"). Reports the first
  /// at its line:col and returns false; true when none is found.
  bool prescan(std::string_view text);
  /// True when prescan() saw anything besides blanks, comments, directives and document markers.
  bool has_content() const { return has_content_; }

  /// Parses `text` with yaml-cpp. A parse error is reported at its mark (file_start() without one)
  /// as "collections are nested too deeply" or "invalid YAML: <yaml-cpp's message>" (through
  /// printable()), and nullopt returned.
  std::optional<YAML::Node> parse(const std::string& text);

  /// Runs `load` (which returns a std::optional); a YAML::Exception it throws is reported at
  /// file_start() as "cannot read the spec: <message>" (uncapped) and gives nullopt.
  template <typename Load>
  auto guard(Load&& load) -> decltype(load()) {
    try {
      return load();
    } catch (const YAML::Exception& e) {
      diags_.error(file_start(), fmt::format("cannot read the spec: {}", shown(e.msg)));
      return std::nullopt;
    }
  }

  /// The keys of `map` (which must be a map) by name. Reports, in map order and each at its key:
  /// a key that is not a scalar ("a key must be a name, got ..."), a key not in `allowed`
  /// ("unknown key 'k' in <section>" with a "did you mean", a "belongs in" hint or the allowed
  /// list; no " in ..." when `section` is empty) and a repeated key ("duplicate key 'k' (first
  /// given at line N)"). Reported keys are left out.
  Fields fields(const YAML::Node& map, const std::string& section, const std::vector<std::string>& allowed);

  /// True when e's value is a map; otherwise reports "<key> must be a map of <what>, got ..."
  /// ("<key> must be a map, got ..." when `what` is empty) at loc(e) and returns false.
  bool is_map(const Entry& e, const std::string& key, std::string_view what = {});
  /// A whole number in [min, max] written in decimal digits. Errors at loc(e): "<key> must be a
  /// whole number, got ...", "<key> must be at least <min>, got <v>", "<key> is too large (at
  /// most <max>)" (also for more than 18 digits).
  std::optional<int64_t> whole(const Entry& e, const std::string& key, int64_t min, int64_t max);
  /// true/True or false/False; otherwise "<key> must be true or false, got ..." at loc(e).
  std::optional<bool> boolean(const Entry& e, const std::string& key);
  /// One of `names`; otherwise "<key> must be one of a, b, got '<text>'" with a "did you mean",
  /// or "..., got <describe>" for a non-scalar, at loc(e).
  std::optional<std::string> choice(const Entry& e, const std::string& key, const std::vector<std::string>& names);
  /// A non-empty scalar; otherwise "<key> must be text, got ..." at loc(e).
  std::optional<std::string> text(const Entry& e, const std::string& key);
  /// A scalar read by `parse`, a parser shaped like those of support/units.h:
  /// std::optional<T> parse(std::string_view text, std::string* why). Errors at `l`: "<key> must be
  /// <what>, got ..." for a non-scalar, "<key>: <why>" when `parse` refuses the text.
  template <typename Parse>
  auto parsed(const YAML::Node& n, const SourceLoc& l, const std::string& key, std::string_view what,
              Parse parse) -> decltype(parse(std::string_view(), nullptr)) {
    if (!n.IsScalar()) {
      error(l, fmt::format("{} must be {}, got {}", key, what, describe(n)));
      return std::nullopt;
    }
    std::string why;
    auto v = parse(n.Scalar(), &why);
    if (!v) error(l, fmt::format("{}: {}", key, why));
    return v;
  }
  /// A duration in seconds (parse_duration_s: "1.5ms", "2us", ...). Errors at `l`: "<key> must be
  /// a duration such as 1.5ms, got ..." for a non-scalar, "<key>: <why>" for bad text.
  std::optional<double> duration(const YAML::Node& n, const SourceLoc& l, const std::string& key);
  /// A byte count (parse_bytes: "64MiB", "1GB", ...). Errors at `l`: "<key> must be a byte count
  /// such as 64MiB, got ..." for a non-scalar, "<key>: <why>" for bad text.
  std::optional<int64_t> bytes(const YAML::Node& n, const SourceLoc& l, const std::string& key);
  /// The `numerics: {max_relative_error, max_bias, deterministic}` tolerances (non-negative
  /// numbers; deterministic true or false): errors at the key or value ("numerics.max_bias: '-1'
  /// is not a non-negative number"); the values given are stored, the others left as they are.
  void numerics_tolerances(const Entry& e, std::optional<double>& max_relative_error, std::optional<double>& max_bias,
                           bool& deterministic);
  /// The spec version key `schedcheck: 1` (`v` null when it is absent): "missing required key
  /// 'schedcheck' (the spec version, 1)" at file_start(), "unsupported spec version N; this
  /// schedcheck reads version 1" or a whole() error at loc(*v).
  void check_version(const Entry* v);

 protected:
  /// `s` as messages show user text: through printable() unless escape_text is off.
  std::string shown(const std::string& s) const { return options_.escape_text ? printable(s) : s; }

  int32_t file_;
  Diagnostics& diags_;
  ReaderOptions options_;
  int errors_ = 0;  // errors found, reported or not
  bool has_content_ = false;
};

}  // namespace sc::yaml_util
