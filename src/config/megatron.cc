// Megatron-LM arguments (a launch script or an arguments file) to a TrainingJob, with
// Megatron's own startup checks in its words (docs/facts/config-keys.md#megatron-flags, #megatron-derived-sizes, #megatron-startup-checks).
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config_keys.h"
#include "config/file_facts.h"
#include "config/megatron_layers.h"
#include "config/readers.h"
#include "config/shell_args.h"

namespace sc::config {
namespace {

/// Flags of torchrun and of the launcher: read for the world size or not at all, never reported
/// as unmodelled training flags.
const std::vector<std::string> kLauncherFlags = {
    "--nproc_per_node", "--nproc-per-node", "--nnodes",       "--node_rank",    "--node-rank",
    "--master_addr",    "--master-addr",    "--master_port",  "--master-port",  "--rdzv_backend",
    "--rdzv-backend",   "--rdzv_endpoint",  "--rdzv-endpoint", "--rdzv_id",     "--rdzv-id",
    "--standalone",     "--max_restarts",   "--max-restarts", "--redirects",    "--tee",
    "--log_dir",        "--log-dir",        "--local_addr",   "--local-addr",   "--no_python"};

/// Flags a Megatron script names that make it one (is_megatron_config).
const std::vector<std::string> kMegatronMarkers = {
    "--pipeline-model-parallel-size", "--tensor-model-parallel-size", "--micro-batch-size",
    "--global-batch-size",            "--num-layers",                  "--context-parallel-size",
    "--expert-model-parallel-size",   "--use-distributed-optimizer",   "--seq-length"};

/// The flags of a script with lookups by name; every name looked up counts as modelled.
class Args {
 public:
  explicit Args(std::vector<ShellFlag> flags) : flags_(std::move(flags)) {
    for (const std::string& f : kLauncherFlags) consulted_.insert(f);
  }

  /// The last occurrence of `name` (argparse keeps the last), or null.
  const ShellFlag* get(const std::string& name) {
    consulted_.insert(name);
    for (auto it = flags_.rbegin(); it != flags_.rend(); ++it)
      if (it->name == name) return &*it;
    return nullptr;
  }
  bool has(const std::string& name) { return get(name) != nullptr; }
  /// Every occurrence, in command-line order (not marked consulted).
  std::vector<const ShellFlag*> all(const std::string& name) const {
    std::vector<const ShellFlag*> out;
    for (const ShellFlag& f : flags_)
      if (f.name == name) out.push_back(&f);
    return out;
  }

  /// Flags never looked up, each once at its first occurrence.
  std::vector<std::pair<std::string, SourceLoc>> unconsulted() const {
    std::vector<std::pair<std::string, SourceLoc>> out;
    std::set<std::string> seen;
    for (const ShellFlag& f : flags_)
      if (!consulted_.count(f.name) && seen.insert(f.name).second) out.emplace_back(f.name, f.loc);
    return out;
  }

 private:
  std::vector<ShellFlag> flags_;
  std::set<std::string> consulted_;
};

/// The later of two locations in one file (where the second of two conflicting flags was given).
SourceLoc later(const SourceLoc& a, const SourceLoc& b) {
  return std::make_pair(a.line, a.col) >= std::make_pair(b.line, b.col) ? a : b;
}

/// Largest integer flag value read: products of a few of them stay far from overflow.
constexpr int64_t kMaxValue = int64_t{1} << 32;

class MegatronReader {
 public:
  MegatronReader(const std::string& path, int32_t file, ShellArgs sh, const JobContext& ctx, Diagnostics& diags)
      : path_(path), file_(file), args_(std::move(sh.flags)), vars_(std::move(sh.vars)),
        if_lines_(std::move(sh.if_lines)), list_lines_(std::move(sh.list_lines)), ctx_(ctx), diags_(diags) {}

  bool run(TrainingJob* job) {
    const size_t errors_before = diags_.error_count();
    TrainingJob& j = *job;
    j = TrainingJob{};
    j.framework = "megatron";
    j.path = path_;
    j.file = start();
    j.hardware = ctx_.hardware;
    // "line 3", "lines 3, 9", at most ten listed: "lines 3, 9, ... and 99,990 more".
    const auto lines_of = [](const std::vector<int32_t>& ls) {
      constexpr size_t kListed = 10;
      std::vector<std::string> shown;
      for (size_t k = 0; k < std::min(ls.size(), kListed); ++k) shown.push_back(std::to_string(ls[k]));
      std::string text = fmt::format("line{} {}", ls.size() > 1 ? "s" : "", fmt::join(shown, ", "));
      if (ls.size() > kListed) text += fmt::format(" and {} more", ls.size() - kListed);
      return text;
    };
    if (!if_lines_.empty())
      diags_.note(SourceLoc{file_, if_lines_.front(), 1},
                  fmt::format("the script's blocks at {} are read approximately: a loop's body once, a "
                              "function's body where it is defined, and every branch of an if or case from a "
                              "condition schedcheck does not evaluate (a command, a file test, a && or || list, a "
                              "case pattern with [...] or a word from $(...))",
                              lines_of(if_lines_)));
    if (!list_lines_.empty())
      diags_.note(SourceLoc{file_, list_lines_.front(), 1},
                  fmt::format("the script's && / || lists ({}) are read with both sides run: the left side's "
                              "status is not known (a command, a block, or a test other than -n, -z and "
                              "comparisons)",
                              lines_of(list_lines_)));
    deprecated();
    switches_take_no_value();
    parallel(j);
    world(j);
    sharding(j);
    precision(j);
    recompute(j);
    model(j);
    experts(j);
    one_vpp_flag();
    if (world_ok_) batch(j);
    if (world_ok_ && j.microbatches > 0) pipeline(j);
    // Flags that the batch and pipeline steps read, also when an earlier error skipped them.
    for (const char* f : {"--micro-batch-size", "--global-batch-size", "--num-layers-per-virtual-pipeline-stage",
                          "--num-virtual-stages-per-pipeline-rank", "--pipeline-model-parallel-layout",
                          "--microbatch-group-size-per-vp-stage", "--decoder-first-pipeline-num-layers",
                          "--decoder-last-pipeline-num-layers", "--account-for-embedding-in-pipeline-split",
                          "--account-for-loss-in-pipeline-split", "--no-overlap-p2p-communication"})
      args_.get(f);
    // argparse refuses a flag Megatron-LM does not define ("unrecognized arguments"; its parser
    // has allow_abbrev=False); the defined ones schedcheck does not read are listed once.
    // Suggestions for the first kMaxFlagSuggestions unknown flags only: a script of thousands
    // of junk flags would otherwise cost one edit-distance search over ~1,000 flags per word.
    constexpr int kMaxFlagSuggestions = 32;
    int suggested = 0;
    for (auto& [flag, loc] : args_.unconsulted()) {
      if (is_megatron_flag(flag)) {
        j.unmodelled.emplace_back(flag, loc);
        continue;
      }
      const std::string near = suggested++ < kMaxFlagSuggestions ? closest_megatron_flag(flag) : std::string();
      diags_.error(loc, fmt::format("unrecognized arguments: {} (Megatron-LM defines no such flag{})", flag,
                                    near.empty() ? "" : fmt::format("; did you mean '{}'?", near)));
    }
    return diags_.error_count() == errors_before;
  }

