// Tests of the fsdp spec loader (fsdp/fsdp_yaml.h): values as written, defaults, located errors.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "catch.h"
#include "fsdp/fsdp_yaml.h"

using namespace sc;
namespace fs = std::filesystem;

namespace {

std::optional<FsdpSpec> parse(const std::string& text, Diagnostics& diags) {
  return parse_fsdp_spec("t.yaml", text, diags);
}

// The first diagnostic by location, as printed: "t.yaml:LINE:COL: error: message".
std::string first_error(const std::string& text) {
  Diagnostics d;
  if (parse(text, d)) return "<loaded>";
  std::ostringstream os;
  d.print(os);
  return os.str().substr(0, os.str().find('\n'));
}

std::string all_errors(const std::string& text) {
  Diagnostics d;
  if (parse(text, d)) return "<loaded>";
  std::ostringstream os;
  d.print(os);
  return os.str();
}

// The example of specs/fsdp.md.
constexpr const char* kExample = R"(schedcheck: 1
name: llama3-8b-fsdp2        # optional, default file stem
ranks: 8
memory: {limit_bytes: 80GiB}
fsdp:
  implementation: fsdp2
  shard_size: 8
  replicate_size: 1
  dtypes: {param: bf16, reduce: fp32}
  link: {bandwidth: 450GB/s, latency: 10us, model: ring}
  microbatches: 1
  iterations: 2
  optimizer: adam
  units:
    - {name: embed, params_bytes: 1GiB, forward: 0.2ms, backward: 0.4ms, activation_bytes: 0.1GiB}
    - {name: layer, repeat: 32, params_bytes: 436MiB, forward: 1.1ms, backward: 2.2ms, activation_bytes: 0.5GiB}
    - {name: head, params: 525M, forward: 0.3ms, backward: 0.6ms, activation_bytes: 1GiB}
  options: {reshard_after_forward: true, forward_prefetch_depth: 1, backward_prefetch_depth: 1}
  ranks_override: {3: {skip_units: [layer.7]}, 5: {repeat_units: [layer.2]}, 6: {microbatches: 2}}
  programs:
    all:
      - {op: all_gather, unit: embed, id: g0}
      - {op: forward, unit: embed, after: [g0]}
      - {op: free, unit: embed, stream: all_gather}
)";

// Lines 1-7: a valid head with two units (embed; layer.0 .. layer.31) and 8 ranks.
constexpr const char* kHead = R"(schedcheck: 1
ranks: 8
fsdp:
  link: {bandwidth: 450GB/s}
  units:
    - {name: embed, params_bytes: 1GiB, forward: 1ms, backward: 2ms}
    - {name: layer, repeat: 32, params_bytes: 436MiB, forward: 1ms, backward: 2ms}
)";

std::string with(const std::string& tail) { return std::string(kHead) + tail; }

}  // namespace

