// Framework config readers: the Megatron-LM and DeepSpeed corpus files give the expected job, and
// broken configs give the framework's own error at the flag or key that set the value.
#include <filesystem>
#include <random>
#include <sstream>

#include "catch.h"
#include "config/readers.h"
#include "config/megatron_layers.h"
#include "config/shell_args.h"
#include "config/verify_job.h"
#include "diag_util.h"
#include "test_util.h"

namespace sc::config {
namespace {

using sc::test::all_text;

/// Checks that the script left each of `want` at its value and none of `unset` set.
void check_vars(const ShellArgs& sh, const std::map<std::string, std::string>& want,
                std::initializer_list<const char*> unset = {}) {
  for (const auto& [name, value] : want) {
    INFO(name);
    REQUIRE(sh.vars.count(name) == 1);
    CHECK(sh.vars.at(name).value == value);
  }
  for (const char* name : unset) {
    INFO(name);
    CHECK(sh.vars.count(name) == 0);
  }
}

/// Reads `text` as launch script `name`: no syntax error, and the variables of check_vars.
void check_script(const std::string& name, const std::string& text, const std::map<std::string, std::string>& want,
                  std::initializer_list<const char*> unset = {}) {
  INFO(name);
  ShellArgs sh = read_shell_args(register_source(name, text), text);
  CHECK(sh.limit_error.empty());
  check_vars(sh, want, unset);
}

/// The first diagnostic of `severity` whose message holds `needle`, or null.
const Diagnostic* find_diag(const Diagnostics& d, Severity severity, const std::string& needle) {
  for (const auto& x : d.all())
    if (x.severity == severity && x.message.find(needle) != std::string::npos) return &x;
  return nullptr;
}

/// 1-based line and column of the first line of `text` holding `line_needle`, at `col_needle`
/// within that line (the same text when empty).
std::pair<int32_t, int32_t> position(const std::string& text, const std::string& line_needle,
                                     const std::string& col_needle = {}) {
  std::istringstream in(text);
  std::string line;
  for (int32_t n = 1; std::getline(in, line); ++n) {
    size_t at = line.find(line_needle);
    if (at == std::string::npos) continue;
    size_t col = col_needle.empty() ? at : line.find(col_needle);
    return {n, static_cast<int32_t>(col) + 1};
  }
  return {0, 0};
}

void check_at(const Diagnostic* d, const std::string& text, const std::string& line_needle,
              const std::string& col_needle = {}) {
  REQUIRE(d);
  auto [line, col] = position(text, line_needle, col_needle);
  CHECK(d->loc.line == line);
  CHECK(d->loc.col == col);
}

/// Reads Megatron-LM script `text`, written to a temporary file `name`, into `diags`; true when
/// it reads without errors.
bool read_megatron_text(const std::string& name, const std::string& text, Diagnostics& diags) {
  TrainingJob j;
  return read_megatron(test::write_temp("schedcheck_config_test", name, text), JobContext{}, &j, diags);
}

bool has_unmodelled(const TrainingJob& j, const std::string& key) {
  for (const auto& [k, l] : j.unmodelled)
    if (k == key) return true;
  return false;
}

// A small valid Megatron model for the hand-written inputs.
const char* kModel = "--num-layers 16 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --vocab-size 1000\n";

}  // namespace

TEST_CASE("the Megatron-LM llama3 8B fp8 script reads as 8-way data parallel with 16 microbatches", "[config]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("../shared/corpus not found; skipping the Megatron corpus test");
  }
  const std::string path = test::corpus_dir() + "/megatron/train_llama3_8b_h100_fp8.sh";
  const std::string text = test::read_file(path);
  REQUIRE(is_megatron_config(path));
  CHECK_FALSE(is_deepspeed_config(path));
  Diagnostics diags;
  TrainingJob j;
  const bool ok = read_megatron(path, JobContext{}, &j, diags);
  INFO(all_text(diags));
  REQUIRE(ok);
  CHECK(j.framework == "megatron");
  CHECK(j.world == 8);
  CHECK(j.layout.tp == 1);
  CHECK(j.layout.pp == 1);
  CHECK(j.layout.cp == 1);
  CHECK(j.layout.ep == 1);
  CHECK(j.layout.dp_replicate == 8);
  CHECK(j.layout.dp_shard == 1);
  CHECK(j.layout.world() == 8);
  CHECK_FALSE(j.layout.sequence_parallel);
  CHECK(j.microbatches == 16);
  CHECK(j.microbatch_sequences == 1);
  CHECK(j.global_batch_sequences == 128);
  CHECK(j.seq_len == 8192);
  CHECK(j.schedule == "1f1b");
  CHECK(j.stages_per_rank == 1);
  CHECK(j.sharding == Sharding::kZero1);
  CHECK(j.reduce_dtype == "bf16");
  CHECK(j.param_dtype == "bf16");
  CHECK(j.recompute == model::Recompute::kNone);
  CHECK(j.model == "custom");
  REQUIRE(j.model_desc);
  const model::ModelDesc& m = *j.model_desc;
  CHECK(m.dim == 4096);
  CHECK(m.layers == 32);
  CHECK(m.ffn == 14336);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.head_dim == 128);
  CHECK(m.vocab == 128256);
  CHECK_FALSE(m.tied_embeddings);
  CHECK_FALSE(m.moe);
  CHECK(m.source == path);

  // Megatron turns --sequence-parallel off at TP 1 with a warning: located at the flag.
  const Diagnostic* sp = find_diag(diags, Severity::kWarning, "Disabling sequence parallelism");
  check_at(sp, text, "--sequence-parallel  #", "--sequence-parallel");
  CHECK(find_diag(diags, Severity::kNote, "blocks at lines 135, 180 are read approximately"));

  auto [dist_line, dist_col] = position(text, "--use-distributed-optimizer");
  CHECK(j.loc("sharding").line == dist_line);
  CHECK(j.loc("sharding").col == dist_col);
  CHECK(j.loc("world").line == position(text, "--nproc_per_node").first);
  CHECK(j.loc("microbatches").line == position(text, "--global-batch-size").first);
  CHECK(j.loc("seq_len").line == position(text, "--seq-length").first);
  CHECK(j.loc("reduce_dtype").line == position(text, "--grad-reduce-in-bf16").first);
  // Quoted items of DTYPE_ARGS hold a flag and its value; each is located inside the quotes.
  // --fp8-format hybrid puts the linear layers in fp8 through TransformerEngine, experts too,
  // with Megatron-LM's default delayed scaling; --fp8-param-gather all-gathers them in fp8.
  CHECK(j.fp8_linear);
  CHECK(j.fp8_experts);
  CHECK(j.fp8_weights_gathered);
  CHECK(j.fp8_recipe == "delayed");
  auto [fp8_line, fp8_col] = position(text, "\"--fp8-format hybrid\"", "--fp8-format");
  CHECK(j.loc("fp8").line == fp8_line);
  CHECK(j.loc("fp8").col == fp8_col);
  CHECK_FALSE(has_unmodelled(j, "--fp8-format"));
  CHECK(has_unmodelled(j, "--fp8-amax-history-len"));
  CHECK(has_unmodelled(j, "--lr"));
  CHECK_FALSE(has_unmodelled(j, "--micro-batch-size"));
  CHECK_FALSE(has_unmodelled(j, "--nproc_per_node"));
  for (const auto& [k, l] : j.unmodelled)
    if (k == "--lr") CHECK(l.line == position(text, "--lr 0.00015").first);
}

TEST_CASE("a launch script's variables, defaults, arithmetic and arrays expand as bash does", "[config]") {
  const std::string text =
      "#!/bin/bash\n"
      "N=${NODES:-2}            # unset: the default\n"
      "PER=4\n"
      "W=$(( $PER * N ))\n"
      "A=( --tensor-model-parallel-size $((PER/2)) )\n"
      "A+=( \"--fp8-format hybrid\" --split='99,1,0' )\n"
      "if [[ \"$X\" == 1 ]]; then\n"
      "  B=( --recompute-activations )\n"
      "else\n"
      "  B=( --lr 1e-4 )\n"
      "fi\n"
      "cat > hosts <<'EOF'\n"
      "  --not-a-flag 1\n"
      "EOF\n"
      "torchrun --nproc_per_node $PER --nnodes $N \\\n"
      "    train.py ${A[@]} \"${B[@]}\"\n";
  const std::string path = test::write_temp("schedcheck_config_test", "expand.sh", text);
  ShellArgs sh = read_shell_args(register_source(path, text), text);
  CHECK(sh.vars["W"].value == "8");
  CHECK(sh.vars["N"].value == "2");
  CHECK(sh.if_lines.empty());  // `[[ "$X" == 1 ]]` is evaluated: X is unset, so the else branch runs
  std::vector<std::string> names;
  for (const auto& f : sh.flags) names.push_back(f.name);
  CHECK(names == std::vector<std::string>{"--nproc_per_node", "--nnodes", "--tensor-model-parallel-size",
                                          "--fp8-format", "--split", "--lr"});
  REQUIRE(sh.flags.size() == 6);
  CHECK(sh.flags[1].values.at(0).text == "2");
  CHECK(sh.flags[2].values.at(0).text == "2");
  CHECK(sh.flags[2].loc.line == 5);
  CHECK(sh.flags[2].loc.col == 5);
  CHECK(sh.flags[3].loc.line == 6);
  CHECK(sh.flags[3].loc.col == 7);
  CHECK(sh.flags[3].values.at(0).text == "hybrid");
  CHECK(sh.flags[4].values.at(0).text == "99,1,0");
  CHECK(sh.flags[5].values.at(0).text == "1e-4");
  // A leading 0 is octal in bash's arithmetic: $((020)) is 16, $((010 + 1)) is 9; 08 is no
  // octal number (bash: "value too great for base"), so it is not expanded.
  const std::string oct = "A=$((020))\nB=$((010 + 1))\nC=$((08))\n";
  ShellArgs o = read_shell_args(register_source("oct.sh", oct), oct);
  CHECK(o.vars["A"].value == "16");
  CHECK(o.vars["B"].value == "9");
  CHECK(o.vars["C"].value != "8");
  // `**` is bash's exponent: right-associative, below the unary signs (bash prints each value).
  const std::string pw = "A=$((2**3**2))\nB=$((-2**2))\nC=$((3*2**2))\nD=$(((-1)**5))\nE=$((2**-1))\n";
  ShellArgs w = read_shell_args(register_source("pow.sh", pw), pw);
  CHECK(w.vars["A"].value == "512");
  CHECK(w.vars["B"].value == "4");
  CHECK(w.vars["C"].value == "12");
  CHECK(w.vars["D"].value == "-1");
  CHECK(w.vars["E"].value == "$((2**-1))");  // bash: "exponent less than 0"
  // `unset` removes a variable; `<<<` is a here-string (its word on the same line), not a
  // here-document whose missing delimiter swallowed the rest of the script.
  const std::string more = "GB=64\nunset GB\ncat <<< \"starting\"\ntorchrun --nnodes 1 train.py --global-batch-size $GB\n";
  ShellArgs m = read_shell_args(register_source("unset.sh", more), more);
  CHECK_FALSE(m.vars.count("GB"));
  REQUIRE(m.flags.size() == 2);
  CHECK(m.flags[1].name == "--global-batch-size");
  CHECK(m.flags[1].values.empty());
  // Redirections are not words of the command: `> log`, `2>&1`, `&> out` leave no value behind.
  const std::string redir = "torchrun --nnodes 1 train.py --bf16 > \"$LOG\" 2>&1 --micro-batch-size 2 &> out.txt\n"
                            "torchrun --nnodes 1 train.py --global-batch-size 8 2> err.txt < in.txt\n";
  ShellArgs r = read_shell_args(register_source("redir.sh", redir), redir);
  std::vector<std::string> seen;
  for (const auto& f : r.flags) {
    std::string all = f.name;
    for (const auto& v : f.values) all += " " + v.text;
    seen.push_back(all);
  }
  // (the launcher's flags keep the script's name after them: the reader splits it off)
  CHECK(seen == std::vector<std::string>{"--nnodes 1 train.py", "--bf16", "--micro-batch-size 2",
                                         "--nnodes 1 train.py", "--global-batch-size 8"});
}

