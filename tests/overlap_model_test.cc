// Overlap of communication with compute as the frameworks issue it: TP collectives pipelined
// with their GEMMs (Megatron-LM --tp-comm-overlap, torchtitan async TP), the gradient reduction
// under the last backward (--overlap-grad-reduce) and the parameter all-gather moved to the next
// step (--overlap-param-gather); each key that turns an overlap on turns it off when absent
// (docs/facts/cost-formulas.md#tensor-parallel-overlap, #gradient-reduction-overlap).
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "model/cost_model.h"
#include "test_util.h"

using namespace sc;

namespace {

/// `text` without the line that is `flag` alone (indentation aside).
std::string without_line(const std::string& text, const std::string& flag) {
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    const std::string line = text.substr(begin, end - begin);
    if (line.find_first_not_of(' ') != std::string::npos && line.substr(line.find_first_not_of(' ')) == flag)
      return text.substr(0, begin) + (end == std::string::npos ? "" : text.substr(end + 1));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  FAIL("no line '" << flag << "'");
  return text;
}

/// The published 16B GPT run (TP 4, SP, DP 48, distributed optimizer, every overlap flag),
/// optionally with one flag's line removed, written to a temporary file.
std::string megatron_16b(const std::string& drop = "") {
  std::string text = test::read_file(test::source_path("specs/reference/published/megatron-gpt-16b-h100x192.sh"));
  REQUIRE(!text.empty());
  if (!drop.empty()) text = without_line(text, drop);
  return test::write_temp("schedcheck-overlap-test", "gpt16b" + (drop.empty() ? std::string() : drop) + ".sh", text);
}

struct Traced {
  double step_s = 0;
  nlohmann::json events;
  std::string text;
};

/// verify of a Megatron script on 192 H100 with a trace; the step time and the trace events.
Traced verify_traced(const std::string& path) {
  const std::string trace = path + ".trace.json";
  const auto r = test::run_schedcheck("verify '" + path + "' --gpus 192 --hardware h100 --trace '" + trace + "'");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  Traced t;
  t.text = r.out;
  const auto j = test::run_schedcheck("verify '" + path + "' --gpus 192 --hardware h100 --format json", false);
  t.step_s = nlohmann::json::parse(j.out)["job"]["predicted"]["step_time_s"].get<double>();
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(trace));
  t.events = doc.is_object() ? doc["traceEvents"] : doc;
  return t;
}

/// The first complete event of rank 0's process named `name`, or null.
const nlohmann::json* event(const Traced& t, const std::string& name) {
  const nlohmann::json* first_pid = nullptr;
  for (const auto& e : t.events)
    if (e.value("ph", "") == "X") {
      if (!first_pid) first_pid = &e["pid"];
      if (e["pid"] == *first_pid && e.value("name", "") == name) return &e;
    }
  return nullptr;
}

}  // namespace

