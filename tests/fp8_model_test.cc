// fp8 linear layers: the GEMMs at the fp8 rate with fp8 operands, the casts that feed them, the
// weights all-gathered in fp8 under FSDP, and the config keys of torchtitan and Megatron-LM that
// turn them on (docs/facts/cost-formulas.md#fp8-linear-layers).
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "model/cost_model.h"
#include "test_util.h"

using namespace sc;
using namespace sc::model;

namespace {

/// Llama 3 8B on one H100 SXM, one 8,192-token sequence per microbatch, eager elementwise ops.
CostInputs llama8b_h100() {
  CostInputs in;
  in.model = *model_preset("llama3-8b");
  in.hardware = *hardware_preset("h100");
  in.eff.compute = in.hardware.efficiency;
  in.seq_len = 8192;
  in.microbatch_sequences = 1;
  return in;
}

/// The published torchtitan 8B run on 8 GPUs with compile (Table 1 of
/// benchmarks/llama3_h100_202412_torchtitan.md), with `extra` appended, written to a temp file.
std::string torchtitan_8b(const std::string& name, const std::string& extra) {
  std::string text =
      test::read_file(test::source_path("specs/reference/published/torchtitan-llama3-8b-h100x8-fsdp-compile.toml"));
  REQUIRE(!text.empty());
  return test::write_temp("schedcheck-fp8-test", name, text + extra);
}

nlohmann::json verify_json(const std::string& path, const std::string& hardware = "h100-96gb") {
  const auto r = test::run_schedcheck("verify '" + path + "' --gpus 8 --hardware " + hardware + " --format json", false);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("fp8 cast bytes per token and weight follow torchao's tensorwise Float8Linear", "[model][fp8]") {
  // Forward: the input's amax (2 bytes, fused away when compiled) and its cast (read 2, write 1);
  // the weight's amax and cast (5) unless it arrives in fp8. Input-gradient pass: the output
  // gradient's cast and its transpose (2), the weight's transpose (2). Weight-gradient pass: the
  // input's transpose (2).
  const Fp8CastBytes eager = fp8_cast_bytes(4096, 1024, false, false);
  CHECK(eager.forward_per_token == 5 * 4096.0);
  CHECK(eager.forward_per_weight == 5.0);
  CHECK(eager.input_grad_per_token == 7 * 1024.0);
  CHECK(eager.input_grad_per_weight == 2.0);
  CHECK(eager.weight_grad_per_token == 2 * 4096.0);
  const Fp8CastBytes fused = fp8_cast_bytes(4096, 1024, true, true);
  CHECK(fused.forward_per_token == 3 * 4096.0);
  CHECK(fused.forward_per_weight == 0.0);
  CHECK(fused.input_grad_per_token == 5 * 1024.0);
}

TEST_CASE("fp8 linear layers run their GEMMs at the fp8 rate and pay for their casts", "[model][fp8]") {
  CostInputs in = llama8b_h100();
  const LayerCost bf16 = layer_cost(in, 0);
  CHECK(bf16.fp8_cast_s == 0);
  in.fp8_linear = true;
  const LayerCost fp8 = layer_cost(in, 0);
  // H100: 1,979 TFLOP/s fp8 against 989 bf16 (NVIDIA H100 datasheet, dense): every linear GEMM
  // of a dense block at twice the rate, so the FLOP-time factor halves.
  CHECK(in.hardware.fp8_flops == 1979e12);
  CostInputs plain = llama8b_h100();
  CHECK(layer_gemm_time_factor(in, 0) == Approx(layer_gemm_time_factor(plain, 0) * 989.0 / 1979.0));
  // Operands in one byte: the GEMMs' memory time shrinks, though the bf16 outputs stay.
  CHECK(fp8.gemm_memory_s < bf16.gemm_memory_s);
  CHECK(fp8.gemm_memory_s > 0.5 * bf16.gemm_memory_s);
  // The weight-gradient pass is the linear GEMMs alone, plus the input's transposed fp8 copy.
  const double lin_bf16 = bf16.weight_grad_s - bf16.gemm_memory_s;
  const double lin_fp8 = fp8.weight_grad_s - fp8.gemm_memory_s;
  CHECK(lin_fp8 < 0.55 * lin_bf16);
  CHECK(fp8.fp8_cast_s > 0);
  // The forward gains less than the GEMMs do: the attention core and the elementwise ops stay.
  CHECK(fp8.forward_s < bf16.forward_s);
  CHECK(fp8.forward_s > 0.5 * bf16.forward_s);
  // Weights that arrive in fp8 skip the forward's weight cast.
  in.fp8_weights_gathered = true;
  CHECK(layer_cost(in, 0).forward_s < fp8.forward_s);
  // A100 has no fp8 tensor cores: the rate is bf16's.
  CostInputs a100 = llama8b_h100();
  a100.hardware = *hardware_preset("a100-80gb");
  a100.fp8_linear = true;
  CHECK(a100.hardware.fp8_flops == 0);
  CostInputs a100_plain = a100;
  a100_plain.fp8_linear = false;
  CHECK(layer_gemm_time_factor(a100, 0) == Approx(layer_gemm_time_factor(a100_plain, 0)));
}

TEST_CASE("torchtitan's Float8 row of Table 1 is faster, by less than the GEMMs alone, and gathers fewer bytes",
          "[config][fp8]") {
  const std::string base = torchtitan_8b("compile.toml", "");
  const std::string f8 = torchtitan_8b("float8.toml", "\n[float8]\nenable_float8_linear = true\n");
  const std::string f8ag = torchtitan_8b(
      "float8-ag.toml", "\n[float8]\nenable_float8_linear = true\nenable_fsdp_float8_all_gather = true\n");
  const nlohmann::json b = verify_json(base), f = verify_json(f8), g = verify_json(f8ag);
  const double tb = b["job"]["predicted"]["tokens_per_s"].get<double>();
  const double tf = f["job"]["predicted"]["tokens_per_s"].get<double>();
  const double tg = g["job"]["predicted"]["tokens_per_s"].get<double>();
  // The published pair: 6,667 -> 8,532 tokens/s/GPU, +28 % (benchmarks/llama3_h100_202412_torchtitan.md
  // @ b5bcd76, Table 1). The model's gain lies between none and the 2x of the GEMMs alone.
  INFO("bf16 " << tb << ", fp8 " << tf << ", fp8 all-gather " << tg);
  CHECK(tf > 1.2 * tb);
  CHECK(tf < 1.8 * tb);
  CHECK(tg >= tf);
  // The float8 all-gather moves one byte per linear weight: the FSDP traffic per step drops.
  const double cb = f["fsdp_figures"]["comm_bytes_per_step"].get<double>();
  const double cg = g["fsdp_figures"]["comm_bytes_per_step"].get<double>();
  CHECK(cg < 0.9 * cb);
  bool noted = false;
  for (const auto& n : g["job"]["notes"])
    noted = noted || n.get<std::string>().find("fp8 linear layers") != std::string::npos;
  CHECK(noted);
  // Without float8 no fp8 note and no fp8 key among the unmodelled ones.
  for (const auto& n : b["job"]["notes"]) CHECK(n.get<std::string>().find("fp8") == std::string::npos);
}

TEST_CASE("torchtitan's float8 keys of each era and its recipes, and A100 stays in bf16", "[config][fp8]") {
  // model.converters with [float8] (2025) and with [quantize.linear.float8] read alike.
  const std::string conv = torchtitan_8b(
      "converters.toml", "\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n");
  std::string text = test::read_file(conv);
  const size_t at = text.find("flavor = \"8B\"");
  REQUIRE(at != std::string::npos);
  text.insert(at + std::string("flavor = \"8B\"").size(), "\nconverters = [\"quantize.linear.float8\"]");
  const std::string conv2 = test::write_temp("schedcheck-fp8-test", "converters2.toml", text);
  const nlohmann::json c = verify_json(conv2);
  bool noted = false;
  for (const auto& n : c["job"]["notes"])
    noted = noted || n.get<std::string>().find("fp8 linear layers") != std::string::npos;
  CHECK(noted);
  // An unknown recipe is an error at its key, with the nearest recipe.
  const std::string bad = torchtitan_8b("bad-recipe.toml",
                                        "\n[float8]\nenable_float8_linear = true\nrecipe_name = \"rowwse\"\n");
  const auto r = test::run_schedcheck("verify '" + bad + "' --gpus 8 --hardware h100-96gb");
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("did you mean \"rowwise\"") != std::string::npos);
  CHECK(r.out.find(":35:1") != std::string::npos);
  // On A100 the model stays bf16 and a note says why.
  const std::string f8 = torchtitan_8b("float8-a100.toml", "\n[float8]\nenable_float8_linear = true\n");
  const nlohmann::json a = verify_json(f8, "a100-80gb");
  const nlohmann::json a0 = verify_json(torchtitan_8b("plain-a100.toml", ""), "a100-80gb");
  CHECK(a["job"]["predicted"]["tokens_per_s"].get<double>() ==
        Approx(a0["job"]["predicted"]["tokens_per_s"].get<double>()));
  bool why = false;
  for (const auto& n : a["job"]["notes"])
    why = why || n.get<std::string>().find("no fp8 tensor cores") != std::string::npos;
  CHECK(why);
}

TEST_CASE("float8 settings torchtitan or Megatron-LM refuse are errors at their line", "[config][fp8]") {
  struct Case {
    const char* name;
    std::string extra;     ///< appended to the published 8B compile config
    const char* message;   ///< expected in the error
    const char* at;        ///< file:line:col suffix expected
  };
  const std::vector<Case> cases = {
      // An unknown key of [quantize.linear.float8] (its name is also a converter's).
      {"q-typo.toml", "\n[quantize.linear.float8]\nenable_fsdp_float8_all_gathr = true\n",
       "did you mean 'enable_fsdp_float8_all_gather'?", ":34:1"},
      // torchtitan/components/float8.py @069bae28 asserts against the pair.
      {"recipe-gather.toml",
       "\n[float8]\nenable_float8_linear = true\nrecipe_name = \"rowwise\"\nenable_fsdp_float8_all_gather = true\n",
       "together with `float8_config.recipe_name` is not supported", ":35:1"},
      // A non-boolean flag is refused even where it changes nothing in the model.
      {"precompute.toml", "\n[float8]\nenable_float8_linear = true\nprecompute_float8_dynamic_scale_for_fsdp = 7\n",
       "must be true or false", ":35:1"},
      // The same option under the names of two torchtitan eras.
      {"two-tables.toml",
       "\n[float8]\nenable_fsdp_float8_all_gather = true\n[quantize.linear.float8]\nenable_fsdp_float8_all_gather = true\n",
       "under the names of different torchtitan versions", ":36:1"},
  };
  for (const Case& c : cases) {
    const auto r = test::run_schedcheck("verify '" + torchtitan_8b(c.name, c.extra) + "' --gpus 8 --hardware h100-96gb");
    INFO(c.name << "\n" << r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find(c.message) != std::string::npos);
    CHECK(r.out.find(std::string(c.name) + c.at) != std::string::npos);
  }
  // An unknown converter: torchtitan's registry raises a KeyError; the name nearest is offered.
  std::string text = test::read_file(torchtitan_8b("conv.toml", ""));
  text.insert(text.find("flavor = \"8B\"") + 13, "\nconverters = [\"float9\"]");
  const auto conv = test::run_schedcheck("verify '" + test::write_temp("schedcheck-fp8-test", "conv9.toml", text) +
                                         "' --gpus 8 --hardware h100-96gb");
  CHECK(conv.exit_code == 2);
  CHECK(conv.out.find("conv9.toml:10:1: error: model.converters names \"float9\", which torchtitan does not register "
                      "(did you mean \"float8\"?)") != std::string::npos);
  // Megatron-LM: --fp8-param-gather without the distributed optimizer or FSDP, fp8 on A100.
  std::string script =
      test::read_file(test::source_path("specs/reference/published/megatron-gpt-1.7b-h100x48.sh"));
  REQUIRE(script.find("--bf16") != std::string::npos);
  const std::string fp8 = script.substr(0, script.find("--bf16")) + "--fp8-format hybrid --fp8-param-gather " +
                          script.substr(script.find("--bf16"));
  const std::string with = test::write_temp("schedcheck-fp8-test", "mg-fp8.sh", fp8);
  const auto a100 = test::run_schedcheck("verify '" + with + "' --gpus 48 --hardware a100-80gb");
  CHECK(a100.exit_code == 2);
  CHECK(a100.out.find("--fp8-format needs fp8 tensor cores") != std::string::npos);
  std::string no_opt = fp8;
  for (const std::string flag : {"\n    --use-distributed-optimizer", "\n    --overlap-param-gather"}) {
    const size_t at = no_opt.find(flag + "\n");
    REQUIRE(at != std::string::npos);
    no_opt.erase(at, flag.size());
  }
  const auto nodo = test::run_schedcheck("verify '" + test::write_temp("schedcheck-fp8-test", "mg-nodo.sh", no_opt) +
                                         "' --gpus 48 --hardware h100");
  CHECK(nodo.exit_code == 2);
  CHECK(nodo.out.find("--fp8-param-gather only supported with distributed optimizer or torch fsdp2") != std::string::npos);
  const auto h100 = test::run_schedcheck("verify '" + with + "' --gpus 48 --hardware h100");
  INFO(h100.out);
  CHECK(h100.exit_code == 0);
  CHECK(h100.out.find("--fp8-param-gather's fp8 all-gather of the distributed optimizer is not modelled") !=
        std::string::npos);
}
