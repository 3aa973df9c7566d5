// Hostile framework configs: nesting and expansion that once crashed the readers or grew without
// bound (a Megatron script with 40,743 unary minus signs, a TOML header of 30,927 dotted parts,
// `x=y+y+y+y` chains, `$V` repeated). Each gives a located error or the bash value, quickly.
#include <string>

#include "catch.h"
#include "config/readers.h"
#include "config/shell_args.h"
#include "config/toml_limits.h"
#include "support/source.h"
#include "diag_util.h"
#include "test_util.h"

namespace sc::config {
namespace {

using sc::test::all_text;

const ShellFlag* flag(const ShellArgs& a, const std::string& name) {
  for (const auto& f : a.flags)
    if (f.name == name) return &f;
  return nullptr;
}

TEST_CASE("arithmetic nested past the limit is a located error, not a stack overflow", "[config][limits]") {
  for (const std::string& inner : {std::string(40'743, '-') + "1", std::string(40'643, '(') + "1" + std::string(40'643, ')')}) {
    const std::string text = "torchrun pretrain_gpt.py --num-layers $((" + inner + "))\n";
    const int32_t file = register_source("deep.sh", text);
    ShellArgs a = read_shell_args(file, text);
    CHECK(a.limit_error.find("nests parentheses or signs more than 64 deep") != std::string::npos);
    CHECK(a.limit_loc.line == 1);
    CHECK(a.limit_loc.col == 39);  // the `$` of `$((`
  }
  // Within the limit, bash's value: 64 minus signs are +1, 63 are -1.
  const std::string ok = "torchrun x.py --a $((" + std::string(64, '-') + "1)) --b $((" + std::string(63, '-') + "1))\n";
  ShellArgs a = read_shell_args(register_source("ok.sh", ok), ok);
  CHECK(a.limit_error.empty());
  REQUIRE(flag(a, "--a"));
  CHECK(flag(a, "--a")->values.at(0).text == "1");
  CHECK(flag(a, "--b")->values.at(0).text == "-1");
}

TEST_CASE("nested ${...:-...} defaults past the limit are a located error", "[config][limits]") {
  std::string word = "7";
  for (int i = 0; i < 300; ++i) word = "${U:-" + word + "}";
  const std::string text = "torchrun x.py --num-layers " + word + "\n";
  ShellArgs a = read_shell_args(register_source("defaults.sh", text), text);
  CHECK(a.limit_error.find("defaults nest more than 64 deep") != std::string::npos);
  // 10 levels: the default's value.
  word = "7";
  for (int i = 0; i < 10; ++i) word = "${U:-" + word + "}";
  const std::string ten = "torchrun x.py --num-layers " + word + "\n";
  ShellArgs b = read_shell_args(register_source("ten.sh", ten), ten);
  CHECK(b.limit_error.empty());
  REQUIRE(flag(b, "--num-layers"));
  CHECK(flag(b, "--num-layers")->values.at(0).text == "7");
}

TEST_CASE("arithmetic over chains of variables takes time linear in their text", "[config][limits]") {
  // v0 = v1 sixteen times over, ..., v13 = v14 sixteen times, v14=1: $((v0)) is 16^14 = 2^56.
  // Evaluating each reference anew took 16^depth steps (a 189-byte script of 4-term lines ran
  // 27 s); each variable is now evaluated once per $((...)).
  std::string text;
  for (int i = 0; i < 14; ++i) {
    text += "v" + std::to_string(i) + "=";
    for (int k = 0; k < 16; ++k) text += (k ? "+v" : "v") + std::to_string(i + 1);
    text += "\n";
  }
  text += "v14=1\ntorchrun x.py --num-layers $((v0))\n";
  ShellArgs a = read_shell_args(register_source("chain.sh", text), text);
  REQUIRE(flag(a, "--num-layers"));
  CHECK(flag(a, "--num-layers")->values.at(0).text == "72057594037927936");
}

TEST_CASE("expansions are bounded before they are built", "[config][limits]") {
  SECTION("a value doubling itself stops at the per-value limit") {
    std::string text = "V=x\n";
    for (int i = 0; i < 40; ++i) text += "V=$V$V\n";  // 2^40 characters if unbounded
    text += "torchrun x.py --data-path $V\n";
    ShellArgs a = read_shell_args(register_source("double.sh", text), text);
    CHECK(a.limit_error == "V expands to more than 65536 characters: a launch script's values are short, so this is not read");
    // Line k holds 2^(k-1) characters of V; the word `V=$V$V` of line 17 would be 2 + 65,536.
    CHECK(a.limit_loc.line == 17);
    REQUIRE(a.vars.count("V"));
    CHECK(a.vars.at("V").value.size() <= kMaxShellValue);
  }
  SECTION("thousands of references to a long value stop at the script's limit") {
    std::string text = "V=x\n";
    for (int i = 0; i < 15; ++i) text += "V=$V$V\n";  // 32,768 characters: within the limit
    std::string line = "torchrun x.py";
    for (int i = 0; i < 200; ++i) line += " $V";       // 6.5 M characters if unbounded
    text += line + "\n";
    ShellArgs a = read_shell_args(register_source("refs.sh", text), text);
    CHECK(a.limit_error.find("the script's expansions produce more than 4194304 characters") != std::string::npos);
  }
}

TEST_CASE("TOML nested past the limits is a located error before the TOML parser runs", "[config][limits]") {
  std::string header = "[a";
  for (int i = 0; i < 30'926; ++i) header += ".a";
  header += "]\nx = 1\n";
  auto lim = toml_nesting_limit(header);
  REQUIRE(lim);
  CHECK(lim->line == 1);
  CHECK(lim->col == 2 + 2 * 127 + 1);  // the 128th dot
  CHECK(lim->message.find("more than 128 dotted parts") != std::string::npos);

  auto deep = toml_nesting_limit("x = " + std::string(40'000, '[') + std::string(40'000, ']') + "\n");
  REQUIRE(deep);
  CHECK(deep->col == 5 + 64);
  CHECK(deep->message.find("nest more than 64 deep") != std::string::npos);

  // Floats, times, dotted keys of a real config, and brackets inside strings and comments pass.
  CHECK_FALSE(toml_nesting_limit("[parallelism]\npipeline_parallel_degree = 4\nlr = 3.0e-4\nt = 07:32:00.999\n"
                                 "a.b.c = \"[[[[.....]]]]\" # [[[[ . . . \n'x.y' = 1\n"));

  // Through the reader: exit-2 material, located.
  const std::string path = sc::test::write_temp("schedcheck-config-limits", "deep.toml", header);
  JobContext ctx;
  TrainingJob job;
  Diagnostics d;
  CHECK_FALSE(read_torchtitan(path, ctx, &job, d));
  CHECK(all_text(d).find("deep.toml:1:257: error: a key or table header has more than 128 dotted parts") != std::string::npos);
}

TEST_CASE("a DeepSpeed config with a surrogate-pair escape reads as json.load reads it", "[config][limits]") {
  // "\ud83d\ude00" is valid JSON (one code point, U+1F600); yaml-cpp refused each half.
  const std::string path = sc::test::write_temp(
      "schedcheck-config-limits", "emoji.json",
      "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 8, \"bf16\": {\"enabled\": true},\n"
      " \"wandb\": {\"enabled\": false, \"project\": \"run \\ud83d\\ude00\"},\n"
      " \"zero_optimization\": {\"stage\": 3}}\n");
  JobContext ctx;
  ctx.gpus = 8;
  ctx.model = "llama3-8b";
  ctx.hardware = "h100";
  TrainingJob job;
  Diagnostics d;
  const bool ok = read_deepspeed(path, ctx, &job, d);
  INFO(all_text(d));
  CHECK(ok);
  CHECK(all_text(d).find("invalid JSON") == std::string::npos);
}

}  // namespace
}  // namespace sc::config

namespace sc::config {
namespace {

TEST_CASE("a ${NAME:=default} assignment is bounded like any other", "[config][limits]") {
  // The default's expansion fills the word to the limit and its literal text goes past it; the
  // assigned value once kept both (a fuzzing find).
  std::string text = "V=x\n";
  for (int i = 0; i < 16; ++i) text += "V=$V$V\n";  // 65,536 characters
  text += "echo ${W:=${V}tail}\ntorchrun x.py --data-path $W\n";
  ShellArgs a = read_shell_args(register_source("assign-default.sh", text), text);
  REQUIRE(a.vars.count("W"));
  CHECK(a.vars.at("W").value.size() <= kMaxShellValue);
  CHECK(a.limit_error.find("expands to more than 65536 characters") != std::string::npos);
}

}  // namespace
}  // namespace sc::config
