// The attention core as its own kernel class: FlashAttention-2 and cuDNN rates on Hopper from the
// FlashAttention-3 paper's H100 figures, the backward at 2.5x the forward's FLOPs, context
// parallelism's causal and unmasked calls (docs/facts/cost-formulas.md#attention-kernels).
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "cli_util.h"
#include "model/cost_model.h"
#include "test_util.h"

using namespace sc;
using namespace sc::model;

namespace {

const HardwareDesc& h100() {
  static const HardwareDesc hw = *hardware_preset("h100");
  return hw;
}

/// Llama 3 8B on one H100 SXM at `seq` tokens, `cp`-way context parallel, FlashAttention-2.
CostInputs llama8b(int64_t seq, int32_t cp) {
  CostInputs in;
  in.model = *model_preset("llama3-8b");
  in.hardware = h100();
  in.eff.compute = in.hardware.efficiency;
  in.seq_len = seq;
  in.layout.cp = cp;
  in.attention_kernel = AttentionKernel::kFlash2;
  return in;
}

}  // namespace

TEST_CASE("attention kernel rates are the FlashAttention-3 paper's H100 figures", "[model][attention]") {
  const double e = h100().efficiency;
  // arXiv 2407.08608 Figure 5 (head dimension 128, H100 SXM5): FlashAttention-2 causal forward
  // 335 TFLOP/s at 16K, flat beyond; cuDNN 539.
  CHECK(attention_kernel_flops(h100(), e, AttentionKernel::kFlash2, 16384, true, false) == Approx(335e12));
  CHECK(attention_kernel_flops(h100(), e, AttentionKernel::kFlash2, 262144, true, false) == Approx(335e12));
  CHECK(attention_kernel_flops(h100(), e, AttentionKernel::kCudnn, 16384, true, false) == Approx(539e12));
  CHECK(attention_kernel_flops(h100(), e, AttentionKernel::kFlash2, 8192, false, false) == Approx(370e12));
  // Between 2K (298) and 4K (319): linear in log2 of the length.
  CHECK(attention_kernel_flops(h100(), e, AttentionKernel::kFlash2, 3072, true, false) ==
        Approx((298 + std::log2(1.5) * 21) * 1e12));
  // Figure 6's backward is unmasked (322 at 16K); a causal backward takes the forward's ratio.
  CHECK(attention_kernel_flops(h100(), e, AttentionKernel::kFlash2, 16384, false, true) == Approx(322e12));
  CHECK(attention_kernel_flops(h100(), e, AttentionKernel::kFlash2, 16384, true, true) ==
        Approx(322e12 * 335 / 370));
  // Another Hopper preset at its own GEMM efficiency; no figures for A100 or for the GEMM rate.
  const HardwareDesc gt = *hardware_preset("h100-96gb");
  CHECK(attention_kernel_flops(gt, gt.efficiency, AttentionKernel::kFlash2, 16384, true, false) ==
        Approx(335e12 * gt.efficiency / e));
  const HardwareDesc a100 = *hardware_preset("a100-80gb");
  CHECK(attention_kernel_flops(a100, a100.efficiency, AttentionKernel::kFlash2, 16384, true, false) == 0);
  CHECK(attention_kernel_flops(h100(), e, AttentionKernel::kGemmRate, 16384, true, false) == 0);
}

TEST_CASE("the attention core's time: executed FLOPs at the kernel's rate, 2.5x backward, CP calls", "[model][attention]") {
  // 8B at 32K on one GPU: the executed forward FLOPs (half of 2·heads·(d_qk + d_v)·seq per token
  // with the causal mask) at the causal rate.
  CostInputs in = llama8b(32768, 1);
  const double executed = 32768.0 * in.model.layer_attention_flops_per_token(32768) / 2;
  const LayerCost c = layer_cost(in, 0);
  CHECK(c.attention_s == Approx(executed / 335e12));
  // The GEMMs' rate, as before the kernel class: much faster at this length.
  CostInputs gemm = in;
  gemm.attention_kernel = AttentionKernel::kGemmRate;
  const LayerCost g = layer_cost(gemm, 0);
  const double rate = in.hardware.peak_flops * in.eff.compute;
  CHECK(g.attention_s == Approx(executed / rate));
  CHECK(c.attention_s > 1.5 * g.attention_s);
  // Backward: 2.5 × the executed FLOPs at the causal backward rate, in place of 2 × at the GEMMs'.
  const double backward = 2.5 * executed / (322e12 * 335 / 370);
  CHECK(c.input_grad_s - g.input_grad_s == Approx(backward - 2 * executed / rate));
  // CP 4 at 128K: each rank's 32K queries against all 128K keys, in calls of 32K tokens, one
  // causal (the diagonal) and three unmasked.
  CostInputs cp = llama8b(131072, 4);
  const double local = 32768.0 * cp.model.layer_attention_flops_per_token(131072) / 2;
  CHECK(layer_cost(cp, 0).attention_s == Approx(local * (0.25 / 335e12 + 0.75 / 370e12)));
  CHECK(layer_cost(cp, 0).cp_comm_s > 0);
}