TEST_CASE("TP communication pipelined in t chunks leaves one chunk or what the GEMMs cannot cover", "[model][overlap]") {
  // (c + g)/n + (n-1)·max(c, g)/n - g (Wang et al., ASPLOS 2023; docs/facts/cost-formulas.md).
  CHECK(model::tp_exposed_s(1.0, 2.0, 4) == Approx(0.25));        // c <= g: c/n
  CHECK(model::tp_exposed_s(3.0, 2.0, 4) == Approx(1.5));         // c > g: c - g·3/4
  CHECK(model::tp_exposed_s(2.0, 2.0, 8) == Approx(0.25));        // the two cases meet at c = g
  CHECK(model::tp_exposed_s(1.0, 5.0, 1) == Approx(1.0));         // one chunk hides nothing
  CHECK(model::tp_exposed_s(0.0, 5.0, 8) == 0.0);

  model::CostInputs in;
  in.model = *model::model_preset("llama3-70b");
  in.hardware = *model::hardware_preset("h100");
  in.layout.tp = 8;
  in.seq_len = 8192;
  const model::LayerCost plain = model::layer_cost(in, 0);
  in.tp_comm_overlap = true;
  const model::LayerCost overlapped = model::layer_cost(in, 0);
  REQUIRE(plain.tp_comm_s > 0);
  CHECK(plain.tp_exposed_s == plain.tp_comm_s);
  CHECK(overlapped.tp_comm_s == Approx(plain.tp_comm_s));
  CHECK(overlapped.tp_exposed_s < plain.tp_comm_s);
  // The forward and the input-gradient pass each save what the overlap hides; W has no TP comm.
  CHECK(plain.forward_s - overlapped.forward_s == Approx(plain.tp_comm_s - overlapped.tp_exposed_s));
  CHECK(plain.input_grad_s - overlapped.input_grad_s == Approx(plain.tp_comm_s - overlapped.tp_exposed_s));
  CHECK(plain.weight_grad_s == Approx(overlapped.weight_grad_s));

  // torchtitan's async TP: the forward's collectives only. PyTorch reports up to 29 % forward and
  // 8 % end-to-end speedups for it, what hiding the forward's alone gives
  // (docs/facts/cost-formulas.md#tensor-parallel-overlap).
  in.tp_comm_overlap_backward = false;
  const model::LayerCost forward_only = model::layer_cost(in, 0);
  CHECK(forward_only.tp_exposed_s == Approx(overlapped.tp_exposed_s));
  CHECK(forward_only.tp_exposed_backward_s == Approx(plain.tp_comm_s));
  CHECK(forward_only.forward_s == Approx(overlapped.forward_s));
  CHECK(forward_only.input_grad_s == Approx(plain.input_grad_s));
}

TEST_CASE("torchtitan's async TP gains what its benchmark measured on 8B and 70B", "[config][overlap]") {
  // pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md @ b5bcd76: async TP
  // over vanilla TP, +9.9 % on Llama 3.1 8B (FSDP 8 x TP 8, per-op SAC, 4,378 -> 4,809.4 tokens/s
  // per GPU) and +9.2 % on 70B (FSDP 32 x TP 8, full AC, 597.3 -> 652.4).
  struct Case {
    const char* vanilla;
    const char* async;
    const char* gpus;
    double published_gain;
  };
  const Case cases[] = {
      {"torchtitan-llama3-8b-h100x64-fsdp8-tp8.toml", "torchtitan-llama3-8b-h100x64-fsdp8-tp8-asynctp.toml", "64",
       4809.4 / 4378 - 1},
      {"torchtitan-llama3-70b-h100x256-fsdp32-tp8.toml", "torchtitan-llama3-70b-h100x256-fsdp32-tp8-asynctp.toml",
       "256", 652.4 / 597.3 - 1},
  };
  for (const Case& c : cases) {
    INFO(c.async);
    const auto tps = [&](const char* file) {
      const auto r = test::run_schedcheck(std::string("verify specs/reference/published/") + file + " --gpus " + c.gpus +
                                          " --hardware h100-96gb --format json");
      REQUIRE(r.exit_code == 0);
      return nlohmann::json::parse(r.out)["job"]["predicted"]["tokens_per_s"].get<double>();
    };
    const double gain = tps(c.async) / tps(c.vanilla) - 1;
    CHECK(gain == Approx(c.published_gain).margin(0.02));
  }
}

TEST_CASE("the causal attention core is timed at half its counted FLOPs", "[model][overlap]") {
  model::CostInputs in;
  in.model = *model::model_preset("llama3-8b");
  in.hardware = *model::hardware_preset("h100");
  in.seq_len = 8192;
  const model::LayerCost causal = model::layer_cost(in, 0);
  in.causal_attention = false;
  const model::LayerCost full = model::layer_cost(in, 0);
  const double tokens = 8192, rate = in.hardware.peak_flops * in.eff.compute;
  const double attn_s = tokens * in.model.layer_attention_flops_per_token(8192) / rate;
  CHECK(full.forward_s - causal.forward_s == Approx(attn_s / 2));
  CHECK(full.input_grad_s - causal.input_grad_s == Approx(attn_s));  // 2× the core in I
}

