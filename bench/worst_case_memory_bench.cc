// Benchmark of worst_case_memory on 1F1B-shaped programs with a comm stream per rank.
//
// Usage: worst_case_memory_bench [ranks] [ops...]   (defaults: 8 ranks, 10000 and 100000 ops)
// Each rank has a compute stream (F allocates the microbatch's activation at start, B frees it
// at end, 1F1B order) and a comm stream with the rank's sends and recvs, each holding a small
// message buffer while it runs, so every rank has effects on two streams and is solved by the
// minimum cut. Semantics are eager: with one in-order comm stream per rank, this 1F1B issue
// order deadlocks under rendezvous (a send waits for a recv queued behind the peer's send).
// Prints ops, seconds of worst_case_memory() and the process's peak resident set (getrusage).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "graph/worst_case_memory.h"
#include "ir/program.h"

namespace {

constexpr int64_t kActivationBytes = 1 << 20;
constexpr int64_t kMessageBytes = 1 << 12;

/// Peak resident set of this process so far, in MiB (ru_maxrss is in KiB on Linux).
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

/// The 1F1B compute order of a stage: (kind 'F' or 'B', microbatch).
std::vector<std::pair<char, int>> one_f_one_b(int stage, int stages, int microbatches) {
  std::vector<std::pair<char, int>> order;
  const int warm = std::min(stages - stage - 1, microbatches);
  int f = 0, b = 0;
  for (; f < warm; ++f) order.emplace_back('F', f);
  while (f < microbatches) {
    order.emplace_back('F', f++);
    order.emplace_back('B', b++);
  }
  while (b < microbatches) order.emplace_back('B', b++);
  return order;
}

/// Builds the program: stage r on rank r, activations sent r -> r+1, gradients r+1 -> r.
sc::Program build_1f1b(int ranks, int microbatches) {
  sc::Program p;
  p.num_ranks = ranks;
  p.semantics = sc::Semantics{sc::Semantics::kEager, 0};
  p.static_bytes_per_rank.assign(ranks, 64 * kActivationBytes);
  std::vector<int32_t> compute(ranks), comm(ranks);
  for (int r = 0; r < ranks; ++r) {
    compute[r] = p.add_stream(r, "compute");
    comm[r] = p.add_stream(r, "comm");
  }
  auto buffer = [&](int r, int m, const char* kind, int64_t bytes) {
    p.buffers.push_back(sc::Buffer{r, r, m, kind, bytes});
    return static_cast<int32_t>(p.buffers.size() - 1);
  };
  auto hold = [&](sc::OpId op, int32_t buf, int64_t bytes) {
    p.add_mem(op, sc::MemEffect{buf, bytes, false});
    p.add_mem(op, sc::MemEffect{buf, -bytes, true});
  };
  auto p2p = [&](bool send, int r, int peer, int m, sc::OpId after) {
    sc::Op o;
    o.kind = send ? sc::OpKind::kSend : sc::OpKind::kRecv;
    o.rank = r;
    o.stream = comm[r];
    o.set_peer(peer);
    o.set_channel(send ? p.channel_for(r, peer) : p.channel_for(peer, r));
    o.bytes = kMessageBytes;
    const sc::OpId id = p.add_op(o);
    if (after != sc::kNoOp) p.add_dep(id, sc::Dep{after, sc::DepKind::kLocal});
    hold(id, buffer(r, m, "msg", kMessageBytes), kMessageBytes);
    auto& ch = p.channels[o.channel()];
    (send ? ch.sends : ch.recvs).push_back(id);
    return id;
  };
  for (int r = 0; r < ranks; ++r) {
    std::vector<int32_t> act(microbatches);
    for (auto [kind, m] : one_f_one_b(r, ranks, microbatches)) {
      const bool fwd = kind == 'F';
      const int from = fwd ? r - 1 : r + 1;  // where the input comes from
      const int to = fwd ? r + 1 : r - 1;    // where the output goes
      const sc::OpId recv = from >= 0 && from < ranks ? p2p(false, r, from, m, sc::kNoOp) : sc::kNoOp;
      sc::Op o;
      o.kind = sc::OpKind::kCompute;
      o.rank = r;
      o.stream = compute[r];
      o.duration_s = fwd ? 1.0 : 2.0;
      o.num_actions = 1;
      o.actions[0] = sc::Action{fwd ? sc::ActionKind::kF : sc::ActionKind::kB, r, m};
      const sc::OpId id = p.add_op(o);
      if (recv != sc::kNoOp) p.add_dep(id, sc::Dep{recv, sc::DepKind::kLocal});
      if (fwd) {
        act[m] = buffer(r, m, "act", kActivationBytes);
        p.add_mem(id, sc::MemEffect{act[m], kActivationBytes, false});
      } else {
        p.add_mem(id, sc::MemEffect{act[m], -kActivationBytes, true});
      }
      if (to >= 0 && to < ranks) p2p(true, r, to, m, id);
    }
  }
  p.match_channels();
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 8;
  std::vector<long> targets;
  for (int i = 2; i < argc; ++i) targets.push_back(std::atol(argv[i]));
  if (targets.empty()) targets = {10000, 100000};
  if (ranks < 2) {
    std::fprintf(stderr, "worst_case_memory_bench: ranks must be at least 2\n");
    return 2;
  }
  const long ops_per_microbatch = 6L * ranks - 4;  // 2 compute per rank, 4 P2P per link
  std::printf("%8s %6s %10s %10s %14s %14s\n", "ops", "ranks", "min_cut", "seconds", "rss_built_mib",
              "peak_rss_mib");
  for (long target : targets) {
    const int microbatches = static_cast<int>(std::max(1L, target / ops_per_microbatch));
    const sc::Program p = build_1f1b(ranks, microbatches);
    const std::string problem = p.validate();
    if (!problem.empty()) {
      std::fprintf(stderr, "worst_case_memory_bench: invalid program: %s\n", problem.c_str());
      return 1;
    }
    const double rss_built = peak_rss_mib();
    const auto t0 = std::chrono::steady_clock::now();
    const sc::WorstCaseMemory w = sc::worst_case_memory(p);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int min_cut = 0;
    for (uint8_t u : w.used_min_cut) min_cut += u;
    std::printf("%8zu %6d %10d %10.3f %14.1f %14.1f\n", p.ops.size(), ranks, min_cut, seconds, rss_built,
                peak_rss_mib());
    // Sanity: rank r holds at most (ranks - r) activations, plus one message buffer at a time.
    for (int r = 0; r < ranks; ++r) {
      const int64_t act = (w.bytes_per_rank[r] - p.static_bytes_per_rank[r]) / kActivationBytes;
      if (act != std::min(ranks - r, microbatches)) {
        std::fprintf(stderr, "worst_case_memory_bench: rank %d holds %lld activations at worst\n", r,
                     static_cast<long long>(act));
        return 1;
      }
    }
  }
  return 0;
}
