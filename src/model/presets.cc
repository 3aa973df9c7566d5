// Model and GPU presets. Every figure is from a page of docs/facts/ (given per entry).
#include <algorithm>
#include <cctype>

#include "model/cost_model.h"

namespace sc::model {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

ModelDesc llama(std::string name, int64_t dim, int64_t layers, int64_t heads, int64_t kv, int64_t vocab, int64_t ffn,
                std::string source) {
  ModelDesc m;
  m.name = std::move(name);
  m.dim = dim;
  m.layers = layers;
  m.heads = heads;
  m.kv_heads = kv;
  m.head_dim = dim / heads;
  m.vocab = vocab;
  m.ffn = ffn;
  m.source = std::move(source);
  return m;
}

std::vector<ModelDesc> models() {
  std::vector<ModelDesc> v;
  // docs/facts/config-keys.md#model-flavors, torchtitan llama3 flavors @238fa99 (F from the FeedForward rule).
  v.push_back(llama("llama3-8b", 4096, 32, 32, 8, 128256, 14336, "torchtitan llama3 flavor 8B (docs/facts/config-keys.md#model-flavors)"));
  v.push_back(llama("llama3-70b", 8192, 80, 64, 8, 128256, 28672, "torchtitan llama3 flavor 70B (docs/facts/config-keys.md#model-flavors)"));
  v.push_back(llama("llama3-405b", 16384, 126, 128, 8, 128256, 53248, "torchtitan llama3 flavor 405B (docs/facts/config-keys.md#model-flavors)"));
  // torchtitan llama3 "debugmodel": dim 256, 6 layers, 16 heads, vocab 2000; F = round_up(int(2·4·256/3), 256).
  v.push_back(llama("llama3-debug", 256, 6, 16, 16, 2000, 768, "torchtitan llama3 flavor debugmodel"));
  {
    // docs/facts/config-keys.md#model-flavors: llama4 17bx128e, 128 experts, top-1, one shared, MoE every 2nd layer.
    ModelDesc m = llama("llama4-17bx128e", 5120, 48, 40, 8, 202048, 16384, "torchtitan llama4 flavor 17bx128e (docs/facts/config-keys.md#model-flavors)");
    m.moe = Moe{128, 1, 1, 8192, 0, 2};
    v.push_back(m);
    m.name = "llama4-17bx16e";
    m.source = "torchtitan llama4 flavor 17bx16e (docs/facts/config-keys.md#model-flavors)";
    m.moe = Moe{16, 1, 1, 8192, 0, 1};
    v.push_back(m);
  }
  {
    // docs/facts/config-keys.md#model-flavors: DeepSeek-V3 16B, MLA (q_lora 0, kv_lora 512), 64 experts, 2 shared, top-6,
    // first layer dense; 15.7B total, 2.7B active.
    ModelDesc m = llama("deepseek-v3-16b", 2048, 27, 16, 16, 102400, 10944, "torchtitan deepseek_v3 flavor 16B (docs/facts/config-keys.md#model-flavors)");
    m.head_dim = 128;
    m.mla = Mla{0, 512, 128, 64, 128};
    m.moe = Moe{64, 6, 2, 1408, 1, 1};
    v.push_back(m);
    m = llama("deepseek-v3-671b", 7168, 61, 128, 128, 129280, 18432, "torchtitan deepseek_v3 flavor 671B (docs/facts/config-keys.md#model-flavors)");
    m.head_dim = 128;
    m.mla = Mla{1536, 512, 128, 64, 128};
    m.moe = Moe{256, 8, 1, 2048, 3, 1};
    v.push_back(m);
  }
  {
    // Mixtral 8x7B (Jiang et al. 2024, arXiv 2401.04088, Table 1): dim 4096, 32 layers, 32 heads,
    // 8 KV heads, vocab 32000, expert hidden 14336, 8 experts, top-2; Megatron-LM's
    // examples/mixtral script runs it (docs/facts/config-keys.md#megatron-example-scripts).
    ModelDesc m = llama("mixtral-8x7b", 4096, 32, 32, 8, 32000, 14336, "Mixtral 8x7B (arXiv 2401.04088 Table 1)");
    m.moe = Moe{8, 2, 0, 14336, 0, 1};
    v.push_back(m);
  }
  return v;
}

std::vector<HardwareDesc> gpus() {
  // docs/facts/hardware.md#gpus (bf16 dense peak, HBM, intra-node and scale-out per GPU, per direction;
  // the fp8 dense peak last, none on A100).
  // HBM: the vendor's figure read as GiB (HBM stacks come in binary sizes: H100's 80 GB is five
  // 16 GiB stacks).
  constexpr int64_t GiB = int64_t{1} << 30;
  return {
      // A100: 0.633 reproduces torchtitan's Llama 3 8B on 64 A100 (2,973 tokens/s/GPU,
      // docs/performance.md) with its per-op AC's recompute charged, the causal attention core
      // at half its counted FLOPs and the GEMMs' rate (no attention-kernel figures for sm 80 are
      // entered), the eager elementwise ops and the GEMMs' operands at the HBM bandwidth
      // (docs/fidelity.md). HBM: the vendor's bandwidth (docs/facts/hardware.md#gpus).
      {"a100-80gb", 312e12, 80 * GiB, 300e9, 25e9, 8, "docs/facts/hardware.md#gpus A100 80GB SXM", 0.633, 19.5e12, 2039e9, 0, 80},
      {"a100-40gb", 312e12, 40 * GiB, 300e9, 25e9, 8, "docs/facts/hardware.md#gpus A100 40GB SXM", 0.633, 19.5e12, 1555e9, 0, 80},
      // H100 SXM (700 W): 0.639 reproduces Megatron-LM's 16B GPT on 192 H100 (TP 4, 489.1 TFLOP/s
      // per GPU, NVIDIA/Megatron-LM README @ f2e5db4), the weak-scaling table's largest run with
      // neither a pipeline nor a data-parallel group on one NIC per node, with its attention core
      // at cuDNN's measured rate (docs/fidelity.md, docs/facts/cost-formulas.md#attention-kernels).
      // sm 90 for every Hopper preset: the attention-kernel figures apply.
      {"h100", 989e12, 80 * GiB, 450e9, 50e9, 8, "docs/facts/hardware.md#gpus H100 SXM", 0.639, 67e12, 3350e9, 1979e12, 90},
      // Meta's Grand Teton H100 (96 GB HBM2e, 500 W), where torchtitan's H100 figures were measured;
      // torchtitan counts MFU against the SXM peak. 0.495 reproduces its Llama 3.1 8B on 8 GPUs
      // (5,762 TPS/GPU, benchmarks/llama3_h100_202412_torchtitan.md) with its attention core at
      // FlashAttention-2's measured rate, scaled by 0.495 / 0.639 (docs/facts/cost-formulas.md#attention-kernels). HBM2e at 2.4 TB/s, as
      // torchtitan's benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md @ b5bcd76 states it.
      {"h100-96gb", 989e12, 96 * GiB, 450e9, 50e9, 8, "docs/facts/hardware.md#gpus H100 (Meta Grand Teton variant)", 0.495, 67e12, 2400e9, 1979e12, 90},
      // H200: the H100 SXM's die and clocks with more and faster HBM; no published run of its own
      // is checked, so it takes the H100 SXM fit.
      {"h200", 989e12, 141 * GiB, 450e9, 50e9, 8, "docs/facts/hardware.md#gpus H200", 0.639, 67e12, 4800e9, 1979e12, 90},
      {"b200", 2250e12, 192 * GiB, 900e9, 50e9, 8, "docs/facts/hardware.md#gpus B200", 0.40, 0, 8000e9, 4500e12, 100},
      {"mi300x", 1300e12, 192 * GiB, 448e9, 50e9, 8, "docs/facts/hardware.md#gpus MI300X", 0.40, 163.4e12, 5300e9, 2614.9e12, 0},
  };
}

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out;
  for (const ModelDesc& m : models()) out.push_back(m.name);
  return out;
}

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> out;
  for (const HardwareDesc& h : gpus()) out.push_back(h.name);
  return out;
}

std::optional<ModelDesc> model_preset(const std::string& name) {
  const std::string n = lower(name);
  for (const ModelDesc& m : models())
    if (m.name == n) return m;
  return std::nullopt;
}

std::optional<HardwareDesc> hardware_preset(const std::string& name) {
  std::string n = lower(name);
  if (n == "a100") n = "a100-80gb";
  if (n == "h100-sxm") n = "h100";
  for (const HardwareDesc& h : gpus())
    if (h.name == n) return h;
  return std::nullopt;
}

std::string torchtitan_preset(const std::string& name, const std::string& flavor) {
  std::string n = lower(name), f = lower(flavor);
  std::replace(n.begin(), n.end(), '_', '-');
  std::string candidate;
  if (f == "debugmodel") candidate = n + "-debug";
  else candidate = n + "-" + f;
  return model_preset(candidate) ? candidate : std::string();
}

}  // namespace sc::model
