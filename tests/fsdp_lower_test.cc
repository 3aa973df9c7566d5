// Tests of the FSDP lowering: op sequences, communicators, sizes, costs, memory effects and the
// static findings of explicit programs.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "catch.h"
#include "check/execution.h"
#include "fsdp/lower_fsdp.h"
#include "sim/timeline.h"

namespace sc {
namespace {

/// `units` units "layer.i" of `params_bytes` each, bf16, ring model, 4 ranks in one shard group.
FsdpSpec make_spec(FsdpImplementation impl, int units = 3, int64_t params_bytes = 8'000'000) {
  FsdpSpec s;
  s.ranks = 4;
  s.shard_size = 4;
  s.replicate_size = 1;
  s.implementation = impl;
  s.bandwidth_bytes_per_s = 1e9;
  s.latency_s = 1e-5;
  s.iterations = 2;
  s.microbatches = 1;
  s.optimizer_step_s = 0.001;
  for (int i = 0; i < units; ++i) {
    FsdpUnit u;
    u.name = fmt::format("layer.{}", i);
    u.params_bytes = params_bytes;
    u.forward_s = 0.01;
    u.backward_s = 0.02;
    u.activation_bytes = 1000;
    u.loc = SourceLoc{0, 10 + i, 5};
    s.units.push_back(u);
  }
  return s;
}

int count(const FsdpProgram& fp, int rank, FsdpOpKind kind) {
  int n = 0;
  for (OpId id = 0; id < static_cast<OpId>(fp.info.size()); ++id)
    if (fp.program.ops[id].rank == rank && fp.info[id].kind == kind) ++n;
  return n;
}

/// Labels of `rank`'s ops in issue order.
std::vector<std::string> labels(const FsdpProgram& fp, int rank) {
  std::vector<std::string> out;
  for (OpId id = 0; id < static_cast<OpId>(fp.program.ops.size()); ++id)
    if (fp.program.ops[id].rank == rank) out.push_back(fp.program.label(id));
  return out;
}

OpId find_op(const FsdpProgram& fp, int rank, const std::string& label) {
  for (OpId id = 0; id < static_cast<OpId>(fp.program.ops.size()); ++id)
    if (fp.program.ops[id].rank == rank && fp.program.label(id) == label) return id;
  FAIL("no op " << label << " on rank " << rank);
  return kNoOp;
}

std::vector<std::string> dep_labels(const FsdpProgram& fp, OpId id) {
  std::vector<std::string> out;
  for (const Dep* d = fp.program.deps_begin(id); d != fp.program.deps_end(id); ++d)
    out.push_back(fp.program.label(d->src));
  return out;
}

/// The op's memory effects as "+name@start" / "-name@end".
std::vector<std::string> effects(const FsdpProgram& fp, OpId id) {
  std::vector<std::string> out;
  for (const MemEffect* m = fp.program.mem_begin(id); m != fp.program.mem_end(id); ++m)
    out.push_back(fmt::format("{}{}@{}", m->bytes > 0 ? '+' : '-', fp.program.names[fp.program.buffers[m->buffer].name],
                              m->at_end ? "end" : "start"));
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

/// Max over `rank`'s ops in issue order of the live bytes of buffers of kind "param" and
/// "ag-buffer" (start effects, then end effects, of each op).
int64_t peak_param_bytes(const FsdpProgram& fp, int rank) {
  const Program& p = fp.program;
  int64_t live = 0, peak = 0;
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    if (p.ops[id].rank != rank) continue;
    for (bool at_end : {false, true}) {
      for (const MemEffect* m = p.mem_begin(id); m != p.mem_end(id); ++m) {
        std::string kind = p.buffers[m->buffer].kind.c_str();
        if (m->at_end == at_end && (kind == "param" || kind == "ag-buffer")) live += m->bytes;
      }
      peak = std::max(peak, live);
    }
  }
  return peak;
}

/// Communication volume of `rank` on its shard group in step `it`: sum of (n-1)/n · bytes.
double shard_volume(const FsdpProgram& fp, int rank, int it) {
  const Program& p = fp.program;
  double v = 0;
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    const Op& o = p.ops[id];
    if (o.rank != rank || o.kind != OpKind::kCollective || o.comm() != fp.shard_comm[rank] || fp.info[id].iteration != it)
      continue;
    const double n = static_cast<double>(p.comms[o.comm()].ranks.size());
    v += (n - 1) / n * static_cast<double>(o.bytes);
  }
  return v;
}

const FsdpImplementation kAllImpls[] = {FsdpImplementation::kFsdp2, FsdpImplementation::kFsdp1,
                                        FsdpImplementation::kZero3};

}  // namespace