TEST_CASE("a launch script's substrings, patterns, case changes, let and prefix assignments expand as bash does",
          "[config]") {
  // Each expected value is what bash 5.2 prints for the same line ("Shell Parameter Expansion",
  // "Bash Builtins: let", "Simple Command Expansion" in the bash manual).
  const std::string text =
      "NAME=tp4pp2\n"
      "A=${NAME/tp/}\n"           // first match replaced: 4pp2
      "B=${A:0:1}\n"              // substring: 4
      "C=${NAME: -1}\n"           // negative offset: 2
      "D=${NAME:2:-2}\n"          // negative length: 4p
      "let PP=2+2\n"
      "let \"L = 12 * 2\" L++ L-=1\n"
      "M=GPT-Big-Run\n"
      "E=${M,,}\n"                // gpt-big-run
      "F=${M^^}\n"                // GPT-BIG-RUN
      "G=${M//-/_}\n"             // GPT_Big_Run
      "P=/data/runs/x.tar.gz\n"
      "H=${P##*/}\n"              // x.tar.gz
      "I=${P#*/}\n"               // data/runs/x.tar.gz
      "J=${H%.*}\n"               // x.tar
      "K=${H%%.*}\n"              // x
      "N=${M/#GPT/LLM}\n"         // LLM-Big-Run
      "O=${M/%Run/Job}\n"         // GPT-Big-Job
      "Q=${M/[A-Z]*/x}\n"         // a bracket expression: not read
      "R=${M/#/pre-}\n"           // an empty anchored pattern: pre-GPT-Big-Run
      "EMPTY=\n"
      "S=${EMPTY//*/y}\n"         // y
      "T=${M: -3:2}\n"            // Ru
      "TP=8\n"
      "TP=2 torchrun --nnodes 1 train.py --tensor-model-parallel-size $TP --micro-batch-size ${TP:1}\n";
  ShellArgs sh = read_shell_args(register_source("ops.sh", text), text);
  const std::map<std::string, std::string> want = {
      {"A", "4pp2"}, {"B", "4"},    {"C", "2"},        {"D", "4p"},          {"PP", "4"},           {"L", "24"},
      {"E", "gpt-big-run"}, {"F", "GPT-BIG-RUN"}, {"G", "GPT_Big_Run"}, {"H", "x.tar.gz"}, {"I", "data/runs/x.tar.gz"},
      {"J", "x.tar"}, {"K", "x"}, {"N", "LLM-Big-Run"}, {"O", "GPT-Big-Job"}, {"R", "pre-GPT-Big-Run"},
      {"S", "y"}, {"T", "Ru"}};
  check_vars(sh, want);
  // An expansion not read keeps its own text, which no integer flag accepts, never the plain value.
  CHECK(sh.vars["Q"].value == "${M/[A-Z]*/x}");

  // Arithmetic commands, side effects and quoting, each against bash 5.2's value: a quoted `*`
  // matches itself (bash keeps 20; not read here, so the text stays), `((B+=4))` is 8,
  // `(( C = 1024 ))` 1024, `${U/#/8}` of an unset U is empty, a prefix assignment before a word
  // that expands to nothing stays (G=4). `$((++D))` changes D: not evaluated, D and E hold the text.
  const std::string more =
      "TP=20\nA=${TP%\"0*\"}\nB=4\n((B+=4))\nC=1\n(( C = 1024 ))\nD=1\nE=$((++D))\nF=${U/#/8}\n"
      "G=2\nG=4 ${LAUNCHER}\nlet H=0x400\n";
  ShellArgs m = read_shell_args(register_source("ops2.sh", more), more);
  CHECK(m.vars["A"].value == "${TP%\"0*\"}");
  CHECK(m.vars["B"].value == "8");
  CHECK(m.vars["C"].value == "1024");
  CHECK(m.vars["D"].value == "$((++D))");
  CHECK(m.vars["E"].value == "$((++D))");
  CHECK(m.vars["F"].value == "");
  CHECK(m.vars["G"].value == "4");
  CHECK(m.vars["H"].value == "$((H=0x400))");
  // TP=2 before the command is the command's environment: its words see TP=8, and TP stays 8.
  CHECK(sh.vars["TP"].value == "8");
  REQUIRE(sh.flags.size() == 3);
  CHECK(sh.flags[1].values.at(0).text == "8");
  CHECK(sh.flags[2].values.empty());  // ${TP:1} of "8" is empty, and an empty unquoted word vanishes
}

TEST_CASE("a launch script's subshell keeps its assignments to itself, as bash does", "[config]") {
  // Each expected value is what bash 5.2 prints after running the same lines: a `( ... )` runs
  // in a child process ("Compound Commands" in the bash manual), so what it assigns is gone at
  // its `)`; a command substitution's assignments likewise. A launch command inside a subshell
  // is still the script's launch.
  const std::string text =
      "TP=2\n"
      "PP=1\n"
      "( TP=8 )\n"
      "(cd /tmp && PP=4; CP=2)\n"
      "X=$( TP=16; echo 3 )\n"
      "( ( TP=32 ); EP=4 )\n"
      "true && ( DP=2 )\n"
      "false || ( A=1; B=2 )\n"
      "( Y=1\n"
      "  Z=2 )\n"
      "( arr=(1 2 3); V=${arr[1]} )\n"
      "( torchrun --nnodes 1 train.py --tensor-model-parallel-size $TP )\n";
  ShellArgs sh = read_shell_args(register_source("subshells.sh", text), text);
  check_vars(sh, {{"TP", "2"}, {"PP", "1"}}, {"CP", "EP", "DP", "A", "B", "Y", "Z", "V", "arr"});
  REQUIRE(sh.flags.size() == 2);  // --nnodes and the TP degree
  CHECK(sh.flags[1].name == "--tensor-model-parallel-size");
  CHECK(sh.flags[1].values.at(0).text == "2");

  // Lists around subshells, and a function whose body is a subshell (bash 5.2: Z=3, X unset).
  const std::string lists = "false && ( X=1 )\ntrue && ( X=2 ) || Y=2\n( X=3 ) && Z=3\nf() ( X=4 ); f\n";
  check_script("sublists.sh", lists, {{"Z", "3"}}, {"X", "Y"});

  // A subshell where a command starts after a keyword, a `{`, a `!` or a case pattern; a case
  // pattern's optional `(`; `((` that is not closed by `))` (nested subshells); each element of
  // a pipeline (bash 5.2 prints TP=1 F=2 G=4 and nothing else set).
  const std::string places =
      "TP=1\n"
      "if true; then (TP=4); fi\n"
      "if false; then :; else (A=1); fi\n"
      "{ (B=1); }\n"
      "! (C=1)\n"
      "case x in x) (D=1);; (y) E=1;; esac\n"
      "case x in\n  (x) F=2;;\nesac\n"
      "(((G=4)))\n"
      "((echo x >/dev/null); H=1)\n"
      "((I=1) )\n"
      "J=4 | cat\n"
      "cat /dev/null | K=5\n";
  check_script("places.sh", places, {{"TP", "1"}, {"F", "2"}, {"G", "4"}}, {"A", "B", "C", "D", "E", "H", "I", "J", "K"});

  // A compound command as a pipeline's element, after or before the `|` (bash 5.2: TP=1 N=0
  // DP=6, the others unset).
  const std::string piped =
      "TP=1\nN=0\n"
      "echo a | while read l; do TP=4; N=1; done\n"
      "for i in 1; do PP=3; done | tee /dev/null\n"
      "if true; then CP=2; fi | cat\n"
      "{ EP=5; } | cat\n"
      "case x in x) DP=6;; esac\n";
  check_script("piped.sh", piped, {{"TP", "1"}, {"N", "0"}, {"DP", "6"}}, {"PP", "CP", "EP"});

  // A `)` with no `(` open, and a `$(`, `<(` or `(` body left open, are bash's syntax errors,
  // located where bash reports them.
  for (const auto& [script, line, col, message] :
       std::vector<std::tuple<std::string, int32_t, int32_t, std::string>>{
           {"TP=4 )\n", 1, 6, "syntax error near unexpected token ')': no open '(' it belongs to here"},
           {"(TP=2))\n", 1, 7, "syntax error near unexpected token ')': no open '(' it belongs to here"},
           {"X=$( echo\nTP=4\n", 1, 3, "unexpected end of the script while looking for the matching ')' of '$('"},
           {"cat <( echo\nTP=4\n", 1, 5, "unexpected end of the script while looking for the matching ')' of '<('"},
           {"f() ( TP=4\n", 1, 5, "'(' has no matching ')' before the end of the script"}}) {
    INFO(script);
    ShellArgs bad = read_shell_args(register_source("bad-paren.sh", script), script);
    CHECK(bad.limit_error == message);
    CHECK(bad.limit_loc.line == line);
    CHECK(bad.limit_loc.col == col);
  }

  // A subshell left open is bash's "syntax error: unexpected end of file", at its `(`.
  const std::string open = "TP=2\n( TP=8\n";
  ShellArgs o = read_shell_args(register_source("open.sh", open), open);
  CHECK(o.limit_error == "'(' has no matching ')' before the end of the script");
  CHECK(o.limit_loc.line == 2);
  CHECK(o.limit_loc.col == 1);
}

TEST_CASE("a launch script's function keeps its locals to itself, as bash does", "[config]") {
  // Expected: what bash 5.2 prints after the same lines and a call of setup ("Shell Functions"
  // in the bash manual: local, and declare/typeset without -g, scope a name to the function).
  // The body is read where it is defined, as if called there.
  const std::string text =
      "TP=2\nPP=1\nCP=1\n"
      "setup() {\n"
      "  local TP=8\n"
      "  local PP\n"
      "  PP=4\n"
      "  declare -g CP=3\n"
      "  declare EP=5\n"
      "  export DP=6\n"
      "  local -a ARR=(1 2)\n"
      "  torchrun train.py --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP\n"
      "}\n";
  ShellArgs sh = read_shell_args(register_source("locals.sh", text), text);
  CHECK(sh.limit_error.empty());
  check_vars(sh, {{"TP", "2"}, {"PP", "1"}, {"CP", "3"}, {"DP", "6"}}, {"EP", "ARR"});
  // Inside the body the locals hold: the launch there sees TP 8 and PP 4.
  REQUIRE(sh.flags.size() == 2);
  CHECK(sh.flags[0].values.at(0).text == "8");
  CHECK(sh.flags[1].values.at(0).text == "4");
}

