#include "fsdp/lower_fsdp.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "fsdp/lower_fsdp_builder.h"

namespace sc {

const char* fsdp_op_kind_name(FsdpOpKind k) {
  switch (k) {
    case FsdpOpKind::kCopyIn: return "copy-in";
    case FsdpOpKind::kAllGather: return "all-gather";
    case FsdpOpKind::kWait: return "wait";
    case FsdpOpKind::kForward: return "forward";
    case FsdpOpKind::kBackward: return "backward";
    case FsdpOpKind::kReshard: return "reshard";
    case FsdpOpKind::kRsCopyIn: return "rs-copy-in";
    case FsdpOpKind::kReduceScatter: return "reduce-scatter";
    case FsdpOpKind::kAllReduce: return "all-reduce";
    case FsdpOpKind::kWaitReduce: return "wait-reduce";
    case FsdpOpKind::kOptimizer: return "optimizer";
  }
  return "?";
}

double collective_time_s(const FsdpSpec& spec, CollectiveKind kind, int64_t bytes, int group_size) {
  if (group_size <= 1) return 0;
  const double n = group_size;
  const double a = spec.latency_s;
  const double w = spec.bandwidth_bytes_per_s;
  const double transfer = w > 0 ? (n - 1) / n * static_cast<double>(bytes) / w : 0.0;
  const bool all_reduce = kind == CollectiveKind::kAllReduce;
  if (spec.collective_model == CollectiveModel::kAlphaBeta) return a + (all_reduce ? 2 * transfer : transfer);
  const double one = (n - 1) * a + transfer;
  return all_reduce ? 2 * one : one;
}

int post_forward_group(const FsdpSpec& spec) {
  const int k = spec.reshard_after_forward;
  if (k < 0) return 0;
  if (k == 0 || k == 1) return 1;
  return spec.shard_size > 0 && k >= spec.shard_size ? 0 : k;
}

namespace fsdp_lower {

/// A static string for a dtype name (Op::dtype must outlive the Program); "other" when the
/// name is not a known dtype.
const char* static_dtype_name(const std::string& name) {
  static const char* const kNames[] = {"bf16",     "fp16",    "fp32",    "fp64",          "fp8",
                                       "bfloat16", "float16", "float32", "float64",       "e4m3",
                                       "e5m2",     "int8",    "uint8",   "float8_e4m3fn", "float8_e5m2"};
  for (const char* n : kNames)
    if (name == n) return n;
  return "other";
}

/// A static string for a stream name (Stream::name must outlive the Program): the default
/// names as literals, others copied once into a process-lifetime table.
const char* static_stream_name(const std::string& name) {
  static const char* const kNames[] = {"compute", "ag_copy_in", "all_gather", "reduce_scatter", "all_reduce"};
  for (const char* n : kNames)
    if (name == n) return n;
  static std::mutex mu;
  static std::set<std::string> table;
  std::lock_guard<std::mutex> lock(mu);
  return table.insert(name).first->c_str();
}

/// Ranks per shard group: shard_size, or ranks / replicate_size when unset.
int shard_size_of(const FsdpSpec& spec) {
  if (spec.shard_size > 0) return spec.shard_size;
  return std::max(1, spec.ranks / std::max(1, spec.replicate_size));
}

/// Parameters of unit `u` (params_bytes / param dtype bytes).
int64_t unit_params(const FsdpSpec& spec, int32_t u) {
  return spec.units[u].params_bytes / std::max(1, spec.param_dtype.bytes);
}

/// Per-rank bytes of unit `u`'s unsharded gradient in the reduce dtype (reduce-scatter input).
int64_t reduce_bytes(const FsdpSpec& spec, int32_t u) {
  return spec.units[u].params_bytes * spec.reduce_dtype.bytes / std::max(1, spec.param_dtype.bytes);
}

/// Index of the unit named `name`, or -1.
int32_t unit_index(const FsdpSpec& spec, const std::string& name) {
  for (int32_t u = 0; u < static_cast<int32_t>(spec.units.size()); ++u)
    if (spec.units[u].name == name) return u;
  return -1;
}

}  // namespace fsdp_lower

namespace {

using namespace fsdp_lower;

/// The parameter shard of a rank: sum of params_bytes / N.
int64_t static_param_bytes(const FsdpSpec& spec) {
  int64_t sum = 0;
  for (const FsdpUnit& u : spec.units) sum += u.params_bytes;
  return sum / shard_size_of(spec);
}

/// Optimizer state per rank: sum of P/p/N parameters times the state bytes per parameter.
int64_t optimizer_state_bytes(const FsdpSpec& spec) {
  double params = 0;
  for (int32_t u = 0; u < static_cast<int32_t>(spec.units.size()); ++u)
    params += static_cast<double>(unit_params(spec, u));
  return std::llround(params / shard_size_of(spec) * spec.optimizer_state_bytes_per_param);
}

/// Creates "shard g" and (with replicate_size > 1) "replicate j" communicators and records
/// each rank's in `out`; for a quotient, rank 0's two, with the job's group sizes.
void add_communicators(const FsdpSpec& spec, FsdpProgram& out, bool quotient) {
  const int n = shard_size_of(spec);
  if (quotient) {
    // One built rank stands for every rank: it is the one built member of its shard group and
    // of its replicate group, each of the job's size.
    out.shard_comm.assign(1, out.program.add_communicator("shard 0", {0}));
    out.program.comms[out.shard_comm[0]].size = std::min(n, spec.ranks);
    out.replicate_comm.assign(1, -1);
    if (spec.replicate_size > 1) {
      out.replicate_comm[0] = out.program.add_communicator("replicate 0", {0});
      out.program.comms[out.replicate_comm[0]].size = (spec.ranks + n - 1) / n;
    }
    return;
  }
  out.shard_comm.assign(spec.ranks, -1);
  out.replicate_comm.assign(spec.ranks, -1);
  for (int g = 0; g * n < spec.ranks; ++g) {
    std::vector<int32_t> members;
    for (int r = g * n; r < std::min((g + 1) * n, spec.ranks); ++r) members.push_back(r);
    int32_t c = out.program.add_communicator(fmt::format("shard {}", g), members);
    for (int32_t r : members) out.shard_comm[r] = c;
  }
  if (spec.replicate_size <= 1) return;
  for (int j = 0; j < n && j < spec.ranks; ++j) {
    std::vector<int32_t> members;
    for (int r = j; r < spec.ranks; r += n) members.push_back(r);
    int32_t c = out.program.add_communicator(fmt::format("replicate {}", j), members);
    for (int32_t r : members) out.replicate_comm[r] = c;
  }
}

/// One entry of a rank's forward order: a unit and which of its runs (0, or 1 for a repeat).
struct Slot {
  int32_t unit = 0;
  int32_t run = 0;
};

/// The rank's override, or null.
const FsdpRankOverride* override_of(const FsdpSpec& spec, int rank) {
  auto it = spec.overrides.find(rank);
  return it == spec.overrides.end() ? nullptr : &it->second;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// The rank's forward order: skipped units left out, repeated units twice in a row.
std::vector<Slot> rank_slots(const FsdpSpec& spec, int rank) {
  const FsdpRankOverride* o = override_of(spec, rank);
  std::vector<Slot> slots;
  for (int32_t u = 0; u < static_cast<int32_t>(spec.units.size()); ++u) {
    const std::string& name = spec.units[u].name;
    if (o && contains(o->skip_units, name)) continue;
    slots.push_back(Slot{u, 0});
    if (o && contains(o->repeat_units, name)) slots.push_back(Slot{u, 1});
  }
  return slots;
}

/// The rank's microbatches per step (its override, else the spec's).
int rank_microbatches(const FsdpSpec& spec, int rank) {
  const FsdpRankOverride* o = override_of(spec, rank);
  return o && o->microbatches ? *o->microbatches : spec.microbatches;
}

/// Generates one rank's ops in CPU issue order under the spec's gather/free policy.
class RankGen {
 public:
  RankGen(Builder& b, int32_t rank, int32_t shard_comm, int32_t replicate_comm)
      : b_(b), spec_(b.spec()), rank_(rank), shard_comm_(shard_comm), replicate_comm_(replicate_comm),
        slots_(rank_slots(spec_, rank)), microbatches_(rank_microbatches(spec_, rank)) {
    Program& p = b_.program();
    compute_ = p.add_stream(rank, "compute");
    if (fsdp2()) copy_in_ = p.add_stream(rank, "ag_copy_in");
    // DeepSpeed overlap_comm: false issues its collectives on the compute (default) stream.
    const bool own = !zero3() || spec_.overlap_comm;
    all_gather_ = own ? p.add_stream(rank, "all_gather") : compute_;
    reduce_scatter_ = own ? p.add_stream(rank, "reduce_scatter") : compute_;
    if (replicate_comm_ >= 0) all_reduce_ = own ? p.add_stream(rank, "all_reduce") : compute_;
    gather_.resize(slots_.size());
    act_.assign(slots_.size(), -1);
    grad_.assign(slots_.size(), -1);
    backward_op_.assign(slots_.size(), kNoOp);
    forward_op_.assign(slots_.size(), kNoOp);
    post_forward_.assign(slots_.size(), -1);
  }

  /// Every step: each microbatch's forward and backward, then the optimizer step.
  void run() {
    for (it_ = 0; it_ < spec_.iterations; ++it_) {
      grad_shard_.assign(spec_.units.size(), -1);
      last_rs_ = last_ar_ = kNoOp;
      for (mb_ = 0; mb_ < microbatches_; ++mb_) {
        backward_ = false;
        for (int32_t s = 0; s < num_slots(); ++s) forward_slot(s);
        backward_ = true;
        for (int32_t s = num_slots() - 1; s >= 0; --s) backward_slot(s);
      }
      finish_step();
    }
  }

 private:
  /// One gather of a slot, as the CPU sees it: its param buffer (-1 when not gathered), its
  /// all-gather and the compute stream's wait for it (kNoOp until issued).
  struct Gather {
    int32_t param = -1;
    OpId all_gather = kNoOp;
    OpId wait = kNoOp;
  };
  /// A live FSDP2 gather buffer; `wait` is its unit's wait marker once issued.
  struct AgBuffer {
    int32_t buffer = -1;
    int32_t slot = -1;
    OpId wait = kNoOp;
  };

  bool fsdp2() const { return spec_.implementation == FsdpImplementation::kFsdp2; }
  bool fsdp1() const { return spec_.implementation == FsdpImplementation::kFsdp1; }
  bool zero3() const { return spec_.implementation == FsdpImplementation::kZero3; }
  int32_t num_slots() const { return static_cast<int32_t>(slots_.size()); }
  bool gathered(int32_t s) const { return gather_[s].param >= 0; }
  const FsdpUnit& unit(int32_t s) const { return spec_.units[slots_[s].unit]; }

  // ---- labels -------------------------------------------------------------------------------

  /// "layer.7", or "layer.7#2" for the second run of a repeated unit.
  std::string unit_name(int32_t s) const {
    return slots_[s].run == 0 ? unit(s).name : fmt::format("{}#{}", unit(s).name, slots_[s].run + 1);
  }
  /// The step and microbatch: "it1 mb0".
  std::string mb_tag() const { return fmt::format("it{} mb{}", it_, mb_); }
  /// The step (and microbatch when there are several) and phase: "it1 fwd", "it1 mb2 bwd".
  std::string phase_tag() const {
    const char* phase = backward_ ? "bwd" : "fwd";
    return microbatches_ > 1 ? fmt::format("it{} mb{} {}", it_, mb_, phase) : fmt::format("it{} {}", it_, phase);
  }
  FsdpOpInfo info(FsdpOpKind kind, int32_t s) const {
    return FsdpOpInfo{kind, s >= 0 ? slots_[s].unit : -1, static_cast<int16_t>(it_), static_cast<int16_t>(mb_),
                      backward_};
  }
  /// Adds an op and tracks the compute stream's last op.
  OpId add(const Op& op, FsdpOpKind kind, int32_t s, std::string label) {
    OpId id = b_.add(op, info(kind, s), std::move(label));
    if (op.stream == compute_) last_compute_ = id;
    return id;
  }

  // ---- per-unit phases ----------------------------------------------------------------------

  void forward_slot(int32_t s) {
    if (zero3()) {
      hook(s, +1);
    } else if (!gathered(s)) {
      unshard(s);
    }
    wait(s);
    if (fsdp2()) prefetch_fsdp2(s);
    if (fsdp1() && spec_.forward_prefetch_fsdp1) prefetch_one(s + 1);
    forward_compute(s);
    const int k = post_forward_group(spec_);
    if (k == 0) {
      reshard(s);
    } else if (k > 1) {
      reshard_to_post_forward(s, k);
    }  // k == 1: kept gathered until the backward
  }

  void backward_slot(int32_t s) {
    if (zero3()) {
      hook(s, -1);
    } else if (!gathered(s)) {
      unshard(s);
    }
    wait(s);
    if (fsdp2()) prefetch_fsdp2(s);
    if (fsdp1() && spec_.backward_prefetch_fsdp1 == BackwardPrefetch::kPre) prefetch_one(s - 1);
    backward_compute(s);
    reshard(s);
    if (fsdp1() && spec_.backward_prefetch_fsdp1 == BackwardPrefetch::kPost) {
      // BACKWARD_POST prefetches from the post-backward hook, once the current unit's gradient
      // exists (docs/facts/fsdp-zero.md): the all-gather waits for the backward's end.
      hook_dep_ = backward_op_[s];
      prefetch_one(s - 1);
      hook_dep_ = kNoOp;
    }
    reduce(s);
  }

  /// ZeRO-3 pre-forward / pre-backward hook: gather `s` if needed, then prefetch the following
  /// slots in direction `dir` while the bucket and live-parameter bounds allow; every gather of
  /// the hook waits for the compute op issued before it.
  void hook(int32_t s, int dir) {
    hook_dep_ = last_compute_;
    if (!gathered(s)) unshard(s);
    int64_t bucket = 0;
    for (int32_t t = s + dir; t >= 0 && t < num_slots(); t += dir) {
      if (gathered(t)) continue;
      const int64_t n = unit_params(spec_, slots_[t].unit);
      // DeepSpeed's loop: keep prefetching while fewer than prefetch_bucket_size elements are in
      // flight (checked before adding), and while max_live_parameters allows the next one.
      if (bucket >= spec_.prefetch_bucket_size || live_params_ + n > spec_.max_live_parameters) break;
      bucket += n;
      unshard(t);
    }
    hook_dep_ = kNoOp;
  }

  /// Gathers slot `t` if it exists and is not gathered (FSDP1 prefetch).
  void prefetch_one(int32_t t) {
    if (t >= 0 && t < num_slots() && !gathered(t)) unshard(t);
  }

  /// FSDP2 prefetch from slot `s`: the explicit list for its unit, else the next depth slots in
  /// the phase's order.
  void prefetch_fsdp2(int32_t s) {
    const int dir = backward_ ? -1 : 1;
    const auto& lists = backward_ ? spec_.backward_prefetch : spec_.forward_prefetch;
    auto it = lists.find(unit(s).name);
    if (it != lists.end()) {
      for (const std::string& name : it->second) prefetch_one(next_slot_of(s, dir, unit_index(spec_, name)));
      return;
    }
    const int depth = backward_ ? spec_.backward_prefetch_depth : spec_.forward_prefetch_depth;
    for (int k = 1; k <= depth; ++k) prefetch_one(s + k * dir);
  }

  /// The first slot after `s` in direction `dir` that runs unit `u`, or -1.
  int32_t next_slot_of(int32_t s, int dir, int32_t u) const {
    for (int32_t t = s + dir; t >= 0 && t < num_slots(); t += dir)
      if (slots_[t].unit == u) return t;
    return -1;
  }

  // ---- gathers and frees --------------------------------------------------------------------

  /// Issues slot `s`'s all-gather (FSDP2: after its copy-in) and records its param buffer.
  void unshard(int32_t s) {
    const int32_t u = slots_[s].unit;
    const FsdpUnit& un = unit(s);
    OpId copy_in = kNoOp;
    int32_t ag_buffer = -1;
    if (fsdp2()) {
      // foreach_all_gather allocates the output on the all-gather copy-in stream
      // (torch/distributed/_composable/fsdp/_fsdp_collectives.py).
      ag_buffer = b_.buffer(rank_, "ag-buffer", un.gather_bytes(), u, -1,
                            fmt::format("ag-buffer {} {}", unit_name(s), phase_tag()), kPoolAllGatherCopyIn);
      copy_in = add(Builder::marker(rank_, copy_in_, un.loc), FsdpOpKind::kCopyIn, s,
                    fmt::format("copy-in {} ({})", unit_name(s), phase_tag()));
      // The copy-in reads the parameter shards the previous optimizer step wrote (FSDP2's root
      // pre-forward makes the all-gather streams wait for the current stream).
      b_.dep(optimizer_);
      free_waited_ag_buffers();
      b_.alloc(ag_buffer, false);
      ag_buffers_.push_back(AgBuffer{ag_buffer, s, kNoOp});
    }
    const int32_t param =
        b_.buffer(rank_, "param", un.gather_bytes(), u, -1, fmt::format("param {} {}", unit_name(s), phase_tag()));
    Op op = b_.collective(rank_, all_gather_, shard_comm_, CollectiveKind::kAllGather, un.gather_bytes(),
                          spec_.param_dtype, un.loc);
    // From a post-forward shard the all-gather runs over the k ranks of the post-forward group:
    // timed as a ring of k (on the spec's one link bandwidth).
    const int32_t from_post_forward = post_forward_[s];
    if (from_post_forward >= 0)
      op.duration_s = collective_time_s(spec_, CollectiveKind::kAllGather, un.gather_bytes(), post_forward_group(spec_));
    OpId ag = add(op, FsdpOpKind::kAllGather, s, fmt::format("AG {} ({})", unit_name(s), phase_tag()));
    b_.dep(copy_in);
    if (!fsdp2()) b_.dep(optimizer_);  // reads the shards the previous optimizer step wrote
    b_.dep(limiter_dep());
    b_.dep(hook_dep_);
    b_.alloc(param, fsdp2());  // FSDP2: copy-out at the all-gather's end; others: at its start
    if (from_post_forward >= 0) {
      b_.free(from_post_forward, true);
      post_forward_[s] = -1;
    }
    gather_[s] = Gather{param, ag, kNoOp};
    live_params_ += unit_params(spec_, u);
  }

  /// FSDP2 copy-in (the op added last): frees every earlier gather buffer whose unit's wait is
  /// issued, after that wait.
  void free_waited_ag_buffers() {
    auto keep = ag_buffers_.begin();
    for (auto& a : ag_buffers_) {
      if (a.wait == kNoOp) {
        *keep++ = a;
        continue;
      }
      b_.dep(a.wait);
      b_.free(a.buffer, false);
    }
    ag_buffers_.erase(keep, ag_buffers_.end());
  }

  /// FSDP1 limit_all_gathers: the j-th all-gather waits for the (j-2)-th reshard, when issued.
  OpId limiter_dep() {
    if (!fsdp1()) return kNoOp;
    const size_t j = all_gathers_++;
    if (!spec_.limit_all_gathers || j < 2 || j - 2 >= reshards_.size()) return kNoOp;
    return reshards_[j - 2];
  }

  /// The compute stream waits for slot `s`'s all-gather (once per gather).
  void wait(int32_t s) {
    if (gather_[s].wait != kNoOp) return;
    OpId id = add(Builder::marker(rank_, compute_, unit(s).loc), FsdpOpKind::kWait, s,
                  fmt::format("wait AG {} ({})", unit_name(s), phase_tag()));
    b_.dep(gather_[s].all_gather);
    gather_[s].wait = id;
    for (AgBuffer& a : ag_buffers_)
      if (a.slot == s && a.wait == kNoOp) a.wait = id;
  }

  /// FSDP2's integer reshard_after_forward k (1 < k < shard size): after the forward, slot `s`
  /// frees its unsharded parameters and keeps a clone of its 1/k slice of them (the all-gather
  /// output narrowed to the rank's place in the k-rank post-forward group:
  /// FSDPParam.to_sharded_post_forward), params_bytes / k on the compute stream, until the
  /// backward's all-gather over the k ranks has copied out (FSDPParam.to_unsharded frees it).
  void reshard_to_post_forward(int32_t s, int k) {
    reshard(s);
    const FsdpUnit& un = unit(s);
    post_forward_[s] = b_.buffer(rank_, "param-post-forward", un.gather_bytes() / k, slots_[s].unit, -1,
                                 fmt::format("post-forward shard {} ({})", unit_name(s), phase_tag()));
    b_.alloc(post_forward_[s], false);
  }

  /// Frees slot `s`'s unsharded parameters on the compute stream.
  void reshard(int32_t s) {
    OpId id = add(Builder::marker(rank_, compute_, unit(s).loc), FsdpOpKind::kReshard, s,
                  fmt::format("reshard {} ({})", unit_name(s), phase_tag()));
    b_.free(gather_[s].param, false);
    reshards_.push_back(id);
    live_params_ -= unit_params(spec_, slots_[s].unit);
    gather_[s] = Gather{};
  }

  // ---- compute ------------------------------------------------------------------------------

  void forward_compute(int32_t s) {
    const FsdpUnit& un = unit(s);
    act_[s] = b_.buffer(rank_, "act", un.activation_bytes, slots_[s].unit, mb_,
                        fmt::format("act {} {}", unit_name(s), mb_tag()));
    forward_op_[s] = add(Builder::compute(rank_, compute_, un.forward_s, un.loc), FsdpOpKind::kForward, s,
                         fmt::format("F {} ({})", unit_name(s), mb_tag()));
    b_.alloc(act_[s], false);
    transient(s, un.transient_bytes);
    b_.use(gather_[s].param);
  }

  /// `bytes` of the unit's transients, live for the op just added (FsdpUnit::transient_bytes,
  /// backward_transient_bytes).
  void transient(int32_t s, int64_t bytes) {
    if (bytes <= 0) return;
    const int32_t tmp = b_.buffer(rank_, "act-tmp", bytes, slots_[s].unit, mb_,
                                  fmt::format("act-tmp {} {}", unit_name(s), mb_tag()));
    b_.alloc(tmp, false);
    b_.free(tmp, true);
  }

  void backward_compute(int32_t s) {
    const FsdpUnit& un = unit(s);
    grad_[s] = b_.buffer(rank_, "grad", un.params_bytes, slots_[s].unit, mb_,
                         fmt::format("grad {} {}", unit_name(s), mb_tag()));
    backward_op_[s] = add(Builder::compute(rank_, compute_, un.backward_s, un.loc), FsdpOpKind::kBackward, s,
                          fmt::format("B {} ({})", unit_name(s), mb_tag()));
    b_.alloc(grad_[s], false);
    b_.free(act_[s], true);
    transient(s, un.backward_transient_bytes >= 0 ? un.backward_transient_bytes : un.transient_bytes);
    b_.use(gather_[s].param);
    act_[s] = -1;
    if (un.stranded_bytes > 0 && forward_op_[s] != kNoOp)
      b_.program().reserve_holds.push_back(
          ReserveHold{rank_, un.stranded_bytes, forward_op_[s], backward_op_[s], true, true, kPoolCompute});
  }

  // ---- reductions ---------------------------------------------------------------------------

  /// Post-backward of slot `s`: (FSDP2 copy-in,) reduce-scatter, and the HSDP all-reduce.
  void reduce(int32_t s) {
    const int32_t u = slots_[s].unit;
    const int64_t rs_bytes = reduce_bytes(spec_, u);
    if (fsdp2()) rs_copy_in(s, rs_bytes);
    Op op = b_.collective(rank_, reduce_scatter_, shard_comm_, CollectiveKind::kReduceScatter, rs_bytes,
                          spec_.reduce_dtype, unit(s).loc);
    last_rs_ = add(op, FsdpOpKind::kReduceScatter, s, fmt::format("RS {} ({})", unit_name(s), mb_tag()));
    if (!fsdp2()) {
      b_.dep(backward_op_[s]);
      b_.free(grad_[s], true);  // the gradient is the reduce-scatter's input
      b_.use(grad_[s]);
    }
    if (grad_shard_[u] < 0) {
      const int64_t shard = rs_bytes / shard_size_of(spec_);
      // FSDP2's sharded gradients are views of the reduce-scatter output, which foreach_reduce
      // allocates on the reduce-scatter stream; they live until zero_grad.
      grad_shard_[u] = b_.buffer(rank_, "grad-shard", shard, u, -1,
                                 fmt::format("grad-shard {} it{}", spec_.units[u].name, it_),
                                 fsdp2() ? kPoolReduceScatter : kPoolCompute);
      b_.alloc(grad_shard_[u], true);
      grad_shards_.push_back(grad_shard_[u]);
    }
    grad_[s] = -1;
    if (replicate_comm_ >= 0) all_reduce(s, rs_bytes / shard_size_of(spec_));
  }

  /// FSDP2 reduce-scatter copy-in: allocates the input, frees the previous unit's input and,
  /// at its end, the unsharded gradient.
  void rs_copy_in(int32_t s, int64_t rs_bytes) {
    const int32_t input = b_.buffer(rank_, "rs-input", rs_bytes, slots_[s].unit, mb_,
                                    fmt::format("rs-input {} {}", unit_name(s), mb_tag()));
    add(Builder::marker(rank_, reduce_scatter_, unit(s).loc), FsdpOpKind::kRsCopyIn, s,
        fmt::format("rs copy-in {} ({})", unit_name(s), mb_tag()));
    b_.dep(backward_op_[s]);
    b_.free(pending_rs_input_, false);
    b_.alloc(input, false);
    b_.free(grad_[s], true);
    b_.use(grad_[s]);  // copies the gradient into the reduce-scatter input
    pending_rs_input_ = input;
  }

  /// HSDP all-reduce of slot `s`'s gradient shard on the replicate group.
  void all_reduce(int32_t s, int64_t bytes) {
    Op op = b_.collective(rank_, all_reduce_, replicate_comm_, CollectiveKind::kAllReduce, bytes, spec_.reduce_dtype,
                          unit(s).loc);
    last_ar_ = add(op, FsdpOpKind::kAllReduce, s, fmt::format("AR {} ({})", unit_name(s), mb_tag()));
    b_.dep(last_rs_);
  }

  /// After the last microbatch: wait for the reductions, then the optimizer step (optimizer
  /// state from step 0 on; gradient shards freed at its end, zero_grad(set_to_none=True)).
  void finish_step() {
    const SourceLoc loc = spec_.locs.fsdp;
    add(Builder::marker(rank_, compute_, loc), FsdpOpKind::kWaitReduce, -1, fmt::format("wait reduce (it{})", it_));
    b_.dep(last_rs_);
    b_.dep(last_ar_);
    b_.free(pending_rs_input_, false);
    pending_rs_input_ = -1;
    const int32_t state =
        it_ == 0 ? b_.buffer(rank_, "optimizer-state", optimizer_state_bytes(spec_), -1, -1, "optimizer-state") : -1;
    optimizer_ = add(Builder::compute(rank_, compute_, spec_.optimizer_step_s, loc), FsdpOpKind::kOptimizer, -1,
                     fmt::format("optimizer (it{})", it_));
    b_.alloc(state, false);
    for (int32_t g : grad_shards_) b_.free(g, true);
    grad_shards_.clear();
  }

  Builder& b_;
  const FsdpSpec& spec_;
  const int32_t rank_, shard_comm_, replicate_comm_;
  const std::vector<Slot> slots_;
  const int microbatches_;
  int32_t compute_ = -1, copy_in_ = -1, all_gather_ = -1, reduce_scatter_ = -1, all_reduce_ = -1;
  int it_ = 0, mb_ = 0;
  bool backward_ = false;
  OpId optimizer_ = kNoOp;              // the last optimizer step: later gathers read its shards
  std::vector<Gather> gather_;          // per slot
  std::vector<int32_t> act_, grad_;     // per slot: this microbatch's buffers, -1 when none
  std::vector<OpId> backward_op_;       // per slot: its latest backward
  std::vector<OpId> forward_op_;        // per slot: its latest forward
  std::vector<AgBuffer> ag_buffers_;    // FSDP2 gather buffers not yet freed, oldest first
  std::vector<int32_t> grad_shard_;     // per unit: this step's gradient shard, -1 before its first RS
  std::vector<int32_t> grad_shards_;    // this step's gradient shards, in allocation order
  int32_t pending_rs_input_ = -1;       // FSDP2: the reduce-scatter input still alive
  std::vector<OpId> reshards_;          // every reshard, in issue order (FSDP1 limiter)
  std::vector<int32_t> post_forward_;   // per slot: its live post-forward shard buffer, or -1
  size_t all_gathers_ = 0;              // all-gathers issued (FSDP1 limiter)
  int64_t live_params_ = 0;             // gathered parameters in the CPU's view (ZeRO-3)
  OpId hook_dep_ = kNoOp;               // ZeRO-3: dep of the current hook's all-gathers
  OpId last_compute_ = kNoOp;           // the compute stream's last op
  OpId last_rs_ = kNoOp, last_ar_ = kNoOp;
};

/// The rank's explicit program: its own, else key -1's, else none.
const std::vector<FsdpProgramOp>* program_of(const FsdpSpec& spec, int rank) {
  auto it = spec.programs.find(rank);
  if (it == spec.programs.end()) it = spec.programs.find(-1);
  return it == spec.programs.end() ? nullptr : &it->second;
}

}  // namespace

bool fsdp_quotient_applies(const FsdpSpec& spec) {
  return spec.ranks > 1 && spec.overrides.empty() && spec.programs.empty();
}

FsdpProgram lower_fsdp(const FsdpSpec& spec, bool quotient) {
  FsdpProgram out;
  Program& p = out.program;
  quotient = quotient && fsdp_quotient_applies(spec);
  const int32_t built = quotient ? 1 : spec.ranks;
  p.num_ranks = built;
  if (quotient) p.rank_classes = {RankClass{0, spec.ranks}};
  p.link.latency_s = spec.latency_s;
  if (spec.bandwidth_bytes_per_s > 0) p.link.bandwidth_bytes_per_s = spec.bandwidth_bytes_per_s;
  p.static_bytes_per_rank.assign(built, static_param_bytes(spec));
  add_communicators(spec, out, quotient);
  Builder b(spec, out);
  for (int32_t r = 0; r < built; ++r) {
    if (spec.programs.empty()) {
      RankGen(b, r, out.shard_comm[r], out.replicate_comm[r]).run();
    } else if (const auto* ops = program_of(spec, r)) {
      lower_explicit_rank(b, r, out.shard_comm[r], out.replicate_comm[r], *ops, out.findings);
    }
  }
  p.rank_streams.resize(built);  // a rank without an explicit program has no streams
  // Where each rank's own program is written: its ranks_override entry, or its own `programs:`
  // list (not the shared default), so that a finding that blames the rank points there.
  if (!quotient && (!spec.overrides.empty() || !spec.programs.empty())) {
    p.rank_locs.assign(built, SourceLoc{});
    p.rank_loc_labels.assign(built, "");
    for (int32_t r = 0; r < built; ++r) {
      if (const auto it = spec.overrides.find(r); it != spec.overrides.end() && it->second.loc.valid()) {
        p.rank_locs[r] = it->second.loc;
        p.rank_loc_labels[r] = fmt::format("rank {}'s ranks_override entry", r);
      } else if (const auto pr = spec.programs.find(r); pr != spec.programs.end() && !pr->second.empty() &&
                                                        pr->second.front().loc.valid()) {
        p.rank_locs[r] = pr->second.front().loc;
        p.rank_loc_labels[r] = fmt::format("rank {}'s program", r);
      }
    }
  }
  return out;
}

}  // namespace sc