TEST_CASE("lowered fsdp programs satisfy the Program invariants", "[fsdp-lower]") {
  for (FsdpImplementation impl : kAllImpls) {
    INFO("implementation " << static_cast<int>(impl));
    FsdpSpec s = make_spec(impl);
    s.ranks = 8;
    s.replicate_size = 2;
    s.microbatches = 2;
    s.overrides[1].skip_units = {"layer.1"};
    s.overrides[2].repeat_units = {"layer.0"};
    s.overrides[3].microbatches = 3;
    FsdpProgram fp = lower_fsdp(s);
    CHECK(fp.program.validate() == "");
    CHECK(fp.info.size() == fp.program.ops.size());
    CHECK(fp.findings.empty());
    for (const Op& o : fp.program.ops) CHECK(fp.program.streams[o.stream].rank == o.rank);
  }
}

TEST_CASE("fsdp2 issues copy-in, all-gather, wait, prefetch, forward and reshard in order", "[fsdp-lower]") {
  FsdpProgram fp = lower_fsdp(make_spec(FsdpImplementation::kFsdp2));
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    // Per step: 6 gathers (3 forward, 3 backward), 3 F, 3 B, 6 reshards, 3 reduce-scatters.
    CHECK(count(fp, r, FsdpOpKind::kCopyIn) == 12);
    CHECK(count(fp, r, FsdpOpKind::kAllGather) == 12);
    CHECK(count(fp, r, FsdpOpKind::kWait) == 12);
    CHECK(count(fp, r, FsdpOpKind::kForward) == 6);
    CHECK(count(fp, r, FsdpOpKind::kBackward) == 6);
    CHECK(count(fp, r, FsdpOpKind::kReshard) == 12);
    CHECK(count(fp, r, FsdpOpKind::kRsCopyIn) == 6);
    CHECK(count(fp, r, FsdpOpKind::kReduceScatter) == 6);
    CHECK(count(fp, r, FsdpOpKind::kAllReduce) == 0);
    CHECK(count(fp, r, FsdpOpKind::kWaitReduce) == 2);
    CHECK(count(fp, r, FsdpOpKind::kOptimizer) == 2);
    CHECK(labels(fp, r).size() == 76);
  }
  std::vector<std::string> l = labels(fp, 0);
  std::vector<std::string> head(l.begin(), l.begin() + 12);
  CHECK(head == std::vector<std::string>{
                    "copy-in layer.0 (it0 fwd)", "AG layer.0 (it0 fwd)", "wait AG layer.0 (it0 fwd)",
                    "copy-in layer.1 (it0 fwd)", "AG layer.1 (it0 fwd)", "F layer.0 (it0 mb0)",
                    "reshard layer.0 (it0 fwd)", "wait AG layer.1 (it0 fwd)", "copy-in layer.2 (it0 fwd)",
                    "AG layer.2 (it0 fwd)", "F layer.1 (it0 mb0)", "reshard layer.1 (it0 fwd)"});
  // Backward of the last unit gathers it again, then prefetches the one before it.
  std::vector<std::string> bwd(l.begin() + 15, l.begin() + 25);
  CHECK(bwd == std::vector<std::string>{
                   "copy-in layer.2 (it0 bwd)", "AG layer.2 (it0 bwd)", "wait AG layer.2 (it0 bwd)",
                   "copy-in layer.1 (it0 bwd)", "AG layer.1 (it0 bwd)", "B layer.2 (it0 mb0)",
                   "reshard layer.2 (it0 bwd)", "rs copy-in layer.2 (it0 mb0)", "RS layer.2 (it0 mb0)",
                   "wait AG layer.1 (it0 bwd)"});
  CHECK(l[36] == "wait reduce (it0)");
  CHECK(l[37] == "optimizer (it0)");
  // The copy-in of layer.1 waits for layer.0's wait marker and frees layer.0's gather buffer.
  OpId copy_in = find_op(fp, 0, "copy-in layer.1 (it0 fwd)");
  CHECK(dep_labels(fp, copy_in) == std::vector<std::string>{"wait AG layer.0 (it0 fwd)"});
  CHECK(fp.program.ops[find_op(fp, 0, "F layer.0 (it0 mb0)")].loc.line == 10);
  CHECK(effects(fp, copy_in) == std::vector<std::string>{"-ag-buffer layer.0 it0 fwd@start",
                                                         "+ag-buffer layer.1 it0 fwd@start"});
  // One reduce-scatter input stays alive until the next unit's copy-in; the last until wait-reduce.
  CHECK(effects(fp, find_op(fp, 0, "rs copy-in layer.1 (it0 mb0)")) ==
        std::vector<std::string>{"-rs-input layer.2 it0 mb0@start", "+rs-input layer.1 it0 mb0@start",
                                 "-grad layer.1 it0 mb0@end"});
  CHECK(effects(fp, find_op(fp, 0, "wait reduce (it0)")) ==
        std::vector<std::string>{"-rs-input layer.0 it0 mb0@start"});
  CHECK(effects(fp, find_op(fp, 0, "B layer.1 (it0 mb0)")) ==
        std::vector<std::string>{"+grad layer.1 it0 mb0@start", "-act layer.1 it0 mb0@end"});
}