TEST_CASE("the fsdp example loads with every value as written", "[fsdp-spec]") {
  Diagnostics d;
  auto s = parse(kExample, d);
  INFO(all_errors(kExample));
  REQUIRE(s);
  CHECK(s->name == "llama3-8b-fsdp2");
  CHECK(s->ranks == 8);
  REQUIRE(s->limit_bytes);
  CHECK(*s->limit_bytes == int64_t{80} << 30);
  CHECK(s->implementation == FsdpImplementation::kFsdp2);
  CHECK(s->shard_size == 8);
  CHECK(s->replicate_size == 1);
  CHECK(s->param_dtype.name == "bf16");
  CHECK(s->param_dtype.bytes == 2);
  CHECK(s->reduce_dtype.name == "fp32");
  CHECK(s->reduce_dtype.bytes == 4);
  CHECK(s->bandwidth_bytes_per_s == 450e9);
  CHECK(s->latency_s == Approx(10e-6));
  CHECK(s->collective_model == CollectiveModel::kRing);
  CHECK(s->microbatches == 1);
  CHECK(s->iterations == 2);
  CHECK(s->optimizer_state_bytes_per_param == 8);
  CHECK(s->optimizer_step_s == 0);

  REQUIRE(s->units.size() == 34);
  CHECK(s->units[0].name == "embed");
  CHECK(s->units[0].params_bytes == 1073741824);
  CHECK(s->units[0].forward_s == Approx(0.2e-3));
  CHECK(s->units[0].backward_s == Approx(0.4e-3));
  CHECK(s->units[0].activation_bytes == 107374182);  // 0.1 GiB rounded to the nearest byte
  CHECK(s->units[0].loc.line == 15);
  CHECK(s->units[0].loc.col == 7);
  CHECK(s->units[1].name == "layer.0");
  CHECK(s->units[32].name == "layer.31");
  for (int i = 1; i <= 32; ++i) {
    CHECK(s->units[i].params_bytes == 457179136);  // 436 MiB
    CHECK(s->units[i].forward_s == Approx(1.1e-3));
    CHECK(s->units[i].backward_s == Approx(2.2e-3));
    CHECK(s->units[i].activation_bytes == 536870912);
    CHECK(s->units[i].loc.line == 16);
  }
  CHECK(s->units[33].name == "head");
  CHECK(s->units[33].params_bytes == 1050000000);  // 525M parameters x 2 bytes (bf16)
  CHECK(s->units[33].activation_bytes == 1073741824);

  CHECK(s->reshard_after_forward == -1);
  CHECK(s->forward_prefetch_depth == 1);
  CHECK(s->backward_prefetch_depth == 1);
  CHECK(s->forward_prefetch.empty());
  CHECK(s->backward_prefetch.empty());

  REQUIRE(s->overrides.size() == 3);
  CHECK(s->overrides.at(3).skip_units == std::vector<std::string>{"layer.7"});
  CHECK(s->overrides.at(3).repeat_units.empty());
  CHECK_FALSE(s->overrides.at(3).microbatches);
  CHECK(s->overrides.at(3).loc.line == 19);
  CHECK(s->overrides.at(5).repeat_units == std::vector<std::string>{"layer.2"});
  REQUIRE(s->overrides.at(6).microbatches);
  CHECK(*s->overrides.at(6).microbatches == 2);

  REQUIRE(s->programs.size() == 1);
  const auto& ops = s->programs.at(-1);
  REQUIRE(ops.size() == 3);
  CHECK(ops[0].kind == "all_gather");
  CHECK(ops[0].unit == "embed");
  CHECK(ops[0].stream == "all_gather");  // the default stream of an all_gather
  CHECK(ops[0].id == "g0");
  CHECK(ops[0].after.empty());
  CHECK(ops[0].loc.line == 22);
  CHECK(ops[1].kind == "forward");
  CHECK(ops[1].stream == "compute");
  CHECK(ops[1].after == std::vector<std::string>{"g0"});
  CHECK(ops[2].kind == "free");
  CHECK(ops[2].stream == "all_gather");
  CHECK(ops[2].id.empty());

  CHECK(s->locs.fsdp.line == 5);
  CHECK(s->locs.units.line == 14);
  CHECK(s->locs.options.line == 18);
  CHECK(s->locs.programs.line == 20);
  CHECK(s->locs.limit.line == 4);
  CHECK(s->locs.limit.col == 23);
}