 private:
  SourceLoc start() const { return SourceLoc{file_, 1, 1}; }

  /// Whether one of the script's first 32 undefined flags is a misspelling of `name` (its
  /// closest defined flag). Its "unrecognized arguments ... did you mean" error, at the typo,
  /// already says what is missing; a "not given" error at the start of the file would only
  /// repeat it, somewhere else, and first.
  bool misspelt(const std::string& name) {
    int searched = 0;
    for (auto& [flag, loc] : args_.unconsulted()) {
      if (is_megatron_flag(flag)) continue;
      if (++searched > 32) break;
      if (closest_megatron_flag(flag) == name) return true;
    }
    return false;
  }

  /// A flag argparse declares with one value (no `nargs`) takes the word after it; the next word
  /// that is not a flag is left over, and argparse refuses it ("unrecognized arguments"):
  /// reported at that word.
  void one_value(const ShellFlag& f) {
    if (f.values.size() > 1)
      diags_.error(f.values[1].loc, fmt::format("argument {} takes one value: argparse refuses '{}' after it "
                                                "(\"unrecognized arguments\")", f.name, f.values[1].text));
  }

  /// The first value of integer flag `name`, `def` when the flag is absent; reports argparse's
  /// errors at the flag and values below `min`.
  std::optional<int64_t> integer(const std::string& name, std::optional<int64_t> def, int64_t min = 1) {
    const ShellFlag* f = args_.get(name);
    if (!f) return def;
    if (f->values.empty() || f->values[0].text.empty()) {
      diags_.error(f->loc, fmt::format("argument {}: expected one argument", name));
      return std::nullopt;
    }
    one_value(*f);
    const std::string& s = f->values[0].text;
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size()) {
      diags_.error(f->loc, fmt::format("argument {}: invalid int value: '{}'", name, s));
      // An expansion the reader left as its text: say where it is and why.
      const SourceLoc& from = f->values[0].loc;
      if (s.rfind("$((", 0) == 0)
        diags_.note(from, fmt::format("'{}' is arithmetic schedcheck does not evaluate (it reads integers, "
                                      "variables, + - * / % ** and parentheses); write the value directly", s));
      else if (s.rfind("$(", 0) == 0)
        diags_.note(from, fmt::format("'{}' is a command, which schedcheck does not run; write the value directly "
                                      "or give the variable with --env NAME=VALUE", s));
      else if (s.rfind("${", 0) == 0)
        diags_.note(from, fmt::format("'{}' is an expansion schedcheck does not read; write the value directly", s));
      return std::nullopt;
    }
    if (v < min) {
      diags_.error(f->loc, fmt::format("{} must be at least {}, got {}", name, min, v));
      return std::nullopt;
    }
    if (v > kMaxValue) {
      diags_.error(f->loc, fmt::format("{} is too large (at most {})", name, kMaxValue));
      return std::nullopt;
    }
    return v;
  }
  int32_t degree(const std::string& name, const char* field, TrainingJob& j) {
    auto v = integer(name, 1);
    if (const ShellFlag* f = args_.get(name); f && v) j.where[field] = f->loc;
    if (v && *v > (int64_t{1} << 20)) {
      diags_.error(args_.get(name)->loc, fmt::format("{} is too large (at most {})", name, 1 << 20));
      return 1;
    }
    return v ? static_cast<int32_t>(*v) : 1;
  }
  SourceLoc loc_of(const std::string& name) {
    const ShellFlag* f = args_.get(name);
    return f ? f->loc : start();
  }

  /// Flags Megatron rejects as no longer valid (arguments.py L592-606).
  void deprecated() {
    if (const ShellFlag* f = args_.get("--batch-size"))
      diags_.error(f->loc, "--batch-size argument is no longer valid, use --micro-batch-size instead");
    if (const ShellFlag* f = args_.get("--model-parallel-size"))
      diags_.error(f->loc, "--model-parallel-size is no longer valid, use --tensor-model-parallel-size instead");
    if (const ShellFlag* f = args_.get("--checkpoint-activations"))
      diags_.error(f->loc, "--checkpoint-activations is no longer valid, use --recompute-activations, or, for more "
                           "control, --recompute-granularity and --recompute-method");
  }