TEST_CASE("PyTorch's ring attention moves the repeated keys and values and passes their fp32 gradients round the ring",
          "[model][attention]") {
  // Llama 3 8B (32 query heads, 8 key/value heads, head dim 128) at CP 4, 128K tokens: each
  // rank holds 32K tokens. The grouped-query exchange (Megatron-LM's) all-gathers 2·8·128 values
  // a token in bf16; torchtitan repeats the heads before SDPA (model.py @9dec370, repeat_kv), so
  // PyTorch's ring attention gathers 2·32·128, 4x the bytes.
  CostInputs gqa = llama8b(131072, 4);
  gqa.eff.latency_s = 0;
  const double bw = group_bandwidth(gqa.hardware, gqa.eff, 1, 4);
  const LayerCost g = layer_cost(gqa, 0);
  CHECK(g.cp_comm_s == Approx(0.75 * 131072.0 * 2 * 8 * 128 * 2 / bw));
  CHECK(g.cp_grad_comm_s == 0);
  CostInputs tt = gqa;
  tt.cp_kv_heads_repeated = true;
  tt.cp_grad_ring_fp32 = true;
  const LayerCost t = layer_cost(tt, 0);
  CHECK(t.cp_comm_s == Approx(4 * g.cp_comm_s));
  // The backward's ring: cp - 1 sends of the local 32K tokens' key and value gradients in fp32
  // (_templated_ring_attention_backward, convert_to_f32), twice the all-gather's bytes.
  CHECK(t.cp_grad_comm_s == Approx(3 * 32768.0 * 2 * 32 * 128 * 4 / bw));
  CHECK(t.cp_grad_comm_s == Approx(2 * t.cp_comm_s));
  // The forward waits for the all-gather; the input-gradient pass for its own and the ring.
  CHECK(t.forward_s - g.forward_s == Approx(t.cp_comm_s - g.cp_comm_s));
  CHECK(t.input_grad_s - g.input_grad_s == Approx(t.cp_comm_s - g.cp_comm_s + t.cp_grad_comm_s));
  // Without CP nothing moves.
  CostInputs one = llama8b(32768, 1);
  one.cp_kv_heads_repeated = one.cp_grad_ring_fp32 = true;
  CHECK(layer_cost(one, 0).cp_comm_s == 0);
  CHECK(layer_cost(one, 0).cp_grad_comm_s == 0);
}

TEST_CASE("a config names the attention kernel its framework calls", "[config][attention]") {
  const auto tt = test::run_schedcheck(
      "verify '" + test::source_path("specs/reference/published/torchtitan-llama3-8b-h100x8-fsdp8-cp1-32k.toml") +
      "' --gpus 8 --hardware h100-96gb");
  INFO(tt.out);
  CHECK(tt.out.find("attention core at FlashAttention-2 (PyTorch SDPA)'s measured rate on Hopper") != std::string::npos);
  const auto mg = test::run_schedcheck(
      "verify '" + test::source_path("specs/reference/published/megatron-gpt-16b-h100x192.sh") + "' --gpus 192 --hardware h100");
  INFO(mg.out);
  CHECK(mg.out.find("attention core at cuDNN fused attention (TransformerEngine)'s measured rate") != std::string::npos);
  // On A100 no figures: no claim.
  const auto a = test::run_schedcheck(
      "verify '" + test::source_path("specs/reference/published/torchtitan-llama3-8b-a100x64-fsdp.toml") +
      "' --gpus 64 --hardware a100-80gb");
  CHECK(a.out.find("attention core at") == std::string::npos);
}

TEST_CASE("materialised attention: all the FLOPs at the GEMMs' rate, the scores through HBM, 5 bytes per score kept",
          "[model][attention]") {
  // Megatron-LM's 2021 GPT 1.7B block (h 2304, 24 heads, s 2048, 16 sequences) on A100.
  CostInputs in;
  in.model = *model_preset("llama3-8b");
  in.model.dim = 2304;
  in.model.heads = in.model.kv_heads = 24;
  in.model.head_dim = 96;
  in.model.ffn = 4 * 2304;
  in.model.gated_mlp = false;
  in.hardware = *hardware_preset("a100-80gb");
  in.eff.compute = in.hardware.efficiency;
  in.seq_len = 2048;
  in.microbatch_sequences = 16;
  in.attention_kernel = AttentionKernel::kMaterialized;
  const LayerCost c = layer_cost(in, 0);
  CostInputs flash = in;
  flash.attention_kernel = AttentionKernel::kGemmRate;
  const LayerCost f = layer_cost(flash, 0);
  const double tokens = 16.0 * 2048;
  const double attn = tokens * in.model.layer_attention_flops_per_token(2048);
  const double rate = in.hardware.peak_flops * in.eff.compute;
  const double scores = 16.0 * 24 * 2048 * 2048;
  // No causal skipping: the whole matrix at the GEMMs' rate, plus 13 bytes per score forward.
  CHECK(c.attention_s == Approx(attn / rate + hbm_time_s(in.hardware.hbm_bw, 2 * scores, 6.5)));
  CHECK(f.attention_s == Approx(attn / 2 / rate));
  CHECK(c.input_grad_s - f.input_grad_s ==
        Approx(2 * attn / rate + hbm_time_s(in.hardware.hbm_bw, 2 * scores, 9.5) - attn / rate));
  // The softmax output and dropout mask stay for the backward (Korthikanti et al. 2022's 5as/h).
  CHECK(std::abs(static_cast<double>(c.activation_bytes - f.activation_bytes) - 5 * scores) <= 1);
}

TEST_CASE("Megatron-LM's --transformer-impl local without --use-flash-attn materialises the attention scores",
          "[config][attention]") {
  const std::string path = test::source_path("specs/reference/published/megatron-sc21-gpt-1.7b-a100x32.sh");
  const auto r = test::run_schedcheck("verify '" + path + "' --hardware a100-80gb");
  INFO(r.out);
  CHECK(r.out.find("attention materialises its scores") != std::string::npos);
  std::string text = test::read_file(path);
  const size_t at = text.find("    --transformer-impl local\n");
  REQUIRE(at != std::string::npos);
  text.insert(at, "    --use-flash-attn\n");
  const auto fa = test::run_schedcheck(
      "verify '" + test::write_temp("schedcheck-attention-test", "flash.sh", text) + "' --hardware a100-80gb");
  CHECK(fa.out.find("attention materialises its scores") == std::string::npos);
}