TEST_CASE("Megatron --tp-comm-overlap, --overlap-grad-reduce and --overlap-param-gather each change the step",
          "[config][overlap]") {
  const Traced all = verify_traced(megatron_16b());
  CHECK(all.text.find("pipelined with the GEMMs in 4 chunks (--tp-comm-overlap)") != std::string::npos);
  CHECK(all.text.find("the step holds the gradient reduce-scatter") != std::string::npos);
  // --overlap-grad-reduce: the reduction starts with the step's last backward, not after it.
  const nlohmann::json* rs = event(all, "RS stage 0");
  const nlohmann::json* last_b = event(all, "0B3");
  REQUIRE(rs);
  REQUIRE(last_b);
  CHECK((*rs)["ts"].get<double>() == Approx((*last_b)["ts"].get<double>()));

  const Traced no_tp = verify_traced(megatron_16b("--tp-comm-overlap"));
  CHECK(no_tp.text.find("added to F and I, not overlapped") != std::string::npos);
  CHECK(no_tp.step_s > all.step_s);

  const Traced no_gather = verify_traced(megatron_16b("--overlap-param-gather"));
  // Without --overlap-param-gather the distributed optimizer's reduce-scatter and all-gather are
  // one all-reduce of the same bytes on the wire: twice the reduce-scatter's time.
  const nlohmann::json* ar = event(no_gather, "AR stage 0");
  REQUIRE(ar);
  CHECK((*ar)["dur"].get<double>() == Approx(2 * (*rs)["dur"].get<double>()).epsilon(0.01));
  CHECK(no_gather.step_s > all.step_s);

  // Without --overlap-grad-reduce (and so without --overlap-param-gather, which needs it).
  const std::string text = test::read_file(megatron_16b("--overlap-param-gather"));
  const std::string path = test::write_temp("schedcheck-overlap-test", "gpt16b-no-overlap.sh",
                                            without_line(text, "--overlap-grad-reduce"));
  const Traced serial = verify_traced(path);
  const nlohmann::json* ar2 = event(serial, "AR stage 0");
  const nlohmann::json* last_b2 = event(serial, "0B3");
  REQUIRE(ar2);
  REQUIRE(last_b2);
  // Without --overlap-grad-reduce the all-reduce waits for the last backward to end.
  CHECK((*ar2)["ts"].get<double>() ==
        Approx((*last_b2)["ts"].get<double>() + (*last_b2)["dur"].get<double>()).epsilon(1e-6));
  CHECK(serial.step_s > no_gather.step_s);
}

TEST_CASE("torchtitan enable_async_tensor_parallel pipelines TP communication with the GEMMs", "[config][overlap]") {
  const std::string base = "specs/reference/published/torchtitan-llama3-8b-h100x64-fsdp8-tp8";
  auto step = [](const std::string& file) {
    const auto r = test::run_schedcheck("verify " + file + " --gpus 64 --hardware h100-96gb --format json", false);
    INFO(r.out);
    return nlohmann::json::parse(r.out)["job"]["predicted"]["step_time_s"].get<double>();
  };
  const double plain = step(base + ".toml"), async = step(base + "-asynctp.toml");
  CHECK(async < plain);
  const auto text = test::run_schedcheck("verify " + base + "-asynctp.toml --gpus 64 --hardware h100-96gb");
  CHECK(text.out.find("pipelined with the GEMMs in 8 chunks (async TP)") != std::string::npos);
  CHECK(text.out.find("enable_async_tensor_parallel") == std::string::npos);  // modelled, so not listed as ignored
}

namespace {

/// The published 1.7B GPT script (TP 1, DP 48) with `extra` lines added to its model flags,
/// verified on 48 H100; the JSON report's `job`.
nlohmann::json megatron_1_7b_job(const std::string& extra, const std::string& name) {
  std::string text = test::read_file(test::source_path("specs/reference/published/megatron-gpt-1.7b-h100x48.sh"));
  REQUIRE(!text.empty());
  const std::string anchor = "    --untie-embeddings-and-output-weights\n";
  REQUIRE(text.find(anchor) != std::string::npos);
  text.replace(text.find(anchor), anchor.size(), anchor + extra);
  const std::string path = test::write_temp("schedcheck-loss-test", name + ".sh", text);
  const auto r = test::run_schedcheck("verify '" + path + "' --gpus 48 --hardware h100 --format json");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out)["job"];
}

}  // namespace