  void parallel(TrainingJob& j) {
    model::Layout& l = j.layout;
    l.tp = degree("--tensor-model-parallel-size", "tp", j);
    l.pp = degree("--pipeline-model-parallel-size", "pp", j);
    l.cp = degree("--context-parallel-size", "cp", j);
    l.ep = degree("--expert-model-parallel-size", "ep", j);
    etp_ = args_.has("--expert-tensor-parallel-size") ? degree("--expert-tensor-parallel-size", "etp", j) : l.tp;
    j.where.erase("etp");
    l.etp = etp_;
    const ShellFlag* sp = args_.get("--sequence-parallel");
    l.sequence_parallel = sp != nullptr;
    if (const ShellFlag* o = args_.get("--tp-comm-overlap"); o && (!sp || l.tp == 1))
      diags_.error(o->loc, "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is "
                           "enabled");
    if (const ShellFlag* o = args_.get("--tp-comm-overlap"); o && sp && l.tp > 1) {
      j.tp_comm_overlap = true;
      j.tp_comm_overlap_backward = true;  // TransformerEngine overlaps the dgrad and wgrad collectives too
      j.where["tp_comm_overlap"] = o->loc;
    }
    // --cross-entropy-loss-fusion (off by default; its --no- and --disable- spellings turn it off
    // again); --cross-entropy-fusion-impl picks the fused kernel, timed as one.
    // The three spellings share one dest, so the last one on the command line wins (argparse);
    // get() points into the flags in command-line order, so the greatest pointer is the last.
    const ShellFlag* ce_last = nullptr;
    for (const char* f : {"--cross-entropy-loss-fusion", "--no-cross-entropy-loss-fusion",
                          "--disable-cross-entropy-loss-fusion"})
      if (const ShellFlag* g = args_.get(f); g && (!ce_last || std::less<const ShellFlag*>()(ce_last, g))) ce_last = g;
    const bool ce_fused = ce_last && ce_last->name == "--cross-entropy-loss-fusion";
    j.loss_kernel = ce_fused ? model::LossKernel::kMegatronFused : model::LossKernel::kMegatron;
    // Megatron-LM's blocks run fused elementwise kernels by default (bias-GeLU, bias-dropout-add,
    // TransformerEngine's fused norms; docs/facts/cost-formulas.md#elementwise-ops).
    j.fused_elementwise = true;
    j.kv_groups_replicate = true;
    // --transformer-impl local runs Megatron-LM's own DotProductAttention, which materialises the
    // scores unless --use-flash-attn (arguments.py; megatron/core/models/gpt/gpt_layer_specs.py).
    if (auto ti = choice(args_.get("--transformer-impl"), {"local", "transformer_engine", "inference_optimized"});
        ti && *ti == "local" && !args_.has("--use-flash-attn"))
      j.attention_kernel = model::AttentionKernel::kMaterialized;
    const ShellFlag* impl = args_.get("--cross-entropy-fusion-impl");
    const std::string impl_name = choice(impl, {"native", "te"}).value_or("native");
    // arguments.py @d98e8a64 L1697-1702: the TransformerEngine kernel is refused with the fusion.
    if (impl && impl_name == "te" && j.loss_kernel == model::LossKernel::kMegatronFused)
      diags_.error(impl->loc, "Transformer Engine cross entropy loss fusion is disabled due to stability issues. Use "
                              "--cross-entropy-fusion-impl native, or omit --cross-entropy-loss-fusion (Megatron-LM "
                              "refuses this pair at startup)");
    if (sp && l.tp == 1) {
      l.sequence_parallel = false;
      diags_.warning(sp->loc, "Disabling sequence parallelism because tensor model parallelism is disabled "
                              "(Megatron-LM turns --sequence-parallel off when --tensor-model-parallel-size is 1)");
    }
  }

