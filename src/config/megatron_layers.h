// Megatron-LM's assignment of transformer layers to pipeline stages and virtual stages, from
// --pipeline-model-parallel-layout, --decoder-first/last-pipeline-num-layers and
// --account-for-embedding/loss-in-pipeline-split (docs/facts/config-keys.md#megatron-layer-split).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sc::config {

/// The flags that decide Megatron-LM's layer split, as the launch script gives them.
struct MegatronSplitFlags {
  int64_t num_layers = 0;             ///< --num-layers: transformer (decoder) layers
  int32_t pp = 1;                     ///< --pipeline-model-parallel-size
  /// Virtual stages per pipeline rank from --num-virtual-stages-per-pipeline-rank or
  /// --num-layers-per-virtual-pipeline-stage; 1: none. Ignored with a layout (it sets its own).
  int64_t vpp = 1;
  bool vpp_from_layers_per_stage = false;  ///< vpp came from --num-layers-per-virtual-pipeline-stage
  std::optional<std::string> layout;       ///< --pipeline-model-parallel-layout
  std::optional<int64_t> first, last;      ///< --decoder-first/last-pipeline-num-layers
  bool embedding = false, loss = false;    ///< --account-for-embedding/loss-in-pipeline-split
  int64_t mtp_layers = 0;                  ///< --mtp-num-layers (0: none)
};

/// The flag a refusal is written at.
enum class MegatronSplitFlag { kLayout, kFirst, kLast, kEmbedding, kLoss };

/// Megatron-LM's split, or its refusal.
struct MegatronSplit {
  /// Transformer layers per stage, in schedcheck's stage order: stage v·pp + r is virtual stage
  /// v of pipeline rank r (Megatron's layout order and its interleaved placement). A stage may
  /// hold none. Empty when `error` is set.
  std::vector<int64_t> stage_layers;
  int64_t vpp = 1;                  ///< virtual stages per rank (a layout's stages / pp)
  std::string error;                ///< Megatron's message where it refuses; empty otherwise
  MegatronSplitFlag at = MegatronSplitFlag::kLayout;  ///< the flag `error` is about
};

/// Megatron-LM's split at NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553: the
/// checks of `validate_args` (megatron/training/arguments.py) and `TransformerConfig`'s
/// `__post_init__` (megatron/core/transformer/transformer_config.py), in the order Megatron
/// runs them, then `get_num_layers_to_build` (megatron/core/transformer/transformer_block.py)
/// for every stage, or `PipelineParallelLayerLayout` (pipeline_parallel_layer_layout.py) with a
/// layout. Refusals carry Megatron's message verbatim (its missing spaces included, so that
/// the message can be searched for). A layout is refused, as no Megatron run would take it,
/// when it unrolls to more than kMaxMegatronLayoutChars characters.
MegatronSplit megatron_stage_layers(const MegatronSplitFlags& flags);

/// Longest unrolled layout accepted, in characters (a real layout is a few hundred).
inline constexpr size_t kMaxMegatronLayoutChars = size_t{1} << 20;

/// Megatron's `PipelineParallelLayerLayout.parse_str_to_list`: commas dropped, `(x)*n` then
/// `c*n` unrolled, split at '|'. Returns the stages as strings of layer characters (E, L, t,
/// m), or nullopt with Megatron's message in `*error`.
std::optional<std::vector<std::string>> parse_megatron_layout(const std::string& text, std::string* error);

}  // namespace sc::config
