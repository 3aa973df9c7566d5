// Translation of explicit per-rank FSDP programs (`programs:`) into the Program IR.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fsdp/lower_fsdp_builder.h"

namespace sc::fsdp_lower {
namespace {

/// Translates one rank's explicit program op by op, tracking the live instances of each unit's
/// parameters, activations and gradients, and reporting static problems.
class ExplicitRank {
 public:
  ExplicitRank(Builder& b, int32_t rank, int32_t shard_comm, int32_t replicate_comm, std::vector<Finding>& findings)
      : b_(b), spec_(b.spec()), rank_(rank), shard_comm_(shard_comm), replicate_comm_(replicate_comm),
        findings_(findings), params_(spec_.units.size()), acts_(spec_.units.size()), grads_(spec_.units.size()),
        gathers_(spec_.units.size(), 0) {}

  void run(const std::vector<FsdpProgramOp>& ops) {
    for (size_t i = 0; i < ops.size(); ++i) lower(ops[i], i);
  }

 private:
  /// What an op kind lowers to: its FsdpOpKind, label prefix and default stream.
  struct KindInfo {
    const char* kind;
    FsdpOpKind op;
    const char* prefix;
    const char* stream;
  };
  static const KindInfo* kind_info(const std::string& kind) {
    static const KindInfo kKinds[] = {
        {"all_gather", FsdpOpKind::kAllGather, "AG", "all_gather"},
        {"forward", FsdpOpKind::kForward, "F", "compute"},
        {"backward", FsdpOpKind::kBackward, "B", "compute"},
        {"free", FsdpOpKind::kReshard, "free", "compute"},
        {"reduce_scatter", FsdpOpKind::kReduceScatter, "RS", "reduce_scatter"},
        {"all_reduce", FsdpOpKind::kAllReduce, "AR", "all_reduce"},
        {"optimizer", FsdpOpKind::kOptimizer, "optimizer", "compute"},
    };
    for (const KindInfo& k : kKinds)
      if (kind == k.kind) return &k;
    return nullptr;
  }

  void lower(const FsdpProgramOp& op, size_t index) {
    const KindInfo* k = kind_info(op.kind);
    const int32_t u = op.kind == "optimizer" ? -1 : unit_index(spec_, op.unit);
    if (!k || (u < 0 && op.kind != "optimizer")) {
      report(FindingKind::kStructure,
             k ? fmt::format("rank {} program names unknown unit '{}'", rank_, op.unit)
               : fmt::format("rank {} program has unknown op kind '{}'", rank_, op.kind),
             op, op.kind);
      return;
    }
    std::string label = op_label(*k, op, index);
    const int32_t stream = stream_for(op.stream.empty() ? std::string(k->stream) : op.stream);
    FsdpOpInfo info{k->op, u, 0, 0, k->op == FsdpOpKind::kBackward || k->op == FsdpOpKind::kReduceScatter ||
                                         k->op == FsdpOpKind::kAllReduce};
    OpId id = kNoOp;
    switch (k->op) {
      case FsdpOpKind::kAllGather: id = all_gather(op, u, stream, info, label); break;
      case FsdpOpKind::kForward:
      case FsdpOpKind::kBackward: id = compute(op, u, stream, info, label); break;
      case FsdpOpKind::kReshard: id = free_params(op, u, stream, info, label); break;
      case FsdpOpKind::kReduceScatter: id = reduce_scatter(op, u, stream, info, label); break;
      case FsdpOpKind::kAllReduce: id = all_reduce(op, u, stream, info, label); break;
      default:
        id = b_.add(Builder::compute(rank_, stream, spec_.optimizer_step_s, op.loc), info, label);
        add_deps(op, label);
        break;
    }
    if (!op.id.empty()) ids_[op.id] = id;
  }

  /// "F layer.0 (f0)" with the op's id, else its position: "F layer.0 (#3)".
  static std::string op_label(const KindInfo& k, const FsdpProgramOp& op, size_t index) {
    std::string what = op.unit.empty() ? std::string(k.prefix) : fmt::format("{} {}", k.prefix, op.unit);
    return op.id.empty() ? fmt::format("{} (#{})", what, index) : fmt::format("{} ({})", what, op.id);
  }

  /// The rank's stream named `name`, created on first use.
  int32_t stream_for(const std::string& name) {
    auto it = streams_.find(name);
    if (it != streams_.end()) return it->second;
    int32_t s = b_.program().add_stream(rank_, static_stream_name(name));
    streams_.emplace(name, s);
    return s;
  }

  /// Deps of the op added last on the ops its `after` names.
  void add_deps(const FsdpProgramOp& op, const std::string& label) {
    for (const std::string& a : op.after) {
      auto it = ids_.find(a);
      if (it != ids_.end())
        b_.dep(it->second);
      else
        report(FindingKind::kStructure, fmt::format("{} on rank {} waits for unknown op '{}'", label, rank_, a), op,
               label);
    }
  }

  OpId all_gather(const FsdpProgramOp& op, int32_t u, int32_t stream, const FsdpOpInfo& info, const std::string& label) {
    const FsdpUnit& un = spec_.units[u];
    const int32_t param = b_.buffer(rank_, "param", un.gather_bytes(), u, -1,
                                    fmt::format("param {} #{}", un.name, gathers_[u]++));
    Op c = b_.collective(rank_, stream, shard_comm_, CollectiveKind::kAllGather, un.gather_bytes(), spec_.param_dtype,
                         op.loc);
    OpId id = b_.add(c, info, label);
    add_deps(op, label);
    b_.alloc(param, false);
    params_[u].push_back(param);
    return id;
  }

