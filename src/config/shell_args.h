// The command-line flags of a shell launch script or an arguments file, each located at the
// file:line:col where its text was written (Megatron-LM's launch scripts; docs/facts/config-keys.md#megatron-example-scripts).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "support/source.h"

namespace sc::config {

/// One word of the expanded command line: its text and where its first character was written.
struct ShellToken {
  std::string text;
  SourceLoc loc;
};

/// A `--name [value ...]` flag: `name` keeps its leading dashes ("--micro-batch-size");
/// `values` are the words that follow it up to the next flag (`--name=value` gives one value).
struct ShellFlag {
  std::string name;
  SourceLoc loc;
  std::vector<ShellToken> values;
};

/// A scalar variable of the script with the location of its last assignment.
struct ShellVar {
  std::string value;
  SourceLoc loc;
};

/// What read_shell_args() found.
struct ShellArgs {
  /// Every flag in command-line order (the order argparse sees them: the last one wins).
  std::vector<ShellFlag> flags;
  /// Scalar variables after the whole script ran (arrays are not listed).
  std::map<std::string, ShellVar> vars;
  /// Lines of blocks read approximately: an `if`, `while`, `until` or `case` with a condition (or
  /// a case pattern or word) schedcheck does not evaluate (a command, a file test, `a && b`,
  /// `[...]`), from which on every branch was read as if it ran; each loop whose body was read
  /// (once); each function definition (its body read there). Blocks whose conditions it
  /// evaluates run only their branch and are not listed.
  std::vector<int32_t> if_lines;
  /// Lines of `&&` / `||` whose left side's status schedcheck does not know (a command it does
  /// not run, a test it does not evaluate): the right side was read as if it ran.
  std::vector<int32_t> list_lines;
  /// The first limit the script ran into, or its first syntax error (a keyword out of place, a
  /// block left open), as a message ("A expands to more than 65536
  /// characters ..."), and where; empty when none. A launch script's values are short and
  /// shallow; these guard against `A="$A$A"` chains, `$V` repeated thousands of times and
  /// nesting thousands deep. After a limit, expansions that would pass it are cut.
  std::string limit_error;
  SourceLoc limit_loc;
  /// `${NAME:-default}` (or `${NAME-default}`) that took its default because NAME was set
  /// neither by the script nor by the caller's environment, or (`:-` only) was set to the empty
  /// string: the name, the default's value and where, in script order, each name once.
  struct DefaultUsed {
    std::string name, value;
    SourceLoc loc;
    bool set_empty = false;  ///< NAME was set, to "" (by the script or by --env NAME=)
  };
  std::vector<DefaultUsed> defaults_used;
};

/// Longest word or variable value read_shell_args keeps, in characters; checked before each
/// expansion is inserted, so no value is ever built larger.
inline constexpr size_t kMaxShellValue = size_t{1} << 16;
/// Most characters all expansions of one script may produce together (4 Mi characters, about
/// 64 MiB with their locations; a real launch script expands to a few KiB). Bounds memory and
/// time by the output, not the input.
inline constexpr size_t kMaxShellExpansion = size_t{1} << 22;
/// Deepest nesting of `${...:-${...}}` defaults and of `$((...))` parentheses and unary signs.
inline constexpr int kMaxShellNesting = 64;

/// Reads the flags of a bash launch script or a plain arguments file registered as `file`
/// (register_source) with text `text`. What it understands, as bash does: comments, `\` line
/// continuations, single and double quotes, `NAME=value` (also after `export`), `$NAME`,
/// `${NAME}`, `${NAME:-default}` and `${1:-default}` (variables the script does not set are
/// empty; positional parameters are unset), `$((arithmetic))` over integers (+ - * / % and
/// parentheses), arrays `NAME=( ... )` and `NAME+=( ... )` with `${NAME[@]}`, `${NAME[*]}` and
/// `${NAME[i]}`; the substring, pattern and case operators `${NAME:off:len}`, `${NAME#pat}`,
/// `##`, `%`, `%%`, `${NAME/pat/rep}`, `//`, `/#`, `/%`, `^^`, `,,`, `^`, `,` (glob patterns
/// with * and ?; an expansion it does not read keeps its own text, never the plain value);
/// `let NAME=expr` (and `+=`, `++`, ...) and `(( expr ))`; an arithmetic side effect inside
/// `$((...))` is not evaluated (the variable then holds the expression's text); `NAME=value cmd` sets NAME for cmd only, as bash
/// does. `$(command)` is not run: it expands to the word `$(...)`; here-document bodies
/// (`<<EOF`) are skipped. An `if`/`elif`/`else` block runs the branch its conditions choose where
/// each is a test it evaluates (as for `&&` below; a condition's last command decides), and from a
/// condition it does not evaluate on, every branch (if_lines); a while/until loop its condition
/// ends at once is skipped, any other loop runs its body once; every branch of a case is read; a
/// function's body is read where it is defined. A keyword out of place or a block left open is
/// a syntax error (limit_error). In `a && b` and `a || b` the right side
/// runs or not by a's status where a is a test schedcheck evaluates (`[ -z "$TP" ] && TP=2`:
/// `-n`, `-z`, string and integer comparisons, `true`, `false`), and is read as if it ran where
/// a's status is not known (list_lines). Flags come from every command that is
/// not a shell builtin (echo, mkdir, ...); the words of a command are split as bash splits them:
/// at unquoted blanks and newlines and at the blanks an unquoted expansion produces, never inside
/// quotes (`"Et*6|t*5|L "` stays one word, blank and all, as bash passes it; an array item
/// "--fp8-format hybrid" is one word through `"${A[@]}"` and a flag and its value through
/// `${A[@]}`), and a quote pair around a whole word that an expansion produced ('99,1,0') is
/// removed. When no command holds a flag (an arguments file that is a list of arrays only), the
/// items of every array are taken as `${NAME[@]}` passes them, in the order the arrays were first
/// set. Never fails: text it does not understand gives no flags.
/// `env` is the caller's environment as the script would see it (`--env NAME=VALUE`): its
/// variables are set before the first line, as exported variables are; every other variable the
/// script does not set is unset (not the environment schedcheck itself runs in, so that a check
/// gives the same answer on every machine).
ShellArgs read_shell_args(int32_t file, const std::string& text, const std::map<std::string, std::string>& env = {});

}  // namespace sc::config