TEST_CASE("fsdp2 forward holds three units of parameters, fsdp1 with backward pre-fetch two", "[fsdp-lower]") {
  const int64_t p = 8'000'000;
  CHECK(peak_param_bytes(lower_fsdp(make_spec(FsdpImplementation::kFsdp2, 5, p)), 0) == 3 * p);
  CHECK(peak_param_bytes(lower_fsdp(make_spec(FsdpImplementation::kFsdp1, 5, p)), 0) == 2 * p);
  FsdpSpec deep = make_spec(FsdpImplementation::kFsdp2, 5, p);
  deep.forward_prefetch_depth = 2;
  CHECK(peak_param_bytes(lower_fsdp(deep), 0) == 5 * p);
}

TEST_CASE("fsdp2 all-gathers allocate the parameters at their end, fsdp1 and zero3 at their start", "[fsdp-lower]") {
  for (FsdpImplementation impl : kAllImpls) {
    INFO("implementation " << static_cast<int>(impl));
    FsdpProgram fp = lower_fsdp(make_spec(impl));
    const Program& p = fp.program;
    OpId ag = find_op(fp, 1, "AG layer.1 (it1 bwd)");
    REQUIRE(p.mem_end(ag) - p.mem_begin(ag) == 1);
    const MemEffect& m = *p.mem_begin(ag);
    CHECK(std::string(p.buffers[m.buffer].kind) == "param");
    CHECK(p.names[p.buffers[m.buffer].name] == "param layer.1 it1 bwd");
    CHECK(m.bytes == 8'000'000);
    CHECK(m.at_end == (impl == FsdpImplementation::kFsdp2));
    CHECK(std::string(p.streams[p.ops[ag].stream].name) == "all_gather");
  }
}

TEST_CASE("every rank issues the same collectives on its shard group unless it skips a unit", "[fsdp-lower]") {
  for (FsdpImplementation impl : kAllImpls) {
    INFO("implementation " << static_cast<int>(impl));
    FsdpSpec s = make_spec(impl);
    FsdpProgram fp = lower_fsdp(s);
    const Communicator& c = fp.program.comms[fp.shard_comm[0]];
    REQUIRE(c.ranks == std::vector<int32_t>{0, 1, 2, 3});
    REQUIRE(c.ops[0].size() == 18);  // per step 6 all-gathers and 3 reduce-scatters
    for (size_t m = 1; m < c.ranks.size(); ++m) {
      REQUIRE(c.ops[m].size() == c.ops[0].size());
      for (size_t k = 0; k < c.ops[0].size(); ++k) {
        const Op& a = fp.program.ops[c.ops[0][k]];
        const Op& b = fp.program.ops[c.ops[m][k]];
        CHECK(a.collective == b.collective);
        CHECK(a.bytes == b.bytes);
        CHECK(fp.info[c.ops[0][k]].unit == fp.info[c.ops[m][k]].unit);
        CHECK(b.seq() == static_cast<int32_t>(k));
      }
    }
    s.overrides[1].skip_units = {"layer.1"};
    FsdpProgram skip = lower_fsdp(s);
    const Communicator& cs = skip.program.comms[skip.shard_comm[1]];
    CHECK(cs.ops[1].size() == 12);  // 2 all-gathers and 1 reduce-scatter fewer per step
    CHECK(cs.ops[0].size() == 18);
    size_t k = 0;
    while (k < cs.ops[1].size() && skip.info[cs.ops[0][k]].unit == skip.info[cs.ops[1][k]].unit) ++k;
    CHECK(k < cs.ops[1].size());  // the sequences diverge
    CHECK(count(skip, 1, FsdpOpKind::kForward) == 4);
    CHECK(skip.program.validate() == "");
  }
}

TEST_CASE("repeated units and microbatch overrides change one rank's sequence", "[fsdp-lower]") {
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp2);
  s.overrides[2].repeat_units = {"layer.0"};
  s.overrides[3].microbatches = 2;
  FsdpProgram fp = lower_fsdp(s);
  CHECK(count(fp, 2, FsdpOpKind::kForward) == 8);
  CHECK(count(fp, 2, FsdpOpKind::kReduceScatter) == 8);
  CHECK(count(fp, 3, FsdpOpKind::kForward) == 12);
  CHECK(count(fp, 3, FsdpOpKind::kReduceScatter) == 12);
  CHECK(count(fp, 3, FsdpOpKind::kOptimizer) == 2);
  std::vector<std::string> l = labels(fp, 2);
  CHECK(has(l, "F layer.0#2 (it0 mb0)"));
  CHECK(has(labels(fp, 3), "AG layer.2 (it1 mb1 bwd)"));
  // A unit's gradient shard is allocated once per step, at its first reduce-scatter.
  int shards = 0;
  for (const Buffer& b : fp.program.buffers)
    if (b.rank == 2 && std::string(b.kind) == "grad-shard") ++shards;
  CHECK(shards == 6);
}