  /// forward (allocates activations) or backward (frees them, allocates the gradient); both
  /// read the unit's latest gathered parameters.
  OpId compute(const FsdpProgramOp& op, int32_t u, int32_t stream, const FsdpOpInfo& info, const std::string& label) {
    const FsdpUnit& un = spec_.units[u];
    const bool fwd = info.kind == FsdpOpKind::kForward;
    const int32_t param = latest(params_[u]);
    if (param < 0) not_gathered(op, u, label, fwd ? "runs forward of" : "runs backward of");
    const int32_t made = fwd ? b_.buffer(rank_, "act", un.activation_bytes, u, 0, fmt::format("act {}", label))
                             : b_.buffer(rank_, "grad", un.params_bytes, u, 0, fmt::format("grad {}", label));
    OpId id = b_.add(Builder::compute(rank_, stream, fwd ? un.forward_s : un.backward_s, op.loc), info, label);
    add_deps(op, label);
    b_.alloc(made, false);
    if (!fwd) b_.free(pop(acts_[u]), true);
    b_.use(param);
    (fwd ? acts_ : grads_)[u].push_back(made);
    return id;
  }

  OpId free_params(const FsdpProgramOp& op, int32_t u, int32_t stream, const FsdpOpInfo& info,
                   const std::string& label) {
    const int32_t param = pop(params_[u]);
    if (param < 0) not_gathered(op, u, label, "frees");
    OpId id = b_.add(Builder::marker(rank_, stream, op.loc), info, label);
    add_deps(op, label);
    b_.free(param, false);
    return id;
  }

  OpId reduce_scatter(const FsdpProgramOp& op, int32_t u, int32_t stream, const FsdpOpInfo& info,
                      const std::string& label) {
    Op c = b_.collective(rank_, stream, shard_comm_, CollectiveKind::kReduceScatter, reduce_bytes(spec_, u),
                         spec_.reduce_dtype, op.loc);
    OpId id = b_.add(c, info, label);
    add_deps(op, label);
    const int32_t grad = pop(grads_[u]);
    b_.free(grad, true);
    b_.use(grad);  // reads the gradient: the backward that makes it must come first
    return id;
  }

  /// HSDP all-reduce of the gradient shard; without a replicate group a finding and a marker.
  OpId all_reduce(const FsdpProgramOp& op, int32_t u, int32_t stream, const FsdpOpInfo& info,
                  const std::string& label) {
    Op c = b_.collective(rank_, stream, replicate_comm_, CollectiveKind::kAllReduce,
                         reduce_bytes(spec_, u) / shard_size_of(spec_), spec_.reduce_dtype, op.loc);
    if (replicate_comm_ < 0) {
      report(FindingKind::kStructure,
             fmt::format("{} on rank {} needs a replicate group (replicate_size is 1)", label, rank_), op, label);
      c = Builder::marker(rank_, stream, op.loc);
    }
    OpId id = b_.add(c, info, label);
    add_deps(op, label);
    return id;
  }

  static int32_t latest(const std::vector<int32_t>& v) { return v.empty() ? -1 : v.back(); }
  static int32_t pop(std::vector<int32_t>& v) {
    int32_t b = latest(v);
    if (!v.empty()) v.pop_back();
    return b;
  }

  /// A residency finding: `label` `verb` unit `u` while none of its gathers is live.
  void not_gathered(const FsdpProgramOp& op, int32_t u, const std::string& label, const char* verb) {
    const std::string& name = spec_.units[u].name;
    Finding& f = report(FindingKind::kResidency,
                        fmt::format("rank {} {} {} while its parameters are not gathered ({})", rank_, verb, name, label),
                        op, label);
    f.details.push_back(gathers_[u] == 0 ? fmt::format("no all_gather of {} comes before it on rank {}", name, rank_)
                                         : fmt::format("every all_gather of {} before it was freed", name));
  }

  Finding& report(FindingKind kind, std::string message, const FsdpProgramOp& op, const std::string& label) {
    Finding f;
    f.kind = kind;
    f.message = std::move(message);
    f.ranks = {rank_};
    f.ops = {label};
    f.locations = {op.loc};
    findings_.push_back(std::move(f));
    return findings_.back();
  }

  Builder& b_;
  const FsdpSpec& spec_;
  const int32_t rank_, shard_comm_, replicate_comm_;
  std::vector<Finding>& findings_;
  std::map<std::string, int32_t> streams_;           // by name
  std::map<std::string, OpId> ids_;                  // ops by their `id`
  std::vector<std::vector<int32_t>> params_, acts_, grads_;  // per unit: live instances, newest last
  std::vector<int32_t> gathers_;                     // per unit: all-gathers so far
};

}  // namespace

void lower_explicit_rank(Builder& b, int32_t rank, int32_t shard_comm, int32_t replicate_comm,
                         const std::vector<FsdpProgramOp>& ops, std::vector<Finding>& findings) {
  ExplicitRank(b, rank, shard_comm, replicate_comm, findings).run(ops);
}

}  // namespace sc::fsdp_lower