TEST_CASE("the loss streams the logits: bytes per logit by kernel, and Megatron's fusion flag saves them",
          "[model][overlap]") {
  // Op by op (docs/facts/cost-formulas.md#the-loss): Megatron-LM's vocab-parallel cross entropy
  // (cross_entropy.py @00611e6) upcast 2+4, max 4, subtract 8, exp 8, sum 4, divide 8 = 38;
  // backward multiply 8, downcast 4+2 = 14.
  CHECK(model::loss_traffic(model::LossKernel::kMegatron).forward_bytes == 38);
  CHECK(model::loss_traffic(model::LossKernel::kMegatron).backward_bytes == 14);
  CHECK(model::loss_traffic(model::LossKernel::kMegatronFused).forward_bytes == 16);
  CHECK(model::loss_traffic(model::LossKernel::kEager).forward_bytes + model::loss_traffic(model::LossKernel::kEager).backward_bytes == 48);
  CHECK(model::loss_traffic(model::LossKernel::kCompiled).forward_bytes == 4);

  // --cross-entropy-loss-fusion on the 1.7B GPT (V = 131,072, 4 microbatches of 4,096 tokens,
  // TP 1): 52 - 30 = 22 bytes per logit fewer, 4 × 4096 × 131072 × 22 B at 0.9 of 3.35 TB/s
  // (kernels over 2.1 GB of fp32 logits, docs/facts/cost-formulas.md#memory-time-of-a-kernel) = 15.7 ms.
  const nlohmann::json plain = megatron_1_7b_job("", "plain");
  const nlohmann::json fused = megatron_1_7b_job("    --cross-entropy-loss-fusion\n", "fused");
  const double saved = plain["predicted"]["step_time_s"].get<double>() - fused["predicted"]["step_time_s"].get<double>();
  CHECK(saved == Approx(4.0 * 4096 * 131072 * 22 / (3.35e12 * 0.9)).epsilon(0.01));
  for (const auto& u : fused["unmodelled"]) CHECK(u["key"] != "--cross-entropy-loss-fusion");
}

TEST_CASE("a Megatron GPT block without --swiglu has a two-matrix GeLU MLP", "[model][config]") {
  // NVIDIA/Megatron-LM README @ f2e5db4 names the h = 2048, 24-layer, V = 131,072 GPT "1.7B":
  // 24 × (12h² + 2h) + 2·V·h (untied) + h = 1.745B (norm weights counted, biases left out:
  // docs/facts/cost-formulas.md#parameter-counts). A gated MLP would make it 2.15B.
  const nlohmann::json gelu = megatron_1_7b_job("", "gelu");
  CHECK(gelu["params"].get<double>() == Approx(24.0 * (12.0 * 2048 * 2048 + 2 * 2048) + 2.0 * 131072 * 2048 + 2048).epsilon(1e-9));
  // --swiglu: F = int(4h·2/3 / 64)·64 = 5440 and three matrices (arguments.py).
  const nlohmann::json swiglu = megatron_1_7b_job("    --swiglu\n", "swiglu");
  CHECK(swiglu["params"].get<double>() ==
        Approx(24.0 * (4.0 * 2048 * 2048 + 3.0 * 2048 * 5440 + 2 * 2048) + 2.0 * 131072 * 2048 + 2048).epsilon(1e-9));
}