TEST_CASE("all-gather bytes and durations follow the ring and alpha-beta models", "[fsdp-lower]") {
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp2, 3, 8'000'000);
  s.ranks = 8;
  s.replicate_size = 2;
  s.reduce_dtype = DType{"fp32", 4};
  // Ring, n = 4: 3·1e-5 + 3/4 · 8e6 / 1e9 = 0.00603 s.
  CHECK(collective_time_s(s, CollectiveKind::kAllGather, 8'000'000, 4) == Approx(0.00603));
  CHECK(collective_time_s(s, CollectiveKind::kAllReduce, 4'000'000, 2) == Approx(2 * (1e-5 + 0.002)));
  CHECK(collective_time_s(s, CollectiveKind::kAllGather, 8'000'000, 1) == 0);
  FsdpProgram fp = lower_fsdp(s);
  CHECK(fp.program.validate() == "");
  const Op& ag = fp.program.ops[find_op(fp, 5, "AG layer.0 (it0 fwd)")];
  CHECK(ag.kind == OpKind::kCollective);
  CHECK(ag.collective == CollectiveKind::kAllGather);
  CHECK(ag.bytes == 8'000'000);
  CHECK(std::string(ag.dtype) == "bf16");
  CHECK(ag.duration_s == Approx(0.00603));
  const Op& rs = fp.program.ops[find_op(fp, 5, "RS layer.0 (it0 mb0)")];
  CHECK(rs.bytes == 16'000'000);  // P·q/p
  CHECK(std::string(rs.dtype) == "fp32");
  CHECK(rs.duration_s == Approx(3e-5 + 0.75 * 16e6 / 1e9));
  OpId ar_id = find_op(fp, 5, "AR layer.0 (it0 mb0)");
  const Op& ar = fp.program.ops[ar_id];
  CHECK(ar.bytes == 4'000'000);  // P·q/p/N
  CHECK(ar.comm() == fp.replicate_comm[5]);
  CHECK(ar.duration_s == Approx(2 * (1e-5 + 0.5 * 4e6 / 1e9)));
  CHECK(dep_labels(fp, ar_id) == std::vector<std::string>{"RS layer.0 (it0 mb0)"});
  CHECK(std::string(fp.program.streams[ar.stream].name) == "all_reduce");
  // The wait-reduce marker waits for the step's last reduce-scatter and all-reduce.
  CHECK(dep_labels(fp, find_op(fp, 5, "wait reduce (it0)")) ==
        std::vector<std::string>{"RS layer.0 (it0 mb0)", "AR layer.0 (it0 mb0)"});

  s.collective_model = CollectiveModel::kAlphaBeta;
  CHECK(collective_time_s(s, CollectiveKind::kAllGather, 8'000'000, 4) == Approx(0.00601));
  CHECK(collective_time_s(s, CollectiveKind::kAllReduce, 4'000'000, 2) == Approx(1e-5 + 0.004));
  FsdpProgram ab = lower_fsdp(s);
  CHECK(ab.program.ops[find_op(ab, 5, "AG layer.0 (it0 fwd)")].duration_s == Approx(0.00601));
  CHECK(ab.program.ops[find_op(ab, 5, "AR layer.0 (it0 mb0)")].duration_s == Approx(0.00401));
}

TEST_CASE("hsdp builds shard groups of consecutive ranks and strided replicate groups", "[fsdp-lower]") {
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp1);
  s.ranks = 8;
  s.replicate_size = 2;
  FsdpProgram fp = lower_fsdp(s);
  const auto& comms = fp.program.comms;
  REQUIRE(comms.size() == 6);
  CHECK(comms[fp.shard_comm[5]].name == "shard 1");
  CHECK(comms[fp.shard_comm[5]].ranks == std::vector<int32_t>{4, 5, 6, 7});
  CHECK(comms[fp.replicate_comm[5]].name == "replicate 1");
  CHECK(comms[fp.replicate_comm[5]].ranks == std::vector<int32_t>{1, 5});
  CHECK(count(fp, 5, FsdpOpKind::kAllReduce) == 6);
  FsdpProgram plain = lower_fsdp(make_spec(FsdpImplementation::kFsdp1));
  CHECK(plain.replicate_comm == std::vector<int32_t>{-1, -1, -1, -1});
  CHECK(plain.program.rank_streams[0].size() == 3);
}