TEST_CASE("fsdp spec defaults: name from the file, fsdp2, shard over all ranks, reduce dtype of param",
          "[fsdp-spec]") {
  Diagnostics d;
  auto s = parse_fsdp_spec("dir/my-run.yaml",
                           "schedcheck: 1\nranks: 16\nfsdp:\n  replicate_size: 2\n  dtypes: {param: fp8}\n"
                           "  link: {bandwidth: 100GB/s, model: alpha-beta}\n"
                           "  units:\n    - {name: block, params: 1.5B, forward: 1ms, backward: 2ms}\n",
                           d);
  REQUIRE(s);
  CHECK(s->name == "my-run");
  CHECK(s->implementation == FsdpImplementation::kFsdp2);
  CHECK(s->replicate_size == 2);
  CHECK(s->shard_size == 8);
  CHECK(s->param_dtype.name == "fp8");
  CHECK(s->reduce_dtype.name == "fp8");
  CHECK(s->reduce_dtype.bytes == 1);
  CHECK(s->collective_model == CollectiveModel::kAlphaBeta);
  CHECK(s->latency_s == 0);
  CHECK_FALSE(s->limit_bytes);
  REQUIRE(s->units.size() == 1);
  CHECK(s->units[0].name == "block");
  CHECK(s->units[0].params_bytes == 1'500'000'000);
  CHECK(s->units[0].activation_bytes == 0);
  CHECK(s->microbatches == 1);
  CHECK(s->iterations == 2);
  CHECK(s->optimizer_state_bytes_per_param == 8);
  CHECK(s->overrides.empty());
  CHECK(s->programs.empty());
}

TEST_CASE("fsdp2 explicit prefetch lists and an integer reshard_after_forward load", "[fsdp-spec]") {
  Diagnostics d;
  auto s = parse(with("  options:\n    reshard_after_forward: 4\n    forward_prefetch_depth: 2\n"
                      "    backward_prefetch_depth: 0\n"
                      "    forward_prefetch: {embed: [layer.0, layer.1]}\n"
                      "    backward_prefetch: {layer.3: [layer.2]}\n"
                      "  optimizer: {state_bytes_per_param: 12, step: 2ms}\n"),
                 d);
  REQUIRE(s);
  CHECK(s->reshard_after_forward == 4);
  CHECK(s->forward_prefetch_depth == 2);
  CHECK(s->backward_prefetch_depth == 0);
  CHECK(s->forward_prefetch.at("embed") == std::vector<std::string>{"layer.0", "layer.1"});
  CHECK(s->backward_prefetch.at("layer.3") == std::vector<std::string>{"layer.2"});
  CHECK(s->optimizer_state_bytes_per_param == 12);
  CHECK(s->optimizer_step_s == Approx(2e-3));
}

TEST_CASE("fsdp1 and zero3 options load for their implementation", "[fsdp-spec]") {
  Diagnostics d;
  auto f1 = parse(with("  implementation: fsdp1\n"
                       "  options: {limit_all_gathers: false, forward_prefetch: true, backward_prefetch: post}\n"
                       "  optimizer: sgd\n"),
                  d);
  REQUIRE(f1);
  CHECK(f1->implementation == FsdpImplementation::kFsdp1);
  CHECK_FALSE(f1->limit_all_gathers);
  CHECK(f1->forward_prefetch_fsdp1);
  CHECK(f1->backward_prefetch_fsdp1 == BackwardPrefetch::kPost);
  CHECK(f1->optimizer_state_bytes_per_param == 0);

  auto f1d = parse(with("  implementation: fsdp1\n"), d);
  REQUIRE(f1d);
  CHECK(f1d->limit_all_gathers);
  CHECK_FALSE(f1d->forward_prefetch_fsdp1);
  CHECK(f1d->backward_prefetch_fsdp1 == BackwardPrefetch::kPre);

  auto z = parse(with("  implementation: zero3\n"
                      "  options: {prefetch_bucket_size: 5e7, max_live_parameters: 2B}\n"
                      "  optimizer: {kind: none, step: 1ms}\n"),
                 d);
  REQUIRE(z);
  CHECK(z->implementation == FsdpImplementation::kZero3);
  CHECK(z->prefetch_bucket_size == 50'000'000);
  CHECK(z->max_live_parameters == 2'000'000'000);
  CHECK(z->optimizer_state_bytes_per_param == 0);
  CHECK(z->optimizer_step_s == Approx(1e-3));

  auto zd = parse(with("  implementation: zero3\n"), d);
  REQUIRE(zd);
  CHECK(zd->prefetch_bucket_size == 50'000'000);
  CHECK(zd->max_live_parameters == 1'000'000'000);
}

TEST_CASE("per-rank programs check ids within their own program", "[fsdp-spec]") {
  Diagnostics d;
  auto s = parse(with("  programs:\n"
                      "    0:\n"
                      "      - {op: all_gather, unit: embed, id: a}\n"
                      "      - {op: forward, unit: embed, after: a, id: f}\n"
                      "      - {op: optimizer, after: [a, f]}\n"
                      "    7: []\n"),
                 d);
  REQUIRE(s);
  REQUIRE(s->programs.size() == 2);
  const auto& p = s->programs.at(0);
  REQUIRE(p.size() == 3);
  CHECK(p[1].after == std::vector<std::string>{"a"});
  CHECK(p[2].kind == "optimizer");
  CHECK(p[2].unit.empty());
  CHECK(p[2].stream == "compute");
  CHECK(p[2].after == std::vector<std::string>{"a", "f"});
  CHECK(s->programs.at(7).empty());

  // The same id in two programs is fine; a rank's program cannot wait on another program's id.
  CHECK(first_error(with("  programs:\n"
                         "    all:\n"
                         "      - {op: all_gather, unit: embed, id: a}\n"
                         "    1:\n"
                         "      - {op: all_gather, unit: embed, id: a}\n"
                         "      - {op: forward, unit: embed, after: [b]}\n")) ==
        "t.yaml:13:44: error: fsdp.programs.1[1].after names 'b', which is no id in fsdp.programs.1; did you "
        "mean 'a'?");
}

TEST_CASE("invalid fsdp specs report their first error at the offending place", "[fsdp-spec]") {
  // Version, top level and ranks.
  CHECK(first_error("ranks: 8\nfsdp:\n  link: {bandwidth: 1GB/s}\n  units: [{name: a, params_bytes: 1, "
                    "forward: 1ms, backward: 1ms}]\n") ==
        "t.yaml:1:1: error: missing required key 'schedcheck' (the spec version, 1)");
  CHECK(first_error("schedcheck: 2\nranks: 8\nfsdp: {}\n") ==
        "t.yaml:1:13: error: unsupported spec version 2; this schedcheck reads version 1");
  CHECK(first_error("schedcheck: 1\nranks: 70000\nfsdp: {}\n") ==
        "t.yaml:2:8: error: ranks is too large (at most 65536)");
  CHECK(first_error(with("  implementaton: fsdp2\n")) ==
        "t.yaml:8:3: error: unknown key 'implementaton' in fsdp; did you mean 'implementation'?");
  CHECK(first_error("schedcheck: 1\nranks: 8\nfsdp:\n  link: {bandwidth: 1GB/s]\n") ==
        "t.yaml:4:26: error: invalid YAML: illegal flow end");

  // Options of another implementation.
  CHECK(first_error(with("  options: {limit_all_gathers: true}\n")) ==
        "t.yaml:8:13: error: limit_all_gathers is an fsdp1 option; this spec uses fsdp2");
  CHECK(first_error(with("  implementation: fsdp1\n  options: {prefetch_bucket_size: 5e7}\n")) ==
        "t.yaml:9:13: error: prefetch_bucket_size is a zero3 option; this spec uses fsdp1");
  CHECK(first_error(with("  implementation: zero3\n  options: {forward_prefetch: true}\n")) ==
        "t.yaml:9:13: error: forward_prefetch is an fsdp1 and fsdp2 option; this spec uses zero3");

  // Unit references, expansion and groups.
  CHECK(first_error(with("  ranks_override: {3: {skip_units: [layr.7]}}\n")) ==
        "t.yaml:8:37: error: fsdp.ranks_override.3.skip_units names 'layr.7', which is no unit; did you mean "
        "'layer.7'?");
  CHECK(first_error(with("  ranks_override: {8: {microbatches: 2}}\n")) ==
        "t.yaml:8:20: error: rank 8 in fsdp.ranks_override is out of range: ranks is 8 (ids 0 to 7)");
  CHECK(first_error(with("    - {name: layer.2, params_bytes: 1, forward: 1ms, backward: 1ms}\n")) ==
        "t.yaml:8:7: error: unit name 'layer.2' is already taken by the unit at line 7");
  CHECK(first_error(with("  shard_size: 3\n")) ==
        "t.yaml:8:15: error: fsdp.shard_size 3 x replicate_size 1 is 3, but ranks is 8");
  CHECK(first_error(with("  dtypes: {param: bf61}\n")) ==
        "t.yaml:8:19: error: fsdp.dtypes.param must be one of bf16, fp16, fp32, fp8, e4m3, e5m2, got 'bf61'; did "
        "you mean 'bf16'?");
  CHECK(first_error(with("  options: {forward_prefetch: {embed: [layer.0, lm_head]}}\n")) ==
        "t.yaml:8:49: error: fsdp.options.forward_prefetch.embed names 'lm_head', which is no unit");

  CHECK(first_error(with("  ranks_override: {3: {skip_units: [layer]}}\n")) ==
        "t.yaml:8:37: error: fsdp.ranks_override.3.skip_units names 'layer', which has repeat: 32; name one of "
        "layer.0 .. layer.31");
  CHECK(first_error(with("  options: {reshard_after_forward: 3}\n")) ==
        "t.yaml:8:36: error: fsdp.options.reshard_after_forward 3 must divide shard_size 8");

  // Units and the optimizer.
  CHECK(first_error(with("    - {name: x, params_bytes: 1, params: 1M, forward: 1ms, backward: 1ms}\n")) ==
        "t.yaml:8:34: error: unit 'x' takes params_bytes or params, not both");
  CHECK(first_error(with("    - {name: x, params_bytes: 1, backward: 1ms}\n")) ==
        "t.yaml:8:7: error: unit 'x' needs forward (the forward time of one microbatch, such as 1.1ms)");
  CHECK(first_error(with("  iterations: 2\n  iterations: 3\n")) ==
        "t.yaml:9:3: error: duplicate key 'iterations' (first given at line 8)");
  CHECK(first_error(with("  optimizer: {kind: adam, state_bytes_per_param: 12}\n")) ==
        "t.yaml:8:27: error: fsdp.optimizer takes kind or state_bytes_per_param, not both");

  // Programs.
  CHECK(first_error(with("  programs:\n    all:\n      - {op: optimizer, unit: embed}\n")) ==
        "t.yaml:10:25: error: fsdp.programs.all[0]: an optimizer op takes no unit");
  CHECK(first_error(with("  programs:\n    all:\n      - {op: forward, unit: embed, after: [g]}\n"
                         "      - {op: all_gather, unit: embed, id: g}\n")) ==
        "t.yaml:10:44: error: fsdp.programs.all[0].after names 'g', which is not an earlier op (it is at line 11)");
  CHECK(first_error(with("  programs:\n    all:\n      - {op: all_gather, unit: embed, id: g}\n"
                         "      - {op: free, unit: embed, id: g}\n")) ==
        "t.yaml:11:37: error: id 'g' is used twice in fsdp.programs.all (first at line 10)");
  CHECK(first_error(with("  programs:\n    all:\n      - {op: allgather, unit: embed}\n")) ==
        "t.yaml:10:14: error: fsdp.programs.all[0].op must be one of all_gather, forward, backward, free, "
        "reduce_scatter, all_reduce, optimizer, got 'allgather'; did you mean 'all_gather'?");

  // Size guards and ranges.
  CHECK(first_error(with("    - {name: x, repeat: 0, params_bytes: 1, forward: 1ms, backward: 1ms}\n")) ==
        "t.yaml:8:25: error: unit 'x' repeat must be at least 1, got 0");
  CHECK(first_error(with("    - {name: x, params_bytes: 1, forward: -1ms, backward: 1ms}\n")) ==
        "t.yaml:8:43: error: unit 'x' forward: '-1ms': a duration must not be negative");
  CHECK(first_error(with("    - {name: x, params_bytes: 1, forward: 2e12, backward: 1ms}\n")) ==
        "t.yaml:8:43: error: unit 'x' forward is too long (at most 1e+12 s)");
  CHECK(first_error(with("  iterations: 9\n")) == "t.yaml:8:15: error: fsdp.iterations is too large (at most 8)");
  CHECK(first_error("schedcheck: 1\nranks: 8\nfsdp:\n  link: {bandwidth: 0GB/s}\n"
                    "  units: [{name: a, params_bytes: 1, forward: 1ms, backward: 1ms}]\n")
            == "t.yaml:4:21: error: fsdp.link.bandwidth: '0GB/s': a bandwidth must be greater than zero");
  CHECK(first_error("schedcheck: 1\nranks: 8\nfsdp:\n  units: [{name: a, params_bytes: 1, forward: 1ms, "
                    "backward: 1ms}]\n") ==
        "t.yaml:3:1: error: fsdp needs link: {bandwidth: ...} (the collective bandwidth per rank, such as "
        "450GB/s)");
}

TEST_CASE("fsdp specs too large to model are refused with a located error", "[fsdp-spec]") {
  CHECK(first_error(with("    - {name: x, repeat: 100000, params_bytes: 1, forward: 1ms, backward: 1ms}\n")) ==
        "t.yaml:8:7: error: the units expand to more than 100000 units");
  CHECK(first_error("schedcheck: 1\nranks: 65536\nfsdp:\n  link: {bandwidth: 1GB/s}\n  units:\n"
                    "    - {name: l, repeat: 2000, params_bytes: 1, forward: 1ms, backward: 1ms}\n") ==
        "t.yaml:5:3: error: 65536 ranks x 2000 units is more than the 100000000 rank-units schedcheck models");
  CHECK(first_error(with("    - {name: huge, repeat: 2, params_bytes: 3000PiB, forward: 1ms, backward: 1ms}\n")) ==
        "t.yaml:5:3: error: the units' params_bytes add up to more than 2^62 bytes");
  CHECK(first_error(with("    - {name: x, params_bytes: 5000PiB, forward: 1ms, backward: 1ms}\n")) ==
        "t.yaml:8:31: error: unit 'x' params_bytes is too large (at most 2^62 bytes)");
  CHECK(first_error(with("    - {name: x, params: 3000000000000000000, forward: 1ms, backward: 1ms}\n")) ==
        "t.yaml:8:25: error: unit 'x' params x 2 bytes is more than 2^62 bytes");
}

TEST_CASE("fsdp spec errors are all collected, each with its source line and caret", "[fsdp-spec]") {
  std::string errors = all_errors(with("  implementation: fsdp3\n"
                                       "  iterations: 0\n"
                                       "  ranks_override: {2: {repeat_units: [layer.99]}}\n"));
  CHECK(errors.find("t.yaml:8:19: error: fsdp.implementation must be one of fsdp1, fsdp2, zero3, got 'fsdp3'; "
                    "did you mean 'fsdp1'?") != std::string::npos);
  CHECK(errors.find("t.yaml:9:15: error: fsdp.iterations must be at least 1, got 0") != std::string::npos);
  CHECK(errors.find("t.yaml:10:39: error: fsdp.ranks_override.2.repeat_units names 'layer.99', which is no unit")
        != std::string::npos);
  CHECK(errors.find("    ranks_override: {2: {repeat_units: [layer.99]}}\n" + std::string(40, ' ') + "^\n") !=
        std::string::npos);
}

TEST_CASE("fsdp specs are told apart by their top-level fsdp key and load from files", "[fsdp-spec]") {
  fs::path dir = fs::temp_directory_path() / "schedcheck_fsdp_spec_test";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  std::string good = write("job.yaml", kExample);
  std::string broken = write("broken.yaml", "schedcheck: 1\nfsdp:\n  units: [\n");
  std::string pipeline = write("pipe.yaml", "schedcheck: 1\nranks: 2\nschedule: {actions: {0: 0F0}}\n");
  std::string text = write("job.txt", kExample);
  CHECK(is_fsdp_spec(good));
  CHECK(is_fsdp_spec(broken));
  CHECK_FALSE(is_fsdp_spec(pipeline));
  CHECK_FALSE(is_fsdp_spec(text));
  CHECK_FALSE(is_fsdp_spec(dir.string()));
  CHECK_FALSE(is_fsdp_spec((dir / "missing.yaml").string()));

  Diagnostics d;
  auto s = load_fsdp_spec(good, d);
  REQUIRE(s);
  CHECK(s->units.size() == 34);
  CHECK(source_name(s->locs.file.file) == good);

  Diagnostics e;
  CHECK_FALSE(load_fsdp_spec((dir / "missing.yaml").string(), e));
  REQUIRE(e.all().size() == 1);
  CHECK(e.all()[0].message.rfind("cannot read the spec: ", 0) == 0);
  fs::remove_all(dir);
}

namespace sc {
namespace {

TEST_CASE("a unit both skipped and repeated on a rank is an error", "[fsdp-spec]") {
  const std::string text =
      "schedcheck: 1\nranks: 2\nfsdp:\n  link: {bandwidth: 100GB/s}\n  units:\n"
      "    - {name: l, repeat: 3, params_bytes: 1MiB, forward: 1ms, backward: 2ms}\n"
      "  ranks_override: {1: {skip_units: [l.1], repeat_units: [l.1]}}\n";
  Diagnostics d;
  CHECK_FALSE(parse_fsdp_spec("c.yaml", text, d));
  REQUIRE(d.all().size() == 1);
  CHECK(d.all()[0].loc.line == 7);
  CHECK(d.all()[0].loc.col == 57);
  CHECK(d.all()[0].message == "fsdp.ranks_override.1: unit 'l.1' is both skipped and repeated");
}

}  // namespace
}  // namespace sc