TEST_CASE("memory-bound kernels reach calculon's fraction of HBM bandwidth by their size", "[model]") {
  // calculon-ai/calculon @caa4b11, systems/h100_80g_nvl8.json and a100_80g.json, mem1.MB_efficiency.
  CHECK(model::hbm_efficiency(100e6) == 0.9);
  CHECK(model::hbm_efficiency(99.9e6) == 0.75);
  CHECK(model::hbm_efficiency(10e6) == 0.75);
  CHECK(model::hbm_efficiency(5e6) == 0.6);
  CHECK(model::hbm_efficiency(1e3) == 0.3);
  CHECK(model::hbm_time_s(3350e9, 134e6, 2) == Approx(2 * 134e6 / (3350e9 * 0.9)));
  CHECK(model::hbm_time_s(0, 134e6) == 0);  // a preset without a bandwidth
  // matrix.float16.gflops_efficiency (0.95 from 128 GFLOP, 0.9 from 16, 0.6 from 1, 0.1 below) / 0.95.
  CHECK(model::gemm_size_efficiency(137e9) == 1.0);
  CHECK(model::gemm_size_efficiency(103e9) == Approx(0.9 / 0.95));
  CHECK(model::gemm_size_efficiency(2e9) == Approx(0.6 / 0.95));
  CHECK(model::gemm_size_efficiency(1e8) == Approx(0.1 / 0.95));
  // calculon's Linear layer: inputs + weights + outputs, 2 bytes each in bf16.
  CHECK(model::gemm_bytes(4096, 2048, 6144, 2) == 2.0 * (4096 * 2048 + 2048 * 6144 + 4096 * 6144));
}

TEST_CASE("a small model's GEMMs spend more of their time moving operands than a large one's", "[model]") {
  // docs/facts/cost-formulas.md#memory-time-of-a-kernel, worked: Megatron-LM's 1.7B GPT (h 2048,
  // F 8192, TP 1) and 16B GPT (h 6144, F 24576, TP 4), 4096 tokens, on an H100.
  auto gpt = [](int64_t h, int64_t heads, int32_t tp) {
    model::CostInputs in;
    in.model.dim = h;
    in.model.layers = 1;
    in.model.heads = heads;
    in.model.kv_heads = heads;
    in.model.head_dim = h / heads;
    in.model.ffn = 4 * h;
    in.model.vocab = 131072;
    in.model.gated_mlp = false;
    in.hardware = *model::hardware_preset("h100");
    in.seq_len = 4096;
    in.layout.tp = tp;
    in.layout.sequence_parallel = tp > 1;
    return in;
  };
  const model::CostInputs small = gpt(2048, 16, 1), large = gpt(6144, 48, 4);
  const double bw = 3350e9;
  auto mb = [](double k, double n) { return 2 * (4096 * k + k * n + 4096 * n); };
  // 1.7B: QKV 92.3 MB and the output projection 41.9 MB at 0.75, fc1 and fc2 117.4 MB at 0.9.
  const double small_s = (mb(2048, 6144) + mb(2048, 2048)) / (bw * 0.75) + 2 * mb(2048, 8192) / (bw * 0.9);
  CHECK(model::layer_gemm_memory_s(small, 0) == Approx(small_s));
  CHECK(small_s == Approx(0.131e-3).epsilon(0.01));
  // 16B at TP 4: QKV 144.7 MB, fc1 and fc2 176.2 MB at 0.9, the output projection 81.8 MB at 0.75.
  const double large_s = (mb(6144, 4608) + 2 * mb(6144, 6144)) / (bw * 0.9) + mb(1536, 6144) / (bw * 0.75);
  CHECK(model::layer_gemm_memory_s(large, 0) == Approx(large_s));
  // Against the FLOP time: 19 % for the 1.7B block, 13 % for the 16B block.
  auto share = [](const model::CostInputs& in) {
    const double rate = in.hardware.peak_flops * in.hardware.efficiency;
    const double lin = 4096 * in.model.layer_linear_flops_per_token(0) / in.layout.tp;
    return model::layer_gemm_memory_s(in, 0) / (lin / rate * model::layer_gemm_time_factor(in, 0));
  };
  model::CostInputs s = small, l = large;
  s.eff.compute = l.eff.compute = s.hardware.efficiency;
  CHECK(share(s) == Approx(0.19).margin(0.01));
  CHECK(share(l) == Approx(0.13).margin(0.01));
  // The 1.7B block's projections (103 and 34 GFLOP) run at 0.9/0.95, its MLP's (137 GFLOP) at 1.
  CHECK(model::layer_gemm_time_factor(small, 0) == Approx((137.4 / (0.9 / 0.95) + 274.9) / 412.3).epsilon(1e-3));
  // The block's passes carry the memory time once each.
  const model::LayerCost c = model::layer_cost(s, 0);
  CHECK(c.gemm_memory_s == Approx(small_s));
  CHECK(c.weight_grad_s == Approx(4096 * s.model.layer_linear_flops_per_token(0) / (989e12 * s.eff.compute) *
                                      model::layer_gemm_time_factor(s, 0) + small_s));
}

