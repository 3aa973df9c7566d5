#include "cli/synth_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "cli/progress.h"
#include "config/lower_job.h"
#include "config/toml_edit.h"
#include "pipeline/named_schedule.h"
#include "pipeline/verify_pipeline.h"
#include "spec/yaml_util.h"

namespace sc::cli {
namespace {

using config::TrainingJob;

using Named = config::TorchtitanSchedule;

/// Megatron-LM's named schedules (schedcheck's names; the interleaved one at the config's virtual stages).
const std::vector<Named>& megatron_schedules() {
  static const std::vector<Named> table = {{"1F1B", "1f1b", false, false},
                                           {"interleaved 1F1B", "interleaved-1f1b", true, false}};
  return table;
}

/// One placement synthesis searches, with the torchtitan class whose stages it uses and a named
/// schedule of that placement that any microbatch count admits (to resolve the placement).
struct Placement {
  int32_t v;             ///< stages per rank
  bool v_shape;          ///< V placement
  const char* torch;     ///< the class the emitted config names
  const char* ours;      ///< TrainingJob::schedule of a synthesised order (its placement)
  const char* resolver;  ///< a named schedule of this placement without a microbatch rule
};

/// `base` with schedule `ours` at `v` stages per rank and the torchtitan split of the weights
/// (Megatron-LM: the config's split where it has this stage count, else an even one). False
/// with `why` when the split does not exist.
bool make_variant(const TrainingJob& base, int64_t layers, const std::string& ours, int32_t v, int64_t in_w,
                  int64_t out_w, TrainingJob* out, std::string* why) {
  TrainingJob j = base;
  j.schedule = ours;
  j.stages_per_rank = v;
  j.schedule_actions.clear();
  j.schedule_csv.clear();
  const int32_t stages = base.layout.pp * v;
  if (base.framework == "torchtitan") {
    // With pipeline_parallel_layers_per_stage in the config, torchtitan takes the stage count
    // from it; a config without it gives single-stage classes 1 per rank and the others 2.
    if (base.layers_per_stage > 0 && v != 1 && v != 2) {
      const int64_t count = (layers + in_w + out_w + base.layers_per_stage - 1) / base.layers_per_stage;
      if (count != stages) {
        *why = fmt::format("pipeline_parallel_layers_per_stage = {} gives {} stages with these weights, not {}",
                           base.layers_per_stage, count, stages);
        return false;
      }
    }
    std::vector<int64_t> split = config::torchtitan_stage_layers(layers, stages, in_w, out_w, why);
    if (split.empty()) return false;
    j.stage_layers = std::move(split);
    j.input_weight = in_w;
    j.output_weight = out_w;
  } else if (static_cast<int32_t>(base.stage_layers.size()) != stages) {
    j.stage_layers.clear();
  }
  *out = std::move(j);
  return true;
}

/// The first error of `d`, for a row's reason.
std::string first_error(const Diagnostics& d) {
  for (const Diagnostic& x : d.all())
    if (x.severity == Severity::kError) return x.message;
  return "it could not be lowered";
}

void verify_row(JobSchedule& s, const config::JobContext& ctx) {
  Diagnostics d;
  if (!config::verify_job(s.job, ctx, /*force_min_cut=*/false, &s.verified, d)) {
    s.why = first_error(d);
    return;
  }
  s.ran = true;
}

/// Per-stage compute of a lowered pipeline, seconds: F + I + W, and the recompute forward
/// where the stage recomputes.
std::vector<double> stage_work(const PipelineSpec& p) {
  std::vector<double> w(p.stages, 0);
  for (int32_t s = 0; s < p.stages; ++s) {
    w[s] = p.costs.f_s[s] + p.costs.i_s[s] + p.costs.w_s[s];
    if (s < static_cast<int32_t>(p.memory.recompute.size()) && p.memory.recompute[s] != Recompute::kNone)
      w[s] += p.costs.r_s.empty() ? p.costs.f_s[s] : p.costs.r_s[s];
  }
  return w;
}

/// Stage of `s` on rank: loop s mod pp, V s < pp ? s : 2pp - 1 - s.
int32_t rank_of(int32_t s, int32_t pp, bool v_shape) { return !v_shape ? s % pp : s < pp ? s : 2 * pp - 1 - s; }

/// The busiest rank's compute under a split, seconds; infinity when the split cannot be lowered.
double busiest_rank(const TrainingJob& j, const config::JobContext& ctx, bool v_shape) {
  config::LoweredJob lj;
  Diagnostics d;
  if (!config::lower_job(j, ctx, &lj, d) || lj.is_fsdp) return std::numeric_limits<double>::infinity();
  const std::vector<double> w = stage_work(lj.pipeline);
  std::vector<double> per_rank(j.layout.pp, 0);
  for (int32_t s = 0; s < lj.pipeline.stages; ++s) per_rank[rank_of(s, j.layout.pp, v_shape)] += w[s];
  return *std::max_element(per_rank.begin(), per_rank.end());
}

/// The pipeline synthesize() searches for a lowered job: recompute's forward added to I (and
/// B), activations the retained bytes, no data parallelism (the composed program's collectives
/// and model states are outside the search). `*fixed` gets what the search does not track on
/// the busiest rank: its model states and the largest recompute transient (what is live beyond
/// the retained bytes while a block recomputes).
PipelineSpec synth_view(const PipelineSpec& lowered, int64_t* fixed) {
  PipelineSpec p = lowered;
  int64_t transient = 0;
  for (int32_t s = 0; s < p.stages; ++s) {
    const bool rc = s < static_cast<int32_t>(p.memory.recompute.size()) && p.memory.recompute[s] != Recompute::kNone;
    if (!rc) continue;
    const double r = p.costs.r_s.empty() ? p.costs.f_s[s] : p.costs.r_s[s];
    p.costs.i_s[s] += r;
    p.costs.b_s[s] += r;
    const int64_t kept = s < static_cast<int32_t>(p.memory.retained_bytes.size()) ? p.memory.retained_bytes[s]
                                                                                   : p.memory.activation_bytes[s];
    transient = std::max(transient, p.memory.activation_bytes[s] - kept);
    p.memory.activation_bytes[s] = std::max<int64_t>(1, kept);
  }
  p.memory.recompute.clear();
  p.memory.retained_bytes.clear();
  std::vector<int64_t> states(p.ranks, 0);
  for (int32_t s = 0; s < p.stages && s < static_cast<int32_t>(p.memory.state_bytes.size()); ++s)
    states[p.stage_to_rank[s]] += p.memory.state_bytes[s];
  *fixed = *std::max_element(states.begin(), states.end()) + transient;
  p.memory.state_bytes.clear();
  p.composition.reset();
  p.memory.limit_bytes.reset();
  return p;
}

/// The largest timeline or worst-case peak of `r` over ranks, bytes; -1 without a timeline.
int64_t peak_of(const VerifyResult& r) {
  if (!r.timeline) return -1;
  int64_t peak = 0;
  for (int64_t b : r.timeline->peak_bytes_per_rank) peak = std::max(peak, b);
  if (r.worst_case)
    for (int64_t b : r.worst_case->bytes_per_rank) peak = std::max(peak, b);
  return peak;
}

}  // namespace

std::string JobSchedule::placement() const {
  if (job.schedule == "zb-v" || job.schedule == "dualpipev") return "V";
  return fmt::format("loop v{}", job.stages_per_rank);
}

bool synthesize_job(const TrainingJob& job, const config::JobContext& ctx, const JobSynthOptions& opt,
                    JobSynthResult* out, Diagnostics& diags) {
  JobSynthResult& res = *out;
  res = {};
  const int32_t pp = job.layout.pp;
  if (pp < 2) {
    diags.error(job.loc("pp"), "synth searches pipeline schedules: the config has no pipeline parallelism "
                               "(pipeline_parallel_degree 1)");
    return false;
  }
  config::LoweredJob base;
  if (!config::lower_job(job, ctx, &base, diags)) return false;
  const int64_t layers = base.costs.model.layers;
  const int64_t hbm = base.costs.hardware.hbm_bytes;
  const bool torchtitan = job.framework == "torchtitan";
  const int32_t m = std::max(1, job.microbatches);
  const bool config_multi_loop = job.stages_per_rank > 1 && job.schedule != "zb-v" && job.schedule != "dualpipev";
  const int32_t multi_v = config_multi_loop ? job.stages_per_rank : 2;

  // Named schedules at the config's split.
  for (const Named& n : torchtitan ? config::torchtitan_schedules() : megatron_schedules()) {
    JobSchedule s;
    s.label = n.torch;
    s.torch_name = n.torch;
    const int32_t v = !n.multi ? 1 : n.v ? 2 : multi_v;
    ProgressLine::set_detail(fmt::format("verifying {}", n.torch));
    if (!make_variant(job, layers, n.ours, v, job.input_weight, job.output_weight, &s.job, &s.why)) {
      res.schedules.push_back(std::move(s));
      continue;
    }
    s.why = config::torchtitan_microbatch_rule(n.ours, m, pp, pp * v);
    if (s.why.empty()) verify_row(s, ctx);
    res.schedules.push_back(std::move(s));
  }

  // Each named schedule's objective in the search's terms, to compare with the proven bounds.
  for (JobSchedule& n : res.schedules) {
    if (!n.holds()) continue;
    int64_t fixed = 0;
    const VerifyResult vr = verify(synth_view(n.verified.lowered.pipeline, &fixed), VerifyOptions{});
    if (vr.timeline)
      n.search_objective_s = opt.synth.objective == SynthObjective::kSpan ? vr.timeline->span_s : vr.timeline->makespan_s;
  }

  // Synthesis per placement and split.
  std::vector<Placement> places = {{1, false, "1F1B", "1f1b", "gpipe"},
                                   {multi_v, false, "Interleaved1F1B", "interleaved-1f1b", "looped-bfs"}};
  if (torchtitan) places.push_back({2, true, "ZBVZeroBubble", "zb-v", "zb-v"});
  struct Search {
    Placement place;
    int64_t in_w, out_w;
  };
  std::vector<Search> searches;
  for (const Placement& pl : places) {
    searches.push_back({pl, job.input_weight, job.output_weight});
    if (!torchtitan || !opt.search_split) continue;
    double best = std::numeric_limits<double>::infinity();
    int64_t bi = job.input_weight, bo = job.output_weight;
    for (int64_t in_w = 0; in_w <= 2; ++in_w)
      for (int64_t out_w = 0; out_w <= 4; ++out_w) {
        TrainingJob j;
        std::string why;
        if (!make_variant(job, layers, pl.resolver, pl.v, in_w, out_w, &j, &why)) continue;
        const double w = busiest_rank(j, ctx, pl.v_shape);
        if (w < best * (1 - 1e-9)) best = w, bi = in_w, bo = out_w;
      }
    // A different pair of weights may give the same blocks per stage: searched once.
    TrainingJob a, b;
    std::string why;
    if ((bi != job.input_weight || bo != job.output_weight) &&
        make_variant(job, layers, pl.resolver, pl.v, bi, bo, &a, &why) &&
        make_variant(job, layers, pl.resolver, pl.v, job.input_weight, job.output_weight, &b, &why) &&
        a.stage_layers != b.stage_layers)
      searches.push_back({pl, bi, bo});
  }
  // The memory the searches may use: given, else the fastest named schedule's peak, else HBM.
  int best_named = -1;
  for (size_t i = 0; i < res.schedules.size(); ++i)
    if (res.schedules[i].holds() && (best_named < 0 || res.schedules[i].verified.prediction.step_s <
                                                           res.schedules[best_named].verified.prediction.step_s))
      best_named = static_cast<int>(i);
  res.memory_bytes = hbm;
  res.memory_source = "HBM";
  if (opt.memory_bytes) {
    res.memory_bytes = *opt.memory_bytes;
    res.memory_source = "--memory-limit";
  } else if (opt.match_named && best_named >= 0) {
    res.memory_bytes = res.schedules[best_named].verified.prediction.need_bytes();
    res.memory_source = res.schedules[best_named].label;
  }
  SynthOptions so = opt.synth;
  // Each search gets an equal part of what is left, so one that overruns its part (Z3 answers
  // an interrupt at its next check point, seconds late on large encodings) takes it from the
  // later searches rather than adding to the total.
  const auto start = std::chrono::steady_clock::now();
  res.all_optimal = true;
  for (size_t k = 0; k < searches.size(); ++k) {
    const Search& se = searches[k];
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    so.time_limit_s = std::max(0.2, (opt.synth.time_limit_s - spent) / static_cast<double>(searches.size() - k));
    JobSchedule s;
    s.label = "synthesised";
    s.torch_name = se.place.torch;
    s.synthesised = true;
    if (!make_variant(job, layers, se.place.ours, se.place.v, se.in_w, se.out_w, &s.job, &s.why)) {
      res.all_optimal = false;
      res.schedules.push_back(std::move(s));
      continue;
    }
    // The placement's per-stage costs, through the fastest named schedule of this placement that
    // holds (run at this split), else one that any shape admits. The named one also calibrates
    // the limit: its composed peak less its peak in the search's terms is what the search does
    // not see (model states, gathered parameters, recompute transients), and it starts the
    // search as its first upper bound.
    const JobSchedule* ref = nullptr;
    for (const JobSchedule& n : res.schedules)
      if (!n.synthesised && n.holds() && n.job.stages_per_rank == se.place.v &&
          (n.job.schedule == "zb-v" || n.job.schedule == "dualpipev") == se.place.v_shape &&
          (!ref || n.verified.prediction.step_s < ref->verified.prediction.step_s))
        ref = &n;
    config::VerifiedJob rv;
    int64_t ref_peak = -1;
    Diagnostics d;
    if (ref) {
      TrainingJob rj;
      std::string why;
      if (make_variant(job, layers, ref->job.schedule, se.place.v, se.in_w, se.out_w, &rj, &why) &&
          config::verify_job(rj, ctx, false, &rv, d) && rv.exit_code == 0)
        ref_peak = peak_of(rv.result);
    }
    PipelineSpec lowered;
    if (ref_peak >= 0) {
      lowered = rv.lowered.pipeline;
    } else {
      TrainingJob resolver = s.job;
      resolver.schedule = se.place.resolver;
      config::LoweredJob lj;
      if (!config::lower_job(resolver, ctx, &lj, d) || !resolve_named_schedule(lj.pipeline, d)) {
        s.why = first_error(d);
        res.all_optimal = false;
        res.schedules.push_back(std::move(s));
        continue;
      }
      lowered = std::move(lj.pipeline);
    }
    int64_t fixed = 0;
    PipelineSpec view = synth_view(lowered, &fixed);
    int64_t untracked = fixed;
    if (ref_peak >= 0) {
      const int64_t view_peak = peak_of(verify(view, VerifyOptions{}));
      if (view_peak >= 0) untracked = ref_peak - view_peak;
    }
    // Below what the search does not track, no order fits: a limit of 0 lets the search prove
    // it (a negative one would mean no limit).
    const int64_t limit = std::max<int64_t>(0, res.memory_bytes - untracked);
    s.synth_limit_bytes = limit;
    so.limit_bytes = limit;
    const std::string what = fmt::format("{} {}/{}", s.placement(), se.in_w, se.out_w);
    so.on_progress = [what](const std::string& line) { ProgressLine::set_detail(what + ": " + line); };
    ProgressLine::set_detail(fmt::format("searching {}", what));
    s.synth = synthesize(view, so);
    if (s.synth->status != SynthStatus::kOptimal) res.all_optimal = false;
    // A search stopped early still has its structural bound (work per rank, critical path).
    const double bound = std::max(s.synth->lower_bound_s, s.synth->structural_lower_bound_s);
    if (s.synth->status != SynthStatus::kInfeasible && (res.lower_bound_s < 0 || bound < res.lower_bound_s))
      res.lower_bound_s = bound;
    if (s.synth->has_schedule) s.search_objective_s = s.synth->best_s;
    if (!s.synth->has_schedule) {
      s.why = s.synth->status == SynthStatus::kInfeasible ? "no order fits the memory limit (proven)"
              : s.synth->message.empty()                  ? "the search stopped before finding an order"
                                                          : s.synth->message;
      res.schedules.push_back(std::move(s));
      continue;
    }
    s.job.schedule_actions = s.synth->actions;
    verify_row(s, ctx);
    if (s.ran && s.verified.prediction.need_bytes() > res.memory_bytes) {
      s.over_memory = true;
      s.why = fmt::format("its peak is above the {:.4g} GiB per rank the search was given",
                          static_cast<double>(res.memory_bytes) / double(int64_t{1} << 30));
    }
    res.schedules.push_back(std::move(s));
  }
  ProgressLine::set_detail("");
  for (size_t i = 0; i < res.schedules.size(); ++i) {
    const JobSchedule& s = res.schedules[i];
    if (!s.holds()) continue;
    int& best = s.synthesised ? res.best_synth : res.best_named;
    if (best < 0 || s.verified.prediction.step_s < res.schedules[best].verified.prediction.step_s)
      best = static_cast<int>(i);
  }
  return true;
}

std::string torchtitan_synth_toml(const std::string& config_text, const JobSchedule& s, const std::string& csv_path,
                                  std::string* why) {
  toml::table root;
  try {
    root = toml::parse(config_text);
  } catch (const toml::parse_error& e) {
    *why = fmt::format("the config no longer parses: {}", e.description());
    return "";
  }
  const toml::table* par = root["parallelism"].as_table();
  auto current = [&](const char* key) -> std::optional<int64_t> {
    if (!par) return std::nullopt;
    if (auto v = par->get_as<int64_t>(key)) return v->get();
    return std::nullopt;
  };
  const TrainingJob& j = s.job;
  const int64_t stages = int64_t{j.layout.pp} * j.stages_per_rank;
  std::vector<config::TomlKeyEdit> edits;
  bool keep_lps = false;
  if (auto lps = current("pipeline_parallel_layers_per_stage")) {
    int64_t layers = 0;
    for (int64_t b : j.stage_layers) layers += b;
    const int64_t eff = layers + j.input_weight + j.output_weight;
    keep_lps = *lps > 0 && (eff + *lps - 1) / *lps == stages;
    if (!keep_lps) edits.push_back({"pipeline_parallel_layers_per_stage", std::nullopt});
  }
  const bool single = s.torch_name == "1F1B" || s.torch_name == "GPipe";
  if (!keep_lps && j.stages_per_rank != (single ? 1 : 2)) {
    *why = fmt::format("{} with {} stages per rank needs pipeline_parallel_layers_per_stage, which the config does "
                       "not set to that count", s.torch_name, j.stages_per_rank);
    return "";
  }
  if (!par || !par->get("pipeline_parallel_schedule") ||
      par->get_as<std::string>("pipeline_parallel_schedule") == nullptr ||
      par->get_as<std::string>("pipeline_parallel_schedule")->get() != s.torch_name)
    edits.push_back({"pipeline_parallel_schedule", config::toml_string_literal(s.torch_name)});
  // A named schedule runs without a CSV; a synthesised order is the CSV torchtitan loads.
  edits.push_back({"pipeline_parallel_schedule_csv",
                   csv_path.empty() ? std::nullopt : std::optional<std::string>(config::toml_string_literal(csv_path))});
  // The split's weights: written only where they differ from what the config gives (torchtitan's
  // default for each is 1).
  if (current("pipeline_parallel_first_stage_less_layers").value_or(1) != j.input_weight)
    edits.push_back({"pipeline_parallel_first_stage_less_layers", std::to_string(j.input_weight)});
  if (current("pipeline_parallel_last_stage_less_layers").value_or(1) != j.output_weight)
    edits.push_back({"pipeline_parallel_last_stage_less_layers", std::to_string(j.output_weight)});
  auto out = config::edit_toml_table(config_text, "parallelism", edits, why);
  return out ? *out : "";
}

}  // namespace sc::cli
