// Differential check of the SMT engine against the graph engine on mutated schedules.
#include "solver/smt_differential.h"

#include <random>

#include <fmt/format.h>

#include "pipeline/generators.h"
#include "pipeline/lower_comms.h"

namespace sc {
namespace {

std::string schedule_text(const PipelineSpec& s) {
  std::string out;
  for (size_t r = 0; r < s.actions.size(); ++r) {
    out += fmt::format("  {}:", r);
    for (const auto& st : s.actions[r]) out += " " + format_step(st);
    out += "\n";
  }
  return out;
}

std::string bytes_text(const std::vector<int64_t>& v) {
  std::string out;
  for (int64_t b : v) out += fmt::format(" {}", b);
  return out;
}

std::vector<PipelineSpec> lowered_bases() {
  std::vector<PipelineSpec> out;
  struct Shape {
    const char* name;
    int32_t p, m;
  };
  for (Shape sh : {Shape{"1f1b", 2, 3}, Shape{"zb-h1", 3, 3}, Shape{"interleaved-1f1b", 2, 4}, Shape{"zb-v", 2, 4},
                   Shape{"gpipe", 3, 2}}) {
    auto g = generate(GenOptions{sh.name, sh.p, sh.m, std::nullopt, std::nullopt, false});
    if (!g) continue;
    PipelineSpec base = to_pipeline_spec(*g);
    for (auto policy : {LowerPolicy::kPyTorch, LowerPolicy::kDeferred}) {
      std::string why;
      auto lowered = lower_comms(base.actions, base.stage_to_rank, policy, &why, base.pipeline_starts);
      if (!lowered) continue;
      PipelineSpec s = base;
      s.name = fmt::format("{}-p{}-m{}-{}", sh.name, sh.p, sh.m, policy == LowerPolicy::kPyTorch ? "pytorch" : "deferred");
      s.actions = *lowered;
      out.push_back(s);
    }
  }
  // A skip connection from stage 0 to stage 2 beside 1F1B's messages at p = 3 (`0SEND_F0>2`,
  // `2RECV_F0<0`, the gradient back as `2SEND_B0>0`, `0RECV_B0<2`): each skip send right after
  // the neighbour's, each skip receive right before the compute it feeds.
  if (auto g = generate(GenOptions{"1f1b", 3, 3, std::nullopt, std::nullopt, false})) {
    PipelineSpec base = to_pipeline_spec(*g);
    std::string why;
    if (auto lowered = lower_comms(base.actions, base.stage_to_rank, LowerPolicy::kPyTorch, &why, base.pipeline_starts)) {
      PipelineSpec s = base;
      s.name = "1f1b-p3-m3-skip";
      for (auto& row : *lowered) {
        std::vector<Step> with;
        for (const Step& st : row) {
          const Action& a = st.first;
          auto skip = [&](ActionKind k, int32_t stage, int32_t peer) {
            Step x = st;
            x.first = Action{k, stage, a.microbatch};
            x.second.reset();
            x.peer_stage = peer;
            return x;
          };
          if (a.kind == ActionKind::kF && a.stage == 2) with.push_back(skip(ActionKind::kRecvF, 2, 0));
          if (a.kind == ActionKind::kB && a.stage == 0) with.push_back(skip(ActionKind::kRecvB, 0, 2));
          with.push_back(st);
          if (a.kind == ActionKind::kSendF && a.stage == 0) with.push_back(skip(ActionKind::kSendF, 0, 2));
          if (a.kind == ActionKind::kB && a.stage == 2) with.push_back(skip(ActionKind::kSendB, 2, 0));
        }
        row = std::move(with);
      }
      s.actions = *lowered;
      out.push_back(s);
    }
  }
  return out;
}

void mutate(PipelineSpec& s, std::mt19937& rng) {
  int r = std::uniform_int_distribution<int>(0, s.ranks - 1)(rng);
  auto& row = s.actions[r];
  if (row.size() < 2) return;
  int what = std::uniform_int_distribution<int>(0, 2)(rng);
  std::vector<size_t> p2p;
  for (size_t i = 0; i < row.size(); ++i)
    if (is_p2p(row[i].first.kind) && !row[i].is_overlap()) p2p.push_back(i);
  if (what == 0 || p2p.empty()) {
    size_t i = std::uniform_int_distribution<size_t>(0, row.size() - 2)(rng);
    std::swap(row[i], row[i + 1]);
  } else if (what == 1) {
    std::vector<size_t> recvs;
    for (size_t i : p2p)
      if (!is_send(row[i].first.kind)) recvs.push_back(i);
    if (recvs.empty()) recvs = p2p;
    size_t from = recvs[std::uniform_int_distribution<size_t>(0, recvs.size() - 1)(rng)];
    Step st = row[from];
    row.erase(row.begin() + static_cast<long>(from));
    size_t to = std::uniform_int_distribution<size_t>(0, row.size())(rng);
    row.insert(row.begin() + static_cast<long>(to), st);
  } else {
    size_t at = p2p[std::uniform_int_distribution<size_t>(0, p2p.size() - 1)(rng)];
    row.erase(row.begin() + static_cast<long>(at));
  }
}

// Makes two neighbouring P2P steps of a random rank one BATCH group, when there are such steps
// that are not batched yet: the engines must agree on groups under every semantics.
void group_pair(PipelineSpec& s, std::mt19937& rng) {
  int r = std::uniform_int_distribution<int>(0, s.ranks - 1)(rng);
  auto& row = s.actions[r];
  std::vector<size_t> starts;
  for (size_t i = 0; i + 1 < row.size(); ++i)
    if (is_p2p(row[i].first.kind) && is_p2p(row[i + 1].first.kind) && !row[i].is_batched() && !row[i + 1].is_batched() &&
        !row[i].is_overlap() && !row[i + 1].is_overlap() &&
        !(row[i].first == row[i + 1].first && row[i].peer_stage == row[i + 1].peer_stage))
      starts.push_back(i);
  if (starts.empty()) return;
  size_t i = starts[std::uniform_int_distribution<size_t>(0, starts.size() - 1)(rng)];
  row[i].batched_with_next = true;
  row[i].in_batch = true;
  row[i + 1].in_batch = true;
}

}  // namespace

bool differential_case(const PipelineSpec& spec, const VerifyOptions& options, const SmtOptions& smt,
                       const std::string& what, DifferentialTally& tally,
                       const std::function<void(const std::string&)>& report) {
  VerifyResult r = verify(spec, options);
  SmtVerdict v = smt_check(r.program, smt);
  ++tally.cases;
  tally.smt_seconds += v.seconds;
  if (!r.execution.completed) ++tally.deadlocks;
  int64_t done = 0;
  for (uint8_t d : r.execution.done) done += d;
  bool agree = !v.inconclusive && v.completes == r.execution.completed && v.completed_ops == done;
  if (agree && v.completes) agree = r.worst_case && v.worst_case_bytes_per_rank == r.worst_case->bytes_per_rank;
  if (agree) return true;
  ++tally.disagreements;
  if (report)
    report(fmt::format("engines disagree on {} (semantics {}): graph completes={} done={} worst={}; smt completes={} "
                       "done={} worst={}{}\n{}",
                       what, format_semantics(r.program.semantics), r.execution.completed, done,
                       r.worst_case ? bytes_text(r.worst_case->bytes_per_rank) : std::string(" -"), v.completes,
                       v.completed_ops, bytes_text(v.worst_case_bytes_per_rank),
                       v.inconclusive ? " (inconclusive: " + v.message + ")" : std::string(), schedule_text(r.spec)));
  return false;
}

DifferentialTally run_mutation_differential(int64_t cases, uint32_t seed, const SmtOptions& smt,
                                            const std::function<void(const std::string&)>& report) {
  std::mt19937 rng(seed);
  std::vector<PipelineSpec> bases = lowered_bases();
  const Semantics sems[] = {{Semantics::kEager, 0}, {Semantics::kRendezvous, 0}, {Semantics::kBuffered, 1},
                            {Semantics::kBuffered, 2}, {Semantics::kRendezvous, 0, true}};
  DifferentialTally tally;
  if (bases.empty()) return tally;
  for (int64_t k = 0; k < cases; ++k) {
    const PipelineSpec& base = bases[static_cast<size_t>(k) % bases.size()];
    PipelineSpec s = base;
    int times = 1 + std::uniform_int_distribution<int>(0, 2)(rng);
    for (int i = 0; i < times; ++i) mutate(s, rng);
    if (std::uniform_int_distribution<int>(0, 1)(rng)) group_pair(s, rng);
    VerifyOptions opt;
    opt.semantics = sems[static_cast<size_t>(k / static_cast<int64_t>(bases.size())) % std::size(sems)];
    differential_case(s, opt, smt, fmt::format("mutation {} of {}", k, base.name), tally, report);
  }
  return tally;
}

}  // namespace sc