namespace sc {
namespace {

/// The 1.7B GPT script with `from` replaced by `to`, verified as text on 48 H100.
test::CliRun megatron_1_7b_edited(const std::string& from, const std::string& to, const std::string& name,
                                  const std::string& extra_args = "") {
  std::string text = test::read_file(test::source_path("specs/reference/published/megatron-gpt-1.7b-h100x48.sh"));
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  const std::string path = test::write_temp("schedcheck-edit-test", name + ".sh", text);
  return test::run_schedcheck("verify '" + path + "' --gpus 48 --hardware h100" + extra_args);
}

}  // namespace

TEST_CASE("a Megatron script Megatron-LM would refuse at start-up, or too large to count, exits 2 at its line",
          "[config]") {
  // validate_args @f2e5db4: "assert args.max_position_embeddings >= args.seq_length".
  test::CliRun pos = megatron_1_7b_edited("--seq-length 4096", "--seq-length 8192", "maxpos");
  CHECK(pos.exit_code == 2);
  CHECK(pos.out.find("maxpos.sh:23:5: error: --max-position-embeddings 4096 is below --seq-length 8192") != std::string::npos);
  test::CliRun vocab = megatron_1_7b_edited("--vocab-size 131072", "--vocab-size 0", "vocab0");
  CHECK(vocab.exit_code == 2);
  CHECK(vocab.out.find("vocab0.sh:24:5: error: --vocab-size must be at least 1, got 0") != std::string::npos);
  // h = 2^28: 12·h² per block overflows 64-bit byte counts; refused, not reported as negative sizes.
  test::CliRun huge = megatron_1_7b_edited("--hidden-size 2048", "--hidden-size 268435456", "huge");
  CHECK(huge.exit_code == 2);
  CHECK(huge.out.find("the model is too large to count: about 2.08e+19 parameters") != std::string::npos);
}

TEST_CASE("a Megatron script without a pipeline locates its generated steps at the PP flag, not at line 1",
          "[config][memory]") {
  // At sequence length 262,144 one microbatch's activations (538 GiB) exceed the HBM: the finding
  // is at the micro-batch size, and the step it peaks in at --pipeline-model-parallel-size 1.
  test::CliRun r = megatron_1_7b_edited("--seq-length 4096\n    --max-position-embeddings 4096",
                                        "--seq-length 262144\n    --max-position-embeddings 262144", "oom");
  INFO(r.out);
  CHECK(r.exit_code == 13);
  CHECK(r.out.find("oom.sh:29:5: activations (the largest contributor a config sets)") != std::string::npos);
  CHECK(r.out.find("oom.sh:39:5: 0F0") != std::string::npos);
  CHECK(r.out.find("oom.sh:1:1:") == std::string::npos);
}

TEST_CASE("an MFU above 100 % says the FLOP count counts the causal attention core in full", "[config]") {
  // At sequence length 131,072 the 1.7B GPT's attention core is most of the counted FLOPs, and
  // the kernels run half of it: with GEMMs at 0.9 of peak the counted MFU passes 100 %.
  test::CliRun r = megatron_1_7b_edited("--seq-length 4096\n    --max-position-embeddings 4096",
                                        "--seq-length 131072\n    --max-position-embeddings 131072", "longseq",
                                        " --efficiency 0.9");
  INFO(r.out);
  REQUIRE(r.out.find("MFU 1") != std::string::npos);
  CHECK(r.out.find("note: MFU above 100 %: the FLOP count") != std::string::npos);
  // At 4096 tokens there is no such note.
  test::CliRun plain = megatron_1_7b_edited("--seq-length 4096", "--seq-length 4096", "plainseq");
  CHECK(plain.out.find("note: MFU above 100 %") == std::string::npos);
}

}  // namespace sc