TEST_CASE("shard-group volume per step is (N-1)/N times the parameters times 2 + q/p", "[fsdp-lower]") {
  for (FsdpImplementation impl : kAllImpls)
    for (int q : {2, 4}) {
      INFO("implementation " << static_cast<int>(impl) << ", reduce dtype bytes " << q);
      FsdpSpec s = make_spec(impl, 3, 6'000'000);
      s.units[1].params_bytes = 2'000'000;
      s.reduce_dtype = DType{q == 2 ? "bf16" : "fp32", q};
      FsdpProgram fp = lower_fsdp(s);
      const double params = 6e6 + 2e6 + 6e6;
      for (int it : {0, 1}) CHECK(shard_volume(fp, 0, it) == Approx(0.75 * params * (2.0 + q / 2.0)));
      if (q == 2) CHECK(shard_volume(fp, 0, 0) == Approx(3 * 0.75 * params));  // 3x the parameters
    }
}

TEST_CASE("fsdp1 limit_all_gathers makes the j-th all-gather wait for the (j-2)-th reshard", "[fsdp-lower]") {
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp1, 4);
  s.forward_prefetch_fsdp1 = true;
  FsdpProgram fp = lower_fsdp(s);
  std::vector<OpId> ags, reshards;
  for (OpId id = 0; id < static_cast<OpId>(fp.program.ops.size()); ++id) {
    if (fp.program.ops[id].rank != 0) continue;
    if (fp.info[id].kind == FsdpOpKind::kAllGather) ags.push_back(id);
    if (fp.info[id].kind == FsdpOpKind::kReshard) reshards.push_back(id);
  }
  REQUIRE(ags.size() == 16);
  CHECK(dep_labels(fp, ags[0]).empty());
  CHECK(dep_labels(fp, ags[1]).empty());
  for (size_t j = 2; j < ags.size(); ++j) {
    INFO("all-gather " << j << " " << fp.program.label(ags[j]));
    // From step 1 on, gathers also read the shards the previous optimizer step wrote.
    std::vector<std::string> expect{fp.program.label(reshards[j - 2])};
    if (fp.info[ags[j]].iteration > 0) expect.insert(expect.begin(), "optimizer (it0)");
    CHECK(dep_labels(fp, ags[j]) == expect);
  }
  // With forward_prefetch, layer.2's gather is issued after layer.1's wait, before F layer.1.
  CHECK(dep_labels(fp, find_op(fp, 0, "AG layer.2 (it0 fwd)")) ==
        std::vector<std::string>{"reshard layer.0 (it0 fwd)"});
  std::vector<std::string> l = labels(fp, 0);
  auto at = [&](const std::string& x) { return std::find(l.begin(), l.end(), x) - l.begin(); };
  CHECK(at("AG layer.2 (it0 fwd)") == at("wait AG layer.1 (it0 fwd)") + 1);
  CHECK(at("AG layer.2 (it0 fwd)") < at("F layer.1 (it0 mb0)"));

  s.limit_all_gathers = false;
  FsdpProgram free_running = lower_fsdp(s);
  for (OpId id = 0; id < static_cast<OpId>(free_running.program.ops.size()); ++id)
    if (free_running.info[id].kind == FsdpOpKind::kAllGather)
      CHECK(dep_labels(free_running, id) ==
            (free_running.info[id].iteration > 0 ? std::vector<std::string>{"optimizer (it0)"} : std::vector<std::string>{}));
}

TEST_CASE("fsdp1 backward prefetch places the previous unit's gather before or after the backward", "[fsdp-lower]") {
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp1);
  s.iterations = 1;
  auto order = [&](BackwardPrefetch bp) {
    s.backward_prefetch_fsdp1 = bp;
    FsdpProgram fp = lower_fsdp(s);
    std::vector<std::string> l = labels(fp, 0);
    auto at = [&](const std::string& x) { return std::find(l.begin(), l.end(), x) - l.begin(); };
    return std::make_pair(at("AG layer.1 (it0 bwd)"), at("B layer.2 (it0 mb0)"));
  };
  auto pre = order(BackwardPrefetch::kPre);
  CHECK(pre.first < pre.second);
  auto post = order(BackwardPrefetch::kPost);
  CHECK(post.first == post.second + 2);  // after B and its reshard, before RS
  // POST prefetches once the gradient exists: the all-gather waits for the backward (an event).
  s.backward_prefetch_fsdp1 = BackwardPrefetch::kPost;
  FsdpProgram posted = lower_fsdp(s);
  std::vector<std::string> ag_deps = dep_labels(posted, find_op(posted, 0, "AG layer.1 (it0 bwd)"));
  CHECK(std::find(ag_deps.begin(), ag_deps.end(), "B layer.2 (it0 mb0)") != ag_deps.end());
  auto none = order(BackwardPrefetch::kNone);
  CHECK(none.first > none.second + 2);   // at layer.1's own pre-backward, after RS layer.2
  FsdpProgram fp = lower_fsdp(s);
  OpId rs = find_op(fp, 0, "RS layer.2 (it0 mb0)");
  CHECK(dep_labels(fp, rs) == std::vector<std::string>{"B layer.2 (it0 mb0)"});
  CHECK(std::string(fp.program.streams[fp.program.ops[rs].stream].name) == "reduce_scatter");
}