TEST_CASE("a launch script's && and || lists run their right side by the test's status, as bash does", "[config]") {
  // Each expected value is what bash 5.2 prints after running the same lines ("Lists of
  // Commands" and "Bash Conditional Expressions" in the bash manual; `test` for `[`).
  const std::string text =
      "TP=4\n"
      "[ -n \"$TP\" ] || TP=2\n"              // TP set: stays 4
      "[ -z \"$PP\" ] && PP=8\n"              // PP unset: 8
      "[ \"$TP\" -gt 2 ] && CP=3 || CP=1\n"   // 3
      "false && A=1 || B=2\n"                 // A unset, B=2
      "[[ -n $EMPTY ]] && E1=yes\n"           // [[ keeps the empty word: false
      "[ -n $EMPTY ] && E2=yes\n"             // [ drops it: `[ -n ]` is true
      "[ ! -z \"$TP\" ] && F=$TP\n"           // 4
      "true && { G=1; H=2; }\n"               // both set
      "false && { I=1; J=2; }\n"              // neither
      "test \"$TP\" = 4 && K=ok\n"            // ok
      "! [ -n \"$TP\" ] && N=neg || N=pos\n"  // pos
      "Q=1; [ \"$Q\" != 1 ] && Q=9\n"         // 1
      "false && torchrun --tensor-model-parallel-size 8\n"  // not run: no flag
      "[ -f /data/ckpt ] || R=fresh\n"        // a file test: not evaluated, read as run
      "launch --micro-batch-size 2 && S=after\n";  // a command's status: not known, read as run
  ShellArgs sh = read_shell_args(register_source("lists.sh", text), text);
  const std::map<std::string, std::string> want = {{"TP", "4"}, {"PP", "8"}, {"CP", "3"}, {"B", "2"},
                                                   {"E2", "yes"}, {"F", "4"},  {"G", "1"},  {"H", "2"},
                                                   {"K", "ok"},  {"N", "pos"}, {"Q", "1"}, {"R", "fresh"},
                                                   {"S", "after"}};
  check_vars(sh, want, {"A", "E1", "I", "J"});
  // The skipped torchrun gives no flag; the launch command's does.
  REQUIRE(sh.flags.size() == 1);
  CHECK(sh.flags[0].name == "--micro-batch-size");
  // The two lists whose left side's status is not known are listed, for the reader's note.
  CHECK(sh.list_lines == std::vector<int32_t>{15, 16});
}

TEST_CASE("a launch script's if blocks run the branch their test conditions choose, as bash does", "[config]") {
  // What bash 5.2 prints after these lines: TP=8 PP=4 CP=2 VPP=2 LOAD=no BIG=0 AND=1.
  const std::string text =
      "MODEL=70b\n"
      "if [ \"$MODEL\" = \"8b\" ]; then TP=1; elif [ \"$MODEL\" = \"70b\" ]; then TP=8; else TP=2; fi\n"
      "if [ -z \"$PP\" ]\nthen\n  PP=4\nelse\n  PP=1\nfi\n"
      "if [ \"$TP\" -ge 8 ]; then\n"
      "  if [ \"$PP\" -gt 8 ]; then CP=4; else CP=2; fi\n"
      "  VPP=2\n"
      "else\n  CP=9\n  VPP=9\nfi\n"
      "if [ -f /data/ckpt ]; then LOAD=yes; else LOAD=no; fi\n"       // line 16: a file test, not evaluated
      "if [ \"$MODEL\" = \"405b\" ]; then BIG=1; else if [ -n \"$MODEL\" ]; then BIG=0; fi; fi\n"
      "if true && [ \"$TP\" = 8 ]; then AND=1; fi\n"                 // line 18: a list, not evaluated
      "if [ \"$MODEL\" = \"8b\" ]; then torchrun --tensor-model-parallel-size 1; fi\n";
  ShellArgs sh = read_shell_args(register_source("ifs.sh", text), text);
  // LOAD: both branches were read, the else last (here what bash prints too, by chance).
  const std::map<std::string, std::string> want = {{"TP", "8"},    {"PP", "4"},   {"CP", "2"},  {"VPP", "2"},
                                                   {"LOAD", "no"}, {"BIG", "0"}, {"AND", "1"}};
  check_vars(sh, want);
  CHECK(sh.flags.empty());  // the 8b branch's torchrun did not run
  CHECK(sh.if_lines == std::vector<int32_t>{16, 18});
}

TEST_CASE("a launch script's groups, loops, functions and case blocks skip and run as bash does", "[config]") {
  // What bash 5.2 prints after these lines: PP=4 A= B=octal C= D= E=once F=two G=else H=set I=.
  const std::string text =
      "TP=2\n"
      "false && { true && PP=9; }\n"          // a skipped group with a list inside
      "[ \"$TP\" -eq 1 ] &&\n  A=8\n"          // the right side on the next line
      "if [[ 010 -eq 8 ]]; then B=octal; fi\n"  // [[ reads 010 as octal
      "while false; do C=loop; done\n"         // a loop its condition ends at once
      "until true; do D=loop; done\n"
      "while [ -z \"$E\" ]; do E=once; done\n"  // the body is read once
      "set_pp() {\n  PP=4\n}\nset_pp\n"          // a function's body, read where it is defined
      "case $TP in\n  2) F=two;;\nesac\n"       // the matching branch
      "if true; false; then G=then; else G=else; fi\n"  // the condition's last command decides
      "if H=set; then :; fi\n"                 // a condition's assignment stays
      "[ 1 -eq 2 ] && if true; then I=1; fi\n";  // a skipped if, whole
  ShellArgs sh = read_shell_args(register_source("blocks.sh", text), text);
  const std::map<std::string, std::string> want = {{"PP", "4"},   {"B", "octal"}, {"E", "once"},
                                                   {"F", "two"},  {"G", "else"},  {"H", "set"}};
  check_vars(sh, want, {"A", "C", "D", "I"});
  CHECK(sh.limit_error.empty());
  CHECK(sh.if_lines == std::vector<int32_t>{8, 9});  // the loop read once, the function where defined

  // ;& runs the next branch too; ;;& tests the next patterns as well (bash 5.2: J=b K=d L=e).
  const std::string fall = "case x in x) J=a;& y) J=b;; esac\ncase x in x) K=c;;& x*) K=d;; esac\n"
                           "case y in x) L=no;& y) L=e;; esac\n";
  ShellArgs fl = read_shell_args(register_source("fall.sh", fall), fall);
  CHECK(fl.vars["J"].value == "b");
  CHECK(fl.vars["K"].value == "d");
  CHECK(fl.vars["L"].value == "e");

  // case: the first branch whose pattern matches runs (bash 5.2: TP=8 PP=2 A=q B=glob C= D=2 E=paren).
  const std::string cases =
      "MODEL=70b\n"
      "case $MODEL in\n  8b) TP=1 ;;\n  70b|70B) TP=8; PP=2 ;;\n  *) TP=4 ;;\nesac\n"
      "case \"$MODEL\" in \"70b\") A=q;; esac\n"
      "case x$MODEL in x7*) B=glob;; *) B=star;; esac\n"
      "case $MODEL in 405b) C=no;; esac\n"
      "case $(hostname) in a) D=1;; *) D=2;; esac\n"  // line 10: a command's output, not read
      "case $MODEL in (70b) E=paren;; esac\n";
  ShellArgs c = read_shell_args(register_source("cases.sh", cases), cases);
  const std::map<std::string, std::string> case_want = {{"TP", "8"}, {"PP", "2"}, {"A", "q"},
                                                        {"B", "glob"}, {"D", "2"}, {"E", "paren"}};
  check_vars(c, case_want, {"C"});
  CHECK(c.if_lines == std::vector<int32_t>{10});  // every branch of that case was read

  // A keyword out of place or a block left open is bash's syntax error, located.
  for (const auto& [script, line, message] :
       std::vector<std::tuple<std::string, int32_t, std::string>>{
           {"TP=2\nfi\n", 2, "syntax error near unexpected token 'fi': no open 'if' it belongs to here"},
           {"TP=2\nif [ -n x ]; then\n  TP=4\n", 2, "'if' has no matching 'fi' before the end of the script"},
           {"f() {\n  TP=4\n", 1, "'{' has no matching '}' before the end of the script"},
           {"while true; done\n", 1, "syntax error near unexpected token 'done': no open 'while/until/for' it "
                                     "belongs to here"}}) {
    INFO(script);
    ShellArgs bad = read_shell_args(register_source("bad.sh", script), script);
    CHECK(bad.limit_error == message);
    CHECK(bad.limit_loc.line == line);
  }
}

TEST_CASE("Megatron: an older script with flags in multi-line strings reads with each flag located", "[config]") {
  const std::string text =
      "#!/bin/bash\n"
      "GPUS_PER_NODE=8\n"
      "NNODES=2\n"
      "DISTRIBUTED_ARGS=\"\n"
      "    --nproc_per_node $GPUS_PER_NODE \\\n"
      "    --nnodes $NNODES\n"
      "\"\n"
      "GPT_ARGS=\"\n"
      "    --tensor-model-parallel-size 2 \\\n"
      "    --pipeline-model-parallel-size 2 \\\n"
      "    --sequence-parallel \\\n"
      "    --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 \\\n"
      "    --micro-batch-size 4 --global-batch-size 64 --fp16\n"
      "\"\n"
      "torchrun $DISTRIBUTED_ARGS pretrain_gpt.py $GPT_ARGS --vocab-size 50257\n";
  const std::string path = test::write_temp("schedcheck_config_test", "older.sh", text);
  Diagnostics diags;
  TrainingJob j;
  const bool ok = read_megatron(path, JobContext{}, &j, diags);
  INFO(all_text(diags));
  REQUIRE(ok);
  CHECK(j.world == 16);
  CHECK(j.layout.tp == 2);
  CHECK(j.layout.pp == 2);
  CHECK(j.layout.dp_replicate == 4);
  CHECK(j.layout.sequence_parallel);
  CHECK(j.microbatches == 4);
  CHECK(j.schedule == "1f1b");
  CHECK(j.reduce_dtype == "fp16");
  CHECK(j.loc("pp").line == 10);
  CHECK(j.loc("pp").col == 5);
  CHECK(j.loc("world").line == 5);
  CHECK(diags.all().empty());
}

