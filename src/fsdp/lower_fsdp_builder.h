// Shared parts of the FSDP lowering (internal to src/fsdp): sizes, static names, the op and
// buffer builder, and the translation of explicit programs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fsdp/lower_fsdp.h"
#include "numerics/analysis.h"

namespace sc::fsdp_lower {

/// A static string for a dtype name (Op::dtype must outlive the Program); "other" when the
/// name is not a known dtype.
const char* static_dtype_name(const std::string& name);

/// A static string for a stream name (Stream::name must outlive the Program): the default
/// names as literals, others copied once into a process-lifetime table.
const char* static_stream_name(const std::string& name);

/// Ranks per shard group: shard_size, or ranks / replicate_size when unset.
int shard_size_of(const FsdpSpec& spec);

/// Parameters of unit `u` (params_bytes / param dtype bytes).
int64_t unit_params(const FsdpSpec& spec, int32_t u);

/// Per-rank bytes of unit `u`'s unsharded gradient in the reduce dtype (reduce-scatter input).
int64_t reduce_bytes(const FsdpSpec& spec, int32_t u);

/// Index of the unit named `name`, or -1.
int32_t unit_index(const FsdpSpec& spec, const std::string& name);

/// Adds ops and buffers to an FsdpProgram, keeping FsdpProgram::info in step with the ops.
/// Deps, memory effects and uses apply to the op added last.
class Builder {
 public:
  Builder(const FsdpSpec& spec, FsdpProgram& out) : spec_(spec), out_(out), steps_(spec.ranks, 0) {}

  Program& program() { return out_.program; }
  const FsdpSpec& spec() const { return spec_; }

  /// Adds a buffer of `rank` named `name`; returns its index.
  int32_t buffer(int32_t rank, const char* kind, int64_t bytes, int32_t unit, int32_t mb, std::string name,
                 MemPool pool = kPoolCompute) {
    Buffer b;
    b.pool = pool;
    b.rank = rank;
    b.stage = unit;
    b.microbatch = mb;
    b.kind = kind;
    b.bytes = bytes;
    b.name = out_.program.add_name(std::move(name));
    out_.program.buffers.push_back(b);
    return static_cast<int32_t>(out_.program.buffers.size() - 1);
  }

  /// Adds `op` (its step is the rank's issue index) labelled `label`; returns its id.
  OpId add(Op op, const FsdpOpInfo& info, std::string label) {
    op.step = steps_[op.rank]++;
    op.set_name(out_.program.add_name(std::move(label)));
    last_ = out_.program.add_op(op);
    out_.info.push_back(info);
    return last_;
  }
  /// The last op waits for `src` (nothing for kNoOp).
  void dep(OpId src) {
    if (src != kNoOp) out_.program.add_dep(last_, Dep{src, DepKind::kLocal});
  }
  /// The last op allocates buffer `b` (nothing for -1 or an empty buffer).
  void alloc(int32_t b, bool at_end) { effect(b, 1, at_end); }
  /// The last op frees buffer `b` (nothing for -1 or an empty buffer).
  void free(int32_t b, bool at_end) { effect(b, -1, at_end); }
  /// The last op reads or writes buffer `b` (nothing for -1).
  void use(int32_t b) {
    if (b >= 0) out_.program.add_use(last_, b);
  }

  /// A marker (zero-time bookkeeping op) of `rank` on `stream`.
  static Op marker(int32_t rank, int32_t stream, SourceLoc loc) {
    Op op;
    op.kind = OpKind::kMarker;
    op.rank = rank;
    op.stream = stream;
    op.loc = loc;
    return op;
  }
  /// A compute op of `duration_s` seconds.
  static Op compute(int32_t rank, int32_t stream, double duration_s, SourceLoc loc) {
    Op op = marker(rank, stream, loc);
    op.kind = OpKind::kCompute;
    op.duration_s = duration_s;
    return op;
  }
  /// A collective on communicator `comm` moving `bytes` per rank, timed by the cost model.
  Op collective(int32_t rank, int32_t stream, int32_t comm, CollectiveKind kind, int64_t bytes, const DType& dtype,
                SourceLoc loc) const {
    Op op = marker(rank, stream, loc);
    op.kind = OpKind::kCollective;
    op.set_comm(comm);
    op.collective = kind;
    op.bytes = bytes;
    op.dtype = static_dtype_name(dtype.name);
    const int n = comm >= 0 ? out_.program.comms[comm].group_size() : 1;
    if (kind != CollectiveKind::kAllGather) op.set_arith(reduction_arithmetic(n));
    op.duration_s = collective_time_s(spec_, kind, bytes, n);
    return op;
  }

 private:
  /// The arithmetic of a gradient reduction over n ranks (docs/facts/numerics.md): FSDP2 averages in the
  /// collective (NCCL avg; fp16 sums with FSDP1's divide factors), FSDP1 pre-divides by f and
  /// post-divides by n / f, ZeRO-3 sums and divides by n after (gradient_predivide_factor 1);
  /// FSDP2 with fsdp.options.gradient_divide_factor as numerics::fsdp2_gradient_divide computes.
  /// One Program::arithmetic entry per n.
  int32_t reduction_arithmetic(int n) const {
    auto it = arith_by_ranks_.find(n);
    if (it != arith_by_ranks_.end()) return it->second;
    CollectiveArithmetic a;
    a.where = spec_.locs.reduce_dtype.valid() ? spec_.locs.reduce_dtype : spec_.locs.fsdp;
    if (spec_.implementation == FsdpImplementation::kZero3) {
      a.op = "sum";
      a.post_divide = n;
    } else {
      const bool fsdp2 = spec_.implementation == FsdpImplementation::kFsdp2;
      const numerics::DType dtype = numerics::parse_dtype(spec_.reduce_dtype.name).value_or(numerics::DType::kFp32);
      const auto c = fsdp2 && spec_.gradient_divide_factor
                         ? numerics::fsdp2_gradient_divide(dtype, n, *spec_.gradient_divide_factor)
                         : numerics::fsdp_reduce_scatter(dtype, n, fsdp2);
      a.op = numerics::op_name(c.op);
      a.premul_factor = c.premul_factor;
      a.pre_divide = c.pre_divide;
      a.post_divide = c.post_divide;
      if (fsdp2 && spec_.gradient_divide_factor) a.where = spec_.locs.gradient_divide_factor;
    }
    Program& p = out_.program;
    const int32_t id = static_cast<int32_t>(p.arithmetic.size());
    p.arithmetic.push_back(a);
    arith_by_ranks_.emplace(n, id);
    return id;
  }

  void effect(int32_t b, int sign, bool at_end) {
    if (b < 0 || out_.program.buffers[b].bytes == 0) return;
    out_.program.add_mem(last_, MemEffect{b, sign * out_.program.buffers[b].bytes, at_end});
  }

  const FsdpSpec& spec_;
  FsdpProgram& out_;
  mutable std::map<int, int32_t> arith_by_ranks_;  ///< reduction arithmetic per communicator size
  std::vector<int32_t> steps_;
  OpId last_ = kNoOp;
};

/// Translates `rank`'s explicit program op by op into `b`, appending its static problems to
/// `findings` (lower_fsdp_explicit.cc).
void lower_explicit_rank(Builder& b, int32_t rank, int32_t shard_comm, int32_t replicate_comm,
                         const std::vector<FsdpProgramOp>& ops, std::vector<Finding>& findings);

}  // namespace sc::fsdp_lower