  /// World size: torchrun's --nproc_per_node × --nnodes, else the script's WORLD_SIZE or
  /// GPUS_PER_NODE × NUM_NODES (NNODES), else --gpus.
  void world(TrainingJob& j) {
    int64_t world = 0;
    SourceLoc where = start();
    const ShellFlag* nproc = args_.get("--nproc_per_node");
    if (!nproc) nproc = args_.get("--nproc-per-node");
    if (nproc) {
      auto per_node = torchrun_int(*nproc);
      const ShellFlag* nnodes = args_.get("--nnodes");
      std::optional<int64_t> nodes = nnodes ? torchrun_int(*nnodes) : std::optional<int64_t>(1);
      if (!per_node || !nodes) return;
      world = *per_node * *nodes;
      where = nproc->loc;
    } else if (auto w = var_int("WORLD_SIZE")) {
      world = *w;
      where = vars_["WORLD_SIZE"].loc;
    } else if (auto g = var_int("GPUS_PER_NODE")) {
      auto n = var_int("NUM_NODES");
      if (!n) n = var_int("NNODES");
      world = *g * n.value_or(1);
      where = vars_["GPUS_PER_NODE"].loc;
    }
    if (world > 0 && ctx_.gpus > 0 && ctx_.gpus != world)
      diags_.warning(where, fmt::format("--gpus {} differs from the script's world size {}; the script's is used",
                                        ctx_.gpus, world));
    if (world <= 0) {
      world = ctx_.gpus;
      where = start();
    }
    if (world <= 0) {
      diags_.error(start(), "the script does not give the world size (torchrun --nproc_per_node and --nnodes, or "
                            "WORLD_SIZE); pass --gpus");
      return;
    }
    if (world > (int64_t{1} << 24)) {
      diags_.error(where, fmt::format("world size {} is too large", world));
      return;
    }
    j.world = static_cast<int32_t>(world);
    j.where["world"] = where;
    const model::Layout& l = j.layout;
    const int64_t model_size = int64_t{l.tp} * l.pp * l.cp;
    if (world % model_size != 0) {
      const char* field = j.where.count("tp") ? "tp" : j.where.count("pp") ? "pp" : j.where.count("cp") ? "cp" : "world";
      diags_.error(j.where.count(field) ? j.loc(field) : where,
                   fmt::format("world size ({}) is not divisible by tensor parallel size ({}) times pipeline parallel "
                               "size ({}) times context parallel size ({})",
                               world, l.tp, l.pp, l.cp));
      return;
    }
    dp_ = static_cast<int32_t>(world / model_size);
    // Expert grid (parallel_state.py L872-902): EP is carved out of the data-parallel ranks.
    const int64_t expert_size = int64_t{etp_} * l.ep * l.pp;
    if (world % expert_size != 0) {
      diags_.error(loc_of("--expert-model-parallel-size"),
                   fmt::format("world_size ({}) is not divisible by expert_tensor_model_pipeline_parallel size ({})",
                               world, expert_size));
      return;
    }
    world_ok_ = true;
  }
  std::optional<int64_t> torchrun_int(const ShellFlag& f) {
    if (f.values.empty()) {
      diags_.error(f.loc, fmt::format("argument {}: expected one argument", f.name));
      return std::nullopt;
    }
    const std::string& s = f.values[0].text;
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || v < 1 || v > (int64_t{1} << 20)) {
      diags_.error(f.loc, fmt::format("{} must be a whole number from 1 to {} here, got '{}'", f.name, 1 << 20, s));
      return std::nullopt;
    }
    return v;
  }
  std::optional<int64_t> var_int(const std::string& name) {
    auto it = vars_.find(name);
    if (it == vars_.end()) return std::nullopt;
    const std::string& s = it->second.value;
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || v < 1 || v > (int64_t{1} << 20)) return std::nullopt;
    return v;
  }

  /// Distributed optimizer (ZeRO-1), Megatron-FSDP (its sharding strategy) or torch FSDP2, and
  /// where the data-parallel degree goes; checks arguments.py L1024-1046.
  void sharding(TrainingJob& j) {
    const ShellFlag* dist_opt = args_.get("--use-distributed-optimizer");
    const ShellFlag* mfsdp = args_.get("--use-megatron-fsdp");
    const ShellFlag* fsdp2 = args_.get("--use-torch-fsdp2");
    j.sharding = Sharding::kDdp;
    j.reshard_after_forward = false;
    if (dist_opt) {
      j.sharding = Sharding::kZero1;
      j.where["sharding"] = dist_opt->loc;
    }
    if (mfsdp) {
      std::string strategy = "optim_grads_params";
      if (auto v = choice(args_.get("--data-parallel-sharding-strategy"),
                          {"no_shard", "optim", "optim_grads", "optim_grads_params"}))
        strategy = *v;
      j.sharding = strategy == "no_shard" ? Sharding::kDdp
                   : strategy == "optim"  ? Sharding::kZero1
                   : strategy == "optim_grads" ? Sharding::kZero2
                                               : Sharding::kFsdp;
      j.where["sharding"] = mfsdp->loc;
    }
    if (fsdp2) {
      j.sharding = Sharding::kFsdp;
      j.where["sharding"] = fsdp2->loc;
      j.reshard_after_forward = !args_.has("--torch-fsdp2-no-reshard-after-forward");
      if (j.layout.pp > 1) diags_.error(fsdp2->loc, "--use-torch-fsdp2 is not supported with pipeline parallelism");
      if (j.layout.ep > 1) diags_.error(fsdp2->loc, "--use-torch-fsdp2 is not supported with expert parallelism");
      if (dist_opt)
        diags_.error(fsdp2->loc, "--use-torch-fsdp2 is not supported with MCore's distributed optimizer");
      if (auto c = vars_.find("CUDA_DEVICE_MAX_CONNECTIONS"); c != vars_.end() && c->second.value == "1")
        diags_.error(fsdp2->loc, fmt::format("FSDP2 requires CUDA_DEVICE_MAX_CONNECTIONS > 1 (the script sets it to 1 "
                                             "at line {})",
                                             c->second.loc.line));
    }
    if (j.sharding == Sharding::kFsdp && !fsdp2) j.reshard_after_forward = true;
    if (const ShellFlag* opg = args_.get("--overlap-param-gather")) {
      if (!dist_opt && !mfsdp)
        diags_.error(opg->loc, "--overlap-param-gather only supported with distributed optimizer or megatron fsdp");
      if (!args_.has("--overlap-grad-reduce"))
        diags_.error(opg->loc, "Must use --overlap-param-gather with --overlap-grad-reduce");
    }
    if (const ShellFlag* ogr = args_.get("--overlap-grad-reduce")) {
      j.overlap_grad_reduce = true;
      j.where["overlap_grad_reduce"] = ogr->loc;
    }
    j.overlap_param_gather = args_.has("--overlap-param-gather") && dist_opt;
    if (!world_ok_) return;
    const bool sharded_params = j.sharding == Sharding::kFsdp || j.sharding == Sharding::kZero2;
    (sharded_params ? j.layout.dp_shard : j.layout.dp_replicate) = dp_;
    j.where[sharded_params ? "dp_shard" : "dp_replicate"] = j.loc("world");
  }

  void precision(TrainingJob& j) {
    const ShellFlag* bf16 = args_.get("--bf16");
    const ShellFlag* fp16 = args_.get("--fp16");
    if (bf16 && fp16)
      diags_.error(later(bf16->loc, fp16->loc), "--bf16 and --fp16 are mutually exclusive");
    j.param_dtype = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
    j.fp32_master = true;
    // Gradients reduce in bf16 with --grad-reduce-in-bf16; bf16 training otherwise accumulates and
    // reduces them in fp32 (arguments.py L1207-1222); fp16 reduces in fp16 unless
    // --accumulate-allreduce-grads-in-fp32.
    if (const ShellFlag* r = args_.get("--grad-reduce-in-bf16")) {
      j.reduce_dtype = "bf16";
      j.where["reduce_dtype"] = r->loc;
    } else if (fp16 && !args_.has("--accumulate-allreduce-grads-in-fp32")) {
      j.reduce_dtype = "fp16";
      j.where["reduce_dtype"] = fp16->loc;
    } else {
      j.reduce_dtype = "fp32";
    }
    // fp8 through TransformerEngine: --fp8-format e4m3 or hybrid (e4m3 forward, e5m2 gradients)
    // puts every linear layer of the blocks in fp8, the experts' grouped GEMMs included;
    // --fp8-param-gather all-gathers the parameters in fp8 (arguments.py `_add_mixed_precision_args`
    // and `_add_transformer_engine_args` @d98e8a64; docs/facts/cost-formulas.md#fp8-linear-layers).
    if (auto f = choice(args_.get("--fp8-format"), {"e4m3", "hybrid"})) {
      j.fp8_linear = true;
      j.fp8_experts = true;
      j.fp8_recipe = "delayed";
      j.where["fp8"] = args_.get("--fp8-format")->loc;
      if (auto r = choice(args_.get("--fp8-recipe"), {"tensorwise", "delayed", "mxfp8", "blockwise"})) j.fp8_recipe = *r;
      j.fp8_weights_gathered = args_.has("--fp8-param-gather");
    }
    // arguments.py (newer Megatron-LM): "--fp4-format and --fp8-format cannot be used simultaneously".
    if (const ShellFlag* f4 = args_.get("--fp4-format"); f4 && args_.has("--fp8-format"))
      diags_.error(later(f4->loc, args_.get("--fp8-format")->loc),
                   "--fp4-format and --fp8-format cannot be used simultaneously (Megatron-LM refuses the pair)");
    // arguments.py: "--fp8-param-gather only supported with distributed optimizer or torch fsdp2".
    if (const ShellFlag* g = args_.get("--fp8-param-gather");
        g && !args_.has("--use-distributed-optimizer") && !args_.has("--use-torch-fsdp2") && !args_.has("--use-megatron-fsdp"))
      diags_.error(g->loc, "--fp8-param-gather only supported with distributed optimizer or torch fsdp2 (Megatron-LM "
                           "refuses it without --use-distributed-optimizer or --use-torch-fsdp2)");
  }

  /// The store_true flags this reader models take no value: argparse refuses `--bf16 8`
  /// ("unrecognized arguments: 8") and `--bf16=8` ("ignored explicit argument"), where the
  /// value would otherwise be dropped without a word.
  void switches_take_no_value() {
    static const char* const kSwitches[] = {
        "--group-query-attention", "--cross-entropy-loss-fusion", "--no-cross-entropy-loss-fusion",
        "--disable-cross-entropy-loss-fusion", "--sequence-parallel", "--tp-comm-overlap",
        "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather", "--bf16", "--fp16",
        "--swiglu", "--untie-embeddings-and-output-weights", "--recompute-activations", "--use-torch-fsdp2",
        "--use-megatron-fsdp", "--account-for-loss-in-pipeline-split", "--account-for-embedding-in-pipeline-split",
        "--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16", "--torch-fsdp2-no-reshard-after-forward",
        "--no-overlap-p2p-communication", "--fp8-param-gather"};
    for (const char* name : kSwitches)
      for (const ShellFlag* f : args_.all(name))
        if (!f->values.empty())
          diags_.error(f->values[0].loc, fmt::format("{} takes no value: argparse refuses '{}' after it "
                                                     "(\"unrecognized arguments\")", f->name, f->values[0].text));
  }

  /// The value of a flag argparse declares with `choices`: nullopt when the flag is absent, or
  /// (after argparse's own error) when it has no value or one outside `options`.
  std::optional<std::string> choice(const ShellFlag* f, std::initializer_list<const char*> options) {
    if (!f) return std::nullopt;
    if (f->values.empty()) {
      diags_.error(f->loc, fmt::format("argument {}: expected one argument", f->name));
      return std::nullopt;
    }
    one_value(*f);
    const std::string& v = f->values[0].text;
    for (const char* o : options)
      if (v == o) return v;
    std::vector<std::string> quoted;
    for (const char* o : options) quoted.push_back(fmt::format("'{}'", o));
    diags_.error(f->values[0].loc, fmt::format("argument {}: invalid choice: '{}' (choose from {})", f->name, v,
                                               fmt::join(quoted, ", ")));
    return std::nullopt;
  }

  void recompute(TrainingJob& j) {
    if (const ShellFlag* a = args_.get("--recompute-activations")) {
      j.recompute = model::Recompute::kSelective;
      j.where["recompute"] = a->loc;
    }
    if (const ShellFlag* g = args_.get("--recompute-granularity")) {
      if (auto v = choice(g, {"full", "selective"}))
        j.recompute = *v == "full" ? model::Recompute::kFull : model::Recompute::kSelective;
      j.where["recompute"] = g->loc;
    }
    // transformer_config.py L543-555 and arguments.py L1410-1420.
    const ShellFlag* method = args_.get("--recompute-method");
    const ShellFlag* num = args_.get("--recompute-num-layers");
    if (method && j.recompute == model::Recompute::kSelective)
      diags_.error(method->loc, "recompute method is not yet supported for selective recomputing granularity");
    if (num && j.recompute == model::Recompute::kSelective)
      diags_.error(num->loc, "When using recompute_granularity: selective recompute_num_layers must be None.");
    if (j.recompute == model::Recompute::kFull) {
      // Per-layer checkpointing (transformer_block.py _checkpointed_forward): uniform chunks of
      // N blocks, or the first N blocks of each stage.
      const std::string m = method && !method->values.empty() ? method->values[0].text : std::string();
      if (!method) {
        diags_.error(j.loc("recompute"), "Using recompute_granularity: full so recompute_method must be \"block\" or "
                                         "\"uniform\"");
      } else if (m == "uniform" || m == "block") {
        j.recompute_method = m == "block" ? model::RecomputeMethod::kBlock : model::RecomputeMethod::kUniform;
        j.where["recompute_method"] = method->loc;
      } else {
        diags_.error(method->loc, fmt::format("argument --recompute-method: invalid choice: '{}' (choose from "
                                              "'uniform', 'block')",
                                              m));
      }
      if (!num) {
        diags_.error(j.loc("recompute"), "When using recompute_granularity: full recompute_num_layers must be between "
                                         "1 and num_layers_per_pipeline_rank");
      } else if (auto n = integer("--recompute-num-layers", std::nullopt)) {
        j.recompute_layers = static_cast<int32_t>(std::min<int64_t>(*n, 1 << 20));
        j.where["recompute_layers"] = num->loc;
      }
    }
    if (const ShellFlag* d = args_.get("--distribute-saved-activations")) {
      if (j.layout.tp == 1)
        diags_.error(d->loc, "can distribute recomputed activations only across tensor model parallel groups");
      if (j.recompute != model::Recompute::kFull)
        diags_.error(d->loc, "distributed recompute activations is only application to full recompute granularity");
      if (!method)
        diags_.error(d->loc, "for distributed recompute activations to work you need to use a recompute method");
    }
  }

  /// Model dimensions from the flags (model "custom"), or the --model preset.
  void model(TrainingJob& j) {
    const std::vector<std::string> dims = {"--num-layers", "--hidden-size", "--num-attention-heads"};
    std::vector<std::string> missing;
    for (const auto& d : dims)
      if (!args_.has(d)) missing.push_back(d);
    auto layers = integer("--num-layers", std::nullopt);
    num_layers_ = layers.value_or(0);
    if (missing.size() == dims.size()) {
      if (ctx_.model.empty()) {
        diags_.error(start(), fmt::format("the script gives no model dimensions ({}); pass --model with one of: {}",
                                          fmt::join(dims, ", "), fmt::join(model::model_preset_names(), ", ")));
        return;
      }
      auto preset = model::model_preset(ctx_.model);
      if (!preset) {
        diags_.error(start(), fmt::format("unknown model preset '{}'{}; known: {}", ctx_.model,
                                          [&] {
                                            std::string near = closest_match(ctx_.model, model::model_preset_names());
                                            return near.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", near);
                                          }(),
                                          fmt::join(model::model_preset_names(), ", ")));
        return;
      }
      j.model = preset->name;
      num_layers_ = preset->layers;
      seq(j);
      return;
    }
    if (!missing.empty()) {
      auto given = std::find_if(dims.begin(), dims.end(), [&](const std::string& d) { return args_.has(d); });
      diags_.error(loc_of(*given),
                   fmt::format("the script gives some model dimensions but not {}", fmt::join(missing, ", ")));
      return;
    }
    if (!ctx_.model.empty())
      diags_.note(loc_of("--num-layers"), fmt::format("the script's model dimensions are used, not --model {}", ctx_.model));
    model::ModelDesc m;
    m.name = "custom";
    m.source = path_;
    auto hidden = integer("--hidden-size", std::nullopt);
    auto heads = integer("--num-attention-heads", std::nullopt);
    if (!layers || !hidden || !heads) return;
    m.layers = *layers;
    m.dim = *hidden;
    m.heads = *heads;
    const bool swiglu = args_.has("--swiglu");
    // Megatron's default FFN size: 4h, or int(4h·2/3 / 64)·64 with SwiGLU (arguments.py).
    const int64_t ffn_default = swiglu ? (4 * m.dim * 2 / 3) / 64 * 64 : 4 * m.dim;
    m.ffn = integer("--ffn-hidden-size", ffn_default).value_or(ffn_default);
    m.gated_mlp = swiglu;  // GeLU MLP (two matrices) unless --swiglu (megatron/core/transformer/mlp.py)
    const bool gqa = args_.has("--group-query-attention");
    // --num-query-groups defaults to 1 (arguments.py @d98e8a64): --group-query-attention alone is
    // multi-query attention.
    auto groups = integer("--num-query-groups", 1);
    m.kv_heads = gqa && groups ? *groups : m.heads;
    // Each query group serves heads/groups query heads (megatron/core/transformer/attention.py
    // @d98e8a64 divides one by the other; TransformerEngine's attention asserts it).
    if (gqa && groups && *groups > 0 && m.heads % *groups != 0)
      diags_.error(loc_of("--num-query-groups"), fmt::format("num_attention_heads ({}) must be a multiple of "
                                                             "num_query_groups ({})", m.heads, *groups));
    // transformer_config.py @d98e8a64 __post_init__: fewer groups than TP ranks are replicated.
    if (m.kv_heads > 0 && m.kv_heads % j.layout.tp != 0 && j.layout.tp % m.kv_heads != 0)
      diags_.error(loc_of(gqa && groups ? "--num-query-groups" : "--num-attention-heads"),
                   fmt::format("num_query_groups ({}) must be a multiple or divisor of tensor_model_parallel_size ({}).",
                               m.kv_heads, j.layout.tp));
    if (m.heads > 0 && m.dim % m.heads != 0 && !args_.has("--kv-channels"))
      diags_.error(loc_of("--num-attention-heads"), "hidden_size must be divisible by num_attention_heads if "
                                                    "kv_channels is None");
    m.head_dim = integer("--kv-channels", m.dim / std::max<int64_t>(m.heads, 1)).value_or(m.dim / m.heads);
    m.vocab = integer("--vocab-size", 0).value_or(0);  // given: at least 1, as every dimension
    if (m.vocab == 0 && !args_.has("--vocab-size"))
      diags_.warning(loc_of("--num-layers"), "--vocab-size is not given (the tokenizer sets it): the embedding and "
                                             "output layers are not counted");
    m.tied_embeddings = !args_.has("--untie-embeddings-and-output-weights");
    if (args_.has("--num-experts")) {
      model::Moe moe;
      moe.experts = integer("--num-experts", 0).value_or(0);
      moe.top_k = integer("--moe-router-topk", 2).value_or(2);
      moe.ffn = integer("--moe-ffn-hidden-size", m.ffn).value_or(m.ffn);
      moe.shared = 0;
      moe.dense_first = 0;
      moe.every = 1;
      m.moe = moe;
      num_experts_ = moe.experts;
    }
    j.model = "custom";
    j.model_desc = m;
    j.where["model"] = loc_of("--num-layers");
    seq(j);
  }

  /// EP needs experts (arguments.py L1655-1658).
  void experts(TrainingJob& j) {
    if (j.layout.ep > 1) {
      if (num_experts_ == 0)
        diags_.error(j.loc("ep"), "num_experts must be non None to use expert model parallelism");
      else if (num_experts_ % j.layout.ep != 0)
        diags_.error(j.loc("ep"), "Number of experts should be a multiple of expert model parallel_size");
    }
  }

  void seq(TrainingJob& j) {
    auto s = integer("--seq-length", std::nullopt);
    if (!s) {
      if (!args_.has("--seq-length") && !misspelt("--seq-length"))
        diags_.error(start(), "--seq-length is not given (the sequence length, tokens)");
      return;
    }
    j.seq_len = *s;
    j.where["seq_len"] = loc_of("--seq-length");
    // validate_args (megatron/training/arguments.py @f2e5db4): "assert args.max_position_embeddings
    // >= args.seq_length", at start-up.
    if (auto max_pos = integer("--max-position-embeddings", std::nullopt); max_pos && *max_pos < *s)
      diags_.error(loc_of("--max-position-embeddings"),
                   fmt::format("--max-position-embeddings {} is below --seq-length {}: Megatron-LM asserts "
                               "max_position_embeddings >= seq_length at start-up",
                               *max_pos, *s));
    const int32_t cp = j.layout.cp;
    if (cp > 1 && *s % (2 * cp) != 0)
      diags_.error(loc_of("--seq-length"),
                   "seq-length should be a multiple of 2 * context-parallel-size if context-parallel-size > 1");
    if (j.layout.ep > 1 && num_experts_ == 0 && j.model != "custom") {
      auto preset = model::model_preset(j.model);
      if (preset && preset->moe) num_experts_ = preset->moe->experts;
    }
  }

  /// Microbatches per step (num_microbatches_calculator.py).
  void batch(TrainingJob& j) {
    const ShellFlag* mbs_flag = args_.get("--micro-batch-size");
    if (!mbs_flag) {
      if (!misspelt("--micro-batch-size"))
        diags_.error(start(), "--micro-batch-size is not given: Megatron-LM requires it (sequences per microbatch per "
                              "model replica)");
      j.microbatches = 0;
      return;
    }
    auto mbs = integer("--micro-batch-size", std::nullopt);
    auto gbs = integer("--global-batch-size", mbs ? std::optional<int64_t>(*mbs * dp_) : std::nullopt);
    if (!mbs || !gbs) {
      j.microbatches = 0;
      return;
    }
    j.microbatch_sequences = *mbs;
    j.where["microbatch_sequences"] = mbs_flag->loc;
    j.global_batch_sequences = *gbs;
    const SourceLoc gloc = args_.has("--global-batch-size") ? loc_of("--global-batch-size") : mbs_flag->loc;
    j.where["global_batch"] = gloc;
    if (*gbs % (*mbs * dp_) != 0) {
      diags_.error(gloc, fmt::format("global batch size ({}) is not divisible by micro batch size ({}) times data "
                                     "parallel size ({})",
                                     *gbs, *mbs, dp_));
      j.microbatches = 0;
      return;
    }
    const int64_t m = *gbs / (*mbs * dp_);
    if (m > (int64_t{1} << 24)) {
      diags_.error(gloc, fmt::format("{} microbatches per step is too many", m));
      j.microbatches = 0;
      return;
    }
    j.microbatches = static_cast<int32_t>(m);
    j.grad_accum = 1;
    j.where["microbatches"] = gloc;
  }

  /// At most one flag gives the virtual stages (arguments.py L929-939); reports the second at
  /// the later flag once and returns false otherwise.
  bool one_vpp_flag() {
    const char* kVppFlags[] = {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                               "--pipeline-model-parallel-layout"};
    std::vector<const ShellFlag*> given;
    for (const char* f : kVppFlags)
      if (const ShellFlag* g = args_.get(f)) given.push_back(g);
    if (given.size() <= 1) return true;
    if (!vpp_reported_)
      diags_.error(later(given[0]->loc, given[1]->loc),
                   "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank and "
                   "--pipeline-model-parallel-layout are mutually exclusive");
    vpp_reported_ = true;
    return false;
  }

  /// Megatron's layer split where a flag departs from the even one: the layout, the uneven
  /// first and last stages, or the embedding and loss counted as layers
  /// (megatron_stage_layers, docs/facts/config-keys.md#megatron-layer-split). Sets the job's
  /// stage_layers (with pp > 1) and `*vpp` (a layout's virtual stages); false after an error at
  /// the flag Megatron's refusal is about.
  bool layer_split(TrainingJob& j, int64_t* vpp) {
    if (num_layers_ <= 0) return true;  // no model: an error reported already
    MegatronSplitFlags f;
    f.num_layers = num_layers_;
    f.pp = j.layout.pp;
    f.vpp = *vpp;
    f.vpp_from_layers_per_stage = args_.has("--num-layers-per-virtual-pipeline-stage");
    if (const ShellFlag* l = args_.get("--pipeline-model-parallel-layout")) {
      if (l->values.empty()) {
        diags_.error(l->loc, "argument --pipeline-model-parallel-layout: expected one argument");
        return false;
      }
      one_value(*l);
      f.layout = l->values[0].text;
      auto mtp = integer("--mtp-num-layers", 0, 0);
      if (!mtp) return false;
      f.mtp_layers = *mtp;
    }
    // argparse takes any int here; Megatron's own checks refuse what is not positive.
    constexpr int64_t kAnyInt = -kMaxValue;
    const std::optional<int64_t> none;
    if (args_.has("--decoder-first-pipeline-num-layers")) {
      f.first = integer("--decoder-first-pipeline-num-layers", none, kAnyInt);
      if (!f.first) return false;
    }
    if (args_.has("--decoder-last-pipeline-num-layers")) {
      f.last = integer("--decoder-last-pipeline-num-layers", none, kAnyInt);
      if (!f.last) return false;
    }
    f.embedding = args_.has("--account-for-embedding-in-pipeline-split");
    f.loss = args_.has("--account-for-loss-in-pipeline-split");
    const MegatronSplit split = megatron_stage_layers(f);
    static const std::map<MegatronSplitFlag, const char*> kFlag = {
        {MegatronSplitFlag::kLayout, "--pipeline-model-parallel-layout"},
        {MegatronSplitFlag::kFirst, "--decoder-first-pipeline-num-layers"},
        {MegatronSplitFlag::kLast, "--decoder-last-pipeline-num-layers"},
        {MegatronSplitFlag::kEmbedding, "--account-for-embedding-in-pipeline-split"},
        {MegatronSplitFlag::kLoss, "--account-for-loss-in-pipeline-split"}};
    if (!split.error.empty()) {
      diags_.error(loc_of(kFlag.at(split.at)), split.error);
      return false;
    }
    *vpp = split.vpp;
    if (j.layout.pp > 1) {
      j.stage_layers = split.stage_layers;
      const char* set_by = args_.has("--pipeline-model-parallel-layout")      ? "--pipeline-model-parallel-layout"
                           : args_.has("--decoder-first-pipeline-num-layers") ? "--decoder-first-pipeline-num-layers"
                           : args_.has("--decoder-last-pipeline-num-layers")  ? "--decoder-last-pipeline-num-layers"
                           : f.embedding ? "--account-for-embedding-in-pipeline-split"
                                         : "--account-for-loss-in-pipeline-split";
      j.where["stage_layers"] = loc_of(set_by);
    }
    return true;
  }

  /// Schedule, virtual stages and the pipeline checks of arguments.py L929-1014 and
  /// schedules.py L1160-1180.
  void pipeline(TrainingJob& j) {
    const int32_t pp = j.layout.pp;
    if (!one_vpp_flag()) return;
    const bool uneven = args_.has("--decoder-first-pipeline-num-layers") ||
                        args_.has("--decoder-last-pipeline-num-layers");
    const int64_t extra = (args_.has("--account-for-embedding-in-pipeline-split") ? 1 : 0) +
                          (args_.has("--account-for-loss-in-pipeline-split") ? 1 : 0);
    const int64_t layers = num_layers_ + extra;
    int64_t vpp = 1;
    SourceLoc vloc = start();
    if (const ShellFlag* f = args_.get("--num-layers-per-virtual-pipeline-stage")) {
      auto per = integer(f->name, std::nullopt);
      if (!per) return;
      vloc = f->loc;
      if (num_layers_ > 0) {
        if ((layers / pp) % *per != 0) {
          diags_.error(f->loc, "number of layers per pipeline stage must be divisible number of layers per virtual "
                               "pipeline stage");
          return;
        }
        vpp = layers / pp / *per;
      }
    } else if (const ShellFlag* g = args_.get("--num-virtual-stages-per-pipeline-rank")) {
      auto v = integer(g->name, std::nullopt);
      if (!v) return;
      vpp = *v;
      vloc = g->loc;
    } else if (const ShellFlag* l = args_.get("--pipeline-model-parallel-layout")) {
      vloc = l->loc;  // its stages give the virtual stages (layer_split)
    } else if (!uneven && num_layers_ > 0 && layers % pp != 0) {
      diags_.error(loc_of("--num-layers"), "number of layers should be divisible by the pipeline parallel size");
      return;
    }
    if ((uneven || extra > 0 || args_.has("--pipeline-model-parallel-layout")) && !layer_split(j, &vpp)) return;
    if (vpp > 1) {
      const bool overlap_p2p = !args_.has("--no-overlap-p2p-communication");
      if (overlap_p2p ? pp <= 1 : pp <= 2) {
        diags_.error(vloc, fmt::format("pipeline-model-parallel size should be greater than {} with interleaved "
                                       "schedule",
                                       overlap_p2p ? 1 : 2));
        return;
      }
      if (vpp > 1024) {
        diags_.error(vloc, fmt::format("{} virtual stages per pipeline rank is too many", vpp));
        return;
      }
      const int64_t m = j.microbatches;
      auto group = integer("--microbatch-group-size-per-vp-stage", pp);
      if (!group) return;
      const SourceLoc gloc = args_.has("--microbatch-group-size-per-vp-stage")
                                 ? loc_of("--microbatch-group-size-per-vp-stage")
                                 : j.loc("microbatches");
      if (*group < pp || *group > m) {
        diags_.error(gloc, fmt::format("The number of contiguous micro-batches in a virtual pipeline stage should "
                                       "range in [PP, num_microbatches] = [{}, {}], got {}",
                                       pp, m, *group));
        return;
      }
      if (m % *group != 0 && m % *group < pp) {
        diags_.error(gloc, fmt::format("The remainder of M (the total micro-batches) divided by N (number of "
                                       "contiguous micro-batches in a virtual pipeline stage) should be 0, or larger "
                                       "than or equal to the pipeline-parallel size, but it is {}. Otherwise, it "
                                       "introduces dependency bubbles in the pipeline and reduces throughput",
                                       m % *group));
        return;
      }
      j.schedule = "interleaved-1f1b";
      j.stages_per_rank = static_cast<int32_t>(vpp);
      j.where["schedule"] = vloc;
    } else if (pp > 1) {
      j.schedule = "1f1b";
      j.stages_per_rank = 1;
      j.where["schedule"] = j.loc("pp");
    } else if (j.where.count("pp")) {
      // No pipeline: the generated steps point at the flag that chose none, not at line 1.
      j.where["schedule"] = j.loc("pp");
    }
  }

  std::string path_;
  int32_t file_;
  Args args_;
  std::map<std::string, ShellVar> vars_;
  std::vector<int32_t> if_lines_;
  std::vector<int32_t> list_lines_;
  const JobContext& ctx_;
  Diagnostics& diags_;
  int32_t etp_ = 1;
  int32_t dp_ = 1;
  bool world_ok_ = false;
  bool vpp_reported_ = false;
  int64_t num_layers_ = 0;
  int64_t num_experts_ = 0;
};

}  // namespace