TEST_CASE("Megatron: a global batch that microbatches and data parallelism do not divide is refused at the flag",
          "[config]") {
  const std::string text = std::string("--tensor-model-parallel-size 2\n--micro-batch-size 2\n--global-batch-size 100\n") +
                           kModel;
  const std::string path = test::write_temp("schedcheck_config_test", "gbs.args", text);
  REQUIRE(is_megatron_config(path));
  JobContext ctx;
  ctx.gpus = 8;
  Diagnostics diags;
  TrainingJob j;
  CHECK_FALSE(read_megatron(path, ctx, &j, diags));
  INFO(all_text(diags));
  const Diagnostic* d = find_diag(diags, Severity::kError,
                                  "global batch size (100) is not divisible by micro batch size (2) times data parallel "
                                  "size (4)");
  check_at(d, text, "--global-batch-size");
}

TEST_CASE("Megatron: a world size that tp·pp·cp does not divide is refused at the flag", "[config]") {
  const std::string text =
      "#!/bin/bash\n"
      "GPUS_PER_NODE=8\n"
      "TP=3\n"
      "ARGS=(\n"
      "    --tensor-model-parallel-size $TP\n"
      "    --micro-batch-size 1\n"
      "    --num-layers 16 --hidden-size 256 --num-attention-heads 8 --seq-length 1024\n"
      ")\n"
      "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes 1 pretrain_gpt.py ${ARGS[@]}\n";
  const std::string path = test::write_temp("schedcheck_config_test", "world.sh", text);
  Diagnostics diags;
  TrainingJob j;
  CHECK_FALSE(read_megatron(path, JobContext{}, &j, diags));
  INFO(all_text(diags));
  const Diagnostic* d = find_diag(diags, Severity::kError,
                                  "world size (8) is not divisible by tensor parallel size (3) times pipeline parallel "
                                  "size (1) times context parallel size (1)");
  check_at(d, text, "--tensor-model-parallel-size");
}

TEST_CASE("Megatron: a value the script computes with what schedcheck does not evaluate is located at its expression",
          "[config]") {
  const std::string text =
      "L=$((1 << 4))\n"
      "H=$(python3 -c 'print(256)')\n"
      "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers $L --hidden-size $H \\\n"
      "    --num-attention-heads 8 --seq-length 1024 --micro-batch-size 1 --global-batch-size 8\n";
  Diagnostics diags;
  CHECK_FALSE(read_megatron_text("unread.sh", text, diags));
  INFO(all_text(diags));
  check_at(find_diag(diags, Severity::kError, "argument --num-layers: invalid int value: '$((1<<4))'"), text,
           "--num-layers", "--num-layers");
  check_at(find_diag(diags, Severity::kNote, "'$((1<<4))' is arithmetic schedcheck does not evaluate"), text,
           "L=$((", "$((");
  check_at(find_diag(diags, Severity::kNote, "is a command, which schedcheck does not run"), text, "H=$(", "$(");
}

TEST_CASE("Megatron: expansions nested past the limit are refused at their line, and the message prints",
          "[config]") {
  // 65 nested `${X#...}`: the limit's location lies inside the expansion's text, past the end of
  // the line; printing the diagnostic used to throw (basic_string_view::substr).
  std::string nest = "0";
  for (int i = 0; i < 65; ++i) nest = "${X#" + nest + "}";
  const std::string text = "X=1024\ntorchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers " + nest +
                           " --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --micro-batch-size 1 "
                           "--global-batch-size 8\n";
  Diagnostics diags;
  CHECK_FALSE(read_megatron_text("nest65.sh", text, diags));
  const std::string printed = all_text(diags);
  INFO(printed);
  const Diagnostic* d = find_diag(diags, Severity::kError, "nest more than 64 deep");
  REQUIRE(d);
  CHECK(d->loc.line == 2);
  CHECK(printed.find("nest65.sh:2:") != std::string::npos);
}

TEST_CASE("Megatron: a missing --micro-batch-size is an error at the start of the file", "[config]") {
  const std::string text = std::string("--global-batch-size 64\n") + kModel;
  const std::string path = test::write_temp("schedcheck_config_test", "nombs.args", text);
  JobContext ctx;
  ctx.gpus = 8;
  Diagnostics diags;
  TrainingJob j;
  CHECK_FALSE(read_megatron(path, ctx, &j, diags));
  const Diagnostic* d = find_diag(diags, Severity::kError, "--micro-batch-size");
  REQUIRE(d);
  CHECK(d->loc.line == 1);
  CHECK(d->loc.col == 1);
}

TEST_CASE("Megatron: virtual pipeline stages give the interleaved schedule and its microbatch rule", "[config]") {
  JobContext ctx;
  ctx.gpus = 8;
  {
    const std::string text = std::string("--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2\n"
                                         "--micro-batch-size 1 --global-batch-size 16 --recompute-granularity full\n"
                                         "--recompute-method uniform --recompute-num-layers 1\n") +
                             kModel;
    const std::string path = test::write_temp("schedcheck_config_test", "vpp.args", text);
    Diagnostics diags;
    TrainingJob j;
    const bool ok = read_megatron(path, ctx, &j, diags);
    INFO(all_text(diags));
    REQUIRE(ok);
    CHECK(j.layout.pp == 4);
    CHECK(j.layout.dp_replicate == 2);
    CHECK(j.microbatches == 8);
    CHECK(j.schedule == "interleaved-1f1b");
    CHECK(j.stages_per_rank == 2);
    CHECK(j.recompute == model::Recompute::kFull);
    CHECK(j.loc("schedule").col == position(text, "--num-layers-per-virtual-pipeline-stage").second);
  }
  {
    // M = 6 microbatches, group = pp = 4: 6 % 4 = 2 < pp gives dependency bubbles.
    const std::string text = std::string("--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2\n"
                                         "--micro-batch-size 1 --global-batch-size 12\n") +
                             kModel;
    const std::string path = test::write_temp("schedcheck_config_test", "vpp_bad.args", text);
    Diagnostics diags;
    TrainingJob j;
    CHECK_FALSE(read_megatron(path, ctx, &j, diags));
    INFO(all_text(diags));
    CHECK(find_diag(diags, Severity::kError, "should be 0, or larger than or equal to the pipeline-parallel size"));
  }
}

namespace {

/// Reads `text` (Megatron arguments on 8 GPUs) as `name`; the diagnostics go to `diags`.
bool read_args(const std::string& name, const std::string& text, TrainingJob* j, Diagnostics& diags) {
  JobContext ctx;
  ctx.gpus = 8;
  return read_megatron(test::write_temp("schedcheck_config_test", name, text), ctx, j, diags);
}

/// The Megatron batch flags for 16 sequences of one.
const char* kBatch16 = "--micro-batch-size 1 --global-batch-size 16\n";

}  // namespace

TEST_CASE("Megatron: --pipeline-model-parallel-layout gives each stage and virtual stage its layers, empty ones "
          "included",
          "[config][megatron-layout]") {
  {
    // Megatron-LM#1852's wish: a last pipeline stage with the loss and no transformer layer.
    const std::string text = std::string("--pipeline-model-parallel-size 4\n"
                                         "--pipeline-model-parallel-layout \"Et*6|t*5|t*5|L\"\n") +
                             kBatch16 + kModel;
    Diagnostics diags;
    TrainingJob j;
    const bool ok = read_args("layout.args", text, &j, diags);
    INFO(all_text(diags));
    REQUIRE(ok);
    CHECK(all_text(diags).find("not read") == std::string::npos);
    CHECK_FALSE(has_unmodelled(j, "--pipeline-model-parallel-layout"));
    CHECK(j.schedule == "1f1b");
    CHECK(j.stages_per_rank == 1);
    CHECK(j.stage_layers == std::vector<int64_t>{6, 5, 5, 0});
    CHECK(j.loc("stage_layers").line == 2);
    // It gets a verdict: the job lowers with a last stage that runs only the output layer and
    // the loss, and its lists hold.
    VerifiedJob v;
    Diagnostics vd;
    const bool verified = verify_job(j, JobContext{}, false, &v, vd);
    INFO(all_text(vd));
    REQUIRE(verified);
    CHECK(v.lowered.costs.stage_layers == std::vector<int64_t>{6, 5, 5, 0});
    CHECK(v.exit_code == 0);
    CHECK(v.result.findings.empty());
    REQUIRE(v.prediction.complete);
    CHECK(v.prediction.step_s > 0);
  }
  {
    // The shipped example: the same split on a 1B-parameter model.
    Diagnostics diags;
    TrainingJob j;
    const bool ok = read_megatron(test::source_path("examples/megatron-layout-empty-last-stage.sh"), JobContext{}, &j,
                                  diags);
    INFO(all_text(diags));
    REQUIRE(ok);
    CHECK(j.world == 8);
    CHECK(j.stage_layers == std::vector<int64_t>{6, 5, 5, 0});
    CHECK(j.unmodelled.empty());
  }
  {
    // Three virtual stages per rank (six stages over pp 2), the first and the last empty.
    const std::string text = std::string("--pipeline-model-parallel-size 2\n"
                                         "--pipeline-model-parallel-layout \"E|(t*4|)*4L\"\n") +
                             kBatch16 + kModel;
    Diagnostics diags;
    TrainingJob j;
    const bool ok = read_args("layout-vpp.args", text, &j, diags);
    INFO(all_text(diags));
    REQUIRE(ok);
    CHECK(j.schedule == "interleaved-1f1b");
    CHECK(j.stages_per_rank == 3);
    // Stage v·pp + r is virtual stage v of rank r: rank 0 holds 0, 4, 4 and rank 1 4, 4, 0.
    CHECK(j.stage_layers == std::vector<int64_t>{0, 4, 4, 4, 4, 0});
    CHECK(j.loc("schedule").line == 2);
    VerifiedJob v;
    Diagnostics vd;
    REQUIRE(verify_job(j, JobContext{}, false, &v, vd));
    CHECK(v.lowered.costs.stage_layers == std::vector<int64_t>{0, 4, 4, 4, 4, 0});
    CHECK(v.exit_code == 0);
  }
}