TEST_CASE("zero3 prefetch stops at the bucket and live-parameter bounds", "[fsdp-lower]") {
  // 4 units of 1000 parameters (2000 bytes bf16); at most 2500 live parameters.
  FsdpSpec s = make_spec(FsdpImplementation::kZero3, 4, 2000);
  s.prefetch_bucket_size = 2000;
  s.max_live_parameters = 2500;
  s.iterations = 1;
  FsdpProgram fp = lower_fsdp(s);
  CHECK(fp.program.validate() == "");
  std::vector<std::string> l = labels(fp, 0);
  std::vector<std::string> head(l.begin(), l.begin() + 6);
  CHECK(head == std::vector<std::string>{"AG layer.0 (it0 fwd)", "AG layer.1 (it0 fwd)", "wait AG layer.0 (it0 fwd)",
                                         "F layer.0 (it0 mb0)", "reshard layer.0 (it0 fwd)",
                                         "AG layer.2 (it0 fwd)"});
  // Gathers of a hook wait for the compute op issued before the hook.
  CHECK(dep_labels(fp, find_op(fp, 0, "AG layer.0 (it0 fwd)")).empty());
  CHECK(dep_labels(fp, find_op(fp, 0, "AG layer.2 (it0 fwd)")) ==
        std::vector<std::string>{"reshard layer.0 (it0 fwd)"});
  // DeepSpeed checks the elements in flight before adding one: a bucket smaller than one unit
  // still prefetches one unit; a bucket of 0 prefetches nothing.
  s.prefetch_bucket_size = 500;
  FsdpProgram one = lower_fsdp(s);
  CHECK(labels(one, 0)[1] == "AG layer.1 (it0 fwd)");
  CHECK(peak_param_bytes(one, 0) == 4000);
  s.prefetch_bucket_size = 0;
  FsdpProgram none = lower_fsdp(s);
  std::vector<std::string> l2 = labels(none, 0);
  CHECK(l2[1] == "wait AG layer.0 (it0 fwd)");
  CHECK(peak_param_bytes(none, 0) == 2000);
}

TEST_CASE("static bytes are the parameter shard and optimizer state appears in step 0 only", "[fsdp-lower]") {
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp2, 3, 8'000'000);
  s.units[2].params_bytes = 4'000'000;
  FsdpProgram fp = lower_fsdp(s);
  CHECK(fp.program.static_bytes_per_rank == std::vector<int64_t>(4, 5'000'000));
  // 10M parameters / 4 ranks · 8 bytes.
  const int64_t state = 20'000'000;
  for (int it : {0, 1}) {
    OpId opt = find_op(fp, 2, fmt::format("optimizer (it{})", it));
    int64_t allocated = 0, shards_freed = 0;
    for (const MemEffect* m = fp.program.mem_begin(opt); m != fp.program.mem_end(opt); ++m) {
      std::string kind = fp.program.buffers[m->buffer].kind.c_str();
      if (kind == "optimizer-state") allocated += m->bytes;
      if (kind == "grad-shard" && m->at_end) shards_freed -= m->bytes;
    }
    CHECK(allocated == (it == 0 ? state : 0));
    CHECK(shards_freed == 5'000'000);  // P·q/p/N over the units
    CHECK(fp.program.ops[opt].duration_s == 0.001);
  }
  // Every compute op reads the param buffer of its unit.
  for (OpId id = 0; id < static_cast<OpId>(fp.program.ops.size()); ++id) {
    FsdpOpKind k = fp.info[id].kind;
    if (k != FsdpOpKind::kForward && k != FsdpOpKind::kBackward) continue;
    REQUIRE(fp.program.uses_end(id) - fp.program.uses_begin(id) == 1);
    const Buffer& b = fp.program.buffers[*fp.program.uses_begin(id)];
    CHECK(std::string(b.kind) == "param");
    CHECK(b.stage == fp.info[id].unit);
    CHECK(b.rank == fp.program.ops[id].rank);
  }
}