bool is_megatron_config(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".sh" && ext != ".args" && ext != ".txt" && ext != ".bash") return false;
  std::string text, why;
  if (!read_input_file(path, &text, &why)) return false;
  return std::any_of(kMegatronMarkers.begin(), kMegatronMarkers.end(),
                     [&](const std::string& m) { return text.find(m) != std::string::npos; });
}

// What read_megatron fills, from the last occurrence of each flag (argparse keeps the last):
// - world: torchrun --nproc_per_node × --nnodes, else the script's WORLD_SIZE or GPUS_PER_NODE ×
//   NUM_NODES (NNODES), else ctx.gpus (a warning when --gpus differs from the script's figure);
// - layout: tp, pp, cp, ep from their flags (default 1); dp = world / (tp·pp·cp) goes to
//   dp_replicate for DDP and the distributed optimizer (kZero1), to dp_shard for Megatron-FSDP
//   (by --data-parallel-sharding-strategy; optim_grads = kZero2 also shards) and torch FSDP2;
//   sequence_parallel is --sequence-parallel, off (with Megatron's warning) at tp == 1;
// - batch: microbatch_sequences = --micro-batch-size, global_batch_sequences =
//   --global-batch-size (default mbs·dp), microbatches = global / (mbs·dp), grad_accum 1;
// - schedule: "1f1b" for pp > 1, "interleaved-1f1b" with stages_per_rank = VPP when one of
//   --num-layers-per-virtual-pipeline-stage / --num-virtual-stages-per-pipeline-rank gives VPP > 1;
// - recompute (--recompute-granularity, --recompute-activations), param_dtype (--bf16/--fp16),
//   reduce_dtype (bf16 with --grad-reduce-in-bf16; fp16 for --fp16 without
//   --accumulate-allreduce-grads-in-fp32; else fp32), seq_len (--seq-length, tokens);
// - model: "custom" with model_desc from --num-layers, --hidden-size, --num-attention-heads,
//   --ffn-hidden-size (default 4h, or Megatron's SwiGLU rule), --num-query-groups (with
//   --group-query-attention), --kv-channels, --vocab-size, --num-experts, --moe-router-topk,
//   --moe-ffn-hidden-size, --untie-embeddings-and-output-weights; or the ctx.model preset when
//   the script gives no dimensions.
// Errors, each at the flag that set the value (the file start for what is absent): argparse's
// "expected one argument" / "invalid int value", Megatron's startup assertions (docs/facts/config-keys.md#megatron-derived-sizes, #megatron-startup-checks)
// in its words, a missing --micro-batch-size, --seq-length, world size or model.
namespace {

bool read_megatron_args(const std::string& path, const JobContext& ctx, TrainingJob* job, Diagnostics& diags) {
  std::string text, why;
  if (!read_input_file(path, &text, &why)) {
    const int32_t file = register_source(path, "");
    diags.error(SourceLoc{file, 1, 1}, fmt::format("cannot read the Megatron-LM arguments: {}", why));
    return false;
  }
  if (text.find('\0') != std::string::npos) {
    const int32_t file = register_source(path, "");
    diags.error(SourceLoc{file, 1, 1}, "the Megatron-LM arguments are not text: they hold a NUL byte");
    return false;
  }
  const int32_t file = register_source(path, text);
  ShellArgs sh = read_shell_args(file, text, ctx.env);
  if (!sh.limit_error.empty()) {
    diags.error(sh.limit_loc, sh.limit_error);
    return false;
  }
  // A launcher sets these (SLURM_NNODES, MASTER_ADDR, ...); here they are unset unless --env
  // gives them, so say which defaults decided the job.
  for (const auto& d : sh.defaults_used)
    diags.note(d.loc, d.set_empty ? fmt::format("{} is set but empty, so its default '{}' was used (as bash's "
                                                "${{{}:-...}} does)", d.name, d.value, d.name)
                                  : fmt::format("{} is not set, so its default '{}' was used; --env {}=VALUE sets it as "
                                                "the launch environment would", d.name, d.value, d.name));
  return MegatronReader(path, file, std::move(sh), ctx, diags).run(job);
}

}  // namespace

bool read_megatron(const std::string& path, const JobContext& cli, TrainingJob* job, Diagnostics& diags) {
  // The facts a '# schedcheck:' comment states (config/file_facts.h), merged with the command line's.
  return read_with_file_facts(path, cli, false, job, diags,
                              [&](const JobContext& ctx) { return read_megatron_args(path, ctx, job, diags); });
}

}  // namespace sc::config