TEST_CASE("Megatron: a layout Megatron refuses is refused at the flag in Megatron's words", "[config][megatron-layout]") {
  struct Case {
    std::string flags, message, at;
  };
  const std::vector<Case> cases = {
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout \"Et*8|x|t*8L\"",
       "Invalid layer character: x (stage='x', layout_str='Etttttttt|x|ttttttttL'), known layer characters: ['E', "
       "'L', 't', 'm']",
       "--pipeline-model-parallel-layout"},
      {"--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout \"Et*8|t*8L\"",
       "The length of pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size (num_stages=2, "
       "args.pipeline_model_parallel_size=4)",
       "--pipeline-model-parallel-layout"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout \"Et*8|t*7L\"",
       "Number of decoder layers 15must match num_layers 16", "--pipeline-model-parallel-layout"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout \"t*8|Et*8L\"",
       "The first layer must be embedding, but got LayerType.decoder", "--pipeline-model-parallel-layout"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout \"Et*8|Lt*8\"",
       "The last layer must be loss, but got LayerType.decoder", "--pipeline-model-parallel-layout"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout \"Et*8|t*8mL\"",
       "Number of mtp layers in layout must match mtp_num_layers", "--pipeline-model-parallel-layout"},
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout \"Et*8|t*8L\" "
       "--decoder-last-pipeline-num-layers 8",
       "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments. "
       "self.num_layers_in_first_pipeline_stage=None, self.num_layers_in_last_pipeline_stage=8, "
       "self.account_for_embedding_in_pipeline_split=False, self.account_for_loss_in_pipeline_split=False.",
       "--pipeline-model-parallel-layout"},
      // A group repeated: "Et*8|Et*8|", three stages (the last one empty).
      {"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout \"(Et*8|)*2\"",
       "The length of pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size (num_stages=3, "
       "args.pipeline_model_parallel_size=2)",
       "--pipeline-model-parallel-layout"},
  };
  for (const Case& c : cases) {
    const std::string text = c.flags + "\n" + kBatch16 + kModel;
    Diagnostics diags;
    TrainingJob j;
    INFO(c.flags);
    CHECK_FALSE(read_args("layout-bad.args", text, &j, diags));
    INFO(all_text(diags));
    const Diagnostic* d = find_diag(diags, Severity::kError, c.message);
    REQUIRE(d);
    CHECK(d->message == c.message);
    check_at(d, text, c.at, c.at);
  }
}

TEST_CASE("Megatron: a quoted layout holding a blank or a newline is one word, refused as parse_str_to_list refuses "
          "it", "[config][megatron-layout]") {
  // bash passes "...|L " as one argument, blank and all; Megatron's parse_str_to_list then meets
  // the blank as a layer character. The reader once split the word at the blank and dropped the
  // rest, so the layout held (blocks 8, 8).
  struct Case {
    std::string layout, message;
  };
  const std::vector<Case> cases = {
      {"\"Et*8|t*8L \"",
       "Invalid layer character:   (stage='ttttttttL ', layout_str='Etttttttt|ttttttttL '), known layer characters: "
       "['E', 'L', 't', 'm']"},
      {"\"Et*8|t*8L X\"",
       "Invalid layer character:   (stage='ttttttttL X', layout_str='Etttttttt|ttttttttL X'), known layer "
       "characters: ['E', 'L', 't', 'm']"},
      {"\"Et*8|t*8\nL\"",
       "Invalid layer character: \n (stage='tttttttt\nL', layout_str='Etttttttt|tttttttt\nL'), known layer "
       "characters: ['E', 'L', 't', 'm']"},
      {"'Et*8|t*8 L'",
       "Invalid layer character:   (stage='tttttttt L', layout_str='Etttttttt|tttttttt L'), known layer characters: "
       "['E', 'L', 't', 'm']"},
      // Through a variable: "$LAYOUT" is one word as well.
      {"\"$LAYOUT\"",
       "Invalid layer character:   (stage='ttttttttL ', layout_str='Etttttttt|ttttttttL '), known layer characters: "
       "['E', 'L', 't', 'm']"},
  };
  for (const Case& c : cases) {
    const std::string text = "LAYOUT=\"Et*8|t*8L \"\ntorchrun train.py --pipeline-model-parallel-size 2 "
                             "--pipeline-model-parallel-layout " + c.layout + " \\\n  " + kBatch16 + "  " + kModel;
    Diagnostics diags;
    TrainingJob j;
    INFO(text);
    CHECK_FALSE(read_args("layout-blank.sh", text, &j, diags));
    INFO(all_text(diags));
    const Diagnostic* d = find_diag(diags, Severity::kError, "Invalid layer character");
    REQUIRE(d);
    CHECK(d->message == c.message);
    check_at(d, text, "--pipeline-model-parallel-layout", "--pipeline-model-parallel-layout");
  }
  // Unquoted, bash splits $LAYOUT at its blank and drops the trailing one: "Et*8|t*8L" holds.
  {
    const std::string text = "LAYOUT=\"Et*8|t*8L \"\ntorchrun train.py --pipeline-model-parallel-size 2 "
                             "--pipeline-model-parallel-layout $LAYOUT \\\n  " + std::string(kBatch16) + "  " + kModel;
    Diagnostics diags;
    TrainingJob j;
    INFO(all_text(diags));
    CHECK(read_args("layout-unquoted.sh", text, &j, diags));
    CHECK(j.stage_layers == std::vector<int64_t>{8, 8});
  }
}

TEST_CASE("Megatron: a word left over after a flag's one value is argparse's unrecognized argument, and a quoted "
          "'16 7' is one invalid int", "[config]") {
  {
    const std::string text = std::string("torchrun train.py --pipeline-model-parallel-size 2 "
                                         "--pipeline-model-parallel-layout \"Et*8|t*8L\" X \\\n  ") +
                             kBatch16 + "  " + kModel;
    Diagnostics diags;
    TrainingJob j;
    CHECK_FALSE(read_args("layout-stray.sh", text, &j, diags));
    INFO(all_text(diags));
    check_at(find_diag(diags, Severity::kError,
                       "argument --pipeline-model-parallel-layout takes one value: argparse refuses 'X' after it "
                       "(\"unrecognized arguments\")"),
             text, "\" X", "X");
  }
  {
    const std::string text = std::string("torchrun train.py ") + kBatch16 + " " + kModel + " --num-layers \"16 7\"\n";
    Diagnostics diags;
    TrainingJob j;
    CHECK_FALSE(read_args("num-layers-blank.sh", text, &j, diags));
    INFO(all_text(diags));
    check_at(find_diag(diags, Severity::kError, "argument --num-layers: invalid int value: '16 7'"), text,
             "--num-layers \"16", "--num-layers");
    CHECK_FALSE(find_diag(diags, Severity::kError, "takes one value"));
  }
}

TEST_CASE("Megatron: uneven first and last stages and the embedding and loss counted as layers split as Megatron does",
          "[config][megatron-layout]") {
  const auto split = [](const std::string& flags) {
    Diagnostics diags;
    TrainingJob j;
    const bool ok = read_args("split.args", flags + "\n" + kBatch16 + kModel, &j, diags);
    INFO(flags << "\n" << all_text(diags));
    CHECK(ok);
    return j.stage_layers;
  };
  // 16 layers: 2 on each end, the middle two ranks 6 each.
  CHECK(split("--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 2 "
              "--decoder-last-pipeline-num-layers 2") == std::vector<int64_t>{2, 6, 6, 2});
  // The same over two virtual stages per rank: each rank's count halved, stage v·pp + r.
  CHECK(split("--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
              "--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 2") ==
        std::vector<int64_t>{1, 3, 3, 1, 1, 3, 3, 1});
  // Only the first given: the other ranks share the rest.
  CHECK(split("--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 4") ==
        std::vector<int64_t>{4, 12});
  // 16 + embedding + loss = 18 over pp 2 is 9 a rank; the first and the last stage build one fewer.
  CHECK(split("--pipeline-model-parallel-size 2 --account-for-embedding-in-pipeline-split "
              "--account-for-loss-in-pipeline-split") == std::vector<int64_t>{8, 8});
  CHECK(split("--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 3 "
              "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split") ==
        std::vector<int64_t>{2, 3, 3, 3, 3, 2});
  // Without those flags the even split is lower_job's: no split in the job.
  CHECK(split("--pipeline-model-parallel-size 2").empty());

  struct Case {
    std::string flags, message, at;
  };
  const std::vector<Case> refused = {
      {"--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 --decoder-first-pipeline-num-layers 3",
       "number of layers at first stage: 3must be divisible by virtual pipelineparallel degree 2",
       "--decoder-first-pipeline-num-layers"},
      {"--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 4 --decoder-last-pipeline-num-layers 4",
       "Mismatch: 8 middle layers remaining but 0 middle PP stages available.", "--decoder-first-pipeline-num-layers"},
      {"--pipeline-model-parallel-size 4 --decoder-last-pipeline-num-layers 3",
       "number of layers at middle stage: 13 must be divisible bythe middle pipeline model parallel size 3",
       "--decoder-last-pipeline-num-layers"},
      {"--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 0",
       "num_layers_in_first_pipeline_stage must be larger than 0", "--decoder-first-pipeline-num-layers"},
      {"--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 8 --account-for-loss-in-pipeline-split",
       "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot beset at the same time with "
       "account_for_embedding_in_pipeline_splitand account_for_loss_in_pipeline_split",
       "--decoder-first-pipeline-num-layers"},
      {"--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
       "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
       "number of layers on each pipeline rank: 9(after enable account_for_embedding_in_pipeline_split or "
       "account_for_loss_in_pipeline_split) must be divisible byvirtual_pipeline_model_parallel_size2",
       "--account-for-embedding-in-pipeline-split"},
      {"--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2 --decoder-first-pipeline-num-layers 2",
       "please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree when enable "
       "uneven pipeline parallelism",
       "--decoder-first-pipeline-num-layers"},
  };
  for (const Case& c : refused) {
    const std::string text = c.flags + "\n" + kBatch16 + kModel;
    Diagnostics diags;
    TrainingJob j;
    INFO(c.flags);
    CHECK_FALSE(read_args("split-bad.args", text, &j, diags));
    INFO(all_text(diags));
    const Diagnostic* d = find_diag(diags, Severity::kError, c.message);
    REQUIRE(d);
    CHECK(d->message == c.message);
    check_at(d, text, c.at, c.at);
  }
}

TEST_CASE("Megatron's layout string unrolls groups, repeats and commas as parse_str_to_list does",
          "[config][megatron-layout]") {
  std::string why;
  auto s = parse_megatron_layout("Ettt|(tt|)*2,m|L", &why);
  REQUIRE(s);
  CHECK(*s == std::vector<std::string>{"Ettt", "tt", "tt", "m", "L"});
  // The help text's example: an empty stage between two '|'.
  s = parse_megatron_layout("E|(t|)*3,m|m||L", &why);
  REQUIRE(s);
  CHECK(*s == std::vector<std::string>{"E", "t", "t", "t", "m", "m", "", "L"});
  // (|ab)*2,cd -> |ab|abcd, as Megatron's comment says.
  s = parse_megatron_layout("(|tt)*2,tt", &why);
  REQUIRE(s);
  CHECK(*s == std::vector<std::string>{"", "tt", "tttt"});
  CHECK(parse_megatron_layout("|*3", &why) == std::vector<std::string>{"", "", "", ""});
  // A count that would unroll past the cap is refused, not allocated.
  CHECK_FALSE(parse_megatron_layout("Et*99999999999999999999L", &why));
  CHECK(why.find("unrolls to more than") != std::string::npos);
  CHECK_FALSE(parse_megatron_layout("(tttt)*4000000", &why));
  // A refusal quotes a long layout cut to one line: `(x)*1000000` once gave a 2 MB message.
  CHECK_FALSE(parse_megatron_layout("(x)*1000000", &why));
  CHECK(why.size() < 600);
  CHECK(why.find("Invalid layer character: x (stage='xxxx") == 0);
  CHECK(why.find("... (999820 characters) ...") != std::string::npos);
}