TEST_CASE("generated fsdp programs run to completion and a rank that skips a unit hangs", "[fsdp-lower]") {
  for (FsdpImplementation impl : kAllImpls) {
    INFO("implementation " << static_cast<int>(impl));
    FsdpSpec s = make_spec(impl);
    s.ranks = 8;
    s.replicate_size = 2;
    s.microbatches = 2;
    ExecutionResult ok = execute(lower_fsdp(s).program);
    CHECK(ok.completed);
    CHECK(ok.findings.empty());
    s.overrides[1].skip_units = {"layer.1"};
    ExecutionResult hang = execute(lower_fsdp(s).program);
    CHECK_FALSE(hang.completed);
    REQUIRE_FALSE(hang.findings.empty());
    CHECK(hang.findings[0].kind == FindingKind::kDeadlock);
  }
}

TEST_CASE("fsdp2 step time hides every collective but the first gather and the last reduce-scatter",
          "[fsdp-lower]") {
  // 2 ranks, 2 units: all-gather and reduce-scatter 1e-5 + 0.5 · 8e6 / 1e9 = 0.00401 s each;
  // F 0.01, B 0.02 per unit, optimizer 0.001.
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp2, 2);
  s.ranks = 2;
  s.shard_size = 2;
  s.iterations = 1;
  FsdpProgram fp = lower_fsdp(s);
  ExecutionResult ex = execute(fp.program);
  REQUIRE(ex.completed);
  Timeline t = simulate(fp.program, ex.order);
  CHECK(t.makespan_s == Approx(0.00401 + 2 * 0.01 + 2 * 0.02 + 0.00401 + 0.001));
  CHECK(t.ops[find_op(fp, 0, "F layer.1 (it0 mb0)")].start_s == Approx(0.01401));
  CHECK(t.ops[find_op(fp, 0, "AG layer.0 (it0 bwd)")].start_s == Approx(0.02401));
  CHECK(t.ops[find_op(fp, 0, "RS layer.1 (it0 mb0)")].start_s == Approx(0.04401));
}

TEST_CASE("explicit programs report a forward before any gather and a free of a freed unit", "[fsdp-lower]") {
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp2, 2);
  s.ranks = 2;
  s.shard_size = 2;
  auto op = [](std::string kind, std::string unit, std::string id, std::vector<std::string> after, int line) {
    FsdpProgramOp o;
    o.kind = std::move(kind);
    o.unit = std::move(unit);
    o.id = std::move(id);
    o.after = std::move(after);
    o.loc = SourceLoc{0, line, 7};
    return o;
  };
  s.programs[-1] = {op("all_gather", "layer.0", "ag0", {}, 20),  op("forward", "layer.0", "f0", {"ag0"}, 21),
                    op("free", "layer.0", "", {"f0"}, 22),         op("all_gather", "layer.0", "ag0b", {}, 23),
                    op("backward", "layer.0", "b0", {"ag0b"}, 24), op("free", "layer.0", "", {}, 25),
                    op("reduce_scatter", "layer.0", "rs0", {"b0"}, 26), op("optimizer", "", "", {"rs0"}, 27)};
  s.programs[1] = {op("forward", "layer.1", "f1", {}, 30), op("all_gather", "layer.1", "", {}, 31),
                   op("free", "layer.1", "", {}, 32), op("free", "layer.1", "", {}, 33)};
  FsdpProgram fp = lower_fsdp(s);
  CHECK(fp.program.validate() == "");
  REQUIRE(fp.findings.size() == 2);
  const Finding& f = fp.findings[0];
  CHECK(f.kind == FindingKind::kResidency);
  CHECK(f.ranks == std::vector<int>{1});
  CHECK(f.ops == std::vector<std::string>{"F layer.1 (f1)"});
  REQUIRE(f.locations.size() == 1);
  CHECK(f.locations[0].line == 30);
  CHECK(f.message == "rank 1 runs forward of layer.1 while its parameters are not gathered (F layer.1 (f1))");
  CHECK(fp.findings[1].ops == std::vector<std::string>{"free layer.1 (#3)"});
  CHECK(fp.findings[1].locations[0].line == 33);
  // Rank 0 follows the default program: its ops, streams, deps and memory effects.
  CHECK(labels(fp, 0).size() == 8);
  OpId f0 = find_op(fp, 0, "F layer.0 (f0)");
  CHECK(dep_labels(fp, f0) == std::vector<std::string>{"AG layer.0 (ag0)"});
  CHECK(fp.program.uses_end(f0) - fp.program.uses_begin(f0) == 1);
  OpId rs = find_op(fp, 0, "RS layer.0 (rs0)");
  CHECK(std::string(fp.program.streams[fp.program.ops[rs].stream].name) == "reduce_scatter");
  CHECK(fp.program.ops[rs].comm() == fp.shard_comm[0]);
  CHECK(fp.program.mem_end(rs) - fp.program.mem_begin(rs) == 1);
  CHECK(fp.program.mem_begin(rs)->bytes == -8'000'000);
  CHECK(fp.program.rank_streams[0].size() == 3);
  // The all-gathers of both ranks pair up on the shard group.
  const Communicator& c = fp.program.comms[fp.shard_comm[0]];
  CHECK(c.ops[0].size() == 3);
  CHECK(c.ops[1].size() == 1);
}