TEST_CASE("Megatron: startup checks refuse deprecated flags, FSDP2 with PP and EP without experts", "[config]") {
  JobContext ctx;
  ctx.gpus = 8;
  const std::string text = std::string("--batch-size 4\n--pipeline-model-parallel-size 2 --use-torch-fsdp2\n"
                                       "--expert-model-parallel-size 2 --micro-batch-size 1\n--overlap-param-gather\n") +
                           kModel;
  const std::string path = test::write_temp("schedcheck_config_test", "checks.args", text);
  Diagnostics diags;
  TrainingJob j;
  CHECK_FALSE(read_megatron(path, ctx, &j, diags));
  INFO(all_text(diags));
  check_at(find_diag(diags, Severity::kError, "--batch-size argument is no longer valid"), text, "--batch-size");
  check_at(find_diag(diags, Severity::kError, "not supported with pipeline parallelism"), text, "--use-torch-fsdp2",
           "--use-torch-fsdp2");
  check_at(find_diag(diags, Severity::kError, "num_experts must be non None"), text, "--expert-model-parallel-size");
  check_at(find_diag(diags, Severity::kError, "--overlap-param-gather only supported"), text, "--overlap-param-gather");
}

TEST_CASE("Megatron: the expert grid, CP sequence split, VPP flags and precision flags are checked", "[config]") {
  JobContext ctx;
  ctx.gpus = 8;
  const std::string text =
      "--pipeline-model-parallel-size 2 --expert-model-parallel-size 8 --num-experts 8 --moe-router-topk 2\n"
      "--context-parallel-size 2 --seq-length 1022\n"
      "--num-layers-per-virtual-pipeline-stage 2 --num-virtual-stages-per-pipeline-rank 2\n"
      "--micro-batch-size 1 --bf16 --fp16\n"
      "--num-layers 16 --hidden-size 256 --num-attention-heads 8 --vocab-size 1000\n";
  const std::string path = test::write_temp("schedcheck_config_test", "grid.args", text);
  Diagnostics diags;
  TrainingJob j;
  CHECK_FALSE(read_megatron(path, ctx, &j, diags));
  INFO(all_text(diags));
  check_at(find_diag(diags, Severity::kError, "world_size (8) is not divisible by expert_tensor_model_pipeline_parallel "
                                              "size (16)"),
           text, "--expert-model-parallel-size", "--expert-model-parallel-size");
  check_at(find_diag(diags, Severity::kError, "seq-length should be a multiple of 2 * context-parallel-size"), text,
           "--seq-length", "--seq-length");
  check_at(find_diag(diags, Severity::kError, "--bf16 and --fp16 are mutually exclusive"), text, "--fp16", "--fp16");
  check_at(find_diag(diags, Severity::kError, "-layout are mutually exclusive"), text, "--num-virtual-stages-per-pipeline-rank",
           "--num-virtual-stages-per-pipeline-rank");
  REQUIRE(j.model_desc);
  REQUIRE(j.model_desc->moe);
  CHECK(j.model_desc->moe->experts == 8);
  CHECK(j.model_desc->moe->top_k == 2);
}

TEST_CASE("Megatron: query groups, the cross-entropy kernel's choices and a negative vocabulary are refused at "
          "the flag", "[config]") {
  JobContext ctx;
  ctx.gpus = 8;
  // 8 heads in 3 groups (attention.py @d98e8a64 divides one by the other); an impl outside
  // argparse's choices; the TransformerEngine kernel with the fusion (arguments.py L1697-1702).
  const std::string text =
      "--micro-batch-size 1 --global-batch-size 8\n"
      "--group-query-attention --num-query-groups 3\n"
      "--cross-entropy-fusion-impl fast\n"
      "--num-layers 16 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --vocab-size -5\n";
  const std::string path = test::write_temp("schedcheck_config_test", "gqa.args", text);
  Diagnostics diags;
  TrainingJob j;
  CHECK_FALSE(read_megatron(path, ctx, &j, diags));
  INFO(all_text(diags));
  check_at(find_diag(diags, Severity::kError, "num_attention_heads (8) must be a multiple of num_query_groups (3)"), text,
           "--num-query-groups", "--num-query-groups");
  check_at(find_diag(diags, Severity::kError,
                     "argument --cross-entropy-fusion-impl: invalid choice: 'fast' (choose from 'native', 'te')"),
           text, "--cross-entropy-fusion-impl", "fast");
  CHECK(find_diag(diags, Severity::kError, "--vocab-size"));
  CHECK_FALSE(find_diag(diags, Severity::kWarning, "--vocab-size is not given"));

  const std::string te = "--micro-batch-size 1 --global-batch-size 8\n"
                         "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te\n" + std::string(kModel);
  Diagnostics d2;
  TrainingJob j2;
  CHECK_FALSE(read_megatron(test::write_temp("schedcheck_config_test", "ce-te.args", te), ctx, &j2, d2));
  check_at(find_diag(d2, Severity::kError, "Transformer Engine cross entropy loss fusion is disabled"), te,
           "--cross-entropy-fusion-impl", "--cross-entropy-fusion-impl");
  // native with the fusion reads, as the fused kernel.
  const std::string native = "--micro-batch-size 1 --global-batch-size 8\n"
                             "--cross-entropy-loss-fusion --cross-entropy-fusion-impl native\n" + std::string(kModel);
  Diagnostics d3;
  TrainingJob j3;
  CHECK(read_megatron(test::write_temp("schedcheck_config_test", "ce-native.args", native), ctx, &j3, d3));
  CHECK(j3.loss_kernel == model::LossKernel::kMegatronFused);
}

TEST_CASE("Megatron: --group-query-attention alone is one query group, and the last cross-entropy fusion flag wins",
          "[config]") {
  JobContext ctx;
  ctx.gpus = 8;
  // arguments.py @d98e8a64: --num-query-groups defaults to 1 (argparse_meta), used with
  // --group-query-attention (argument_utils.py); the fusion's three spellings share one dest.
  const std::string text = "--micro-batch-size 1 --global-batch-size 8\n--group-query-attention\n"
                           "--no-cross-entropy-loss-fusion --cross-entropy-loss-fusion\n" + std::string(kModel);
  Diagnostics d;
  TrainingJob j;
  REQUIRE(read_megatron(test::write_temp("schedcheck_config_test", "mqa.args", text), ctx, &j, d));
  REQUIRE(j.model_desc);
  CHECK(j.model_desc->kv_heads == 1);
  CHECK(j.loss_kernel == model::LossKernel::kMegatronFused);
  const std::string off = "--micro-batch-size 1 --global-batch-size 8\n"
                          "--cross-entropy-loss-fusion --disable-cross-entropy-loss-fusion\n" + std::string(kModel);
  Diagnostics d2;
  TrainingJob j2;
  REQUIRE(read_megatron(test::write_temp("schedcheck_config_test", "ce-off.args", off), ctx, &j2, d2));
  CHECK(j2.loss_kernel == model::LossKernel::kMegatron);
  REQUIRE(j2.model_desc);
  CHECK(j2.model_desc->kv_heads == 8);  // without --group-query-attention: one group per head
}

TEST_CASE("Megatron: a value after a switch, or a second value after an int flag, is refused as argparse does",
          "[config]") {
  JobContext ctx;
  ctx.gpus = 8;
  // `--group-query-attention 8` and `--num-query-groups 8 9`: argparse stops with "unrecognized
  // arguments"; the values used to be dropped without a word.
  const std::string text = "--micro-batch-size 1 --global-batch-size 8\n--group-query-attention 8\n"
                           "--num-query-groups 8 9\n" + std::string(kModel);
  Diagnostics d;
  TrainingJob j;
  CHECK_FALSE(read_megatron(test::write_temp("schedcheck_config_test", "switch-value.args", text), ctx, &j, d));
  INFO(all_text(d));
  check_at(find_diag(d, Severity::kError, "--group-query-attention takes no value: argparse refuses '8'"), text,
           "--group-query-attention 8", "8");
  check_at(find_diag(d, Severity::kError, "argument --num-query-groups takes one value: argparse refuses '9'"), text,
           "--num-query-groups 8 9", "9");
}

TEST_CASE("Megatron: Megatron-FSDP and torch FSDP2 shard over the data-parallel ranks", "[config]") {
  JobContext ctx;
  ctx.gpus = 16;
  struct Case {
    const char* flags;
    Sharding sharding;
    bool reshard;
  };
  const Case cases[] = {{"--use-megatron-fsdp", Sharding::kFsdp, true},
                        {"--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads", Sharding::kZero2, false},
                        {"--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward", Sharding::kFsdp, false}};
  for (const Case& c : cases) {
    INFO(c.flags);
    const std::string text = std::string("--tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 16\n") +
                             c.flags + "\n" + kModel;
    const std::string path = test::write_temp("schedcheck_config_test", "fsdp.args", text);
    Diagnostics diags;
    TrainingJob j;
    const bool ok = read_megatron(path, ctx, &j, diags);
    INFO(all_text(diags));
    REQUIRE(ok);
    CHECK(j.sharding == c.sharding);
    CHECK(j.reshard_after_forward == c.reshard);
    CHECK(j.layout.dp_shard == 8);
    CHECK(j.layout.dp_replicate == 1);
    CHECK(j.microbatches == 2);
    CHECK(j.loc("sharding").line == 2);
  }
}

TEST_CASE("Megatron: without model dimensions the --model preset is used, and without one it is an error",
          "[config]") {
  const std::string text = "--micro-batch-size 1 --global-batch-size 32 --seq-length 4096 --fp16\n"
                           "--pipeline-model-parallel-size 2 --use-torch-fsdp2\n";
  const std::string path = test::write_temp("schedcheck_config_test", "preset.args", text);
  JobContext ctx;
  ctx.gpus = 8;
  {
    Diagnostics diags;
    TrainingJob j;
    CHECK_FALSE(read_megatron(path, ctx, &j, diags));
    INFO(all_text(diags));
    const Diagnostic* d = find_diag(diags, Severity::kError, "pass --model");
    REQUIRE(d);
    CHECK(d->loc.line == 1);
    CHECK(d->message.find("llama3-8b") != std::string::npos);
  }
  ctx.model = "llama3-8b";
  const std::string fixed = "--micro-batch-size 1 --global-batch-size 32 --seq-length 4096 --fp16\n"
                            "--pipeline-model-parallel-size 2\n";
  const std::string path2 = test::write_temp("schedcheck_config_test", "preset2.args", fixed);
  Diagnostics diags;
  TrainingJob j;
  const bool ok = read_megatron(path2, ctx, &j, diags);
  INFO(all_text(diags));
  REQUIRE(ok);
  CHECK(j.model == "llama3-8b");
  CHECK_FALSE(j.model_desc);
  CHECK(j.layout.pp == 2);
  CHECK(j.layout.dp_replicate == 4);
  CHECK(j.sharding == Sharding::kDdp);
  CHECK(j.microbatches == 8);
  CHECK(j.schedule == "1f1b");
  CHECK(j.param_dtype == "fp16");
  CHECK(j.reduce_dtype == "fp16");
}

TEST_CASE("the DeepSpeed ZeRO-3 config reads as FSDP over 8 GPUs with its prefetch and residency limits", "[config]") {
  if (test::corpus_dir().empty()) {
    SC_SKIP("../shared/corpus not found; skipping the DeepSpeed corpus test");
  }
  const std::string path = test::corpus_dir() + "/deepspeed/ds_config_zero3.json";
  const std::string text = test::read_file(path);
  REQUIRE(is_deepspeed_config(path));
  CHECK_FALSE(is_megatron_config(path));
  JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  Diagnostics diags;
  TrainingJob j;
  const bool ok = read_deepspeed(path, ctx, &j, diags);
  INFO(all_text(diags));
  REQUIRE(ok);
  CHECK(j.framework == "deepspeed");
  CHECK(j.model == "llama3-8b");
  CHECK(j.world == 8);
  CHECK(j.sharding == Sharding::kFsdp);
  CHECK(j.reshard_after_forward);
  CHECK(j.layout.dp_shard == 8);
  CHECK(j.layout.pp == 1);
  CHECK(j.prefetch_bucket_params == 50'000'000);
  CHECK(j.max_live_params == 1'000'000'000);
  CHECK(j.microbatches == 1);
  CHECK(j.microbatch_sequences == 1);
  CHECK(j.global_batch_sequences == 8);
  CHECK(j.reduce_dtype == "bf16");
  CHECK(j.param_dtype == "bf16");
  auto [stage_line, stage_col] = position(text, "\"stage\"", "3");
  CHECK(j.loc("sharding").line == stage_line);
  CHECK(j.loc("sharding").col == stage_col);
  CHECK(has_unmodelled(j, "optimizer"));
  CHECK(has_unmodelled(j, "scheduler"));
  CHECK(has_unmodelled(j, "zero_optimization.sub_group_size"));
  CHECK_FALSE(has_unmodelled(j, "train_micro_batch_size_per_gpu"));
}

TEST_CASE("DeepSpeed: broken configs give DeepSpeed's error at the key", "[config]") {
  JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  auto read = [&](const std::string& name, const std::string& text, Diagnostics& diags) {
    const std::string path = test::write_temp("schedcheck_config_test", name, text);
    REQUIRE(is_deepspeed_config(path));
    TrainingJob j;
    CHECK_FALSE(read_deepspeed(path, ctx, &j, diags));
  };
  SECTION("ZeRO-3 with pipeline stages") {
    const std::string text =
        "{\n"
        "  \"train_micro_batch_size_per_gpu\": 1,\n"
        "  \"gradient_accumulation_steps\": 4,\n"
        "  \"zero_optimization\": {\"stage\": 3},\n"
        "  \"pipeline\": {\"stages\": 2}\n"
        "}\n";
    Diagnostics diags;
    read("zero3_pp.json", text, diags);
    INFO(all_text(diags));
    check_at(find_diag(diags, Severity::kError, "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"), text,
             "\"stage\"", "3}");
    check_at(find_diag(diags, Severity::kNote, "never reads it"), text, "\"stages\"", "2}");
  }
  SECTION("train_batch_size that is not micro × accumulation × data parallel") {
    const std::string text =
        "{\n"
        "  \"train_batch_size\": 30,\n"
        "  \"train_micro_batch_size_per_gpu\": 2,\n"
        "  \"gradient_accumulation_steps\": 2\n"
        "}\n";
    Diagnostics diags;
    read("batch.json", text, diags);
    INFO(all_text(diags));
    check_at(find_diag(diags, Severity::kError, "train_batch_size is not equal to micro_batch_per_gpu * "
                                                "gradient_acc_step * world_size 30 != 2 * 2 * 8"),
             text, "\"train_batch_size\"", "30");
  }
  SECTION("communication_data_type int8") {
    const std::string text = "{\"train_batch_size\": 16,\n \"communication_data_type\": \"int8\"}\n";
    Diagnostics diags;
    read("comm.json", text, diags);
    INFO(all_text(diags));
    check_at(find_diag(diags, Severity::kError, "invalid communication_data_type"), text, "int8", "\"int8\"");
  }
  SECTION("a negative or fractional element count") {
    const std::string text =
        "{\"train_batch_size\": 16, \"zero_optimization\": {\"stage\": 3,\n"
        "  \"stage3_prefetch_bucket_size\": 2.5e-1, \"stage3_max_live_parameters\": -1}}\n";
    Diagnostics diags;
    read("counts.json", text, diags);
    INFO(all_text(diags));
    check_at(find_diag(diags, Severity::kError, "must be a whole number"), text, "2.5e-1", "2.5e-1");
    check_at(find_diag(diags, Severity::kError, "must be at least 0"), text, "-1}", "-1}");
  }
  SECTION("no world size, no model, no batch") {
    ctx = JobContext{};
    const std::string text = "{\"zero_optimization\": {\"stage\": 1}}\n";
    Diagnostics diags;
    read("bare.json", text, diags);
    INFO(all_text(diags));
    const Diagnostic* gpus = find_diag(diags, Severity::kError, "pass --gpus");
    REQUIRE(gpus);
    CHECK(gpus->loc.line == 1);
    CHECK(gpus->loc.col == 1);
    const Diagnostic* model = find_diag(diags, Severity::kError, "pass --model");
    REQUIRE(model);
    CHECK(model->message.find("llama3-8b") != std::string::npos);
  }
  SECTION("duplicate keys and broken JSON") {
    const std::string text = "{\"train_batch_size\": 16,\n \"train_batch_size\": 8}\n";
    Diagnostics diags;
    read("dup.json", text, diags);
    check_at(find_diag(diags, Severity::kError, "duplicate key 'train_batch_size'"), text, " \"train_batch_size\": 8",
             "\"train_batch_size\"");
    Diagnostics diags2;
    read("trunc.json", "{\"train_batch_size\": 16,\n", diags2);
    CHECK(find_diag(diags2, Severity::kError, "invalid JSON"));
  }
  SECTION("neither train_batch_size nor train_micro_batch_size_per_gpu") {
    const std::string text = "{\"zero_optimization\": {\"stage\": 2}, \"bf16\": {\"enabled\": true}}\n";
    Diagnostics diags;
    read("nobatch.json", text, diags);
    CHECK(find_diag(diags, Severity::kError, "Either train_batch_size or train_micro_batch_size_per_gpu"));
  }
}

TEST_CASE("DeepSpeed: pipeline.stages gives the pipeline degree with a note that DeepSpeed never reads it",
          "[config]") {
  const std::string text =
      "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 8,\n"
      " \"zero_optimization\": {\"stage\": 1}, \"pipeline\": {\"stages\": 4, \"partition\": \"uniform\"}}\n";
  const std::string path = test::write_temp("schedcheck_config_test", "pipe.json", text);
  JobContext ctx;
  ctx.gpus = 16;
  ctx.model = "llama3-8b";
  Diagnostics diags;
  TrainingJob j;
  const bool ok = read_deepspeed(path, ctx, &j, diags);
  INFO(all_text(diags));
  REQUIRE(ok);
  CHECK(j.layout.pp == 4);
  CHECK(j.layout.dp_replicate == 4);
  CHECK(j.microbatches == 8);
  CHECK(j.global_batch_sequences == 64);
  CHECK(j.schedule == "1f1b");
  CHECK(j.loc("pp").line == 2);
  CHECK(has_unmodelled(j, "pipeline.partition"));
  check_at(find_diag(diags, Severity::kNote, "never reads it"), text, "\"stages\"", "4,");
}

TEST_CASE("DeepSpeed with --tp and --pp applies the batch rule to the data-parallel size (Megatron-DeepSpeed)",
          "[config]") {
  // BLOOM-176B's DeepSpeed config (bigscience tr11-176B-ml: micro batch 2, global batch 2048, ZeRO
  // stage 0, bf16) on 384 GPUs with TP 4 and PP 12: DeepSpeed, handed Megatron's mpu, checks
  // 2048 = 2 · gas · 8, so gas = 128 (docs/facts/config-keys.md#deepspeed-batch-and-precision).
  const std::string text = "{\"train_batch_size\": 2048, \"train_micro_batch_size_per_gpu\": 2,\n"
                           " \"zero_optimization\": {\"stage\": 0}, \"bf16\": {\"enabled\": true}}\n";
  const std::string path = test::write_temp("schedcheck_config_test", "bloom.json", text);
  JobContext ctx;
  ctx.gpus = 384;
  ctx.model = "llama3-70b";
  {
    // Against the world size (no model-parallel unit) the triple does not hold.
    Diagnostics diags;
    TrainingJob j;
    CHECK_FALSE(read_deepspeed(path, ctx, &j, diags));
    check_at(find_diag(diags, Severity::kError, "train_batch_size is not equal to micro_batch_per_gpu * "
                                                "gradient_acc_step * world_size 2048 != 2 * 2 * 384"),
             text, "\"train_batch_size\"", "2048");
  }
  ctx.tp = 4;
  ctx.pp = 12;
  Diagnostics diags;
  TrainingJob j;
  const bool ok = read_deepspeed(path, ctx, &j, diags);
  INFO(all_text(diags));
  REQUIRE(ok);
  CHECK(j.layout.tp == 4);
  CHECK(j.layout.pp == 12);
  CHECK(j.layout.dp_replicate == 8);
  CHECK(j.microbatch_sequences == 2);
  CHECK(j.microbatches == 128);
  CHECK(j.global_batch_sequences == 2048);
  // Degrees that do not divide the world: located at the config, not nowhere.
  ctx.gpus = 100;
  Diagnostics bad;
  TrainingJob k;
  CHECK_FALSE(read_deepspeed(path, ctx, &k, bad));
  REQUIRE(bad.all().size() == 1);
  CHECK(bad.all()[0].loc.valid());
  CHECK(bad.all()[0].loc.line == 1);
  CHECK(bad.all()[0].message == "world size (100) is not divisible by the tensor (4) times pipeline (12) parallel ranks");
}

TEST_CASE("DeepSpeed: the batch triple derives the missing key, and stage 1 is data-parallel replicated", "[config]") {
  const std::string text =
      "{\"train_batch_size\": 64, \"gradient_accumulation_steps\": 4, \"zero_optimization\": {\"stage\": 1},\n"
      " \"fp16\": {\"enabled\": true}, \"activation_checkpointing\": {\"partition_activations\": true}}\n";
  const std::string path = test::write_temp("schedcheck_config_test", "triple.json", text);
  JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  Diagnostics diags;
  TrainingJob j;
  const bool ok = read_deepspeed(path, ctx, &j, diags);
  INFO(all_text(diags));
  REQUIRE(ok);
  CHECK(j.sharding == Sharding::kZero1);
  CHECK(j.layout.dp_replicate == 8);
  CHECK(j.microbatch_sequences == 2);
  CHECK(j.microbatches == 4);
  CHECK(j.reduce_dtype == "fp16");
  CHECK(j.param_dtype == "fp16");
  CHECK(j.recompute == model::Recompute::kFull);
}


TEST_CASE("a key the framework does not define is an error with the closest key, in all three formats", "[config]") {
  // The key dictionaries (src/config/config_keys.cc; docs/facts/config-keys.md#key-dictionaries).
  {
    // torchtitan's JobConfig has parallelism.pipeline_parallel_degree.
    const std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\npipeline_paralel_degree = 4\n";
    const std::string path = test::write_temp("schedcheck_config_test", "typo.toml", text);
    JobContext ctx;
    ctx.gpus = 8;
    Diagnostics diags;
    TrainingJob j;
    CHECK_FALSE(read_torchtitan(path, ctx, &j, diags));
    const Diagnostic* d = find_diag(diags, Severity::kError, "did you mean 'pipeline_parallel_degree'?");
    check_at(d, text, "pipeline_paralel_degree");
    CHECK(d->message.find("unknown key 'parallelism.pipeline_paralel_degree'") != std::string::npos);
    // A table torchtitan does not have.
    const std::string t2 = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[paralelism]\npipeline_parallel_degree = 4\n";
    Diagnostics d2;
    CHECK_FALSE(read_torchtitan(test::write_temp("schedcheck_config_test", "typo2.toml", t2), ctx, &j, d2));
    check_at(find_diag(d2, Severity::kError, "did you mean 'parallelism'?"), t2, "[paralelism]", "paralelism");
  }
  {
    // DeepSpeed's zero_optimization has overlap_comm.
    const std::string text = "{\n  \"train_micro_batch_size_per_gpu\": 1,\n  \"zero_optimization\": {\n"
                             "    \"stage\": 3,\n    \"overlap_com\": true\n  }\n}\n";
    const std::string path = test::write_temp("schedcheck_config_test", "typo.json", text);
    JobContext ctx;
    ctx.gpus = 8;
    ctx.model = "llama3-8b";
    Diagnostics diags;
    TrainingJob j;
    CHECK_FALSE(read_deepspeed(path, ctx, &j, diags));
    check_at(find_diag(diags, Severity::kError, "did you mean 'overlap_comm'?"), text, "overlap_com", "\"overlap_com");
  }
  {
    const std::string text = std::string("--tensor-model-paralel-size 2 --micro-batch-size 1\n") + kModel;
    const std::string path = test::write_temp("schedcheck_config_test", "typo.args", text);
    JobContext ctx;
    ctx.gpus = 8;
    Diagnostics diags;
    TrainingJob j;
    CHECK_FALSE(read_megatron(path, ctx, &j, diags));
    const Diagnostic* d = find_diag(diags, Severity::kError, "did you mean '--tensor-model-parallel-size'?");
    check_at(d, text, "--tensor-model-paralel-size");
    CHECK(d->message.find("unrecognized arguments: --tensor-model-paralel-size") != std::string::npos);
  }
}

TEST_CASE("every shipped config reads without an unknown key", "[config]") {
  // The examples, the published runs and the corpus use only keys their frameworks define; a
  // key defined but not modelled is listed, not refused.
  std::vector<std::string> files;
  for (const char* dir : {"examples", "specs/reference/published"})
    for (const auto& e : std::filesystem::directory_iterator(test::source_path(dir))) files.push_back(e.path().string());
  if (!test::corpus_dir().empty())
    for (const auto& e : std::filesystem::recursive_directory_iterator(test::corpus_dir()))
      if (e.is_regular_file()) files.push_back(e.path().string());
  int read = 0;
  for (const std::string& f : files) {
    const std::string ext = std::filesystem::path(f).extension().string();
    if (ext != ".toml" && ext != ".json" && ext != ".sh") continue;
    if (std::filesystem::path(f).filename() == "runs.toml") continue;  // the fidelity table's index
    JobContext ctx;
    ctx.gpus = 64;
    ctx.model = "llama3-8b";
    Diagnostics diags;
    TrainingJob j;
    if (ext == ".toml") read_torchtitan(f, ctx, &j, diags);
    else if (ext == ".json") read_deepspeed(f, ctx, &j, diags);
    else if (is_megatron_config(f)) read_megatron(f, ctx, &j, diags);
    else continue;
    ++read;
    INFO(f << "\n" << all_text(diags));
    CHECK_FALSE(find_diag(diags, Severity::kError, "unknown key"));
    CHECK_FALSE(find_diag(diags, Severity::kError, "unknown table"));
    CHECK_FALSE(find_diag(diags, Severity::kError, "unrecognized arguments"));
  }
  CHECK(read >= 22);  // 20 published runs, the pp2 TOML and the Mixtral script at least
}


TEST_CASE("Megatron: thousands of junk flags get located errors, suggestions for the first 32 only", "[config]") {
  // A fuzzing find: one 40 KB flag (or many long ones) cost an edit-distance search over every
  // Megatron flag each, minutes under the sanitizers. Now a word past kMaxSuggestedWord gets no
  // suggestion and only the first 32 unknown flags are searched.
  std::string text = std::string("--micro-batch-size 1 --global-batch-size 8\n") + kModel;
  text += "--" + std::string(40000, 'x') + "\n";
  for (int i = 0; i < 200; ++i) text += "--tensor-model-paralel-size" + std::to_string(i) + " 1\n";
  const std::string path = test::write_temp("schedcheck_config_test", "junkflags.args", text);
  JobContext ctx;
  ctx.gpus = 8;
  Diagnostics diags;
  TrainingJob j;
  CHECK_FALSE(read_megatron(path, ctx, &j, diags));
  int unknown = 0, suggested = 0;
  for (const auto& d : diags.all()) {
    if (d.message.find("unrecognized arguments") == std::string::npos) continue;
    ++unknown;
    if (d.message.find("did you mean '--tensor-model-parallel-size'") != std::string::npos) ++suggested;
    if (d.message.find("--xxxx") != std::string::npos) CHECK(d.message.find("did you mean") == std::string::npos);
  }
  CHECK(unknown == 201);
  CHECK(suggested == 31);  // 32 searches, one of them spent on the 40 KB flag
}

TEST_CASE("closest_match's banded search finds what a full edit distance finds", "[config]") {
  auto full = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t k = 0; k <= b.size(); ++k) d[0][k] = k;
    for (size_t i = 1; i <= a.size(); ++i)
      for (size_t k = 1; k <= b.size(); ++k)
        d[i][k] = std::min({d[i - 1][k] + 1, d[i][k - 1] + 1, d[i - 1][k - 1] + (a[i - 1] == b[k - 1] ? 0 : 1)});
    return d[a.size()][b.size()];
  };
  const std::vector<std::string> names = {"pipeline_parallel_degree", "tensor_parallel_degree", "data_parallel_shard_degree",
                                          "--micro-batch-size", "--global-batch-size", "ab", "abc", "zz"};
  std::mt19937 rng(3);
  const std::string alphabet = "abcdeglmnoprst_-";
  int agreed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string w = names[rng() % names.size()];
    for (int e = static_cast<int>(rng() % 6); e > 0 && !w.empty(); --e) {
      const size_t pos = rng() % w.size();
      switch (rng() % 3) {
        case 0: w[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: w.erase(pos, 1); break;
        default: w.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    size_t best = std::max<size_t>(2, w.size() / 3) + 1;
    std::string expect;
    for (const auto& n : names) {
      const size_t dist = full(w, n);
      if (dist < best) best = dist, expect = n;
    }
    if (expect.empty() && w.size() >= 9) {  // the abbreviation rule: one longer name sharing all but 2 chars
      int found = 0;
      for (const auto& n : names)
        if (n.size() > w.size() && n.compare(0, w.size() - 2, w, 0, w.size() - 2) == 0) expect = n, ++found;
      if (found != 1) expect.clear();
    }
    if (expect.empty() && w.size() >= 9) {  // the words rule: the same '_'/'-' parts, one of each pair beginning the other
      auto split = [](const std::string& s) {
        std::vector<std::string> out(1);
        for (char c : s)
          if (c == '_' || c == '-') out.emplace_back();
          else out.back() += c;
        return out;
      };
      const std::vector<std::string> mine = split(w);
      int found = 0;
      for (const auto& n : names) {
        const std::vector<std::string> theirs = split(n);
        bool fits = mine.size() >= 2 && theirs.size() == mine.size() && n != w;
        for (size_t i = 0; fits && i < mine.size(); ++i) {
          const std::string& a = mine[i].size() < theirs[i].size() ? mine[i] : theirs[i];
          const std::string& b = mine[i].size() < theirs[i].size() ? theirs[i] : mine[i];
          fits = a == b || (a.size() >= 2 && b.compare(0, a.size(), a) == 0);
        }
        if (fits) expect = n, ++found;
      }
      if (found != 1) expect.clear();
    }
    INFO(w);
    CHECK(closest_match(w, names) == expect);
    agreed += closest_match(w, names) == expect;
  }
  CHECK(agreed == 3000);
}


TEST_CASE("DeepSpeed: hidden-size and precision keys left to the Hugging Face Trainer are filled as it fills them",
          "[config]") {
  // transformers src/transformers/integrations/deepspeed.py @0234833: trainer_config_finalize
  // sets stage3_prefetch_bucket_size to 0.9·hidden² at ZeRO-3; fill_match sets bf16.enabled from
  // --bf16. llama3-8b's hidden size is 4096: 0.9 · 4096² = 15,099,494.
  const std::string text =
      "{\n"
      "  \"train_micro_batch_size_per_gpu\": 1,\n"
      "  \"gradient_accumulation_steps\": 1,\n"
      "  \"bf16\": {\"enabled\": \"auto\"},\n"
      "  \"zero_optimization\": {\"stage\": 3, \"stage3_prefetch_bucket_size\": \"auto\",\n"
      "                        \"reduce_bucket_size\": \"auto\"}\n"
      "}\n";
  const std::string path = test::write_temp("schedcheck_config_test", "hf-auto.json", text);
  JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  Diagnostics diags;
  TrainingJob j;
  const bool ok = read_deepspeed(path, ctx, &j, diags);
  INFO(all_text(diags));
  REQUIRE(ok);
  CHECK(j.prefetch_bucket_params == 15'099'494);
  CHECK(j.param_dtype == "bf16");
  const Diagnostic* prefetch = find_diag(diags, Severity::kNote, "0.9 × hidden² = 15099494");
  check_at(prefetch, text, "stage3_prefetch_bucket_size", "\"auto\"");
  const Diagnostic* bf16 = find_diag(diags, Severity::kNote, "bf16.enabled is \"auto\"");
  check_at(bf16, text, "\"bf16\"", "\"auto\"");

  // fp16 left to the Trainer with bf16 off: fp16.
  const std::string fp16_text =
      "{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": false}, \"fp16\": {\"enabled\": \"auto\"}}\n";
  const std::string fp16_path = test::write_temp("schedcheck_config_test", "hf-auto-fp16.json", fp16_text);
  Diagnostics d2;
  TrainingJob j2;
  REQUIRE(read_deepspeed(fp16_path, ctx, &j2, d2));
  CHECK(j2.param_dtype == "fp16");
}

}  // namespace sc::config