TEST_CASE("fsdp2's reserve holds the all-gather outputs and the gradient shards in their own pools", "[fsdp-lower]") {
  // FSDP2 allocates each all-gather output on its all-gather copy-in stream and the gradient
  // shards (views of the reduce-scatter output) on its reduce-scatter stream
  // (docs/facts/activation-memory.md#reserved-memory). 3 units of 8 MB on 4 ranks: the
  // reduce-scatter pool peaks at the step's 3 · 2 MB = 6 MB of shards, the copy-in pool at one
  // 8 MB output (each copy-in frees the output before it). The live peak (72.002 MB: static 6,
  // optimizer state 24, two gathered units 16, a gradient 8, a reduce-scatter input 8,
  // activations 0.002, and 10 MB in the side pools) falls when step 1's first shard (2 MB) is
  // written and one output (8 MB) is live, so the reserve is the peak + (8 − 8) + (6 − 2) MB.
  for (auto impl : {FsdpImplementation::kFsdp2, FsdpImplementation::kFsdp1}) {
    FsdpSpec s = make_spec(impl);
    FsdpProgram fp = lower_fsdp(s);
    ExecutionResult ex = execute(fp.program);
    REQUIRE(ex.completed);
    const Timeline t = simulate(fp.program, ex.order);
    std::array<int64_t, kNumMemPools> pool_bytes{};
    for (const Buffer& b : fp.program.buffers)
      if (b.rank == 0) pool_bytes[b.pool] = std::max(pool_bytes[b.pool], b.bytes);
    INFO("implementation " << static_cast<int>(impl) << ": peak " << t.peak_bytes_per_rank[0] << ", reserved "
                           << t.reserved_bytes_per_rank[0]);
    if (impl == FsdpImplementation::kFsdp1) {
      // FSDP1's buffers are all in the compute pool here: the reserve is the peak.
      CHECK(pool_bytes[kPoolAllGatherCopyIn] == 0);
      CHECK(pool_bytes[kPoolReduceScatter] == 0);
      CHECK(t.reserved_bytes_per_rank[0] == t.peak_bytes_per_rank[0]);
      continue;
    }
    CHECK(pool_bytes[kPoolAllGatherCopyIn] == 8'000'000);
    CHECK(pool_bytes[kPoolReduceScatter] == 2'000'000);
    CHECK(t.peak_bytes_per_rank[0] == 72'002'000);
    CHECK(t.reserved_bytes_per_rank[0] == 76'002'000);
  }
}

}  // namespace sc

namespace sc {

TEST_CASE("a unit's stranded block is a reserve hold from its forward to its backward", "[fsdp-lower]") {
  // The last unit stands for a loss: 60 MB of transients in its forward, 80 MB in its backward,
  // and a 20 MB block its forward frees that its backward cannot reuse
  // (docs/facts/activation-memory.md#the-loss-region). The 80 MB backward is the rank's live
  // peak, inside the hold, so the reserve is that peak + 20 MB; the live peak is the same as
  // without the block. FSDP1 keeps every buffer in the compute pool, so nothing else separates
  // the reserve from the peak.
  FsdpSpec s = make_spec(FsdpImplementation::kFsdp1);
  s.units.back().transient_bytes = 60'000'000;
  s.units.back().backward_transient_bytes = 80'000'000;
  const FsdpProgram without = lower_fsdp(s);
  s.units.back().stranded_bytes = 20'000'000;
  const FsdpProgram fp = lower_fsdp(s);
  REQUIRE(fp.program.validate().empty());
  // One hold per rank, step and microbatch, from the last unit's forward to its backward.
  REQUIRE(fp.program.reserve_holds.size() == 4 * 2);
  for (const ReserveHold& h : fp.program.reserve_holds) {
    CHECK(h.bytes == 20'000'000);
    CHECK(std::string(fp.program.names[fp.program.ops[h.from].name()]).starts_with("F layer.2"));
    CHECK(std::string(fp.program.names[fp.program.ops[h.to].name()]).starts_with("B layer.2"));
  }
  const ExecutionResult ex = execute(fp.program), ex0 = execute(without.program);
  REQUIRE(ex.completed);
  REQUIRE(ex0.completed);
  const Timeline t = simulate(fp.program, ex.order), t0 = simulate(without.program, ex0.order);
  CHECK(t.peak_bytes_per_rank == t0.peak_bytes_per_rank);
  CHECK(t0.reserved_bytes_per_rank[0] == t0.peak_bytes_per_rank[0]);
  CHECK(t.reserved_bytes_per_rank[0] == t.peak_bytes_per_rank[0] + 20'000'000);
}

}  // namespace sc
